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
use serde::Deserialize;

/// Why a kubeconfig can't be used.
#[derive(Debug, thiserror::Error)]
#[error("kubeconfig {path}: {message}")]
pub struct KubeconfigError {
    /// The file.
    pub path: String,
    /// What is wrong.
    pub message: String,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct File {
    #[serde(default)]
    clusters: Vec<NamedCluster>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<NamedContext>,
    #[serde(default)]
    current_context: String,
}

#[derive(Deserialize)]
struct NamedCluster {
    name: String,
    #[serde(default)]
    cluster: Cluster,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Deserialize)]
struct NamedContext {
    name: String,
    #[serde(default)]
    context: Context,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    #[serde(default)]
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
    proxy_url: Option<String>,
    #[serde(default)]
    disable_compression: bool,
    #[serde(default)]
    extensions: Vec<NamedExtension>,
}

#[derive(Deserialize, Clone)]
struct NamedExtension {
    name: String,
    #[serde(default)]
    extension: serde_json::Value,
}

#[derive(Deserialize, Default, Clone)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    /// client-go's name is `tokenFile` (camel case, unlike its neighbours).
    #[serde(rename = "tokenFile")]
    token_file: Option<PathBuf>,
    /// Not a kubectl field: read only to say so (kubectl would silently
    /// ignore it and run without a credential).
    #[serde(rename = "token-file")]
    misspelt_token_file: Option<serde_json::Value>,
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<String>,
    username: Option<String>,
    password: Option<String>,
    #[serde(rename = "as")]
    impersonate: Option<String>,
    #[serde(rename = "as-uid")]
    impersonate_uid: Option<String>,
    #[serde(rename = "as-groups")]
    impersonate_groups: Option<Vec<String>>,
    #[serde(rename = "as-user-extra")]
    impersonate_extra: Option<BTreeMap<String, Vec<String>>>,
    exec: Option<RawExec>,
    auth_provider: Option<RawAuthProvider>,
}

#[derive(Deserialize, Clone)]
struct RawAuthProvider {
    #[serde(default)]
    name: String,
}

#[derive(Deserialize, Clone, Default)]
#[serde(rename_all = "camelCase")]
struct RawExec {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    command: String,
    #[serde(default)]
    args: Vec<String>,
    #[serde(default)]
    env: Vec<RawEnv>,
    install_hint: Option<String>,
    #[serde(default)]
    provide_cluster_info: bool,
    interactive_mode: Option<String>,
}

#[derive(Deserialize, Clone)]
struct RawEnv {
    name: String,
    #[serde(default)]
    value: String,
}

#[derive(Deserialize, Default, Clone)]
struct Context {
    #[serde(default)]
    cluster: String,
    #[serde(default)]
    user: String,
}

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
            message: "none of these files exists".into(),
        });
    }
    resolve(&files, &label, context)
}

