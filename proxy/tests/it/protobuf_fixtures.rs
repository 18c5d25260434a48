//! The protobuf rewriter on real kube-apiserver bytes (`testdata/kube-1.24`):
//! every protobuf response, watch stream and request body captured.
//!
//! - Renaming the `renamed` world's bytes for the app and back for the
//!   cluster gives back exactly the captured bytes (and the `orig` world's
//!   the other way round).
//! - Decoded with DynamicMessage, the renamed world's bodies renamed for the
//!   app equal the `orig` world's (and orig's requests renamed for the
//!   cluster equal renamed's), once volatile fields and the world's own
//!   name are masked: every group-bearing field is renamed and nothing else
//!   changes.
//! - Watch streams are renamed frame by frame, fed in the captured HTTP
//!   chunks, each frame boundary kept.

use crate::common;
use crate::protobuf_support;

use common::{case_names, first_difference, fixture_map, fixtures, normalize_docs, Case};
use protobuf_support::{envelope_json, frame_json, frames, Naive};
use regroup::rewrite::protobuf::WatchStream;
use regroup::rewrite::{Catalog, ProtoRewriter};
use regroup_config::Direction;
use serde_json::Value as Json;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Shape {
    /// An enveloped object.
    Body,
    /// Length-prefixed watch frames.
    Watch,
}

struct Capture {
    /// `world/case (response|request)`.
    name: String,
    case: String,
    shape: Shape,
    bytes: Vec<u8>,
    /// The captured HTTP chunk sizes (responses).
    chunks: Vec<usize>,
    /// The group and kind the request addressed (metadata-only answers).
    addressed: Option<(&'static str, &'static str)>,
}

/// The kind a request path addresses, when its objects' names carry a
/// group (as in catalog_fixtures.rs).
fn addressed(path: &str) -> Option<(&'static str, &'static str)> {
    let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
    match parts.as_slice() {
        ["apis", "apiextensions.k8s.io", _, resource, ..] => {
            Catalog::kind_for_resource("apiextensions.k8s.io", resource)
                .map(|k| ("apiextensions.k8s.io", k))
        }
        ["apis", "apiregistration.k8s.io", _, resource, ..] => {
            Catalog::kind_for_resource("apiregistration.k8s.io", resource)
                .map(|k| ("apiregistration.k8s.io", k))
        }
        _ => None,
    }
}

fn chunk_sizes(case: &Case) -> Vec<usize> {
    case.exchange
        .get("transfer")
        .and_then(|t| t.get("chunks"))
        .and_then(Json::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|c| c.get("size").or(Some(c)).and_then(Json::as_u64))
                .map(|n| n as usize)
                .collect()
        })
        .unwrap_or_default()
}

fn is_proto(content_type: &str) -> bool {
    content_type.starts_with("application/vnd.kubernetes.protobuf")
}

/// Every protobuf body captured in `world`.
fn captures(world: &str) -> Vec<Capture> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures().join(world))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    names.sort();
    let mut out = Vec::new();
    for name in names {
        let case = Case::load(world, &name);
        let path = case.exchange["path"].as_str().unwrap_or("").to_owned();
        let ct = case.response_type();
        if is_proto(&ct) && !case.response.is_empty() {
            let bytes = case.response_body();
            out.push(Capture {
                name: format!("{world}/{name} response"),
                case: name.clone(),
                shape: if ct.contains("stream=watch") {
                    Shape::Watch
                } else {
                    Shape::Body
                },
                bytes,
                chunks: if case.gzipped() {
                    vec![]
                } else {
                    chunk_sizes(&case)
                },
                addressed: addressed(&path),
            });
        }
        if is_proto(&case.request_type()) {
            if let Some(req) = &case.request {
                out.push(Capture {
                    name: format!("{world}/{name} request"),
                    case: name.clone(),
                    shape: Shape::Body,
                    bytes: req.clone(),
                    chunks: vec![],
                    addressed: None,
                });
            }
        }
    }
    out
}

fn rewrite(rw: &ProtoRewriter<'_>, c: &Capture, bytes: &[u8]) -> Option<Vec<u8>> {
    let r = match (c.shape, c.addressed) {
        (Shape::Body, Some((g, k))) => rw.rewrite_bytes_addressed(bytes, g, k),
        (Shape::Body, None) => rw.rewrite_bytes(bytes),
        (Shape::Watch, a) => rw.rewrite_watch_stream(bytes, a),
    };
    r.unwrap_or_else(|e| panic!("{}: {e}", c.name))
}

