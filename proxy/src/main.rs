//! The `regroup` command line.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use regroup_config::{Direction, Settings};

// The binary's allocator (feature `mimalloc`, off by default): fewer
// instructions per request than glibc's malloc, but a higher RSS that breaks
// the memory bounds (docs/performance.md). The library leaves the choice to
// its user.
#[cfg(feature = "mimalloc")]
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// regroup renames Kubernetes API groups between an unmodified app and the
/// cluster.
#[derive(Parser)]
#[command(
    name = "regroup",
    version = concat!(env!("CARGO_PKG_VERSION"), " (commit ", env!("REGROUP_COMMIT"), ")"),
    about
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Run the proxy: listen for the app and forward to the kube-apiserver,
    /// renaming groups both ways.
    Serve {
        /// The configuration file.
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
        /// Kubeconfig of the upstream apiserver (overrides the config file;
        /// default: $KUBECONFIG, then ~/.kube/config, then in-cluster).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Context in the kubeconfig (default: its current context).
        #[arg(long)]
        context: Option<String>,
        /// Plain-HTTP listener for the app, like `kubectl proxy` (overrides
        /// `listeners.http`; default 127.0.0.1:8001): HOST:PORT, `:PORT`
        /// (127.0.0.1) or `localhost:PORT`.
        #[arg(long, value_parser = loopback_addr)]
        listen: Option<std::net::SocketAddr>,
        /// The metrics and health listener (/metrics, /livez, /readyz;
        /// overrides `listeners.metrics`): HOST:PORT, `:PORT` (every
        /// interface) or `localhost:PORT`.
        #[arg(long, value_name = "ADDR", value_parser = any_addr)]
        metrics: Option<std::net::SocketAddr>,
        /// Log level (overrides `logging.level`; `REGROUP_LOG`, an
        /// env-filter such as `regroup=debug,hyper=info`, overrides both).
        #[arg(long, value_parser = ["error", "warn", "info", "debug", "trace"])]
        log_level: Option<String>,
        /// Log format (overrides `logging.format`).
        #[arg(long, value_parser = ["text", "json"])]
        log_format: Option<String>,
        /// Directory of the in-cluster service-account files `ca.crt` and
        /// `token` (overrides `upstream.serviceAccountDir`; default
        /// /var/run/secrets/kubernetes.io/serviceaccount).
        #[arg(long, value_name = "DIR")]
        service_account_dir: Option<PathBuf>,
    },
    /// Validate a configuration and print the effective rename table; with
    /// `-f`, also warn about manifests whose CEL expressions name a mapped
    /// group other than as a whole string literal (which regroup leaves).
    Check {
        /// The configuration file.
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
        /// Manifest files or directories to check (repeatable), or `-`.
        #[arg(short = 'f', long = "filename")]
        files: Vec<String>,
    },
    /// Rename groups in manifests (CRDs, APIServices, RBAC, webhook
    /// configurations, custom resources): YAML or JSON in, YAML out.
    Render {
        /// The configuration file.
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
        /// Manifest files or directories (their *.yaml, *.yml, *.json;
        /// repeatable), or `-` for standard input, as kubectl's `-f`.
        #[arg(short = 'f', long = "filename", default_value = "-")]
        files: Vec<String>,
        /// Rename cluster names back to the app's names instead.
        #[arg(long)]
        to_app: bool,
    },
    /// Rename groups in manifests (as `render`) and add regroup as an
    /// in-cluster sidecar to every pod template (Deployment, StatefulSet,
    /// DaemonSet, ReplicaSet, Job, CronJob, Pod), with its ConfigMap and
    /// serving Secret. Standard input to standard output by default: a Helm
    /// post-renderer. Idempotent.
    Inject {
        /// The configuration file (its rules, fields, logging and limits go
        /// into the sidecar's ConfigMap).
        #[arg(
            short = 'c',
            long = "config",
            required_unless_present = "emit_chart_container"
        )]
        config: Option<PathBuf>,
        /// Print the chart's `regroup.container` template, generated from
        /// the one definition inject uses
        /// (charts/regroup/templates/_container.tpl), and exit.
        #[arg(long, exclusive = true)]
        emit_chart_container: bool,
        /// Manifest files or directories (their *.yaml, *.yml, *.json;
        /// repeatable), or `-` for standard input.
        #[arg(short = 'f', long = "filename", default_value = "-")]
        files: Vec<String>,
        /// regroup's container image.
        #[arg(long)]
        image: Option<String>,
        /// Wrap only objects of this kind (repeatable; default: all of them).
        #[arg(long = "kind")]
        kinds: Vec<String>,
        /// Wrap only objects with this name (repeatable; default: all).
        #[arg(long = "name")]
        names: Vec<String>,
        /// Prefix of the ConfigMap (`PREFIX-config`) and Secret (`PREFIX-serving`).
        #[arg(long, default_value = "regroup")]
        prefix: String,
        /// An existing Secret (tls.crt, tls.key, ca.crt) for regroup's
        /// loopback TLS listener, instead of one generated here.
        #[arg(long)]
        tls_secret: Option<String>,
        /// regroup's loopback TLS port (the app's KUBERNETES_SERVICE_PORT).
        #[arg(long, default_value_t = 6443)]
        tls_port: u16,
        /// The metrics/health port the probes use; 0: none (no probes).
        #[arg(long, default_value_t = 9090)]
        metrics_port: u16,
        /// regroup as an ordinary container instead of a native sidecar
        /// (clusters older than 1.29).
        #[arg(long)]
        no_native_sidecar: bool,
        /// Refuse, instead of warning about, a container that reaches the
        /// cluster around regroup (KUBECONFIG, --kubeconfig, --server).
        #[arg(long)]
        strict: bool,
        /// Also wrap Helm test hooks (`helm.sh/hook: test`), left alone by
        /// default. Workloads or pod templates annotated
        /// `regroup.dev/inject: disabled` are always left alone.
        #[arg(long)]
        include_helm_tests: bool,
        /// The port of regroup's webhook listener in a pod whose app serves
        /// webhooks (its Service is pointed there).
        #[arg(long, default_value_t = 9444)]
        webhook_port: u16,
        /// Leave webhooks that can't be sent through regroup calling the
        /// app directly (a warning each), instead of refusing.
        #[arg(long)]
        skip_unwired_webhooks: bool,
    },
    /// Move an operator's objects from the groups FROM gives them on the
    /// cluster to the groups TO gives them: targets created with their
    /// status, every dependent's ownerReferences re-pointed, then the
    /// sources deleted (propagationPolicy Orphan). A dry run (the plan)
    /// unless --yes. Resumable: run it again after an interruption.
    /// docs/migrate.md.
    Migrate {
        /// The configuration the objects are under now, or `identity` for
        /// the original, unrenamed install.
        #[arg(long, value_name = "FROM.yaml|identity")]
        from: String,
        /// The configuration to move them under, or `identity`.
        #[arg(long, value_name = "TO.yaml|identity")]
        to: String,
        /// Kubeconfig of the cluster (default: TO's `upstream`, then
        /// $KUBECONFIG, ~/.kube/config, in-cluster).
        #[arg(long)]
        kubeconfig: Option<PathBuf>,
        /// Context in the kubeconfig (default: its current context).
        #[arg(long)]
        context: Option<String>,
        /// Act. Without it, only the plan is printed.
        #[arg(long)]
        yes: bool,
        /// Remove the sources' finalizers (named in the output) so they can
        /// be deleted; without it a source with finalizers stays.
        #[arg(long)]
        release_finalizers: bool,
        /// Move only this kind (kind, plural or plural.group; repeatable).
        #[arg(long = "kind")]
        kinds: Vec<String>,
        /// Also rename the old groups in ClusterRole/Role rules and webhook
        /// configurations' rules (else they are listed as still pointing at
        /// the old group).
        #[arg(long)]
        rename_references: bool,
        /// Move even though a source object was written by someone else in
        /// the last minute (a sign that its controller still runs).
        #[arg(long)]
        controllers_stopped: bool,
        /// How many objects move at once (an owner always before what it
        /// owns).
        #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u16).range(1..=64))]
        concurrency: u16,
    },
    /// Print what publish mode needs in each cluster (docs/publish.md,
    /// "Deploying"): in the central cluster a ServiceAccount, its token and
    /// a Role on the published groups in the target namespace; in the
    /// remote cluster regroup's RBAC, configuration, generated serving
    /// certificate, Deployment, Service and one APIService per published
    /// version, in the remote names. YAML, one section per cluster.
    PublishManifests {
        /// The publish-mode configuration file.
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
        /// The remote namespace regroup runs in (and, without
        /// `publish.targetNamespace`, the central ServiceAccount's).
        #[arg(long, default_value = "regroup")]
        namespace: String,
        /// regroup's container image (default: this version's).
        #[arg(long)]
        image: Option<String>,
        /// The name of regroup's ServiceAccounts, Deployment and Service.
        #[arg(long, default_value = "regroup-publish")]
        name: String,
        /// The published versions, GROUP/VERSION in central names
        /// (comma-separated or repeated); default: read from the central
        /// cluster's discovery.
        #[arg(long, value_delimiter = ',', value_name = "GROUP/VERSION,...")]
        versions: Vec<String>,
        /// Central target namespaces that get a credential of their own
        /// (a ServiceAccount, its token Secret, a Role and RoleBinding, and
        /// how to hold the token in the remote namespace's Secret):
        /// docs/publish.md, "Credentials per namespace".
        #[arg(long, value_delimiter = ',', value_name = "NAMESPACE,...")]
        per_namespace_credentials: Vec<String>,
    },
}

