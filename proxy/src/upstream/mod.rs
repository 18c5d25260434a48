//! The client to the kube-apiserver: TLS, credentials, one pooled client.

pub mod dial;
pub mod exec;
pub mod from_settings;
mod health;
mod impersonate;
pub mod kubeconfig;
pub mod own_client;
mod pool;
mod response_deadline;
pub mod sender;
mod server_settings;
mod streams;
mod tallies;
mod tls;
pub mod vault;

use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;

use base64::Engine as _;
use http::header::{HeaderMap, HeaderName};
use http::{HeaderValue, Method, Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy::connect::HttpConnector;
pub use regroup_config::schema::Http2;
use rustls::pki_types::ServerName;

use dial::Dial;
pub use health::HealthCheck;
use impersonate::impersonation_headers;
pub use kubeconfig::{Impersonate, Resolved};
pub use pool::ClientError;
use pool::Pool;
use response_deadline::Deadlines;
pub use streams::ResponseBody;
pub use tallies::Tallies;
use tls::tls_config;
pub use vault::{bearer, Credential, CredentialError, InvalidToken, Vault};

pub use crate::body::{Body, BoxError};

/// Why the upstream client could not be built.
#[derive(Debug, thiserror::Error)]
#[error("upstream {server}: {problem}")]
pub struct UpstreamError {
    server: String,
    #[source]
    problem: UpstreamProblem,
}

/// What is wrong with the upstream's settings (its server named by
/// [`UpstreamError`]).
#[derive(Debug, thiserror::Error)]
pub enum UpstreamProblem {
    /// The server is not a URL.
    #[error("not a URL: {0}")]
    NotAUrl(#[source] http::uri::InvalidUri),
    /// The server URL has no scheme.
    #[error("no scheme")]
    NoScheme,
    /// The server URL has no host.
    #[error("no host")]
    NoHost,
    /// `tls-server-name` is not a DNS name or an IP address.
    #[error("tls-server-name: {0}")]
    TlsServerName(#[source] rustls::pki_types::InvalidDnsNameError),
    /// The static token can't be a header.
    #[error(transparent)]
    Token(#[from] vault::InvalidToken),
    /// The basic credentials can't be a header (never quoted).
    #[error("{0}")]
    Basic(#[source] http::header::InvalidHeaderValue),
    /// The impersonation can't be sent as headers.
    #[error(transparent)]
    Impersonate(#[from] impersonate::ImpersonateError),
    /// The connection pools can't be built.
    #[error(transparent)]
    Clients(#[from] ClientsError),
}

/// Why the connection pools of one TLS identity can't be built.
#[derive(Debug, thiserror::Error)]
pub enum ClientsError {
    /// The TLS client configuration (CA, client certificate).
    #[error(transparent)]
    Tls(#[from] tls::ClientTlsError),
    /// The cluster's `proxy-url`.
    #[error(transparent)]
    ProxyUrl(#[from] dial::ProxyUrlError),
    /// The server URL, as the pools dial it.
    #[error(transparent)]
    Pool(#[from] pool::PoolError),
}

/// How often the upstream CA file is checked for a change.
const CA_CHECK_EVERY: Duration = Duration::from_secs(5);

/// The connection pools of one TLS identity: rebuilt (and the old pools'
/// connections closed as they finish) when regroup's client certificate
/// changes, as client-go closes its connections when an exec plugin hands
/// out a new certificate.
struct Clients {
    /// Every request but upgrades; under `upstream.http2: watches`, every
    /// request but upgrades and watches.
    client: Pool,
    /// `upstream.http2: watches`: the watches, on connections that offer
    /// h2 (the open watches share one; the short requests in `client` stay
    /// on HTTP/1.1).
    watches: Option<Pool>,
    /// HTTP/1.1 only: protocol upgrades (exec, attach, port-forward).
    upgrade_client: Pool,
    cert: Option<Arc<(Vec<u8>, Vec<u8>)>>,
}

/// What the clients are built from.
struct TlsParams {
    resolved: Resolved,
    insecure: bool,
    server_name: Option<ServerName<'static>>,
    timeouts: Timeouts,
    /// Whether h2 is offered to a TLS server, and for which requests
    /// (`upstream.http2`).
    http2: Http2,
    /// The server URL, what the pools dial.
    server: Uri,
    /// The upstream's tallies, kept when its clients are built again.
    tallies: Arc<Tallies>,
}

/// The apiserver and how to reach it.
pub struct Upstream {
    scheme: http::uri::Scheme,
    authority: http::uri::Authority,
    /// Path prefix of the server URL (usually empty).
    prefix: String,
    clients: ArcSwap<Clients>,
    rebuild: Mutex<()>,
    params: Mutex<TlsParams>,
    /// The CA file, re-read when it changes: (path, last check, its stamp).
    ca_watch: Option<(PathBuf, Mutex<(Instant, crate::file_stamp::FileStamp)>)>,
    vault: Vault,
    /// What it counts for the metrics (`Metrics::count_upstream`).
    tallies: Arc<Tallies>,
    impersonate: Option<Vec<(HeaderName, HeaderValue)>>,
    description: String,
    /// Time from sending a request to its response headers, on a coarse
    /// timer of its own.
    response_deadlines: Deadlines,
}

/// Why a request to the upstream got no response.
#[derive(Debug)]
pub enum SendError {
    /// The client failed: connect, TLS, a dropped connection.
    Client(ClientError),
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

/// The upstream's connection and response-header timeouts, the h2
/// connection's health check and its stream limit.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// TCP connect.
    pub connect: Duration,
    /// From sending a request to its response headers.
    pub response_header: Duration,
    /// The h2 connection's ping (`limits.upstreamReadIdleTimeout`,
    /// `upstreamPingTimeout`).
    pub health: HealthCheck,
    /// Streams opened on one h2 connection at most
    /// (`limits.upstreamMaxStreamsPerConnection`).
    pub max_streams_per_connection: usize,
    /// A connection with nothing in flight this long is closed (HTTP/1.1;
    /// h2 beyond the first) (`limits.upstreamIdleConnectionTimeout`).
    pub idle_connection: Duration,
}

impl Default for Timeouts {
    fn default() -> Self {
        (&regroup_config::Limits::default()).into()
    }
}

impl From<&regroup_config::Limits> for Timeouts {
    fn from(l: &regroup_config::Limits) -> Self {
        Timeouts {
            connect: l.upstream_connect_timeout,
            response_header: l.upstream_response_header_timeout,
            health: HealthCheck::from(l),
            max_streams_per_connection: l.upstream_max_streams_per_connection,
            idle_connection: l.upstream_idle_connection_timeout,
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
        Upstream::with_protocol(r, insecure_override, timeouts, Http2::Auto)
    }

    /// Like [`Upstream::with_timeouts`], offering h2 to a TLS server or not
    /// (`upstream.http2`).
    pub fn with_protocol(
        r: &Resolved,
        insecure_override: bool,
        timeouts: Timeouts,
        http2: Http2,
    ) -> Result<Upstream, UpstreamError> {
        let err = |problem: UpstreamProblem| UpstreamError {
            server: r.server.clone(),
            problem,
        };
        let uri: Uri = r
            .server
            .parse()
            .map_err(|e| err(UpstreamProblem::NotAUrl(e)))?;
        let scheme = uri
            .scheme()
            .cloned()
            .ok_or_else(|| err(UpstreamProblem::NoScheme))?;
        let authority = uri
            .authority()
            .cloned()
            .ok_or_else(|| err(UpstreamProblem::NoHost))?;
        let prefix = uri.path().trim_end_matches('/').to_owned();
        let insecure = r.insecure || insecure_override;
        let server_name = match &r.tls_server_name {
            Some(n) => Some(
                ServerName::try_from(n.clone())
                    .map_err(|e| err(UpstreamProblem::TlsServerName(e)))?,
            ),
            None => None,
        };
        let (source, label) = if let Some(x) = &r.exec {
            (vault::Source::Exec(Box::new(x.clone())), "exec plugin")
        } else if let Some(t) = &r.token {
            (
                vault::Source::Static(bearer(t).map_err(|e| err(e.into()))?),
                "bearer token",
            )
        } else if let Some(p) = &r.token_file {
            (vault::Source::TokenFile(p.clone()), "token file")
        } else if let Some((u, p)) = &r.basic {
            let v = base64::engine::general_purpose::STANDARD.encode(format!("{u}:{p}"));
            let mut v = HeaderValue::from_str(&format!("Basic {v}"))
                .map_err(|e| err(UpstreamProblem::Basic(e)))?;
            v.set_sensitive(true);
            (vault::Source::Static(v), "basic auth")
        } else if r.client_cert.is_some() {
            (vault::Source::None, "client certificate")
        } else {
            (vault::Source::None, "no credentials")
        };
        let tallies = Arc::new(Tallies::default());
        let vault = Vault::new(
            source,
            r.client_cert_files.clone(),
            r.client_cert.clone(),
            tallies.clone(),
        );
        let impersonate = match &r.impersonate {
            Some(i) => Some(impersonation_headers(i).map_err(|e| err(e.into()))?),
            None => None,
        };
        let description = format!(
            "{}{} ({}{}{}{})",
            r.server,
            if r.proxy_url.is_some() {
                " via its proxy-url"
            } else {
                ""
            },
            label,
            if r.impersonate.is_some() {
                ", impersonating"
            } else {
                ""
            },
            match http2 {
                Http2::Auto => "",
                Http2::Never => ", HTTP/1.1 only",
                Http2::Watches => ", h2 for watches, logs and proxies only",
            },
            if insecure { ", TLS NOT VERIFIED" } else { "" }
        );
        let params = TlsParams {
            resolved: Resolved {
                client_cert: None,
                ..r.clone()
            },
            insecure,
            server_name,
            timeouts,
            http2,
            server: uri.clone(),
            tallies: tallies.clone(),
        };
        let params_tallies = tallies;
        let cert = vault
            .cached()
            .and_then(|c| c.client_cert.clone())
            .or_else(|| r.client_cert.clone().map(Arc::new));
        let clients = build_clients(&params, cert).map_err(|e| err(e.into()))?;
        let ca_watch = r.ca_file.clone().filter(|_| !insecure).map(|p| {
            let st = crate::file_stamp::file_stamp(&p);
            (p, Mutex::new((Instant::now(), st)))
        });
        Ok(Upstream {
            ca_watch,
            scheme,
            authority,
            prefix,
            clients: ArcSwap::from_pointee(clients),
            rebuild: Mutex::new(()),
            params: Mutex::new(params),
            vault,
            tallies: params_tallies,
            impersonate,
            description,
            response_deadlines: Deadlines::new(timeouts.response_header),
        })
    }

    /// For logs: the server and the kind of credentials (never their value).
    pub fn describe(&self) -> &str {
        &self.description
    }

    /// The upstream URI for a path and query.
    pub fn uri(&self, path_and_query: &str) -> Result<Uri, http::Error> {
        self.uri_owned(path_and_query.to_owned())
    }

    /// [`Upstream::uri`] for a path and query built for it (a renamed
    /// one): with no server path prefix, the string becomes the URI's
    /// without a copy (`format!` and the builder were ~550 instructions a
    /// renamed request, callgrind).
    pub fn uri_owned(&self, path_and_query: String) -> Result<Uri, http::Error> {
        let pq = if self.prefix.is_empty() {
            path_and_query
        } else {
            let mut pq = String::with_capacity(self.prefix.len() + path_and_query.len());
            pq.push_str(&self.prefix);
            pq.push_str(&path_and_query);
            pq
        };
        self.with_path_and_query(http::uri::PathAndQuery::try_from(pq)?)
    }

    /// [`Upstream::uri`] for a path and query already checked (a request's
    /// own): with no server path prefix, it is taken as it is.
    pub fn uri_of(&self, path_and_query: &http::uri::PathAndQuery) -> Result<Uri, http::Error> {
        if !self.prefix.is_empty() {
            return self.uri(path_and_query.as_str());
        }
        self.with_path_and_query(path_and_query.clone())
    }

    #[inline]
    fn with_path_and_query(&self, pq: http::uri::PathAndQuery) -> Result<Uri, http::Error> {
        // The parts set at once: the builder carries a `Result` through
        // each step (~250 instructions a request, callgrind).
        let mut parts = http::uri::Parts::default();
        parts.scheme = Some(self.scheme.clone());
        parts.authority = Some(self.authority.clone());
        parts.path_and_query = Some(pq);
        Ok(Uri::from_parts(parts)?)
    }

    /// The upstream host, for the `Host` header of HTTP/1.1 requests.
    pub fn authority(&self) -> &http::uri::Authority {
        &self.authority
    }

    /// regroup's own `Authorization` as cached now, without waiting for a
    /// refresh (`reload`: a token file or client-certificate files read
    /// again first). [`Upstream::credential`] is what requests use.
    pub fn authorization(&self, reload: bool) -> Option<HeaderValue> {
        if reload {
            if let Some(c) = self.vault.cached() {
                self.vault.invalidate(c.generation);
            }
        }
        self.vault.cached().and_then(|c| c.authorization.clone())
    }

    /// regroup's own credential, fresh: cached until shortly before it
    /// expires, else one refresh (an exec plugin run, a file read) shared by
    /// every request that waits for it. `None` when regroup has none. A new
    /// client certificate replaces the connection pool.
    pub async fn credential(&self) -> Result<Option<Arc<Credential>>, CredentialError> {
        if !self.vault.has_credential() {
            return Ok(None);
        }
        let c = self.vault.get().await?;
        let current = self.clients.load();
        let same = match (&current.cert, &c.client_cert) {
            (None, None) => true,
            (Some(a), Some(b)) => Arc::ptr_eq(a, b) || a == b,
            _ => false,
        };
        if !same {
            let _one = self.rebuild.lock().unwrap_or_else(|p| p.into_inner());
            let current = self.clients.load();
            let still = match (&current.cert, &c.client_cert) {
                (Some(a), Some(b)) => !Arc::ptr_eq(a, b) && a != b,
                (None, None) => false,
                _ => true,
            };
            if still {
                let params = self.params.lock().unwrap_or_else(|p| p.into_inner());
                match build_clients(&params, c.client_cert.clone()) {
                    Ok(clients) => {
                        self.clients.store(Arc::new(clients));
                        tracing::info!(
                            "regroup's client certificate changed: new upstream connections use it"
                        );
                    }
                    // A renewal caught half written: the connections keep
                    // the previous certificate until the pair is whole.
                    Err(e) => tracing::warn!(
                        "regroup's new client certificate is NOT used, the previous one stays: {e}"
                    ),
                }
            }
        }
        Ok(Some(c))
    }

    /// True when regroup's credential never changes (a fixed token or basic
    /// auth, a fixed client certificate, or none): the one in hand
    /// ([`Upstream::authorization`]) is the one [`Upstream::credential`]
    /// would give, and a 401 is not worth a retry.
    pub fn credential_is_fixed(&self) -> bool {
        !self.vault.can_refresh()
    }

    /// The apiserver answered 401 to the credential of `generation`.
    pub fn invalidate(&self, generation: u64) {
        self.vault.invalidate(generation);
    }

    /// What this upstream counts for the metrics.
    pub fn tallies(&self) -> &Arc<Tallies> {
        &self.tallies
    }

    /// True when regroup's credential can be refreshed (a token file, an
    /// exec plugin, client-certificate files).
    pub fn can_refresh(&self) -> bool {
        self.vault.can_refresh()
    }

    /// The source of regroup's credential, for metrics and logs.
    pub fn credential_source(&self) -> &'static str {
        self.vault.label()
    }

    /// Whether the kubeconfig impersonates (`as`, ...): then the caller's
    /// own `Impersonate-*` never go with regroup's credential (the
    /// pipeline's headers step leaves them out).
    pub fn impersonates(&self) -> bool {
        self.impersonate.is_some()
    }

    /// Puts the kubeconfig's impersonation (`as`, `as-groups`, ...) in
    /// `headers`, which hold none of the caller's (see
    /// [`Upstream::impersonates`]). Only with regroup's own credential.
    pub fn impersonate(&self, headers: &mut HeaderMap) {
        let Some(imp) = &self.impersonate else {
            return;
        };
        for (k, v) in imp {
            headers.append(k.clone(), v.clone());
        }
    }

    /// Sends a request (its URI already upstream's). Only the wait for the
    /// response headers is bounded, never the body: watches stream on.
    ///
    /// A bodyless GET, HEAD or OPTIONS whose connection closed before any
    /// answer is sent once more, on a new connection: a pooled keep-alive
    /// connection the apiserver closed as the request went out fails that
    /// way, and the request had no effect (Go's client does the same).
    ///
    /// This and [`Upstream::send_or_remake`] return `send_resending`'s
    /// future itself: as `async fn`s they were a layer each around it, its
    /// state moved once more (docs/performance.md, "The sender's layers").
    pub fn send(
        &self,
        req: Request<Body>,
    ) -> impl Future<Output = Result<Response<ResponseBody>, SendError>> + Send + '_ {
        let copy = resendable(&req).then(|| (req.uri().clone(), req.headers().clone()));
        self.send_resending(req, copy.map(|c| move || c))
    }

    /// Like [`Upstream::send`], but a request sent again (a bodyless read a
    /// connection closed on before answering) gets its URI and headers from
    /// `again`, called only then: the caller makes them again from what it
    /// still holds, where a copy kept for a retry that almost never comes
    /// cost every request ~0.8k instructions.
    pub fn send_or_remake<'a>(
        &'a self,
        req: Request<Body>,
        again: impl FnOnce() -> (Uri, HeaderMap) + Send + 'a,
    ) -> impl Future<Output = Result<Response<ResponseBody>, SendError>> + Send + 'a {
        let resend = resendable(&req);
        self.send_resending(req, resend.then_some(again))
    }

    async fn send_resending(
        &self,
        req: Request<Body>,
        again: Option<impl FnOnce() -> (Uri, HeaderMap)>,
    ) -> Result<Response<ResponseBody>, SendError> {
        self.check_ca();
        let clients = self.clients.load_full();
        let pool = clients.pool_for(&req, &self.prefix);
        let (method, version) = (req.method().clone(), req.version());
        let first = self.response_deadlines.bound(pool.send(req)).await;
        match self.answered(first) {
            Err(e) if again.is_some() && closed_before_answer(&e) => {
                tracing::debug!(
                    "upstream connection closed before an answer: sending the request again"
                );
                let (uri, headers) = again.expect("checked")();
                let mut r = Request::new(crate::body::empty());
                *r.method_mut() = method;
                *r.uri_mut() = uri;
                *r.version_mut() = version;
                *r.headers_mut() = headers;
                self.answered(self.response_deadlines.bound(pool.send(r)).await)
            }
            r => r,
        }
    }

    /// Sends a protocol-upgrade request over HTTP/1.1.
    pub async fn send_upgrade(&self, req: Request<Body>) -> Result<Response<Incoming>, SendError> {
        self.check_ca();
        let clients = self.clients.load_full();
        let resp = self.answered(
            self.response_deadlines
                .bound(clients.upgrade_client.send(req))
                .await,
        )?;
        Ok(resp.map(ResponseBody::into_incoming))
    }

    /// Re-reads the CA file when it changed (checked at most every
    /// [`CA_CHECK_EVERY`]); new connections verify against it. A file that
    /// can't be read or holds no certificate leaves the CA in force.
    fn check_ca(&self) {
        let Some((path, state)) = &self.ca_watch else {
            return;
        };
        let Ok(mut st) = state.try_lock() else {
            return;
        };
        if st.0.elapsed() < CA_CHECK_EVERY {
            return;
        }
        st.0 = Instant::now();
        let now = crate::file_stamp::file_stamp(path);
        if now == st.1 {
            return;
        }
        let pem = match std::fs::read(path) {
            Ok(p) => p,
            Err(e) => {
                tracing::warn!(ca = %path.display(), "upstream CA NOT reloaded: {e}");
                return;
            }
        };
        let mut params = self.params.lock().unwrap_or_else(|p| p.into_inner());
        let old = params.resolved.ca_pem.replace(pem);
        let cert = self.clients.load().cert.clone();
        match build_clients(&params, cert) {
            Ok(c) => {
                self.clients.store(Arc::new(c));
                st.1 = now;
                tracing::info!(ca = %path.display(), "upstream CA reloaded: new connections verify with it");
            }
            Err(e) => {
                params.resolved.ca_pem = old;
                tracing::warn!(ca = %path.display(), "upstream CA NOT reloaded, the previous one stays: {e}");
            }
        }
    }

    /// A response bounded by the response-header deadline, as a
    /// [`SendError`]. (The wait itself is awaited where the send future is
    /// made: an `async` wrapper here copied that future twice more.)
    fn answered(
        &self,
        r: Result<Result<Response<ResponseBody>, ClientError>, response_deadline::Elapsed>,
    ) -> Result<Response<ResponseBody>, SendError> {
        match r {
            Ok(r) => r.map_err(SendError::Client),
            Err(response_deadline::Elapsed) => {
                Err(SendError::Timeout(self.response_deadlines.timeout()))
            }
        }
    }
}

impl Clients {
    /// The pool that carries `req`: under `upstream.http2: watches` a watch,
    /// a log or a proxy goes to the h2 pool, everything else to `client`.
    fn pool_for(&self, req: &Request<Body>, prefix: &str) -> &Pool {
        match &self.watches {
            Some(w) if is_long_running(req.uri(), prefix) => w,
            _ => &self.client,
        }
    }
}

/// Whether the upstream URI (under the server URL's path `prefix`) is a
/// request the apiserver holds open: a watch (the renamed path keeps
/// `?watch=` and the legacy `/watch/` segment where the app's request had
/// them), a `log` or a `proxy` subresource.
fn is_long_running(uri: &Uri, prefix: &str) -> bool {
    let path = uri.path();
    let path = path.strip_prefix(prefix).unwrap_or(path);
    crate::kube::request::is_long_running(path, uri.query())
}

fn build_clients(
    p: &TlsParams,
    cert: Option<Arc<(Vec<u8>, Vec<u8>)>>,
) -> Result<Clients, ClientsError> {
    let tls = tls_config(&p.resolved, cert.as_deref(), p.insecure)?;
    // `http2`: ALPN offers h2 and HTTP/1.1 (the server picks), else
    // HTTP/1.1 only; `upgrades`: connections kept for `101`.
    let build = |http2: bool, upgrades: bool| -> Result<Pool, ClientsError> {
        let mut http = HttpConnector::new();
        http.enforce_http(false);
        http.set_nodelay(true);
        http.set_connect_timeout(Some(p.timeouts.connect));
        let mut b = hyper_rustls::HttpsConnectorBuilder::new()
            .with_tls_config(tls.clone())
            .https_or_http();
        if let Some(name) = p.server_name.clone() {
            b = b.with_server_name_resolver(move |_: &Uri| {
                Ok::<_, rustls::pki_types::InvalidDnsNameError>(name.clone())
            });
        }
        let dial = Dial::new(http, p.resolved.proxy_url.as_deref())?;
        let connector = if http2 {
            b.enable_all_versions().wrap_connector(dial)
        } else {
            b.enable_http1().wrap_connector(dial)
        };
        Ok(Pool::new(
            connector,
            &p.server,
            upgrades,
            p.timeouts.health,
            p.tallies.clone(),
            p.timeouts.max_streams_per_connection,
            p.timeouts.idle_connection,
        )?)
    };
    Ok(Clients {
        client: build(p.http2 == Http2::Auto, false)?,
        // A plain `http://` upstream speaks HTTP/1.1 only: one pool, and no
        // request looked at to choose one.
        watches: match p.http2 {
            Http2::Watches if p.server.scheme_str() == Some("https") => Some(build(true, false)?),
            Http2::Watches | Http2::Auto | Http2::Never => None,
        },
        upgrade_client: build(false, true)?,
        cert,
    })
}

#[cfg(test)]
mod tests;

/// Whether a request may be sent again after its connection closed before
/// any answer: safe methods without a body.
fn resendable(req: &Request<Body>) -> bool {
    use http_body::Body as _;
    matches!(*req.method(), Method::GET | Method::HEAD | Method::OPTIONS)
        && req.body().size_hint().exact() == Some(0)
}

/// A connection that ended (closed or reset) before the response began.
fn closed_before_answer(e: &SendError) -> bool {
    let SendError::Client(e) = e else {
        return false;
    };
    let mut src: Option<&(dyn std::error::Error + 'static)> = std::error::Error::source(e);
    while let Some(s) = src {
        if let Some(h) = s.downcast_ref::<hyper::Error>() {
            if h.is_incomplete_message() || h.is_canceled() {
                return true;
            }
        }
        if let Some(io) = s.downcast_ref::<std::io::Error>() {
            if matches!(
                io.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ) {
                return true;
            }
        }
        src = s.source();
    }
    false
}

/// An error and its sources, `: `-separated: hyper's `client error
/// (Connect)` alone does not say that the connection was refused.
pub(crate) fn with_causes(e: &dyn std::error::Error) -> String {
    let mut msg = e.to_string();
    let mut src = e.source();
    while let Some(s) = src {
        let s_text = s.to_string();
        // Some errors repeat their source in their own message.
        if !msg.ends_with(&s_text) {
            msg.push_str(": ");
            msg.push_str(&s_text);
        }
        src = s.source();
    }
    msg
}
