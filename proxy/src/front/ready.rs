//! `/readyz`'s check of the aggregated front: its request-header CA and its
//! serving certificate as they are now. The front keeps serving with the
//! last configuration that loaded, but a CA file that became unreadable or
//! a certificate past its `notAfter` will fail the aggregator's next
//! connections: regroup says so on `/readyz` (with the reason; never a
//! certificate's bytes or names) instead of looking healthy.

use std::time::SystemTime;

use rustls::pki_types::{pem::PemObject, CertificateDer};

use crate::front::tls::{ClientCaSource, ServingSource};

/// `Ok` when the front can serve: the CA bundle is readable and holds a
/// certificate valid `now`; the serving certificate and key are readable and
/// the leaf is valid `now`.
pub fn check(serving: &ServingSource, ca: &ClientCaSource, now: SystemTime) -> Result<(), String> {
    let ca_pem = match ca {
        ClientCaSource::File(p) => {
            std::fs::read(p).map_err(|e| format!("front request-header CA {}: {e}", p.display()))?
        }
        ClientCaSource::Pem(pem) => pem.clone(),
    };
    let what = match ca {
        ClientCaSource::File(p) => format!("front request-header CA {}", p.display()),
        ClientCaSource::Pem(_) => "front request-header CA (from the cluster)".to_string(),
    };
    let certs = certificates(&ca_pem).map_err(|e| format!("{what}: {e}"))?;
    let mut last = None;
    let mut valid = false;
    for c in &certs {
        match validity(c, now) {
            Ok(()) => valid = true,
            Err(e) => last = Some(e),
        }
    }
    if !valid {
        return Err(format!(
            "{what}: no certificate in it is valid now ({})",
            last.unwrap_or_default()
        ));
    }
    let (cert_pem, what) = match serving {
        ServingSource::Files { cert, key } => {
            std::fs::metadata(key)
                .map_err(|e| format!("front serving key {}: {e}", key.display()))?;
            (
                std::fs::read(cert)
                    .map_err(|e| format!("front serving certificate {}: {e}", cert.display()))?,
                format!("front serving certificate {}", cert.display()),
            )
        }
        ServingSource::Fixed { cert_pem, .. } => (
            cert_pem.clone().into_bytes(),
            "front serving certificate (generated)".to_string(),
        ),
    };
    let certs = certificates(&cert_pem).map_err(|e| format!("{what}: {e}"))?;
    validity(&certs[0], now).map_err(|e| format!("{what}: {e}"))
}

fn certificates(pem: &[u8]) -> Result<Vec<CertificateDer<'static>>, String> {
    let certs = CertificateDer::pem_slice_iter(pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| format!("not PEM certificates: {e}"))?;
    if certs.is_empty() {
        return Err("no certificate in it".into());
    }
    Ok(certs)
}

/// Whether `now` is within the certificate's validity period.
fn validity(der: &CertificateDer<'_>, now: SystemTime) -> Result<(), String> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)
        .map_err(|e| format!("unreadable certificate: {e}"))?;
    let v = cert.validity();
    let secs = |t: &x509_parser::time::ASN1Time| t.timestamp();
    let now = match now.duration_since(SystemTime::UNIX_EPOCH) {
        Ok(d) => d.as_secs() as i64,
        Err(_) => 0,
    };
    if now > secs(&v.not_after) {
        return Err(format!("expired at {}", v.not_after));
    }
    if now < secs(&v.not_before) {
        return Err(format!("not valid before {}", v.not_before));
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
        let why = check(&serving, &ClientCaSource::File(ca.clone()), now).unwrap_err();
        assert!(
            why.contains("front request-header CA") && why.contains("ca.crt"),
            "{why}"
        );

        // Not PEM: not ready.
        std::fs::write(&ca, "garbage").unwrap();
        let why = check(&serving, &ClientCaSource::File(ca.clone()), now).unwrap_err();
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
        let why = check(&serving, &ca, later).unwrap_err();
        assert!(why.contains("expired at"), "{why}");
        let earlier = SystemTime::UNIX_EPOCH + Duration::from_secs(86_400);
        let why = check(&serving, &ca, earlier).unwrap_err();
        assert!(why.contains("not valid before"), "{why}");
        // A serving certificate that no longer reads.
        let broken = ServingSource::Fixed {
            cert_pem: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n".into(),
            key_pem: String::new(),
        };
        let why = check(&broken, &ca, SystemTime::now()).unwrap_err();
        assert!(why.contains("front serving certificate"), "{why}");
    }
}
