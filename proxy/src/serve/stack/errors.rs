//! The one place a failure becomes the caller's answer: a Kubernetes
//! `Status`, a log line (never a body or a credential) and a counter.

use std::time::Instant;

use http::{Method, Response};

use crate::body::Body;
use crate::kube::RequestInfo;
use crate::serve::observe::metrics::metrics;
pub(crate) use crate::serve::observe::request_log::request_line;
use crate::serve::observe::request_log::{logged_at_end, WatchLine};
use crate::serve::status::Failure;
use crate::upstream::SendError;

/// Answers a request whose pipeline ended with `result`; `info` is the
/// request's, read once from `path`.
pub(crate) fn answer(
    listener: &'static str,
    method: &Method,
    path: &str,
    info: &RequestInfo,
    started: Instant,
    result: Result<Response<Body>, Failure>,
) -> Response<Body> {
    let resp = match result {
        Ok(r) => r,
        Err(f) => {
            metrics().error(listener, f.reason);
            tracing::warn!(%method, %path, code = f.code.as_u16(), reason = f.reason, "{}", f.message);
            f.into_response()
        }
    };
    let verb = info.verb(method.as_str());
    let took = started.elapsed();
    let m = metrics();
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
    listener: &'static str,
    method: &Method,
    path: &str,
    started: Instant,
    reason: &'static str,
    f: Failure,
) -> Response<Body> {
    metrics().rejection(reason);
    metrics().request(listener, f.code);
    tracing::warn!(reason, %path, "{listener} caller rejected");
    let info = RequestInfo::parse(path, None);
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

/// An upstream request that failed: `504` when the upstream did not answer
/// within `limits.upstreamResponseHeaderTimeout`, else `503`.
pub(crate) fn upstream(listener: &str, e: &SendError) -> Failure {
    let kind = if e.is_timeout() {
        "timeout"
    } else {
        "unreachable"
    };
    metrics().upstream_error(listener, kind);
    if e.is_timeout() {
        return Failure::gateway_timeout(format!(
            "Timeout: the Kubernetes API server did not answer: {e} \
             (limits.upstreamResponseHeaderTimeout)"
        ));
    }
    unavailable(e)
}

/// The upstream could not be reached: the message names the cause chain.
fn unavailable(e: &dyn std::error::Error) -> Failure {
    Failure::unavailable(format!(
        "the Kubernetes API server is unavailable: {}",
        crate::upstream::with_causes(e)
    ))
}

/// regroup asked for none of these (`stack/headers.rs` removes them from
/// `Accept`), so an answer in one is the upstream's fault.
pub(crate) fn unrenamable_answer() -> Failure {
    Failure::bad_gateway("the API server answered in an encoding regroup can't rename")
}
