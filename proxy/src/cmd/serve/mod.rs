//! `regroup serve`: settings to running listeners, and the configuration
//! reloaded while they run (`reload`).

#[cfg(test)]
mod reason_sets;
pub mod reload;
mod runtime;
mod start_error;

pub use start_error::StartError;
use start_error::{listen_error, read_named, read_named_text};

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use regroup_config::schema::{LogFormat, LogLevel};
use regroup_config::Settings;
use tokio::net::TcpListener;

use crate::hooks::front_trust::FrontTrust;
use crate::hooks::registrations::WebhookRegistration;
use crate::listen::access::Access;
use crate::listen::lifecycle::Lifecycle;
use crate::listen::lifecycle::Serving;
use crate::observe::metrics::{Check, Health, Metrics};
use crate::pipeline::live::Live;
use crate::pipeline::proxy::Proxy;
use crate::rewrite::{Catalog, Engine};
use crate::upstream::from_settings::{Backend, Target};
use crate::upstream::own_client::OwnClient;
use crate::upstream::Upstream;

/// Command-line overrides of the config file.
#[derive(Debug, Default)]
pub struct Options {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `--listen`.
    pub listen: Option<SocketAddr>,
    /// The configuration file the settings came from: reloaded on SIGHUP
    /// and when it changes. `None`: no reload.
    pub config: Option<PathBuf>,
}

/// The default plain-HTTP listener (kubectl proxy's port).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8001";

