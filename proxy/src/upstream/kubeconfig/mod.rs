//! Reading kubeconfigs as kubectl reads them: one file or a `KUBECONFIG`
//! list merged by kubectl's rules, the current (or named) context's server,
//! CA, proxy and credentials (token, `tokenFile`, client certificate, basic,
//! exec plugin) and impersonation. Fields regroup doesn't use are ignored,
//! as client-go ignores what it doesn't know.
//!
//! Why not kube-client's `kube::config::Kubeconfig`: it needs Rust 1.89
//! (regroup's MSRV is 1.85), and taking it means taking `kube-core` and
//! `k8s-openapi`, which refuses to build unless its user picks a Kubernetes
//! version feature, for a few serde structs. The field names below are
//! client-go's (`k8s.io/client-go/tools/clientcmd/api/v1/types.go`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
mod exec_config;
mod schema;

use exec_config::exec_config;
use schema::*;

/// Why a kubeconfig can't be used.
#[derive(Debug, thiserror::Error)]
#[error("kubeconfig {path}: {problem}")]
pub struct KubeconfigError {
    /// The file.
    pub path: String,
    /// What is wrong.
    #[source]
    pub problem: Problem,
}

/// What is wrong with a kubeconfig (its file named by [`KubeconfigError`]).
#[derive(Debug, thiserror::Error)]
pub enum Problem {
    /// The kubeconfig itself can't be read.
    #[error("{0}")]
    Read(#[source] std::io::Error),
    /// Not YAML of a kubeconfig's shape (boxed: the parser's error is
    /// large, and every kubeconfig result carries the room for it).
    #[error("{0}")]
    Parse(#[from] Box<serde_saphyr::Error>),
    /// No file of a `KUBECONFIG` list exists.
    #[error("none of these files exists")]
    NoFile,
    /// Neither `current-context` nor `--context`.
    #[error("no current-context and no context given")]
    NoContext,
    /// The context named is in no file.
    #[error("context `{0}` not found")]
    ContextNotFound(String),
    /// The context's cluster is in no file.
    #[error("cluster `{0}` not found")]
    ClusterNotFound(String),
    /// A file the kubeconfig names (CA, client certificate or key).
    #[error("{}: {source}", path.display())]
    ReadNamed {
        /// The file named.
        path: PathBuf,
        /// Why it can't be read.
        source: std::io::Error,
    },
    /// A `*-data` field that is not base64.
    #[error("{field}: {source}")]
    Base64 {
        /// The field.
        field: &'static str,
        /// The decoder's complaint.
        source: base64::DecodeError,
    },
    /// The cluster has an empty `server`.
    #[error("cluster `{0}` has no server")]
    NoServer(String),
    /// `auth-provider`, gone from kubectl: the message names its successor.
    #[error(
        "user `{user}` uses auth-provider `{provider}`, which kubectl itself no longer runs \
         (removed in 1.26); use the exec plugin that replaces it: {}",
        auth_provider_successor(.provider)
    )]
    AuthProvider {
        /// The kubeconfig user.
        user: String,
        /// The provider's name.
        provider: String,
    },
    /// `token-file` for `tokenFile`.
    #[error("user `{0}` has `token-file`, which kubectl ignores; the field is `tokenFile`")]
    MisspeltTokenFile(String),
    /// A client certificate without its key, or a key without it.
    #[error("a client certificate needs both certificate and key")]
    HalfClientCertificate,
    /// `as-groups`, `as-uid` or `as-user-extra` without `as`.
    #[error("user `{0}`: as-groups, as-uid or as-user-extra need `as` (the user to impersonate)")]
    ImpersonationWithoutUser(String),
    /// The user's `exec` section.
    #[error(
        "exec: apiVersion `{0}` is not supported \
         (use client.authentication.k8s.io/v1 or client.authentication.k8s.io/v1beta1)"
    )]
    ExecApiVersion(String),
    /// `exec` without a command.
    #[error("exec: no command")]
    ExecNoCommand,
    /// `interactiveMode: Always`: regroup has no terminal.
    #[error(
        "exec: `{0}` has interactiveMode Always, but regroup never has a terminal; \
         use a plugin mode that needs no input"
    )]
    ExecInteractiveAlways(String),
    /// An `interactiveMode` client-go doesn't know.
    #[error("exec: unknown interactiveMode `{0}`")]
    ExecUnknownInteractiveMode(String),
    /// `v1` requires `interactiveMode`.
    #[error("exec: interactiveMode is required for client.authentication.k8s.io/v1")]
    ExecNoInteractiveMode,
    /// In-cluster: an environment variable the kubelet sets is missing.
    #[error("{0} is not set")]
    NotSet(&'static str),
}