#[test]
fn every_protobuf_capture_is_covered() {
    let (orig, renamed, common) = (captures("orig"), captures("renamed"), captures("common"));
    assert_eq!(orig.len(), renamed.len(), "the worlds pair up");
    let watches = orig.iter().filter(|c| c.shape == Shape::Watch).count();
    let requests = orig.iter().filter(|c| c.name.ends_with("request")).count();
    // README: 12 protobuf watch streams over both worlds; protobuf request
    // bodies: ConfigMap (create, put), Role, SubjectAccessReview, DeleteOptions.
    assert_eq!(watches, 6);
    assert!(requests >= 6, "{requests} protobuf requests");
    assert!(orig.len() >= 80, "{} protobuf bodies in orig", orig.len());
    assert!(
        common.len() >= 5,
        "{} protobuf bodies in common",
        common.len()
    );
}

/// Renaming there and back gives back the captured bytes, for every body
/// whose groups are all on one side (the paired worlds).
#[test]
fn renaming_there_and_back_gives_back_the_captured_bytes() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let to_app = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let to_cluster = ProtoRewriter::new(&map, &catalog, Direction::ToCluster);
    let mut round_trips = 0;
    for (world, there, back) in [
        ("renamed", &to_app, &to_cluster),
        ("orig", &to_cluster, &to_app),
    ] {
        for c in captures(world) {
            let Some(out) = rewrite(there, &c, &c.bytes) else {
                assert!(
                    !there.may_contain_name(&c.bytes)
                        || !c.bytes.windows(6).any(|w| w == b".team1"),
                    "{}: names a renamed group but nothing was renamed",
                    c.name
                );
                continue;
            };
            assert_ne!(out, c.bytes, "{}", c.name);
            let again =
                rewrite(back, &c, &out).unwrap_or_else(|| panic!("{}: renamed back", c.name));
            assert!(again == c.bytes, "{}: round trip differs", c.name);
            round_trips += 1;
        }
    }
    assert!(round_trips > 100, "only {round_trips} bodies round-tripped");
}

/// The documents of a capture, decoded: one object, or the non-BOOKMARK
/// events of a watch stream (their number depends on timing).
fn decoded(c: &Capture, bytes: &[u8]) -> Vec<Json> {
    match c.shape {
        Shape::Body => vec![envelope_json(bytes)],
        Shape::Watch => frames(bytes)
            .into_iter()
            .map(frame_json)
            .filter(|e| e.get("type").and_then(Json::as_str) != Some("BOOKMARK"))
            .collect(),
    }
}

