//! The migration's calls to the cluster: regroup's own client
//! ([`OwnClient`], regroup's kubeconfig credentials), with retries.
//!
//! A request that got no answer (connect, TLS, a dropped connection, no
//! response headers in time) or was answered 429 or 5xx is sent again after
//! a backoff (0.2 s doubling to 5 s; `Retry-After` when given, at most 10 s),
//! at most [`ATTEMPTS`] times. A 409 is the caller's to handle: a Conflict
//! means "read again and redo", an AlreadyExists means "look at what is
//! there"; neither is fixed by sending the same request again.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use serde_json::Value as Json;

use crate::upstream::own_client::{OwnClient, OwnClientError};

/// How many times one request is sent at most.
pub const ATTEMPTS: u32 = 8;

/// Test hook, used only by the e2e suite: after this many successful writes
/// the process exits at once (status 75), as a run killed between two
/// writes would stop.
pub const ABORT_AFTER_WRITES_ENV: &str = "REGROUP_MIGRATE_TEST_ABORT_AFTER_WRITES";

/// Why a call failed.
#[derive(Debug, Clone)]
pub enum CallError {
    /// The apiserver answered with a failure (its Status's reason and message).
    Status {
        code: u16,
        reason: String,
        message: String,
    },
    /// No answer, even after retries.
    Transport(TransportError),
}

/// Why a call got no usable answer. `Clone` (as [`CallError`]): the sources
/// are shared.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TransportError {
    /// The request got no answer.
    #[error(transparent)]
    Client(Arc<OwnClientError>),
    /// A list's page is not a list.
    #[error("GET {path}: not a list: {source}")]
    NotAList {
        /// The page's path.
        path: String,
        /// The parser's complaint.
        source: Arc<serde_json::Error>,
    },
    /// An answer is not JSON.
    #[error("{path}: the answer is not JSON: {source}")]
    NotJson {
        /// The path.
        path: String,
        /// The parser's complaint.
        source: Arc<serde_json::Error>,
    },
}

impl CallError {
    /// The HTTP status, if the apiserver answered.
    pub fn code(&self) -> Option<u16> {
        match self {
            CallError::Status { code, .. } => Some(*code),
            CallError::Transport(_) => None,
        }
    }

    /// True for a 404.
    pub fn is_not_found(&self) -> bool {
        self.code() == Some(404)
    }

    /// True for a 409 (AlreadyExists or Conflict).
    pub fn is_conflict(&self) -> bool {
        self.code() == Some(409)
    }
}

impl std::fmt::Display for CallError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            CallError::Status {
                code,
                reason,
                message,
            } => {
                if message.is_empty() {
                    write!(f, "{code} {reason}")
                } else {
                    write!(f, "{code} {reason}: {message}")
                }
            }
            CallError::Transport(e) => write!(f, "no answer: {e}"),
        }
    }
}

impl std::error::Error for CallError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            CallError::Status { .. } => None,
            CallError::Transport(e) => Some(e),
        }
    }
}

/// The client of the migration.
pub struct Api {
    client: OwnClient,
    writes: AtomicUsize,
    abort_after: Option<usize>,
    /// The first backoff (tests shorten it).
    first_backoff: Duration,
}

/// What a list or object is asked for as.
const JSON: &str = "application/json";
/// Metadata only, for the scan of dependents.
const METADATA_LIST: &str =
    "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

/// The field manager of every write `migrate` makes.
pub const FIELD_MANAGER: &str = "regroup-migrate";

impl Api {
    /// A client over `client`.
    pub fn new(client: OwnClient) -> Api {
        let abort_after = std::env::var(ABORT_AFTER_WRITES_ENV)
            .ok()
            .and_then(|v| v.parse().ok());
        Api {
            client,
            writes: AtomicUsize::new(0),
            abort_after,
            first_backoff: Duration::from_millis(200),
        }
    }

    /// GETs a JSON document.
    pub async fn get(&self, path: &str) -> Result<Json, CallError> {
        let b = self.call(Method::GET, path, JSON, None).await?;
        parse(path, &b)
    }

    /// GETs a JSON document, keeping its bytes (objects are renamed from
    /// the bytes the apiserver sent).
    pub async fn get_bytes(&self, path: &str) -> Result<Bytes, CallError> {
        self.call(Method::GET, path, JSON, None).await
    }

