//! The pipeline's use of the one sender (`upstream/sender.rs`, where
//! credentials are refreshed and a 401 retried), its failures as
//! `Status`es. Whose credential goes is decided with the head
//! (`headers.rs`).

use http::header::HeaderMap;
use http::{Request, Response};

use super::errors;
use super::exchange::{Forward, Outgoing};
use crate::body::Body;
use crate::status::Failure;
use crate::upstream::sender::SendFailure;
use crate::upstream::{ResponseBody, Upstream};

/// Sends a request upstream through the one sender
/// ([`Upstream::send_as`](crate::upstream::Upstream::send_as)): with
/// regroup's credential when `lent`, fresh, a 401 retried once.
/// `remake`: how the driver makes the headers of a bodyless read again.
/// A request that got no answer is a `Status`: 503, or 504 on a timeout.
/// The pipeline's main path calls [`request`] and [`answered`] around
/// `send_as` itself, with no `async` layer of this function's between.
pub(crate) async fn send(
    fwd: &Forward,
    upstream: &Upstream,
    to: Outgoing,
    body: Body,
    remake: Option<&(dyn Fn() -> HeaderMap + Sync)>,
) -> Result<Response<ResponseBody>, Failure> {
    let lent = to.lent;
    answered(fwd, upstream.send_as(lent, request(to, body), remake).await)
}

/// The request `to` describes, with `body`.
pub(crate) fn request(to: Outgoing, body: Body) -> Request<Body> {
    // Set part by part: the builder checks (and copies) what is already
    // a valid method and URI.
    let mut r = Request::new(body);
    *r.method_mut() = to.method;
    *r.uri_mut() = to.uri;
    *r.headers_mut() = to.headers;
    r
}

/// The sender's answer, a failure as a `Status`.
pub(crate) fn answered(
    fwd: &Forward,
    sent: Result<Response<ResponseBody>, SendFailure>,
) -> Result<Response<ResponseBody>, Failure> {
    sent.map_err(|e| match e {
        SendFailure::Transport(e) => errors::upstream(fwd, &e),
        // Counted as a ServiceUnavailable error by the responder, and
        // by source in regroup_credential_failures_total.
        SendFailure::Credential(_) => Failure::unavailable(e.to_string()),
        SendFailure::Body(_) => Failure::bad_request(e.to_string()),
    })
}