fn compare(dir: Direction) {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let rw = ProtoRewriter::new(&map, &catalog, dir);
    let (from, to) = match dir {
        Direction::ToApp => ("renamed", "orig"),
        Direction::ToCluster => ("orig", "renamed"),
    };
    let wanted = captures(to);
    let mut failures = Vec::new();
    let mut compared = 0;
    for c in captures(from) {
        let is_request = c.name.ends_with("request");
        let want = wanted
            .iter()
            .find(|w| {
                w.case == c.case
                    && w.name
                        .ends_with(if is_request { "request" } else { "response" })
            })
            .expect("paired capture");
        let out = rewrite(&rw, &c, &c.bytes).unwrap_or_else(|| c.bytes.clone());
        let mut got = decoded(&c, &out);
        let mut want_docs = decoded(want, &want.bytes);
        normalize_docs(&mut got, from, &c.case);
        normalize_docs(&mut want_docs, to, &c.case);
        compared += 1;
        if got != want_docs {
            failures.push(format!(
                "{}: {}",
                c.name,
                first_difference(&Json::from(got), &Json::from(want_docs), String::new())
                    .unwrap_or_else(|| "differ".into())
            ));
        }
    }
    assert!(compared > 80, "only {compared} captures compared");
    assert!(
        failures.is_empty(),
        "{} captures differ:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[test]
fn renamed_world_bodies_decode_as_orig_world_for_the_app() {
    compare(Direction::ToApp);
}

#[test]
fn orig_world_bodies_decode_as_renamed_world_for_the_cluster() {
    compare(Direction::ToCluster);
}

/// Without the rewrite, the worlds differ (the comparison isn't vacuous).
#[test]
fn worlds_differ_without_the_rewrite() {
    let orig = captures("orig");
    let mut differing = 0;
    for c in captures("renamed") {
        let o = orig
            .iter()
            .find(|o| o.name.replace("orig/", "") == c.name.replace("renamed/", ""))
            .unwrap();
        let mut a = decoded(&c, &c.bytes);
        let mut b = decoded(o, &o.bytes);
        normalize_docs(&mut a, "renamed", &c.case);
        normalize_docs(&mut b, "orig", &c.case);
        differing += usize::from(a != b);
    }
    assert!(differing > 40, "only {differing} pairs differ by group");
}

/// Watch streams fed in the chunks they arrived in: frames reassembled
/// across chunks, each renamed on its own, boundaries kept.
#[test]
fn watch_streams_are_renamed_frame_by_frame_as_they_arrive() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let mut streams = 0;
    let mut frames_renamed = 0;
    for c in captures("renamed")
        .into_iter()
        .filter(|c| c.shape == Shape::Watch)
    {
        assert_eq!(
            c.chunks.iter().sum::<usize>(),
            c.bytes.len(),
            "{}: chunks",
            c.name
        );
        let mut stream = WatchStream::new(c.addressed, 1 << 20);
        let mut out = Vec::new();
        let mut at = 0;
        for n in &c.chunks {
            out.extend(stream.feed(&rw, &c.bytes[at..at + n]).unwrap());
            at += n;
        }
        stream.finish().unwrap();
        let (input, output) = (frames(&c.bytes), frames(&out));
        assert_eq!(input.len(), output.len(), "{}: frame count", c.name);
        for (i, o) in input.iter().zip(&output) {
            let want = match c.addressed {
                Some((g, k)) => rw.rewrite_watch_frame_addressed(i, g, k),
                None => rw.rewrite_watch_frame(i),
            }
            .unwrap();
            match want {
                Some(w) => {
                    assert_eq!(&w, o, "{}", c.name);
                    frames_renamed += 1;
                }
                None => assert_eq!(i, o, "{}", c.name),
            }
        }
        // One byte at a time, too.
        let mut stream = WatchStream::new(c.addressed, 1 << 20);
        let mut bytewise = Vec::new();
        for b in c.bytes.chunks(1) {
            bytewise.extend(stream.feed(&rw, b).unwrap());
        }
        stream.finish().unwrap();
        assert_eq!(bytewise, out, "{}: byte by byte", c.name);
        streams += 1;
    }
    assert_eq!(streams, 6);
    assert!(frames_renamed > 20, "only {frames_renamed} frames renamed");
}

/// The shared (`common`) captures: discovery of both worlds at once. For the
/// app, the cluster's own `samplecontroller.k8s.io` is shadowed (dropped)
/// and `samplecontroller.team1.example.com` becomes it.
#[test]
fn common_discovery_drops_shadowed_groups_for_the_app() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let c = captures("common")
        .into_iter()
        .find(|c| c.case.starts_with("007-"))
        .unwrap();
    let before = envelope_json(&c.bytes);
    let names = |doc: &Json| -> Vec<String> {
        doc["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let before_names = names(&before);
    assert!(before_names.contains(&"samplecontroller.k8s.io".to_string()));
    assert!(before_names.contains(&"samplecontroller.team1.example.com".to_string()));
    let out = rewrite(&rw, &c, &c.bytes).expect("renamed");
    let after = envelope_json(&out);
    let after_names = names(&after);
    assert_eq!(
        after_names.len(),
        before_names.len() - 2,
        "two shadowed groups dropped"
    );
    assert_eq!(
        after_names
            .iter()
            .filter(|n| *n == "samplecontroller.k8s.io")
            .count(),
        1
    );
    assert!(!after_names.iter().any(|n| n.contains("team1")));
    // The same as the naive decode-rename-encode, decoded.
    let naive = Naive::new(&map, &catalog, Direction::ToApp).rewrite(&c.bytes);
    assert_eq!(envelope_json(&naive), after);
}

/// The rest of `common`: renamed for the app, decoded, equal to the naive
/// approach's result; bodies without a mapped name are left alone.
#[test]
fn common_captures_match_the_naive_rename() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    for dir in [Direction::ToApp, Direction::ToCluster] {
        let rw = ProtoRewriter::new(&map, &catalog, dir);
        let naive = Naive::new(&map, &catalog, dir);
        for c in captures("common") {
            let out = rewrite(&rw, &c, &c.bytes);
            let got = envelope_json(out.as_deref().unwrap_or(&c.bytes));
            assert_eq!(
                got,
                envelope_json(&naive.rewrite(&c.bytes)),
                "{} {dir:?}",
                c.name
            );
        }
    }
}

#[test]
fn case_list_matches_the_fixture_readme() {
    // The paired case list is shared with the JSON tests.
    assert!(case_names().len() > 250);
}

/// Just enough protobuf wire reading and writing to splice captured bodies
/// together: (number, value) of each length-delimited or varint field.
mod splice {
    pub fn varint(buf: &[u8], at: &mut usize) -> u64 {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = buf[*at];
            *at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                break;
            }
        }
        v
    }

    /// The fields of a message: (number, the whole field's bytes, the
    /// value's bytes for length-delimited ones).
    pub fn fields(buf: &[u8]) -> Vec<(u32, Vec<u8>, Vec<u8>)> {
        let mut out = Vec::new();
        let mut at = 0;
        while at < buf.len() {
            let start = at;
            let key = varint(buf, &mut at);
            let value = match key & 7 {
                0 => {
                    varint(buf, &mut at);
                    Vec::new()
                }
                2 => {
                    let n = varint(buf, &mut at) as usize;
                    at += n;
                    buf[at - n..at].to_vec()
                }
                w => panic!("wire type {w} not used here"),
            };
            out.push(((key >> 3) as u32, buf[start..at].to_vec(), value));
        }
        out
    }

    pub fn len_field(number: u32, value: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        let mut put = |mut v: u64| loop {
            let b = (v & 0x7f) as u8;
            v >>= 7;
            if v == 0 {
                out.push(b);
                break;
            }
            out.push(b | 0x80);
        };
        put(u64::from(number) << 3 | 2);
        put(value.len() as u64);
        out.extend_from_slice(value);
        out
    }

    /// An enveloped object's `raw` message.
    pub fn raw_of(envelope: &[u8]) -> Vec<u8> {
        fields(&envelope[4..])
            .into_iter()
            .find(|(n, _, _)| *n == 2)
            .unwrap()
            .2
    }

    /// `envelope` with its `raw` replaced.
    pub fn with_raw(envelope: &[u8], raw: &[u8]) -> Vec<u8> {
        let mut out = envelope[..4].to_vec();
        for (n, whole, _) in fields(&envelope[4..]) {
            if n == 2 {
                out.extend(len_field(2, raw));
            } else {
                out.extend(whole);
            }
        }
        out
    }

    /// A raw WatchEvent frame (no length prefix) of `envelope`.
    pub fn watch_frame(kind: &str, envelope: &[u8]) -> Vec<u8> {
        let mut f = len_field(1, kind.as_bytes());
        f.extend(len_field(2, &len_field(1, envelope)));
        f
    }
}

