//! Why `regroup serve` could not start: one error type for every step of
//! start-up, each message naming the setting or file at fault.

use std::net::SocketAddr;
use std::path::PathBuf;

/// Why `regroup serve` could not start (or stopped at once).
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The upstream the settings name.
    #[error(transparent)]
    Upstream(#[from] crate::upstream::from_settings::FromSettingsError),
    /// The plain-HTTP listener beyond loopback.
    #[error("--listen {0}: the plain-HTTP listener must be on loopback (127.0.0.1 or [::1])")]
    NotLoopback(SocketAddr),
    /// The async runtime.
    #[error("starting the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The SIGHUP handler.
    #[error("installing the SIGHUP handler: {0}")]
    Sighup(#[source] std::io::Error),
    /// A listener's port.
    #[error("listening on {addr}: {source}")]
    Listen {
        /// The address.
        addr: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// The bound listener's own address.
    #[error("{0}")]
    LocalAddr(#[source] std::io::Error),
    /// A file the configuration names (`what`: its setting).
    #[error("{what} {}: {source}", path.display())]
    Read {
        /// The setting naming it.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The generated CA could not be written.
    #[error("writing the generated CA to {}: {source}", path.display())]
    WriteCa {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// `listeners.tls` without a certificate source.
    #[error("listeners.tls needs certFile/keyFile or generatedCaFile")]
    TlsSource,
    /// The TLS listener's certificate files.
    #[error(transparent)]
    CertFiles(#[from] crate::net::serving_cert::CertFilesError),
    /// A generated identity or its server configuration.
    #[error(transparent)]
    Tls(#[from] crate::net::tls::TlsError),
    /// The request-header ConfigMap could not be read.
    #[error(transparent)]
    Follow(#[from] crate::front::ca_follower::FollowError),
    /// The cluster's request-header settings.
    #[error(transparent)]
    AuthConfig(#[from] crate::front::auth::AuthConfigError),
    /// Neither `fromCluster` nor `clientCaFile`.
    #[error("front.requestHeader.clientCaFile is required")]
    NoClientCaFile,
    /// The front's TLS configuration.
    #[error(transparent)]
    FrontTls(#[from] crate::front::tls::FrontTlsError),
    /// Publish mode.
    #[error(transparent)]
    Publish(#[from] crate::publish::PublishError),
    /// The front's backend.
    #[error("front.backend: {0}")]
    FrontBackend(#[source] crate::upstream::UpstreamError),
    /// A webhook's backend URL.
    #[error("webhooks.hooks {name}: backend: {source}")]
    HookUrl {
        /// The hook.
        name: String,
        /// Why.
        source: http::uri::InvalidUri,
    },
    /// A webhook's backend client.
    #[error("webhooks.hooks {name}: backend: {source}")]
    HookBackend {
        /// The hook.
        name: String,
        /// Why.
        source: crate::upstream::UpstreamError,
    },
    /// The webhook listener's TLS configuration.
    #[error(transparent)]
    WebhookTls(#[from] crate::webhook::tls::WebhookTlsError),
}

/// A file a setting names, read whole.
pub(super) fn read_named(
    what: &'static str,
    path: &std::path::Path,
) -> Result<Vec<u8>, StartError> {
    std::fs::read(path).map_err(|source| StartError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// A text file a setting names, read whole.
pub(super) fn read_named_text(
    what: &'static str,
    path: &std::path::Path,
) -> Result<String, StartError> {
    std::fs::read_to_string(path).map_err(|source| StartError::Read {
        what,
        path: path.to_path_buf(),
        source,
    })
}

/// The error of binding `addr`.
pub(super) fn listen_error(addr: SocketAddr) -> impl FnOnce(std::io::Error) -> StartError {
    move |source| StartError::Listen { addr, source }
}
