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
pub(crate) mod filter;
pub mod manifests;
pub(crate) mod namespaces;
pub mod publisher;
pub(crate) mod secrets;
pub(crate) mod source;

use std::sync::Arc;
use std::time::Duration;

use regroup_config::Settings;

use crate::observe::metrics::Metrics;
use crate::pipeline::exchange::BodyLimits;
use crate::upstream::own_client::OwnClient;
use crate::upstream::Upstream;
use namespaces::Namespaces;
use publisher::{PublishSettings, Publisher};

/// What publish mode's start hands the front.
pub struct Published {
    /// What answers the front's authenticated callers.
    pub service: Arc<dyn crate::pipeline::proxy::Authenticated>,
    /// The central cluster's client (the front's backend).
    pub backend: Arc<Upstream>,
    /// regroup's own reads of it (`/readyz`).
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
    metrics: Arc<Metrics>,
) -> futures_util::future::BoxFuture<'a, Result<Published, PublishError>> {
    Box::pin(async move {
        let publisher = started(settings, p, remote, limits, metrics).await?;
        Ok(Published {
            backend: publisher.central().clone(),
            central: publisher.central_reads().clone(),
            service: publisher,
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
    metrics: Arc<Metrics>,
) -> Result<Arc<Publisher>, PublishError> {
    let central = Arc::new(Upstream::central(settings).ok_or(PublishError::NotConfigured)??);
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
        let puller = secrets::Puller {
            central: OwnClient::new(central.clone()),
            remote: remote.clone(),
            namespaces: namespaces.clone(),
            cluster: cluster.clone(),
            groups: p.groups.clone(),
            fields: p.connection_secrets.fields.clone(),
            every: Duration::from_secs(p.connection_secrets.resync_seconds),
            require_owner: p.connection_secrets.require_owner,
            id: secrets::publisher_id(
                central.authority().as_str(),
                &p.groups,
                &format!("{:?} {}", p.target_namespace, p.match_namespaces),
            ),
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
        metrics,
    })))
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