    /// Lists every page of `path` (a collection), as metadata only when
    /// `metadata_only`: the items' bytes, in order.
    pub async fn list(
        &self,
        path: &str,
        metadata_only: bool,
    ) -> Result<Vec<Box<serde_json::value::RawValue>>, CallError> {
        let accept = if metadata_only { METADATA_LIST } else { JSON };
        let mut out = Vec::new();
        let mut cont: Option<String> = None;
        loop {
            let mut p = format!("{path}?limit=500");
            if let Some(c) = &cont {
                p.push_str("&continue=");
                p.push_str(
                    &percent_encoding::utf8_percent_encode(c, percent_encoding::NON_ALPHANUMERIC)
                        .to_string(),
                );
            }
            let b = self.call(Method::GET, &p, accept, None).await?;
            let (items, next) = list_page(&b).map_err(|e| {
                CallError::Transport(TransportError::NotAList {
                    path: p.clone(),
                    source: Arc::new(e),
                })
            })?;
            out.extend(items);
            match next {
                Some(c) => cont = Some(c),
                None => return Ok(out),
            }
        }
    }

    /// POSTs `body` to a collection.
    pub async fn create(&self, path: &str, body: &Json) -> Result<Json, CallError> {
        self.write(Method::POST, path, JSON, body).await
    }

    /// PUTs `body`.
    pub async fn replace(&self, path: &str, body: &Json) -> Result<Json, CallError> {
        self.write(Method::PUT, path, JSON, body).await
    }

    /// A JSON Patch (RFC 6902).
    pub async fn json_patch(&self, path: &str, ops: &Json) -> Result<Json, CallError> {
        self.write(Method::PATCH, path, "application/json-patch+json", ops)
            .await
    }

    /// A JSON merge patch (RFC 7386).
    pub async fn merge_patch(&self, path: &str, patch: &Json) -> Result<Json, CallError> {
        self.write(Method::PATCH, path, "application/merge-patch+json", patch)
            .await
    }

    /// DELETE with these DeleteOptions.
    pub async fn delete(&self, path: &str, options: &Json) -> Result<Json, CallError> {
        self.write(Method::DELETE, path, JSON, options).await
    }

    async fn write(
        &self,
        method: Method,
        path: &str,
        ctype: &'static str,
        body: &Json,
    ) -> Result<Json, CallError> {
        let bytes = Bytes::from(serde_json::to_vec(body).expect("JSON values serialize"));
        // Its own field manager: its writes are told from a controller's
        // (see `plan::recent_writers`) and field ownership says who moved it.
        let managed;
        let path = if method == Method::DELETE {
            path
        } else {
            let sep = if path.contains('?') { '&' } else { '?' };
            managed = format!("{path}{sep}fieldManager={FIELD_MANAGER}");
            &managed
        };
        let out = self
            .call(
                method,
                path,
                JSON,
                Some((HeaderValue::from_static(ctype), bytes)),
            )
            .await?;
        let n = self.writes.fetch_add(1, Ordering::SeqCst) + 1;
        if self.abort_after == Some(n) {
            println!("test hook {ABORT_AFTER_WRITES_ENV}: stopping after {n} writes");
            std::process::exit(75);
        }
        parse(path, &out)
    }

    async fn call(
        &self,
        method: Method,
        path: &str,
        accept: &'static str,
        body: Option<(HeaderValue, Bytes)>,
    ) -> Result<Bytes, CallError> {
        let mut attempt = 0;
        loop {
            attempt += 1;
            let r = self
                .client
                .request(
                    method.clone(),
                    path,
                    HeaderValue::from_static(accept),
                    body.clone(),
                )
                .await;
            let (err, wait) = match r {
                Ok((status, _, b)) if status.is_success() => return Ok(b),
                Ok((status, headers, b)) => {
                    let e = status_error(status, &b);
                    if !retryable(status) {
                        return Err(e);
                    }
                    let after = headers
                        .get(http::header::RETRY_AFTER)
                        .and_then(|v| v.to_str().ok())
                        .and_then(|v| v.trim().parse::<u64>().ok())
                        .map(|s| Duration::from_secs(s.min(10)));
                    (e, after)
                }
                Err(e) => (
                    CallError::Transport(TransportError::Client(Arc::new(e))),
                    None,
                ),
            };
            if attempt >= ATTEMPTS {
                return Err(err);
            }
            let wait = wait.unwrap_or_else(|| backoff(self.first_backoff, attempt));
            eprintln!(
                "  retrying {method} {path} in {:.1}s ({err}; attempt {attempt} of {ATTEMPTS})",
                wait.as_secs_f64()
            );
            tokio::time::sleep(wait).await;
        }
    }
}

