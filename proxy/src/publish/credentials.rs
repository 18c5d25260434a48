//! Whose credential a published request acts with in the central cluster:
//! its remote namespace's. A remote Namespace may name a Secret of its own
//! (annotation `regroup.dev/publish-credentials-secret`, or the Crossplane
//! agent's `agent.crossplane.io/credentials-secret-name`), else the
//! default Secret (`publish.credentials.defaultSecret`) is used, else
//! regroup's own central credential (`publish.central`). A Secret holds a
//! `kubeconfig` (inline data only: no exec plugin, no file, no proxy, and
//! the central cluster's server) or a `token` (with `ca.crt`, else the
//! central CA). Secrets are read with regroup's remote credential and read
//! again when older than a few seconds, so a rotated token is followed; a
//! missing or unreadable one is a `Status`, never a fallback.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use base64::Engine as _;
use http::StatusCode;
use serde_json::Value as Json;

use crate::status::Failure;
use crate::upstream::kubeconfig::{self, Resolved};
use crate::upstream::own_client::OwnClient;
use crate::upstream::{Timeouts, Upstream};

/// regroup's annotation on a remote Namespace naming its credentials
/// Secret (in that namespace).
pub(crate) const CREDENTIALS_ANNOTATION: &str = "regroup.dev/publish-credentials-secret";
/// The Crossplane agent's, accepted too.
pub(crate) const AGENT_CREDENTIALS_ANNOTATION: &str = "agent.crossplane.io/credentials-secret-name";

/// How long a Secret read is used before it is read again.
const FRESH: Duration = Duration::from_secs(5);

/// A Secret holding a central credential: where it is.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SecretRef {
    pub namespace: String,
    pub name: String,
}

/// The credential Secrets, read and kept.
pub(crate) struct Credentials {
    remote: OwnClient,
    /// regroup's own central client (no Secret configured).
    own: Arc<Upstream>,
    /// What the central cluster is (server, CA) as `publish.central` has it.
    central: Resolved,
    timeouts: Timeouts,
    /// `publish.credentials.defaultSecret`, in regroup's namespace.
    default: Option<SecretRef>,
    read: Mutex<HashMap<SecretRef, Kept>>,
}

/// One Secret as last read.
struct Kept {
    at: Instant,
    resource_version: String,
    upstream: Arc<Upstream>,
}

impl Credentials {
    pub(crate) fn new(
        remote: OwnClient,
        own: Arc<Upstream>,
        central: Resolved,
        timeouts: Timeouts,
        default: Option<SecretRef>,
    ) -> Credentials {
        Credentials {
            remote,
            own,
            central,
            timeouts,
            default,
            read: Mutex::new(HashMap::new()),
        }
    }

    /// The Secret a remote namespace's requests act with: its annotation's
    /// (`named`, a Secret in that namespace), else the default.
    pub(crate) fn secret_of(&self, namespace: &str, named: Option<&str>) -> Option<SecretRef> {
        match named {
            Some(name) => Some(SecretRef {
                namespace: namespace.to_owned(),
                name: name.to_owned(),
            }),
            None => self.default.clone(),
        }
    }

