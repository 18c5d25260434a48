//! regroup on bytes captured from a real kube-apiserver v1.36.2
//! (`testdata/kube-1.36`, described in its `README.md`): a watch-list of
//! ClusterRoles in protobuf and JSON, an empty watch-list (its bookmark
//! alone), an empty metadata-only list (`"items": null`) and discovery of
//! `/apis` (aggregated v2 and legacy).
//!
//! The capture holds two ClusterRoles labelled `regroup-capture=1`:
//! `team1-reader` and `team2-reader`. With `names: {prefix: team1-}` the
//! first is this copy's `reader` and the second another copy's, which the
//! app must never see. Both name their CRD group in `rules[].apiGroups`.

use crate::common::{fixtures_of, names_engine};
use crate::upstream_support::{send, sidecar_for, Answer};
use http::{Request, StatusCode};
use http_body_util::Full;
use regroup::kube::Wire;
use regroup::rewrite::framing::Framing;
use regroup::rewrite::protobuf::test_wire::{ld, vi};
use regroup::rewrite::{Context, Engine};
use regroup_config::Direction::{ToApp, ToCluster};
use serde_json::Value as Json;

const APP_GROUP: &str = "samplecontroller.k8s.io";
const CLUSTER_GROUP: &str = "samplecontroller.team1.example.com";
const END: &str = "k8s.io/initial-events-end";

/// The configuration of the brief: one rule, this copy's names prefixed.
const CONFIG: &str = "rules:\n  - from: samplecontroller.k8s.io\n    to: samplecontroller.team1.example.com\nnames:\n  prefix: team1-\n";

fn engine() -> Engine {
    names_engine("  prefix: team1-\n")
}

const CLUSTERROLE: Context<'static> = Context {
    hint: None,
    addressed: Some(("rbac.authorization.k8s.io", "ClusterRole")),
};

const VWC: Context<'static> = Context {
    hint: None,
    addressed: Some((
        "admissionregistration.k8s.io",
        "ValidatingWebhookConfiguration",
    )),
};

const FOO: Context<'static> = Context {
    hint: None,
    addressed: Some((APP_GROUP, "Foo")),
};

