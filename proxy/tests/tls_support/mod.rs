//! TLS clients for tests: trust one CA, present a certificate or not.
#![allow(dead_code)]

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use regroup::serve::tls::Identity;
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
