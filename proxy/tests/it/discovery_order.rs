//! Through a copy's regroup, `GET /apis` lists the copy's own groups ahead
//! of every other copy's (and of any group that is not kube-apiserver's
//! own), so kubectl resolves `foos`, `foo`, `Foo` and `fo` to the copy's
//! own Foos whatever the cluster's order. Legacy and aggregated discovery,
//! JSON and protobuf.

use crate::upstream_support::{send, sidecar_for, Answer};
use http::{Request, StatusCode};
use http_body_util::Full;
use regroup::rewrite::protobuf::test_wire::{cat, envelope, ld};
use serde_json::Value as Json;

/// Copy 2: its group sorts after copy 1's on the cluster.
const CONFIG: &str =
    "rules:\n  - from: samplecontroller.k8s.io\n    to: samplecontroller.team2.example.com\n";

const GROUPS: [&str; 5] = [
    "apps",
    "samplecontroller.k8s.io",
    "samplecontroller.team1.example.com",
    "samplecontroller.team2.example.com",
    "zz.example.org",
];

async fn get(answer: Answer, accept: &str) -> Vec<u8> {
    let (url, _) = sidecar_for(CONFIG, answer).await;
    let (status, _, body) = send(
        Request::get(format!("{url}/apis"))
            .header("accept", accept)
            .body(Full::default())
            .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    body.to_vec()
}

/// The app's view: the cluster's original group is shadowed (gone), copy
/// 2's own is `samplecontroller.k8s.io`, and it comes before copy 1's.
const WANT: [&str; 4] = [
    "apps",
    "samplecontroller.k8s.io",
    "samplecontroller.team1.example.com",
    "zz.example.org",
];

#[tokio::test]
async fn legacy_discovery_lists_the_copys_groups_first() {
    let groups: Vec<Json> = GROUPS
        .iter()
        .map(|g| {
            serde_json::json!({"name": g, "versions": [{"groupVersion": format!("{g}/v1"), "version": "v1"}],
                "preferredVersion": {"groupVersion": format!("{g}/v1"), "version": "v1"}})
        })
        .collect();
    let body = serde_json::json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": groups});
    let got = get(
        Answer::ok("application/json", body.to_string()),
        "application/json",
    )
    .await;
    let got: Json = serde_json::from_slice(&got).unwrap();
    let names: Vec<&str> = got["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, WANT);
    assert_eq!(
        got["groups"][1]["preferredVersion"]["groupVersion"],
        "samplecontroller.k8s.io/v1"
    );
}

#[tokio::test]
async fn aggregated_discovery_lists_the_copys_groups_first() {
    let items: Vec<Json> = GROUPS
        .iter()
        .map(|g| serde_json::json!({"metadata": {"name": g}, "versions": [{"version": "v1", "resources": []}]}))
        .collect();
    let body = serde_json::json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2",
        "metadata": {}, "items": items});
    let ctype = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    let got = get(
        Answer {
            status: 200,
            headers: vec![("content-type", ctype.to_owned())],
            body: body.to_string().into(),
        },
        &format!("{ctype},application/json"),
    )
    .await;
    let got: Json = serde_json::from_slice(&got).unwrap();
    let names: Vec<&str> = got["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["metadata"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, WANT);
}

#[tokio::test]
async fn protobuf_legacy_discovery_lists_the_copys_groups_first() {
    // APIGroupList {1 groups: APIGroup {1 name}}.
    let list = |names: &[&str]| {
        let groups: Vec<Vec<u8>> = names.iter().map(|g| ld(1, ld(1, g))).collect();
        envelope("v1", "APIGroupList", &cat(&groups))
    };
    let got = get(
        Answer::ok("application/vnd.kubernetes.protobuf", list(&GROUPS)),
        "application/vnd.kubernetes.protobuf",
    )
    .await;
    assert_eq!(got, list(&WANT));
}
