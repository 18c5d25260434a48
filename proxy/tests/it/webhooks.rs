//! The webhook listener over real TLS, as kube-apiserver calls it: the
//! captured AdmissionReview of the renamed world (1.29,
//! `testdata/kube-1.29/webhooks`) reaches an app that answers as the orig
//! world's webhook did, and the cluster gets the renamed world's answer;
//! with `clientCaFile`, callers without a certificate of that CA never get
//! past the handshake.

use crate::common;
use crate::tls_support;
use regroup::observe::metrics::Metrics;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use common::{fixture_map, Case};
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::listen::lifecycle::Lifecycle;
use regroup::listen::lifecycle::Serving;
use regroup::listen::webhook::serve_webhooks;
use regroup::net::tls;
use regroup::pipeline::live::Live;
use regroup::rewrite::{Catalog, Engine};
use regroup::upstream::{kubeconfig::Resolved, Upstream};
use regroup::webhook::{tls as wtls, Hook, Webhooks};
use serde_json::Value as Json;
use tokio::net::TcpListener;

const WEBHOOKS: &str = "kube-1.29/webhooks";

/// The app's webhook server (plain HTTP on loopback): answers every review
/// with the orig world's captured answer of `case`, for the review's uid.
async fn app(case: &'static str, seen: Arc<Mutex<Vec<Vec<u8>>>>) -> String {
    let answer = Case::load_of(WEBHOOKS, "orig", case).response;
    let captured_uid = serde_json::from_slice::<Json>(&answer).unwrap()["response"]["uid"]
        .as_str()
        .unwrap()
        .to_owned();
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (c, _) = l.accept().await.unwrap();
            let (answer, uid, seen) = (answer.clone(), captured_uid.clone(), seen.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (answer, uid, seen) = (answer.clone(), uid.clone(), seen.clone());
                    async move {
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        let v: Json = serde_json::from_slice(&body).unwrap();
                        seen.lock().unwrap().push(body.to_vec());
                        let theirs = v["request"]["uid"].as_str().unwrap();
                        let out = String::from_utf8(answer).unwrap().replace(&uid, theirs);
                        Ok::<_, Infallible>(Response::new(Full::new(Bytes::from(out))))
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(c), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

/// regroup's webhook listener in front of `backend`; returns its address
/// and serving CA.
async fn regroup(backend: &str, client_ca: Option<&str>) -> (String, String, Arc<Metrics>) {
    let id = tls::generate().unwrap();
    let ca = id.ca_pem.clone().unwrap();
    let cfg = wtls::server_config(wtls::Serving::Fixed(id), client_ca.map(str::as_bytes)).unwrap();
    let up = Upstream::new(
        &Resolved {
            server: backend.into(),
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    let hooks = vec![Hook {
        name: "mutate-foo".into(),
        path: "/mutate-foo".into(),
        backend: Arc::new(up),
        backend_path: "/mutate".into(),
    }];
    let live = Live::new(Engine::new(fixture_map(), Catalog::new(&[])));
    let handler = Arc::new(Webhooks::new(live, hooks, 1 << 20));
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let serving = Serving::new(regroup_config::Limits::default(), Lifecycle::new());
    let metrics = handler.metrics().clone();
    tokio::spawn(serve_webhooks(l, cfg, handler, serving));
    (format!("https://{addr}"), ca, metrics)
}

fn review(case: &str) -> Vec<u8> {
    Case::load_of(WEBHOOKS, "renamed", case).request.unwrap()
}

fn patch_of(answer: &[u8]) -> Json {
    let v: Json = serde_json::from_slice(answer).unwrap();
    let p = base64::engine::general_purpose::STANDARD
        .decode(v["response"]["patch"].as_str().unwrap())
        .unwrap();
    serde_json::from_slice(&p).unwrap()
}

#[tokio::test]
async fn kube_apiservers_admission_review_is_answered_in_the_clusters_names() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let backend = app("075-webhook-mutating-v1-create", seen.clone()).await;
    let (url, ca, metrics) = regroup(&backend, None).await;
    let client = tls_support::https_client(&ca, None);
    let req = Request::post(format!("{url}/mutate-foo?timeout=10s"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(review(
            "075-webhook-mutating-v1-create",
        ))))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let patch = patch_of(&body);
    assert_eq!(
        patch[0]["value"][0]["apiVersion"],
        "samplecontroller.team1.example.com/v1alpha1"
    );
    assert_eq!(
        patch[1]["value"], "samplecontroller.k8s.io",
        "a label value"
    );
    // The app saw only its own group.
    let sent = String::from_utf8(seen.lock().unwrap()[0].clone()).unwrap();
    assert!(sent.contains("\"group\":\"samplecontroller.k8s.io\""));
    assert!(!sent.contains("team1"));
    let m = metrics.encode();
    assert!(
        m.contains(
            "regroup_webhook_requests_total{webhook=\"mutate-foo\",kind=\"AdmissionReview\"}"
        ),
        "{m}"
    );
}

#[tokio::test]
async fn with_a_client_ca_only_callers_with_its_certificates_get_through() {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let backend = app("075-webhook-mutating-v1-create", seen.clone()).await;
    let apiserver = tls::generate_for(
        "kube-apiserver webhook client CA",
        &["kube-apiserver".into()],
        true,
    )
    .unwrap();
    let stranger = tls::generate_for("another CA", &["kube-apiserver".into()], true).unwrap();
    let (url, ca, _) = regroup(&backend, apiserver.ca_pem.as_deref()).await;
    let post = || {
        Request::post(format!("{url}/mutate-foo"))
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(review(
                "075-webhook-mutating-v1-create",
            ))))
            .unwrap()
    };
    for refused in [None, Some(&stranger)] {
        let r = tls_support::https_client(&ca, refused)
            .request(post())
            .await;
        assert!(r.is_err(), "the handshake must fail");
    }
    assert!(seen.lock().unwrap().is_empty());
    let ok = tls_support::https_client(&ca, Some(&apiserver))
        .request(post())
        .await
        .unwrap();
    assert_eq!(ok.status(), 200);
    assert_eq!(seen.lock().unwrap().len(), 1);
}
