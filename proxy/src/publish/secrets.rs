//! Connection Secrets pulled: every few seconds, the published objects of
//! this cluster are listed centrally, the Secret each names (the
//! configured field paths) is read in its central namespace and written
//! into the object's remote namespace; a copy whose object is gone, or no
//! longer names it, is deleted. A remote namespace whose objects could not
//! be read (its credential, the central cluster) keeps its copies and
//! stops no other namespace's: a copy is never lost to a failed read.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderValue, Method, StatusCode};
use serde_json::{json, Value as Json};

use super::credentials::{Credentials, SecretRef};
use super::lease;
use super::namespaces::Namespaces;
use super::source;
use crate::upstream::own_client::{OwnClient, OwnClientError};

/// Why a pass over the connection Secrets (or one copy) failed.
#[derive(Debug, thiserror::Error)]
pub enum SecretsError {
    /// A request to either cluster got no usable answer.
    #[error(transparent)]
    Client(#[from] OwnClientError),
    /// The target namespaces could not be listed (the failure's message).
    #[error("{0}")]
    Namespaces(String),
    /// A remote namespace's central credential can't be used.
    #[error("{0}")]
    Credential(String),
    /// The central Secret could not be read.
    #[error("reading it centrally: {0}")]
    ReadCentral(StatusCode),
    /// The central Secret is not JSON (never quoted: it holds secrets).
    #[error("central Secret is not JSON")]
    CentralNotJson,
    /// The remote copy could not be read.
    #[error("reading the copy: {0}")]
    ReadCopy(StatusCode),
    /// The remote copy is not JSON (never quoted).
    #[error("remote Secret is not JSON")]
    RemoteNotJson,
    /// The Lease ran out during the pass (this replica was paused or cut
    /// off): another replica may copy now.
    #[error("not written: this replica no longer holds the Lease")]
    NotLeading,
    /// A write was refused.
    #[error("{method} {path}: {status}")]
    Write {
        /// The method.
        method: Method,
        /// The path.
        path: String,
        /// The answer's status.
        status: StatusCode,
    },
}

/// The label on every copy regroup made, its value the publisher's id
/// ([`publisher_id`]): the selector one publisher finds its own copies by,
/// so two publishers in one cluster never delete each other's.
pub(crate) const COPY_LABEL: &str = "regroup.dev/connection-secret";
/// The annotation naming the published object a copy is for.
pub(crate) const COPY_OF: &str = "regroup.dev/connection-secret-of";

/// What the puller reads and writes.
pub(crate) struct Puller {
    /// Discovery of the published groups.
    pub central: OwnClient,
    /// Each remote namespace's central credential.
    pub credentials: Arc<Credentials>,
    /// Read-only federation: every object of a target namespace, whatever
    /// its source, has its Secrets copied into each remote namespace that
    /// maps there.
    pub read_only: bool,
    pub remote: OwnClient,
    pub namespaces: Arc<Namespaces>,
    pub cluster: String,
    /// Published groups, central names.
    pub groups: Vec<String>,
    /// Dotted paths to a Secret name in a published object.
    pub fields: Vec<String>,
    pub every: Duration,
    /// Only Secrets the naming object owns are copied.
    pub require_owner: bool,
    /// This publisher's id: [`COPY_LABEL`]'s value on its copies.
    pub id: String,
    /// Until when this replica holds the Lease (`lease.rs`).
    pub leading: tokio::sync::watch::Receiver<Option<Instant>>,
}

/// Where a wanted copy comes from: the central namespace, the object
/// (`resource.group/name`) and its uid.
#[derive(Clone, Debug)]
struct Origin {
    namespace: String,
    of: String,
    uid: String,
    /// The credential the remote namespace acts with centrally.
    via: Option<SecretRef>,
}

/// A copy that should exist: remote namespace and name → where from.
type Wanted = BTreeMap<(String, String), Origin>;

/// The remote namespaces whose objects a pass could not read: their
/// copies are left as they are.
type Unread = HashSet<String>;

impl Puller {
    /// Runs for the life of the process; passes only while this replica
    /// holds the Lease.
    pub async fn run(self) {
        loop {
            if !self.leads() {
                tokio::time::sleep(self.every).await;
                continue;
            }
            match self.pass().await {
                Ok((copied, deleted)) if copied + deleted > 0 => {
                    tracing::info!(copied, deleted, "connection secrets brought in line");
                }
                Ok(_) => {}
                Err(SecretsError::NotLeading) => {
                    tracing::info!(
                        "connection secrets: pass stopped, this replica no longer holds the Lease"
                    )
                }
                Err(e) => tracing::warn!("connection secrets: {e} (nothing deleted this pass)"),
            }
            tokio::time::sleep(self.every).await;
        }
    }

