//! Media types through a real listener: a body with no `Content-Type` is
//! renamed as JSON (kube-apiserver reads it so), CBOR is never forwarded
//! where a group could hide in it, and a gzip bomb is refused, not inflated.

use crate::common;
use crate::upstream_support;

use std::io::Write;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, StatusCode};
use http_body_util::Full;
use serde_json::Value as Json;
use upstream_support::{Answer, Seen};

async fn send(req: Request<Full<Bytes>>) -> (StatusCode, Json) {
    let (status, _, body) = upstream_support::send(req).await;
    (status, serde_json::from_slice(&body).unwrap_or(Json::Null))
}

async fn sidecar(answer: Answer) -> (String, Arc<Mutex<Seen>>) {
    upstream_support::sidecar(&common::fixture_map(), answer).await
}

fn json_answer(body: &'static str) -> Answer {
    Answer::ok("application/json", body)
}

fn gzip_answer(body: Vec<u8>) -> Answer {
    Answer::ok("application/json", body).with("content-encoding", "gzip")
}

const FOO: &str = r#"{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo","metadata":{"name":"alpha","namespace":"ns"}}"#;
const FOO_PATH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/alpha";

#[tokio::test]
async fn a_create_without_content_type_is_renamed_as_json() {
    let (url, seen) = sidecar(json_answer(r#"{"kind":"ConfigMap","apiVersion":"v1"}"#)).await;
    let cm = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"child","namespace":"ns","ownerReferences":[{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","name":"alpha","uid":"u"}]}}"#;
    let req = Request::post(format!("{url}/api/v1/namespaces/ns/configmaps"))
        .body(Full::new(Bytes::from_static(cm.as_bytes())))
        .unwrap();
    assert!(req.headers().get("content-type").is_none());
    let (status, _) = send(req).await;
    assert_eq!(status, StatusCode::OK);
    let s = seen.lock().unwrap().clone();
    let stored: Json = serde_json::from_slice(&s.body).unwrap();
    assert_eq!(
        stored["metadata"]["ownerReferences"][0]["apiVersion"],
        "samplecontroller.team1.example.com/v1alpha1"
    );
    // Only the group-bearing value changed.
    assert_eq!(
        String::from_utf8(s.body).unwrap(),
        cm.replace(
            "samplecontroller.k8s.io",
            "samplecontroller.team1.example.com"
        )
    );
}

#[tokio::test]
async fn a_cbor_body_is_refused_with_415_and_never_forwarded() {
    for media in [
        "application/cbor",
        "application/apply-patch+cbor",
        "application/cbor-seq",
    ] {
        let (url, seen) = sidecar(json_answer(FOO)).await;
        let req = Request::patch(format!("{url}{FOO_PATH}"))
            .header("content-type", media)
            .body(Full::new(Bytes::from_static(b"\xa1\x64kind\x63Foo")))
            .unwrap();
        let (status, body) = send(req).await;
        assert_eq!(status, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{media}");
        assert_eq!(body["kind"], "Status");
        assert_eq!(body["reason"], "UnsupportedMediaType");
        assert_eq!(
            seen.lock().unwrap().requests,
            0,
            "{media} reached the upstream"
        );
    }
}

#[tokio::test]
async fn cbor_is_removed_from_accept() {
    let (url, seen) = sidecar(json_answer(FOO)).await;
    let req = Request::get(format!("{url}{FOO_PATH}"))
        .header("accept", "application/cbor, application/json;q=0.9")
        .body(Full::default())
        .unwrap();
    let (status, body) = send(req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["apiVersion"], "samplecontroller.k8s.io/v1alpha1");
    assert_eq!(
        seen.lock().unwrap().accept.as_deref(),
        Some("application/json;q=0.9")
    );

    let (url, seen) = sidecar(json_answer(FOO)).await;
    let req = Request::get(format!("{url}{FOO_PATH}"))
        .header("accept", "application/cbor")
        .body(Full::default())
        .unwrap();
    assert_eq!(send(req).await.0, StatusCode::OK);
    assert_eq!(seen.lock().unwrap().accept, None);
}

#[tokio::test]
async fn a_cbor_answer_is_a_502() {
    let (url, _) = sidecar(Answer::ok(
        "application/cbor",
        Bytes::from_static(b"\xa1\x64kind\x63Foo"),
    ))
    .await;
    let req = Request::get(format!("{url}{FOO_PATH}"))
        .body(Full::default())
        .unwrap();
    let (status, body) = send(req).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(body["kind"], "Status");
}

#[tokio::test]
async fn a_gzip_bomb_is_refused_not_inflated() {
    // 300 MiB of spaces after a JSON object: an answer to a GET of one
    // object, refused once inflated past `maxObjectBytes` (8 MiB).
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    e.write_all(FOO.as_bytes()).unwrap();
    let chunk = vec![b' '; 1 << 20];
    for _ in 0..300 {
        e.write_all(&chunk).unwrap();
    }
    let bomb = e.finish().unwrap();
    assert!(bomb.len() < 1 << 20, "{} bytes", bomb.len());
    let (url, _) = sidecar(gzip_answer(bomb)).await;
    let req = Request::get(format!("{url}{FOO_PATH}"))
        .body(Full::default())
        .unwrap();
    let (status, body) = send(req).await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    let past = format!("inflates past {} bytes", 8 << 20);
    assert!(body["message"].as_str().unwrap().contains(&past), "{body}");

    // A gzip body within the limit is renamed.
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
    e.write_all(FOO.as_bytes()).unwrap();
    let (url, _) = sidecar(gzip_answer(e.finish().unwrap())).await;
    let req = Request::get(format!("{url}{FOO_PATH}"))
        .body(Full::default())
        .unwrap();
    let (status, body) = send(req).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body["apiVersion"], "samplecontroller.k8s.io/v1alpha1");
}

#[tokio::test]
async fn a_gzip_request_body_is_renamed_and_sent_inflated_a_bomb_is_413() {
    let gz = |b: &[u8], times: usize| {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        for _ in 0..times {
            e.write_all(b).unwrap();
        }
        e.finish().unwrap()
    };
    let app_foo = FOO.replace(
        "samplecontroller.team1.example.com",
        "samplecontroller.k8s.io",
    );
    let (url, seen) = sidecar(json_answer(FOO)).await;
    let req = Request::put(format!("{url}{FOO_PATH}"))
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(Full::new(Bytes::from(gz(app_foo.as_bytes(), 1))))
        .unwrap();
    assert_eq!(send(req).await.0, StatusCode::OK);
    let s = seen.lock().unwrap().clone();
    assert_eq!(String::from_utf8(s.body).unwrap(), FOO);

    // 300 MiB of spaces once inflated: past the 3 MiB default
    // `maxRequestBodyBytes`, which bounds the inflated body too (it goes
    // upstream uncompressed); inflation stops there.
    let mut bomb = app_foo.into_bytes();
    bomb.extend(std::iter::repeat_n(b' ', 1 << 20));
    let (url, seen) = sidecar(json_answer(FOO)).await;
    let req = Request::put(format!("{url}{FOO_PATH}"))
        .header("content-type", "application/json")
        .header("content-encoding", "gzip")
        .body(Full::new(Bytes::from(gz(&bomb, 300))))
        .unwrap();
    let (status, body) = send(req).await;
    assert_eq!(status, StatusCode::PAYLOAD_TOO_LARGE, "{body}");
    assert_eq!(body["reason"], "RequestEntityTooLarge");
    let past = format!("inflates past {} bytes", 3 << 20);
    assert!(body["message"].as_str().unwrap().contains(&past), "{body}");
    assert_eq!(seen.lock().unwrap().requests, 0);
}
