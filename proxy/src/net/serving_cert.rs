//! The sidecar TLS listener's certificate from `certFile`/`keyFile`,
//! reloaded when the files change (checked at most every
//! [`CHECK_EVERY`], at a handshake): new connections get the new
//! certificate, open ones keep theirs. A pair that can't be read or doesn't
//! parse (a half-written renewal) is logged and the previous one is kept.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls::ServerConfig;

use super::pem_file::{not_pem, read, FileError};
use super::tls_error::TlsPartError;
use crate::file_stamp::{file_stamp as stamp, FileStamp as Stamp};

/// How often the files are checked for a change.
pub const CHECK_EVERY: Duration = Duration::from_secs(1);

/// Why the certificate files can't be served.
#[derive(Debug, thiserror::Error)]
pub enum CertFilesError {
    /// A file can't be read, or is not PEM.
    #[error(transparent)]
    File(#[from] FileError),
    /// The certificate file holds no certificate.
    #[error("{}: no PEM certificate found", path.display())]
    NoCertificate {
        /// The file.
        path: PathBuf,
    },
    /// The key can't sign.
    #[error("{}: {source}", path.display())]
    Key {
        /// The key file.
        path: PathBuf,
        /// Why.
        source: rustls::Error,
    },
    /// The key is not the certificate's.
    #[error("{} and {}: {source}", cert.display(), key.display())]
    Mismatch {
        /// The certificate file.
        cert: PathBuf,
        /// The key file.
        key: PathBuf,
        /// Why.
        source: rustls::Error,
    },
    /// The crypto provider refused the protocol versions.
    #[error(transparent)]
    Versions(#[from] TlsPartError),
}

struct State {
    key: Arc<CertifiedKey>,
    stamps: (Stamp, Stamp),
    checked: Instant,
}

/// A certificate and key from files, reloaded when they change.
pub struct ReloadingCert {
    cert: PathBuf,
    key: PathBuf,
    provider: Arc<rustls::crypto::CryptoProvider>,
    state: Mutex<State>,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert", &self.cert)
            .field("key", &self.key)
            .finish()
    }
}

fn load(
    cert: &Path,
    key: &Path,
    provider: &rustls::crypto::CryptoProvider,
) -> Result<Arc<CertifiedKey>, CertFilesError> {
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(&read(cert)?)
        .collect::<Result<_, _>>()
        .map_err(not_pem(cert))?;
    if certs.is_empty() {
        return Err(CertFilesError::NoCertificate {
            path: cert.to_path_buf(),
        });
    }
    let der = PrivateKeyDer::from_pem_slice(&read(key)?).map_err(not_pem(key))?;
    let signing = provider
        .key_provider
        .load_private_key(der)
        .map_err(|source| CertFilesError::Key {
            path: key.to_path_buf(),
            source,
        })?;
    let ck = CertifiedKey::new(certs, signing);
    ck.keys_match().map_err(|source| CertFilesError::Mismatch {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
        source,
    })?;
    Ok(Arc::new(ck))
}

impl ReloadingCert {
    /// Reads `cert` and `key` now (an error stops the start).
    pub fn new(cert: &Path, key: &Path) -> Result<ReloadingCert, CertFilesError> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let stamps = (stamp(cert), stamp(key));
        let ck = load(cert, key, &provider)?;
        Ok(ReloadingCert {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            provider,
            state: Mutex::new(State {
                key: ck,
                stamps,
                checked: Instant::now(),
            }),
        })
    }

    /// The certificate to present now, reloaded first if the files changed.
    pub fn current(&self) -> Arc<CertifiedKey> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        if s.checked.elapsed() >= CHECK_EVERY {
            s.checked = Instant::now();
            let now = (stamp(&self.cert), stamp(&self.key));
            if now != s.stamps {
                match load(&self.cert, &self.key, &self.provider) {
                    Ok(k) => {
                        s.key = k;
                        s.stamps = now;
                        tracing::info!(cert = %self.cert.display(), "TLS listener: serving certificate reloaded");
                    }
                    Err(e) => tracing::warn!(
                        "TLS listener: serving certificate NOT reloaded, the previous one stays: {e}"
                    ),
                }
            }
        }
        s.key.clone()
    }

    /// A server configuration (h2 and http/1.1, no client certificates)
    /// that presents this certificate.
    pub fn server_config(self: Arc<Self>) -> Result<Arc<ServerConfig>, CertFilesError> {
        let mut cfg = ServerConfig::builder_with_provider(self.provider.clone())
            .with_safe_default_protocol_versions()
            .map_err(TlsPartError::versions)?
            .with_no_client_auth()
            .with_cert_resolver(self);
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        Ok(Arc::new(cfg))
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_renewed_pair_is_served_a_broken_one_is_not() {
        let dir = std::env::temp_dir().join(format!("regroup-servcert-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (c, k) = (dir.join("tls.crt"), dir.join("tls.key"));
        let write = |id: &crate::net::tls::Identity| {
            std::fs::write(&c, &id.cert_pem).unwrap();
            std::fs::write(&k, &id.key_pem).unwrap();
        };
        let first = crate::net::tls::generate().unwrap();
        write(&first);
        let r = ReloadingCert::new(&c, &k).unwrap();
        let a = r.current();
        let second = crate::net::tls::generate().unwrap();
        write(&second);
        std::thread::sleep(CHECK_EVERY + Duration::from_millis(20));
        let b = r.current();
        assert_ne!(a.cert[0], b.cert[0], "renewed");
        std::fs::write(&k, "not a key").unwrap();
        std::thread::sleep(CHECK_EVERY + Duration::from_millis(20));
        assert_eq!(r.current().cert[0], b.cert[0], "the previous one stays");
        std::fs::remove_dir_all(&dir).ok();
    }
}
