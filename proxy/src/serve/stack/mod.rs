//! The request pipeline both stacks share, as small layers called in
//! order, each in its own file:
//!
//! 1. `target`: the shadowed group answers 404; the path and query renamed
//!    towards the upstream.
//! 2. `headers` and `etag`: what is forwarded (hop-by-hop, identity and
//!    regroup's ETag tags removed).
//! 3. `credentials`: whose credential goes upstream.
//! 4. `upgrade`: exec/attach/port-forward are spliced as bytes; done.
//! 5. `patch`: a patch of an object an amendment (`serve/amend/`) keeps
//!    differently in the cluster and the app's view: read-modify-written,
//!    or amended against the current object; what goes upstream (or the
//!    upstream's last answer) goes on to the tail below.
//! 6. `request_body`: the body renamed by the engine, then amended.
//! 7. `credentials::send`: sent, a 401 retried once with a fresh token.
//! 8. `response`: headers and body renamed back (`openapi`, `watch`,
//!    `list`, `proto_list`, `whole`), then amended.
//!
//! Every failure is a [`Failure`], turned into a `Status` in one place
//! (`errors`). The sidecar stack is this pipeline; the front stack puts
//! `identity` (front-proxy authentication) before it.

pub(crate) mod credentials;
pub(crate) mod errors;
pub(crate) mod etag;
pub(crate) mod gzip;
pub(crate) mod headers;
pub(crate) mod list;
pub mod live;
pub(crate) mod openapi;
pub mod own_client;
pub(crate) mod patch;
pub(crate) mod proto_list;
pub mod proxy;
pub(crate) mod request_body;
pub(crate) mod response;
pub(crate) mod target;
pub(crate) mod upgrade;
pub(crate) mod watch;
pub(crate) mod whole;

use std::sync::Arc;

use http::header::HeaderMap;
use http::response::Parts;
use http::{Method, Request, Response, Uri};
use hyper::body::Incoming;
use regroup_config::Direction;

use super::amend::Amendments;
use super::status::{page_not_found, Failure};
use crate::body::{spill_files, Body};
use crate::kube::{MediaType, RequestInfo};
use crate::rewrite::protobuf::spool::Spill;
use crate::rewrite::{Catalog, Engine};
use crate::upstream::{ResponseBody, Upstream};
use regroup_config::limits::SPILL_KEEP_BYTES;

/// The largest non-streamed response body regroup rewrites (and the
/// largest item of a streamed list).
pub(crate) const BODY_LIMIT: usize = 256 << 20;

/// How large a body regroup reads to rename (`limits:`).
#[derive(Clone, Debug)]
pub struct BodyLimits {
    /// A request body (`maxRequestBodyBytes`).
    pub request: usize,
    /// A gzip response body once inflated (`maxInflatedBytes`).
    pub inflated: usize,
    /// One object regroup holds to rename (`maxObjectBytes`).
    pub object: usize,
    /// Where a renamed protobuf list waits for its end (`spillDir`,
    /// `maxSpillBytes`).
    pub spill: Spill,
}

impl Default for BodyLimits {
    fn default() -> Self {
        (&regroup_config::Limits::default()).into()
    }
}

impl From<&regroup_config::Limits> for BodyLimits {
    fn from(l: &regroup_config::Limits) -> Self {
        BodyLimits {
            request: l.max_request_body_bytes,
            inflated: l.max_inflated_bytes,
            object: l.max_object_bytes,
            spill: spill_files::to_disk(
                SPILL_KEEP_BYTES,
                // 0: never spill, what memory keeps is all a list may be.
                match l.max_spill_bytes {
                    0 => SPILL_KEEP_BYTES as u64,
                    n => n,
                },
                l.spill_dir.as_deref(),
            ),
        }
    }
}

/// Where one stack forwards to, and how.
pub(crate) struct Forward {
    pub upstream: Arc<Upstream>,
    /// Requests are renamed in this direction, responses in the other.
    pub dir: Direction,
    /// The caller's own `Authorization` goes upstream when it sent one.
    pub pass_through_auth: bool,
    /// What the sidecar edits beyond renaming (the front trust, webhook
    /// registrations), in order.
    pub amendments: Amendments,
    /// `sidecar` or `front`, in metrics and logs.
    pub listener: &'static str,
    /// The front sets `X-Remote-*` itself after authenticating the caller;
    /// the sidecar never forwards them from the app.
    pub forwards_identity: bool,
    pub limits: BodyLimits,
}

