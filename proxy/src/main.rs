//! The `regroup` command line.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use regroup_config::{Direction, Settings};

/// regroup renames Kubernetes API groups between an unmodified app and the
/// cluster.
#[derive(Parser)]
#[command(name = "regroup", version, about)]
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
        /// `listeners.http`; default 127.0.0.1:8001).
        #[arg(long)]
        listen: Option<std::net::SocketAddr>,
    },
    /// Validate a configuration and print the effective rename table.
    Check {
        /// The configuration file.
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
    },
    /// Rename groups in manifests (CRDs, APIServices, RBAC, webhook
    /// configurations, custom resources): YAML or JSON in, YAML out.
    Render {
        /// The configuration file.
        #[arg(short = 'c', long = "config")]
        config: PathBuf,
        /// Manifest file, or `-` for standard input.
        #[arg(short = 'f', long = "filename", default_value = "-")]
        file: String,
        /// Rename cluster names back to the app's names instead.
        #[arg(long)]
        to_app: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Command::Serve {
        config,
        kubeconfig,
        context,
        listen,
    } = cli.command
    {
        let settings = match load_config(&config) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("regroup: {e}");
                return ExitCode::FAILURE;
            }
        };
        let opts = regroup::serve::run::Options {
            kubeconfig,
            context,
            listen,
            config: Some(config),
        };
        return match regroup::serve::run::run(settings, opts) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("regroup: {e}");
                ExitCode::FAILURE
            }
        };
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
        Command::Serve { .. } => unreachable!("handled in main"),
        Command::Check { config } => {
            let settings = load_config(&config)?;
            print!("{}", settings.effective_table());
            for w in settings.warnings() {
                eprintln!("warning: {w}");
            }
            println!("{}: OK", config.display());
            Ok(())
        }
        Command::Render {
            config,
            file,
            to_app,
        } => {
            let settings = load_config(&config)?;
            let input = read_input(&file)?;
            let dir = if to_app {
                Direction::ToApp
            } else {
                Direction::ToCluster
            };
            let out = regroup::render::render(&input, &settings, dir)
                .map_err(|e| format!("{file}: {e}"))?;
            print!("{out}");
            Ok(())
        }
    }
}

fn load_config(path: &Path) -> Result<Settings, String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("cannot read config {}: {e}", path.display()))?;
    regroup_config::load(&text).map_err(|e| format!("{}:\n{e}", path.display()))
}

fn read_input(file: &str) -> Result<String, String> {
    if file == "-" {
        let mut s = String::new();
        std::io::stdin()
            .read_to_string(&mut s)
            .map_err(|e| format!("cannot read standard input: {e}"))?;
        Ok(s)
    } else {
        std::fs::read_to_string(file).map_err(|e| format!("cannot read {file}: {e}"))
    }
}
