//! A serving certificate regroup issues itself from a CA the app keeps in
//! files (a Secret volume): for an app that makes its own webhook
//! certificate from a CA in a Secret (cert-manager's webhook, with
//! `--dynamic-serving-ca-secret-name`), so that the `caBundle` whatever
//! keeps it injects (that CA) verifies regroup's listener too.
//!
//! The CA files are checked at most every [`CHECK_EVERY`], at a handshake.
//! A leaf is issued when the CA changes (the app rotated it) and when two
//! thirds of the leaf's life are gone. Until the CA can be read (the app
//! creates the Secret after it starts, the kubelet fills the volume later)
//! handshakes fail and a warning says why, once per change of the files.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};

use rcgen::{
    CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, Issuer, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;

use super::pem_file::{not_pem, read_text, FileError};
use crate::file_stamp::{file_stamp as stamp, FileStamp as Stamp};
use crate::net::serving_cert::CHECK_EVERY;

/// How long an issued leaf is valid (cert-manager's own leaves: 7 days),
/// never past the CA's end.
pub const LEAF_LIFE: Duration = Duration::from_secs(7 * 24 * 3600);

/// Why no leaf could be issued from the app's CA.
#[derive(Debug, thiserror::Error)]
pub enum IssueError {
    /// A CA file can't be read, or is not PEM.
    #[error(transparent)]
    File(#[from] FileError),
    /// The CA certificate can't issue.
    #[error("{}: {source}", path.display())]
    Ca {
        /// The certificate file.
        path: PathBuf,
        /// Why.
        source: CaError,
    },
    /// The CA key is of a kind rcgen can't sign with.
    #[error(
        "{}: {source} (a PKCS#8 ECDSA P-256/P-384, Ed25519 or RSA key is needed)",
        path.display()
    )]
    KeyKind {
        /// The key file.
        path: PathBuf,
        /// Why.
        source: rcgen::Error,
    },
    /// The CA certificate and key make no issuer.
    #[error("{}: {source}", path.display())]
    Issuer {
        /// The certificate file.
        path: PathBuf,
        /// Why.
        source: rcgen::Error,
    },
    /// The CA's validity has ended.
    #[error("the CA has expired")]
    Expired,
    /// `webhooks.issueFrom.dnsNames` can't be a certificate's names.
    #[error("webhooks.issueFrom.dnsNames: {0}")]
    DnsNames(#[source] rcgen::Error),
    /// The leaf's key can't be made.
    #[error("{0}")]
    LeafKey(#[source] rcgen::Error),
    /// The leaf can't be signed.
    #[error("signing: {0}")]
    Signing(#[source] rcgen::Error),
    /// The leaf's key is not a private key rustls reads (rustls says why,
    /// in a fixed text).
    #[error("{0}")]
    LeafKeyDer(&'static str),
    /// The leaf's key can't sign.
    #[error("{0}")]
    LeafSigningKey(#[source] rustls::Error),
}

/// Why a CA certificate can't issue leaves here.
#[derive(Debug, thiserror::Error)]
pub enum CaError {
    /// Not X.509.
    #[error("{0}")]
    Parse(#[from] x509_parser::nom::Err<x509_parser::error::X509Error>),
    /// Not a CA.
    #[error("not a CA certificate")]
    NotCa,
    /// A subject rcgen can't copy into the leaf's issuer.
    #[error("a subject with multi-valued or empty parts can't be an issuer here")]
    MultiValuedSubject,
    /// A validity ending before the epoch.
    #[error("its end of validity is before 1970")]
    BeforeEpoch,
}

struct Leaf {
    key: Arc<CertifiedKey>,
    renew_at: SystemTime,
}

struct State {
    leaf: Option<Leaf>,
    stamps: (Stamp, Stamp),
    checked: Option<Instant>,
}

/// A leaf for `dns_names`, issued from the CA in `ca_cert`/`ca_key`.
pub struct IssuedCert {
    ca_cert: PathBuf,
    ca_key: PathBuf,
    dns_names: Vec<String>,
    provider: Arc<rustls::crypto::CryptoProvider>,
    state: Mutex<State>,
}

impl std::fmt::Debug for IssuedCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IssuedCert")
            .field("ca_cert", &self.ca_cert)
            .field("dns_names", &self.dns_names)
            .finish()
    }
}

impl IssuedCert {
    /// Issues the first leaf now if the CA is there (a missing CA is not an
    /// error: the app may create it after regroup starts).
    pub fn new(ca_cert: &Path, ca_key: &Path, dns_names: &[String]) -> IssuedCert {
        let c = IssuedCert {
            ca_cert: ca_cert.to_path_buf(),
            ca_key: ca_key.to_path_buf(),
            dns_names: dns_names.to_vec(),
            provider: Arc::new(rustls::crypto::ring::default_provider()),
            state: Mutex::new(State {
                leaf: None,
                stamps: (None, None),
                checked: None,
            }),
        };
        c.current();
        c
    }

    /// The leaf to present now, issued anew first when the CA files
    /// changed or the leaf is due; `None` while no CA could be read.
    pub fn current(&self) -> Option<Arc<CertifiedKey>> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        let due = s.checked.is_none_or(|t| t.elapsed() >= CHECK_EVERY);
        if due {
            s.checked = Some(Instant::now());
            let now = (stamp(&self.ca_cert), stamp(&self.ca_key));
            let changed = now != s.stamps;
            let expiring = s
                .leaf
                .as_ref()
                .is_none_or(|l| SystemTime::now() >= l.renew_at);
            if changed || expiring {
                match self.issue() {
                    Ok(leaf) => {
                        tracing::info!(ca = %self.ca_cert.display(), "webhook listener: serving certificate issued from the app's CA");
                        s.leaf = Some(leaf);
                    }
                    // Said once per change of the files, not at every handshake.
                    Err(e) if changed => tracing::warn!(
                        "webhook listener: no serving certificate issued from {} (the previous one, if any, stays): {e}",
                        self.ca_cert.display()
                    ),
                    Err(_) => {}
                }
                s.stamps = now;
            }
        }
        s.leaf.as_ref().map(|l| l.key.clone())
    }

    fn issue(&self) -> Result<Leaf, IssueError> {
        let (ca_pem, key_pem) = (read_text(&self.ca_cert)?, read_text(&self.ca_key)?);
        let ca_der =
            CertificateDer::from_pem_slice(ca_pem.as_bytes()).map_err(not_pem(&self.ca_cert))?;
        let ca_end = checked_ca_end(&ca_der).map_err(|source| IssueError::Ca {
            path: self.ca_cert.clone(),
            source,
        })?;
        let key_der =
            PrivateKeyDer::from_pem_slice(key_pem.as_bytes()).map_err(not_pem(&self.ca_key))?;
        let ca_key = KeyPair::try_from(&key_der).map_err(|source| IssueError::KeyKind {
            path: self.ca_key.clone(),
            source,
        })?;
        let issuer =
            Issuer::from_ca_cert_der(&ca_der, ca_key).map_err(|source| IssueError::Issuer {
                path: self.ca_cert.clone(),
                source,
            })?;
        let now = SystemTime::now();
        let not_after = (now + LEAF_LIFE).min(ca_end);
        let life = not_after
            .duration_since(now)
            .map_err(|_| IssueError::Expired)?;
        let mut params =
            CertificateParams::new(self.dns_names.clone()).map_err(IssueError::DnsNames)?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            self.dns_names.first().cloned().unwrap_or_default(),
        );
        params.distinguished_name = dn;
        // A minute back: the caller's clock may be behind ours.
        params.not_before = (now - Duration::from_secs(60)).into();
        params.not_after = not_after.into();
        params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        params.use_authority_key_identifier_extension = true;
        let leaf_key = KeyPair::generate().map_err(IssueError::LeafKey)?;
        let cert = params
            .signed_by(&leaf_key, &issuer)
            .map_err(IssueError::Signing)?;
        let key =
            PrivateKeyDer::try_from(leaf_key.serialize_der()).map_err(IssueError::LeafKeyDer)?;
        let signing = self
            .provider
            .key_provider
            .load_private_key(key)
            .map_err(IssueError::LeafSigningKey)?;
        Ok(Leaf {
            key: Arc::new(CertifiedKey::new(vec![cert.der().clone()], signing)),
            renew_at: now + life * 2 / 3,
        })
    }
}

/// The CA certificate's end of validity, after the checks that keep the
/// issuing from failing later (a CA, a name of one attribute per part).
fn checked_ca_end(der: &CertificateDer<'_>) -> Result<SystemTime, CaError> {
    let (_, cert) = x509_parser::parse_x509_certificate(der)?;
    if !cert.is_ca() {
        return Err(CaError::NotCa);
    }
    if cert.subject().iter().any(|rdn| rdn.iter().count() != 1) {
        return Err(CaError::MultiValuedSubject);
    }
    let end = cert.validity().not_after.timestamp();
    let end = u64::try_from(end).map_err(|_| CaError::BeforeEpoch)?;
    Ok(SystemTime::UNIX_EPOCH + Duration::from_secs(end))
}

impl ResolvesServerCert for IssuedCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        self.current()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rcgen::{BasicConstraints, IsCa};
    use rustls::client::danger::ServerCertVerifier;

    /// A CA as cert-manager's webhook makes one: ECDSA P-384, PKCS#8.
    fn ca(cn: &str) -> (String, String) {
        let key = KeyPair::generate_for(&rcgen::PKCS_ECDSA_P384_SHA384).unwrap();
        let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
        p.distinguished_name.push(DnType::CommonName, cn);
        p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        p.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        (p.self_signed(&key).unwrap().pem(), key.serialize_pem())
    }

    fn verifies(leaf: &CertifiedKey, ca_pem: &str, name: &str) -> bool {
        let mut roots = rustls::RootCertStore::empty();
        roots
            .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).unwrap())
            .unwrap();
        let v = rustls::client::WebPkiServerVerifier::builder_with_provider(
            Arc::new(roots),
            Arc::new(rustls::crypto::ring::default_provider()),
        )
        .build()
        .unwrap();
        v.verify_server_cert(
            &leaf.cert[0],
            &[],
            &rustls::pki_types::ServerName::try_from(name.to_owned()).unwrap(),
            &[],
            rustls::pki_types::UnixTime::now(),
        )
        .is_ok()
    }

    #[test]
    fn a_leaf_from_the_apps_ca_verifies_and_follows_its_rotation() {
        let dir = std::env::temp_dir().join(format!("regroup-issued-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        let names = vec!["hook.team-b.svc".to_owned(), "hook".to_owned()];
        // No CA yet: nothing to present, no error.
        let issued = IssuedCert::new(&c, &k, &names);
        assert!(issued.current().is_none());

        let first = ca("cert-manager-webhook-ca");
        std::fs::write(&c, &first.0).unwrap();
        std::fs::write(&k, &first.1).unwrap();
        std::thread::sleep(CHECK_EVERY + Duration::from_millis(20));
        let a = issued.current().expect("issued once the CA is there");
        assert!(verifies(&a, &first.0, "hook.team-b.svc"));
        assert!(
            !verifies(&a, &first.0, "other.team-b.svc"),
            "only its names"
        );

        // The app rotates its CA: the next leaf chains to the new one.
        let second = ca("cert-manager-webhook-ca");
        std::fs::write(&c, &second.0).unwrap();
        std::fs::write(&k, &second.1).unwrap();
        std::thread::sleep(CHECK_EVERY + Duration::from_millis(20));
        let b = issued.current().unwrap();
        assert!(verifies(&b, &second.0, "hook.team-b.svc"));
        assert!(!verifies(&b, &first.0, "hook.team-b.svc"));

        // A broken CA keeps the leaf it had.
        std::fs::write(&k, "not a key").unwrap();
        std::thread::sleep(CHECK_EVERY + Duration::from_millis(20));
        assert_eq!(issued.current().unwrap().cert[0], b.cert[0]);
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn a_certificate_that_is_not_a_ca_issues_nothing() {
        let dir = std::env::temp_dir().join(format!("regroup-issued-nca-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        let key = KeyPair::generate().unwrap();
        let leaf = CertificateParams::new(vec!["x".to_owned()])
            .unwrap()
            .self_signed(&key)
            .unwrap();
        std::fs::write(&c, leaf.pem()).unwrap();
        std::fs::write(&k, key.serialize_pem()).unwrap();
        assert!(IssuedCert::new(&c, &k, &["x".to_owned()])
            .current()
            .is_none());
        std::fs::remove_dir_all(&dir).ok();
    }
}
