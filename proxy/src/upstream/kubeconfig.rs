//! Reading a kubeconfig: the current (or named) context's server, CA and
//! credentials. Only the fields regroup uses are read; others are ignored,
//! as client-go ignores what it doesn't know.

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
    clusters: Vec<Named<Cluster>>,
    #[serde(default)]
    users: Vec<NamedUser>,
    #[serde(default)]
    contexts: Vec<Named<Context>>,
    #[serde(default)]
    current_context: String,
}

#[derive(Deserialize)]
struct Named<T> {
    name: String,
    #[serde(alias = "cluster", alias = "context")]
    value: T,
}

#[derive(Deserialize)]
struct NamedUser {
    name: String,
    #[serde(default)]
    user: User,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct Cluster {
    server: String,
    certificate_authority: Option<PathBuf>,
    certificate_authority_data: Option<String>,
    #[serde(default)]
    insecure_skip_tls_verify: bool,
    tls_server_name: Option<String>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "kebab-case")]
struct User {
    token: Option<String>,
    token_file: Option<PathBuf>,
    client_certificate: Option<PathBuf>,
    client_certificate_data: Option<String>,
    client_key: Option<PathBuf>,
    client_key_data: Option<String>,
    username: Option<String>,
    password: Option<String>,
    exec: Option<serde_json::Value>,
    auth_provider: Option<serde_json::Value>,
}

#[derive(Deserialize, Default)]
struct Context {
    cluster: String,
    #[serde(default)]
    user: String,
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
}

/// Reads `path` and resolves `context` (default: the current context).
pub fn load(path: &Path, context: Option<&str>) -> Result<Resolved, KubeconfigError> {
    let err = |message: String| KubeconfigError {
        path: path.display().to_string(),
        message,
    };
    let text = std::fs::read_to_string(path).map_err(|e| err(e.to_string()))?;
    let file: File = serde_saphyr::from_str(&text).map_err(|e| err(e.to_string()))?;
    let base = path.parent().unwrap_or(Path::new("."));
    let ctx_name = context.unwrap_or(&file.current_context);
    if ctx_name.is_empty() {
        return Err(err("no current-context and no context given".into()));
    }
    let ctx = file
        .contexts
        .iter()
        .find(|c| c.name == ctx_name)
        .ok_or_else(|| err(format!("context `{ctx_name}` not found")))?;
    let cluster = file
        .clusters
        .iter()
        .find(|c| c.name == ctx.value.cluster)
        .ok_or_else(|| err(format!("cluster `{}` not found", ctx.value.cluster)))?;
    let user = file
        .users
        .iter()
        .find(|u| u.name == ctx.value.user)
        .map(|u| &u.user);

    let read = |p: &Path| -> Result<Vec<u8>, KubeconfigError> {
        let p = if p.is_absolute() {
            p.to_path_buf()
        } else {
            base.join(p)
        };
        std::fs::read(&p).map_err(|e| err(format!("{}: {e}", p.display())))
    };
    let decode = |field: &str, d: &str| -> Result<Vec<u8>, KubeconfigError> {
        base64::engine::general_purpose::STANDARD
            .decode(d.trim())
            .map_err(|e| err(format!("{field}: {e}")))
    };
    let c = &cluster.value;
    if c.server.is_empty() {
        return Err(err(format!("cluster `{}` has no server", cluster.name)));
    }
    let ca_pem = match (&c.certificate_authority_data, &c.certificate_authority) {
        (Some(d), _) => Some(decode("certificate-authority-data", d)?),
        (None, Some(p)) => Some(read(p)?),
        (None, None) => None,
    };
    let mut out = Resolved {
        server: c.server.trim_end_matches('/').to_owned(),
        ca_pem,
        insecure: c.insecure_skip_tls_verify,
        tls_server_name: c.tls_server_name.clone(),
        ..Resolved::default()
    };
    if let Some(u) = user {
        if u.exec.is_some() || u.auth_provider.is_some() {
            return Err(err(format!(
                "user `{}` uses an exec or auth-provider plugin, which regroup does not run yet; \
                 use a token, token file or client certificate",
                ctx.value.user
            )));
        }
        out.token = u.token.clone();
        out.token_file = u.token_file.as_ref().map(|p| {
            if p.is_absolute() {
                p.clone()
            } else {
                base.join(p)
            }
        });
        let cert = match (&u.client_certificate_data, &u.client_certificate) {
            (Some(d), _) => Some(decode("client-certificate-data", d)?),
            (None, Some(p)) => Some(read(p)?),
            _ => None,
        };
        let key = match (&u.client_key_data, &u.client_key) {
            (Some(d), _) => Some(decode("client-key-data", d)?),
            (None, Some(p)) => Some(read(p)?),
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
        if let (Some(n), Some(p)) = (&u.username, &u.password) {
            out.basic = Some((n.clone(), p.clone()));
        }
    }
    Ok(out)
}

/// The in-cluster configuration: `KUBERNETES_SERVICE_HOST/PORT` and the
/// service-account token and CA mounted into every pod.
pub fn in_cluster() -> Result<Resolved, KubeconfigError> {
    in_cluster_at(Path::new("/var/run/secrets/kubernetes.io/serviceaccount"))
}

/// [`in_cluster`] with the service-account files (`ca.crt`, `token`) read
/// from `dir` (`upstream.serviceAccountDir`): a sidecar whose pod mounts the
/// app's volume at the standard path, or a test on one machine.
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
        token_file: Some(dir.join("token")),
        ..Resolved::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn current_context_resolves_server_ca_and_token() {
        let dir = std::env::temp_dir().join(format!("regroup-kc-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("ca.pem"), b"PEM").unwrap();
        let kc = dir.join("config");
        std::fs::write(
            &kc,
            "apiVersion: v1\nkind: Config\ncurrent-context: a\nclusters:\n- name: c\n  cluster:\n    server: https://127.0.0.1:6443/\n    certificate-authority: ca.pem\n    extensions: []\ncontexts:\n- name: a\n  context: {cluster: c, user: u, namespace: x}\n- name: b\n  context: {cluster: c, user: v}\nusers:\n- name: u\n  user: {token: abc}\n- name: v\n  user:\n    exec: {command: x}\npreferences: {}\n",
        )
        .unwrap();
        let r = load(&kc, None).unwrap();
        assert_eq!(r.server, "https://127.0.0.1:6443");
        assert_eq!(r.ca_pem.as_deref(), Some(&b"PEM"[..]));
        assert_eq!(r.token.as_deref(), Some("abc"));
        let e = load(&kc, Some("b")).unwrap_err();
        assert!(e.to_string().contains("exec"), "{e}");
        let e = load(&kc, Some("zzz")).unwrap_err();
        assert!(e.to_string().contains("`zzz` not found"), "{e}");
        std::fs::remove_dir_all(&dir).ok();
    }
}
