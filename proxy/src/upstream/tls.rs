//! The TLS client configuration towards the upstream (and the front's and
//! webhooks' backends): the given CA, else the public web roots compiled in
//! (webpki-roots: Mozilla's, as a FROM-scratch image has no CA store to
//! read), a client certificate, or no verification at all when the
//! kubeconfig says `insecure-skip-tls-verify`.

use std::sync::Arc;

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use super::Resolved;
use crate::net::tls_error::TlsPartError;

/// Why the TLS client configuration can't be built: its parts are the
/// `certificate authority` (not PEM, holding no certificate, one not
/// usable as a root), the `client certificate` and the `client key`.
pub type ClientTlsError = TlsPartError;

const CA: &str = "certificate authority";
const CLIENT_CERT: &str = "client certificate";

pub(super) fn tls_config(
    r: &Resolved,
    cert: Option<&(Vec<u8>, Vec<u8>)>,
    insecure: bool,
) -> Result<ClientConfig, ClientTlsError> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(TlsPartError::versions)?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        if let Some(pem) = &r.ca_pem {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(TlsPartError::pem(CA))?;
                roots.add(cert).map_err(TlsPartError::refused(CA))?;
            }
            if roots.is_empty() {
                return Err(TlsPartError::NoCertificate { part: CA });
            }
        } else {
            // No CA given: the system's roots, as kubectl does. The image is
            // a static binary FROM scratch, with no CA store to read, so
            // "the system's" are Mozilla's, compiled in (webpki-roots).
            roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
        }
        builder.with_root_certificates(roots)
    };
    match cert {
        Some((cert, key)) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<_, _>>()
                .map_err(TlsPartError::pem(CLIENT_CERT))?;
            let key =
                PrivateKeyDer::from_pem_slice(key).map_err(TlsPartError::pem("client key"))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(TlsPartError::refused(CLIENT_CERT))
        }
        None => Ok(builder.with_no_client_auth()),
    }
}

/// `insecure-skip-tls-verify`: accepts any server certificate (signatures
/// are still checked, so the handshake itself is sound).
#[derive(Debug)]
struct NoVerification(Arc<rustls::crypto::CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _: &CertificateDer<'_>,
        _: &[CertificateDer<'_>],
        _: &ServerName<'_>,
        _: &[u8],
        _: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }
    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }
    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs a TLS handshake in memory between `client` and a server with
    /// `id`; returns the client's error, if any.
    fn handshake(
        client: ClientConfig,
        id: &crate::net::tls::Identity,
    ) -> Result<(), HandshakeError> {
        let server = crate::net::tls::server_config(id).unwrap();
        let mut c = rustls::ClientConnection::new(
            Arc::new(client),
            ServerName::try_from("127.0.0.1").unwrap(),
        )
        .unwrap();
        let mut s = rustls::ServerConnection::new(server).unwrap();
        for _ in 0..10 {
            let mut buf = Vec::new();
            c.write_tls(&mut buf).unwrap();
            s.read_tls(&mut &buf[..]).unwrap();
            let _ = s.process_new_packets();
            let mut buf = Vec::new();
            s.write_tls(&mut buf).unwrap();
            c.read_tls(&mut &buf[..]).unwrap();
            c.process_new_packets()?;
            if !c.is_handshaking() {
                return Ok(());
            }
        }
        Err(HandshakeError::Unfinished)
    }

    /// Why the in-memory handshake failed.
    #[derive(Debug, thiserror::Error)]
    enum HandshakeError {
        #[error("{0}")]
        Tls(#[from] rustls::Error),
        #[error("handshake did not finish")]
        Unfinished,
    }

    fn https(ca_pem: Option<Vec<u8>>) -> Resolved {
        Resolved {
            server: "https://127.0.0.1:6443".into(),
            ca_pem,
            ..Resolved::default()
        }
    }

    #[test]
    fn an_https_server_without_a_ca_is_verified_against_the_public_roots() {
        // Formerly refused at start; now built with the compiled-in roots.
        let client = tls_config(&https(None), None, false).expect("no CA: the public roots");
        // A private CA's certificate is not in them: refused, not accepted.
        let id = crate::net::tls::generate_for("private-ca", &[], false).unwrap();
        let err = handshake(client, &id).unwrap_err().to_string();
        assert!(err.contains("UnknownIssuer"), "{err}");
        // The same certificate with its CA given verifies.
        let ca = id.ca_pem.clone().unwrap().into_bytes();
        let client = tls_config(&https(Some(ca)), None, false).unwrap();
        handshake(client, &id).unwrap();
        assert!(!webpki_roots::TLS_SERVER_ROOTS.is_empty());
    }
}
