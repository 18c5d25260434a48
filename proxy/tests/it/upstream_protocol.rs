//! `upstream.http2`, against the real binary and a TLS upstream that offers
//! h2 and HTTP/1.1 by ALPN (as a kube-apiserver does): by default regroup
//! takes h2 and carries concurrent requests on one connection; with
//! `never` it speaks HTTP/1.1, one connection per request in flight; with
//! `watches` the short requests go over HTTP/1.1 and the watches over h2.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, Version};
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::net::tls;
use tokio::net::TcpListener;

use crate::regroup_binary::{get, start_with_kubeconfig, tls_kubeconfig, Regroup, OWN_TOKEN};
use crate::watch_upstream::{
    open_watch, watch_ends, Relay, WatchUpstream, LEGACY_WATCH, PATH as WATCHED, WATCH,
};

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
async fn with_http2_auto_a_tls_upstream_gets_h2_and_concurrent_requests_share_its_connection() {
    let id = tls::generate().unwrap();
    let u = tls_upstream(&id).await;
    let kc = tls_kubeconfig(u.port, id.ca_pem.as_deref().unwrap());
    let r = start_with_kubeconfig("upstream-h2", &kc, "upstream:\n  http2: auto\n").await;
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
    assert!(err.contains("sometimes"), "{err}");
    // The refusal names the values it takes.
    for value in ["auto", "never", "watches"] {
        assert!(err.contains(value), "{value}: {err}");
    }
}

const WATCHES: &str = "upstream:\n  http2: watches\n";

/// The requests `u` received, split into the watches' protocols and the
/// other requests'.
fn protocols(u: &WatchUpstream) -> (Vec<Version>, Vec<Version>) {
    let (watches, others): (Vec<_>, Vec<_>) = u
        .requests()
        .into_iter()
        .partition(|(_, pq)| pq.contains("watch"));
    (
        watches.into_iter().map(|(v, _)| v).collect(),
        others.into_iter().map(|(v, _)| v).collect(),
    )
}

/// A GET through regroup, answered with the upstream's Foo.
async fn get_foo(r: &Regroup) {
    let (code, body) = get(r.port, WATCHED).await;
    assert_eq!(code, 200, "{body}\n{}", r.log());
    assert!(body.contains("\"name\":\"alpha\""), "{body}");
}

#[tokio::test]
async fn with_http2_watches_a_get_goes_over_http1_and_a_watch_over_h2() {
    let up = WatchUpstream::start(None).await;
    let kc = tls_kubeconfig(up.port, &up.ca_pem);
    let r = start_with_kubeconfig("upstream-watches-mode", &kc, WATCHES).await;
    get_foo(&r).await;
    get_foo(&r).await;
    // A watch by `?watch=1` and one by the legacy `/watch/` path: both
    // streams of one h2 connection, beside the GETs' HTTP/1.1 one.
    let a = open_watch(&r, WATCH).await;
    let b = open_watch(&r, LEGACY_WATCH).await;
    get_foo(&r).await;
    let (watches, others) = protocols(&up);
    assert_eq!(watches, [Version::HTTP_2; 2], "{:?}", up.requests());
    assert_eq!(others, [Version::HTTP_11; 3], "{:?}", up.requests());
    assert_eq!(up.accepted(), 2, "{}", r.log());

    up.end_watches();
    watch_ends(a, &r).await;
    watch_ends(b, &r).await;
    // The next watch takes the h2 connection again, the GET its HTTP/1.1
    // one: no connection opened. (The upstream ends this watch after its
    // first event.)
    drop(open_watch(&r, WATCH).await);
    get_foo(&r).await;
    assert_eq!(up.accepted(), 2, "{}", r.log());
    // A pod's log (`logs -f`) and a service's proxy, which the apiserver
    // holds open like a watch, take the h2 connection too.
    for path in [
        "/api/v1/namespaces/renamed/pods/p/log?follow=true",
        "/api/v1/namespaces/renamed/services/s/proxy/healthz",
    ] {
        let (code, body) = get(r.port, path).await;
        assert_eq!(code, 200, "{path}: {body}\n{}", r.log());
        let sent: Vec<Version> = up
            .requests()
            .into_iter()
            .filter(|(_, pq)| pq == path)
            .map(|(v, _)| v)
            .collect();
        assert_eq!(sent, [Version::HTTP_2], "{path}: {:?}", up.requests());
    }
    assert_eq!(up.accepted(), 2, "{}", r.log());
    let log = r.log();
    assert!(
        log.contains("h2 for watches, logs and proxies only"),
        "{log}"
    );
    assert!(!log.contains(OWN_TOKEN), "{log}");
}

