//! Exec credential plugins (client-go's `client.authentication.k8s.io`
//! `v1` and `v1beta1` ExecCredential): running the kubeconfig's command
//! and reading the token or client certificate it prints.
//!
//! regroup is never interactive: the plugin's stdin is empty
//! (`interactiveMode: Always` is refused when the kubeconfig is read), and
//! `spec.interactive` is false. Its stdout (the credential) is never
//! logged; its stderr is, in an error, bounded.

use std::process::Stdio;
use std::time::{Duration, SystemTime};

use serde::Deserialize;

use super::kubeconfig::ExecConfig;

/// How long a plugin may run.
pub const EXEC_TIMEOUT: Duration = Duration::from_secs(60);

/// The most of a failing plugin's stderr that goes into an error.
const STDERR_LIMIT: usize = 2048;

/// What a plugin handed out.
#[derive(Clone, PartialEq, Eq)]
pub struct ExecOutput {
    /// A bearer token.
    pub token: Option<String>,
    /// PEM client certificate and key.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
    /// When to ask again (none: until a 401).
    pub expires: Option<SystemTime>,
}

impl std::fmt::Debug for ExecOutput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ExecOutput")
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field(
                "client_cert",
                &self.client_cert.as_ref().map(|_| "<redacted>"),
            )
            .field("expires", &self.expires)
            .finish()
    }
}

/// Why a plugin's stdout is not a usable ExecCredential. Never quotes the
/// output: it holds the credential.
#[derive(Debug, thiserror::Error)]
pub enum OutputError {
    /// Not JSON of an ExecCredential's shape (only where: serde's message
    /// may quote the value).
    #[error("its output is not an ExecCredential (JSON error at line {line}, column {column})")]
    NotJson {
        /// The line of the error.
        line: usize,
        /// Its column.
        column: usize,
    },
    /// Another kind.
    #[error("its output has kind `{0}`, not ExecCredential")]
    Kind(String),
    /// Another version than the kubeconfig's.
    #[error("its output has apiVersion `{got}`, the kubeconfig asked for `{asked}`")]
    ApiVersion {
        /// The output's.
        got: String,
        /// The kubeconfig's.
        asked: String,
    },
    /// No `status`.
    #[error("its ExecCredential has no status")]
    NoStatus,
    /// A certificate without its key or the reverse.
    #[error("its ExecCredential has clientCertificateData or clientKeyData without the other")]
    HalfClientCertificate,
    /// Nothing to authenticate with.
    #[error("its ExecCredential has neither a token nor a client certificate")]
    NoCredential,
    /// `expirationTimestamp` is not RFC 3339.
    #[error("expirationTimestamp `{value}`: {source}")]
    Expiration {
        /// The timestamp as written.
        value: String,
        /// The parser's complaint.
        source: time::error::Parse,
    },
}

/// Why running a plugin gave no credential.
#[derive(Debug, thiserror::Error)]
pub enum ExecError {
    /// The command does not exist: its `installHint` says how to get it.
    #[error("exec plugin `{command}` not found{}", hint_suffix(.install_hint.as_deref()))]
    NotFound {
        /// The command.
        command: String,
        /// The kubeconfig's `installHint`.
        install_hint: Option<String>,
    },
    /// Starting it or waiting for it failed.
    #[error("exec plugin `{command}`: {source}")]
    Io {
        /// The command.
        command: String,
        /// What failed.
        source: std::io::Error,
    },
    /// It ran past [`EXEC_TIMEOUT`].
    #[error("exec plugin `{command}` did not finish within {}s", EXEC_TIMEOUT.as_secs())]
    Timeout {
        /// The command.
        command: String,
    },
    /// It exited with an error: its stderr (bounded) says why.
    #[error("exec plugin `{command}` failed ({status}){}", stderr_suffix(.stderr))]
    Failed {
        /// The command.
        command: String,
        /// How it exited.
        status: std::process::ExitStatus,
        /// Its stderr, trimmed and bounded.
        stderr: String,
    },
    /// Its output is not a credential.
    #[error("exec plugin `{command}`: {source}")]
    Output {
        /// The command.
        command: String,
        /// What is wrong with the output.
        source: OutputError,
    },
}

