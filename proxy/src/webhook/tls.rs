//! TLS of the webhook listener, as webhook servers are secured: a serving
//! certificate the cluster trusts through the registrations' `caBundle`
//! (from files, issued from the app's CA, or generated),
//! and, when configured, a client certificate every caller must present,
//! chaining to `clientCaFile` (kube-apiserver presents one when its
//! `--admission-control-config-file` names a kubeconfig with a client
//! certificate for this webhook). Without `clientCaFile` no client
//! certificate is asked for, like most webhook servers (kube-apiserver
//! presents none by default).

use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::ServerConfig;

use crate::front::tls::client_ca_roots;
use crate::net::issued_cert::IssuedCert;
use crate::net::serving_cert::ReloadingCert;
use crate::net::tls::Identity;
use crate::net::tls_error::TlsPartError;

/// Why the webhook listener's TLS configuration can't be built.
#[derive(Debug, thiserror::Error)]
pub enum WebhookTlsError {
    /// The client CA bundle is unusable.
    #[error("{CLIENT_CA}: {0}")]
    ClientCa(#[source] crate::front::tls::FrontTlsError),
    /// rustls refused the verifier over the client CA bundle, the
    /// generated serving certificate or key can't be used, or the crypto
    /// provider refused the protocol versions.
    #[error(transparent)]
    Part(#[from] TlsPartError),
}

const CLIENT_CA: &str = "webhooks.clientCaFile";
const SERVING_CERT: &str = "webhook serving certificate";

/// The serving certificate: files (re-read when they change) or generated.
pub enum Serving {
    /// From `certFile`/`keyFile`.
    Files(Arc<ReloadingCert>),
    /// Issued by regroup from the app's CA (`issueFrom`), anew when it
    /// rotates.
    Issued(Arc<IssuedCert>),
    /// Generated at start.
    Fixed(Identity),
}

/// The listener's TLS: `serving`, h2 and http/1.1 by ALPN, and client
/// certificates required and verified against `client_ca_pem` when given.
pub fn server_config(
    serving: Serving,
    client_ca_pem: Option<&[u8]>,
) -> Result<Arc<ServerConfig>, WebhookTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsPartError::versions)?;
    let builder = match client_ca_pem {
        Some(pem) => {
            let roots = client_ca_roots(pem).map_err(WebhookTlsError::ClientCa)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(TlsPartError::verifier(CLIENT_CA))?;
            builder.with_client_cert_verifier(verifier)
        }
        None => builder.with_no_client_auth(),
    };
    let mut cfg = match serving {
        Serving::Files(r) => builder.with_cert_resolver(r),
        Serving::Issued(r) => builder.with_cert_resolver(r),
        Serving::Fixed(id) => {
            let certs: Vec<CertificateDer<'static>> =
                CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .map_err(TlsPartError::pem(SERVING_CERT))?;
            let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes())
                .map_err(TlsPartError::pem("webhook serving key"))?;
            builder
                .with_single_cert(certs, key)
                .map_err(TlsPartError::refused(SERVING_CERT))?
        }
    };
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