/// Writes a command's output; a reader that went away (`| head`) ends the
/// command quietly, as other command-line tools do, instead of a panic.
fn write_out(text: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let mut o = std::io::stdout().lock();
    if let Err(e) = o.write_fmt(text).and_then(|()| o.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        eprintln!("regroup: writing the output: {e}");
        std::process::exit(1);
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Serve {
        config,
        kubeconfig,
        context,
        listen,
        metrics,
        log_level,
        log_format,
        service_account_dir,
    } = cli.command
    {
        let mut settings = match load_config(&config) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("regroup: {e}");
                return ExitCode::FAILURE;
            }
        };
        if service_account_dir.is_some() {
            settings.file.upstream.service_account_dir = service_account_dir;
        }
        if metrics.is_some() {
            settings.file.listeners.metrics = metrics;
        }
        use regroup_config::schema::{LogFormat, LogLevel};
        if let Some(l) = log_level {
            settings.file.logging.level = match l.as_str() {
                "error" => LogLevel::Error,
                "warn" => LogLevel::Warn,
                "debug" => LogLevel::Debug,
                "trace" => LogLevel::Trace,
                _ => LogLevel::Info,
            };
        }
        if let Some(f) = log_format {
            settings.file.logging.format = if f == "json" {
                LogFormat::Json
            } else {
                LogFormat::Text
            };
        }
        let opts = regroup::cmd::serve::Options {
            kubeconfig,
            context,
            listen,
            config: Some(config),
        };
        return match regroup::cmd::serve::run(settings, opts) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("regroup: {e}");
                ExitCode::FAILURE
            }
        };
    }
    if let Command::Migrate {
        from,
        to,
        kubeconfig,
        context,
        yes,
        release_finalizers,
        kinds,
        rename_references,
        controllers_stopped,
        concurrency,
    } = cli.command
    {
        let side = |s: &str| -> Result<Option<Settings>, String> {
            if s == "identity" {
                Ok(None)
            } else {
                load_config(Path::new(s)).map(Some)
            }
        };
        let opts = match (side(&from), side(&to)) {
            (Ok(from), Ok(to)) => regroup::cmd::migrate::Options {
                from,
                to,
                kubeconfig,
                context,
                yes,
                release_finalizers,
                kinds,
                rename_references,
                controllers_stopped,
                concurrency: concurrency.into(),
            },
            (Err(e), _) | (_, Err(e)) => {
                eprintln!("regroup: {e}");
                return ExitCode::from(2);
            }
        };
        return match regroup::cmd::migrate::run(opts) {
            Ok(true) => ExitCode::SUCCESS,
            Ok(false) => ExitCode::FAILURE,
            Err(e) => {
                eprintln!("regroup: {e}");
                ExitCode::from(2)
            }
        };
    }
    if let Command::PublishManifests {
        config,
        namespace,
        image,
        name,
        versions,
        per_namespace_credentials,
    } = cli.command
    {
        let defaults = regroup::publish::manifests::Options::default();
        let opts = regroup::publish::manifests::Options {
            name,
            namespace,
            image: image.unwrap_or(defaults.image),
            versions,
            credential_namespaces: per_namespace_credentials,
        };
        return publish_manifests(&config, &opts);
    }
    match run(cli.command) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("regroup: {e}");
            ExitCode::FAILURE
        }
    }
}

