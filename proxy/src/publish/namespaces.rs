//! Which central namespace a remote namespace's objects go to: the remote
//! Namespace's annotation, else its namesake (`matchNamespaces`), else
//! `targetNamespace`; and which Secret its requests act with centrally
//! (`credentials.rs`). The remote Namespaces are read with regroup's remote
//! credential and kept a few seconds.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use serde_json::Value as Json;

use super::credentials::{AGENT_CREDENTIALS_ANNOTATION, CREDENTIALS_ANNOTATION};
use crate::status::Failure;
use crate::upstream::own_client::OwnClient;

/// The annotation on a remote Namespace naming its central namespace.
pub(crate) const TARGET_ANNOTATION: &str = "regroup.dev/publish-target-namespace";

/// How long a remote Namespace read is used: an annotation changed takes
/// effect within this.
const FRESH: Duration = Duration::from_secs(5);

/// The rule, and the remote Namespaces read.
pub(crate) struct Namespaces {
    remote: OwnClient,
    default: Option<String>,
    matching: bool,
    /// Remote namespace → its annotations (absent: not read, or read too
    /// long ago).
    read: Mutex<HashMap<String, (Instant, Annotations)>>,
}

/// What a remote Namespace's annotations say of publishing.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Annotations {
    /// Its central namespace.
    pub target: Option<String>,
    /// The Secret (in it) its requests act with centrally.
    pub credentials: Option<String>,
}

impl Annotations {
    fn of(ns: &Json) -> Annotations {
        let a = &ns["metadata"]["annotations"];
        let get = |k: &str| {
            a[k].as_str()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        Annotations {
            target: get(TARGET_ANNOTATION),
            credentials: get(CREDENTIALS_ANNOTATION).or_else(|| get(AGENT_CREDENTIALS_ANNOTATION)),
        }
    }
}

/// One remote namespace and where it goes.
pub(crate) struct Mapped {
    pub remote: String,
    pub target: String,
    /// Its credentials annotation.
    pub credentials: Option<String>,
}

impl Namespaces {
    pub fn new(remote: OwnClient, default: Option<String>, matching: bool) -> Namespaces {
        Namespaces {
            remote,
            default,
            matching,
            read: Mutex::new(HashMap::new()),
        }
    }

    /// The central namespace of remote namespace `ns`; `404` when the
    /// remote Namespace does not exist (as kube-apiserver answers a
    /// request in a namespace that doesn't).
    pub async fn target(&self, ns: &str) -> Result<String, Failure> {
        let annotation = self.annotations(ns).await?.target;
        target_of(
            ns,
            annotation.as_deref(),
            self.default.as_deref(),
            self.matching,
        )
        .ok_or_else(|| {
            Failure::forbidden(format!(
                "namespace {ns:?} has no central namespace: annotate it with {TARGET_ANNOTATION}"
            ))
        })
    }

    /// The credentials annotation of remote namespace `ns`.
    pub async fn credentials(&self, ns: &str) -> Result<Option<String>, Failure> {
        Ok(self.annotations(ns).await?.credentials)
    }

    /// Every remote namespace that has a central one.
    pub async fn every_namespace(&self) -> Result<Vec<Mapped>, Failure> {
        let list = self
            .remote
            .get_json("/api/v1/namespaces")
            .await
            .map_err(|e| Failure::unavailable(format!("reading this cluster's namespaces: {e}")))?;
        let mut out = Vec::new();
        for ns in list["items"]
            .as_array()
            .map(Vec::as_slice)
            .unwrap_or_default()
        {
            let Some(name) = ns["metadata"]["name"].as_str() else {
                continue;
            };
            let a = Annotations::of(ns);
            self.remember(name, a.clone());
            let target = target_of(
                name,
                a.target.as_deref(),
                self.default.as_deref(),
                self.matching,
            );
            if let Some(target) = target {
                out.push(Mapped {
                    remote: name.to_owned(),
                    target,
                    credentials: a.credentials,
                });
            }
        }
        Ok(out)
    }

    async fn annotations(&self, ns: &str) -> Result<Annotations, Failure> {
        if let Some((at, a)) = self.lock().get(ns) {
            if at.elapsed() < FRESH {
                return Ok(a.clone());
            }
        }
        let path = format!("/api/v1/namespaces/{ns}");
        let (status, body) = self
            .remote
            .read(&path)
            .await
            .map_err(|e| Failure::unavailable(format!("reading namespace {ns:?}: {e}")))?;
        if status == http::StatusCode::NOT_FOUND {
            return Err(Failure::not_found(format!("namespaces {ns:?} not found")));
        }
        if !status.is_success() {
            return Err(Failure::unavailable(format!(
                "reading namespace {ns:?}: {status} (regroup's own credential needs get on namespaces)"
            )));
        }
        let doc: Json = serde_json::from_slice(&body)
            .map_err(|_| Failure::bad_gateway(format!("namespace {ns:?}: not JSON")))?;
        let a = Annotations::of(&doc);
        self.remember(ns, a.clone());
        Ok(a)
    }

    fn remember(&self, ns: &str, annotations: Annotations) {
        self.lock()
            .insert(ns.to_owned(), (Instant::now(), annotations));
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<String, (Instant, Annotations)>> {
        self.read.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// The rule itself: the annotation, else the namesake when matching, else
/// the default; `None` when none applies.
pub(crate) fn target_of(
    ns: &str,
    annotation: Option<&str>,
    default: Option<&str>,
    matching: bool,
) -> Option<String> {
    if let Some(a) = annotation.map(str::trim).filter(|a| !a.is_empty()) {
        return Some(a.to_owned());
    }
    if matching {
        return Some(ns.to_owned());
    }
    default.map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::target_of;

    #[test]
    fn the_annotation_wins_then_the_namesake_then_the_default() {
        assert_eq!(
            target_of("foo", Some("bar"), Some("d"), true).as_deref(),
            Some("bar")
        );
        assert_eq!(
            target_of("foo", None, Some("d"), true).as_deref(),
            Some("foo")
        );
        assert_eq!(
            target_of("foo", None, Some("d"), false).as_deref(),
            Some("d")
        );
        assert_eq!(
            target_of("foo", Some(" "), Some("d"), false).as_deref(),
            Some("d")
        );
        assert_eq!(target_of("foo", None, None, false), None);
    }
}
