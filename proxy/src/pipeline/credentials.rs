//! Whose credential goes upstream (the caller's own, or regroup's: the app
//! sent none, or `passThrough` is off), and the pipeline's use of the one
//! sender (`upstream/sender.rs`, where credentials are refreshed and a 401
//! retried), its failures as `Status`es.

use http::header::{self, HeaderMap};
use http::{Method, Request, Response, Uri};

use super::errors;
use super::exchange::Forward;
use crate::body::Body;
use crate::status::Failure;
use crate::upstream::sender::SendFailure;
use crate::upstream::ResponseBody;

/// Lends regroup's credential to `out` unless the caller's own goes
/// upstream. Returns whether it was lent. The credential put
/// here is the one in hand; [`send`] makes sure it is fresh (protocol
/// upgrades go with this one).
pub(crate) fn lend(fwd: &Forward, incoming: &HeaderMap, out: &mut HeaderMap) -> bool {
    let lent = !(fwd.pass_through_auth && incoming.contains_key(header::AUTHORIZATION));
    if lent {
        fwd.upstream.lend_credential(out);
    }
    lent
}

/// Sends a request upstream through the one sender
/// ([`Upstream::send_as`](crate::upstream::Upstream::send_as)): with
/// regroup's credential when `lent`, fresh, a 401 retried once.
/// `remake`: how the driver makes the headers of a bodyless read again.
/// A request that got no answer is a `Status`: 503, or 504 on a timeout.
pub(crate) async fn send(
    fwd: &Forward,
    method: &Method,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
    lent: bool,
    remake: Option<&(dyn Fn() -> HeaderMap + Sync)>,
) -> Result<Response<ResponseBody>, Failure> {
    // Set part by part: the builder checks (and copies) what is already
    // a valid method and URI.
    let mut r = Request::new(body);
    *r.method_mut() = method.clone();
    *r.uri_mut() = uri;
    *r.headers_mut() = headers;
    fwd.upstream
        .send_as(lent, r, remake)
        .await
        .map_err(|e| match e {
            SendFailure::Transport(e) => errors::upstream(fwd, &e),
            // Counted as a ServiceUnavailable error by the responder, and
            // by source in regroup_credential_failures_total.
            SendFailure::Credential(_) => Failure::unavailable(e.to_string()),
            SendFailure::Body(_) => Failure::bad_request(e.to_string()),
        })
}
