//! AdmissionReview and ConversionReview bodies, both ways, on the bytes
//! kube-apiserver v1.29 sent to a webhook and the answers it got
//! (`testdata/kube-1.29/webhooks`, copied byte for byte from the capture).
//!
//! The capture has two worlds running the same steps: `renamed` (group
//! `samplecontroller.team1.example.com`, what the cluster sends through
//! regroup) and `orig` (`samplecontroller.k8s.io`, what the app knows). A
//! review from the renamed world, renamed for the app, must read as the orig
//! world's; the orig world's answer, renamed for the cluster, as the renamed
//! world's. Everything else stays byte for byte, `uid` included.

use crate::common;

use base64::Engine as _;
use common::{case_names_of, first_difference, fixture_map, mask_world, Case};
use regroup::kube::Wire;
use regroup::rewrite::{Catalog, Context, Engine, RewriteError};
use regroup_config::Direction;
use serde_json::{json, Value as Json};

const WEBHOOKS: &str = "kube-1.29/webhooks";
const APP: &str = "samplecontroller.k8s.io";
const CLUSTER: &str = "samplecontroller.team1.example.com";

fn engine() -> Engine {
    Engine::new(fixture_map(), Catalog::new(&[]))
}

/// The webhook cases (a request kube-apiserver sent, and the answer).
fn review_cases(kind: &str) -> Vec<String> {
    let names: Vec<String> = case_names_of(WEBHOOKS)
        .into_iter()
        .filter(|n| n.contains(&format!("-webhook-{kind}")))
        .collect();
    assert!(names.len() >= 8, "only {} {kind} cases", names.len());
    names
}

fn b64(s: &str) -> Vec<u8> {
    base64::engine::general_purpose::STANDARD
        .decode(s)
        .expect("base64")
}

/// What differs between the worlds for reasons other than the group: uids,
/// times, resource versions (by key), the world's name (in every string);
/// the base64 patch is decoded so that it is compared as JSON.
fn normalize(v: &mut Json, world: &str) {
    match v {
        Json::Object(m) => {
            for (k, c) in m.iter_mut() {
                match k.as_str() {
                    "uid" | "creationTimestamp" | "time" | "resourceVersion" => {
                        *c = Json::String("<volatile>".into())
                    }
                    "patch" if c.is_string() => {
                        let mut p: Json =
                            serde_json::from_slice(&b64(c.as_str().unwrap())).expect("JSON Patch");
                        normalize(&mut p, world);
                        *c = p;
                    }
                    _ => normalize(c, world),
                }
            }
        }
        Json::Array(a) => a.iter_mut().for_each(|c| normalize(c, world)),
        Json::String(s) => *s = mask_world(s, world),
        _ => {}
    }
}

fn parse(bytes: &[u8]) -> Json {
    serde_json::from_slice(bytes).expect("a JSON review")
}

/// The byte oracle for the cluster's reviews: in the renamed world the
/// cluster's group occurs only where a group is referenced (the mutating
/// webhook's label value holds the app's group in both worlds, and stays),
/// so renaming for the app is exactly replacing it, every other byte kept.
fn replaced(bytes: &[u8], from: &str, to: &str) -> Vec<u8> {
    String::from_utf8(bytes.to_vec())
        .unwrap()
        .replace(from, to)
        .into_bytes()
}

