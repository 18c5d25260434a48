//! The client to the kube-apiserver: TLS, credentials, one pooled client.

pub mod kubeconfig;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use bytes::Bytes;
use http::{HeaderValue, Request, Response, Uri};
use http_body_util::combinators::BoxBody;
use hyper::body::Incoming;
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::client::legacy::Client;
use hyper_util::rt::TokioExecutor;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

pub use kubeconfig::Resolved;

/// Errors of bodies flowing through regroup.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A body of either side.
pub type Body = BoxBody<Bytes, BoxError>;

/// Why the upstream client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("upstream {server}: {message}")]
pub struct UpstreamError {
    server: String,
    message: String,
}

/// How long a token read from a file is used before it is read again
/// (kubelet rotates projected service-account tokens well before expiry).
const TOKEN_FILE_TTL: Duration = Duration::from_secs(60);

enum Auth {
    None,
    Bearer(HeaderValue),
    TokenFile {
        path: PathBuf,
        cached: Mutex<Option<(HeaderValue, Instant)>>,
    },
    Basic(HeaderValue),
}

/// The apiserver and how to reach it.
pub struct Upstream {
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    /// Path prefix of the server URL (usually empty).
    prefix: String,
    client: Client<HttpsConnector<HttpConnector>, Body>,
    /// HTTP/1.1 only: protocol upgrades (exec, attach, port-forward).
    upgrade_client: Client<HttpsConnector<HttpConnector>, Body>,
    auth: Auth,
    description: String,
    /// Time from sending a request to its response headers.
    response_header_timeout: Duration,
}

/// Why a request to the upstream got no response.
#[derive(Debug)]
pub enum SendError {
    /// The client failed: connect, TLS, a dropped connection.
    Client(hyper_util::client::legacy::Error),
    /// No response headers within the configured time
    /// (`limits.upstreamResponseHeaderTimeout`).
    Timeout(Duration),
}

impl SendError {
    /// True when the apiserver did not answer in time.
    pub fn is_timeout(&self) -> bool {
        matches!(self, SendError::Timeout(_))
    }
}

impl std::fmt::Display for SendError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SendError::Client(e) => e.fmt(f),
            SendError::Timeout(d) => write!(f, "no response headers within {}s", d.as_secs_f64()),
        }
    }
}

impl std::error::Error for SendError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            SendError::Client(e) => std::error::Error::source(e),
            SendError::Timeout(_) => None,
        }
    }
}

/// The upstream's connection and response-header timeouts.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// TCP connect.
    pub connect: Duration,
    /// From sending a request to its response headers.
    pub response_header: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        let l = regroup_config::Limits::default();
        Timeouts {
            connect: l.upstream_connect_timeout,
            response_header: l.upstream_response_header_timeout,
        }
    }
}

impl From<&regroup_config::Limits> for Timeouts {
    fn from(l: &regroup_config::Limits) -> Self {
        Timeouts {
            connect: l.upstream_connect_timeout,
            response_header: l.upstream_response_header_timeout,
        }
    }
}

impl Upstream {
    /// Builds the client from a resolved kubeconfig or in-cluster config.
    pub fn new(r: &Resolved, insecure_override: bool) -> Result<Upstream, UpstreamError> {
        Upstream::with_timeouts(r, insecure_override, Timeouts::default())
    }

    /// Like [`Upstream::new`], with these timeouts.
    pub fn with_timeouts(
        r: &Resolved,
        insecure_override: bool,
        timeouts: Timeouts,
    ) -> Result<Upstream, UpstreamError> {
        let err = |message: String| UpstreamError {
            server: r.server.clone(),
            message,
        };
        let uri: Uri = r
            .server
            .parse()
            .map_err(|e| err(format!("not a URL: {e}")))?;
        let scheme = uri
            .scheme()
            .cloned()
            .ok_or_else(|| err("no scheme".into()))?;
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| err("no host".into()))?;
        let prefix = uri.path().trim_end_matches('/').to_owned();
        let insecure = r.insecure || insecure_override;
        let tls = tls_config(r, insecure).map_err(err)?;

