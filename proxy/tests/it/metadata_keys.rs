//! Metadata keys (`metadata:` rules) through a real sidecar listener and a
//! stub upstream: the `labelSelector` query parameter, a bad selector
//! refused before anything is sent, and two copies' keys on one shared
//! ConfigMap: what the app reads and a PUT of it back, byte for byte.

use crate::common;

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioExecutor;

const CONFIG: &str = "
rules:
  - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
metadata:
  prefixes:
    - {from: kopf.zalando.org, to: kopf.team1.example.com}
";

/// The shared ConfigMap as the cluster holds it: this copy's keys (in the
/// cluster's names) and another copy's (in the app's own original prefix).
const STORED: &str = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"shared","namespace":"e2e","resourceVersion":"7","labels":{"kopf.team1.example.com/handled":"yes","kopf.zalando.org/handled":"yes"},"annotations":{"kopf.zalando.org/last-handled-configuration":"{\"data\":{}}\n"},"finalizers":["kopf.zalando.org/KopfFinalizerMarker","kopf.team1.example.com/KopfFinalizerMarker"]},"data":{"a":"1"}}"#;

async fn sidecar(upstream: String) -> String {
    let s = regroup_config::load(CONFIG).unwrap();
    let catalog = regroup::rewrite::Catalog::for_map(&s.fields, &s.map);
    let up = regroup::upstream::Upstream::new(
        &regroup::upstream::Resolved {
            server: upstream,
            ..Default::default()
        },
        false,
    )
    .unwrap();
    let proxy = regroup::pipeline::proxy::Proxy::sidecar(
        regroup::pipeline::live::Live::new(regroup::rewrite::Engine::new(
            s.map.clone(),
            catalog.clone(),
        )),
        std::sync::Arc::new(up),
        true,
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(common::serve_plain(l, Arc::new(proxy)));
    format!("http://{addr}")
}

async fn call(base: &str, method: Method, path: &str, body: &str) -> (StatusCode, Bytes) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let req = Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("accept", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let code = resp.status();
    (code, resp.into_body().collect().await.unwrap().to_bytes())
}

type Seen = Arc<Mutex<Vec<(Method, String, Option<String>, Bytes)>>>;

async fn setup() -> (String, Seen) {
    let seen: Seen = Arc::default();
    let log = seen.clone();
    let upstream = common::fake_upstream(move |r| {
        log.lock().unwrap().push((
            r.method.clone(),
            r.path.clone(),
            r.query.clone(),
            r.body.clone(),
        ));
        let body = match r.method {
            Method::PUT => r.body.clone(),
            _ => Bytes::from_static(STORED.as_bytes()),
        };
        (StatusCode::OK, "application/json".into(), body)
    })
    .await;
    (sidecar(upstream).await, seen)
}

#[tokio::test]
async fn label_selectors_in_the_query_are_renamed() {
    let (base, seen) = setup().await;
    let (code, _) = call(
        &base,
        Method::GET,
        "/api/v1/namespaces/e2e/configmaps?labelSelector=kopf.zalando.org%2Fhandled%3Dyes%2C%21kopf.zalando.org%2Fskip&limit=5",
        "",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let (_, _, query, _) = seen.lock().unwrap()[0].clone();
    assert_eq!(
        query.as_deref(),
        Some("labelSelector=kopf.team1.example.com%2Fhandled%3Dyes%2C!kopf.team1.example.com%2Fskip&limit=5")
    );
    // A selector without the operator's keys goes on byte for byte.
    call(
        &base,
        Method::GET,
        "/api/v1/namespaces/e2e/configmaps?labelSelector=app+in+(a,b)",
        "",
    )
    .await;
    let (_, _, query, _) = seen.lock().unwrap()[1].clone();
    assert_eq!(query.as_deref(), Some("labelSelector=app+in+(a,b)"));
}

#[tokio::test]
async fn a_selector_that_cant_be_parsed_is_a_400_and_nothing_is_sent() {
    let (base, seen) = setup().await;
    let (code, body) = call(
        &base,
        Method::GET,
        "/api/v1/namespaces/e2e/configmaps?labelSelector=kopf.zalando.org%2Fx+in+(a",
        "",
    )
    .await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    let status: serde_json::Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(status["kind"], "Status");
    assert_eq!(status["code"], 400);
    assert!(seen.lock().unwrap().is_empty());
}

/// Copy B (through regroup) reads a ConfigMap that copy A (direct) also
/// handles, and writes back what it read: copy A's keys arrive exactly as
/// the cluster holds them.
#[tokio::test]
async fn another_copys_keys_survive_a_put_of_what_the_app_read() {
    let (base, seen) = setup().await;
    let (code, read) = call(
        &base,
        Method::GET,
        "/api/v1/namespaces/e2e/configmaps/shared",
        "",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let doc: serde_json::Value = serde_json::from_slice(&read).unwrap();
    let labels = doc["metadata"]["labels"].as_object().unwrap();
    assert_eq!(labels["kopf.zalando.org/handled"], "yes", "its own key");
    assert_eq!(
        labels["regroup-shadow.kopf.zalando.org/handled"], "yes",
        "the other copy's key, never shown as its own"
    );
    let text = std::str::from_utf8(&read).unwrap();
    let (code, _) = call(
        &base,
        Method::PUT,
        "/api/v1/namespaces/e2e/configmaps/shared",
        text,
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    let (_, _, _, sent) = seen.lock().unwrap()[1].clone();
    assert_eq!(std::str::from_utf8(&sent).unwrap(), STORED);
}