/// Runs the proxy until SIGINT or SIGTERM.
pub fn run(settings: Settings, opts: Options) -> Result<(), StartError> {
    init_logging(&settings);
    let settings = &settings;
    let (upstream, resolved) = Upstream::from_settings(
        settings,
        &Target {
            kubeconfig: opts.kubeconfig.as_deref(),
            context: opts.context.as_deref(),
        },
    )?;
    for w in settings.warnings() {
        tracing::warn!("{w}");
    }
    if let Some(n) = settings.map.object_names() {
        let (prefix, suffix) = match n.affix() {
            regroup_config::object_names::Affix::Prefix(p) => (p.as_str(), ""),
            regroup_config::object_names::Affix::Suffix(s) => ("", s.as_str()),
        };
        let kinds: Vec<&str> = n.kinds().iter().map(|k| k.kind).collect();
        tracing::info!(
            prefix,
            suffix,
            derived = n.is_derived(),
            kinds = %kinds.join(","),
            "the app's cluster-scoped names of these kinds are this copy's on the cluster (names:)"
        );
    }
    if resolved.insecure || settings.file.upstream.dangerous_insecure_skip_tls_verify {
        tracing::warn!("the API server's certificate is NOT verified (insecure-skip-tls-verify)");
    }
    // The process's metrics, handed to every listener, stack and the
    // health listener that encodes them.
    let metrics = Arc::new(Metrics::new());
    let live = Live::new(Engine::new(
        settings.map.clone(),
        Catalog::for_map(&settings.fields, &settings.map),
    ));
    let reloader = opts
        .config
        .clone()
        .map(|path| reload::Reloader::new(path, live.clone(), settings, metrics.clone()));
    let listen = opts
        .listen
        .or(settings.file.listeners.http)
        .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("valid default"));
    if !listen.ip().is_loopback() {
        return Err(StartError::NotLoopback(listen));
    }
    let flavor = runtime::Flavor::of_process();
    let runtime = runtime::build(flavor).map_err(StartError::Runtime)?;
    tracing::info!(workers = flavor.workers(), kind = flavor.kind(), "runtime");
    let grace = settings.limits.shutdown_grace_period;
    let budget = crate::body::budget::configure(&settings.limits);
    tracing::info!(
        bytes = budget,
        from = if settings.limits.memory_budget_bytes.is_some() {
            "limits.memoryBudgetBytes"
        } else if crate::body::budget::cgroup_memory_max().is_some() {
            "half the cgroup's memory.max"
        } else {
            "the default"
        },
        "memory budget"
    );
    let lifecycle = Lifecycle::new();
    let serving =
        Serving::new(settings.limits.clone(), lifecycle.clone()).with_metrics(metrics.clone());
    let result = runtime::block_on(&runtime, flavor, async move {
        match reloader {
            Some(r) => {
                tracing::info!("watching the configuration: it will be reloaded on SIGHUP and whenever the file changes");
                let hup = reload::hangup().map_err(StartError::Sighup)?;
                // The task lives as long as the runtime.
                drop(tokio::spawn(reload::watch(r, hup)));
            }
            #[cfg(unix)]
            None => ignore_sighup()?,
            #[cfg(not(unix))]
            None => {}
        }
        let upstream_desc = upstream.describe().to_owned();
        let upstream = Arc::new(upstream);
        if upstream.can_refresh() {
            // Warm and keep fresh: the first request finds a credential (a
            // protocol upgrade takes the one in hand), and a plugin that
            // can't run is logged at start, not at the first request.
            drop(tokio::spawn(keep_credential(upstream.clone())));
        }
        let mut servers = Vec::new();
        // regroup's own reads of the cluster (the front's trust, publish mode).
        let remote = OwnClient::new(upstream.clone());
        let (mut trust, mut registration) = (None, None);
        let mut follow = None;
        let mut front_ready = None;
        let mut central = None;
        if let Some(front) = &settings.file.front {
            let started = start_front(settings, live.clone(), front, &remote, serving.clone()).await?;
            servers.push(started.task);
            trust = started.trust;
            follow = started.follow;
            front_ready = Some(started.ready);
            central = started.central;
        }
        if let Some(w) = &settings.file.webhooks {
            let (task, r) = start_webhooks(settings, live.clone(), w, serving.clone()).await?;
            servers.push(task);
            registration = r;
        }
        // The sidecar, composed once its hooks are known (`stacks.rs`).
        let sidecar = Proxy::sidecar_with(
            live.clone(),
            upstream,
            settings.file.credentials.pass_through,
            trust,
            registration,
        )
        .with_limits((&settings.limits).into())
        .with_metrics(metrics.clone());
        let proxy = Arc::new(sidecar);
        if let Some(follower) = follow {
            servers.push(tokio::spawn(crate::front::ca_follower::follow(proxy.own_client(), follower)));
        }
        let listener = TcpListener::bind(listen)
            .await
            .map_err(listen_error(listen))?;
        tracing::info!(
            listen = %listener.local_addr().map_err(StartError::LocalAddr)?,
            upstream = %upstream_desc,
            rules = settings.map.rules().len(),
            "regroup serving"
        );
        let loopback = || Access::loopback(settings.allowed_hosts.clone());
        servers.push(tokio::spawn(crate::listen::stacks::serve_sidecar(
            listener,
            None,
            proxy.clone(),
            serving.clone(),
            loopback(),
        )));
        if let Some(addr) = settings.file.listeners.metrics {
            let l = TcpListener::bind(addr)
                .await
                .map_err(listen_error(addr))?;
            tracing::info!(listen = %addr, "metrics on /metrics, health on /healthz, /livez, /readyz");
            let health = Health {
                shutting_down: Some(lifecycle.flag()),
                upstream: Some(upstream_check(proxy.own_client(), settings.limits.upstream_response_header_timeout)),
                front: front_ready.clone(),
                central: central
                    .clone()
                    .map(|c| upstream_check(c, settings.limits.upstream_response_header_timeout)),
            };
            servers.push(tokio::spawn(crate::observe::metrics::serve_health(l, health, metrics.clone())));
        }
        if let Some(tls) = &settings.file.listeners.tls {
            let cfg = match (&tls.cert_file, &tls.key_file, &tls.generated_ca_file) {
                // Reloaded when the files change (a renewed certificate).
                (Some(c), Some(k), _) => Arc::new(crate::net::serving_cert::ReloadingCert::new(c, k)?)
                    .server_config()?,
                (_, _, Some(ca_file)) => {
                    let id = crate::net::tls::generate()?;
                    let ca = id.ca_pem.as_deref().unwrap_or_default();
                    std::fs::write(ca_file, ca).map_err(|source| StartError::WriteCa {
                        path: ca_file.clone(),
                        source,
                    })?;
                    tracing::info!(ca = %ca_file.display(), "generated a serving CA for the TLS listener");
                    crate::net::tls::server_config(&id)?
                }
                _ => return Err(StartError::TlsSource),
            };
            let l = TcpListener::bind(tls.listen)
                .await
                .map_err(listen_error(tls.listen))?;
            let access = if tls.listen.ip().is_loopback() {
                loopback()
            } else {
                if !tls.dangerous_lend_credentials {
                    tracing::info!(listen = %tls.listen, "TLS listener beyond loopback: callers without their own credential get 401");
                }
                Access::beyond_loopback(tls.dangerous_lend_credentials)
            };
            tracing::info!(listen = %tls.listen, "regroup serving TLS");
            servers.push(tokio::spawn(crate::listen::stacks::serve_sidecar(
                l,
                Some(cfg),
                proxy,
                serving.clone(),
                access,
            )));
        }
        let signal = shutdown_signal().await;
        tracing::info!(
            signal,
            grace_seconds = grace.as_secs_f64(),
            "shutting down: not accepting, draining in-flight requests, ending watches"
        );
        crate::observe::log_writer::write_through();
        crate::observe::request_log::shutting_down();
        lifecycle.begin_shutdown();
        match tokio::time::timeout(grace, lifecycle.drained()).await {
            Ok(()) => tracing::info!("drained; exiting"),
            Err(_) => tracing::warn!(
                open = lifecycle.open_connections(),
                "shutdown grace period over (limits.shutdownGracePeriod); exiting with connections open"
            ),
        }
        for s in servers {
            s.abort();
        }
        Ok(())
    })
    .map_err(StartError::Runtime)?;
    runtime.shutdown_timeout(std::time::Duration::from_secs(1));
    result
}

