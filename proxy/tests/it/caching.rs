//! HTTP caching through the sidecar: what a client caches is regroup's
//! (tagged) validator, on every answer that carries one. The upstream
//! answers as kube-apiserver 1.29 did in the captures
//! `testdata/kube-1.29/renamed/028-openapi-v3-group-hash-if-none-match` (a
//! 304) and `029-openapi-v3-group-stale-hash` (a 301 to the current hash):
//! their status and headers, replayed.

use crate::common;
use crate::upstream_support;

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::Value as Json;
use upstream_support::{send, sidecar, Answer};

/// A 1.29 capture of the renamed world: its answer, and its ETag's hash.
fn capture(name: &str) -> (Answer, String) {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/kube-1.29/renamed")
        .join(name);
    let ex: Json =
        serde_json::from_slice(&std::fs::read(dir.join("exchange.json")).unwrap()).unwrap();
    let mut headers = Vec::new();
    for (name, lower) in [
        ("Cache-Control", "cache-control"),
        ("Content-Type", "content-type"),
        ("Etag", "etag"),
        ("Location", "location"),
        ("Vary", "vary"),
    ] {
        if let Some(v) = ex["response_headers"][name].as_str() {
            headers.push((lower, v.to_owned()));
        }
    }
    let hash = ex["response_headers"]["Etag"]
        .as_str()
        .unwrap()
        .trim_matches('"')
        .to_owned();
    let answer = Answer {
        status: ex["status"].as_u64().unwrap() as u16,
        headers,
        body: Bytes::from(std::fs::read(dir.join("response.body")).unwrap()),
    };
    (answer, hash)
}

/// regroup's tag for the fixtures' rules: what it appends to the ETag of a
/// 200 (read from a 200 through the same rules, never hard-coded).
async fn tag_of_a_200() -> String {
    let (url, _) = sidecar(
        &common::fixture_map(),
        Answer::ok(
            "application/json",
            r#"{"kind":"Foo","apiVersion":"samplecontroller.team1.example.com/v1alpha1"}"#,
        )
        .with("etag", "\"abc\""),
    )
    .await;
    let (status, headers, _) = send(
        Request::get(format!(
            "{url}/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/a"
        ))
        .body(Full::default())
        .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let tagged = headers["etag"].to_str().unwrap().to_owned();
    let tag = tagged
        .strip_prefix("\"abc")
        .and_then(|t| t.strip_suffix('"'))
        .unwrap_or_else(|| panic!("{tagged}"))
        .to_owned();
    assert!(!tag.is_empty());
    tag
}

#[tokio::test]
async fn a_304_carries_the_etag_regroup_gave_and_the_upstream_gets_its_own() {
    let tag = tag_of_a_200().await;
    let (not_modified, hash) = capture("028-openapi-v3-group-hash-if-none-match");
    assert_eq!(not_modified.status, 304);
    for path in [
        "/openapi/v3/apis/samplecontroller.k8s.io/v1alpha1",
        "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/a",
    ] {
        let (url, seen) = sidecar(&common::fixture_map(), not_modified.clone()).await;
        let (status, headers, _) = send(
            Request::get(format!("{url}{path}?hash={hash}{tag}"))
                .header("if-none-match", format!("\"{hash}{tag}\""))
                .body(Full::default())
                .unwrap(),
        )
        .await;
        assert_eq!(status, StatusCode::NOT_MODIFIED, "{path}");
        assert_eq!(
            headers["etag"],
            format!("\"{hash}{tag}\"").as_str(),
            "{path}"
        );
        let seen = seen.lock().unwrap().clone();
        assert_eq!(
            seen.if_none_match.as_deref(),
            Some(format!("\"{hash}\"").as_str()),
            "{path}"
        );
        assert!(
            seen.path_and_query.ends_with(&format!("?hash={hash}")),
            "{}",
            seen.path_and_query
        );
    }
}

#[tokio::test]
async fn an_openapi_301_moves_to_the_tagged_hash_in_the_apps_names() {
    let tag = tag_of_a_200().await;
    let (moved, hash) = capture("029-openapi-v3-group-stale-hash");
    assert_eq!(moved.status, 301);
    let (url, _) = sidecar(&common::fixture_map(), moved).await;
    let (status, headers, _) = send(
        Request::get(format!(
            "{url}/openapi/v3/apis/samplecontroller.k8s.io/v1alpha1?hash={}",
            "0".repeat(128)
        ))
        .body(Full::default())
        .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::MOVED_PERMANENTLY);
    assert_eq!(
        headers["location"],
        format!("/openapi/v3/apis/samplecontroller.k8s.io/v1alpha1?hash={hash}{tag}").as_str()
    );
    assert_eq!(headers["etag"], format!("\"{hash}{tag}\"").as_str());
}