fn run(command: Command) -> Result<(), String> {
    match command {
        Command::Serve { .. } | Command::Migrate { .. } | Command::PublishManifests { .. } => {
            unreachable!("handled in main")
        }
        Command::Check { config, files } => {
            let settings = load_config(&config)?;
            let problems = regroup::cmd::serve::preflight(&settings);
            if !problems.is_empty() {
                return Err(format!("{}:\n{}", config.display(), problems.join("\n")));
            }
            write_out(format_args!("{}", settings.effective_table()));
            for w in settings.warnings() {
                eprintln!("warning: {w}");
            }
            let mut texts = Vec::new();
            for f in &files {
                for (name, text) in read_named_inputs(f).map_err(|e| e.to_string())? {
                    for w in
                        regroup::render::warnings(&text, &settings).map_err(|e| named(&name, e))?
                    {
                        eprintln!("warning: {name}: {w}");
                    }
                    texts.push(text);
                }
            }
            if !texts.is_empty() {
                let inputs: Vec<&str> = texts.iter().map(String::as_str).collect();
                let derived =
                    regroup::render::derive(&settings, &inputs).map_err(|e| e.to_string())?;
                if !derived.shared.found.is_empty() {
                    write_out(format_args!(
                        "SHARED NAMESPACES ({}): renamed per copy by render and inject\n",
                        settings.shared_namespaces().join(", ")
                    ));
                    for line in &derived.shared.found {
                        write_out(format_args!("  {line}\n"));
                    }
                    if let Some((kinds, list)) = derived.names.as_ref().and_then(|n| n.fixed()) {
                        let kinds: Vec<&str> = kinds.iter().map(|k| k.kind).collect();
                        write_out(format_args!(
                            "  for `regroup serve` without inject: names.namespaced: {{kinds: [{}], names: [{}]}}\n",
                            kinds.join(", "),
                            list.iter().map(|n| format!("\"{n}\"")).collect::<Vec<_>>().join(", ")
                        ));
                    }
                }
                if !derived.fields.is_empty() {
                    write_out(format_args!(
                        "FIELDS FROM CRD ENUMS: renamed in objects by render and inject\n"
                    ));
                    for f in &derived.fields {
                        write_out(format_args!(
                            "  - {{group: {}, kind: {}, path: {}, form: group}}\n",
                            f.group, f.kind, f.path
                        ));
                    }
                }
            }
            write_out(format_args!("{}: OK\n", config.display()));
            Ok(())
        }
        Command::Render {
            config,
            files,
            to_app,
        } => {
            let settings = load_config(&config)?;
            let dir = if to_app {
                Direction::ToApp
            } else {
                Direction::ToCluster
            };
            let mut inputs = Vec::new();
            let mut warned = Vec::new();
            for f in &files {
                for (name, text) in read_named_inputs(f).map_err(|e| e.to_string())? {
                    // Each file parsed on its own first: an error names it
                    // and its own line.
                    let ws =
                        regroup::render::warnings(&text, &settings).map_err(|e| named(&name, e))?;
                    warned.push(ws);
                    inputs.push((name, text));
                }
            }
            let texts: Vec<&str> = inputs.iter().map(|(_, t)| t.as_str()).collect();
            let (renderer, shared) =
                regroup::render::Renderer::for_manifests(&settings, dir, &texts)
                    .map_err(|e| e.to_string())?;
            for line in regroup::render::derived_lines(&shared) {
                eprintln!("{line}");
            }
            // Each file on its own: its errors name it and its own lines.
            let mut out = String::new();
            {
                for ((name, input), ws) in inputs.into_iter().zip(warned) {
                    let rendered = renderer.render(&input).map_err(|e| named(&name, e))?;
                    for w in ws {
                        eprintln!("warning: {name}: {w}");
                    }
                    if rendered.trim().is_empty() {
                        continue;
                    }
                    if !out.is_empty() {
                        if !out.ends_with('\n') {
                            out.push('\n');
                        }
                        if !rendered.starts_with("---") {
                            out.push_str("---\n");
                        }
                    }
                    out.push_str(&rendered);
                }
            }
            write_out(format_args!("{out}"));
            Ok(())
        }
        Command::Inject {
            config,
            files,
            image,
            kinds,
            names,
            prefix,
            tls_secret,
            tls_port,
            metrics_port,
            no_native_sidecar,
            strict,
            include_helm_tests,
            emit_chart_container,
            webhook_port,
            skip_unwired_webhooks,
        } => {
            if emit_chart_container {
                write_out(format_args!("{}", regroup::cmd::inject::chart_template()));
                return Ok(());
            }
            let config = config.expect("clap requires it without --emit-chart-container");
            let settings = load_config(&config)?;
            let config_text = std::fs::read_to_string(&config)
                .map_err(|e| format!("cannot read config {}: {e}", config.display()))?;
            let mut input = String::new();
            for f in &files {
                for (name, text) in read_named_inputs(f).map_err(|e| e.to_string())? {
                    // Each file read on its own first, so that an error
                    // names it and its own line, not the joined input's.
                    regroup::render::warnings(&text, &settings).map_err(|e| named(&name, e))?;
                    input.push_str("\n---\n");
                    input.push_str(&text);
                }
            }
            let defaults = regroup::cmd::inject::Options::default();
            let opts = regroup::cmd::inject::Options {
                image: image.unwrap_or(defaults.image),
                prefix,
                kinds: if kinds.is_empty() {
                    defaults.kinds
                } else {
                    kinds
                },
                names,
                tls_port,
                http_port: defaults.http_port,
                metrics_port: (metrics_port != 0).then_some(metrics_port),
                native_sidecar: !no_native_sidecar,
                tls_secret,
                strict,
                helm_tests: include_helm_tests,
                webhook_port,
                skip_unwired_webhooks,
            };
            let (out, warnings) =
                regroup::cmd::inject::inject_with_warnings(&input, &config_text, &settings, &opts)
                    .map_err(|e| e.to_string())?;
            for w in warnings {
                eprintln!("warning: {w}");
            }
            write_out(format_args!("{out}"));
            Ok(())
        }
    }
}

