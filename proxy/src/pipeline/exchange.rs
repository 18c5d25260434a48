//! The vocabulary of the request pipeline: one request on its way
//! ([`Exchange`]), where a stack forwards ([`Forward`]), what goes upstream
//! ([`Outgoing`], [`Next`]) and what comes back ([`Answer`]). Every step
//! reads these; the driver (`mod.rs`) makes them and calls the steps.

use std::sync::Arc;

use http::header::HeaderMap;
use http::response::Parts;
use http::{Method, Uri};
use regroup_config::limits::SPILL_KEEP_BYTES;
use regroup_config::Direction;

use crate::body::spill_files;
use crate::hooks::Amendments;
use crate::kube::{MediaType, RequestInfo};
use crate::rewrite::protobuf::spool::Spill;
use crate::rewrite::{Catalog, Engine};
use crate::upstream::{ResponseBody, Upstream};

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
    /// The caller's `Impersonate-*` headers go upstream (with its own
    /// credential, or regroup's when its kubeconfig impersonates no one).
    pub forwards_impersonation: bool,
    /// What the sidecar edits beyond renaming (the front trust, webhook
    /// registrations), in order.
    pub amendments: Amendments,
    /// `sidecar` or `front`, in metrics and logs.
    pub listener: &'static str,
    /// The front sets `X-Remote-*` itself after authenticating the caller;
    /// the sidecar never forwards them from the app.
    pub forwards_identity: bool,
    pub limits: BodyLimits,
    /// Where the stack counts its requests, failures and open watches.
    pub metrics: Arc<crate::observe::metrics::Metrics>,
}

impl Forward {
    /// The stack's responder: every answer and failure counted and logged
    /// under its listener's name.
    pub(crate) fn responder(&self) -> super::respond::Responder<'_> {
        super::respond::Responder {
            metrics: &self.metrics,
            listener: self.listener,
        }
    }
}

/// The upstream's answer to a request for a Kubernetes object, as the body
/// steps take it.
pub(crate) struct Answer {
    pub parts: Parts,
    pub body: ResponseBody,
    pub media: MediaType,
    /// `Content-Encoding: gzip`.
    pub gzip: bool,
}

/// A request to the upstream, as the steps before the body make it.
pub(crate) struct Outgoing {
    pub method: Method,
    /// Path and query renamed.
    pub uri: Uri,
    /// Those forwarded, with the credential `credentials::lend` chose.
    pub headers: HeaderMap,
    /// Whether regroup lent its credential (the caller brought none, or
    /// `passThrough` is off): then the sender keeps it fresh.
    pub lent: bool,
}

/// One request on its way through the steps.
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
    /// Its stack's hooks that look at it (the steps call them).
    pub hooks: super::hook_calls::Hooks,
    /// Where it is sent (its context's choice, else its stack's upstream).
    pub upstream: Arc<Upstream>,
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
