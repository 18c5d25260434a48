//! TLS for the aggregated front listener: regroup's serving certificate, and
//! client certificates verified against the cluster's request-header
//! (front-proxy) CA by rustls' [`WebPkiClientVerifier`].
//!
//! As kube-apiserver does (`tls.VerifyClientCertIfGiven`), a client
//! certificate is optional at the TLS layer: a caller without one completes
//! the handshake and is answered 401 by the handler (see
//! [`super::auth::authenticate`]). A caller that *does* present one must
//! chain to the CA bundle, be within its validity period and, when it has an
//! extended key usage, allow client authentication; otherwise the handshake
//! fails. So a certificate the handler sees through
//! `ServerConnection::peer_certificates()` has already been verified; what is
//! left to the handler is the common-name check against the allowed names.
//!
//! [`ReloadingConfig`] keeps the configuration current as the serving
//! certificate, its key and the CA bundle change on disk (or the CA arrives
//! anew from `kube-system/extension-apiserver-authentication`).

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::PrivateKeyDer;
use rustls::server::danger::ClientCertVerifier;
use rustls::server::WebPkiClientVerifier;
use rustls::{RootCertStore, ServerConfig};

use crate::net::pem_file::{self, FileError};
use crate::net::tls::{Identity, TlsError};
use crate::net::tls_error::{certificates, TlsPartError};