        let server_name = match &r.tls_server_name {
            Some(n) => Some(
                ServerName::try_from(n.clone())
                    .map_err(|e| err(format!("tls-server-name: {e}")))?,
            ),
            None => None,
        };
        let build = |http2: bool| {
            let mut http = HttpConnector::new();
            http.enforce_http(false);
            http.set_nodelay(true);
            http.set_connect_timeout(Some(timeouts.connect));
            let mut b = hyper_rustls::HttpsConnectorBuilder::new()
                .with_tls_config(tls.clone())
                .https_or_http();
            if let Some(name) = server_name.clone() {
                b = b.with_server_name_resolver(move |_: &Uri| {
                    Ok::<_, rustls::pki_types::InvalidDnsNameError>(name.clone())
                });
            }
            let connector = if http2 {
                b.enable_all_versions().wrap_connector(http)
            } else {
                b.enable_http1().wrap_connector(http)
            };
            let mut cb = Client::builder(TokioExecutor::new());
            cb.pool_idle_timeout(Duration::from_secs(90));
            cb.build(connector)
        };
        let auth = if let Some(t) = &r.token {
            Auth::Bearer(bearer(t).map_err(err)?)
        } else if let Some(p) = &r.token_file {
            Auth::TokenFile {
                path: p.clone(),
                cached: Mutex::new(None),
            }
        } else if let Some((u, p)) = &r.basic {
            let v = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            Auth::Basic(
                HeaderValue::from_str(&format!("Basic {v}")).map_err(|e| err(e.to_string()))?,
            )
        } else {
            Auth::None
        };
        let description = format!(
            "{} ({}{})",
            r.server,
            match &auth {
                Auth::None if r.client_cert.is_some() => "client certificate",
                Auth::None => "no credentials",
                Auth::Bearer(_) => "bearer token",
                Auth::TokenFile { .. } => "token file",
                Auth::Basic(_) => "basic auth",
            },
            if insecure { ", TLS NOT VERIFIED" } else { "" }
        );
        Ok(Upstream {
            scheme,
            authority,
            prefix,
            client: build(true),
            upgrade_client: build(false),
            auth,
            description,
            response_header_timeout: timeouts.response_header,
        })
    }

    /// For logs: the server and the kind of credentials (never their value).
    pub fn describe(&self) -> &str {
        &self.description
    }

    /// The upstream URI for a path and query.
    pub fn uri(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        Uri::builder()
            .scheme(self.scheme.clone())
            .authority(self.authority.clone())
            .path_and_query(format!("{}{path_and_query}", self.prefix))
            .build()
    }

    /// The upstream host, for the `Host` header of HTTP/1.1 requests.
    pub fn authority(&self) -> &http::uri::Authority {
        &self.authority
    }

    /// regroup's own `Authorization`, if it has credentials of that kind.
    /// `reload` forces a token file to be read again (after a 401).
    pub fn authorization(&self, reload: bool) -> Option<HeaderValue> {
        match &self.auth {
            Auth::None => None,
            Auth::Bearer(v) | Auth::Basic(v) => Some(v.clone()),
            Auth::TokenFile { path, cached } => {
                let mut c = cached.lock().unwrap_or_else(|p| p.into_inner());
                let fresh = c
                    .as_ref()
                    .is_some_and(|(_, at)| !reload && at.elapsed() < TOKEN_FILE_TTL);
                if !fresh {
                    match std::fs::read_to_string(path) {
                        Ok(t) => match bearer(t.trim()) {
                            Ok(v) => *c = Some((v, Instant::now())),
                            Err(e) => tracing::warn!(path = %path.display(), "token file: {e}"),
                        },
                        Err(e) => {
                            tracing::warn!(path = %path.display(), "cannot read token file: {e}")
                        }
                    }
                }
                c.as_ref().map(|(v, _)| v.clone())
            }
        }
    }

    /// True when regroup's credential can be refreshed (a token file).
    pub fn can_refresh(&self) -> bool {
        matches!(self.auth, Auth::TokenFile { .. })
    }

    /// Sends a request (its URI already upstream's).
    /// Sends a request (its URI already upstream's). Only the wait for the
    /// response headers is bounded, never the body: watches stream on.
    pub async fn send(&self, req: Request<Body>) -> Result<Response<Incoming>, SendError> {
        self.bounded(self.client.request(req)).await
    }

    /// Sends a protocol-upgrade request over HTTP/1.1.
    pub async fn send_upgrade(&self, req: Request<Body>) -> Result<Response<Incoming>, SendError> {
        self.bounded(self.upgrade_client.request(req)).await
    }

    async fn bounded(
        &self,
        f: impl std::future::Future<
            Output = Result<Response<Incoming>, hyper_util::client::legacy::Error>,
        >,
    ) -> Result<Response<Incoming>, SendError> {
        match tokio::time::timeout(self.response_header_timeout, f).await {
            Ok(r) => r.map_err(SendError::Client),
            Err(_) => Err(SendError::Timeout(self.response_header_timeout)),
        }
    }
}

fn bearer(token: &str) -> Result<HeaderValue, String> {
    let mut v = HeaderValue::from_str(&format!("Bearer {token}"))
        .map_err(|_| "token is not a valid header value".to_string())?;
    v.set_sensitive(true);
    Ok(v)
}

fn tls_config(r: &Resolved, insecure: bool) -> Result<ClientConfig, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| e.to_string())?;
    let builder = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider)))
    } else {
        let mut roots = RootCertStore::empty();
        if let Some(pem) = &r.ca_pem {
            for cert in CertificateDer::pem_slice_iter(pem) {
                let cert = cert.map_err(|e| format!("certificate authority: {e}"))?;
                roots
                    .add(cert)
                    .map_err(|e| format!("certificate authority: {e}"))?;
            }
            if roots.is_empty() {
                return Err("certificate authority: no PEM certificate found".into());
            }
        } else if r.server.starts_with("https://") {
            return Err("no certificate-authority for an https server (set one, or \
                 insecure-skip-tls-verify for a throwaway test cluster)"
                .into());
        }
        builder.with_root_certificates(roots)
    };
    match &r.client_cert {
        Some((cert, key)) => {
            let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_slice_iter(cert)
                .collect::<Result<_, _>>()
                .map_err(|e| format!("client certificate: {e}"))?;
            let key = PrivateKeyDer::from_pem_slice(key).map_err(|e| format!("client key: {e}"))?;
            builder
                .with_client_auth_cert(certs, key)
                .map_err(|e| format!("client certificate: {e}"))
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