fn hint_suffix(hint: Option<&str>) -> String {
    hint.map(|h| format!(": {}", h.trim())).unwrap_or_default()
}

fn stderr_suffix(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(": {stderr}")
    }
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ExecCredential {
    #[serde(default)]
    api_version: String,
    #[serde(default)]
    kind: String,
    status: Option<Status>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Status {
    expiration_timestamp: Option<String>,
    token: Option<String>,
    client_certificate_data: Option<String>,
    client_key_data: Option<String>,
}

/// Parses a plugin's stdout: an ExecCredential of `api_version`.
pub fn parse(api_version: &str, stdout: &[u8]) -> Result<ExecOutput, OutputError> {
    // Never quote stdout in an error: it holds the credential.
    let cred: ExecCredential =
        serde_json::from_slice(stdout).map_err(|e| OutputError::NotJson {
            line: e.line(),
            column: e.column(),
        })?;
    if cred.kind != "ExecCredential" {
        return Err(OutputError::Kind(cred.kind));
    }
    if cred.api_version != api_version {
        return Err(OutputError::ApiVersion {
            got: cred.api_version,
            asked: api_version.to_owned(),
        });
    }
    let status = cred.status.ok_or(OutputError::NoStatus)?;
    let expires = match status.expiration_timestamp.as_deref() {
        None | Some("") => None,
        Some(t) => Some(parse_time(t)?),
    };
    let token = status.token.filter(|t| !t.is_empty());
    let cert = status.client_certificate_data.filter(|c| !c.is_empty());
    let key = status.client_key_data.filter(|k| !k.is_empty());
    let client_cert = match (cert, key) {
        (Some(c), Some(k)) => Some((c.into_bytes(), k.into_bytes())),
        (None, None) => None,
        _ => return Err(OutputError::HalfClientCertificate),
    };
    if token.is_none() && client_cert.is_none() {
        return Err(OutputError::NoCredential);
    }
    Ok(ExecOutput {
        token,
        client_cert,
        expires,
    })
}

/// An RFC 3339 timestamp (`2026-11-24T17:00:00Z`, offsets, fractions).
fn parse_time(t: &str) -> Result<SystemTime, OutputError> {
    let at = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
        .map_err(|source| OutputError::Expiration {
            value: t.to_owned(),
            source,
        })?;
    Ok(SystemTime::from(at))
}

/// Runs the plugin once and reads its ExecCredential.
pub async fn run(cfg: &ExecConfig) -> Result<ExecOutput, ExecError> {
    let mut cmd = tokio::process::Command::new(&cfg.command);
    cmd.args(&cfg.args)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    for (k, v) in &cfg.env {
        cmd.env(k, v);
    }
    let mut spec = serde_json::json!({ "interactive": false });
    if cfg.provide_cluster_info {
        spec["cluster"] = cfg.cluster.clone();
    }
    let info = serde_json::json!({
        "apiVersion": cfg.api_version,
        "kind": "ExecCredential",
        "spec": spec,
    });
    cmd.env("KUBERNETES_EXEC_INFO", info.to_string());
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(ExecError::NotFound {
                command: cfg.command.clone(),
                install_hint: cfg.install_hint.clone(),
            });
        }
        Err(source) => {
            return Err(ExecError::Io {
                command: cfg.command.clone(),
                source,
            })
        }
    };
    let out = match tokio::time::timeout(EXEC_TIMEOUT, child.wait_with_output()).await {
        Ok(Ok(o)) => o,
        Ok(Err(source)) => {
            return Err(ExecError::Io {
                command: cfg.command.clone(),
                source,
            })
        }
        Err(_) => {
            return Err(ExecError::Timeout {
                command: cfg.command.clone(),
            })
        }
    };
    let stderr = String::from_utf8_lossy(&out.stderr);
    let stderr = stderr.trim();
    let stderr = if stderr.len() > STDERR_LIMIT {
        let mut end = STDERR_LIMIT;
        while !stderr.is_char_boundary(end) {
            end -= 1;
        }
        format!("{}...", &stderr[..end])
    } else {
        stderr.to_owned()
    };
    if !out.status.success() {
        return Err(ExecError::Failed {
            command: cfg.command.clone(),
            status: out.status,
            stderr,
        });
    }
    parse(&cfg.api_version, &out.stdout).map_err(|source| ExecError::Output {
        command: cfg.command.clone(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const V1: &str = "client.authentication.k8s.io/v1";
    const V1B1: &str = "client.authentication.k8s.io/v1beta1";

    #[test]
    fn token_with_expiry_in_both_versions() {
        for v in [V1, V1B1] {
            let out = parse(
                v,
                format!(r#"{{"apiVersion":"{v}","kind":"ExecCredential","status":{{"token":"t0k","expirationTimestamp":"2030-01-02T03:04:05Z"}}}}"#).as_bytes(),
            )
            .unwrap();
            assert_eq!(out.token.as_deref(), Some("t0k"));
            let secs = out
                .expires
                .unwrap()
                .duration_since(SystemTime::UNIX_EPOCH)
                .unwrap()
                .as_secs();
            assert_eq!(secs, 1_893_553_445);
        }
    }

    #[test]
    fn client_certificate_without_expiry_and_fractional_offsets() {
        let out = parse(V1, br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":"CERT","clientKeyData":"KEY"}}"#).unwrap();
        assert_eq!(out.client_cert, Some((b"CERT".to_vec(), b"KEY".to_vec())));
        assert_eq!(out.expires, None);
        assert!(out.token.is_none());
        let out = parse(V1, br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"x","expirationTimestamp":"2030-01-02T05:04:05.5+02:00"}}"#).unwrap();
        let secs = out
            .expires
            .unwrap()
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        assert_eq!(secs, 1_893_553_445);
    }

    #[test]
    fn malformed_credentials_are_refused_without_quoting_the_output() {
        let cases: [(&str, &[u8], &str); 5] = [
            (V1, b"secret-token-not-json", "not an ExecCredential"),
            (V1, br#"{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"secret"}}"#, "asked for"),
            (V1, br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}"#, "no status"),
            (V1, br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientKeyData":"secret"}}"#, "without the other"),
            (V1, br#"{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"secret","expirationTimestamp":"tomorrow"}}"#, "expirationTimestamp"),
        ];
        for (v, out, want) in cases {
            let e = parse(v, out).unwrap_err().to_string();
            assert!(e.contains(want), "{e}");
            assert!(!e.contains("secret"), "{e}");
        }
    }

    #[tokio::test]
    async fn a_missing_command_names_the_install_hint_and_stderr_is_reported() {
        let cfg = ExecConfig {
            api_version: V1.into(),
            command: "/nonexistent/regroup-plugin".into(),
            install_hint: Some("brew install regroup-plugin".into()),
            ..ExecConfig::default()
        };
        let e = run(&cfg).await.unwrap_err().to_string();
        assert!(
            e.contains("not found") && e.contains("brew install regroup-plugin"),
            "{e}"
        );
        let cfg = ExecConfig {
            api_version: V1.into(),
            command: "sh".into(),
            args: vec![
                "-c".into(),
                "echo token-on-stdout; echo 'login expired' >&2; exit 3".into(),
            ],
            ..ExecConfig::default()
        };
        let e = run(&cfg).await.unwrap_err().to_string();
        assert!(
            e.contains("login expired") && !e.contains("token-on-stdout"),
            "{e}"
        );
    }

    #[tokio::test]
    async fn the_plugin_gets_env_args_and_exec_info() {
        let cfg = ExecConfig {
            api_version: V1.into(),
            command: "sh".into(),
            args: vec![
                "-c".into(),
                r#"case "$KUBERNETES_EXEC_INFO" in *'"interactive":false'*'"server":"https://k"'*) ok=yes;; *) ok=no;; esac
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s-%s-%s"}}' "$FOO" "$ok" "$1""#.into(),
                "sh".into(),
                "arg1".into(),
            ],
            env: vec![("FOO".into(), "bar".into())],
            provide_cluster_info: true,
            cluster: serde_json::json!({"server": "https://k"}),
            ..ExecConfig::default()
        };
        let out = run(&cfg).await.unwrap();
        let t = out.token.unwrap();
        assert_eq!(t, "bar-yes-arg1");
    }
}