/// Why the front's TLS configuration can't be built. Never quotes the CA
/// bundle or a certificate.
#[derive(Debug, thiserror::Error)]
pub enum FrontTlsError {
    /// The request-header CA bundle (not PEM, holding no certificate,
    /// refused as a verifier's roots), the serving certificate or key
    /// can't be used, or the crypto provider refused the protocol versions.
    #[error(transparent)]
    Part(#[from] TlsPartError),
    /// No certificate of the bundle is usable as a trust anchor.
    #[error("{CA_BUNDLE}: none of its {0} certificate(s) is usable as a CA")]
    NoUsableCa(usize),
    /// The request-header CA file can't be read.
    #[error(transparent)]
    ReadCa(#[from] FileError),
    /// The serving certificate or key file can't be read.
    #[error(transparent)]
    Files(#[from] TlsError),
}

const CA_BUNDLE: &str = "request-header CA bundle";
const SERVING_CERT: &str = "front serving certificate";

/// How often, at most, [`ReloadingConfig::current`] looks at the files.
pub const DEFAULT_RELOAD_INTERVAL: Duration = Duration::from_secs(5);

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The trust anchors of a PEM CA bundle (the request-header CA file, or the
/// `requestheader-client-ca-file` value of the ConfigMap).
///
/// Like Go's `x509.CertPool` loading in kube-apiserver, every certificate in
/// the bundle is a root; a certificate webpki can't use as a trust anchor is
/// skipped (and logged as a count), and a bundle with no usable one is an
/// error. Errors never quote the bundle.
pub fn client_ca_roots(client_ca_pem: &[u8]) -> Result<RootCertStore, FrontTlsError> {
    let certs = certificates(client_ca_pem, CA_BUNDLE)?;
    let mut roots = RootCertStore::empty();
    let (added, ignored) = roots.add_parsable_certificates(certs);
    if added == 0 {
        return Err(FrontTlsError::NoUsableCa(ignored));
    }
    if ignored > 0 {
        tracing::warn!(
            added,
            ignored,
            "request-header CA bundle: some certificates are not usable as a CA and were skipped"
        );
    }
    Ok(roots)
}

/// The client-certificate verifier: rustls' webpki verifier over the
/// request-header CA bundle, with unauthenticated callers allowed through the
/// handshake (they get 401 from the handler).
pub fn client_verifier(client_ca_pem: &[u8]) -> Result<Arc<dyn ClientCertVerifier>, FrontTlsError> {
    let roots = client_ca_roots(client_ca_pem)?;
    let verifier = WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(TlsPartError::verifier(CA_BUNDLE))?;
    Ok(verifier)
}

/// A rustls server configuration for the front: `serving` as the server's
/// certificate, h2 and http/1.1 by ALPN, client certificates verified by
/// [`client_verifier`] against `client_ca_pem`.
pub fn server_config(
    serving: &Identity,
    client_ca_pem: &[u8],
) -> Result<Arc<ServerConfig>, FrontTlsError> {
    build(&serving.cert_pem, &serving.key_pem, client_ca_pem)
}

fn build(
    cert_pem: &str,
    key_pem: &str,
    client_ca_pem: &[u8],
) -> Result<Arc<ServerConfig>, FrontTlsError> {
    let certs = certificates(cert_pem.as_bytes(), SERVING_CERT)?;
    let key = PrivateKeyDer::from_pem_slice(key_pem.as_bytes())
        .map_err(TlsPartError::pem("front serving key"))?;
    let verifier = client_verifier(client_ca_pem)?;
    let mut cfg = ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(TlsPartError::versions)?
        .with_client_cert_verifier(verifier)
        // Also checks that the key is the certificate's.
        .with_single_cert(certs, key)
        .map_err(TlsPartError::refused(SERVING_CERT))?;
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(cfg))
}

/// Where the front's serving certificate comes from.
#[derive(Clone)]
pub enum ServingSource {
    /// PEM files (chain leaf first, and key), re-read when they change.
    Files {
        /// Certificate chain file.
        cert: PathBuf,
        /// Private key file.
        key: PathBuf,
    },
    /// Fixed PEM (generated at start).
    Fixed {
        /// Certificate chain (leaf first).
        cert_pem: String,
        /// Private key.
        key_pem: String,
    },
}

impl ServingSource {
    /// A fixed serving identity (e.g. from [`crate::net::tls::generate`]).
    pub fn fixed(id: &Identity) -> ServingSource {
        ServingSource::Fixed {
            cert_pem: id.cert_pem.clone(),
            key_pem: id.key_pem.clone(),
        }
    }
}

/// Where the request-header CA bundle comes from.
#[derive(Clone)]
pub enum ClientCaSource {
    /// A PEM file (`--requestheader-client-ca-file` style), re-read when it
    /// changes.
    File(PathBuf),
    /// PEM bytes, e.g. the ConfigMap's `requestheader-client-ca-file`; a new
    /// value is installed with [`ReloadingConfig::set_client_ca_pem`].
    Pem(Vec<u8>),
}

/// What identifies a version of a file without reading it: modification
/// time, length and (on Unix) inode, so that a Kubernetes Secret or
/// ConfigMap volume update (a symlink swapped to a new directory) and an
/// in-place rewrite within the mtime granularity are both noticed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stamp {
    modified: Option<SystemTime>,
    len: u64,
    ino: u64,
}

fn stamp(path: &Path) -> Option<Stamp> {
    // `metadata` follows symlinks: the stamp is the target's.
    let m = std::fs::metadata(path).ok()?;
    #[cfg(unix)]
    let ino = std::os::unix::fs::MetadataExt::ino(&m);
    #[cfg(not(unix))]
    let ino = 0;
    Some(Stamp {
        modified: m.modified().ok(),
        len: m.len(),
        ino,
    })
}

/// What the reloader knows; behind one mutex so that reloads are serialized.
struct Sources {
    client_ca: ClientCaSource,
    /// Stamps of the files the installed configuration was built from:
    /// serving certificate, serving key, CA bundle (`None` for non-files).
    stamps: [Option<Stamp>; 3],
    last_check: Instant,
}

/// A front TLS configuration that follows its files.
///
/// Design: the current `Arc<ServerConfig>` sits in a `RwLock`; each new
/// connection takes it with [`current`](Self::current) (a read lock and an
/// `Arc` clone) and builds its `TlsAcceptor` from it, so a connection keeps
/// the configuration it started with and new connections get the new one.
/// At most once per interval (default [`DEFAULT_RELOAD_INTERVAL`]),
/// `current` stats the serving certificate, key and CA files (a cheap
/// `metadata` call each; a caller that finds another thread already checking
/// doesn't wait for it). When a stamp (mtime, length, inode) changed, the
/// files are read and a whole new `ServerConfig` built (certificate/key
/// mismatch included, as when a certificate was written but its key not yet)
/// and swapped in. If that fails, the previous configuration stays in use,
/// the failure is logged (paths and reasons, never contents) and the files
/// are tried again at the next interval. A CA coming from the ConfigMap
/// rather than a file is installed with
/// [`set_client_ca_pem`](Self::set_client_ca_pem).
///
/// Connections already established are not re-verified when the CA changes
/// (kube-apiserver doesn't either).
pub struct ReloadingConfig {
    serving: ServingSource,
    interval: Duration,
    sources: Mutex<Sources>,
    current: RwLock<Arc<ServerConfig>>,
}

impl ReloadingConfig {
    /// Loads the configuration once; an error here is fatal to the caller
    /// (there is no previous configuration to keep).
    pub fn new(serving: ServingSource, client_ca: ClientCaSource) -> Result<Self, FrontTlsError> {
        let stamps = file_stamps(&serving, &client_ca);
        let config = load(&serving, &client_ca)?;
        Ok(ReloadingConfig {
            serving,
            interval: DEFAULT_RELOAD_INTERVAL,
            sources: Mutex::new(Sources {
                client_ca,
                stamps,
                last_check: Instant::now(),
            }),
            current: RwLock::new(config),
        })
    }

    /// Checks the files at most once per `interval` (zero: on every call).
    /// For the unit tests: `regroup serve` keeps the default.
    #[cfg(test)]
    pub(crate) fn with_interval(mut self, interval: Duration) -> Self {
        self.interval = interval;
        self
    }

    /// The configuration for a new connection, after reloading it if the
    /// interval has passed and a file changed.
    pub fn current(&self) -> Arc<ServerConfig> {
        if let Ok(mut sources) = self.sources.try_lock() {
            if sources.last_check.elapsed() >= self.interval {
                if let Err(e) = self.reload_locked(&mut sources) {
                    tracing::warn!("front TLS: keeping the previous configuration: {e}");
                }
            }
        }
        self.installed()
    }

    /// A `TlsAcceptor` over [`current`](Self::current).
    pub fn acceptor(&self) -> tokio_rustls::TlsAcceptor {
        tokio_rustls::TlsAcceptor::from(self.current())
    }

    /// Checks the files now, whatever the interval. `Ok(true)` when a new
    /// configuration was installed; on error the previous one stays. For
    /// the unit tests: `regroup serve` reloads through `current`.
    #[cfg(test)]
    pub(crate) fn reload_if_changed(&self) -> Result<bool, FrontTlsError> {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        self.reload_locked(&mut sources)
    }

    /// Installs a new request-header CA bundle (from the ConfigMap), from now
    /// on the CA source. On error the previous configuration and source stay.
    pub fn set_client_ca_pem(&self, pem: Vec<u8>) -> Result<(), FrontTlsError> {
        let mut sources = self.sources.lock().unwrap_or_else(PoisonError::into_inner);
        let client_ca = ClientCaSource::Pem(pem);
        let stamps = file_stamps(&self.serving, &client_ca);
        let config = load(&self.serving, &client_ca)?;
        sources.client_ca = client_ca;
        sources.stamps = stamps;
        self.install(config);
        Ok(())
    }

    fn reload_locked(&self, sources: &mut Sources) -> Result<bool, FrontTlsError> {
        sources.last_check = Instant::now();
        // Stamp before reading: a change racing the read shows up as a
        // changed stamp at the next check and is read again.
        let stamps = file_stamps(&self.serving, &sources.client_ca);
        if stamps == sources.stamps {
            return Ok(false);
        }
        let config = load(&self.serving, &sources.client_ca)?;
        sources.stamps = stamps;
        self.install(config);
        tracing::info!("front TLS: reloaded the serving certificate and request-header CA");
        Ok(true)
    }

    fn install(&self, config: Arc<ServerConfig>) {
        *self.current.write().unwrap_or_else(PoisonError::into_inner) = config;
    }

    fn installed(&self) -> Arc<ServerConfig> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

fn file_stamps(serving: &ServingSource, client_ca: &ClientCaSource) -> [Option<Stamp>; 3] {
    let (cert, key) = match serving {
        ServingSource::Files { cert, key } => (stamp(cert), stamp(key)),
        ServingSource::Fixed { .. } => (None, None),
    };
    let ca = match client_ca {
        ClientCaSource::File(p) => stamp(p),
        ClientCaSource::Pem(_) => None,
    };
    [cert, key, ca]
}

fn load(
    serving: &ServingSource,
    client_ca: &ClientCaSource,
) -> Result<Arc<ServerConfig>, FrontTlsError> {
    let ca_file;
    let ca: &[u8] = match client_ca {
        ClientCaSource::File(p) => {
            ca_file = pem_file::read(p)?;
            &ca_file
        }
        ClientCaSource::Pem(pem) => pem,
    };
    match serving {
        ServingSource::Files { cert, key } => {
            let id = crate::net::tls::from_files(cert, key)?;
            build(&id.cert_pem, &id.key_pem, ca)
        }
        ServingSource::Fixed { cert_pem, key_pem } => build(cert_pem, key_pem, ca),
    }
}