/// The exec plugin that replaces an `auth-provider`.
fn auth_provider_successor(provider: &str) -> &'static str {
    match provider {
        "gcp" => "gke-gcloud-auth-plugin (exec: {command: gke-gcloud-auth-plugin})",
        "azure" => "kubelogin (exec: {command: kubelogin, args: [get-token, ...]})",
        "oidc" => "kubelogin / kubectl oidc-login (exec: {command: kubectl, args: [oidc-login, get-token, ...]})",
        _ => "the provider's client-go credential plugin (user.exec)",
    }
}

/// The exec credential versions regroup speaks.
pub(super) const EXEC_V1: &str = "client.authentication.k8s.io/v1";
pub(super) const EXEC_V1BETA1: &str = "client.authentication.k8s.io/v1beta1";

/// Impersonation from the kubeconfig user's `as`, `as-uid`, `as-groups`,
/// `as-user-extra`: sent as `Impersonate-*` headers with regroup's own
/// credential (never with an app's passed-through token).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Impersonate {
    /// `Impersonate-User`.
    pub user: String,
    /// `Impersonate-Uid`.
    pub uid: Option<String>,
    /// `Impersonate-Group`, one header each.
    pub groups: Vec<String>,
    /// `Impersonate-Extra-<key>`, one header per value.
    pub extra: BTreeMap<String, Vec<String>>,
}

/// `interactiveMode` of an exec plugin.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum InteractiveMode {
    /// The plugin never needs a terminal.
    Never,
    /// It may use one if there is one: regroup has none, so it runs without.
    #[default]
    IfAvailable,
}

/// A kubeconfig `exec` credential plugin.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExecConfig {
    /// `client.authentication.k8s.io/v1` or `/v1beta1`.
    pub api_version: String,
    /// The program (a path relative to the kubeconfig when it has a `/`,
    /// else looked up in `PATH`, as client-go does).
    pub command: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Added to regroup's environment.
    pub env: Vec<(String, String)>,
    /// Shown when the command is not found.
    pub install_hint: Option<String>,
    /// Pass the cluster in `KUBERNETES_EXEC_INFO`.
    pub provide_cluster_info: bool,
    /// Never or IfAvailable (`Always` is refused: regroup has no terminal).
    pub interactive_mode: InteractiveMode,
    /// The cluster as the plugin sees it (`spec.cluster`).
    pub cluster: serde_json::Value,
}

/// What regroup needs from a kubeconfig.
#[derive(Clone, Debug, Default)]
pub struct Resolved {
    /// `https://host:port[/prefix]` or `http://...`.
    pub server: String,
    /// PEM CA bundle, if any.
    pub ca_pem: Option<Vec<u8>>,
    /// Skip server certificate verification.
    pub insecure: bool,
    /// SNI / verification name override.
    pub tls_server_name: Option<String>,
    /// A static bearer token.
    pub token: Option<String>,
    /// A bearer token re-read from this file.
    pub token_file: Option<PathBuf>,
    /// PEM client certificate chain and key.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
    /// HTTP basic credentials.
    pub basic: Option<(String, String)>,
    /// Where `client_cert` was read from (certificate, key), when files:
    /// re-read when they change.
    pub client_cert_files: Option<(PathBuf, PathBuf)>,
    /// An exec credential plugin.
    pub exec: Option<ExecConfig>,
    /// Impersonation with regroup's own credential.
    pub impersonate: Option<Impersonate>,
    /// `proxy-url` of the cluster.
    pub proxy_url: Option<String>,
    /// `disable-compression`: regroup always asks for identity encoding, so
    /// this changes nothing; kept to say so.
    pub disable_compression: bool,
    /// Where `ca_pem` was read from, when a file: re-read when it changes.
    pub ca_file: Option<PathBuf>,
}

/// One parsed file and the directory its relative paths start from.
struct Loaded {
    base: PathBuf,
    file: File,
}

/// Reads `path` and resolves `context` (default: the current context).
pub fn load(path: &Path, context: Option<&str>) -> Result<Resolved, KubeconfigError> {
    let loaded = read_file(path)?;
    resolve(&[loaded], &path.display().to_string(), context)
}