/// Asks the vault for regroup's credential now and then: a cached one costs
/// nothing; one close to its expiry is refreshed before a request needs it.
async fn keep_credential(upstream: Arc<Upstream>) {
    use std::time::{Duration, SystemTime};
    loop {
        let wait = match upstream.credential().await {
            Ok(Some(c)) => c
                .expires
                .and_then(|e| e.duration_since(SystemTime::now()).ok())
                .map(|left| (left / 10).clamp(Duration::from_millis(200), Duration::from_secs(10)))
                .unwrap_or(Duration::from_secs(10)),
            Ok(None) => return,
            // The vault logs it and backs off.
            Err(_) => Duration::from_secs(5),
        };
        tokio::time::sleep(wait).await;
    }
}

/// SIGHUP would kill the process by default: regroup ignores it, saying so.
#[cfg(unix)]
/// The errors `run` would stop at that the configuration alone decides
/// (not the files it names, the cluster or the ports): the front's and
/// every webhook's backend as `run` builds them, the system roots standing
/// in for a CA file. `regroup check` reports them, so that a pod never
/// crash-loops on what `check` called OK. `load` has already checked the
/// rest of the file.
pub fn preflight(settings: &Settings) -> Vec<String> {
    let mut problems = Vec::new();
    let backend = |server: &str, insecure: bool| {
        let b = Backend {
            server,
            ca_pem: None,
            insecure,
            client_cert: None,
        };
        Upstream::backend(b, &settings.limits)
            .map(drop)
            .map_err(|e| e.to_string())
    };
    if let Some(f) = settings
        .file
        .front
        .as_ref()
        .filter(|_| settings.file.publish.is_none())
    {
        if let Err(e) = backend(&f.backend, f.dangerous_insecure_backend) {
            problems.push(format!("front.backend: {e}"));
        }
    }
    if let Some(w) = &settings.file.webhooks {
        for h in &w.hooks {
            let h = &h.value;
            let url: http::Uri = match h.backend.parse() {
                Ok(u) => u,
                Err(e) => {
                    problems.push(format!("webhooks.hooks {}: backend: {e}", h.name));
                    continue;
                }
            };
            let origin = format!(
                "{}://{}",
                url.scheme_str().unwrap_or("https"),
                url.authority().map(|a| a.as_str()).unwrap_or_default()
            );
            if let Err(e) = backend(&origin, w.dangerous_insecure_backend) {
                problems.push(format!("webhooks.hooks {}: backend: {e}", h.name));
            }
        }
    }
    problems
}

fn ignore_sighup() -> Result<(), StartError> {
    let mut hup = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::hangup())
        .map_err(StartError::Sighup)?;
    tokio::spawn(async move {
        while hup.recv().await.is_some() {
            tracing::info!("SIGHUP: no configuration file to reload; ignored (still serving)");
        }
    });
    Ok(())
}

/// `/readyz`'s upstream check: the apiserver's own `/readyz`, with
/// regroup's credential, each time it is asked (at most 5 s). Ready when it
/// answers below 500 (401/403/404: reachable, readyz not open to us);
/// not ready when it can't be reached, does not answer in time, or says 5xx.
fn upstream_check(
    client: OwnClient,
    header_timeout: std::time::Duration,
) -> Arc<dyn Fn() -> futures_util::future::BoxFuture<'static, Check> + Send + Sync> {
    let limit = header_timeout.min(std::time::Duration::from_secs(5));
    Arc::new(move || {
        let client = client.clone();
        Box::pin(async move {
            match tokio::time::timeout(limit, client.get("/readyz")).await {
                Err(_) => Err(UpstreamNotReady::Timeout(limit.as_secs_f64()).into()),
                Ok(Err(e)) => Err(UpstreamNotReady::Unreachable(e).into()),
                Ok(Ok(r)) if r.status().is_server_error() => {
                    Err(UpstreamNotReady::Status(r.status()).into())
                }
                Ok(Ok(_)) => Ok(()),
            }
        })
    })
}