    /// The central client a request acts with: `secret`'s credential, or
    /// regroup's own when no Secret applies.
    pub(crate) async fn client(
        &self,
        secret: Option<&SecretRef>,
    ) -> Result<Arc<Upstream>, Failure> {
        let Some(secret) = secret else {
            return Ok(self.own.clone());
        };
        if let Some(k) = self.lock().get(secret) {
            if k.at.elapsed() < FRESH {
                return Ok(k.upstream.clone());
            }
        }
        let path = format!(
            "/api/v1/namespaces/{}/secrets/{}",
            secret.namespace, secret.name
        );
        let what = format!("credentials Secret {}/{}", secret.namespace, secret.name);
        let (status, body) = self
            .remote
            .read(&path)
            .await
            .map_err(|e| Failure::unavailable(format!("reading the {what}: {e}")))?;
        match status {
            s if s.is_success() => {}
            StatusCode::NOT_FOUND => {
                return Err(Failure::forbidden(format!(
                    "the {what} does not exist: requests of namespace {:?} act in the central cluster with it only",
                    secret.namespace
                )))
            }
            s => {
                return Err(Failure::unavailable(format!(
                    "reading the {what}: {s} (regroup's own credential needs get on it)"
                )))
            }
        }
        let doc: Json = serde_json::from_slice(&body)
            .map_err(|_| Failure::bad_gateway(format!("the {what} is not JSON")))?;
        let rv = doc["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let mut read = self.lock();
        if let Some(k) = read.get_mut(secret) {
            if k.resource_version == rv && !rv.is_empty() {
                k.at = Instant::now();
                return Ok(k.upstream.clone());
            }
        }
        let resolved = from_secret(&doc, &self.central)
            .map_err(|why| Failure::forbidden(format!("the {what} can't be used: {why}")))?;
        let upstream = Upstream::with_timeouts(&resolved, false, self.timeouts)
            .map_err(|e| Failure::forbidden(format!("the {what} can't be used: {e}")))?;
        let upstream = Arc::new(upstream);
        tracing::info!(secret = %what, "central credential read");
        read.insert(
            secret.clone(),
            Kept {
                at: Instant::now(),
                resource_version: rv,
                upstream: upstream.clone(),
            },
        );
        Ok(upstream)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<SecretRef, Kept>> {
        self.read.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// Why a credentials Secret can't be used.
#[derive(Debug, thiserror::Error, PartialEq)]
pub(crate) enum SecretError {
    #[error("it has neither a `kubeconfig` nor a `token` key")]
    Empty,
    #[error("its `{0}` is not base64 text")]
    NotText(&'static str),
    #[error("its kubeconfig can't be read: {0}")]
    Kubeconfig(String),
    #[error("its kubeconfig names the server {0:?}, not the central cluster's")]
    OtherServer(String),
    #[error("its kubeconfig uses {0}; only inline data is taken from a Secret")]
    NotInline(&'static str),
    #[error("its kubeconfig has no credential")]
    NoCredential,
}

/// The central client configuration a Secret gives: its `kubeconfig`, or
/// its `token` (and `ca.crt`) for the central server.
pub(crate) fn from_secret(secret: &Json, central: &Resolved) -> Result<Resolved, SecretError> {
    let data = |k: &'static str| -> Result<Option<String>, SecretError> {
        let Some(v) = secret["data"][k].as_str() else {
            return Ok(None);
        };
        let bytes = base64::engine::general_purpose::STANDARD
            .decode(v)
            .map_err(|_| SecretError::NotText(k))?;
        String::from_utf8(bytes)
            .map(Some)
            .map_err(|_| SecretError::NotText(k))
    };
    if let Some(text) = data("kubeconfig")? {
        let r = kubeconfig::load_text(&text, "the Secret's kubeconfig")
            .map_err(|e| SecretError::Kubeconfig(e.to_string()))?;
        let not_inline = [
            (r.exec.is_some(), "an exec plugin"),
            (r.token_file.is_some(), "a token file"),
            (r.client_cert_files.is_some(), "client certificate files"),
            (r.ca_file.is_some(), "a CA file"),
            (r.proxy_url.is_some(), "a proxy-url"),
            (r.impersonate.is_some(), "impersonation"),
        ];
        if let Some((_, what)) = not_inline.iter().find(|(used, _)| *used) {
            return Err(SecretError::NotInline(what));
        }
        if r.server.trim_end_matches('/') != central.server.trim_end_matches('/') {
            return Err(SecretError::OtherServer(r.server));
        }
        if r.token.is_none() && r.client_cert.is_none() && r.basic.is_none() {
            return Err(SecretError::NoCredential);
        }
        return Ok(r);
    }
    let Some(token) = data("token")? else {
        return Err(SecretError::Empty);
    };
    Ok(Resolved {
        server: central.server.clone(),
        ca_pem: data("ca.crt")?
            .map(String::into_bytes)
            .or_else(|| central.ca_pem.clone()),
        insecure: central.insecure,
        tls_server_name: central.tls_server_name.clone(),
        token: Some(token.trim().to_owned()),
        ..Resolved::default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn b64(s: &str) -> String {
        base64::engine::general_purpose::STANDARD.encode(s)
    }

    fn central() -> Resolved {
        Resolved {
            server: "https://central.example:6443".into(),
            ca_pem: Some(b"CENTRAL CA".to_vec()),
            ..Resolved::default()
        }
    }

    fn kubeconfig(server: &str, user: &str) -> String {
        format!(
            "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{{name: c, cluster: {{server: \"{server}\"}}}}]\nusers: [{{name: u, user: {user}}}]\ncontexts: [{{name: c, context: {{cluster: c, user: u}}}}]\n"
        )
    }

    #[test]
    fn a_token_secret_acts_on_the_central_server_with_its_own_ca_or_the_central_one() {
        let s = json!({"data": {"token": b64("abc\n"), "ca.crt": b64("SA CA")}});
        let r = from_secret(&s, &central()).unwrap();
        assert_eq!(r.server, "https://central.example:6443");
        assert_eq!(r.token.as_deref(), Some("abc"));
        assert_eq!(r.ca_pem.as_deref(), Some(&b"SA CA"[..]));
        let s = json!({"data": {"token": b64("abc")}});
        let r = from_secret(&s, &central()).unwrap();
        assert_eq!(r.ca_pem.as_deref(), Some(&b"CENTRAL CA"[..]));
    }

    #[test]
    fn a_kubeconfig_secret_must_be_inline_and_name_the_central_server() {
        let ok = kubeconfig("https://central.example:6443/", "{token: t1}");
        let r = from_secret(&json!({"data": {"kubeconfig": b64(&ok)}}), &central()).unwrap();
        assert_eq!(r.token.as_deref(), Some("t1"));
        let other = kubeconfig("https://elsewhere:6443", "{token: t1}");
        assert_eq!(
            from_secret(&json!({"data": {"kubeconfig": b64(&other)}}), &central()).unwrap_err(),
            SecretError::OtherServer("https://elsewhere:6443".into())
        );
        let exec = kubeconfig(
            "https://central.example:6443",
            "{exec: {apiVersion: client.authentication.k8s.io/v1, command: /bin/sh, interactiveMode: Never}}",
        );
        assert_eq!(
            from_secret(&json!({"data": {"kubeconfig": b64(&exec)}}), &central()).unwrap_err(),
            SecretError::NotInline("an exec plugin")
        );
        let file = kubeconfig("https://central.example:6443", "{tokenFile: /etc/passwd}");
        assert_eq!(
            from_secret(&json!({"data": {"kubeconfig": b64(&file)}}), &central()).unwrap_err(),
            SecretError::NotInline("a token file")
        );
        let none = kubeconfig("https://central.example:6443", "{}");
        assert_eq!(
            from_secret(&json!({"data": {"kubeconfig": b64(&none)}}), &central()).unwrap_err(),
            SecretError::NoCredential
        );
    }

    #[test]
    fn an_empty_or_binary_secret_is_refused() {
        assert_eq!(
            from_secret(&json!({"data": {}}), &central()).unwrap_err(),
            SecretError::Empty
        );
        assert_eq!(
            from_secret(&json!({"data": {"token": "!!"}}), &central()).unwrap_err(),
            SecretError::NotText("token")
        );
    }
}
