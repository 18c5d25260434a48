//! Whose credential goes upstream, and sending with one retry on 401.
//!
//! With regroup's own credential (the app sent none, or `passThrough` is
//! off): the credential comes from the vault (`upstream/vault.rs`), fresh,
//! with the kubeconfig's impersonation; a 401 invalidates it, a fresh one is
//! fetched and the request sent once more when its body is still at hand
//! (none, or a body of known length up to [`RETRY_BODY_LIMIT`]). A 401
//! means the apiserver authenticated nothing, so no verb has had an effect
//! and any may be sent again. A credential that can't change (a static
//! token or basic auth, a fixed client certificate) is the one `lend` put
//! in: sent without asking the vault again, never retried. With the app's
//! own token: sent as it came, never cached, never retried, never
//! impersonating.

use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Method, Request, Response, StatusCode, Uri};
use http_body::Body as _;
use http_body_util::BodyExt;

use super::exchange::Forward;
use super::{errors, headers};
use crate::body::full;
use crate::body::Body;
use crate::rewrite::Engine;
use crate::serve::status::Failure;
use crate::upstream::ResponseBody;

/// The largest request body kept to be sent again after a 401.
pub(crate) const RETRY_BODY_LIMIT: u64 = 1 << 20;

/// Puts regroup's own credential in `out` unless the caller's own goes
/// upstream. Returns whether regroup's own is used. The credential put
/// here is the one in hand; [`send`] makes sure it is fresh (protocol
/// upgrades go with this one).
pub(crate) fn lend(fwd: &Forward, incoming: &HeaderMap, out: &mut HeaderMap) -> bool {
    let own = !(fwd.pass_through_auth && incoming.contains_key(header::AUTHORIZATION));
    if own {
        if let Some(v) = fwd.upstream.authorization(false) {
            out.insert(header::AUTHORIZATION, v);
        }
        fwd.upstream.impersonate(out);
    }
    own
}

/// The caller's request as `forward` read it, to make the headers it sent
/// upstream again if a connection closes on it before answering (see
/// [`Remake::headers`]).
pub(crate) struct Remake<'a> {
    pub engine: &'a Engine,
    /// The caller's headers.
    pub incoming: &'a HeaderMap,
}

impl Remake<'_> {
    /// The headers `forward` sends for a request that is not an upgrade:
    /// those forwarded, with the credential `lend` put in. Only a bodyless
    /// read is ever sent again, and the body layer changes no header of
    /// one; a credential `lend` put in is the one sent only when it cannot
    /// change, so [`send`] remakes only then.
    fn headers(&self, fwd: &Forward) -> HeaderMap {
        let mut h = headers::request(fwd, self.engine, self.incoming, false);
        lend(fwd, self.incoming, &mut h);
        h
    }
}

/// Sends a request upstream. With regroup's own credential, taken fresh
/// from the vault; a 401 invalidates it and the request is sent again once
/// with a fresh one when it can be. `remake`: how to make the request's
/// headers again (`forward`'s requests), else a copy is kept for a resend.
pub(crate) async fn send(
    fwd: &Forward,
    method: &Method,
    uri: Uri,
    mut headers: HeaderMap,
    body: Body,
    own: bool,
    remake: Option<Remake<'_>>,
) -> Result<Response<ResponseBody>, Failure> {
    // Set part by part: the builder checks (and copies) what is already
    // a valid method and URI.
    let request = |uri: Uri, headers: HeaderMap, body: Body| {
        let mut r = Request::new(body);
        *r.method_mut() = method.clone();
        *r.uri_mut() = uri;
        *r.headers_mut() = headers;
        r
    };
    if !own || fwd.upstream.credential_is_fixed() {
        // The caller's own, or regroup's that never changes: `lend` put it
        // in, and a 401 would be answered the same again.
        let Some(remake) = remake else {
            return send_once(fwd, request(uri, headers, body)).await;
        };
        let again_uri = uri.clone();
        let again = move || (again_uri, remake.headers(fwd));
        return fwd
            .upstream
            .send_or_remake(request(uri, headers, body), again)
            .await
            .map_err(|e| errors::upstream(fwd.listener, &e));
    }
    let generation = apply_credential(fwd, &mut headers).await?;
    let retry = generation.is_some() && fwd.upstream.can_refresh();
    // Keep the body for a retry when it is small and of known length.
    let (body, kept) = match body.size_hint().exact() {
        Some(0) if retry => (body, Some(Bytes::new())),
        Some(n) if retry && n <= RETRY_BODY_LIMIT => {
            let bytes = body
                .collect()
                .await
                .map_err(|e| Failure::bad_request(format!("reading the request body: {e}")))?
                .to_bytes();
            (full(bytes.clone()), Some(bytes))
        }
        _ => (body, None),
    };
    if kept.is_none() {
        // Never sent again: nothing to keep a copy of.
        return send_once(fwd, request(uri, headers, body)).await;
    }
    let resp = send_once(fwd, request(uri.clone(), headers.clone(), body)).await?;
    if resp.status() != StatusCode::UNAUTHORIZED {
        return Ok(resp);
    }
    let (Some(generation), Some(kept)) = (generation, kept) else {
        return Ok(resp);
    };
    fwd.upstream.invalidate(generation);
    tracing::info!(
        source = fwd.upstream.credential_source(),
        "the apiserver refused regroup's credential (401): refreshing it and sending the request again"
    );
    let Ok(Some(_)) = apply_credential(fwd, &mut headers).await else {
        return Ok(resp);
    };
    send_once(fwd, request(uri, headers, full(kept))).await
}

/// Puts regroup's fresh credential in `headers`; its generation, if any.
async fn apply_credential(fwd: &Forward, headers: &mut HeaderMap) -> Result<Option<u64>, Failure> {
    match fwd.upstream.credential().await {
        Ok(Some(c)) => {
            match &c.authorization {
                Some(v) => {
                    headers.insert(header::AUTHORIZATION, v.clone());
                }
                None => {
                    headers.remove(header::AUTHORIZATION);
                }
            }
            Ok(Some(c.generation))
        }
        Ok(None) => Ok(None),
        // Counted as a ServiceUnavailable error by `errors`, and by source
        // in regroup_credential_failures_total.
        Err(e) => Err(Failure::unavailable(format!(
            "regroup cannot obtain its credential for the apiserver: {e}"
        ))),
    }
}

/// One request upstream; a transport failure is a 503 `Status`.
pub(crate) async fn send_once(
    fwd: &Forward,
    req: Request<Body>,
) -> Result<Response<ResponseBody>, Failure> {
    fwd.upstream
        .send(req)
        .await
        .map_err(|e| errors::upstream(fwd.listener, &e))
}