fn read_file(path: &Path) -> Result<Loaded, KubeconfigError> {
    let err = |message: String| KubeconfigError {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let file: File = if text.trim().is_empty() {
        File::default()
    } else {
        serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?
    };
    let base = path.parent().unwrap_or(Path::new(".")).to_path_buf();
    Ok(Loaded { base, file })
}

fn resolve(
    files: &[Loaded],
    label: &str,
    context: Option<&str>,
) -> Result<Resolved, KubeconfigError> {
    let err = |message: String| KubeconfigError {
        path: label.to_owned(),
        message,
    };
    let current = files
        .iter()
        .map(|f| f.file.current_context.as_str())
        .find(|c| !c.is_empty())
        .unwrap_or("");
    let ctx_name = context.filter(|c| !c.is_empty()).unwrap_or(current);
    if ctx_name.is_empty() {
        return Err(err("no current-context and no context given".into()));
    }
    // First file to name an entry wins.
    let ctx = files
        .iter()
        .find_map(|f| f.file.contexts.iter().find(|c| c.name == ctx_name))
        .ok_or_else(|| err(format!("context `{ctx_name}` not found")))?;
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
        .ok_or_else(|| err(format!("cluster `{}` not found", ctx.cluster)))?;
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
        std::fs::read(p).map_err(|e| err(format!("{}: {e}", p.display())))
    };
    let decode = |field: &str, d: &str| -> Result<Vec<u8>, KubeconfigError> {
        base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .map_err(|e| err(format!("{field}: {e}")))
    };
    let c = cluster;
    if c.server.is_empty() {
        return Err(err(format!("cluster `{}` has no server", ctx.cluster)));
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
        return Err(err(format!(
            "user `{user_name}` uses auth-provider `{}`, which kubectl itself no longer runs \
             (removed in 1.26); use the exec plugin that replaces it: {}",
            p.name,
            match p.name.as_str() {
                "gcp" => "gke-gcloud-auth-plugin (exec: {command: gke-gcloud-auth-plugin})",
                "azure" => "kubelogin (exec: {command: kubelogin, args: [get-token, ...]})",
                "oidc" => "kubelogin / kubectl oidc-login (exec: {command: kubectl, args: [oidc-login, get-token, ...]})",
                _ => "the provider's client-go credential plugin (user.exec)",
            }
        )));
    }
    if u.misspelt_token_file.is_some() && u.token_file.is_none() {
        return Err(err(format!(
            "user `{user_name}` has `token-file`, which kubectl ignores; the field is `tokenFile`"
        )));
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
        _ => {
            return Err(err(
                "a client certificate needs both certificate and key".into()
            ))
        }
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
            return Err(err(format!(
                "user `{user_name}`: as-groups, as-uid or as-user-extra need `as` (the user to impersonate)"
            )));
        }
        _ => {}
    }
    if let Some(x) = &u.exec {
        out.exec = Some(exec_config(x, user_base, &out, c).map_err(err)?);
    }
    Ok(out)
}