/// A typed protobuf list of a cluster that has both the renamed world's CRD
/// or APIService and the orig world's (a shadowed group's): the app sees
/// only the renamed one, under its own name, exactly the orig world's list.
#[test]
fn shadowed_crds_and_apiservices_are_dropped_from_protobuf_lists() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    for (case, items_field, addressed, want) in [
        (
            "117-list-crd-protobuf",
            2,
            None,
            "foos.samplecontroller.k8s.io",
        ),
        (
            "120-list-crd-poml-protobuf",
            2,
            Some(("apiextensions.k8s.io", "CustomResourceDefinition")),
            "foos.samplecontroller.k8s.io",
        ),
        (
            "172-list-apiservice-protobuf",
            2,
            None,
            "v1alpha1.wardle.example.com",
        ),
        (
            "175-list-apiservice-poml-protobuf",
            2,
            Some(("apiregistration.k8s.io", "APIService")),
            "v1alpha1.wardle.example.com",
        ),
    ] {
        let renamed = Case::load("renamed", case).response;
        let orig = Case::load("orig", case).response;
        let items = |env: &[u8]| -> Vec<Vec<u8>> {
            splice::fields(&splice::raw_of(env))
                .into_iter()
                .filter(|(n, _, _)| *n == items_field)
                .map(|(_, whole, _)| whole)
                .collect()
        };
        let theirs = items(&orig);
        assert_eq!(theirs.len(), 1, "{case}");
        // Theirs, ours, theirs: dropped first, last and around ours.
        let mut raw = Vec::new();
        let mut placed = false;
        for (n, whole, _) in splice::fields(&splice::raw_of(&renamed)) {
            if n == items_field && !placed {
                raw.extend(theirs[0].clone());
                raw.extend(whole);
                raw.extend(theirs[0].clone());
                placed = true;
            } else {
                raw.extend(whole);
            }
        }
        let body = splice::with_raw(&renamed, &raw);
        assert_eq!(
            envelope_json(&body)["items"].as_array().unwrap().len(),
            3,
            "{case}: the spliced list has both worlds' items"
        );
        let out = match addressed {
            Some((g, k)) => rw.rewrite_bytes_addressed(&body, g, k),
            None => rw.rewrite_bytes(&body),
        }
        .unwrap()
        .expect("renamed");
        let got = envelope_json(&out);
        let names: Vec<&str> = got["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, [want], "{case}");
        let mut got = vec![got];
        let mut wanted = vec![envelope_json(&orig)];
        normalize_docs(&mut got, "renamed", case);
        normalize_docs(&mut wanted, "orig", case);
        assert!(
            got == wanted,
            "{case}: {}",
            first_difference(&Json::from(got), &Json::from(wanted), String::new())
                .unwrap_or_default()
        );
        // The cluster's own list alone is left untouched.
        assert!(rw
            .rewrite_bytes(&renamed)
            .unwrap()
            .is_none_or(|r| envelope_json(&r)["items"].as_array().unwrap().len() == 1));
    }
}