    /// Whether this replica holds the Lease now: checked before a pass
    /// and before each write.
    fn leads(&self) -> bool {
        lease::holds(*self.leading.borrow(), Instant::now())
    }

    /// One pass: how many copies were written and deleted.
    pub async fn pass(&self) -> Result<(usize, usize), SecretsError> {
        let (wanted, unread) = self.wanted().await?;
        let mut copied = 0;
        for ((ns, name), from) in &wanted {
            match self.copy(ns, name, from).await {
                Ok(true) => copied += 1,
                Ok(false) => {}
                Err(e) => {
                    tracing::warn!(namespace = %ns, secret = %name, "connection secret not copied: {e}")
                }
            }
        }
        let deleted = self.delete_unwanted(&wanted, &unread).await?;
        Ok((copied, deleted))
    }

    /// Every copy this cluster's published objects ask for: each remote
    /// namespace's objects (read-only: every object of its target
    /// namespace), listed with its own central credential; and the remote
    /// namespaces that could not be listed (a Secret missing, a credential
    /// the central cluster refuses: that namespace's trouble, said here,
    /// never another's).
    async fn wanted(&self) -> Result<(Wanted, Unread), SecretsError> {
        let mut wanted = Wanted::new();
        let mut unread = Unread::new();
        let mapped = self
            .namespaces
            .every_namespace()
            .await
            .map_err(|f| SecretsError::Namespaces(f.message))?;
        let selector = source::cluster_selector(&self.cluster);
        for (gv, resource) in self.resources().await? {
            for m in &mapped {
                if unread.contains(&m.remote) {
                    continue;
                }
                let via = self
                    .credentials
                    .secret_of(&m.remote, m.credentials.as_deref());
                let client = match self.credentials.client(via.as_ref()).await {
                    Ok(c) => c,
                    Err(f) => {
                        tracing::warn!(namespace = %m.remote, "connection secrets not read (copies kept): {}", f.message);
                        unread.insert(m.remote.clone());
                        continue;
                    }
                };
                let t = &m.target;
                let path = if self.read_only {
                    format!("/apis/{gv}/namespaces/{t}/{resource}")
                } else {
                    format!(
                        "/apis/{gv}/namespaces/{t}/{resource}?labelSelector={}",
                        enc(&selector)
                    )
                };
                let list = match OwnClient::new(client).get_json(&path).await {
                    Ok(list) => list,
                    Err(e) => {
                        tracing::warn!(namespace = %m.remote, "connection secrets not read (copies kept): {e}");
                        unread.insert(m.remote.clone());
                        continue;
                    }
                };
                for obj in list["items"]
                    .as_array()
                    .map(Vec::as_slice)
                    .unwrap_or_default()
                {
                    let ours = self.read_only || source::remote_namespace(obj) == Some(&m.remote);
                    let Some(name) = obj["metadata"]["name"].as_str().filter(|_| ours) else {
                        continue;
                    };
                    let from = Origin {
                        namespace: t.clone(),
                        of: format!(
                            "{resource}.{}/{name}",
                            gv.split('/').next().unwrap_or_default()
                        ),
                        uid: obj["metadata"]["uid"]
                            .as_str()
                            .unwrap_or_default()
                            .to_owned(),
                        via: via.clone(),
                    };
                    for f in &self.fields {
                        if let Some(secret) = at_path(obj, f) {
                            wanted.insert((m.remote.clone(), secret.to_owned()), from.clone());
                        }
                    }
                }
            }
        }
        Ok((wanted, unread))
    }

