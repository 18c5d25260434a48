//! TLS clients for tests: trust one CA, present a certificate or not.
#![allow(dead_code)]

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use regroup::net::tls::Identity;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// An HTTPS client (h2 or http/1.1) trusting `ca_pem`, presenting `cert`.
pub fn https_client(
    ca_pem: &str,
    cert: Option<&Identity>,
) -> Client<HttpsConnector<HttpConnector>, Full<Bytes>> {
    let mut roots = rustls::RootCertStore::empty();
    for c in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(c.unwrap()).unwrap();
    }
    let b = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots);
    let cfg = match cert {
        Some(id) => b
            .with_client_auth_cert(
                CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
                    .collect::<Result<_, _>>()
                    .unwrap(),
                PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes()).unwrap(),
            )
            .unwrap(),
        None => b.with_no_client_auth(),
    };
    let conn = hyper_rustls::HttpsConnectorBuilder::new()
        .with_tls_config(cfg)
        .https_only()
        .enable_all_versions()
        .build();
    Client::builder(TokioExecutor::new()).build(conn)
}

/// A TLS server configuration for a test app (h2, http/1.1); with
/// `ask_client_cert`, it asks for a client certificate and accepts any (the
/// app's own trust is tested elsewhere), so a test can see one was sent.
pub fn app_server_config(id: &Identity, ask_client_cert: bool) -> Arc<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let certs: Vec<CertificateDer<'static>> =
        CertificateDer::pem_slice_iter(id.cert_pem.as_bytes())
            .collect::<Result<_, _>>()
            .unwrap();
    let key = PrivateKeyDer::from_pem_slice(id.key_pem.as_bytes()).unwrap();
    let b = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .unwrap();
    let b = if ask_client_cert {
        #[derive(Debug)]
        struct Any(Arc<rustls::crypto::CryptoProvider>);
        impl rustls::server::danger::ClientCertVerifier for Any {
            fn root_hint_subjects(&self) -> &[rustls::DistinguishedName] {
                &[]
            }
            fn client_auth_mandatory(&self) -> bool {
                false
            }
            fn verify_client_cert(
                &self,
                _: &CertificateDer<'_>,
                _: &[CertificateDer<'_>],
                _: rustls::pki_types::UnixTime,
            ) -> Result<rustls::server::danger::ClientCertVerified, rustls::Error> {
                Ok(rustls::server::danger::ClientCertVerified::assertion())
            }
            fn verify_tls12_signature(
                &self,
                m: &[u8],
                c: &CertificateDer<'_>,
                d: &rustls::DigitallySignedStruct,
            ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error>
            {
                rustls::crypto::verify_tls12_signature(
                    m,
                    c,
                    d,
                    &self.0.signature_verification_algorithms,
                )
            }
            fn verify_tls13_signature(
                &self,
                m: &[u8],
                c: &CertificateDer<'_>,
                d: &rustls::DigitallySignedStruct,
            ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error>
            {
                rustls::crypto::verify_tls13_signature(
                    m,
                    c,
                    d,
                    &self.0.signature_verification_algorithms,
                )
            }
            fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
                self.0.signature_verification_algorithms.supported_schemes()
            }
        }
        b.with_client_cert_verifier(Arc::new(Any(provider)))
    } else {
        b.with_no_client_auth()
    };
    let mut cfg = b.with_single_cert(certs, key).unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Arc::new(cfg)
}
