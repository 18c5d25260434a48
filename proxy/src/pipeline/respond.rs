//! The one place a failure becomes the caller's answer: a Kubernetes
//! `Status`, a log line (never a body or a credential) and a counter; and
//! every answer its request line and metrics. Called by the stacks'
//! driver (`pipeline/proxy.rs`), the listeners' checks (`listen/access.rs`)
//! and the webhook listener (`webhook/`).

use std::time::Instant;

use http::{Method, Response};

use crate::body::Body;
use crate::kube::RequestInfo;
use crate::observe::metrics::Metrics;
use crate::observe::request_log::{logged_at_end, request_line, WatchLine};
use crate::status::Failure;

/// The one responder: a listener's name and where it counts.
#[derive(Clone, Copy)]
pub(crate) struct Responder<'a> {
    pub(crate) metrics: &'a Metrics,
    pub(crate) listener: &'static str,
}

impl Responder<'_> {
    /// Answers a request whose pipeline ended with `result`; `info` is the
    /// request's, read once from `path`.
    pub(crate) fn answer(
        self,
        method: &Method,
        path: &str,
        info: &RequestInfo,
        started: Instant,
        result: Result<Response<Body>, Failure>,
    ) -> Response<Body> {
        let (m, listener) = (self.metrics, self.listener);
        let resp = match result {
            Ok(r) => r,
            Err(f) => {
                m.error(listener, f.reason);
                tracing::warn!(%method, %path, code = f.code.as_u16(), reason = f.reason, "{}", f.message);
                f.into_response()
            }
        };
        let verb = info.verb(method.as_str());
        let took = started.elapsed();
        let status = resp.status();
        m.request(listener, status);
        if info.watch && status == http::StatusCode::OK {
            // A watch is logged when it ends (`observe/request_log.rs`).
            let line = WatchLine {
                listener,
                method: method.clone(),
                verb,
                path: info.template_of(path).to_string(),
                status: status.as_u16(),
                started,
            };
            return resp.map(|body| logged_at_end(body, line));
        }
        if !info.watch {
            m.latency(listener, verb, took);
        }
        request_line(
            listener,
            method,
            verb,
            &info.template_of(path),
            status.as_u16(),
            took,
        );
        resp
    }

    /// A caller refused before its request was forwarded (the front's
    /// authentication): counted by reason.
    pub(crate) fn refused(
        self,
        method: &Method,
        path: &str,
        started: Instant,
        reason: &'static str,
        f: Failure,
    ) -> Response<Body> {
        let (m, listener) = (self.metrics, self.listener);
        m.rejection(reason);
        tracing::warn!(reason, %path, "{listener} caller rejected");
        self.refusal(method, path, None, started, f)
    }

    /// A request the listener's checks refused (`listen/access.rs`: its
    /// `Host`, path, credential): counted as an error by `reason`.
    pub(crate) fn refused_at_access(
        self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        started: Instant,
        reason: &'static str,
        f: Failure,
    ) -> Response<Body> {
        let (m, listener) = (self.metrics, self.listener);
        tracing::warn!(
            listener,
            %method,
            %path,
            code = f.code.as_u16(),
            reason,
            "refused: {}",
            f.message
        );
        m.error(listener, reason);
        self.refusal(method, path, query, started, f)
    }

    /// What every refusal before forwarding ends with: the request counted,
    /// its request line, the `Status`.
    fn refusal(
        self,
        method: &Method,
        path: &str,
        query: Option<&str>,
        started: Instant,
        f: Failure,
    ) -> Response<Body> {
        let (m, listener) = (self.metrics, self.listener);
        m.request(listener, f.code);
        let info = RequestInfo::parse(path, query);
        let verb = info.verb(method.as_str());
        request_line(
            listener,
            method,
            verb,
            &info.template_of(path),
            f.code.as_u16(),
            started.elapsed(),
        );
        f.into_response()
    }

    /// A webhook call that failed (`webhook/`): counted by the hook and
    /// `reason` (`None`: no webhook is served at its path), logged without
    /// its body.
    pub(crate) fn webhook_failed(
        self,
        hook: Option<&str>,
        reason: &'static str,
        f: Failure,
    ) -> Response<Body> {
        let (m, listener) = (self.metrics, self.listener);
        match hook {
            Some(name) => {
                tracing::warn!(
                    webhook = %name,
                    reason,
                    code = f.code.as_u16(),
                    "webhooks: {}",
                    f.message
                );
                m.webhook_error(name, reason);
            }
            None => {
                tracing::info!(reason, "webhooks: {}", f.message);
                m.error(listener, reason);
            }
        }
        f.into_response()
    }
}