    /// The published resources (`group/version`, plural) that can be listed,
    /// each group's preferred version.
    async fn resources(&self) -> Result<Vec<(String, String)>, SecretsError> {
        let mut out = Vec::new();
        for g in &self.groups {
            let group = match self.central.get_json(&format!("/apis/{g}")).await {
                Ok(d) => d,
                // A group not (yet) served centrally has no objects.
                Err(e) if e.is_not_found() => continue,
                Err(e) => return Err(e.into()),
            };
            let Some(gv) = group["preferredVersion"]["groupVersion"].as_str() else {
                continue;
            };
            let doc = self.central.get_json(&format!("/apis/{gv}")).await?;
            for r in doc["resources"]
                .as_array()
                .map(Vec::as_slice)
                .unwrap_or_default()
            {
                let name = r["name"].as_str().unwrap_or_default();
                let listable = r["verbs"]
                    .as_array()
                    .is_some_and(|v| v.iter().any(|v| v == "list"));
                if !name.contains('/') && r["namespaced"] == true && listable {
                    out.push((gv.to_owned(), name.to_owned()));
                }
            }
        }
        Ok(out)
    }

    /// Copies one Secret: whether the remote copy was written.
    async fn copy(&self, ns: &str, name: &str, from: &Origin) -> Result<bool, SecretsError> {
        let of = from.of.as_str();
        let path = format!("/api/v1/namespaces/{}/secrets/{name}", from.namespace);
        let client = self
            .credentials
            .client(from.via.as_ref())
            .await
            .map_err(|f| SecretsError::Credential(f.message))?;
        let (status, body) = OwnClient::new(client).read(&path).await?;
        if status == StatusCode::NOT_FOUND {
            // Not written yet by the central controller.
            return Ok(false);
        }
        if !status.is_success() {
            return Err(SecretsError::ReadCentral(status));
        }
        let central: Json =
            serde_json::from_slice(&body).map_err(|_| SecretsError::CentralNotJson)?;
        if self.require_owner && !owned_by(&central, &from.uid) {
            tracing::warn!(namespace = %ns, secret = %name, object = %of, "not copied: the central Secret is not owned by the object naming it (connectionSecrets.requireOwner)");
            return Ok(false);
        }
        let mut copy = json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {
                "name": name,
                "namespace": ns,
                "labels": {"app.kubernetes.io/managed-by": "regroup", COPY_LABEL: self.id},
                "annotations": {COPY_OF: of},
            },
            "type": central["type"].clone(),
            "data": central["data"].clone(),
        });
        let to = format!("/api/v1/namespaces/{ns}/secrets/{name}");
        let (status, body) = self.remote.read(&to).await?;
        if status == StatusCode::NOT_FOUND {
            let create = format!("/api/v1/namespaces/{ns}/secrets");
            return self
                .write(Method::POST, &create, &copy)
                .await
                .map(|()| true);
        }
        if !status.is_success() {
            return Err(SecretsError::ReadCopy(status));
        }
        let current: Json =
            serde_json::from_slice(&body).map_err(|_| SecretsError::RemoteNotJson)?;
        if current["metadata"]["labels"][COPY_LABEL] != self.id.as_str() {
            tracing::warn!(namespace = %ns, secret = %name, "a Secret regroup does not own has this connection Secret's name: left alone");
            return Ok(false);
        }
        if current["data"] == copy["data"]
            && current["type"] == copy["type"]
            && current["metadata"]["annotations"][COPY_OF] == of
        {
            return Ok(false);
        }
        copy["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"].clone();
        self.write(Method::PUT, &to, &copy).await.map(|()| true)
    }

    async fn write(&self, method: Method, path: &str, doc: &Json) -> Result<(), SecretsError> {
        if !self.leads() {
            return Err(SecretsError::NotLeading);
        }
        let body = Bytes::from(serde_json::to_vec(doc).expect("values serialize"));
        let (status, _, _) = self
            .remote
            .request(
                method.clone(),
                path,
                json_accept(),
                Some((json_accept(), body)),
            )
            .await?;
        if status.is_success() {
            Ok(())
        } else {
            Err(SecretsError::Write {
                method,
                path: path.to_owned(),
                status,
            })
        }
    }

    /// Deletes the copies no published object names any more.
    async fn delete_unwanted(
        &self,
        wanted: &Wanted,
        unread: &Unread,
    ) -> Result<usize, SecretsError> {
        let list = self
            .remote
            .get_json(&format!(
                "/api/v1/secrets?labelSelector={}",
                enc(&format!("{COPY_LABEL}={}", self.id))
            ))
            .await?;
        let mut deleted = 0;
        for (s, ns, name) in unwanted(&list, wanted, unread) {
            if !self.leads() {
                return Err(SecretsError::NotLeading);
            }
            // Bound to the copy listed: a Secret made since is not deleted.
            let uid = s["metadata"]["uid"].as_str().unwrap_or_default();
            let opts =
                json!({"apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}});
            let path = format!("/api/v1/namespaces/{ns}/secrets/{name}");
            let body = Bytes::from(serde_json::to_vec(&opts).expect("values serialize"));
            let (status, _, _) = self
                .remote
                .request(
                    Method::DELETE,
                    &path,
                    json_accept(),
                    Some((json_accept(), body)),
                )
                .await?;
            if status.is_success() || status == StatusCode::NOT_FOUND {
                tracing::info!(namespace = %ns, secret = %name, "connection secret deleted: no published object names it any more");
                deleted += 1;
            } else {
                tracing::warn!(namespace = %ns, secret = %name, %status, "connection secret not deleted");
            }
        }
        Ok(deleted)
    }
}

/// The copies listed (`copies`, a SecretList) that no wanted copy is, in
/// namespaces whose objects were read: (the copy, its namespace, its name).
fn unwanted<'a>(
    copies: &'a Json,
    wanted: &Wanted,
    unread: &Unread,
) -> Vec<(&'a Json, &'a str, &'a str)> {
    let keep: HashSet<(&str, &str)> = wanted
        .keys()
        .map(|(a, b)| (a.as_str(), b.as_str()))
        .collect();
    copies["items"]
        .as_array()
        .map(Vec::as_slice)
        .unwrap_or_default()
        .iter()
        .filter_map(|s| {
            let ns = s["metadata"]["namespace"].as_str()?;
            let name = s["metadata"]["name"].as_str()?;
            (!keep.contains(&(ns, name)) && !unread.contains(ns)).then_some((s, ns, name))
        })
        .collect()
}