fn exec_config(
    x: &RawExec,
    base: &Path,
    resolved: &Resolved,
    cluster: &Cluster,
) -> Result<ExecConfig, String> {
    const V1: &str = "client.authentication.k8s.io/v1";
    const V1BETA1: &str = "client.authentication.k8s.io/v1beta1";
    if x.api_version != V1 && x.api_version != V1BETA1 {
        return Err(format!(
            "exec: apiVersion `{}` is not supported (use {V1} or {V1BETA1})",
            x.api_version
        ));
    }
    if x.command.is_empty() {
        return Err("exec: no command".into());
    }
    let interactive_mode = match x.interactive_mode.as_deref() {
        None | Some("") => InteractiveMode::IfAvailable,
        Some("Never") => InteractiveMode::Never,
        Some("IfAvailable") => InteractiveMode::IfAvailable,
        Some("Always") => {
            return Err(format!(
                "exec: `{}` has interactiveMode Always, but regroup never has a terminal; \
                 use a plugin mode that needs no input",
                x.command
            ))
        }
        Some(m) => return Err(format!("exec: unknown interactiveMode `{m}`")),
    };
    if x.api_version == V1 && x.interactive_mode.is_none() {
        return Err("exec: interactiveMode is required for client.authentication.k8s.io/v1".into());
    }
    // client-go: a command with a path separator is relative to the
    // kubeconfig's directory; a bare name is looked up in PATH.
    let command = if x.command.contains('/') && !Path::new(&x.command).is_absolute() {
        base.join(&x.command).display().to_string()
    } else {
        x.command.clone()
    };
    let mut spec_cluster = serde_json::json!({
        "server": resolved.server,
        "insecure-skip-tls-verify": resolved.insecure,
    });
    if let Some(ca) = &resolved.ca_pem {
        spec_cluster["certificate-authority-data"] =
            base64::engine::general_purpose::STANDARD.encode(ca).into();
    }
    if let Some(n) = &resolved.tls_server_name {
        spec_cluster["tls-server-name"] = n.clone().into();
    }
    if let Some(p) = &resolved.proxy_url {
        spec_cluster["proxy-url"] = p.clone().into();
    }
    if resolved.disable_compression {
        spec_cluster["disable-compression"] = true.into();
    }
    if let Some(e) = cluster
        .extensions
        .iter()
        .find(|e| e.name == "client.authentication.k8s.io/exec")
    {
        spec_cluster["config"] = e.extension.clone();
    }
    Ok(ExecConfig {
        api_version: x.api_version.clone(),
        command,
        args: x.args.clone(),
        env: x
            .env
            .iter()
            .map(|e| (e.name.clone(), e.value.clone()))
            .collect(),
        install_hint: x.install_hint.clone().filter(|h| !h.is_empty()),
        provide_cluster_info: x.provide_cluster_info,
        interactive_mode,
        cluster: spec_cluster,
    })
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
    let err = |message: String| KubeconfigError {
        path: "in-cluster".into(),
        message,
    };
    let host = std::env::var("KUBERNETES_SERVICE_HOST")
        .map_err(|_| err("KUBERNETES_SERVICE_HOST is not set".into()))?;
    let port = std::env::var("KUBERNETES_SERVICE_PORT")
        .map_err(|_| err("KUBERNETES_SERVICE_PORT is not set".into()))?;
    let host = if host.contains(':') {
        format!("[{host}]")
    } else {
        host
    };
    let ca_path = dir.join("ca.crt");
    let ca = std::fs::read(&ca_path).map_err(|e| err(format!("{}: {e}", ca_path.display())))?;
    Ok(Resolved {
        server: format!("https://{host}:{port}"),
        ca_pem: Some(ca),
        ca_file: Some(ca_path),
        token_file: Some(dir.join("token")),
        ..Resolved::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("regroup-kc-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        dir
    }

    #[test]
    fn current_context_resolves_server_ca_and_token() {
        let dir = tmp("basic");
        std::fs::write(dir.join("ca.pem"), b"PEM").unwrap();
        let kc = dir.join("config");
        std::fs::write(
            &kc,
            "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443/\n    certificate-authority: ca.pem\n    extensions: []\ncontexts:\n- name: a\n  context: {cluster: c, user: u, namespace: x}\n- name: b\n  context: {cluster: c, user: v}\nusers:\n- name: u\n  user: {token: abc}\n- name: v\n  user:\n    auth-provider: {name: gcp}\npreferences: {}\n",
        )
        .unwrap();
        let r = load(&kc, None).unwrap();
        assert_eq!(r.server, "https://127.0.0.1:6443");
        assert_eq!(r.ca_pem.as_deref(), Some(&b"PEM"[..]));
        assert_eq!(r.token.as_deref(), Some("abc"));
        let e = load(&kc, Some("b")).unwrap_err();
        assert!(e.to_string().contains("gke-gcloud-auth-plugin"), "{e}");
        let e = load(&kc, Some("zzz")).unwrap_err();
        assert!(e.to_string().contains("`zzz` not found"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn token_file_is_kubectls_camel_case_field_relative_to_the_file() {
        let dir = tmp("tokenfile");
        let kc = dir.join("config");
        std::fs::write(
            &kc,
            "current-context: a\nclusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\ncontexts: [{name: a, context: {cluster: c, user: u}}, {name: b, context: {cluster: c, user: v}}]\nusers:\n- {name: u, user: {tokenFile: tok}}\n- {name: v, user: {token-file: tok}}\n",
        )
        .unwrap();
        let r = load(&kc, None).unwrap();
        assert_eq!(r.token_file, Some(dir.join("tok")));
        let e = load(&kc, Some("b")).unwrap_err();
        assert!(e.to_string().contains("`tokenFile`"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn kubeconfig_lists_merge_first_file_wins() {
        let dir = tmp("merge");
        let a = dir.join("a");
        let b = dir.join("b");
        // a: no current-context; its cluster `c` wins over b's.
        std::fs::write(
            &a,
            "clusters: [{name: c, cluster: {server: 'http://a:1'}}]\nusers: [{name: u, user: {token: from-a}}]\n",
        )
        .unwrap();
        std::fs::write(
            &b,
            "current-context: x\nclusters: [{name: c, cluster: {server: 'http://b:1'}}, {name: d, cluster: {server: 'http://b:2'}}]\ncontexts: [{name: x, context: {cluster: c, user: u}}, {name: y, context: {cluster: d, user: w}}]\nusers: [{name: u, user: {token: from-b}}, {name: w, user: {tokenFile: t}}]\n",
        )
        .unwrap();
        let paths = vec![a.clone(), dir.join("missing"), b.clone()];
        let r = load_merged(&paths, None).unwrap();
        assert_eq!(r.server, "http://a:1");
        assert_eq!(r.token.as_deref(), Some("from-a"));
        let r = load_merged(&paths, Some("y")).unwrap();
        assert_eq!(r.server, "http://b:2");
        assert_eq!(r.token_file, Some(dir.join("t")));
        // The first file that sets current-context wins.
        std::fs::write(&a, "current-context: y\n").unwrap();
        let r = load_merged(&paths, None).unwrap();
        assert_eq!(r.server, "http://b:2");
        assert!(load_merged(&[dir.join("nope")], None).is_err());
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn impersonation_proxy_url_and_exec_are_read() {
        let dir = tmp("exec");
        let kc = dir.join("config");
        std::fs::write(
            &kc,
            r#"current-context: a
clusters:
- name: c
  cluster:
    server: https://k:6443
    insecure-skip-tls-verify: true
    proxy-url: http://proxy:3128
    disable-compression: true
    extensions:
    - name: client.authentication.k8s.io/exec
      extension: {audience: foo}
contexts: [{name: a, context: {cluster: c, user: u}}, {name: b, context: {cluster: c, user: v}}]
users:
- name: u
  user:
    as: jane
    as-uid: "42"
    as-groups: [dev, ops]
    as-user-extra: {scopes: [a, b]}
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./plugin.sh
      args: [get-token]
      env: [{name: FOO, value: bar}]
      installHint: install it
      provideClusterInfo: true
      interactiveMode: Never
- name: v
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: x, interactiveMode: Always}
"#,
        )
        .unwrap();
        let r = load(&kc, None).unwrap();
        assert_eq!(r.proxy_url.as_deref(), Some("http://proxy:3128"));
        assert!(r.disable_compression);
        let i = r.impersonate.unwrap();
        assert_eq!(i.user, "jane");
        assert_eq!(i.uid.as_deref(), Some("42"));
        assert_eq!(i.groups, ["dev", "ops"]);
        assert_eq!(i.extra["scopes"], ["a", "b"]);
        let x = r.exec.unwrap();
        assert_eq!(x.command, dir.join("./plugin.sh").display().to_string());
        assert_eq!(x.env, [("FOO".to_string(), "bar".to_string())]);
        assert_eq!(x.interactive_mode, InteractiveMode::Never);
        assert_eq!(x.cluster["server"], "https://k:6443");
        assert_eq!(x.cluster["config"]["audience"], "foo");
        let e = load(&kc, Some("b")).unwrap_err();
        assert!(e.to_string().contains("Always"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }

    #[test]
    fn in_cluster_at_reads_the_given_directory() {
        let dir = tmp("sa");
        std::fs::write(dir.join("ca.crt"), b"CA").unwrap();
        // The environment is process-wide: only read here, never set.
        match in_cluster_at(&dir) {
            Ok(r) => {
                assert_eq!(r.token_file, Some(dir.join("token")));
                assert_eq!(r.ca_pem.as_deref(), Some(&b"CA"[..]));
            }
            Err(e) => assert!(e.message.contains("KUBERNETES_SERVICE"), "{e}"),
        }
        std::fs::remove_dir_all(&dir).ok();
    }
}
