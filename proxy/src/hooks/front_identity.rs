//! The front's hook: the aggregator's caller authenticated as
//! kube-apiserver's request-header authenticator does
//! (`front/identity.rs`), before anything of its request is read.
//! The request-header settings change when the cluster's do.

use std::sync::{Arc, RwLock};

use http::Request;
use hyper::body::Incoming;
use rustls::pki_types::CertificateDer;

use super::Amend;
use crate::front::auth::{Rejection, RequestHeaderConfig};
use crate::front::identity;

/// The front's authentication of its callers.
pub(crate) struct FrontIdentity {
    pub auth: Arc<RwLock<RequestHeaderConfig>>,
}

impl Amend for FrontIdentity {
    fn noun(&self) -> &'static str {
        "caller"
    }

    fn admit(
        &self,
        req: &mut Request<Incoming>,
        peer: Option<&[CertificateDer<'static>]>,
    ) -> Result<bool, Rejection> {
        let cfg = self.auth.read().unwrap_or_else(|p| p.into_inner()).clone();
        identity::authenticate(&cfg, peer, req).map(|()| true)
    }
}
