//! `upstream.http2`, against the real binary and a TLS upstream that offers
//! h2 and HTTP/1.1 by ALPN (as a kube-apiserver does): by default regroup
//! takes h2 and carries concurrent requests on one connection; with
//! `never` it speaks HTTP/1.1, one connection per request in flight.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, Version};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::serve::listen::tls;
use tokio::net::TcpListener;

use crate::regroup_binary::{get, start_with_kubeconfig, tls_kubeconfig};

const FOO: &str = r#"{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo","metadata":{"name":"alpha"}}"#;
const PATH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/alpha";

/// A TLS upstream answering every request with FOO; a request whose query
/// is `hold` is answered only once the test releases it.
struct Upstream {
    port: u16,
    /// The protocol of every request it received, in order.
    versions: Arc<Mutex<Vec<Version>>>,
    /// Requests received for `hold`.
    held: Arc<AtomicUsize>,
    connections: Arc<AtomicUsize>,
    release: Arc<tokio::sync::Notify>,
}

async fn tls_upstream(id: &tls::Identity) -> Upstream {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let acceptor = tokio_rustls::TlsAcceptor::from(tls::server_config(id).unwrap());
    let u = Upstream {
        port,
        versions: Arc::default(),
        held: Arc::default(),
        connections: Arc::default(),
        release: Arc::default(),
    };
    let (versions, held, connections, release) = (
        u.versions.clone(),
        u.held.clone(),
        u.connections.clone(),
        u.release.clone(),
    );
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            connections.fetch_add(1, Ordering::SeqCst);
            let (acceptor, versions, held, release) = (
                acceptor.clone(),
                versions.clone(),
                held.clone(),
                release.clone(),
            );
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (versions, held, release) =
                        (versions.clone(), held.clone(), release.clone());
                    async move {
                        versions.lock().unwrap().push(req.version());
                        if req.uri().query() == Some("hold") {
                            held.fetch_add(1, Ordering::SeqCst);
                            release.notified().await;
                        }
                        Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(Full::new(Bytes::from_static(FOO.as_bytes())))
                                .unwrap(),
                        )
                    }
                });
                if let Ok(s) = acceptor.accept(stream).await {
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                }
            });
        }
    });
    u
}

/// A GET held by the upstream, then a second GET while the first waits;
/// both answered once the first is released. Returns the upstream's
/// connection count before and after the second request.
async fn one_held_and_one_more(u: &Upstream, port: u16) -> (usize, usize) {
    // A first request opens the connection(s) the pool keeps.
    let (code, body) = get(port, PATH).await;
    assert_eq!(code, 200, "{body}");
    assert!(
        body.contains("\"samplecontroller.k8s.io/v1alpha1\""),
        "{body}"
    );
    let held_path = format!("{PATH}?hold");
    let held = tokio::spawn(async move { get(port, &held_path).await });
    let deadline = Instant::now() + Duration::from_secs(20);
    while u.held.load(Ordering::SeqCst) == 0 {
        assert!(Instant::now() < deadline, "the held request never arrived");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let before = u.connections.load(Ordering::SeqCst);
    let (code, body) = get(port, PATH).await;
    assert_eq!(code, 200, "{body}");
    let after = u.connections.load(Ordering::SeqCst);
    u.release.notify_one();
    let (code, body) = held.await.unwrap();
    assert_eq!(code, 200, "{body}");
    (before, after)
}

#[tokio::test]
async fn by_default_a_tls_upstream_gets_h2_and_concurrent_requests_share_its_connection() {
    let id = tls::generate().unwrap();
    let u = tls_upstream(&id).await;
    let kc = tls_kubeconfig(u.port, id.ca_pem.as_deref().unwrap());
    let r = start_with_kubeconfig("upstream-h2", &kc, "").await;
    let (before, after) = one_held_and_one_more(&u, r.port).await;
    assert_eq!(
        before,
        after,
        "a request beside a held one opened a connection:\n{}",
        r.log()
    );
    let versions = u.versions.lock().unwrap().clone();
    assert!(versions.len() >= 3, "{versions:?}");
    assert!(
        versions.iter().all(|v| *v == Version::HTTP_2),
        "{versions:?}"
    );
}

#[tokio::test]
async fn with_http2_never_a_tls_upstream_gets_http1_one_connection_per_request_in_flight() {
    let id = tls::generate().unwrap();
    let u = tls_upstream(&id).await;
    let kc = tls_kubeconfig(u.port, id.ca_pem.as_deref().unwrap());
    let r = start_with_kubeconfig("upstream-http1", &kc, "upstream:\n  http2: never\n").await;
    let (before, after) = one_held_and_one_more(&u, r.port).await;
    assert!(after >= 2, "{before} -> {after}:\n{}", r.log());
    let versions = u.versions.lock().unwrap().clone();
    assert!(versions.len() >= 3, "{versions:?}");
    assert!(
        versions.iter().all(|v| *v == Version::HTTP_11),
        "{versions:?}"
    );
    // Sequential requests reuse the idle connections: none opened.
    let idle = u.connections.load(Ordering::SeqCst);
    for _ in 0..3 {
        let (code, body) = get(r.port, PATH).await;
        assert_eq!(code, 200, "{body}");
    }
    assert_eq!(u.connections.load(Ordering::SeqCst), idle);
}

#[tokio::test]
async fn an_unknown_http2_value_is_refused_at_start() {
    let err = crate::regroup_binary::check_refuses(
        "upstream-http2-bad",
        "upstream:\n  http2: sometimes\n",
    );
    assert!(err.contains("sometimes") || err.contains("http2"), "{err}");
}