fn requests_read_as_the_orig_world(kind: &str) -> usize {
    let e = engine();
    let mut failures = Vec::new();
    let names = review_cases(kind);
    for name in &names {
        let cluster = Case::load_of(WEBHOOKS, "renamed", name);
        let app = Case::load_of(WEBHOOKS, "orig", name);
        let sent = cluster.request.as_deref().expect("a request body");
        assert!(
            std::str::from_utf8(sent).unwrap().contains(CLUSTER),
            "{name}"
        );
        let got = e
            .body(Direction::ToApp, Wire::Json, Context::default(), sent)
            .unwrap_or_else(|err| panic!("{name}: {err}"))
            .unwrap_or_else(|| panic!("{name}: nothing renamed"));
        assert_eq!(
            String::from_utf8(got.clone()).unwrap(),
            String::from_utf8(replaced(sent, CLUSTER, APP)).unwrap(),
            "{name}: only the group's bytes change"
        );
        let (mut got, mut want) = (parse(&got), parse(app.request.as_deref().unwrap()));
        normalize(&mut got, "renamed");
        normalize(&mut want, "orig");
        if let Some(d) = first_difference(&got, &want, String::new()) {
            failures.push(format!("{name}: {d}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    names.len()
}

#[test]
fn admission_reviews_from_the_cluster_read_as_the_apps_own() {
    let n =
        requests_read_as_the_orig_world("mutating") + requests_read_as_the_orig_world("validating");
    assert_eq!(n, 20);
}

#[test]
fn conversion_reviews_from_the_cluster_read_as_the_apps_own() {
    assert_eq!(requests_read_as_the_orig_world("convert"), 18);
}

/// The app's group and kind of the reviewed object, from its request.
fn reviewed(app_request: &Json) -> Option<(String, String)> {
    let k = &app_request["request"]["kind"];
    Some((
        k["group"].as_str()?.to_owned(),
        k["kind"].as_str()?.to_owned(),
    ))
}

fn answers_read_as_the_renamed_world(kind: &str) -> usize {
    let e = engine();
    let mut failures = Vec::new();
    let mut renamed = 0;
    for name in review_cases(kind) {
        let cluster = Case::load_of(WEBHOOKS, "renamed", &name);
        let app = Case::load_of(WEBHOOKS, "orig", &name);
        let target = reviewed(&parse(app.request.as_deref().unwrap()));
        let cx = Context {
            addressed: target.as_ref().map(|(g, k)| (g.as_str(), k.as_str())),
            ..Context::default()
        };
        let answer = &app.response;
        let out = e
            .body(Direction::ToCluster, Wire::Json, cx, answer)
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        if out.is_some() {
            renamed += 1;
        }
        let mut got = parse(out.as_deref().unwrap_or(answer));
        let mut want = parse(&cluster.response);
        normalize(&mut got, "orig");
        normalize(&mut want, "renamed");
        if let Some(d) = first_difference(&got, &want, String::new()) {
            failures.push(format!("{name}: {d}"));
        }
        // The uid is the review's, byte for byte.
        let uid = parse(answer)["response"]["uid"]
            .as_str()
            .unwrap()
            .to_owned();
        let out = String::from_utf8(out.unwrap_or_else(|| answer.clone())).unwrap();
        assert!(out.contains(&format!("\"uid\":\"{uid}\"")), "{name}");
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    renamed
}

#[test]
fn mutating_answers_reach_the_cluster_with_its_names_inside_the_patch() {
    // CREATE and UPDATE carry a patch naming the group; DELETE does not.
    assert_eq!(answers_read_as_the_renamed_world("mutating"), 8);
}

#[test]
fn validating_answers_reach_the_cluster_with_its_names_in_warnings_and_status() {
    // Every answer has a warning or a refusal naming the group/version.
    assert_eq!(answers_read_as_the_renamed_world("validating"), 10);
}

#[test]
fn conversion_answers_and_failures_reach_the_cluster_with_its_names() {
    assert_eq!(answers_read_as_the_renamed_world("convert"), 18);
}

#[test]
fn the_patch_label_value_that_looks_like_a_group_stays() {
    let app = Case::load_of(WEBHOOKS, "orig", "075-webhook-mutating-v1-create");
    let cx = Context {
        addressed: Some((APP, "Foo")),
        ..Context::default()
    };
    let out = engine()
        .body(Direction::ToCluster, Wire::Json, cx, &app.response)
        .unwrap()
        .unwrap();
    let patch: Json =
        serde_json::from_slice(&b64(parse(&out)["response"]["patch"].as_str().unwrap())).unwrap();
    assert_eq!(
        patch[0]["value"][0]["apiVersion"],
        format!("{CLUSTER}/v1alpha1")
    );
    assert_eq!(
        patch[1]["path"],
        "/metadata/labels/regroup-fixtures~1mutated-by"
    );
    assert_eq!(patch[1]["value"], APP);
}

/// An answer built on the capture's (uid, shape) with a patch touching
/// `/apiVersion`, `/metadata/ownerReferences/0/apiVersion`, a label whose
/// value looks like a group, a `move` (no value), and audit annotations:
/// only the group-bearing values change, everything else keeps its bytes.
#[test]
fn a_json_patch_is_renamed_where_its_values_land() {
    let ops = json!([
        {"op": "replace", "path": "/apiVersion", "value": "samplecontroller.k8s.io/v1beta1"},
        {"op": "add", "path": "/metadata/ownerReferences/0/apiVersion",
         "value": "samplecontroller.k8s.io/v1alpha1"},
        {"op": "add", "path": "/metadata/ownerReferences/-",
         "value": {"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo", "name": "b", "uid": "u"}},
        {"op": "add", "path": "/metadata/labels/owner", "value": "samplecontroller.k8s.io"},
        {"op": "test", "path": "/spec/fooRef/apiVersion", "value": "samplecontroller.k8s.io/v1alpha1"},
        {"op": "move", "from": "/spec/a", "path": "/spec/b"}
    ]);
    let encode =
        |v: &Json| base64::engine::general_purpose::STANDARD.encode(serde_json::to_vec(v).unwrap());
    let answer = |patch: &str, warning: &str, ann: &str| {
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"90b081a3-9cd4-4060-866a-0942eb5de6d9","allowed":true,"auditAnnotations":{{"apiGroup":"{ann}"}},"warnings":["checked {warning}/v1alpha1, Kind=Foo"],"patchType":"JSONPatch","patch":"{patch}"}}}}"#
        )
    };
    let input = answer(&encode(&ops), APP, APP);
    let cx = Context {
        addressed: Some((APP, "Foo")),
        ..Context::default()
    };
    let out = engine()
        .body(Direction::ToCluster, Wire::Json, cx, input.as_bytes())
        .unwrap()
        .unwrap();
    let mut want_ops = ops.clone();
    want_ops[0]["value"] = json!("samplecontroller.team1.example.com/v1beta1");
    want_ops[1]["value"] = json!("samplecontroller.team1.example.com/v1alpha1");
    want_ops[2]["value"]["apiVersion"] = json!("samplecontroller.team1.example.com/v1alpha1");
    want_ops[4]["value"] = json!("samplecontroller.team1.example.com/v1alpha1");
    let out = String::from_utf8(out).unwrap();
    let got_patch = parse(out.as_bytes())["response"]["patch"]
        .as_str()
        .unwrap()
        .to_owned();
    assert_eq!(parse(&b64(&got_patch)), want_ops);
    // Every other byte as the app wrote it: audit annotations untouched.
    assert_eq!(out, answer(&got_patch, CLUSTER, APP));
    // And back: the cluster's answer reads as the app's.
    let back = engine()
        .body(Direction::ToApp, Wire::Json, cx, out.as_bytes())
        .unwrap()
        .unwrap();
    let back = parse(&back);
    assert_eq!(
        parse(&b64(back["response"]["patch"].as_str().unwrap())),
        ops
    );
}

