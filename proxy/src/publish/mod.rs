//! Publish mode (docs/publish.md): the aggregated front whose backend is
//! another (central) cluster. The remote cluster's callers are authorized
//! by the remote cluster (`authorize`), their namespaces mapped to central
//! target namespaces (`namespaces`), names held by another source refused
//! (`source`, `publisher`), each request's bodies edited by a pipeline hook
//! (`amend`), only the published groups shown in discovery and OpenAPI
//! (`filter`), and connection Secrets copied down (`secrets`).

pub(crate) mod across;
pub(crate) mod amend;
pub(crate) mod authorize;
pub(crate) mod credentials;
pub(crate) mod filter;
pub(crate) mod lease;
pub mod manifests;
pub(crate) mod namespaces;
pub mod publisher;
pub(crate) mod secrets;
pub(crate) mod source;

use std::sync::Arc;
use std::time::Duration;

use regroup_config::Settings;

use crate::pipeline::exchange::BodyLimits;
use crate::upstream::own_client::OwnClient;
use crate::upstream::Upstream;
use namespaces::Namespaces;
use publisher::{PublishSettings, Publisher};

/// What publish mode's start hands the front.
pub struct Published {
    /// The hook of the publish stack (`stacks.rs`).
    pub publisher: Arc<Publisher>,
    /// regroup's own reads of the central cluster (`/readyz`).
    pub central: OwnClient,
}

/// Starts publish mode for `regroup serve`: from the settings, its section,
/// regroup's client of this (the remote) cluster, the body limits and the
/// process's metrics.
pub fn start<'a>(
    settings: &'a Settings,
    p: &'a regroup_config::schema::Publish,
    remote: OwnClient,
    limits: BodyLimits,
) -> futures_util::future::BoxFuture<'a, Result<Published, PublishError>> {
    Box::pin(async move {
        let publisher = started(settings, p, remote, limits).await?;
        Ok(Published {
            central: publisher.central_reads().clone(),
            publisher,
        })
    })
}

/// Starts publish mode: the central cluster's client, this cluster's id,
/// and the connection Secrets' puller (a task for the life of the process).
async fn started(
    settings: &Settings,
    p: &regroup_config::schema::Publish,
    remote: OwnClient,
    limits: BodyLimits,
) -> Result<Arc<Publisher>, PublishError> {
    let central = Arc::new(Upstream::central(settings).ok_or(PublishError::NotConfigured)??);
    let resolved = crate::upstream::from_settings::resolve_section(
        &p.central,
        &crate::upstream::from_settings::Target::default(),
    )
    .map_err(PublishError::Central)?;
    let credentials = Arc::new(credentials::Credentials::new(
        remote.clone(),
        central.clone(),
        resolved,
        (&settings.limits).into(),
        p.credentials
            .default_secret
            .as_ref()
            .map(|s| credentials::SecretRef {
                namespace: s.namespace.clone(),
                name: s.name.clone(),
            }),
    ));
    let cluster = match &p.cluster_id {
        Some(id) => id.clone(),
        None => cluster_id(&remote).await?,
    };
    let namespaces = Arc::new(Namespaces::new(
        remote.clone(),
        p.target_namespace.clone(),
        p.match_namespaces,
    ));
    tracing::info!(
        central = %central.describe(),
        cluster = %cluster,
        groups = ?p.groups,
        "publishing the central cluster's groups"
    );
    if !p.connection_secrets.fields.is_empty() {
        let id = secrets::publisher_id(
            central.authority().as_str(),
            &p.groups,
            &format!("{:?} {}", p.target_namespace, p.match_namespaces),
        );
        // One replica at a time copies (a Lease in this cluster).
        let (lead, leading) = tokio::sync::watch::channel(None);
        let le = &p.leader_election;
        let elector = lease::Elector {
            remote: remote.clone(),
            namespace: le
                .namespace
                .clone()
                .or_else(own_namespace)
                .unwrap_or_else(|| "default".into()),
            name: le
                .name
                .clone()
                .unwrap_or_else(|| format!("regroup-publish-{}", &id[..id.len().min(16)])),
            identity: identity(),
            duration: Duration::from_secs(le.lease_seconds.max(3)),
        };
        drop(tokio::spawn(elector.run(lead)));
        let puller = secrets::Puller {
            central: OwnClient::new(central.clone()),
            credentials: credentials.clone(),
            read_only: p.read_only,
            remote: remote.clone(),
            namespaces: namespaces.clone(),
            cluster: cluster.clone(),
            groups: p.groups.clone(),
            fields: p.connection_secrets.fields.clone(),
            every: Duration::from_secs(p.connection_secrets.resync_seconds),
            require_owner: p.connection_secrets.require_owner,
            id,
            leading,
        };
        // Lives as long as the process.
        drop(tokio::spawn(puller.run()));
    }
    Ok(Arc::new(Publisher::new(PublishSettings {
        central,
        remote,
        namespaces,
        cluster,
        groups: p.groups.clone(),
        limits,
        credentials,
        read_only: p.read_only,
    })))
}

/// The pod's namespace, from its service account (the Lease's default).
fn own_namespace() -> Option<String> {
    std::fs::read_to_string("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// This replica's identity in the Lease: its pod's name (`HOSTNAME`), and
/// a random part so a restarted container is a new holder.
fn identity() -> String {
    use std::hash::{BuildHasher, Hasher};
    let host = std::env::var("HOSTNAME").unwrap_or_else(|_| "regroup".into());
    // Randomly keyed for each process.
    let r = std::collections::hash_map::RandomState::new()
        .build_hasher()
        .finish();
    format!("{host}_{:08x}", r as u32)
}

/// This cluster's default id: the uid of its `kube-system` Namespace.
async fn cluster_id(remote: &OwnClient) -> Result<String, PublishError> {
    let ns = remote
        .get_json("/api/v1/namespaces/kube-system")
        .await
        .map_err(PublishError::ClusterId)?;
    ns["metadata"]["uid"]
        .as_str()
        .map(str::to_owned)
        .ok_or(PublishError::NoUid)
}

/// Why publish mode could not start.
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// No `publish:` section.
    #[error("publish: not configured")]
    NotConfigured,
    /// The central cluster's client.
    #[error(transparent)]
    Central(#[from] crate::upstream::from_settings::FromSettingsError),
    /// This cluster's id could not be read.
    #[error(
        "publish: this cluster's id (the kube-system Namespace's uid; or set publish.clusterId): {0}"
    )]
    ClusterId(#[source] crate::upstream::own_client::OwnClientError),
    /// The kube-system Namespace has no uid.
    #[error("publish: the kube-system Namespace has no uid; set publish.clusterId")]
    NoUid,
}
