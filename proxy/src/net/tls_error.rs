//! The one vocabulary of TLS errors every room shares: a part's PEM that
//! doesn't parse, a part holding no certificate, a part rustls refuses,
//! the protocol versions the crypto provider refuses. The room names the
//! part ("serving certificate", "client key", "request-header CA
//! bundle"); every message is `{part}: {why}`, and never quotes the PEM.

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::CertificateDer;

/// Why one part of a TLS configuration (a certificate, a key, a CA
/// bundle) can't be used. rustls' errors are boxed: the rooms' errors
/// carry this one and stay small.
#[derive(Debug, thiserror::Error)]
pub enum TlsPartError {
    /// The part is not PEM.
    #[error("{part}: {source}")]
    Pem {
        /// What it is.
        part: &'static str,
        /// Why.
        source: pem::Error,
    },
    /// The part holds no certificate.
    #[error("{part}: no PEM certificate found")]
    NoCertificate {
        /// What it is.
        part: &'static str,
    },
    /// rustls refuses the part: a certificate and key that make no
    /// identity, a certificate that is no trust anchor.
    #[error("{part}: {source}")]
    Refused {
        /// What it is.
        part: &'static str,
        /// Why.
        source: Box<rustls::Error>,
    },
    /// rustls refuses a client-certificate verifier over the CA bundle.
    #[error("{part}: {source}")]
    Verifier {
        /// What it is.
        part: &'static str,
        /// Why.
        source: Box<rustls::server::VerifierBuilderError>,
    },
    /// The crypto provider refused the protocol versions.
    #[error("{0}")]
    Versions(#[source] Box<rustls::Error>),
}

impl TlsPartError {
    /// The error of `part`'s PEM not parsing (for `map_err`).
    pub fn pem(part: &'static str) -> impl FnOnce(pem::Error) -> TlsPartError {
        move |source| TlsPartError::Pem { part, source }
    }

    /// The error of rustls refusing `part` (for `map_err`).
    pub fn refused(part: &'static str) -> impl FnOnce(rustls::Error) -> TlsPartError {
        move |source| TlsPartError::Refused {
            part,
            source: Box::new(source),
        }
    }

    /// The error of the crypto provider refusing the protocol versions.
    pub fn versions(source: rustls::Error) -> TlsPartError {
        TlsPartError::Versions(Box::new(source))
    }

    /// The error of rustls refusing a verifier over `part` (for `map_err`).
    pub fn verifier(
        part: &'static str,
    ) -> impl FnOnce(rustls::server::VerifierBuilderError) -> TlsPartError {
        move |source| TlsPartError::Verifier {
            part,
            source: Box::new(source),
        }
    }
}

/// The certificates of `part`'s PEM, at least one.
pub fn certificates(
    pem: &[u8],
    part: &'static str,
) -> Result<Vec<CertificateDer<'static>>, TlsPartError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<_, _>>()
        .map_err(TlsPartError::pem(part))?;
    if certs.is_empty() {
        return Err(TlsPartError::NoCertificate { part });
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_message_names_the_part_first_and_never_quotes_the_pem() {
        let e = certificates(b"", "serving certificate").unwrap_err();
        assert_eq!(
            e.to_string(),
            "serving certificate: no PEM certificate found"
        );
        let pem = b"-----BEGIN CERTIFICATE-----\nsecret!\n-----END CERTIFICATE-----\n";
        let e = certificates(pem, "certificate authority").unwrap_err();
        let msg = e.to_string();
        assert!(msg.starts_with("certificate authority: "), "{msg}");
        assert!(!msg.contains("secret"), "{msg}");
        assert!(std::error::Error::source(&e).is_some());
        let e = TlsPartError::refused("client certificate")(rustls::Error::NoCertificatesPresented);
        assert_eq!(
            e.to_string(),
            "client certificate: peer sent no certificates"
        );
    }
}