fn capture(case: &str) -> Vec<u8> {
    let p = fixtures_of("kube-1.36").join(case).join("response.body");
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

// ---------------------------------------------------------------------
// A minimal protobuf reader, enough to take the captured frames apart and
// put them back together with `test_wire`: every field kube-apiserver
// sent in these frames is a varint or length-delimited.

#[derive(Clone, Debug, PartialEq)]
enum Value {
    Varint(u64),
    Bytes(Vec<u8>),
}

fn varint(b: &[u8], i: &mut usize) -> u64 {
    let (mut v, mut shift) = (0u64, 0);
    loop {
        let c = b[*i];
        *i += 1;
        v |= u64::from(c & 0x7f) << shift;
        shift += 7;
        if c < 0x80 {
            return v;
        }
    }
}

fn fields(b: &[u8]) -> Vec<(u32, Value)> {
    let (mut i, mut out) = (0, Vec::new());
    while i < b.len() {
        let key = varint(b, &mut i);
        let n = (key >> 3) as u32;
        match key & 7 {
            0 => out.push((n, Value::Varint(varint(b, &mut i)))),
            2 => {
                let len = varint(b, &mut i) as usize;
                out.push((n, Value::Bytes(b[i..i + len].to_vec())));
                i += len;
            }
            w => panic!("wire type {w} in a captured frame"),
        }
    }
    out
}

/// Encodes `fields` again, in their order (canonical varints, as
/// kube-apiserver writes them).
fn encode(fs: &[(u32, Value)]) -> Vec<u8> {
    fs.iter()
        .flat_map(|(n, v)| match v {
            Value::Varint(x) => vi(*n, *x),
            Value::Bytes(b) => ld(*n, b),
        })
        .collect()
}

fn bytes_of(fs: &[(u32, Value)], n: u32) -> Vec<u8> {
    match fs.iter().find(|(f, _)| *f == n) {
        Some((_, Value::Bytes(b))) => b.clone(),
        other => panic!("field {n}: {other:?}"),
    }
}

/// Applies `f` to the bytes of every field `n`.
fn map_field(fs: &[(u32, Value)], n: u32, f: &dyn Fn(&[u8]) -> Vec<u8>) -> Vec<(u32, Value)> {
    fs.iter()
        .map(|(k, v)| match v {
            Value::Bytes(b) if *k == n => (*k, Value::Bytes(f(b))),
            _ => (*k, v.clone()),
        })
        .collect()
}

/// The frames of a protobuf watch body: 4-byte big-endian length, then a
/// raw `WatchEvent` {1 type, 2 object {1 raw}}.
fn pb_frames(body: &[u8]) -> Vec<Vec<u8>> {
    let (mut rest, mut out) = (body, Vec::new());
    while !rest.is_empty() {
        let n = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        out.push(rest[4..4 + n].to_vec());
        rest = &rest[4 + n..];
    }
    out
}

fn pb_frame(content: &[u8]) -> Vec<u8> {
    let mut out = (content.len() as u32).to_be_bytes().to_vec();
    out.extend_from_slice(content);
    out
}

fn pb_type(event: &[u8]) -> String {
    String::from_utf8(bytes_of(&fields(event), 1)).unwrap()
}

/// The enveloped object of a `WatchEvent`: `k8s\0` + `Unknown` {1
/// typeMeta, 2 raw, 3 contentEncoding, 4 contentType}.
fn pb_unknown(event: &[u8]) -> Vec<(u32, Value)> {
    let raw = bytes_of(&fields(&bytes_of(&fields(event), 2)), 1);
    assert_eq!(&raw[..4], b"k8s\0");
    fields(&raw[4..])
}

/// The object's `ObjectMeta` (field 1 of the kind's message).
fn pb_meta(event: &[u8]) -> Vec<(u32, Value)> {
    fields(&bytes_of(&fields(&bytes_of(&pb_unknown(event), 2)), 1))
}

/// The event `event` (a raw `WatchEvent`) with its ClusterRole's
/// `metadata.name` (ObjectMeta 1) and every `rules[].apiGroups` entry
/// (ClusterRole 2 → PolicyRule 2) passed through `name` and `group`,
/// every other byte as it was.
fn pb_edit_clusterrole(
    event: &[u8],
    name: &dyn Fn(&[u8]) -> Vec<u8>,
    group: &dyn Fn(&[u8]) -> Vec<u8>,
) -> Vec<u8> {
    let object = |o: &[u8]| {
        let o = map_field(&fields(o), 1, &|m| encode(&map_field(&fields(m), 1, name)));
        encode(&map_field(&o, 2, &|r| {
            encode(&map_field(&fields(r), 2, group))
        }))
    };
    let raw = |r: &[u8]| {
        let mut out = b"k8s\0".to_vec();
        out.extend(encode(&map_field(&fields(&r[4..]), 2, &object)));
        out
    };
    let obj = |o: &[u8]| encode(&map_field(&fields(o), 1, &raw));
    encode(&map_field(&fields(event), 2, &obj))
}

fn rename(from: &'static str, to: &'static str) -> impl Fn(&[u8]) -> Vec<u8> {
    move |b: &[u8]| {
        if b == from.as_bytes() {
            to.as_bytes().to_vec()
        } else {
            b.to_vec()
        }
    }
}

/// What the app sees of one watch frame's content: `None` when hidden,
/// else the content renamed (or as it was).
fn to_app(e: &Engine, framing: Framing, cx: Context, event: &[u8]) -> Option<Vec<u8>> {
    if e.hides_event(ToApp, framing, cx, event).unwrap() {
        return None;
    }
    Some(
        e.watch_event(ToApp, framing, cx, event)
            .unwrap()
            .unwrap_or_else(|| event.to_vec()),
    )
}

// ---------------------------------------------------------------------
// Watch-lists.

#[test]
fn the_real_protobuf_watch_list_shows_this_copys_clusterrole_renamed_and_keeps_the_bookmark() {
    let e = engine();
    let body = capture("001-watchlist-clusterroles-protobuf");
    let frames = pb_frames(&body);
    let types: Vec<String> = frames.iter().map(|f| pb_type(f)).collect();
    assert_eq!(
        types,
        ["ADDED", "ADDED", "BOOKMARK"],
        "the capture's frames"
    );
    let names: Vec<Vec<u8>> = frames.iter().map(|f| bytes_of(&pb_meta(f), 1)).collect();
    assert_eq!(
        names,
        [&b"team1-reader"[..], b"team2-reader", b""],
        "the bookmark's ObjectMeta carries an empty name field"
    );

    let app: Vec<Option<Vec<u8>>> = frames
        .iter()
        .map(|f| to_app(&e, Framing::LengthPrefixed, CLUSTERROLE, f))
        .collect();

    // The reader above takes a frame apart and puts it back byte for byte.
    let same = |b: &[u8]| b.to_vec();
    for f in &frames {
        assert_eq!(pb_edit_clusterrole(f, &same, &same), *f);
    }

    // team1-reader: this copy's `reader`, its rule naming the app's group;
    // not one other byte changed.
    let want = pb_edit_clusterrole(
        &frames[0],
        &rename("team1-reader", "reader"),
        &rename(CLUSTER_GROUP, APP_GROUP),
    );
    assert_eq!(app[0].as_deref(), Some(&want[..]), "team1's ADDED");
    assert_eq!(bytes_of(&pb_meta(&want), 1), b"reader");
    // And what the app would send back is the cluster's again.
    let back = e
        .watch_event(ToCluster, Framing::LengthPrefixed, CLUSTERROLE, &want)
        .unwrap()
        .unwrap_or(want.clone());
    assert_eq!(back, frames[0], "team1's ADDED back to the cluster");

    // team2-reader: another copy's, hidden.
    assert_eq!(app[1], None, "team2's ADDED is hidden");

    // The bookmark: kept, byte for byte.
    assert_eq!(app[2].as_deref(), Some(&frames[2][..]), "the BOOKMARK");
    let meta = pb_meta(&frames[2]);
    let annotation = bytes_of(&meta, 12);
    assert_eq!(
        fields(&annotation),
        [
            (1, Value::Bytes(END.into())),
            (2, Value::Bytes(b"true".to_vec()))
        ]
    );

    // The whole stream renamed frame by frame (the codec alone hides
    // nothing): the same frames the engine gave one by one.
    let stream = e
        .proto(ToApp)
        .rewrite_watch_stream(&body, CLUSTERROLE.addressed)
        .unwrap()
        .expect("team1's frame renamed");
    let per_frame: Vec<u8> = frames
        .iter()
        .flat_map(|f| {
            pb_frame(
                &e.watch_event(ToApp, Framing::LengthPrefixed, CLUSTERROLE, f)
                    .unwrap()
                    .unwrap_or_else(|| f.clone()),
            )
        })
        .collect();
    assert_eq!(stream, per_frame);
}

#[test]
fn the_real_json_watch_list_shows_this_copys_clusterrole_renamed_and_keeps_the_bookmarks() {
    let e = engine();
    let body = capture("002-watchlist-clusterroles-json");
    let text = std::str::from_utf8(&body).unwrap();
    assert!(text.ends_with('\n'));
    let lines: Vec<&str> = text.lines().collect();
    let events: Vec<Json> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let types: Vec<&str> = events.iter().map(|v| v["type"].as_str().unwrap()).collect();
    // The server's periodic bookmark came too, before the timeout.
    assert_eq!(types, ["ADDED", "ADDED", "BOOKMARK", "BOOKMARK"]);
    assert_eq!(events[2]["object"]["metadata"]["annotations"][END], "true");
    assert!(events[2]["object"]["metadata"].get("name").is_none());
    assert_eq!(events[2]["object"]["rules"], Json::Null);
    assert!(events[3]["object"]["metadata"].get("annotations").is_none());

    let app: Vec<Option<Vec<u8>>> = lines
        .iter()
        .map(|l| to_app(&e, Framing::Lines, CLUSTERROLE, l.as_bytes()))
        .collect();
    let want = lines[0]
        .replace("\"team1-reader\"", "\"reader\"")
        .replace(CLUSTER_GROUP, APP_GROUP);
    assert_ne!(want, lines[0]);
    assert_eq!(
        app[0].as_deref().map(String::from_utf8_lossy),
        Some(want.as_str().into()),
        "team1's ADDED"
    );
    assert_eq!(app[1], None, "team2's ADDED is hidden");
    for i in [2, 3] {
        assert_eq!(
            app[i].as_deref(),
            Some(lines[i].as_bytes()),
            "BOOKMARK {i} kept byte for byte"
        );
    }
    let back = e
        .watch_event(ToCluster, Framing::Lines, CLUSTERROLE, want.as_bytes())
        .unwrap()
        .unwrap();
    assert_eq!(
        back,
        lines[0].as_bytes(),
        "team1's ADDED back to the cluster"
    );
}

#[test]
fn the_real_bookmark_only_watch_list_yields_exactly_the_bookmark() {
    let e = engine();
    let body = capture("003-watchlist-validatingwebhookconfigurations-empty-protobuf");
    let frames = pb_frames(&body);
    assert_eq!(frames.len(), 1);
    assert_eq!(pb_type(&frames[0]), "BOOKMARK");
    assert_eq!(
        bytes_of(&pb_meta(&frames[0]), 1),
        b"",
        "an empty name field"
    );
    let app: Vec<u8> = frames
        .iter()
        .filter_map(|f| to_app(&e, Framing::LengthPrefixed, VWC, f))
        .flat_map(|f| pb_frame(&f))
        .collect();
    assert_eq!(app, body);
    let stream = e
        .proto(ToApp)
        .rewrite_watch_stream(&body, VWC.addressed)
        .unwrap();
    assert!(stream.is_none() || stream.as_deref() == Some(&body[..]));
}

/// The real watch-list bodies through a sidecar (`regroup serve`'s path):
/// the app gets this copy's ClusterRole renamed and the bookmarks, exactly.
#[tokio::test]
async fn the_real_watch_lists_through_the_sidecar() {
    let e = engine();
    let query = "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=3&labelSelector=regroup-capture%3D1";
    let cases: [(&str, &'static str, &str); 3] = [
        (
            "001-watchlist-clusterroles-protobuf",
            "application/vnd.kubernetes.protobuf;stream=watch",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        ),
        (
            "002-watchlist-clusterroles-json",
            "application/json",
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        ),
        (
            "003-watchlist-validatingwebhookconfigurations-empty-protobuf",
            "application/vnd.kubernetes.protobuf;stream=watch",
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
        ),
    ];
    for (case, ctype, path) in cases {
        let body = capture(case);
        let protobuf = ctype.contains("protobuf");
        let cx = if path.contains("clusterroles") {
            CLUSTERROLE
        } else {
            VWC
        };
        // What the app must get: each frame through the engine, hidden
        // ones left out.
        let want: Vec<u8> = if protobuf {
            pb_frames(&body)
                .iter()
                .filter_map(|f| to_app(&e, Framing::LengthPrefixed, cx, f))
                .flat_map(|f| pb_frame(&f))
                .collect()
        } else {
            std::str::from_utf8(&body)
                .unwrap()
                .lines()
                .filter_map(|l| to_app(&e, Framing::Lines, cx, l.as_bytes()))
                .flat_map(|mut l| {
                    l.push(b'\n');
                    l
                })
                .collect()
        };
        let (url, _) = sidecar_for(CONFIG, Answer::ok(ctype, body.clone())).await;
        let accept = if protobuf {
            "application/vnd.kubernetes.protobuf;type=watch"
        } else {
            "application/json"
        };
        let (status, _, got) = send(
            Request::get(format!("{url}{path}?{query}"))
                .header("accept", accept)
                .body(Full::default())
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{case}");
        assert_eq!(
            String::from_utf8_lossy(&got),
            String::from_utf8_lossy(&want),
            "{case}"
        );
        let text = String::from_utf8_lossy(&got);
        assert!(!text.contains("team2-reader"), "{case}");
        assert!(!text.contains("team1-reader"), "{case}");
        assert!(text.contains(END), "{case}");
    }
}

// ---------------------------------------------------------------------
// Empty lists.

#[test]
fn the_real_items_null_metadata_list_reaches_the_app_with_its_null() {
    let e = engine();
    let list = capture("004-list-foos-metadata-empty-json");
    let v: Json = serde_json::from_slice(&list).unwrap();
    assert_eq!(v["kind"], "PartialObjectMetadataList");
    assert_eq!(v["items"], Json::Null);
    assert!(std::str::from_utf8(&list)
        .unwrap()
        .contains(r#""items":null"#));
    for cx in [FOO, Context::default()] {
        let app = e
            .body(ToApp, Wire::Json, cx, &list)
            .expect("renamed without error")
            .unwrap_or_else(|| list.clone());
        // Nothing in it names a group: the bytes are the server's.
        assert_eq!(app, list);
    }
    // The same list read as the engine's streaming list reader does.
    let mut s =
        regroup::rewrite::list_stream::ListStream::new(Some((APP_GROUP.into(), "Foo")), usize::MAX);
    let mut out = e.list_feed(ToApp, &mut s, &list).unwrap();
    out.extend(e.list_finish(ToApp, s).unwrap());
    assert_eq!(out, list, "streamed");
}

#[test]
fn the_real_empty_typed_list_has_empty_items_and_is_renamed() {
    let e = engine();
    let list = capture("005-list-foos-empty-json");
    let text = std::str::from_utf8(&list).unwrap();
    assert!(text.contains(r#""items":[]"#), "{text}");
    let app = e
        .body(ToApp, Wire::Json, FOO, &list)
        .unwrap()
        .expect("apiVersion renamed");
    assert_eq!(
        String::from_utf8(app).unwrap(),
        text.replace(CLUSTER_GROUP, APP_GROUP)
    );
}

// ---------------------------------------------------------------------
// Discovery.

fn group_names(doc: &[u8], aggregated: bool) -> Vec<String> {
    let v: Json = serde_json::from_slice(doc).unwrap();
    let (array, ptr) = if aggregated {
        ("items", "/metadata/name")
    } else {
        ("groups", "/name")
    };
    v[array]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g.pointer(ptr).unwrap().as_str().unwrap().to_owned())
        .collect()
}

fn entries(doc: &[u8], aggregated: bool) -> Vec<Json> {
    let v: Json = serde_json::from_slice(doc).unwrap();
    v[if aggregated { "items" } else { "groups" }]
        .as_array()
        .unwrap()
        .clone()
}

#[test]
fn real_discovery_lists_the_apps_group_before_other_groups_and_builtins_in_place() {
    let e = engine();
    for (case, aggregated) in [
        ("006-discovery-apis-aggregated-v2-json", true),
        ("007-discovery-apis-json", false),
    ] {
        let cluster = capture(case);
        let before = group_names(&cluster, aggregated);
        // The capture: the CRD's group last, after a group of another CRD
        // (`example.com`) that was on the cluster.
        let ours = before.iter().position(|g| g == CLUSTER_GROUP).unwrap();
        let other = before.iter().position(|g| g == "example.com").unwrap();
        assert!(other < ours, "{case}: {before:?}");

        let renamed = e
            .body(ToApp, Wire::Json, Context::default(), &cluster)
            .unwrap()
            .expect("the group renamed");
        let renamed_names = group_names(&renamed, aggregated);
        let mut want_renamed = before.clone();
        want_renamed[ours] = APP_GROUP.into();
        assert_eq!(renamed_names, want_renamed, "{case}: renamed in place");

        let app = regroup::rewrite::discovery_order::json(e.map(), &renamed)
            .unwrap()
            .expect("reordered");
        let after = group_names(&app, aggregated);
        // Every built-in group keeps its position.
        for (i, g) in before.iter().enumerate() {
            if regroup_config::builtin::is_builtin(g) {
                assert_eq!(after[i], *g, "{case}: built-in {g} at {i}");
            }
        }
        // The app's group comes before every other non-built-in group.
        let first_other = after
            .iter()
            .position(|g| !regroup_config::builtin::is_builtin(g) && g != APP_GROUP)
            .unwrap();
        let at = after.iter().position(|g| g == APP_GROUP).unwrap();
        assert!(at < first_other, "{case}: {after:?}");
        // Exactly: the app's group moved to just before `example.com`.
        let mut want = want_renamed.clone();
        let g = want.remove(ours);
        want.insert(other, g);
        assert_eq!(after, want, "{case}");
        // Entries are moved as they are.
        let mut a = entries(&app, aggregated);
        let mut r = entries(&renamed, aggregated);
        let key = |j: &Json| j.to_string();
        a.sort_by_key(key);
        r.sort_by_key(key);
        assert_eq!(a, r, "{case}: the same entries");
        assert_eq!(app.len(), renamed.len(), "{case}");
    }
}