/// Why an upstream is not ready, as `/readyz` says it.
#[derive(Debug, thiserror::Error)]
enum UpstreamNotReady {
    #[error("GET /readyz did not answer within {0}s")]
    Timeout(f64),
    #[error(transparent)]
    Unreachable(crate::upstream::own_client::OwnClientError),
    #[error("GET /readyz answered {0}")]
    Status(http::StatusCode),
}

/// The CN of the client certificate regroup presents to the app.
const FRONT_CLIENT_CN: &str = "regroup-front-proxy";

/// A started front.
struct StartedFront {
    task: tokio::task::JoinHandle<()>,
    /// What the sidecar must do so the app and the cluster trust the front.
    trust: Option<FrontTrust>,
    /// When the request-header settings come from the cluster: what to
    /// update when they change (and the configured allowed names).
    follow: Option<crate::front::ca_follower::Follower>,
    /// `/readyz`'s check of the front's certificates.
    #[allow(clippy::type_complexity)]
    ready: Arc<dyn Fn() -> Check + Send + Sync>,
    /// Publish mode: regroup's client of the central cluster (`/readyz`).
    central: Option<OwnClient>,
}

/// Starts the aggregated front.
async fn start_front(
    settings: &Settings,
    live: Live,
    front: &regroup_config::schema::Front,
    remote: &OwnClient,
    listening: Serving,
) -> Result<StartedFront, StartError> {
    use crate::front::auth::{parse_extension_apiserver_authentication_json, RequestHeaderConfig};
    use crate::front::tls::{ClientCaSource, ReloadingConfig, ServingSource};
    use base64::Engine as _;

    // regroup's own front-proxy identity towards the app.
    let client = crate::net::tls::generate_for(
        "regroup front-proxy client CA",
        &[FRONT_CLIENT_CN.into()],
        true,
    )?;
    let (serving, serving_ca) = match (&front.cert_file, &front.key_file) {
        (Some(cert), Some(key)) => {
            let ca = match &front.ca_file {
                Some(p) => Some(read_named_text("front.caFile", p)?),
                None => None,
            };
            (
                ServingSource::Files {
                    cert: cert.clone(),
                    key: key.clone(),
                },
                ca,
            )
        }
        _ => {
            let id = crate::net::tls::generate_for(
                "regroup front serving CA",
                &front.generated_dns_names,
                false,
            )?;
            (ServingSource::fixed(&id), id.ca_pem.clone())
        }
    };
    let rh = &front.request_header;
    let mut cfg = RequestHeaderConfig::default();
    let mut from_cluster_data = None;
    let ca_source = if rh.from_cluster {
        let data = crate::front::ca_follower::read_authentication_configmap(remote).await?;
        let (ca, from_cluster) = parse_extension_apiserver_authentication_json(&data)?;
        cfg = from_cluster;
        from_cluster_data = Some(data);
        ClientCaSource::Pem(ca)
    } else {
        let file = rh
            .client_ca_file
            .clone()
            .ok_or(StartError::NoClientCaFile)?;
        cfg.username_headers = rh.username_headers.clone();
        cfg.group_headers = rh.group_headers.clone();
        cfg.extra_headers_prefixes = rh.extra_headers_prefixes.clone();
        ClientCaSource::File(file)
    };
    if !rh.allowed_names.is_empty() {
        cfg.allowed_names = rh.allowed_names.clone();
    }
    // The CA read from the cluster is checked as it was at start.
    let ready: Arc<dyn Fn() -> Check + Send + Sync> = {
        let (serving, ca_source) = (serving.clone(), ca_source.clone());
        Arc::new(move || {
            crate::front::ready::check(&serving, &ca_source, std::time::SystemTime::now())
                .map_err(Into::into)
        })
    };
    let tls = Arc::new(ReloadingConfig::new(serving, ca_source)?);
    let auth = Arc::new(std::sync::RwLock::new(cfg));
    let mut central = None;
    let proxy = match &settings.file.publish {
        Some(p) => {
            let published =
                crate::publish::start(settings, p, remote.clone(), (&settings.limits).into())
                    .await?;
            central = Some(published.central);
            Proxy::publish(live, published.publisher, auth.clone())
        }
        None => front_proxy(settings, live, front, &client, auth.clone())?,
    }
    .with_metrics(listening.metrics.clone());
    let listener = TcpListener::bind(front.listen)
        .await
        .map_err(listen_error(front.listen))?;
    tracing::info!(listen = %front.listen, backend = %proxy.describe_backend(), "regroup serving the aggregated front");
    let task = tokio::spawn(crate::listen::stacks::serve_front(
        listener,
        tls.clone(),
        Arc::new(proxy),
        listening,
    ));
    // Publish mode has no app to make trust the front.
    let trust = serving_ca
        .filter(|_| settings.file.publish.is_none())
        .map(|ca| FrontTrust {
            client_ca_pem: client.ca_pem.clone().unwrap_or_default(),
            client_cn: FRONT_CLIENT_CN.into(),
            serving_ca_bundle: base64::engine::general_purpose::STANDARD.encode(ca),
        });
    if trust.is_none() && settings.file.publish.is_none() {
        tracing::warn!(
            "front.caFile not set: the cluster's APIService caBundle is left as the app wrote it"
        );
    }
    let follow = rh
        .from_cluster
        .then(|| crate::front::ca_follower::Follower {
            auth,
            tls,
            allowed: rh.allowed_names.clone(),
            last: from_cluster_data,
        });
    Ok(StartedFront {
        task,
        trust,
        ready,
        follow,
        central,
    })
}