/// Reads a `KUBECONFIG`-style list of files and merges them as kubectl
/// does: files that don't exist are skipped; for clusters, users and
/// contexts the first file that names an entry wins; `current-context`
/// comes from the first file that sets one. Relative paths in each entry
/// are relative to the file it came from.
pub fn load_merged(paths: &[PathBuf], context: Option<&str>) -> Result<Resolved, KubeconfigError> {
    let mut files = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for p in paths {
        if p.as_os_str().is_empty() || !seen.insert(p.clone()) {
            continue;
        }
        if !p.exists() {
            continue;
        }
        files.push(read_file(p)?);
    }
    let label = paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":");
    if files.is_empty() {
        return Err(KubeconfigError {
            path: label,
            problem: Problem::NoFile,
        });
    }
    resolve(&files, &label, context)
}

fn read_file(path: &Path) -> Result<Loaded, KubeconfigError> {
    let err = |problem: Problem| KubeconfigError {
        path: path.display().to_string(),
        problem,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(Problem::Read(e)))?;
    let file = parse(&text).map_err(|e| err(e.into()))?;
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    Ok(Loaded { base, file })
}

/// A kubeconfig's text read into its schema (an empty file is an empty
/// kubeconfig, as for kubectl).
fn parse(text: &str) -> Result<File, Box<serde_saphyr::Error>> {
    if text.trim().is_empty() {
        return Ok(File::default());
    }
    serde_saphyr::from_str(text).map_err(Box::new)
}

/// A kubeconfig given as text (a Secret's `kubeconfig` key), named
/// `label` in errors; relative paths in it would start from `/`.
pub fn load_text(text: &str, label: &str) -> Result<Resolved, KubeconfigError> {
    let file = parse(text).map_err(|e| KubeconfigError {
        path: label.to_owned(),
        problem: e.into(),
    })?;
    let loaded = Loaded {
        base: PathBuf::from("/"),
        file,
    };
    resolve(&[loaded], label, None)
}

/// `parse` alone, for the fuzzer: the part of reading a kubeconfig that
/// takes untrusted bytes (resolving reads the files it names).
pub fn parse_text(text: &str) -> Result<(), Box<serde_saphyr::Error>> {
    parse(text).map(drop)
}

