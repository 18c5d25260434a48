//! `regroup serve`: settings to running listeners.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;

use regroup_config::schema::{LogFormat, LogLevel};
use regroup_config::Settings;
use tokio::net::TcpListener;

use super::Proxy;
use crate::rewrite::Catalog;
use crate::upstream::{kubeconfig, Upstream};

/// Command-line overrides of the config file.
#[derive(Debug, Default)]
pub struct Options {
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// `--listen`.
    pub listen: Option<SocketAddr>,
}

/// The default plain-HTTP listener (kubectl proxy's port).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8001";

/// Runs the proxy until SIGINT or SIGTERM.
pub fn run(settings: Settings, opts: Options) -> Result<(), String> {
    init_logging(&settings);
    let settings: &'static Settings = Box::leak(Box::new(settings));
    let resolved = resolve_upstream(settings, &opts)?;
    let upstream = Upstream::new(
        &resolved,
        settings.file.upstream.dangerous_insecure_skip_tls_verify,
    )
    .map_err(|e| e.to_string())?;
    if resolved.insecure || settings.file.upstream.dangerous_insecure_skip_tls_verify {
        tracing::warn!("the API server's certificate is NOT verified (insecure-skip-tls-verify)");
    }
    let catalog: &'static Catalog = Box::leak(Box::new(Catalog::new(&settings.fields)));
    let listen = opts
        .listen
        .or(settings.file.listeners.http)
        .unwrap_or_else(|| DEFAULT_LISTEN.parse().expect("valid default"));
    if !listen.ip().is_loopback() {
        return Err(format!(
            "--listen {listen}: the plain-HTTP listener must be on loopback (127.0.0.1 or [::1])"
        ));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("starting the runtime: {e}"))?;
    runtime.block_on(async move {
        let upstream_desc = upstream.describe().to_owned();
        let proxy = Arc::new(Proxy::sidecar(
            &settings.map,
            catalog,
            upstream,
            settings.file.credentials.pass_through,
        ));
        let listener = TcpListener::bind(listen)
            .await
            .map_err(|e| format!("listening on {listen}: {e}"))?;
        tracing::info!(
            listen = %listener.local_addr().map_err(|e| e.to_string())?,
            upstream = %upstream_desc,
            rules = settings.map.rules().len(),
            "regroup serving"
        );
        let mut servers = vec![tokio::spawn(super::serve_plain(listener, proxy.clone()))];
        if let Some(tls) = &settings.file.listeners.tls {
            let id = match (&tls.cert_file, &tls.key_file, &tls.generated_ca_file) {
                (Some(c), Some(k), _) => super::tls::from_files(c, k)?,
                (_, _, Some(ca_file)) => {
                    let id = super::tls::generate()?;
                    let ca = id.ca_pem.as_deref().unwrap_or_default();
                    std::fs::write(ca_file, ca)
                        .map_err(|e| format!("writing the generated CA to {}: {e}", ca_file.display()))?;
                    tracing::info!(ca = %ca_file.display(), "generated a serving CA for the TLS listener");
                    id
                }
                _ => return Err("listeners.tls needs certFile/keyFile or generatedCaFile".into()),
            };
            let cfg = super::tls::server_config(&id)?;
            let l = TcpListener::bind(tls.listen)
                .await
                .map_err(|e| format!("listening on {}: {e}", tls.listen))?;
            tracing::info!(listen = %tls.listen, "regroup serving TLS");
            servers.push(tokio::spawn(super::serve_tls(l, cfg, proxy)));
        }
        shutdown_signal().await;
        tracing::info!("shutting down");
        for s in servers {
            s.abort();
        }
        Ok(())
    })
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! {
            _ = ctrl_c => {}
            _ = term.recv() => {}
        }
    }
    #[cfg(not(unix))]
    let _ = ctrl_c.await;
}

fn resolve_upstream(settings: &Settings, opts: &Options) -> Result<kubeconfig::Resolved, String> {
    let up = &settings.file.upstream;
    let context = opts.context.as_deref().or(up.context.as_deref());
    if let Some(path) = opts.kubeconfig.as_ref().or(up.kubeconfig.as_ref()) {
        return kubeconfig::load(path, context).map_err(|e| e.to_string());
    }
    if up.in_cluster {
        return kubeconfig::in_cluster().map_err(|e| e.to_string());
    }
    if let Some(p) = std::env::var_os("KUBECONFIG").filter(|p| !p.is_empty()) {
        // Like kubectl: the first file of the list.
        let first = std::env::split_paths(&p).next().unwrap_or_default();
        return kubeconfig::load(&first, context).map_err(|e| e.to_string());
    }
    if let Some(home) = std::env::var_os("HOME") {
        let p = PathBuf::from(home).join(".kube/config");
        if p.exists() {
            return kubeconfig::load(&p, context).map_err(|e| e.to_string());
        }
    }
    kubeconfig::in_cluster().map_err(|e| {
        format!("no upstream: no --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a cluster ({e})")
    })
}

fn init_logging(settings: &Settings) {
    let level = match settings.file.logging.level {
        LogLevel::Error => "error",
        LogLevel::Warn => "warn",
        LogLevel::Info => "info",
        LogLevel::Debug => "debug",
        LogLevel::Trace => "trace",
    };
    let filter = tracing_subscriber::EnvFilter::try_from_env("REGROUP_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(format!("regroup={level},warn")));
    use std::io::IsTerminal;
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_ansi(std::io::stderr().is_terminal())
        .with_writer(std::io::stderr);
    let _ = match settings.file.logging.format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}