/// The front of an app's own aggregated server (`front.backend`), which
/// trusts regroup's front-proxy client certificate.
fn front_proxy(
    settings: &Settings,
    live: Live,
    front: &regroup_config::schema::Front,
    client: &crate::net::tls::Identity,
    auth: Arc<std::sync::RwLock<crate::front::auth::RequestHeaderConfig>>,
) -> Result<Proxy, StartError> {
    let backend_ca = match &front.backend_ca_file {
        Some(p) => Some(read_named("front.backendCaFile", p)?),
        None => None,
    };
    let backend = Upstream::backend(
        Backend {
            server: &front.backend,
            ca_pem: backend_ca,
            insecure: front.dangerous_insecure_backend,
            client_cert: Some((
                client.cert_pem.clone().into_bytes(),
                client.key_pem.clone().into_bytes(),
            )),
        },
        &settings.limits,
    )
    .map_err(StartError::FrontBackend)?;
    if front.dangerous_insecure_backend {
        tracing::warn!(backend = %front.backend, "the app's certificate is NOT verified (dangerousInsecureBackend)");
    }
    Ok(Proxy::front(live, Arc::new(backend), auth).with_limits((&settings.limits).into()))
}

/// Starts the webhook listener; returns it, and what the sidecar does to
/// the app's registrations when some webhook has one.
async fn start_webhooks(
    settings: &Settings,
    live: Live,
    w: &regroup_config::schema::Webhooks,
    listening: Serving,
) -> Result<(tokio::task::JoinHandle<()>, Option<WebhookRegistration>), StartError> {
    use crate::hooks::registrations::{ca_bundle, Fronted};
    use crate::webhook::{tls, Hook, Webhooks};
    let (serving, serving_ca) = match (&w.cert_file, &w.key_file, &w.issue_from) {
        (_, _, Some(from)) => {
            let issued = crate::net::issued_cert::IssuedCert::new(
                &from.ca_cert_file,
                &from.ca_key_file,
                &from.dns_names,
            );
            if issued.current().is_none() {
                tracing::warn!(ca = %from.ca_cert_file.display(), "webhook listener: the app's CA is not readable yet; calls fail their TLS handshake until it is");
            }
            let ca = std::fs::read_to_string(&from.ca_cert_file).ok();
            (tls::Serving::Issued(Arc::new(issued)), ca)
        }
        (Some(c), Some(k), None) => {
            let ca = match &w.ca_file {
                Some(p) => Some(read_named_text("webhooks.caFile", p)?),
                None => None,
            };
            (
                tls::Serving::Files(Arc::new(crate::net::serving_cert::ReloadingCert::new(
                    c, k,
                )?)),
                ca,
            )
        }
        _ => {
            let id = crate::net::tls::generate_for(
                "regroup webhook serving CA",
                &w.generated_dns_names,
                false,
            )?;
            let ca = id.ca_pem.clone();
            (tls::Serving::Fixed(id), ca)
        }
    };
    let fronted: Vec<Fronted> = w
        .hooks
        .iter()
        .filter_map(|h| {
            let registration = h.value.registration.clone()?;
            Some(Fronted::new(
                h.value.served_path(),
                registration,
                settings.map.object_names(),
            ))
        })
        .collect();
    let registration = match (&w.reach_at, serving_ca, fronted.is_empty()) {
        (Some(reach_at), Some(ca), false) => Some(WebhookRegistration {
            reach_at: reach_at.clone(),
            ca_bundle: ca_bundle(&ca),
            fronted,
        }),
        _ => None,
    };
    let client_ca = match &w.client_ca_file {
        Some(p) => Some(read_named("webhooks.clientCaFile", p)?),
        None => None,
    };
    let cfg = tls::server_config(serving, client_ca.as_deref())?;
    let backend_ca = match &w.backend_ca_file {
        Some(p) => Some(read_named("webhooks.backendCaFile", p)?),
        None => None,
    };
    let mut hooks = Vec::new();
    for h in &w.hooks {
        let h = &h.value;
        let url: http::Uri = h.backend.parse().map_err(|source| StartError::HookUrl {
            name: h.name.clone(),
            source,
        })?;
        let origin = format!(
            "{}://{}",
            url.scheme_str().unwrap_or("https"),
            url.authority().map(|a| a.as_str()).unwrap_or_default()
        );
        let backend = Upstream::backend(
            Backend {
                server: &origin,
                ca_pem: backend_ca.clone(),
                insecure: w.dangerous_insecure_backend,
                client_cert: None,
            },
            &settings.limits,
        )
        .map_err(|source| StartError::HookBackend {
            name: h.name.clone(),
            source,
        })?;
        hooks.push(Hook {
            name: h.name.clone(),
            path: h.served_path(),
            backend: Arc::new(backend),
            backend_path: url
                .path_and_query()
                .map(|p| p.as_str())
                .unwrap_or("/")
                .to_owned(),
        });
    }
    if w.dangerous_insecure_backend {
        tracing::warn!(
            "the app's webhook certificate is NOT verified (webhooks.dangerousInsecureBackend)"
        );
    }
    let listener = TcpListener::bind(w.listen)
        .await
        .map_err(listen_error(w.listen))?;
    tracing::info!(
        listen = %w.listen,
        webhooks = hooks.len(),
        client_certificates = w.client_ca_file.is_some(),
        "regroup serving the app's webhooks"
    );
    let handler = Arc::new(
        Webhooks::new(live, hooks, settings.limits.max_review_bytes)
            .with_metrics(listening.metrics.clone()),
    );
    Ok((
        tokio::spawn(crate::listen::webhook::serve_webhooks(
            listener, cfg, handler, listening,
        )),
        registration,
    ))
}

