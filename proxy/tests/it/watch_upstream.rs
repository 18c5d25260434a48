//! A TLS upstream offering h2 and HTTP/1.1 that holds watches open: what
//! the tests of regroup's h2 connections (its health check, the server's
//! stream limit) need from an apiserver.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use bytes::Bytes;
use futures_util::StreamExt as _;
use http::{Request, Response};
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::Frame;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::serve::listen::tls;
use tokio::net::TcpListener;
use tokio::sync::watch;

pub const FOO: &str = r#"{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo","metadata":{"name":"alpha","resourceVersion":"1"}}"#;
pub const PATH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos/alpha";
pub const WATCH: &str = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/ns/foos?watch=1";

/// A TLS upstream offering h2 and HTTP/1.1, allowing `max_streams` streams
/// per h2 connection (`None`: hyper's default, hundreds). A watch gets one
/// event, then stays open until `end_watches` (or the upstream is
/// dropped); a request with the query `hold` is never answered; any other
/// request gets FOO.
/// Counts the TCP connections it accepts.
pub struct WatchUpstream {
    pub port: u16,
    pub ca_pem: String,
    accepted: Arc<AtomicUsize>,
    end: watch::Sender<bool>,
}

impl WatchUpstream {
    pub async fn start(max_streams: Option<u32>) -> WatchUpstream {
        let id = tls::generate().unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let acceptor = tokio_rustls::TlsAcceptor::from(tls::server_config(&id).unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let (end, ended) = watch::channel(false);
        let count = accepted.clone();
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                count.fetch_add(1, Ordering::SeqCst);
                let acceptor = acceptor.clone();
                let ended = ended.clone();
                tokio::spawn(async move {
                    let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let mut ended = ended.clone();
                        async move {
                            if req.uri().query() == Some("hold") {
                                std::future::pending::<()>().await;
                            }
                            let watching =
                                req.uri().query().unwrap_or_default().starts_with("watch");
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
                });
            }
        });
        WatchUpstream {
            port,
            ca_pem: id.ca_pem.unwrap(),
            accepted,
            end,
        }
    }

    pub fn accepted(&self) -> usize {
        self.accepted.load(Ordering::SeqCst)
    }

    /// Ends every open watch (and any opened later).
    pub fn end_watches(&self) {
        self.end.send_replace(true);
    }
}
