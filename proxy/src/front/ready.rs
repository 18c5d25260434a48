//! `/readyz`'s check of the aggregated front: its request-header CA and its
//! serving certificate as they are now. The front keeps serving with the
//! last configuration that loaded, but a CA file that became unreadable or
//! a certificate past its `notAfter` will fail the aggregator's next
//! connections: regroup says so on `/readyz` (with the reason; never a
//! certificate's bytes or names) instead of looking healthy.

use std::time::SystemTime;

use rustls::pki_types::{pem::PemObject, CertificateDer};

use crate::front::tls::{ClientCaSource, ServingSource};

/// Why the front is not ready. `what` names the CA or the certificate by
/// its file (or where it came from), never by its bytes or names.
#[derive(Debug, thiserror::Error)]
pub enum NotReady {
    /// A file can't be read.
    #[error("{what}: {source}")]
    Read {
        /// Which file, and what it holds.
        what: String,
        /// Why.
        source: std::io::Error,
    },
    /// A certificate is unusable.
    #[error("{what}: {source}")]
    Certificate {
        /// Which certificate.
        what: String,
        /// Why.
        source: CertificateError,
    },
    /// No certificate of the CA bundle is valid now.
    #[error("{what}: no certificate in it is valid now ({})", .last.as_ref().map(ToString::to_string).unwrap_or_default())]
    NoneValid {
        /// Which bundle.
        what: String,
        /// Why its last certificate is not valid.
        last: Option<CertificateError>,
    },
}

/// Why PEM holds no certificate valid now.
#[derive(Debug, thiserror::Error)]
pub enum CertificateError {
    /// Not PEM.
    #[error("not PEM certificates: {0}")]
    NotPem(#[source] rustls::pki_types::pem::Error),
    /// PEM without a certificate.
    #[error("no certificate in it")]
    Empty,
    /// Not X.509.
    #[error("unreadable certificate: {0}")]
    Unreadable(#[from] x509_parser::nom::Err<x509_parser::error::X509Error>),
    /// Past its `notAfter`.
    #[error("expired at {0}")]
    Expired(x509_parser::time::ASN1Time),
    /// Before its `notBefore`.
    #[error("not valid before {0}")]
    NotYetValid(x509_parser::time::ASN1Time),
}

/// `Ok` when the front can serve: the CA bundle is readable and holds a
/// certificate valid `now`; the serving certificate and key are readable and
/// the leaf is valid `now`.
pub fn check(
    serving: &ServingSource,
    ca: &ClientCaSource,
    now: SystemTime,
) -> Result<(), NotReady> {
    let what = match ca {
        ClientCaSource::File(p) => format!("front request-header CA {}", p.display()),
        ClientCaSource::Pem(_) => "front request-header CA (from the cluster)".to_string(),
    };
    let ca_pem = match ca {
        ClientCaSource::File(p) => std::fs::read(p).map_err(|source| NotReady::Read {
            what: what.clone(),
            source,
        })?,
        ClientCaSource::Pem(pem) => pem.clone(),
    };
    let certificate = |what: &str| {
        let what = what.to_owned();
        move |source| NotReady::Certificate { what, source }
    };
    let certs = certificates(&ca_pem).map_err(certificate(&what))?;
    let mut last = None;
    let mut valid = false;
    for c in &certs {
        match validity(c, now) {
            Ok(()) => valid = true,
            Err(e) => last = Some(e),
        }
    }
    if !valid {
        return Err(NotReady::NoneValid { what, last });
    }
    let (cert_pem, what) = match serving {
        ServingSource::Files { cert, key } => {
            std::fs::metadata(key).map_err(|source| NotReady::Read {
                what: format!("front serving key {}", key.display()),
                source,
            })?;
            let what = format!("front serving certificate {}", cert.display());
            let pem = std::fs::read(cert).map_err(|source| NotReady::Read {
                what: what.clone(),
                source,
            })?;
            (pem, what)
        }
        ServingSource::Fixed { cert_pem, .. } => (
            cert_pem.clone().into_bytes(),
            "front serving certificate (generated)".to_string(),
        ),
    };
    let certs = certificates(&cert_pem).map_err(certificate(&what))?;
    validity(&certs[0], now).map_err(certificate(&what))
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, CertificateError> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(CertificateError::NotPem)?;
    if certs.is_empty() {
        return Err(CertificateError::Empty);
    }
    Ok(certs)
}

/// Whether `now` is within the certificate's validity period.
fn validity(der: &CertificateDer<'_>, now: SystemTime) -> Result<(), CertificateError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)?;
    let v = cert.validity();
    let secs = |t: &x509_parser::time::ASN1Time| t.timestamp();
    let now = match now.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(_) => 0,
    };
    if now > secs(&v.not_after) {
        return Err(CertificateError::Expired(v.not_after));
    }
    if now < secs(&v.not_before) {
        return Err(CertificateError::NotYetValid(v.not_before));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn generated() -> crate::net::tls::Identity {
        crate::net::tls::generate_for("test CA", &[], false).unwrap()
    }

    #[test]
    fn ready_with_readable_valid_certificates() {
        let id = generated();
        let dir = std::env::temp_dir().join(format!("regroup-front-ready-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = dir.join("ca.crt");
        std::fs::write(&ca, id.ca_pem.as_deref().unwrap()).unwrap();
        let serving = ServingSource::fixed(&id);
        let now = SystemTime::now();
        check(&serving, &ClientCaSource::File(ca.clone()), now).expect("ready");

        // The CA file gone: not ready, saying which file and why.
        std::fs::remove_file(&ca).unwrap();
        let why = check(&serving, &ClientCaSource::File(ca.clone()), now)
            .unwrap_err()
            .to_string();
        assert!(
            why.contains("front request-header CA") && why.contains("ca.crt"),
            "{why}"
        );

        // Not PEM: not ready.
        std::fs::write(&ca, "garbage").unwrap();
        let why = check(&serving, &ClientCaSource::File(ca.clone()), now)
            .unwrap_err()
            .to_string();
        assert!(why.contains("no certificate"), "{why}");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn not_ready_once_the_ca_or_the_serving_certificate_expired() {
        let id = generated();
        let ca = ClientCaSource::Pem(id.ca_pem.clone().unwrap().into_bytes());
        let serving = ServingSource::fixed(&id);
        // rcgen's default validity ends in 4096; a clock past it sees both expired.
        let later = SystemTime::UNIX_EPOCH + Duration::from_secs(4_200 * 365 * 86_400);
        let why = check(&serving, &ca, later).unwrap_err().to_string();
        assert!(why.contains("expired at"), "{why}");
        let earlier = SystemTime::UNIX_EPOCH + Duration::from_secs(86_400);
        let why = check(&serving, &ca, earlier).unwrap_err().to_string();
        assert!(why.contains("not valid before"), "{why}");
        // A serving certificate that no longer reads.
        let broken = ServingSource::Fixed {
            cert_pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
            key_pem: String::new(),
        };
        let why = check(&broken, &ca, SystemTime::now())
            .unwrap_err()
            .to_string();
        assert!(why.contains("front serving certificate"), "{why}");
    }
}
