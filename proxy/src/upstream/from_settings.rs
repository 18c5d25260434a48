//! The upstream a configuration names, built in one place for every
//! command that talks to the cluster (`serve`, `migrate`): where its
//! credentials come from (a flag, the file, `$KUBECONFIG`, `~/.kube/config`,
//! in-cluster), and the protocol and timeouts the settings give.

use std::path::{Path, PathBuf};

use regroup_config::Settings;

use super::kubeconfig::KubeconfigError;
use super::{kubeconfig, Upstream, UpstreamError};

/// Why the cluster a configuration names can't be reached.
#[derive(Debug, thiserror::Error)]
pub enum FromSettingsError {
    /// The kubeconfig (or the in-cluster configuration) named.
    #[error(transparent)]
    Kubeconfig(#[from] KubeconfigError),
    /// Nothing names a cluster, and this is not a pod.
    #[error(
        "no upstream: no --kubeconfig, $KUBECONFIG or ~/.kube/config, and not in a cluster ({0})"
    )]
    NoUpstream(#[source] KubeconfigError),
    /// The client can't be built from what was resolved.
    #[error(transparent)]
    Upstream(#[from] UpstreamError),
    /// Publish mode's central cluster.
    #[error("publish.central: {0}")]
    Central(#[source] Box<FromSettingsError>),
}

/// Where to reach the cluster, as the command line overrides the file.
#[derive(Clone, Debug, Default)]
pub struct Target<'a> {
    /// `--kubeconfig`.
    pub kubeconfig: Option<&'a Path>,
    /// `--context`.
    pub context: Option<&'a str>,
}

/// The cluster `settings` (and `target`) name: `--kubeconfig`, else the
/// file's `upstream.kubeconfig`, else `upstream.inCluster`, else
/// `$KUBECONFIG` (every file of the list, merged, as kubectl does), else
/// `~/.kube/config`, else the pod's service account.
pub fn resolve(
    settings: &Settings,
    target: &Target<'_>,
) -> Result<kubeconfig::Resolved, FromSettingsError> {
    resolve_section(&settings.file.upstream, target)
}

/// The cluster one `upstream:`-shaped section names (the file's
/// `upstream`, or publish mode's `publish.central`), as [`resolve`].
pub fn resolve_section(
    up: &regroup_config::schema::Upstream,
    target: &Target<'_>,
) -> Result<kubeconfig::Resolved, FromSettingsError> {
    let context = target.context.or(up.context.as_deref());
    let in_cluster = || match &up.service_account_dir {
        Some(dir) => kubeconfig::in_cluster_at(dir),
        None => kubeconfig::in_cluster(),
    };
    if let Some(path) = target.kubeconfig.or(up.kubeconfig.as_deref()) {
        return Ok(kubeconfig::load(path, context)?);
    }
    if up.in_cluster {
        return Ok(in_cluster()?);
    }
    if let Some(p) = std::env::var_os("KUBECONFIG").filter(|p| !p.is_empty()) {
        let paths: Vec<PathBuf> = std::env::split_paths(&p).collect();
        return Ok(kubeconfig::load_merged(&paths, context)?);
    }
    if let Some(home) = std::env::var_os("HOME") {
        let p = PathBuf::from(home).join(".kube/config");
        if p.exists() {
            return Ok(kubeconfig::load(&p, context)?);
        }
    }
    in_cluster().map_err(FromSettingsError::NoUpstream)
}

impl Upstream {
    /// The upstream `settings` name (see [`resolve`]), with their protocol
    /// (`upstream.http2`), TLS verification and timeouts; and what was
    /// resolved (for the start-up line's warnings).
    pub fn from_settings(
        settings: &Settings,
        target: &Target<'_>,
    ) -> Result<(Upstream, kubeconfig::Resolved), FromSettingsError> {
        let resolved = resolve(settings, target)?;
        let upstream = Upstream::with_protocol(
            &resolved,
            settings.file.upstream.dangerous_insecure_skip_tls_verify,
            (&settings.limits).into(),
            settings.file.upstream.http2,
        )?;
        Ok((upstream, resolved))
    }

    /// Publish mode's central cluster (`publish.central`), with the
    /// settings' timeouts and its own protocol choice. `None` without
    /// `publish:`.
    pub fn central(settings: &Settings) -> Option<Result<Upstream, FromSettingsError>> {
        let central = &settings.file.publish.as_ref()?.central;
        let build = || -> Result<Upstream, FromSettingsError> {
            let resolved = resolve_section(central, &Target::default())?;
            Ok(Upstream::with_protocol(
                &resolved,
                central.dangerous_insecure_skip_tls_verify,
                (&settings.limits).into(),
                central.http2,
            )?)
        };
        Some(build().map_err(|e| FromSettingsError::Central(Box::new(e))))
    }
}

/// An app's own server that regroup fronts (the aggregated front's
/// backend, a webhook's): not the apiserver, so no kubeconfig, only its
/// address, the CA that signs it, and the client certificate regroup
/// presents to it.
pub struct Backend<'a> {
    /// `https://host:port`.
    pub server: &'a str,
    /// The PEM CA bundle its certificate chains to (`None`: the system
    /// roots).
    pub ca_pem: Option<Vec<u8>>,
    /// Its certificate is not verified (loopback backends only).
    pub insecure: bool,
    /// regroup's client certificate and key, PEM.
    pub client_cert: Option<(Vec<u8>, Vec<u8>)>,
}

impl Upstream {
    /// The client of a fronted [`Backend`], with the settings' timeouts
    /// (h2 offered, the backend chooses).
    pub fn backend(
        b: Backend<'_>,
        limits: &regroup_config::Limits,
    ) -> Result<Upstream, UpstreamError> {
        Upstream::with_timeouts(
            &kubeconfig::Resolved {
                server: b.server.to_owned(),
                ca_pem: b.ca_pem,
                insecure: b.insecure,
                client_cert: b.client_cert,
                ..kubeconfig::Resolved::default()
            },
            false,
            limits.into(),
        )
    }
}