#[test]
fn an_answer_with_nothing_to_rename_keeps_its_bytes() {
    // A DELETE's answer: no patch, no group.
    let app = Case::load_of(WEBHOOKS, "orig", "089-webhook-mutating-v1-delete");
    let cx = Context {
        addressed: Some((APP, "Foo")),
        ..Context::default()
    };
    assert_eq!(
        engine()
            .body(Direction::ToCluster, Wire::Json, cx, &app.response)
            .unwrap(),
        None
    );
    // A patch that names no group is not re-encoded.
    let patch = base64::engine::general_purpose::STANDARD
        .encode(br#"[{"op":"add","path":"/metadata/labels/a","value":"b"}]"#);
    let body = format!(
        r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"1","allowed":true,"patchType":"JSONPatch","patch":"{patch}"}}}}"#
    );
    assert_eq!(
        engine()
            .body(Direction::ToCluster, Wire::Json, cx, body.as_bytes())
            .unwrap(),
        None
    );
}

#[test]
fn a_patch_that_is_not_base64_json_is_refused() {
    let cx = Context {
        addressed: Some((APP, "Foo")),
        ..Context::default()
    };
    // Not base64; base64 of text naming the group that is not a JSON Patch.
    let named = base64::engine::general_purpose::STANDARD.encode("[samplecontroller.k8s.io/v1");
    for patch in ["not base64!", named.as_str()] {
        let body = format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"1","allowed":true,"patchType":"JSONPatch","patch":"{patch}"}}}}"#
        );
        let err = engine()
            .body(Direction::ToCluster, Wire::Json, cx, body.as_bytes())
            .unwrap_err();
        assert!(matches!(err, RewriteError::Malformed(_)), "{patch}: {err}");
    }
}