/// Watch frames of a shadowed group's CRD or APIService are said to be
/// hidden, so the watch path can drop them; the renamed ones are not.
#[test]
fn protobuf_watch_frames_of_hidden_objects_are_said_to_be_hidden() {
    let map = fixture_map();
    let catalog = Catalog::new(&[]);
    let to_app = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let to_cluster = ProtoRewriter::new(&map, &catalog, Direction::ToCluster);
    for (case, addressed) in [
        ("037-get-crd-protobuf", None),
        (
            "040-get-crd-pom-protobuf",
            Some(("apiextensions.k8s.io", "CustomResourceDefinition")),
        ),
        ("096-get-apiservice-protobuf", None),
        (
            "099-get-apiservice-pom-protobuf",
            Some(("apiregistration.k8s.io", "APIService")),
        ),
    ] {
        for (world, hidden) in [("orig", true), ("renamed", false)] {
            let object = Case::load(world, case).response;
            let frame = splice::watch_frame("MODIFIED", &object);
            for bytes in [&frame, &object] {
                let says = match addressed {
                    Some((g, k)) => to_app.hides_addressed(bytes, g, k),
                    None => to_app.hides(bytes),
                }
                .unwrap();
                assert_eq!(says, hidden, "{world}/{case}");
            }
            // Toward the cluster, nothing is ever hidden.
            assert!(!to_cluster.hides(&frame).unwrap(), "{world}/{case}");
            // Renaming the frame still works as before.
            assert!(to_app.rewrite_watch_frame(&frame).is_ok());
        }
    }
    // A metadata-only frame without the addressed kind can't be told.
    let pom = Case::load("orig", "040-get-crd-pom-protobuf").response;
    assert!(!to_app.hides(&splice::watch_frame("ADDED", &pom)).unwrap());
}

/// The label selector fields of `core/proto` on kube-apiserver 1.24's
/// bytes: the captured Deployment's DeploymentSpec.selector (field 2)
/// decodes as a LabelSelector whose matchLabels are the template's labels.
#[test]
fn the_captured_deployment_selector_decodes_as_a_label_selector() {
    for world in ["orig", "renamed"] {
        let c = captures(world)
            .into_iter()
            .find(|c| c.case == "042-get-deployment-protobuf" && c.name.ends_with("response"))
            .expect("the 042 capture");
        let d = envelope_json(&c.bytes);
        let selector = &d["spec"]["selector"]["matchLabels"];
        let mut keys: Vec<&str> = selector
            .as_object()
            .unwrap_or_else(|| panic!("{world}: no matchLabels in {d}"))
            .keys()
            .map(String::as_str)
            .collect();
        keys.sort_unstable();
        assert_eq!(keys, ["app", "controller"], "{world}");
        assert_eq!(
            selector, &d["spec"]["template"]["metadata"]["labels"],
            "{world}"
        );
    }
}