#[tokio::test]
async fn each_http2_mode_sends_the_watches_and_the_other_requests_its_own_way() {
    for (mode, watch, other) in [
        ("auto", Version::HTTP_2, Version::HTTP_2),
        ("never", Version::HTTP_11, Version::HTTP_11),
        ("watches", Version::HTTP_2, Version::HTTP_11),
        // The default is `watches` (docs/config.md, "Upstream protocol").
        ("default", Version::HTTP_2, Version::HTTP_11),
    ] {
        let up = WatchUpstream::start(None).await;
        let kc = tls_kubeconfig(up.port, &up.ca_pem);
        let config = match mode {
            "default" => String::new(),
            m => format!("upstream:\n  http2: {m}\n"),
        };
        let r = start_with_kubeconfig(&format!("upstream-mode-{mode}"), &kc, &config).await;
        let w = open_watch(&r, WATCH).await;
        get_foo(&r).await;
        let (watches, others) = protocols(&up);
        assert_eq!(watches, [watch], "{mode}: {:?}", up.requests());
        assert_eq!(others, [other], "{mode}: {:?}", up.requests());
        up.end_watches();
        watch_ends(w, &r).await;
    }
}

#[tokio::test]
async fn with_http2_watches_a_server_that_turns_h2_down_gets_the_watch_over_http1() {
    let up = WatchUpstream::offering(None, false).await;
    let kc = tls_kubeconfig(up.port, &up.ca_pem);
    let r = start_with_kubeconfig("upstream-watches-no-h2", &kc, WATCHES).await;
    let w = open_watch(&r, WATCH).await;
    get_foo(&r).await;
    let (watches, others) = protocols(&up);
    assert_eq!(watches, [Version::HTTP_11], "{:?}", up.requests());
    assert_eq!(others, [Version::HTTP_11], "{:?}", up.requests());
    up.end_watches();
    watch_ends(w, &r).await;
}

#[tokio::test]
async fn with_http2_watches_a_watch_ends_cleanly_when_its_h2_connection_dies() {
    let up = WatchUpstream::start(None).await;
    let relay = Relay::start(up.port).await;
    let kc = tls_kubeconfig(relay.port, &up.ca_pem);
    let r = start_with_kubeconfig(
        "upstream-watches-dead",
        &kc,
        "upstream:\n  http2: watches\n\
         limits:\n  upstreamReadIdleTimeout: 1s\n  upstreamPingTimeout: 1s\n",
    )
    .await;
    let w = open_watch(&r, WATCH).await;
    assert_eq!(relay.accepted(), 1, "{}", r.log());
    // The connection goes silent, as a node gone without a RST: its ping
    // goes unanswered, the watch ends with its last chunk.
    relay.freeze();
    watch_ends(w, &r).await;
    // The warning is written as the connection's task ends, which may be
    // just after the watch's client saw the end.
    let deadline = Instant::now() + Duration::from_secs(10);
    while !r.log().contains("no answer to a ping") {
        assert!(Instant::now() < deadline, "no warning:\n{}", r.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(r.log().contains("WARN"), "{}", r.log());
    let (code, metrics) = get(r.metrics, "/metrics").await;
    assert_eq!(code, 200, "{metrics}");
    assert!(
        metrics.contains("regroup_upstream_ping_timeouts_total 1\n"),
        "{metrics}"
    );
    // A GET opens its HTTP/1.1 connection, the next watch a new h2 one.
    get_foo(&r).await;
    assert_eq!(relay.accepted(), 2, "{}", r.log());
    let w = open_watch(&r, WATCH).await;
    assert_eq!(relay.accepted(), 3, "{}", r.log());
    let (watches, others) = protocols(&up);
    assert_eq!(watches, [Version::HTTP_2; 2], "{:?}", up.requests());
    assert_eq!(others, [Version::HTTP_11], "{:?}", up.requests());
    up.end_watches();
    watch_ends(w, &r).await;
}

#[tokio::test]
async fn regroup_check_accepts_each_http2_value() {
    for mode in ["auto", "never", "watches"] {
        let (accepted, said) = crate::regroup_binary::check(
            &format!("upstream-http2-check-{mode}"),
            &format!(
                "rules:\n- from: samplecontroller.k8s.io\n  to: samplecontroller.team1.example.com\n\
                 upstream:\n  http2: {mode}\n"
            ),
        );
        assert!(accepted, "{mode}: {said}");
    }
}
