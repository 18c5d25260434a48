//! A TLS upstream offering h2 and HTTP/1.1 that holds watches open, and a
//! relay that can freeze the connections through it: what the tests of
//! regroup's upstream connections (the h2 health check, the server's
//! stream limit, `upstream.http2`) need from an apiserver and a network.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use futures_util::StreamExt as _;
use http::{Request, Response, Version};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::net::tls;
use std::time::{Duration, Instant};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

use crate::regroup_binary::{read_to_end_within, Regroup};

pub const FOO: &str = r#"{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"alpha","resourceVersion":"1"}}"#;
pub const PATH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/alpha";
pub const WATCH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos?watch=1";
/// The same watch on the legacy `/watch/` path.
pub const LEGACY_WATCH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/watch/namespaces/ns/foos";

/// A TLS upstream offering h2 and HTTP/1.1, allowing `max_streams` streams
/// per h2 connection (`None`: hyper's default, hundreds). A watch gets one
/// event, then stays open until `end_watches` (or the upstream is
/// dropped); a request with the query `hold` is never answered; any other
/// request gets FOO.
/// Counts the TCP connections it accepts; records each request's protocol
/// and path.
pub struct WatchUpstream {
    pub port: u16,
    pub ca_pem: String,
    accepted: Arc<AtomicUsize>,
    closed: Arc<AtomicUsize>,
    requests: Arc<Mutex<Vec<(Version, String)>>>,
    end: watch::Sender<bool>,
}

impl WatchUpstream {
    pub async fn start(max_streams: Option<u32>) -> WatchUpstream {
        WatchUpstream::offering(max_streams, true).await
    }

    /// Like [`WatchUpstream::start`]; `h2: false` offers HTTP/1.1 only by
    /// ALPN (a server that turns h2 down).
    pub async fn offering(max_streams: Option<u32>, h2: bool) -> WatchUpstream {
        let id = tls::generate().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let mut config = (*tls::server_config(&id).unwrap()).clone();
        if !h2 {
            config.alpn_protocols = vec![b"http/1.1".to_vec()];
        }
        let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
        let accepted = Arc::new(AtomicUsize::new(0));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let (end, ended) = watch::channel(false);
        let closed = Arc::new(AtomicUsize::new(0));
        let count = accepted.clone();
        let ends = closed.clone();
        let seen = requests.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                let ended = ended.clone();
                let seen = seen.clone();
                let ends = ends.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let mut ended = ended.clone();
                        let pq = req.uri().path_and_query().map(|p| p.to_string());
                        seen.lock()
                            .unwrap()
                            .push((req.version(), pq.unwrap_or_default()));
                        async move {
                            if req.uri().query() == Some("hold") {
                                std::future::pending::<()>().await;
                            }
                            let watching =
                                req.uri().query().unwrap_or_default().starts_with("watch")
                                    || req.uri().path().contains("/watch/");
                            let body = if watching {
                                let event = format!("{{\"type\":\"ADDED\",\"object\":{FOO}}}\n");
                                let first = futures_util::stream::once(async move {
                                    Ok::<_, std::convert::Infallible>(Frame::data(Bytes::from(
                                        event,
                                    )))
                                });
                                // Open until the test ends the watches.
                                let until_ended = futures_util::stream::once(async move {
                                    let _ = ended.wait_for(|e| *e).await;
                                })
                                .filter_map(|()| async { None });
                                BodyExt::boxed(StreamBody::new(first.chain(until_ended)))
                            } else {
                                Full::new(Bytes::from_static(FOO.as_bytes()))
                                    .map_err(|never| match never {})
                                    .boxed()
                            };
                            Ok::<_, std::convert::Infallible>(
                                Response::builder()
                                    .header("content-type", "application/json")
                                    .body(body)
                                    .unwrap(),
                            )
                        }
                    });
                    if let Ok(s) = acceptor.accept(stream).await {
                        let mut b =
                            hyper_util::server::conn::auto::Builder::new(TokioExecutor::new());
                        if let Some(n) = max_streams {
                            b.http2().max_concurrent_streams(n);
                        }
                        let _ = b.serve_connection(TokioIo::new(s), svc).await;
                    }
                    ends.fetch_add(1, Ordering::SeqCst);
                });
            }
        });
        WatchUpstream {
            port,
            ca_pem: id.ca_pem.unwrap(),
            accepted,
            closed,
            requests,
            end,
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Connections open now (accepted, not yet ended).
    pub fn open(&self) -> usize {
        self.accepted() - self.closed.load(Ordering::SeqCst)
    }

    /// Every request received so far: its protocol, its path and query.
    pub fn requests(&self) -> Vec<(Version, String)> {
        self.requests.lock().unwrap().clone()
    }

    /// Ends every open watch (and any opened later).
    pub fn end_watches(&self) {
        self.end.send_replace(true);
    }
}

/// A TCP relay to `upstream`: counts the connections it accepts, and
/// `freeze` stops forwarding on every connection open then (bytes either
/// way are dropped, the sockets stay open) while new connections are
/// relayed as before.
pub struct Relay {
    pub port: u16,
    accepted: Arc<AtomicUsize>,
    open: Arc<Mutex<Vec<Arc<AtomicBool>>>>,
}

impl Relay {
    pub async fn start(upstream: u16) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let r = Relay {
            port,
            accepted: Arc::default(),
            open: Arc::default(),
        };
        let (accepted, open) = (r.accepted.clone(), r.open.clone());
        tokio::spawn(async move {
            loop {
                let (client, _) = listener.accept().await.unwrap();
                accepted.fetch_add(1, Ordering::SeqCst);
                let server = TcpStream::connect(("127.0.0.1", upstream)).await.unwrap();
                let frozen = Arc::new(AtomicBool::new(false));
                open.lock().unwrap().push(frozen.clone());
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(copy(cr, sw, frozen.clone()));
                tokio::spawn(copy(sr, cw, frozen));
            }
        });
        r
    }

    pub fn freeze(&self) {
        for f in self.open.lock().unwrap().iter() {
            f.store(true, Ordering::SeqCst);
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }
}

/// Copies until either side closes; once frozen, reads and drops.
async fn copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    frozen: Arc<AtomicBool>,
) {
    let mut buf = vec![0u8; 16 * 1024];
    loop {
        let n = match from.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        if frozen.load(Ordering::SeqCst) {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

/// A watch of `path` through regroup, its first event read: its stream is
/// open.
pub async fn open_watch(r: &Regroup, path: &str) -> TcpStream {
    let mut s = TcpStream::connect(("127.0.0.1", r.port)).await.unwrap();
    s.write_all(
        format!("GET {path} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n").as_bytes(),
    )
    .await
    .unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let deadline = Instant::now() + Duration::from_secs(10);
    while !String::from_utf8_lossy(&got).contains("\"ADDED\"") {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, s.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => got.extend_from_slice(&buf[..n]),
            other => panic!(
                "no first event ({other:?}): {}\n{}",
                String::from_utf8_lossy(&got),
                r.log()
            ),
        }
    }
    assert!(
        got.starts_with(b"HTTP/1.1 200"),
        "{}",
        String::from_utf8_lossy(&got)
    );
    s
}

/// Reads a watch to its end (the upstream ended it, or its connection
/// died): the last chunk, a clean end a client watches again after.
pub async fn watch_ends(mut s: TcpStream, r: &Regroup) {
    match read_to_end_within(&mut s, Duration::from_secs(20)).await {
        Ok(rest) => assert!(rest.ends_with("0\r\n\r\n"), "{rest}\n{}", r.log()),
        Err(rest) => panic!("the watch did not end: {rest}\n{}", r.log()),
    }
}
