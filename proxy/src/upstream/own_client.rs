//! regroup's own reads of the cluster (the front's request-header
//! settings, publish mode, `regroup migrate`), with regroup's own
//! credential: a small Kubernetes client over the upstream's one sender
//! (`sender.rs`), apart from the app's traffic.

use std::sync::Arc;

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Request, Response};
use serde_json::Value as Json;

use super::sender::SendFailure;
use crate::body::{collect, full, CollectError};
use crate::upstream::ResponseBody;
use crate::upstream::Upstream;

/// Why one of regroup's own requests got no usable answer: each message
/// names the request (method and path, never its headers or body).
#[derive(Debug, thiserror::Error)]
pub enum OwnClientError {
    /// The path makes no URI.
    #[error("{0}")]
    Uri(#[from] http::Error),
    /// The upstream did not answer: the message names the cause chain
    /// (hyper's `client error (Connect)` alone says little).
    #[error("{method} {path}: {}", super::with_causes(.source))]
    Transport {
        /// The request's method.
        method: http::Method,
        /// Its path.
        path: String,
        /// Why it got no answer.
        source: super::SendError,
    },
    /// No request was sent (regroup's credential, the request body).
    #[error("{method} {path}: {source}")]
    Send {
        /// The request's method.
        method: http::Method,
        /// Its path.
        path: String,
        /// Why.
        source: SendFailure,
    },
    /// The answer's body could not be read whole.
    #[error("{method} {path}: {source}")]
    Body {
        /// The request's method.
        method: http::Method,
        /// Its path.
        path: String,
        /// Why.
        source: CollectError,
    },
    /// A JSON GET answered with an error status.
    #[error("GET {path}: {status}")]
    Status {
        /// The path.
        path: String,
        /// The answer's status.
        status: http::StatusCode,
    },
    /// A JSON GET answered with something else than JSON.
    #[error("GET {path}: {source}")]
    Json {
        /// The path.
        path: String,
        /// The parser's complaint.
        source: serde_json::Error,
    },
}

/// The largest document regroup reads for itself.
const LIMIT: usize = 16 << 20;

impl OwnClientError {
    /// A JSON GET answered `404 Not Found`.
    pub fn is_not_found(&self) -> bool {
        matches!(self, OwnClientError::Status { status, .. } if *status == http::StatusCode::NOT_FOUND)
    }
}

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
    pub async fn get_json(&self, path: &str) -> Result<Json, OwnClientError> {
        let resp = self.get(path).await?;
        let status = resp.status();
        let body =
            collect(resp.into_body(), LIMIT)
                .await
                .map_err(|source| OwnClientError::Body {
                    method: http::Method::GET,
                    path: path.to_owned(),
                    source,
                })?;
        if !status.is_success() {
            return Err(OwnClientError::Status {
                path: path.to_owned(),
                status,
            });
        }
        serde_json::from_slice(&body).map_err(|source| OwnClientError::Json {
            path: path.to_owned(),
            source,
        })
    }

    /// A JSON GET whose body is left to the caller (a watch streams).
    pub async fn get(&self, path: &str) -> Result<Response<ResponseBody>, OwnClientError> {
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
    ) -> Result<Response<ResponseBody>, OwnClientError> {
        self.send(http::Method::GET, path, accept, None).await
    }

    /// A GET asking for JSON: the answer's status and whole body, whatever
    /// the status (the caller says what a 404 or 403 means). An `Err` is a
    /// request that got no answer.
    pub async fn read(&self, path: &str) -> Result<(http::StatusCode, Bytes), OwnClientError> {
        let accept = HeaderValue::from_static("application/json");
        let (status, _, body) = self.request(http::Method::GET, path, accept, None).await?;
        Ok((status, body))
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
    ) -> Result<(http::StatusCode, http::HeaderMap, Bytes), OwnClientError> {
        let resp = self.send(method.clone(), path, accept, body).await?;
        let (parts, body) = resp.into_parts();
        let body = collect(body, LIMIT)
            .await
            .map_err(|source| OwnClientError::Body {
                method,
                path: path.to_owned(),
                source,
            })?;
        Ok((parts.status, parts.headers, body))
    }

    async fn send(
        &self,
        method: http::Method,
        path: &str,
        accept: HeaderValue,
        body: Option<(HeaderValue, Bytes)>,
    ) -> Result<Response<ResponseBody>, OwnClientError> {
        let uri = self.upstream.uri(path)?;
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
        self.upstream.lend_credential(req.headers_mut());
        let resp = self
            .upstream
            .send_as(true, req, None)
            .await
            .map_err(|e| match e {
                SendFailure::Transport(source) => OwnClientError::Transport {
                    method,
                    path: path.to_owned(),
                    source,
                },
                source => OwnClientError::Send {
                    method,
                    path: path.to_owned(),
                    source,
                },
            })?;
        Ok(resp)
    }
}
