//! A scripted upstream for tests through a real sidecar listener: it
//! answers every request the same way and records what it was sent.
#![allow(dead_code)]

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response};
use http_body_util::{BodyExt, Full};
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use regroup::pipeline::proxy::Proxy;
use regroup::rewrite::Catalog;
use regroup::upstream::{Resolved, Upstream};
use regroup_config::GroupMap;
use tokio::net::TcpListener;

/// What the upstream saw of the last request.
#[derive(Default, Clone, Debug)]
pub struct Seen {
    pub requests: usize,
    pub path_and_query: String,
    pub content_type: Option<String>,
    pub accept: Option<String>,
    pub if_none_match: Option<String>,
    pub body: Vec<u8>,
}

/// The upstream's answer to every request.
#[derive(Clone)]
pub struct Answer {
    pub status: u16,
    pub headers: Vec<(&'static str, String)>,
    pub body: Bytes,
}

impl Answer {
    /// 200 with a body of `content_type`.
    pub fn ok(content_type: &'static str, body: impl Into<Bytes>) -> Answer {
        Answer {
            status: 200,
            headers: vec![("content-type", content_type.to_owned())],
            body: body.into(),
        }
    }

    /// The same with one more header.
    pub fn with(mut self, name: &'static str, value: impl Into<String>) -> Answer {
        self.headers.push((name, value.into()));
        self
    }
}

async fn upstream(answer: Answer, seen: Arc<Mutex<Seen>>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        loop {
            let (stream, _) = listener.accept().await.unwrap();
            let (seen, answer) = (seen.clone(), answer.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (seen, answer) = (seen.clone(), answer.clone());
                    async move {
                        let header =
                            |n: &str| req.headers().get(n).map(|v| v.to_str().unwrap().to_owned());
                        let mut s = Seen {
                            path_and_query: req.uri().path_and_query().unwrap().to_string(),
                            content_type: header("content-type"),
                            accept: header("accept"),
                            if_none_match: header("if-none-match"),
                            ..Seen::default()
                        };
                        s.body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
                        {
                            let mut seen = seen.lock().unwrap();
                            s.requests = seen.requests + 1;
                            *seen = s;
                        }
                        let mut r = Response::builder().status(answer.status);
                        for (n, v) in &answer.headers {
                            r = r.header(*n, v);
                        }
                        Ok::<_, std::convert::Infallible>(r.body(Full::new(answer.body)).unwrap())
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    format!("http://{addr}")
}

/// A sidecar listener with `map` in front of an upstream answering `answer`:
/// its URL and what the upstream saw.
pub async fn sidecar(map: &GroupMap, answer: Answer) -> (String, Arc<Mutex<Seen>>) {
    sidecar_counting(map, answer, Default::default()).await
}

/// [`sidecar`] counting into `metrics`.
pub async fn sidecar_counting(
    map: &GroupMap,
    answer: Answer,
    metrics: Arc<regroup::observe::metrics::Metrics>,
) -> (String, Arc<Mutex<Seen>>) {
    sidecar_engine(
        regroup::rewrite::Engine::new(map.clone(), Catalog::new(&[])),
        answer,
        metrics,
    )
    .await
}

/// [`sidecar`] with the engine a configuration makes (its catalog built
/// for its map: `names:`, fields), as `regroup serve` builds it.
pub async fn sidecar_for(config: &str, answer: Answer) -> (String, Arc<Mutex<Seen>>) {
    let s = regroup_config::load(config).expect("a valid configuration");
    let catalog = Catalog::for_map(&s.fields, &s.map);
    sidecar_engine(
        regroup::rewrite::Engine::new(s.map, catalog),
        answer,
        Default::default(),
    )
    .await
}

async fn sidecar_engine(
    engine: regroup::rewrite::Engine,
    answer: Answer,
    metrics: Arc<regroup::observe::metrics::Metrics>,
) -> (String, Arc<Mutex<Seen>>) {
    let seen = Arc::new(Mutex::new(Seen::default()));
    let server = upstream(answer, seen.clone()).await;
    let up = Upstream::new(
        &Resolved {
            server,
            ..Resolved::default()
        },
        false,
    )
    .unwrap();
    let proxy = Arc::new(
        Proxy::sidecar(
            regroup::pipeline::live::Live::new(engine),
            std::sync::Arc::new(up),
            true,
        )
        .with_metrics(metrics),
    );
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(crate::common::serve_plain(l, proxy));
    (format!("http://{addr}"), seen)
}

/// Sends `req` with a plain client: the status, the headers and the body.
pub async fn send(req: Request<Full<Bytes>>) -> (http::StatusCode, http::HeaderMap, Bytes) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let resp = client.request(req).await.unwrap();
    let (parts, body) = resp.into_parts();
    (
        parts.status,
        parts.headers,
        body.collect().await.unwrap().to_bytes(),
    )
}
