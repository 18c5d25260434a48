use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use super::*;
use crate::rewrite::engine::tests::engine;
use crate::upstream::kubeconfig::Resolved;

const CLUSTER: &str = "samplecontroller.team1.example.com";

/// A plain-HTTP stand-in for the app's webhook server: records what it
/// received, answers with `answer(request)`.
async fn app(
    answer: fn(&serde_json::Value) -> (u16, String),
) -> (String, Arc<Mutex<Vec<(String, Vec<u8>)>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let s = seen.clone();
    tokio::spawn(async move {
        loop {
            let (c, _) = l.accept().await.unwrap();
            let s = s.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let s = s.clone();
                    async move {
                        let uri = req.uri().to_string();
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let v: serde_json::Value =
                            serde_json::from_slice(&body).unwrap_or_default();
                        s.lock().unwrap().push((uri, body.to_vec()));
                        let (code, text) = answer(&v);
                        let mut r = Response::new(Full::new(Bytes::from(text)));
                        *r.status_mut() = StatusCode::from_u16(code).unwrap();
                        Ok::<_, Infallible>(r)
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(c), svc)
                    .await;
            });
        }
    });
    (format!("http://{addr}"), seen)
}

fn webhooks(backend: &str) -> Webhooks {
    let up = Upstream::new(
        &Resolved {
            server: backend.into(),
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    Webhooks::new(
        Live::new(engine(CLUSTER)),
        vec![Hook {
            name: "validate-foo".into(),
            path: "/validate-foo".into(),
            backend: Arc::new(up),
            backend_path: "/validate".into(),
        }],
        1 << 20,
    )
}

fn call(path: &str, body: &str) -> Request<Full<Bytes>> {
    Request::post(path)
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap()
}

async fn text(r: Response<Body>) -> (u16, String) {
    let code = r.status().as_u16();
    let b = r.into_body().collect().await.unwrap().to_bytes();
    (code, String::from_utf8(b.to_vec()).unwrap())
}

const REVIEW: &str = r#"{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"u-1","kind":{"group":"samplecontroller.team1.example.com","version":"v1alpha1","kind":"Foo"},"object":{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo","metadata":{"name":"x"}}}}"#;

#[tokio::test]
async fn a_review_reaches_the_app_in_its_names_and_the_answer_the_cluster_in_its_own() {
    let (url, seen) = app(|v| {
        let uid = v["request"]["uid"].as_str().unwrap_or_default().to_owned();
        let g = v["request"]["kind"]["group"].as_str().unwrap_or_default().to_owned();
        (200, format!(r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"{uid}","allowed":false,"status":{{"code":403,"message":"no {g}/v1alpha1 here"}}}}}}"#))
    })
    .await;
    let w = webhooks(&url);
    let (code, body) = text(w.handle(call("/validate-foo?timeout=10s", REVIEW)).await).await;
    assert_eq!(code, 200, "{body}");
    assert_eq!(
        body,
        format!(
            r#"{{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{{"uid":"u-1","allowed":false,"status":{{"code":403,"message":"no {CLUSTER}/v1alpha1 here"}}}}}}"#
        )
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen[0].0, "/validate?timeout=10s");
    assert_eq!(
        String::from_utf8(seen[0].1.clone()).unwrap(),
        REVIEW.replace(CLUSTER, "samplecontroller.k8s.io")
    );
}

#[tokio::test]
async fn what_a_webhook_is_never_sent_gets_a_status() {
    let (url, seen) = app(|_| (200, String::new())).await;
    let w = webhooks(&url);
    let (code, body) = text(w.handle(call("/other", REVIEW)).await).await;
    assert_eq!(code, 404, "{body}");
    let (code, body) = text(
        w.handle(call(
            "/validate-foo",
            r#"{"apiVersion":"v1","kind":"ConfigMap"}"#,
        ))
        .await,
    )
    .await;
    assert_eq!(code, 400);
    assert!(body.contains(r#""kind":"Status""#), "{body}");
    let (code, _) = text(w.handle(call("/validate-foo", "{not json")).await).await;
    assert_eq!(code, 400);
    let get = Request::get("/validate-foo")
        .body(Full::new(Bytes::new()))
        .unwrap();
    assert_eq!(text(w.handle(get).await).await.0, 405);
    let yaml = Request::post("/validate-foo")
        .header("content-type", "application/yaml")
        .body(Full::new(Bytes::from(REVIEW)))
        .unwrap();
    assert_eq!(text(w.handle(yaml).await).await.0, 415);
    assert!(seen.lock().unwrap().is_empty(), "nothing reached the app");
}

#[tokio::test]
async fn a_bad_answer_from_the_app_is_a_bad_gateway_not_a_verdict() {
    for answer in [
        (|_: &serde_json::Value| (200, "not json".to_owned()))
            as fn(&serde_json::Value) -> (u16, String),
        |_| {
            (
                200,
                r#"{"response":{"uid":"someone-else","allowed":true}}"#.to_owned(),
            )
        },
        |_| (500, "boom".to_owned()),
        |v| {
            let uid = v["request"]["uid"].as_str().unwrap_or_default().to_owned();
            // A patch naming the group that is not base64.
            (
                200,
                format!(
                    r#"{{"response":{{"uid":"{uid}","allowed":true,"patchType":"JSONPatch","patch":"samplecontroller.k8s.io!"}}}}"#
                ),
            )
        },
    ] {
        let (url, _) = app(answer).await;
        let (code, body) = text(webhooks(&url).handle(call("/validate-foo", REVIEW)).await).await;
        assert_eq!(code, 502, "{body}");
        assert!(body.contains(r#""kind":"Status""#), "{body}");
    }
}

#[tokio::test]
async fn an_unreachable_app_is_unavailable() {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    drop(l);
    let (code, _) = text(webhooks(&url).handle(call("/validate-foo", REVIEW)).await).await;
    assert_eq!(code, 503);
}

#[tokio::test]
async fn an_answer_without_its_kind_is_still_read_as_the_review_it_answers() {
    // admission.k8s.io/v1beta1 let webhooks leave out apiVersion and kind.
    let (url, _) = app(|v| {
        let uid = v["request"]["uid"].as_str().unwrap_or_default().to_owned();
        let patch = base64::Engine::encode(
            &base64::engine::general_purpose::STANDARD,
            br#"[{"op":"replace","path":"/apiVersion","value":"samplecontroller.k8s.io/v1alpha1"}]"#,
        );
        (200, format!(r#"{{"response":{{"uid":"{uid}","allowed":true,"patchType":"JSONPatch","patch":"{patch}"}}}}"#))
    })
    .await;
    let (code, body) = text(webhooks(&url).handle(call("/validate-foo", REVIEW)).await).await;
    assert_eq!(code, 200, "{body}");
    let v: serde_json::Value = serde_json::from_str(&body).unwrap();
    let patch = base64::Engine::decode(
        &base64::engine::general_purpose::STANDARD,
        v["response"]["patch"].as_str().unwrap(),
    )
    .unwrap();
    assert_eq!(
        String::from_utf8(patch).unwrap(),
        format!(r#"[{{"op":"replace","path":"/apiVersion","value":"{CLUSTER}/v1alpha1"}}]"#)
    );
}