fn json_accept() -> HeaderValue {
    HeaderValue::from_static("application/json")
}

fn enc(s: &str) -> String {
    form_urlencoded::byte_serialize(s.as_bytes()).collect()
}

/// A publisher's id: FNV-1a (32 bits, stable everywhere) of what makes
/// its copies its own (the central cluster's address, the published
/// groups, where remote namespaces go), as a label value. Replicas of one
/// publisher share it (and want the same copies); two publishers differ.
pub(crate) fn publisher_id(central: &str, groups: &[String], targets: &str) -> String {
    let mut groups: Vec<&str> = groups.iter().map(String::as_str).collect();
    groups.sort_unstable();
    let text = format!("{central}\n{}\n{targets}", groups.join(","));
    let mut hash: u32 = 0x811c_9dc5;
    for b in text.bytes() {
        hash ^= u32::from(b);
        hash = hash.wrapping_mul(0x0100_0193);
    }
    format!("{hash:08x}")
}

/// Whether an object has an owner reference to `uid`.
fn owned_by(obj: &Json, uid: &str) -> bool {
    !uid.is_empty()
        && obj["metadata"]["ownerReferences"]
            .as_array()
            .is_some_and(|refs| refs.iter().any(|r| r["uid"] == uid))
}

/// The string at a dotted path of a JSON object.
pub(crate) fn at_path<'a>(obj: &'a Json, path: &str) -> Option<&'a str> {
    path.split('.')
        .try_fold(obj, |v, k| v.get(k))
        .and_then(Json::as_str)
        .filter(|s| !s.is_empty())
}

