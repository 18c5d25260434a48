//! The front's first step: the caller authenticated as kube-apiserver's
//! request-header authenticator does, identity headers from the caller
//! removed, and the authenticated identity set in the configured headers.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};
use http::Request;
use rustls::pki_types::CertificateDer;

use crate::front::auth::{self, Identity, Rejection, RequestHeaderConfig};

/// Authenticates the caller of `req` from the connection's verified client
/// certificate chain (`peer`), leaving only the identity regroup vouches
/// for in its headers: the identity, or `None` for a caller with a token
/// and no certificate.
pub(crate) fn authenticate<B>(
    cfg: &RequestHeaderConfig,
    peer: Option<&[CertificateDer<'static>]>,
    req: &mut Request<B>,
) -> Result<Option<Identity>, Rejection> {
    let result = auth::authenticate(peer, req.headers(), cfg);
    auth::strip_identity_headers(req.headers_mut(), cfg);
    match result {
        Ok(id) => {
            set(req.headers_mut(), cfg, &id);
            Ok(Some(id))
        }
        // No front-proxy certificate, but a token: the app delegates its
        // TokenReview itself; no identity headers go with it.
        Err(Rejection::NoClientCertificate)
            if req.headers().contains_key(header::AUTHORIZATION) =>
        {
            Ok(None)
        }
        Err(r) => Err(r),
    }
}

/// The forwarded identity, in the first configured header of each kind.
fn set(h: &mut HeaderMap, cfg: &RequestHeaderConfig, id: &Identity) {
    let put = |h: &mut HeaderMap, name: &str, value: &str| {
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name.as_bytes()),
            HeaderValue::from_str(value),
        ) {
            h.append(n, v);
        }
    };
    if let Some(n) = cfg.username_headers.first() {
        put(h, n, &id.user);
    }
    if let (Some(n), Some(uid)) = (cfg.uid_headers.first(), &id.uid) {
        put(h, n, uid);
    }
    if let Some(n) = cfg.group_headers.first() {
        for g in &id.groups {
            put(h, n, g);
        }
    }
    if let Some(prefix) = cfg.extra_headers_prefixes.first() {
        for (k, vs) in &id.extra {
            let key: String =
                percent_encoding::utf8_percent_encode(k, percent_encoding::NON_ALPHANUMERIC)
                    .to_string();
            for v in vs {
                put(h, &format!("{prefix}{key}"), v);
            }
        }
    }
}
