//! The one sender: a request upstream with the credential it goes with,
//! used by the pipeline (the app's and the aggregator's requests), by
//! regroup's own reads and writes ([`OwnClient`](super::own_client::OwnClient):
//! the front's followers, `regroup migrate`, publish mode) alike.
//!
//! With regroup's own credential ([`Upstream::lend_credential`] put the one in
//! hand, with the kubeconfig's impersonation): the credential comes from
//! the vault (`vault.rs`), fresh; a 401 invalidates it, a fresh one is
//! fetched and the request sent once more when its body is still at hand
//! (none, or a body of known length up to [`RETRY_BODY_LIMIT`]). A 401
//! means the apiserver authenticated nothing, so no verb has had an effect
//! and any may be sent again. A credential that can't change (a static
//! token or basic auth, a fixed client certificate) is the one `lend_credential`
//! put in: sent without asking the vault again, never retried. With the
//! caller's own token: sent as it came, never cached, never retried, never
//! impersonating.

use bytes::Bytes;
use http::header::{self, HeaderMap};
use http::{Request, Response, StatusCode};
use http_body::Body as _;
use http_body_util::BodyExt;

use super::{CredentialError, ResponseBody, SendError, Upstream};
use crate::body::{full, Body};

/// The largest request body kept to be sent again after a 401.
pub const RETRY_BODY_LIMIT: u64 = 1 << 20;

/// Why a request got no answer.
#[derive(Debug, thiserror::Error)]
pub enum SendFailure {
    /// regroup could not obtain its own credential.
    #[error("regroup cannot obtain its credential for the apiserver: {0}")]
    Credential(#[source] CredentialError),
    /// The request body could not be read to keep it for a resend.
    #[error("reading the request body: {0}")]
    Body(String),
    /// The upstream did not answer (unreachable, timed out).
    #[error(transparent)]
    Transport(#[from] SendError),
}

impl Upstream {
    /// Puts regroup's own credential in hand into `headers`, with the
    /// kubeconfig's impersonation; [`send_as`](Self::send_as) makes sure
    /// it is fresh (protocol upgrades go with this one).
    pub fn lend_credential(&self, headers: &mut HeaderMap) {
        if let Some(v) = self.authorization(false) {
            headers.insert(header::AUTHORIZATION, v);
        }
        self.impersonate(headers);
    }

    /// Sends `req` upstream; `lent`: with regroup's credential (see the
    /// module). `remake`: how the caller makes the headers of a bodyless
    /// read again, should a connection close on it before answering (made
    /// only then, not copied for every request); asked for only when the
    /// credential sent cannot change.
    pub async fn send_as(
        &self,
        lent: bool,
        req: Request<Body>,
        remake: Option<&(dyn Fn() -> HeaderMap + Sync)>,
    ) -> Result<Response<ResponseBody>, SendFailure> {
        if !lent || self.credential_is_fixed() {
            // The caller's own, or regroup's that never changes: it is in
            // the headers, and a 401 would be answered the same again.
            let Some(remake) = remake else {
                return Ok(self.send(req).await?);
            };
            let again_uri = req.uri().clone();
            let again = move || (again_uri, remake());
            return Ok(self.send_or_remake(req, again).await?);
        }
        let (mut parts, body) = req.into_parts();
        let generation = self.fresh_credential(&mut parts.headers).await?;
        let retry = generation.is_some() && self.can_refresh();
        // Keep the body for a retry when it is small and of known length.
        let (body, kept) = match body.size_hint().exact() {
            Some(0) if retry => (body, Some(Bytes::new())),
            Some(n) if retry && n <= RETRY_BODY_LIMIT => {
                let bytes = body
                    .collect()
                    .await
                    .map_err(|e| SendFailure::Body(e.to_string()))?
                    .to_bytes();
                (full(bytes.clone()), Some(bytes))
            }
            _ => (body, None),
        };
        let (Some(generation), Some(kept)) = (generation, kept) else {
            // Never sent again: nothing to keep a copy of.
            return Ok(self.send(Request::from_parts(parts, body)).await?);
        };
        let (method, uri) = (parts.method.clone(), parts.uri.clone());
        let mut headers = parts.headers.clone();
        let resp = self.send(Request::from_parts(parts, body)).await?;
        if resp.status() != StatusCode::UNAUTHORIZED {
            return Ok(resp);
        }
        self.invalidate(generation);
        tracing::info!(
            source = self.credential_source(),
            "the apiserver refused regroup's credential (401): refreshing it and sending the request again"
        );
        let Ok(Some(_)) = self.fresh_credential(&mut headers).await else {
            return Ok(resp);
        };
        let mut again = Request::new(full(kept));
        *again.method_mut() = method;
        *again.uri_mut() = uri;
        *again.headers_mut() = headers;
        Ok(self.send(again).await?)
    }

    /// Puts regroup's fresh credential in `headers`; its generation, if any.
    async fn fresh_credential(&self, headers: &mut HeaderMap) -> Result<Option<u64>, SendFailure> {
        match self.credential().await {
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
            Err(e) => Err(SendFailure::Credential(e)),
        }
    }
}