/// The wait before attempt `attempt + 1`: `first` doubling, at most 5 s.
pub fn backoff(first: Duration, attempt: u32) -> Duration {
    let d = first.saturating_mul(1u32 << (attempt - 1).min(16));
    d.min(Duration::from_secs(5))
}

/// 429 and 5xx are sent again; other failures are answers.
pub fn retryable(status: StatusCode) -> bool {
    status == StatusCode::TOO_MANY_REQUESTS || status.is_server_error()
}

fn status_error(status: StatusCode, body: &[u8]) -> CallError {
    let st: Json = serde_json::from_slice(body).unwrap_or(Json::Null);
    let s = |k: &str| st.get(k).and_then(Json::as_str).unwrap_or("").to_owned();
    let reason = match s("reason") {
        r if r.is_empty() => status.canonical_reason().unwrap_or("").to_owned(),
        r => r,
    };
    let message = match s("message") {
        m if m.is_empty() && st.is_null() => String::from_utf8_lossy(body).trim().to_owned(),
        m => m,
    };
    CallError::Status {
        code: status.as_u16(),
        reason,
        message,
    }
}

fn parse(path: &str, b: &[u8]) -> Result<Json, CallError> {
    serde_json::from_slice(b).map_err(|e| {
        CallError::Transport(TransportError::NotJson {
            path: path.to_owned(),
            source: Arc::new(e),
        })
    })
}

/// One page of a list: its items and the `continue` token of the next
/// page, if any. A real kube-apiserver answers an empty metadata-only list
/// (`PartialObjectMetadataList`) with `"items": null`: no items.
pub(super) type Page = (Vec<Box<serde_json::value::RawValue>>, Option<String>);

pub(super) fn list_page(bytes: &[u8]) -> Result<Page, serde_json::Error> {
    #[derive(serde::Deserialize)]
    struct List {
        #[serde(default)]
        items: Option<Vec<Box<serde_json::value::RawValue>>>,
        #[serde(default)]
        metadata: Option<ListMeta>,
    }
    #[derive(serde::Deserialize, Default)]
    struct ListMeta {
        #[serde(rename = "continue", default)]
        cont: Option<String>,
    }
    let l: List = serde_json::from_slice(bytes)?;
    let next = l.metadata.and_then(|m| m.cont).filter(|c| !c.is_empty());
    Ok((l.items.unwrap_or_default(), next))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_to_five_seconds() {
        let f = Duration::from_millis(200);
        let got: Vec<u128> = (1..=7).map(|a| backoff(f, a).as_millis()).collect();
        assert_eq!(got, [200, 400, 800, 1600, 3200, 5000, 5000]);
    }

    #[test]
    fn which_answers_are_retried() {
        for (code, again) in [(429, true), (500, true), (503, true), (504, true)]
            .into_iter()
            .chain([(409, false), (404, false), (422, false), (403, false)])
        {
            assert_eq!(
                retryable(StatusCode::from_u16(code).unwrap()),
                again,
                "{code}"
            );
        }
    }

    #[test]
    fn a_status_body_gives_reason_and_message() {
        let body = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Foo.samplecontroller.team2.example.com \"a\" is invalid: spec.replicas: Invalid value: 20","reason":"Invalid","code":422}"#;
        let e = status_error(StatusCode::UNPROCESSABLE_ENTITY, body);
        assert_eq!(
            e.to_string(),
            "422 Invalid: Foo.samplecontroller.team2.example.com \"a\" is invalid: spec.replicas: Invalid value: 20"
        );
        let e = status_error(StatusCode::NOT_FOUND, b"404 page not found\n");
        assert_eq!(e.to_string(), "404 Not Found: 404 page not found");
    }

    #[test]
    fn a_list_page_with_null_items_is_empty() {
        // What a real kube-apiserver 1.36 answers for an empty
        // metadata-only list.
        let b = br#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"411"},"items":null}"#;
        let (items, next) = list_page(b).unwrap();
        assert!(items.is_empty() && next.is_none());
        let b = br#"{"kind":"FooList","metadata":{"continue":"abc"},"items":[{"a":1},{"b":2}]}"#;
        let (items, next) = list_page(b).unwrap();
        assert_eq!(items.len(), 2);
        assert_eq!(next.as_deref(), Some("abc"));
        assert!(list_page(br#"{"items":{}}"#).is_err());
    }
}
