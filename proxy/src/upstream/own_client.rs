//! regroup's own reads of the cluster (the front's request-header
//! settings, publish mode, `regroup migrate`), with regroup's own
//! credential: a small Kubernetes client over the upstream's one sender
//! (`sender.rs`), apart from the app's traffic.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response};
use serde_json::Value as Json;

use crate::body::{collect, full};
use crate::upstream::ResponseBody;
use crate::upstream::Upstream;

/// The largest document regroup reads for itself.
const LIMIT: usize = 16 << 20;

/// regroup's own client of the upstream.
#[derive(Clone)]
pub struct OwnClient {
    upstream: Arc<Upstream>,
}

impl OwnClient {
    /// A client of `upstream`.
    pub fn new(upstream: Arc<Upstream>) -> OwnClient {
        OwnClient { upstream }
    }

    /// GETs a JSON document.
    pub async fn get_json(&self, path: &str) -> Result<Json, String> {
        let resp = self.get(path).await?;
        let status = resp.status();
        let body = collect(resp.into_body(), LIMIT)
            .await
            .map_err(|e| format!("GET {path}: {e}"))?;
        if !status.is_success() {
            return Err(format!("GET {path}: {status}"));
        }
        serde_json::from_slice(&body).map_err(|e| format!("GET {path}: {e}"))
    }

    /// A JSON GET whose body is left to the caller (a watch streams).
    pub async fn get(&self, path: &str) -> Result<Response<ResponseBody>, String> {
        self.send(
            http::Method::GET,
            path,
            HeaderValue::from_static("application/json"),
            None,
        )
        .await
    }

    /// A GET asking for `accept`, its body left to the caller (a watch
    /// merged by publish mode, in the caller's own media type).
    pub async fn get_accepting(
        &self,
        path: &str,
        accept: HeaderValue,
    ) -> Result<Response<ResponseBody>, String> {
        self.send(http::Method::GET, path, accept, None).await
    }

    /// Any request (`regroup migrate`'s writes): `body` with its content
    /// type, `accept` as given; the answer's status, headers and whole body
    /// (at most 16 MiB). An `Err` is a request that got no answer.
    pub async fn request(
        &self,
        method: http::Method,
        path: &str,
        accept: HeaderValue,
        body: Option<(HeaderValue, Bytes)>,
    ) -> Result<(http::StatusCode, http::HeaderMap, Bytes), String> {
        let resp = self.send(method.clone(), path, accept, body).await?;
        let (parts, body) = resp.into_parts();
        let body = collect(body, LIMIT)
            .await
            .map_err(|e| format!("{method} {path}: {e}"))?;
        Ok((parts.status, parts.headers, body))
    }

    async fn send(
        &self,
        method: http::Method,
        path: &str,
        accept: HeaderValue,
        body: Option<(HeaderValue, Bytes)>,
    ) -> Result<Response<ResponseBody>, String> {
        let uri = self.upstream.uri(path).map_err(|e| e.to_string())?;
        let (ctype, bytes) = match body {
            Some((t, b)) => (Some(t), b),
            None => (None, Bytes::new()),
        };
        let mut req = Request::builder()
            .method(method.clone())
            .uri(uri)
            .body(full(bytes))
            .expect("valid request");
        req.headers_mut().insert(header::ACCEPT, accept);
        if let Some(t) = ctype {
            req.headers_mut().insert(header::CONTENT_TYPE, t);
        }
        // regroup's own credential, through the one sender (fresh, a 401
        // retried once with a fresh one).
        self.upstream.lend_own(req.headers_mut());
        let resp = self
            .upstream
            .send_as(true, req, None)
            .await
            .map_err(|e| match e {
                super::sender::SendFailure::Transport(e) => {
                    format!("{method} {path}: {}", super::with_causes(&e))
                }
                e => format!("{method} {path}: {e}"),
            })?;
        Ok(resp)
    }
}
