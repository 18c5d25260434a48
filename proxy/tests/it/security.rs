//! The security probes, each against the real `regroup` binary
//! and a fake upstream on loopback that records what reaches it: no
//! credential lent to a foreign `Host` or to a caller beyond loopback
//! without its own, paths a later hop would read differently refused,
//! slowloris and a hung upstream bounded, SIGHUP survived, SIGTERM drained,
//! `/readyz` following the upstream. Negative cases first in each test.
//! Timings are generous: a timeout is asserted as "answered within a few
//! times the configured value", never as a performance number.

use crate::regroup_binary::{free_port, raw, start, test_dir, wait_listening, OWN_TOKEN};
use crate::tls_support;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const FOO: &str = r#"{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo","metadata":{"name":"alpha"}}"#;
const PATH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/alpha";

#[derive(Clone, Debug)]
struct Seen {
    path: String,
    authorization: Option<String>,
}

type Log = Arc<Mutex<Vec<Seen>>>;

type TestBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// A fake apiserver on `listener`: `/namespaces/hang/` never answers,
/// `/namespaces/slow/` answers after 3 s, `/namespaces/deep/` answers a Foo
/// nested 200,000 levels deep, `watch=1` streams an event every 200 ms,
/// everything else answers FOO at once.
fn fake_upstream(listener: TcpListener, log: Log) {
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let log = log.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let log = log.clone();
                    async move {
                        let path = req.uri().path().to_owned();
                        log.lock().unwrap().push(Seen {
                            path: path.clone(),
                            authorization: req
                                .headers()
                                .get("authorization")
                                .map(|v| v.to_str().unwrap().to_owned()),
                        });
                        if path.contains("/namespaces/hang/") {
                            std::future::pending::<()>().await;
                        }
                        if path.contains("/namespaces/slow/") {
                            tokio::time::sleep(Duration::from_secs(3)).await;
                        }
                        let body: TestBody = if req.uri().query() == Some("watch=1") {
                            let s = futures_util::stream::unfold(0u32, |n| async move {
                                if n > 0 {
                                    tokio::time::sleep(Duration::from_millis(200)).await;
                                }
                                let ev = format!(
                                    "{{\"type\":\"ADDED\",\"object\":{{\"apiVersion\":\"v1\",\"kind\":\"ConfigMap\",\"metadata\":{{\"name\":\"c{n}\"}}}}}}\n"
                                );
                                Some((
                                    Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(ev))),
                                    n + 1,
                                ))
                            });
                            BodyExt::boxed(StreamBody::new(s))
                        } else if path.contains("/namespaces/deep/") {
                            BodyExt::boxed(Full::new(Bytes::from(deep_foo(
                                "samplecontroller.team1.example.com",
                            ))))
                        } else {
                            BodyExt::boxed(Full::new(Bytes::from_static(FOO.as_bytes())))
                        };
                        Ok::<_, std::convert::Infallible>(
                            Response::builder()
                                .header("content-type", "application/json")
                                .body(body)
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
}

/// A Foo whose spec nests 200,000 arrays around one more `apiVersion`.
fn deep_foo(group: &str) -> String {
    let n = 200_000;
    format!(
        r#"{{"apiVersion":"{group}/v1alpha1","kind":"Foo","metadata":{{"name":"x"}},"spec":{}{{"apiVersion":"{group}/v1"}}{}}}"#,
        "[".repeat(n),
        "]".repeat(n)
    )
}

async fn upstream() -> (u16, Log) {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = l.local_addr().unwrap().port();
    let log = Log::default();
    fake_upstream(l, log.clone());
    (port, log)
}

/// A bodyless GET of `path` with `Host: localhost`, for a hyper client.
fn local_get(path: &str) -> Request<Full<Bytes>> {
    Request::get(path)
        .header("host", "localhost")
        .body(Full::default())
        .unwrap()
}