/// Waits for SIGINT or SIGTERM; says which.
async fn shutdown_signal() -> &'static str {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => "SIGINT",
            _ = term.recv() => "SIGTERM",
        }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
        "SIGINT"
    }
}

fn init_logging(settings: &Settings) {
    let level = match settings.file.logging.level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
        LogLevel::Trace => "trace",
    };
    let from_env = tracing_subscriber::EnvFilter::try_from_env("REGROUP_LOG");
    // Without REGROUP_LOG the filter is regroup's own, and the request line
    // (`regroup::request`, `info`) is on exactly when the level is `info`
    // or finer.
    let request_lines = from_env.is_err()
        && matches!(
            settings.file.logging.level,
            LogLevel::Info | LogLevel::Debug | LogLevel::Trace
        );
    let filter = from_env
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("regroup={level},warn")));
    use std::io::IsTerminal;
    let ansi = std::io::stderr().is_terminal();
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(ansi)
        .with_writer(crate::observe::log_writer::Stderr);
    let text = matches!(settings.file.logging.format, LogFormat::Text);
    let installed = match settings.file.logging.format {
        LogFormat::Json => builder.json().try_init(),
        // The stock text format's bytes, cheaper per line (colours on a
        // terminal are left to the stock formatter).
        LogFormat::Text => builder
            .event_format(crate::observe::log_format::TextFormat::new())
            .try_init(),
    };
    // The text format's request line, written by regroup itself with the
    // same bytes (`observe/request_log.rs`); with any other filter, format
    // or colours it stays a `tracing` event.
    if installed.is_ok() && text && !ansi && request_lines {
        crate::observe::request_log::write_directly();
    }
}
