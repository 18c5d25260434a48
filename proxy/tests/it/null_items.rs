//! A real kube-apiserver answers an empty list with `"items": null` where
//! the list is built without its slice (a metadata-only list, seen on
//! kube-apiserver 1.36.2 for `PartialObjectMetadataList`), and a Table with
//! `"rows": null`. Every list reader regroup has takes `null` as no items:
//! the answer reaches the client renamed, its `null` kept, whatever kind
//! and whether or not `names:` makes the items walked.

use crate::upstream_support::{send, sidecar_for, Answer};
use http::{Request, StatusCode};
use http_body_util::Full;
use regroup::rewrite::protobuf::test_wire::{cat, envelope, ld};
use serde_json::Value as Json;

const CONFIG: &str =
    "rules:\n  - from: samplecontroller.k8s.io\n    to: samplecontroller.team1.example.com\n";

async fn get(answer: Answer, path: &str, accept: &str) -> (StatusCode, Vec<u8>) {
    let (url, _) = sidecar_for(CONFIG, answer).await;
    let (status, _, body) = send(
        Request::get(format!("{url}{path}"))
            .header("accept", accept)
            .body(Full::default())
            .unwrap(),
    )
    .await;
    (status, body.to_vec())
}

const FOOS: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos";
const METADATA: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";
const TABLE: &str = "application/json;as=Table;g=meta.k8s.io;v=v1";

/// A path, an Accept, the upstream's body and members the answer must have.
type Case<'a> = (&'a str, &'a str, String, &'a [(&'a str, Json)]);

#[tokio::test]
async fn null_items_and_rows_reach_the_client_renamed() {
    let cases: &[Case] = &[
        (
            FOOS,
            "application/json",
            r#"{"kind":"FooList","apiVersion":"samplecontroller.team1.example.com/v1alpha1","metadata":{"resourceVersion":"411"},"items":null}"#.into(),
            &[("apiVersion", Json::from("samplecontroller.k8s.io/v1alpha1"))],
        ),
        (
            FOOS,
            METADATA,
            r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"411"},"items":null}"#.into(),
            &[("kind", Json::from("PartialObjectMetadataList"))],
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "application/json",
            r#"{"kind":"ClusterRoleList","apiVersion":"rbac.authorization.k8s.io/v1","metadata":{"resourceVersion":"411"},"items":null}"#.into(),
            &[("kind", Json::from("ClusterRoleList"))],
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            METADATA,
            r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"411"},"items":null}"#.into(),
            &[("kind", Json::from("PartialObjectMetadataList"))],
        ),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "application/json",
            r#"{"kind":"CustomResourceDefinitionList","apiVersion":"apiextensions.k8s.io/v1","metadata":{"resourceVersion":"411"},"items":null}"#.into(),
            &[("kind", Json::from("CustomResourceDefinitionList"))],
        ),
        (
            FOOS,
            TABLE,
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"411"},"columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"","priority":0}],"rows":null}"#.into(),
            &[("kind", Json::from("Table"))],
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            TABLE,
            r#"{"kind":"Table","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"411"},"columnDefinitions":[{"name":"Name","type":"string","format":"name","description":"","priority":0}],"rows":null}"#.into(),
            &[("kind", Json::from("Table"))],
        ),
    ];
    for (path, accept, body, want) in cases {
        let ctype = if accept.contains(";as=") {
            accept.to_string()
        } else {
            "application/json".to_string()
        };
        let answer = Answer {
            status: 200,
            headers: vec![("content-type", ctype)],
            body: body.clone().into(),
        };
        let (status, got) = get(answer, path, accept).await;
        assert_eq!(
            status,
            StatusCode::OK,
            "{path} {accept}: {}",
            String::from_utf8_lossy(&got)
        );
        let got: Json = serde_json::from_slice(&got).unwrap();
        let member = if got["kind"] == "Table" {
            "rows"
        } else {
            "items"
        };
        assert_eq!(got[member], Json::Null, "{path} {accept}: {got}");
        for (k, v) in *want {
            assert_eq!(&got[*k], v, "{path} {accept}: {got}");
        }
    }
}

#[tokio::test]
async fn a_protobuf_list_without_items_reaches_the_client() {
    // Protobuf has no null: an empty list has no `items` (2) field at all.
    // ListMeta {2 resourceVersion}.
    for (path, api_version, kind) in [
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles",
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleList",
        ),
        (
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinitionList",
        ),
        (
            "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfigurationList",
        ),
    ] {
        let list = envelope(api_version, kind, &cat(&[ld(1, ld(2, "411"))]));
        let (status, got) = get(
            Answer::ok("application/vnd.kubernetes.protobuf", list.clone()),
            path,
            "application/vnd.kubernetes.protobuf",
        )
        .await;
        assert_eq!(status, StatusCode::OK, "{kind}");
        assert_eq!(got, list, "{kind}: nothing to rename, the bytes kept");
    }
}
