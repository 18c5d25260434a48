//! Whose credential goes upstream, and sending with one retry on 401.

use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Method, Request, Response, StatusCode, Uri};
use hyper::body::Incoming;

use super::{errors, Forward};
use crate::serve::body::full;
use crate::serve::status::Failure;
use crate::upstream::Body;

/// Puts regroup's own credential in `out` unless the caller's own goes
/// upstream. Returns whether regroup's own is used.
pub(crate) fn lend(fwd: &Forward, incoming: &HeaderMap, out: &mut HeaderMap) -> bool {
    let own = !(fwd.pass_through_auth && incoming.contains_key(header::AUTHORIZATION));
    if own {
        if let Some(v) = fwd.upstream.authorization(false) {
            out.insert(header::AUTHORIZATION, v);
        }
    }
    own
}

/// Sends a request upstream. With regroup's own credential, a GET or HEAD
/// answered 401 is sent again once with the credential read afresh (a
/// rotated token).
pub(crate) async fn send(
    fwd: &Forward,
    method: &Method,
    uri: Uri,
    mut headers: HeaderMap,
    body: Body,
    own: bool,
) -> Result<Response<Incoming>, Failure> {
    let retry_safe =
        own && fwd.upstream.can_refresh() && matches!(*method, Method::GET | Method::HEAD);
    let request = |uri: Uri, headers: HeaderMap, body: Body| {
        let mut r = Request::builder()
            .method(method.clone())
            .uri(uri)
            .body(body)
            .expect("parts are valid");
        *r.headers_mut() = headers;
        r
    };
    let resp = send_once(fwd, request(uri.clone(), headers.clone(), body)).await?;
    if resp.status() != StatusCode::UNAUTHORIZED || !retry_safe {
        return Ok(resp);
    }
    if let Some(v) = fwd.upstream.authorization(true) {
        headers.insert(header::AUTHORIZATION, v);
    }
    send_once(fwd, request(uri, headers, full(Bytes::new()))).await
}

/// One request upstream; a transport failure is a 503 `Status`.
pub(crate) async fn send_once(
    fwd: &Forward,
    req: Request<Body>,
) -> Result<Response<Incoming>, Failure> {
    fwd.upstream
        .send(req)
        .await
        .map_err(|e| errors::upstream(&e))
}