/// `publish-manifests`: exit code 2 when the central cluster could not
/// be asked for the published versions.
fn publish_manifests(config: &Path, opts: &regroup::publish::manifests::Options) -> ExitCode {
    let text = match std::fs::read_to_string(config) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("regroup: cannot read config {}: {e}", config.display());
            return ExitCode::FAILURE;
        }
    };
    match regroup::publish::manifests::generate(&text, opts) {
        Ok(out) => {
            write_out(format_args!("{out}"));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("regroup: {}: {e}", config.display());
            ExitCode::from(e.exit_code())
        }
    }
}

fn load_config(path: &Path) -> Result<Settings, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
    regroup_config::load(&text).map_err(|e| format!("{}:\n{e}", path.display()))
}

/// Listen addresses: `:PORT` on loopback.
fn loopback_addr(s: &str) -> Result<std::net::SocketAddr, regroup_config::addr::ListenAddrError> {
    regroup_config::addr::parse_listen(s, std::net::Ipv4Addr::LOCALHOST.into())
}

/// Listen addresses: `:PORT` on every interface.
fn any_addr(s: &str) -> Result<std::net::SocketAddr, regroup_config::addr::ListenAddrError> {
    regroup_config::addr::parse_listen(s, std::net::Ipv4Addr::UNSPECIFIED.into())
}

