//! The front's hook: the aggregator's caller authenticated as
//! kube-apiserver's request-header authenticator does
//! (`front/identity.rs`), on arrival, before anything of its request is
//! read. The request-header settings change when the cluster's do.
//!
//! Two uses: the front of an app's aggregated server forwards the
//! identity in the configured headers (the app reads them); publish mode
//! forwards nothing of the caller's (the central cluster sees regroup's
//! credential alone) and keeps the identity in the context, where its own
//! hook reads it to ask the remote cluster's RBAC.

use std::sync::{Arc, RwLock};

use http::Request;
use hyper::body::Incoming;
use rustls::pki_types::CertificateDer;

use super::{Amend, Ctx};
use crate::front::auth::{self, Rejection, RequestHeaderConfig};
use crate::front::identity;

/// The front's authentication of its callers.
pub(crate) struct FrontIdentity {
    pub auth: Arc<RwLock<RequestHeaderConfig>>,
    /// The identity goes on in the configured headers (the front), or is
    /// kept in the context only (publish mode: a front-proxy certificate
    /// is then the only way in; there is no token to review).
    pub forward: bool,
}

impl Amend for FrontIdentity {
    fn noun(&self) -> &'static str {
        "caller"
    }

    fn admit(
        &self,
        ctx: &mut Ctx,
        req: &mut Request<Incoming>,
        peer: Option<&[CertificateDer<'static>]>,
    ) -> Result<bool, Rejection> {
        let cfg = self.auth.read().unwrap_or_else(|p| p.into_inner()).clone();
        ctx.who = if self.forward {
            identity::authenticate(&cfg, peer, req)?
        } else {
            let who = auth::authenticate(peer, req.headers(), &cfg);
            auth::strip_identity_headers(req.headers_mut(), &cfg);
            Some(who?)
        };
        Ok(true)
    }
}
