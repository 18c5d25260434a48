//! Streams and failures over real sockets: watch events pass as they
//! arrive, a departed client tears down the upstream watch, a dropped
//! upstream ends the client's watch cleanly, protocol upgrades are spliced,
//! and malformed bodies become Status errors (400 from the app, 502 from the
//! apiserver).

use crate::common;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

type UpBody = http_body_util::combinators::BoxBody<Bytes, std::convert::Infallible>;

/// An upstream whose every response comes from `respond`.
async fn upstream<F>(respond: F) -> String
where
    F: Fn(Request<hyper::body::Incoming>) -> Response<UpBody> + Send + Sync + 'static,
{
    let respond = Arc::new(respond);
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let respond = respond.clone();
            tokio::spawn(async move {
                let svc = service_fn(move |req| {
                    let r = respond(req);
                    async move { Ok::<_, std::convert::Infallible>(r) }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .with_upgrades()
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

async fn regroup(server: String) -> String {
    common::sidecar(server, None).await.to_string()
}

fn event(kind: &str, name: &str) -> Bytes {
    Bytes::from(format!(
        "{{\"type\":\"{kind}\",\"object\":{{\"apiVersion\":\"samplecontroller.team1.example.com/v1alpha1\",\"kind\":\"Foo\",\"metadata\":{{\"name\":\"{name}\"}}}}}}\n"
    ))
}

/// A watch whose events the test sends one by one; the receiver half tells
/// when the upstream body was dropped (the connection torn down).
fn watch_upstream(
    events: mpsc::Receiver<Bytes>,
    closed: mpsc::Sender<()>,
) -> impl Fn(Request<hyper::body::Incoming>) -> Response<UpBody> {
    let events = Arc::new(std::sync::Mutex::new(Some(events)));
    move |_req| {
        let mut rx = events.lock().unwrap().take().expect("one watch");
        let closed = closed.clone();
        let s = async_stream(
            move |tx: mpsc::Sender<Result<Frame<Bytes>, std::convert::Infallible>>| async move {
                while let Some(e) = rx.recv().await {
                    if tx.send(Ok(Frame::data(e))).await.is_err() {
                        let _ = closed.send(()).await;
                        return;
                    }
                }
            },
        );
        Response::builder()
            .header("content-type", "application/json")
            .body(StreamBody::new(s).boxed())
            .unwrap()
    }
}

/// A stream fed by a task; the task sees send errors once the stream is dropped.
fn async_stream<F, Fut>(
    f: F,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, std::convert::Infallible>>
where
    F: FnOnce(mpsc::Sender<Result<Frame<Bytes>, std::convert::Infallible>>) -> Fut,
    Fut: std::future::Future<Output = ()> + Send + 'static,
{
    let (tx, mut rx) = mpsc::channel(1);
    tokio::spawn(f(tx));
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

const WATCH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos?watch=1";

#[tokio::test]
async fn watch_events_arrive_one_by_one_renamed_and_a_dropped_upstream_ends_cleanly() {
    let (tx, rx) = mpsc::channel(8);
    let (closed_tx, _closed_rx) = mpsc::channel(1);
    let addr = regroup(upstream(watch_upstream(rx, closed_tx)).await).await;
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let resp = client
        .request(
            Request::get(format!("http://{addr}{WATCH}"))
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    let mut body = resp.into_body();
    for name in ["a", "b"] {
        tx.send(event("ADDED", name)).await.unwrap();
        // Each event arrives before the next is even sent: nothing buffered.
        let frame = tokio::time::timeout(Duration::from_secs(5), body.frame())
            .await
            .expect("event forwarded without waiting for more")
            .unwrap()
            .unwrap();
        let data = frame.into_data().unwrap();
        let text = String::from_utf8_lossy(&data);
        assert!(
            text.contains("\"samplecontroller.k8s.io/v1alpha1\""),
            "{text}"
        );
        assert!(text.contains(&format!("\"name\":\"{name}\"")) && text.ends_with('\n'));
    }
    drop(tx); // the upstream ends the watch
    let end = tokio::time::timeout(Duration::from_secs(5), body.frame())
        .await
        .unwrap();
    assert!(end.is_none(), "the client's watch ends cleanly");
}

#[tokio::test]
async fn a_client_that_goes_away_tears_down_the_upstream_watch() {
    let (tx, rx) = mpsc::channel(8);
    let (closed_tx, mut closed_rx) = mpsc::channel(1);
    let addr = regroup(upstream(watch_upstream(rx, closed_tx)).await).await;
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let resp = client
        .request(
            Request::get(format!("http://{addr}{WATCH}"))
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    let mut body = resp.into_body();
    tx.send(event("ADDED", "a")).await.unwrap();
    body.frame().await.unwrap().unwrap();
    drop(body);
    drop(client);
    // Keep sending until the upstream notices nobody reads any more.
    let gone = tokio::time::timeout(Duration::from_secs(10), async {
        loop {
            let _ = tx.send(event("MODIFIED", "a")).await;
            tokio::select! {
                _ = closed_rx.recv() => return,
                _ = tokio::time::sleep(Duration::from_millis(20)) => {}
            }
        }
    })
    .await;
    assert!(gone.is_ok(), "the upstream watch was not torn down");
}

/// Tells when it is dropped.
struct DropSignal(Option<tokio::sync::oneshot::Sender<()>>);

impl Drop for DropSignal {
    fn drop(&mut self) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(());
        }
    }
}

/// A client that leaves a watch with no further events (the upstream sends
/// nothing more, so no write can fail) still tears down the upstream watch:
/// the listener's watchdog looks for the close of an HTTP/1.1 connection
/// with a request in flight (hyper itself does not read it then).
#[tokio::test]
async fn a_client_that_leaves_a_quiet_watch_tears_down_the_upstream_watch() {
    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel();
    let dropped = Arc::new(std::sync::Mutex::new(Some(dropped_tx)));
    let server = upstream(move |_req| {
        let guard = DropSignal(dropped.lock().unwrap().take());
        // One event, then nothing: the stream (and the guard) lives until
        // the upstream connection is torn down.
        let s = futures_util::StreamExt::chain(
            futures_util::stream::iter([Ok(Frame::data(event("ADDED", "a")))]),
            futures_util::stream::poll_fn(move |_| {
                let _ = &guard;
                std::task::Poll::Pending
            }),
        );
        Response::builder()
            .header("content-type", "application/json")
            .body(StreamBody::new(s).boxed())
            .unwrap()
    })
    .await;
    let addr = regroup(server).await;
    let mut c = tokio::net::TcpStream::connect(&addr).await.unwrap();
    c.write_all(format!("GET {WATCH} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&got).contains("\"ADDED\"") {
        let n = tokio::time::timeout(Duration::from_secs(10), c.read(&mut buf))
            .await
            .expect("the first event in time")
            .unwrap();
        assert!(n > 0, "regroup closed the watch");
        got.extend_from_slice(&buf[..n]);
    }
    drop(c);
    let gone = tokio::time::timeout(Duration::from_secs(10), dropped_rx).await;
    assert!(gone.is_ok(), "the quiet upstream watch was not torn down");
}

/// A client that leaves before the upstream has answered ends the upstream
/// request too (no response is ever written that could fail).
#[tokio::test]
async fn a_client_that_leaves_before_the_answer_ends_the_upstream_request() {
    let (dropped_tx, dropped_rx) = tokio::sync::oneshot::channel();
    let dropped = Arc::new(std::sync::Mutex::new(Some(dropped_tx)));
    let (arrived_tx, arrived_rx) = tokio::sync::oneshot::channel();
    let arrived = Arc::new(std::sync::Mutex::new(Some(arrived_tx)));
    // An upstream that never answers: its request lives (with the guard)
    // until the connection regroup opened for it is closed.
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let up = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        let (s, _) = l.accept().await.unwrap();
        let svc = service_fn(move |_req| {
            let guard = DropSignal(dropped.lock().unwrap().take());
            if let Some(tx) = arrived.lock().unwrap().take() {
                let _ = tx.send(());
            }
            async move {
                let _guard = guard;
                std::future::pending::<Result<Response<UpBody>, std::convert::Infallible>>().await
            }
        });
        let _ = hyper::server::conn::http1::Builder::new()
            .serve_connection(TokioIo::new(s), svc)
            .await;
    });
    let addr = regroup(up).await;
    let mut c = tokio::net::TcpStream::connect(&addr).await.unwrap();
    c.write_all(b"GET /apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    tokio::time::timeout(Duration::from_secs(10), arrived_rx)
        .await
        .expect("the request reached the upstream")
        .unwrap();
    drop(c);
    let gone = tokio::time::timeout(Duration::from_secs(10), dropped_rx).await;
    assert!(gone.is_ok(), "the upstream request outlived its client");
}

#[tokio::test]
async fn a_malformed_watch_event_becomes_an_error_event_and_ends_the_watch() {
    let server = upstream(|_| {
        let body = "{\"type\":\"ADDED\",\"object\":{\"apiVersion\":\"samplecontroller.team1.example.com/v1alpha1\"\n{\"type\":\"ADDED\"}\n";
        Response::builder()
            .header("content-type", "application/json")
            .body(Full::new(Bytes::from(body)).boxed())
            .unwrap()
    })
    .await;
    let addr = regroup(server).await;
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let resp = client
        .request(
            Request::get(format!("http://{addr}{WATCH}"))
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&body);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 1, "{text}");
    let ev: serde_json::Value = serde_json::from_str(lines[0]).unwrap();
    assert_eq!(ev["type"], "ERROR");
    assert_eq!(ev["object"]["kind"], "Status");
    assert_eq!(ev["object"]["code"], 502);
    assert!(!text.contains("team1"), "never the unrenamed bytes");
}

#[tokio::test]
async fn malformed_bodies_are_400_from_the_app_and_502_from_the_apiserver() {
    let server = upstream(|_| {
        Response::builder()
            .header("content-type", "application/json")
            .body(
                Full::new(Bytes::from_static(
                    b"{\"apiVersion\":\"samplecontroller.team1.example.com/v1\",",
                ))
                .boxed(),
            )
            .unwrap()
    })
    .await;
    let addr = regroup(server).await;
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let send = |req: Request<Full<Bytes>>| {
        let client = client.clone();
        async move {
            let resp = client.request(req).await.unwrap();
            let status = resp.status();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (
                status,
                serde_json::from_slice::<serde_json::Value>(&body).unwrap(),
            )
        }
    };
    let (status, st) = send(
        Request::post(format!(
            "http://{addr}/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos"
        ))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(
            b"{\"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\",",
        )))
        .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    assert_eq!(
        (st["kind"].as_str(), st["code"].as_u64()),
        (Some("Status"), Some(400))
    );
    let (status, st) = send(
        Request::get(format!(
            "http://{addr}/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/a"
        ))
        .body(Full::default())
        .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::BAD_GATEWAY);
    assert_eq!(
        (st["kind"].as_str(), st["code"].as_u64()),
        (Some("Status"), Some(502))
    );
}

/// An upgrade through regroup: `request` headers must reach the upstream as
/// sent, the upstream's 101 carries `answer` headers that must reach the
/// client as sent, then bytes cross both ways.
async fn splice_upgrade(
    method: &'static str,
    path: &str,
    request: &'static [(&'static str, &'static str)],
    answer: &'static [(&'static str, &'static str)],
) {
    let server = upstream(move |mut req| {
        for (name, value) in request {
            assert_eq!(req.headers().get(*name).unwrap(), value, "{name} upstream");
        }
        let on = hyper::upgrade::on(&mut req);
        tokio::spawn(async move {
            let mut io = TokioIo::new(on.await.unwrap());
            let mut buf = [0u8; 5];
            io.read_exact(&mut buf).await.unwrap();
            io.write_all(
                &buf.iter()
                    .map(|b| b.to_ascii_uppercase())
                    .collect::<Vec<_>>(),
            )
            .await
            .unwrap();
        });
        let mut resp = Response::builder().status(StatusCode::SWITCHING_PROTOCOLS);
        for (name, value) in answer {
            resp = resp.header(*name, *value);
        }
        resp.body(Full::new(Bytes::new()).boxed()).unwrap()
    })
    .await;
    let addr = regroup(server).await;
    let stream = tokio::net::TcpStream::connect(&addr).await.unwrap();
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream))
        .await
        .unwrap();
    tokio::spawn(conn.with_upgrades());
    let mut req = Request::builder()
        .method(method)
        .uri(path)
        .header("host", "localhost"); // a foreign Host gets 403 (DNS rebinding)
    for (name, value) in request {
        req = req.header(*name, *value);
    }
    let resp = sender
        .send_request(req.body(Full::<Bytes>::default()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::SWITCHING_PROTOCOLS);
    for (name, value) in answer {
        assert_eq!(
            resp.headers().get(*name).unwrap(),
            value,
            "{name} to the client"
        );
    }
    let mut io = TokioIo::new(hyper::upgrade::on(resp).await.unwrap());
    io.write_all(b"hello").await.unwrap();
    let mut buf = [0u8; 5];
    tokio::time::timeout(Duration::from_secs(5), io.read_exact(&mut buf))
        .await
        .unwrap()
        .unwrap();
    assert_eq!(&buf, b"HELLO");
}

#[tokio::test]
async fn protocol_upgrades_are_spliced_both_ways() {
    // kubectl's SPDY exec (before 1.30, and its fallback since).
    splice_upgrade(
        "POST",
        "/api/v1/namespaces/ns/pods/p/exec?command=sh",
        &[("connection", "Upgrade"), ("upgrade", "SPDY/3.1")],
        &[("connection", "Upgrade"), ("upgrade", "SPDY/3.1")],
    )
    .await;
}

#[tokio::test]
async fn websocket_port_forward_is_spliced_with_its_subprotocol() {
    // kubectl 1.31+ port-forward: SPDY tunnelled in WebSocket messages. The
    // Sec-WebSocket-* headers must cross untouched both ways, or the client
    // refuses the handshake and falls back to SPDY.
    splice_upgrade(
        "GET",
        "/api/v1/namespaces/ns/pods/p/portforward?ports=8080",
        &[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-version", "13"),
            ("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ=="),
            ("sec-websocket-protocol", "SPDY/3.1+portforward.k8s.io"),
        ],
        &[
            ("connection", "Upgrade"),
            ("upgrade", "websocket"),
            ("sec-websocket-accept", "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="),
            ("sec-websocket-protocol", "SPDY/3.1+portforward.k8s.io"),
        ],
    )
    .await;
}