#[cfg(test)]
mod tests {
    use super::{at_path, owned_by, publisher_id, unwanted, Origin, Unread, Wanted};
    use serde_json::json;

    #[test]
    fn copies_of_a_namespace_that_could_not_be_read_are_kept() {
        let copy = |ns: &str, name: &str| json!({"metadata": {"namespace": ns, "name": name}});
        let copies = json!({"items": [copy("a", "s1"), copy("a", "gone"), copy("b", "s2"), copy("c", "s3")]});
        let origin = Origin {
            namespace: "bar".into(),
            of: "things.g.io/x".into(),
            uid: "u".into(),
            via: None,
        };
        let wanted: Wanted = [(("a".to_owned(), "s1".to_owned()), origin)].into();
        // b's objects could not be listed (its credential): its copy stays;
        // a's and c's were read: what they no longer name goes.
        let unread: Unread = ["b".to_owned()].into();
        let gone: Vec<(&str, &str)> = unwanted(&copies, &wanted, &unread)
            .into_iter()
            .map(|(_, ns, name)| (ns, name))
            .collect();
        assert_eq!(gone, [("a", "gone"), ("c", "s3")]);
        assert_eq!(unwanted(&json!({}), &wanted, &unread).len(), 0);
    }

    #[test]
    fn a_publishers_id_depends_on_its_central_cluster_groups_and_targets() {
        let g = |l: &[&str]| l.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let a = publisher_id("central:6443", &g(&["b.io", "a.io"]), "bar");
        assert_eq!(
            a,
            publisher_id("central:6443", &g(&["a.io", "b.io"]), "bar")
        );
        assert_ne!(a, publisher_id("other:6443", &g(&["a.io", "b.io"]), "bar"));
        assert_ne!(a, publisher_id("central:6443", &g(&["a.io"]), "bar"));
        assert_ne!(
            a,
            publisher_id("central:6443", &g(&["a.io", "b.io"]), "baz")
        );
        assert_eq!(a.len(), 8);
    }

    #[test]
    fn a_secret_is_owned_only_through_the_objects_uid() {
        let s = json!({"metadata": {"ownerReferences": [{"uid": "u-1", "kind": "X"}]}});
        assert!(owned_by(&s, "u-1"));
        assert!(!owned_by(&s, "u-2"));
        assert!(!owned_by(&s, ""));
        assert!(!owned_by(&json!({"metadata": {}}), "u-1"));
    }

    #[test]
    fn a_secret_name_is_read_at_its_dotted_path() {
        let o =
            json!({"spec": {"writeConnectionSecretToRef": {"name": "sql-creds"}, "n": 1, "e": ""}});
        assert_eq!(
            at_path(&o, "spec.writeConnectionSecretToRef.name"),
            Some("sql-creds")
        );
        assert_eq!(at_path(&o, "spec.missing.name"), None);
        assert_eq!(at_path(&o, "spec.n"), None);
        assert_eq!(at_path(&o, "spec.e"), None);
    }
}