/// An error about the input named `name`: said first, and in the YAML
/// parser's snippet (which only knows an `<input>`).
fn named(name: &str, e: impl std::fmt::Display) -> String {
    let e = e
        .to_string()
        .replace(" --> <input>:", &format!(" --> {name}:"));
    format!("{name}: {e}")
}

/// Why an input file (or standard input, or a directory) can't be read.
#[derive(Debug, thiserror::Error)]
enum InputError {
    #[error("cannot read standard input: {0}")]
    Stdin(#[source] std::io::Error),
    #[error("cannot read {file}: {source}")]
    File {
        file: String,
        source: std::io::Error,
    },
}

/// A file, `-`, or a directory's `*.yaml`, `*.yml` and `*.json` files (in
/// name order, not recursive), each with the name errors give it (`-`:
/// standard input).
fn read_named_inputs(file: &str) -> Result<Vec<(String, String)>, InputError> {
    let path = Path::new(file);
    if file == "-" || !path.is_dir() {
        let name = if file == "-" { "<stdin>" } else { file };
        return Ok(vec![(name.to_owned(), read_input(file)?)]);
    }
    let mut names: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|source| InputError::File {
            file: file.to_owned(),
            source,
        })?
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.is_file()
                && p.extension()
                    .is_some_and(|x| x == "yaml" || x == "yml" || x == "json")
        })
        .collect();
    names.sort();
    names
        .iter()
        .map(|p| {
            let name = p.to_string_lossy().into_owned();
            read_input(&name).map(|text| (name, text))
        })
        .collect()
}

fn read_input(file: &str) -> Result<String, InputError> {
    if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(InputError::Stdin)?;
        Ok(s)
    } else {
        std::fs::read_to_string(file).map_err(|source| InputError::File {
            file: file.to_owned(),
            source,
        })
    }
}
