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

/// Why the webhook listener's TLS configuration can't be built.
#[derive(Debug, thiserror::Error)]
pub enum WebhookTlsError {
    /// The crypto provider refused the protocol versions.
    #[error("{0}")]
    Versions(#[source] rustls::Error),
    /// The client CA bundle is unusable.
    #[error("webhooks.clientCaFile: {0}")]
    ClientCa(#[source] crate::front::tls::FrontTlsError),
    /// rustls refused the verifier over the client CA bundle.
    #[error("webhooks.clientCaFile: {0}")]
    Verifier(#[source] rustls::server::VerifierBuilderError),
    /// The generated serving certificate is not PEM.
    #[error("webhook serving certificate: {0}")]
    CertificatePem(#[source] rustls::pki_types::pem::Error),
    /// The generated serving key is not PEM.
    #[error("webhook serving key: {0}")]
    KeyPem(#[source] rustls::pki_types::pem::Error),
    /// The serving certificate and key don't make an identity.
    #[error("webhook serving certificate: {0}")]
    Certificate(#[source] rustls::Error),
}

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
        .map_err(WebhookTlsError::Versions)?;
    let builder = match client_ca_pem {
        Some(pem) => {
            let roots = client_ca_roots(pem).map_err(WebhookTlsError::ClientCa)?;
            let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(WebhookTlsError::Verifier)?;
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
                    .map_err(WebhookTlsError::CertificatePem)?;
            let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes())
                .map_err(WebhookTlsError::KeyPem)?;
            builder
                .with_single_cert(certs, key)
                .map_err(WebhookTlsError::Certificate)?
        }
    };
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}