fn resolve(
    files: &[Loaded],
    label: &str,
    context: Option<&str>,
) -> Result<Resolved, KubeconfigError> {
    let err = |problem: Problem| KubeconfigError {
        path: label.to_owned(),
        problem,
    };
    let current = files
        .iter()
        .map(|f| f.file.current_context.as_str())
        .find(|c| !c.is_empty())
        .unwrap_or("");
    let ctx_name = context.filter(|c| !c.is_empty()).unwrap_or(current);
    if ctx_name.is_empty() {
        return Err(err(Problem::NoContext));
    }
    // First file to name an entry wins.
    let ctx = files
        .iter()
        .find_map(|f| f.file.contexts.iter().find(|c| c.name == ctx_name))
        .ok_or_else(|| err(Problem::ContextNotFound(ctx_name.to_owned())))?;
    let ctx = &ctx.context;
    let (cluster_base, cluster) = files
        .iter()
        .find_map(|f| {
            f.file
                .clusters
                .iter()
                .find(|c| c.name == ctx.cluster)
                .map(|c| (&f.base, &c.cluster))
        })
        .ok_or_else(|| err(Problem::ClusterNotFound(ctx.cluster.clone())))?;
    let user = files.iter().find_map(|f| {
        f.file
            .users
            .iter()
            .find(|u| u.name == ctx.user)
            .map(|u| (&f.base, &u.user))
    });

    let abs = |base: &Path, p: &Path| -> PathBuf {
        if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        }
    };
    let read = |p: &Path| -> Result<Vec<u8>, KubeconfigError> {
        std::fs::read(p).map_err(|source| {
            err(Problem::ReadNamed {
                path: p.to_path_buf(),
                source,
            })
        })
    };
    let decode = |field: &'static str, d: &str| -> Result<Vec<u8>, KubeconfigError> {
        base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .map_err(|source| err(Problem::Base64 { field, source }))
    };
    let c = cluster;
    if c.server.is_empty() {
        return Err(err(Problem::NoServer(ctx.cluster.clone())));
    }
    let ca_file = match (&c.certificate_authority_data, &c.certificate_authority) {
        (None, Some(p)) => Some(abs(cluster_base, p)),
        _ => None,
    };
    let ca_pem = match (&c.certificate_authority_data, &ca_file) {
        (Some(d), _) => Some(decode("certificate-authority-data", d)?),
        (None, Some(p)) => Some(read(p)?),
        (None, None) => None,
    };
    let mut out = Resolved {
        ca_file,
        server: c.server.trim_end_matches('/').to_owned(),
        ca_pem,
        insecure: c.insecure_skip_tls_verify,
        tls_server_name: c.tls_server_name.clone(),
        proxy_url: c.proxy_url.clone().filter(|p| !p.is_empty()),
        disable_compression: c.disable_compression,
        ..Resolved::default()
    };
    let Some((user_base, u)) = user else {
        return Ok(out);
    };
    let user_name = &ctx.user;
    if let Some(p) = &u.auth_provider {
        return Err(err(Problem::AuthProvider {
            user: user_name.clone(),
            provider: p.name.clone(),
        }));
    }
    if u.misspelt_token_file.is_some() && u.token_file.is_none() {
        return Err(err(Problem::MisspeltTokenFile(user_name.clone())));
    }
    out.token = u.token.clone().filter(|t| !t.is_empty());
    out.token_file = u.token_file.as_ref().map(|p| abs(user_base, p));
    let cert = match (&u.client_certificate_data, &u.client_certificate) {
        (Some(d), _) => Some(decode("client-certificate-data", d)?),
        (None, Some(p)) => Some(read(&abs(user_base, p))?),
        _ => None,
    };
    let key = match (&u.client_key_data, &u.client_key) {
        (Some(d), _) => Some(decode("client-key-data", d)?),
        (None, Some(p)) => Some(read(&abs(user_base, p))?),
        _ => None,
    };
    out.client_cert = match (cert, key) {
        (Some(c), Some(k)) => Some((c, k)),
        (None, None) => None,
        _ => return Err(err(Problem::HalfClientCertificate)),
    };
    if let (None, None, Some(c), Some(k)) = (
        &u.client_certificate_data,
        &u.client_key_data,
        &u.client_certificate,
        &u.client_key,
    ) {
        out.client_cert_files = Some((abs(user_base, c), abs(user_base, k)));
    }
    if let (Some(n), Some(p)) = (&u.username, &u.password) {
        out.basic = Some((n.clone(), p.clone()));
    }
    let groups = u.impersonate_groups.clone().unwrap_or_default();
    let extra = u.impersonate_extra.clone().unwrap_or_default();
    match &u.impersonate {
        Some(user) if !user.is_empty() => {
            out.impersonate = Some(Impersonate {
                user: user.clone(),
                uid: u.impersonate_uid.clone().filter(|s| !s.is_empty()),
                groups,
                extra,
            })
        }
        _ if !groups.is_empty() || !extra.is_empty() || u.impersonate_uid.is_some() => {
            // client-go: "requested impersonation is not supported".
            return Err(err(Problem::ImpersonationWithoutUser(user_name.clone())));
        }
        _ => {}
    }
    if let Some(x) = &u.exec {
        out.exec = Some(exec_config(x, user_base, &out, c).map_err(err)?);
    }
    Ok(out)
}

/// The service-account directory mounted into every pod.
pub const SERVICE_ACCOUNT_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// The in-cluster configuration: `KUBERNETES_SERVICE_HOST/PORT` and the
/// service-account token and CA mounted into every pod.
pub fn in_cluster() -> Result<Resolved, KubeconfigError> {
    in_cluster_at(Path::new(SERVICE_ACCOUNT_DIR))
}

/// [`in_cluster`] with the service-account files (`ca.crt`, `token`) read
/// from `dir` (`upstream.serviceAccountDir`): a sidecar whose pod mounts the
/// app's volume at the standard path, or a test on one machine. The token
/// and CA files are re-read when they change (kubelet rotates them).
pub fn in_cluster_at(dir: &Path) -> Result<Resolved, KubeconfigError> {
    let err = |problem: Problem| KubeconfigError {
        path: "in-cluster".into(),
        problem,
    };
    let host = std::env::var("KUBERNETES_SERVICE_HOST")
        .map_err(|_| err(Problem::NotSet("KUBERNETES_SERVICE_HOST")))?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT")
        .map_err(|_| err(Problem::NotSet("KUBERNETES_SERVICE_PORT")))?;
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let ca_path = dir.join("ca.crt");
    let ca = std::fs::read(&ca_path).map_err(|source| {
        err(Problem::ReadNamed {
            path: ca_path.clone(),
            source,
        })
    })?;
    Ok(Resolved {
        server: format!("https://{host}:{port}"),
        ca_pem: Some(ca),
        ca_file: Some(ca_path),
        token_file: Some(dir.join("token")),
        ..Resolved::default()
    })
}

#[cfg(test)]
mod tests;
