//! The one place a failure becomes the caller's answer: a Kubernetes
//! `Status`, a log line (never a body or a credential) and a counter.

use std::time::Instant;

use http::{Method, Response};

use crate::body::Body;
use crate::kube::RequestInfo;
use crate::serve::observe::metrics::metrics;
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
    m.request(listener, resp.status());
    if !info.watch {
        m.latency(listener, verb, took);
    }
    request_line(
        listener,
        method,
        verb,
        &info.template_of(path),
        resp.status().as_u16(),
        took,
    );
    resp
}

/// The one line per request, answered or refused, under one target
/// (`regroup::request`): the listener, the method and the Kubernetes verb,
/// the path with names left out, the status, whole microseconds.
pub(crate) fn request_line(
    listener: &str,
    method: &Method,
    verb: &str,
    path: &dyn std::fmt::Display,
    status: u16,
    took: std::time::Duration,
) {
    // Fields are evaluated only when the line is logged.
    tracing::info!(
        target: "regroup::request",
        listener,
        %method,
        verb,
        %path,
        status,
        us = u64::try_from(took.as_micros()).unwrap_or(u64::MAX),
        "request"
    );
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
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        src = s.source();
    }
    Failure::unavailable(format!("the Kubernetes API server is unavailable: {msg}"))
}

/// regroup asked for none of these (`stack/headers.rs` removes them from
/// `Accept`), so an answer in one is the upstream's fault.
pub(crate) fn unrenamable_answer() -> Failure {
    Failure::bad_gateway("the API server answered in an encoding regroup can't rename")
}