async fn get(port: u16, path: &str, host: &str) -> (u16, String) {
    raw(
        port,
        format!("GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
}

fn assert_status(text: &str, code: u16, reason: &str) {
    assert!(
        text.contains("\"kind\":\"Status\"")
            && text.contains(&format!("\"code\":{code}"))
            && text.contains(&format!("\"reason\":\"{reason}\"")),
        "want a {code} {reason} Status, got:\n{text}"
    );
}

async fn metrics_text(port: u16) -> String {
    get(port, "/metrics", "127.0.0.1").await.1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_foreign_host_gets_403_and_never_reaches_the_upstream() {
    let (up, log) = upstream().await;
    let r = start("host", up, "").await;
    let p = r.port;

    // DNS rebinding: a browser page on evil.example reaching 127.0.0.1.
    for host in [
        format!("evil.example:{p}"),
        "evil.example".into(),
        format!("localhost.evil.example:{p}"),
        format!("127.0.0.1.nip.io:{p}"),
    ] {
        let (code, text) = get(p, PATH, &host).await;
        assert_eq!(code, 403, "{host}: {text}");
        assert_status(&text, 403, "Forbidden");
    }
    // HTTP/1.1 without Host, and an absolute-form URI naming another host.
    let (code, _) = raw(p, format!("GET {PATH} HTTP/1.0\r\n\r\n").as_bytes()).await;
    assert_eq!(code, 403);
    let (code, _) = raw(
        p,
        format!("GET http://evil.example{PATH} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await;
    assert_eq!(code, 403);
    // HTTP/2: the :authority pseudo-header is checked.
    let stream = TcpStream::connect(("127.0.0.1", p)).await.unwrap();
    let (mut h2, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    tokio::spawn(conn);
    let resp = h2
        .send_request(
            Request::get(format!("http://evil.example:{p}{PATH}"))
                .body(Full::<Bytes>::default())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::FORBIDDEN);
    assert!(
        log.lock().unwrap().is_empty(),
        "nothing reached the upstream: {:?}",
        log.lock().unwrap()
    );

    // Loopback names pass, with regroup's own credential.
    for host in [
        format!("localhost:{p}"),
        format!("127.0.0.1:{p}"),
        format!("[::1]:{p}"),
        "LOCALHOST".into(),
    ] {
        let (code, text) = get(p, PATH, &host).await;
        assert_eq!(code, 200, "{host}: {text}");
        assert!(text.contains("samplecontroller.k8s.io/v1alpha1"), "{text}");
    }
    let resp = h2
        .send_request(
            Request::get(format!("http://127.0.0.1:{p}{PATH}"))
                .body(Full::<Bytes>::default())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 5);
    assert!(seen.iter().all(|s| s.authorization.as_deref()
        == Some(&format!("Bearer {OWN_TOKEN}"))
        && s.path == "/apis/samplecontroller.team1.example.com/v1alpha1/namespaces/ns/foos/alpha"));
    let m = metrics_text(r.metrics).await;
    assert!(
        m.contains("regroup_errors_total{listener=\"sidecar\",reason=\"foreign_host\"} 7"),
        "{m}"
    );
    // A refused request has its request line too, as an answered one.
    let refused = "INFO regroup::request: request listener=\"sidecar\" method=GET verb=\"get\" \
         path=/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos/{name} status=403 us=";
    assert_eq!(r.log().matches(refused).count(), 7, "{}", r.log());
    assert!(!r.log().contains(OWN_TOKEN), "the token is never logged");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn configured_allowed_hosts_replace_the_defaults() {
    let (up, log) = upstream().await;
    let r = start("hosts", up, "  allowedHosts: [app.internal]\n").await;
    let (code, _) = get(r.port, PATH, "localhost").await;
    assert_eq!(code, 403);
    assert!(log.lock().unwrap().is_empty());
    let (code, _) = get(r.port, PATH, "app.internal:8001").await;
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paths_a_later_hop_would_read_differently_get_400_and_never_reach_the_upstream() {
    let (up, log) = upstream().await;
    let r = start("paths", up, "").await;
    for path in [
        "/api/v1/../../apis/samplecontroller.team1.example.com/v1alpha1/namespaces/ns/foos",
        "/api/v1/%2e%2e/%2e%2e/apis/samplecontroller.team1.example.com/v1alpha1/namespaces/ns/foos",
        "/api/v1/.%2E/x",
        "/apis/./samplecontroller.k8s.io/v1alpha1/foos",
        "//apis/samplecontroller.team1.example.com/v1alpha1/namespaces/ns/foos",
        "/apis/samplecontroller.k8s.io//v1alpha1/foos",
        "/apis/samplecontroller.k8s.io/v1alpha1/foos//",
        "/apis/samplecontroller.team1.example.com%2Fv1alpha1/foos",
        "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/a%2fb",
    ] {
        let (code, text) = get(r.port, path, "localhost").await;
        assert_eq!(code, 400, "{path}: {text}");
        assert_status(&text, 400, "BadRequest");
    }
    assert!(
        log.lock().unwrap().is_empty(),
        "nothing reached the upstream: {:?}",
        log.lock().unwrap()
    );
    // One trailing slash is not a confusion.
    let (code, _) = get(r.port, &format!("{PATH}/"), "localhost").await;
    assert_eq!(code, 200);
    let m = metrics_text(r.metrics).await;
    assert!(m.contains("reason=\"path_dot_segment\"} 4"), "{m}");
    assert!(m.contains("reason=\"path_empty_segment\"} 3"), "{m}");
    assert!(m.contains("reason=\"path_encoded_slash\"} 2"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tls_listener_beyond_loopback_serves_only_callers_with_their_own_credential() {
    let (up, log) = upstream().await;
    let tls_port = free_port();
    let dir = test_dir("tls-ca");
    let ca_file = dir.join("ca.crt");
    let r = start(
        "tls",
        up,
        &format!(
            "  tls:\n    listen: 0.0.0.0:{tls_port}\n    generatedCaFile: {}\n",
            ca_file.display()
        ),
    )
    .await;
    wait_listening(tls_port, &r).await;
    let ca = std::fs::read_to_string(&ca_file).unwrap();
    let c = tls_support::https_client(&ca, None);
    let url = format!("https://127.0.0.1:{tls_port}{PATH}");

    let resp = c
        .request(Request::get(&url).body(Full::default()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    assert_status(&String::from_utf8_lossy(&body), 401, "Unauthorized");
    assert!(
        log.lock().unwrap().is_empty(),
        "nothing reached the upstream"
    );

    let resp = c
        .request(
            Request::get(&url)
                .header("authorization", "Bearer the-callers-token")
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let seen = log.lock().unwrap().clone();
    assert_eq!(seen.len(), 1);
    assert_eq!(
        seen[0].authorization.as_deref(),
        Some("Bearer the-callers-token"),
        "forwarded with the caller's token, not regroup's"
    );
    assert!(!r.log().contains("the-callers-token") && !r.log().contains(OWN_TOKEN));
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn check_refuses_lending_by_accident_and_warns_when_opted_in() {
    let dir = test_dir("check");
    let base =
        "rules:\n- from: samplecontroller.k8s.io\n  to: samplecontroller.team1.example.com\n\
                listeners:\n  tls:\n    listen: 0.0.0.0:8443\n    generatedCaFile: /tmp/ca.crt\n";
    let check = |name: &str, yaml: String| {
        let f = dir.join(name);
        std::fs::write(&f, yaml).unwrap();
        Command::new(env!("CARGO_BIN_EXE_regroup"))
            .arg("check")
            .arg("-c")
            .arg(&f)
            .output()
            .unwrap()
    };
    let out = check(
        "refused.yaml",
        format!("{base}credentials:\n  passThrough: false\n"),
    );
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("credentials.passThrough: false"), "{err}");

    let out = check(
        "lend.yaml",
        format!("{base}    dangerousLendCredentials: true\n"),
    );
    assert!(out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("warning: listeners.tls.dangerousLendCredentials"),
        "{err}"
    );

    let out = check("plain.yaml", base.to_owned());
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("warning"));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_slowloris_connection_is_closed_within_the_header_timeout() {
    let (up, _log) = upstream().await;
    let r = start("slowloris", up, "limits:\n  headerReadTimeout: 2s\n").await;
    let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    let started = Instant::now();
    s.write_all(b"GET /api HTTP/1.1\r\nHost: localhost\r\n")
        .await
        .unwrap();
    // One header byte every 200 ms, until regroup closes the connection.
    let closed_after = loop {
        let mut buf = [0u8; 512];
        match tokio::time::timeout(Duration::from_millis(200), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break started.elapsed(),
            Ok(Ok(_)) => {} // an error response before the close
            Err(_) => {}
        }
        if s.write_all(b"X").await.is_err() {
            break started.elapsed();
        }
        assert!(
            started.elapsed() < Duration::from_secs(30),
            "still open after 30 s"
        );
    };
    assert!(
        closed_after < Duration::from_secs(6),
        "closed after {closed_after:?}, want within 3x the 2 s header timeout"
    );
    assert!(
        closed_after >= Duration::from_millis(1500),
        "{closed_after:?}"
    );
    eprintln!(
        "slowloris: dribbling connection closed after {closed_after:?} (headerReadTimeout 2s)"
    );
    // A connection that sends nothing at all is closed too.
    let mut silent = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    let started = Instant::now();
    let mut buf = [0u8; 64];
    let n = tokio::time::timeout(Duration::from_secs(20), silent.read(&mut buf))
        .await
        .expect("closed within 20 s");
    let closed_after = started.elapsed();
    assert!(matches!(n, Ok(0) | Err(_)), "{n:?}");
    assert!(
        closed_after < Duration::from_secs(6),
        "silent connection closed after {closed_after:?}"
    );
    eprintln!("slowloris: silent connection closed after {closed_after:?}");
    // And it still serves.
    let (code, _) = get(r.port, PATH, "localhost").await;
    assert_eq!(code, 200);
}

/// Reads until the peer closes (or errors), at most `within`; how long that
/// took, `None` if still open.
async fn closed_within(s: &mut TcpStream, within: Duration) -> Option<Duration> {
    let started = Instant::now();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout_at((started + within).into(), s.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return Some(started.elapsed()),
            Ok(Ok(_)) => {}
            Err(_) => return None,
        }
    }
}

/// The connection limits the watchdog enforces (one coarse timer per
/// listener), each on the real binary: never early, late by at most a
/// second.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_and_half_sent_connections_close_at_their_limits() {
    let (up, _log) = upstream().await;
    let r = start(
        "conn-limits",
        up,
        "limits:\n  headerReadTimeout: 2s\n  idleTimeout: 4s\n",
    )
    .await;
    let within = |d: Duration, limit: Duration| {
        assert!(
            d >= limit.mul_f64(0.9) && d <= limit + Duration::from_secs(1),
            "closed after {d:?}, limit {limit:?}"
        )
    };
    // HTTP/1.1 kept alive after a response: the next head is due within
    // headerReadTimeout (the shorter limit here).
    let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    s.write_all(format!("GET {PATH} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = [0u8; 12];
    s.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    let idle = closed_within(&mut s, Duration::from_secs(10))
        .await
        .expect("an idle HTTP/1.1 connection is closed");
    within(idle, Duration::from_secs(2));
    eprintln!("idle HTTP/1.1 keep-alive closed after {idle:?} (headerReadTimeout 2s)");
    // Half a request line, then nothing.
    let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    s.write_all(b"GET /ap").await.unwrap();
    let half = closed_within(&mut s, Duration::from_secs(10))
        .await
        .expect("a half-sent head is cut");
    within(half, Duration::from_secs(2));
    // Part of the HTTP/2 preface (still undecided which protocol), then
    // nothing.
    let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    s.write_all(b"PRI * HTTP/2").await.unwrap();
    let pri = closed_within(&mut s, Duration::from_secs(10))
        .await
        .expect("a half-sent preface is cut");
    within(pri, Duration::from_secs(2));
    // HTTP/2 (h2c prior knowledge) after a response: idleTimeout only.
    let stream = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    let (mut h2, conn) =
        hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
            .await
            .unwrap();
    let driver = tokio::spawn(conn);
    let resp = h2
        .send_request(
            Request::get(format!("http://localhost{PATH}"))
                .body(Full::<Bytes>::default())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    resp.into_body().collect().await.unwrap();
    let started = Instant::now();
    tokio::time::timeout(Duration::from_secs(10), driver)
        .await
        .expect("an idle HTTP/2 connection is closed")
        .unwrap()
        .ok();
    within(started.elapsed(), Duration::from_secs(4));
    eprintln!(
        "idle HTTP/2 closed after {:?} (idleTimeout 4s)",
        started.elapsed()
    );
    // An HTTP/2 connection with only its preface sent: no request within
    // headerReadTimeout.
    let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    s.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n\0\0\0\x04\0\0\0\0\0")
        .await
        .unwrap();
    let silent = closed_within(&mut s, Duration::from_secs(10))
        .await
        .expect("an HTTP/2 connection without a request is closed");
    within(silent, Duration::from_secs(2));
    // A watch outlives every limit: a request in flight is never cut.
    let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    s.write_all(
        b"GET /api/v1/namespaces/ns/configmaps?watch=1 HTTP/1.1\r\nHost: localhost\r\n\r\n",
    )
    .await
    .unwrap();
    assert_eq!(
        closed_within(&mut s, Duration::from_secs(6)).await,
        None,
        "a watch open for 6 s (limits 2 s and 4 s) was closed"
    );
    let (code, _) = get(r.port, PATH, "localhost").await;
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_that_never_answers_gives_504_within_the_timeout() {
    let (up, log) = upstream().await;
    let r = start("hang", up, "limits:\n  upstreamResponseHeaderTimeout: 2s\n").await;
    let started = Instant::now();
    let (code, text) = get(r.port, "/api/v1/namespaces/hang/configmaps", "localhost").await;
    let took = started.elapsed();
    assert_eq!(code, 504, "{text}");
    assert_status(&text, 504, "Timeout");
    assert!(
        took < Duration::from_secs(6) && took >= Duration::from_millis(1500),
        "answered after {took:?}, want about the 2 s timeout"
    );
    assert_eq!(log.lock().unwrap().len(), 1, "it did reach the upstream");
    eprintln!("hung upstream: 504 after {took:?} (upstreamResponseHeaderTimeout 2s)");
    // A watch is not cut by it: it streams past the timeout.
    let stream = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    let (mut h1, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let resp = h1
        .send_request(local_get("/api/v1/namespaces/ns/configmaps?watch=1"))
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::OK);
    let mut body = resp.into_body();
    let started = Instant::now();
    let mut events = 0;
    while started.elapsed() < Duration::from_secs(3) {
        let f = body.frame().await.unwrap().unwrap();
        if f.data_ref().is_some() {
            events += 1;
        }
    }
    assert!(events >= 5, "{events} events");
    let m = metrics_text(r.metrics).await;
    assert!(m.contains("reason=\"timeout\"} 1"), "{m}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_does_not_kill_and_sigterm_drains_then_exits_0() {
    let (up, log) = upstream().await;
    let mut r = start("lifecycle", up, "limits:\n  shutdownGracePeriod: 20s\n").await;
    r.signal("HUP");
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert!(
        r.child.try_wait().unwrap().is_none(),
        "SIGHUP killed regroup"
    );
    let (code, _) = get(r.port, PATH, "localhost").await;
    assert_eq!(code, 200, "still serving after SIGHUP");
    assert!(r.log().contains("SIGHUP"), "{}", r.log());

    // A watch and a slow request in flight.
    let stream = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    let (mut h1, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn);
    let watch = h1
        .send_request(local_get("/api/v1/namespaces/ns/configmaps?watch=1"))
        .await
        .unwrap();
    let mut watch = watch.into_body();
    assert!(watch.frame().await.unwrap().unwrap().is_data());
    let port = r.port;
    let slow =
        tokio::spawn(
            async move { get(port, "/api/v1/namespaces/slow/configmaps", "localhost").await },
        );
    while !log
        .lock()
        .unwrap()
        .iter()
        .any(|s| s.path.contains("/slow/"))
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let term_at = Instant::now();
    r.signal("TERM");

    // The watch ends cleanly (a final chunk, whole events only).
    let rest = tokio::time::timeout(Duration::from_secs(10), watch.collect())
        .await
        .expect("the watch ends at shutdown")
        .expect("cleanly, not cut");
    let rest = rest.to_bytes();
    assert!(rest.is_empty() || rest.ends_with(b"\n"), "{rest:?}");
    // The slow request completes.
    let (code, text) = slow.await.unwrap();
    assert_eq!(code, 200, "{text}");
    assert!(
        text.contains("samplecontroller") || text.contains("Foo"),
        "{text}"
    );
    // No new connections once draining... and exit 0.
    let deadline = Instant::now() + Duration::from_secs(15);
    let status = loop {
        if let Some(s) = r.child.try_wait().unwrap() {
            break s;
        }
        assert!(Instant::now() < deadline, "did not exit:\n{}", r.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "{status:?}\n{}", r.log());
    assert!(
        term_at.elapsed() < Duration::from_secs(15),
        "exited within the grace period"
    );
    eprintln!(
        "SIGTERM: exited 0 after {:?} with a 3 s request in flight",
        term_at.elapsed()
    );
    assert!(TcpStream::connect(("127.0.0.1", r.port)).await.is_err());
    assert!(r.log().contains("drained"), "{}", r.log());
}

/// The log is written a worker's lines at a time (`cmd/serve/log_writer.rs`):
/// under concurrent keep-alive load every request still has its line, every
/// line is whole (none cut into another), and the lines are written by
/// the time the process shuts down.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn every_request_line_is_logged_whole_under_load_and_at_sigterm() {
    const CLIENTS: usize = 8;
    const EACH: usize = 150;
    let (up, _) = upstream().await;
    let mut r = start("request-lines", up, "").await;
    let port = r.port;
    let clients: Vec<_> = (0..CLIENTS)
        .map(|_| {
            tokio::spawn(async move {
                let stream = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
                let (mut h1, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
                    .await
                    .unwrap();
                tokio::spawn(conn);
                for _ in 0..EACH {
                    let resp = h1.send_request(local_get(PATH)).await.unwrap();
                    assert_eq!(resp.status(), StatusCode::OK);
                    resp.into_body().collect().await.unwrap();
                }
            })
        })
        .collect();
    for c in clients {
        c.await.unwrap();
    }
    r.signal("TERM");
    let deadline = Instant::now() + Duration::from_secs(15);
    while r.child.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "did not exit:\n{}", r.log());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let log = r.log();
    let request_line = "INFO regroup::request: request listener=\"sidecar\" method=GET verb=\"get\" \
         path=/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos/{name} status=200 us=";
    let mut requests = 0;
    for line in log.lines() {
        // `2026-11-25T01:02:03.000004Z  INFO target: ...`: a timestamp, a
        // level, the rest; a line cut into another fails here.
        let (stamp, rest) = line.split_at_checked(27).unwrap_or((line, ""));
        let level = rest.trim_start().split(' ').next().unwrap_or("");
        assert!(
            stamp.len() == 27
                && stamp.as_bytes()[4] == b'-'
                && stamp.as_bytes()[10] == b'T'
                && stamp.ends_with('Z')
                && ["TRACE", "DEBUG", "INFO", "WARN", "ERROR"].contains(&level),
            "not a whole log line: {line:?}"
        );
        if let Some(us) = line.split_once(request_line).map(|(_, us)| us) {
            assert!(us.parse::<u64>().is_ok(), "{line:?}");
            requests += 1;
        }
    }
    assert_eq!(requests, CLIENTS * EACH, "one line per request:\n{log}");
    assert!(log.contains("drained; exiting"), "{log}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_follows_the_upstream_and_livez_the_process() {
    let up = free_port(); // nothing listens there yet
    let r = start("readyz", up, "").await;
    let (code, text) = get(r.metrics, "/readyz", "127.0.0.1").await;
    assert_eq!(code, 503, "{text}");
    assert!(text.contains("[-]upstream failed: GET /readyz: "), "{text}");
    let (code, _) = get(r.metrics, "/livez", "127.0.0.1").await;
    assert_eq!(code, 200);

    let l = TcpListener::bind(("127.0.0.1", up)).await.unwrap();
    let log = Log::default();
    fake_upstream(l, log.clone());
    let (code, text) = get(r.metrics, "/readyz", "127.0.0.1").await;
    assert_eq!(code, 200, "{text}");
    assert!(log.lock().unwrap().iter().any(|s| s.path == "/readyz"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn what_already_held_still_holds() {
    let (up, log) = upstream().await;
    let r = start("held", up, "").await;
    // A 2 MiB header is refused, and the next request served.
    let big = "a".repeat(2 << 20);
    let (code, _) = raw(
        r.port,
        format!("GET {PATH} HTTP/1.1\r\nHost: localhost\r\nX-Big: {big}\r\n\r\n").as_bytes(),
    )
    .await;
    assert!(code == 431 || code == 400 || code == 0, "{code}");
    // 2,000 headers too.
    let many: String = (0..2000).map(|i| format!("X-H{i}: v\r\n")).collect();
    let (code, _) = raw(
        r.port,
        format!("GET {PATH} HTTP/1.1\r\nHost: localhost\r\n{many}\r\n").as_bytes(),
    )
    .await;
    assert!(code == 431 || code == 400 || code == 0, "{code}");
    // Two different Content-Lengths: 400.
    let (code, _) = raw(
        r.port,
        format!("POST {PATH} HTTP/1.1\r\nHost: localhost\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{{}}").as_bytes(),
    )
    .await;
    assert_eq!(code, 400);
    assert!(log.lock().unwrap().is_empty());
    // Content-Length and Transfer-Encoding together: the smuggled request
    // behind the body never reaches the upstream as a request of its own.
    let smuggled = "GET /api/v1/namespaces/smuggled/secrets HTTP/1.1\r\nHost: localhost\r\n\r\n";
    let body = format!("0\r\n\r\n{smuggled}");
    let _ = raw(
        r.port,
        format!(
            "POST /api/v1/namespaces/ns/configmaps HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n\
             Content-Length: {}\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await;
    assert!(
        !log.lock()
            .unwrap()
            .iter()
            .any(|s| s.path.contains("smuggled")),
        "{:?}",
        log.lock().unwrap()
    );
    // 50 clients that go away in the middle of their bodies.
    for _ in 0..50 {
        let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
        s.write_all(
            b"POST /api/v1/namespaces/ns/configmaps HTTP/1.1\r\nHost: localhost\r\n\
              Content-Type: application/json\r\nContent-Length: 100000\r\n\r\n{\"kind\":",
        )
        .await
        .unwrap();
        drop(s);
    }
    let (code, _) = get(r.port, PATH, "localhost").await;
    assert_eq!(code, 200);
    // Every aborted request is eventually no longer in flight.
    let deadline = Instant::now() + Duration::from_secs(20);
    let m = loop {
        let m = metrics_text(r.metrics).await;
        if m.contains("regroup_requests_in_flight 0") || Instant::now() > deadline {
            break m;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(m.contains("regroup_requests_in_flight 0"), "{m}");
    assert!(m.contains("regroup_build_info{version="), "{m}");
    // The Kubernetes verb, as kube-apiserver's own metrics name it.
    assert!(m.contains("listener=\"sidecar\",verb=\"get\"}"), "{m}");
}

/// JSON nested deeper than the walk accepts, from either side, is a Status
/// and a log line; before the depth limit it overflowed a worker thread's
/// stack and aborted the process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_nested_200000_deep_is_a_status_from_either_side_and_regroup_serves_on() {
    let (up, log) = upstream().await;
    let r = start("deep", up, "").await;
    let body = deep_foo("samplecontroller.k8s.io");
    let (code, text) = raw(
        r.port,
        format!(
            "POST /apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos HTTP/1.1\r\n\
             Host: localhost\r\nContent-Type: application/json\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n{body}",
            body.len()
        )
        .as_bytes(),
    )
    .await;
    assert_eq!(code, 400, "{text:.2000}");
    assert_status(&text, 400, "BadRequest");
    assert!(
        text.contains("nested deeper than 512 levels"),
        "{text:.2000}"
    );
    assert!(
        log.lock().unwrap().is_empty(),
        "the body reached the upstream"
    );
    let (code, text) = get(
        r.port,
        "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/deep/foos/x",
        "localhost",
    )
    .await;
    assert_eq!(code, 502, "{text:.2000}");
    assert!(
        text.contains("nested deeper than 512 levels"),
        "{text:.2000}"
    );
    let (code, _) = get(r.port, PATH, "localhost").await;
    assert_eq!(code, 200);
    assert!(
        r.log().contains("nested deeper than 512 levels"),
        "{}",
        r.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_are_bounded_and_idle_ones_closed() {
    let (up, _log) = upstream().await;
    let r = start(
        "conns",
        up,
        "limits:\n  maxConnections: 3\n  idleTimeout: 1s\n",
    )
    .await;
    // Three connections take every slot (each with a request answered,
    // then idle, HTTP/2 so that only idleTimeout closes them).
    let mut held = Vec::new();
    for _ in 0..3 {
        let stream = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
        let (mut h2, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(stream))
                .await
                .unwrap();
        let driver = tokio::spawn(conn);
        let resp = h2
            .send_request(
                Request::get(format!("http://localhost{PATH}"))
                    .body(Full::<Bytes>::default())
                    .unwrap(),
            )
            .await
            .unwrap();
        assert_eq!(resp.status(), StatusCode::OK);
        held.push((h2, driver));
    }
    // A fourth waits in the backlog: no answer while the three are open...
    let started = Instant::now();
    let fourth = tokio::spawn(get(r.port, PATH, "localhost"));
    // ...until idleTimeout closes them, and then it is served.
    let (code, _) = tokio::time::timeout(Duration::from_secs(10), fourth)
        .await
        .expect("served once idle connections closed")
        .unwrap();
    assert_eq!(code, 200);
    let waited = started.elapsed();
    assert!(
        waited >= Duration::from_millis(500),
        "the fourth connection waited for a slot ({waited:?})"
    );
    for (_, driver) in held {
        let ended = tokio::time::timeout(Duration::from_secs(5), driver).await;
        assert!(ended.is_ok(), "idle HTTP/2 connection closed by regroup");
    }
    let m = metrics_text(r.metrics).await;
    assert!(m.contains("reason=\"connection_limit\""), "{m}");
}

/// The soft limit on open files of this process (the regroup it spawns
/// inherits it), raised towards the hard limit with util-linux `prlimit`
/// when below `want`.
#[cfg(target_os = "linux")]
fn raise_nofile(want: u64) -> u64 {
    let soft = || -> u64 {
        std::fs::read_to_string("/proc/self/limits")
            .unwrap_or_default()
            .lines()
            .find_map(|l| l.strip_prefix("Max open files"))
            .and_then(|r| r.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    if soft() < want {
        let _ = Command::new("prlimit")
            .arg(format!("--pid={}", std::process::id()))
            .arg(format!("--nofile={want}:"))
            .stderr(Stdio::null())
            .status();
    }
    soft()
}

// `process_open_fds` comes from /proc.
#[cfg(target_os = "linux")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_thousand_idle_connections_leave_it_serving() {
    const IDLE: usize = 2000;
    // This process holds IDLE client sockets, regroup IDLE accepted ones.
    let limit = raise_nofile(IDLE as u64 * 2 + 500);
    if limit < IDLE as u64 + 500 {
        eprintln!(
            "SKIPPED: open-file limit {limit} cannot be raised to {} (prlimit failed)",
            IDLE + 500
        );
        return;
    }
    let (up, _log) = upstream().await;
    let r = start("idle2000", up, "").await;
    let mut idle = Vec::with_capacity(IDLE);
    for _ in 0..IDLE {
        idle.push(TcpStream::connect(("127.0.0.1", r.port)).await.unwrap());
    }
    // Accepted, not just queued in the backlog: regroup holds them all.
    let deadline = Instant::now() + Duration::from_secs(30);
    let fds = loop {
        let m = metrics_text(r.metrics).await;
        let fds: f64 = m
            .lines()
            .find_map(|l| l.strip_prefix("process_open_fds "))
            .and_then(|v| v.trim().parse().ok())
            .expect("process_open_fds on /metrics");
        if fds >= IDLE as f64 || Instant::now() > deadline {
            break fds;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(fds >= IDLE as f64, "regroup holds {fds} fds");
    // Served while they are all open.
    for _ in 0..5 {
        let (code, text) = get(r.port, PATH, "localhost").await;
        assert_eq!(code, 200, "{text}");
    }
    drop(idle);
    let (code, _) = get(r.port, PATH, "localhost").await;
    assert_eq!(code, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn readyz_fails_while_the_fronts_request_header_ca_is_unreadable() {
    let (up, _log) = upstream().await;
    let ca_dir = test_dir("front-ca");
    let ca_file = ca_dir.join("front-proxy-ca.crt");
    let ca = regroup::net::tls::generate_for("test front-proxy CA", &[], false).unwrap();
    std::fs::write(&ca_file, ca.ca_pem.as_deref().unwrap()).unwrap();
    let front = format!(
        "front:\n  listen: 127.0.0.1:{}\n  backend: https://127.0.0.1:{}\n  \
         dangerousInsecureBackend: true\n  requestHeader:\n    fromCluster: false\n    clientCaFile: {}\n",
        free_port(),
        free_port(),
        ca_file.display()
    );
    let r = start("readyz-front", up, &front).await;
    let (code, text) = get(r.metrics, "/readyz", "127.0.0.1").await;
    assert_eq!(code, 200, "{text}\n{}", r.log());

    // Gone (a Secret volume emptied): the front still serves with what it
    // loaded, but is not ready, and says why.
    std::fs::remove_file(&ca_file).unwrap();
    let (code, text) = get(r.metrics, "/readyz", "127.0.0.1").await;
    assert_eq!(code, 503, "{text}");
    assert!(
        text.contains("front request-header CA") && text.contains("front-proxy-ca.crt"),
        "{text}"
    );
    // Not a certificate: still not ready.
    std::fs::write(&ca_file, "not a certificate").unwrap();
    let (code, text) = get(r.metrics, "/readyz", "127.0.0.1").await;
    assert_eq!(code, 503, "{text}");
    assert!(
        !text.contains("not a certificate"),
        "no file content in: {text}"
    );

    std::fs::write(&ca_file, ca.ca_pem.as_deref().unwrap()).unwrap();
    let (code, text) = get(r.metrics, "/readyz", "127.0.0.1").await;
    assert_eq!(code, 200, "{text}");
    let _ = std::fs::remove_dir_all(&ca_dir);
}
