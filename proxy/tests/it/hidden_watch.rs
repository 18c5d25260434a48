//! A shadowed group's CRD never shows through a watch: the cluster's own
//! `foos.samplecontroller.k8s.io` (its group now means the renamed one) is
//! dropped from the stream, the renamed CRD comes through in the app's
//! names, and the stream's other events are untouched.

use crate::common;
use crate::upstream_support;

use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::Value as Json;
use upstream_support::{send, sidecar, Answer};

fn crd_event(kind: &str, group: &str) -> String {
    format!(
        r#"{{"type":"{kind}","object":{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"foos.{group}","resourceVersion":"1"}},"spec":{{"group":"{group}","names":{{"plural":"foos","kind":"Foo"}},"scope":"Namespaced"}}}}}}"#
    )
}

#[tokio::test]
async fn a_shadowed_crd_is_dropped_from_a_watch() {
    let stream = [
        crd_event("ADDED", "samplecontroller.k8s.io"),
        crd_event("ADDED", "samplecontroller.team1.example.com"),
        crd_event("MODIFIED", "samplecontroller.k8s.io"),
        crd_event("ADDED", "other.example.org"),
    ]
    .map(|l| l + "\n")
    .concat();
    let (url, _) = sidecar(
        &common::fixture_map(),
        Answer::ok("application/json", stream),
    )
    .await;
    let (status, _, body) = send(
        Request::get(format!(
            "{url}/apis/apiextensions.k8s.io/v1/customresourcedefinitions?watch=true"
        ))
        .body(Full::default())
        .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let events: Vec<Json> = body
        .split(|b| *b == b'\n')
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_slice(l).unwrap())
        .collect();
    let names: Vec<(&str, &str)> = events
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["name"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        names,
        [
            ("ADDED", "foos.samplecontroller.k8s.io"),
            ("ADDED", "foos.other.example.org"),
        ]
    );
    assert_eq!(
        events[0]["object"]["spec"]["group"],
        "samplecontroller.k8s.io"
    );
}