/// The upstream's answer to a request for a Kubernetes object, as the body
/// layers take it.
pub(crate) struct Answer {
    pub parts: Parts,
    pub body: ResponseBody,
    pub media: MediaType,
    /// `Content-Encoding: gzip`.
    pub gzip: bool,
    /// The amendments that look at this request.
    pub amendments: Amendments,
}

/// A request to the upstream, as the layers before the body make it.
pub(crate) struct Outgoing {
    pub method: Method,
    /// Path and query renamed.
    pub uri: Uri,
    /// Those forwarded, with the credential `credentials::lend` chose.
    pub headers: HeaderMap,
    /// regroup's own credential (not the caller's).
    pub own: bool,
}

/// What the body layers hand to the one tail: a request to send, or (a
/// patch read-modify-written) the upstream's last answer already in hand.
pub(crate) enum Next {
    Send(Outgoing, Body),
    Answered(Response<ResponseBody>),
}

/// One request on its way through the layers.
pub(crate) struct Exchange {
    /// The engine loaded for this request, kept to its end.
    pub engine: Arc<Engine>,
    /// Read once by the caller, which logs the request with it.
    pub info: Arc<RequestInfo>,
    pub method: http::Method,
    /// The URI as the caller sent it (its names); a clone shares its bytes.
    pub caller_uri: Uri,
    /// The path in the upstream's names, without a query; `None`: the
    /// caller's (most paths need no renaming).
    pub renamed_path: Option<String>,
}

impl Exchange {
    /// The path as the caller sent it.
    pub fn caller_path(&self) -> &str {
        self.caller_uri.path()
    }

    /// The request is `GET /apis`: the list of every API group (legacy or
    /// aggregated discovery).
    pub fn is_discovery_root(&self) -> bool {
        matches!(self.caller_path(), "/apis" | "/apis/")
    }

    /// The path in the upstream's names, without a query.
    pub fn upstream_path(&self) -> &str {
        self.renamed_path
            .as_deref()
            .unwrap_or_else(|| self.caller_path())
    }

    /// The kind addressed by the request, where its objects carry groups.
    pub fn kind(&self) -> Option<&'static str> {
        Catalog::kind_for_resource(&self.info.group, self.info.resource.as_deref()?)
    }
}

/// The pipeline: one request (`info`: what its URL addresses), caller to
/// upstream and back.
pub(crate) async fn forward(
    fwd: &Forward,
    engine: Arc<Engine>,
    req: Request<Incoming>,
    info: Arc<RequestInfo>,
) -> Result<Response<Body>, Failure> {
    target::refuse_shared_collection_delete(fwd, &engine, &info, req.method())?;
    let Some(to) = target::resolve(fwd, &engine, &info, req.uri())? else {
        // The caller named the other side's group: it doesn't exist here.
        return Ok(page_not_found());
    };
    let (mut parts, body) = req.into_parts();
    let upgrade = headers::is_upgrade(&parts.headers);
    let mut out = headers::request(fwd, &engine, &parts.headers, upgrade);
    let own = credentials::lend(fwd, &parts.headers, &mut out);
    if upgrade {
        let on_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
        return upgrade::splice(fwd, parts.method, to.uri, out, body, on_upgrade).await;
    }
    let x = Exchange {
        engine,
        info,
        method: parts.method,
        caller_uri: parts.uri,
        renamed_path: to.path,
    };
    let next = match patch::served_by(fwd, &x, &out) {
        Some(amend) => {
            let method = x.method.clone();
            let (uri, headers) = (to.uri, out);
            let to = Outgoing {
                method,
                uri,
                headers,
                own,
            };
            patch::serve(fwd, amend, &x, to, body).await?
        }
        None => {
            let body = request_body::rename(fwd, &x, &mut out, body).await?;
            let method = x.method.clone();
            let (uri, headers) = (to.uri, out);
            Next::Send(
                Outgoing {
                    method,
                    uri,
                    headers,
                    own,
                },
                body,
            )
        }
    };
    let resp = match next {
        Next::Send(o, body) => {
            let remake = credentials::Remake {
                engine: &x.engine,
                incoming: &parts.headers,
            };
            let (uri, headers) = (o.uri, o.headers);
            credentials::send(fwd, &o.method, uri, headers, body, o.own, Some(remake)).await?
        }
        Next::Answered(resp) => resp,
    };
    response::rename(fwd, &x, resp).await
}
