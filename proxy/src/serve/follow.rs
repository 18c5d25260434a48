//! Keeps the front's request-header CA and settings in step with
//! `kube-system/extension-apiserver-authentication`, as kube-apiserver's
//! own dynamic CA controllers do: read the ConfigMap, then watch it from
//! that resourceVersion; when the watch ends, watch again; after an error
//! (a 410 Gone, a dropped connection), read it again after a pause.
//! regroup's own credentials are used; nothing is renamed.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{Map, Value as Json};

use super::body::Lines;
use super::front::auth::{parse_extension_apiserver_authentication_json, RequestHeaderConfig};
use super::front::tls::ReloadingConfig;
use super::Proxy;

const CONFIGMAP: &str =
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";
const WATCH: &str = "/api/v1/namespaces/kube-system/configmaps?watch=1\
    &fieldSelector=metadata.name%3Dextension-apiserver-authentication\
    &allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion=";
/// A ConfigMap is at most 1 MiB; an event a little more.
const MAX_EVENT: usize = 2 << 20;
/// Pauses between failed attempts: doubled from the first to the last.
const RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));

/// `kube-system/extension-apiserver-authentication`'s data, read with
/// regroup's own credentials.
pub async fn read_authentication_configmap(proxy: &Proxy) -> Result<Map<String, Json>, String> {
    let v = proxy.get_json(CONFIGMAP).await?;
    data_of(&v).map(|(d, _)| d)
}

fn data_of(obj: &Json) -> Result<(Map<String, Json>, String), String> {
    let rv = obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match obj.get("data") {
        Some(Json::Object(m)) => Ok((m.clone(), rv)),
        _ => Err("kube-system/extension-apiserver-authentication has no data".into()),
    }
}

/// What the cluster's settings update.
pub struct Follower {
    /// The front's request-header settings.
    pub auth: Arc<RwLock<RequestHeaderConfig>>,
    /// The front's TLS configuration (its client CA).
    pub tls: Arc<ReloadingConfig>,
    /// Configured allowed names, which override the cluster's.
    pub allowed: Vec<String>,
    /// The data last applied.
    pub last: Option<Map<String, Json>>,
}

impl Follower {
    /// Applies the ConfigMap's data when it changed. Invalid settings are
    /// logged and the last good ones kept.
    fn apply(&mut self, data: Map<String, Json>) {
        if self.last.as_ref() == Some(&data) {
            return;
        }
        match parse_extension_apiserver_authentication_json(&data) {
            Ok((ca, mut cfg)) => {
                if !self.allowed.is_empty() {
                    cfg.allowed_names = self.allowed.clone();
                }
                if let Err(e) = self.tls.set_client_ca_pem(ca) {
                    tracing::warn!("the cluster's request-header CA can't be used: {e}");
                    return;
                }
                *self.auth.write().unwrap_or_else(|p| p.into_inner()) = cfg;
                tracing::info!("front: request-header settings updated from the cluster");
                self.last = Some(data);
            }
            Err(e) => tracing::warn!("the cluster's request-header settings are invalid: {e}"),
        }
    }
}

/// Follows the ConfigMap until the process ends.
pub async fn follow(proxy: Arc<Proxy>, mut f: Follower) {
    let mut pause = RETRY.0;
    loop {
        let Err(e) = read_and_watch(&proxy, &mut f, &mut pause).await;
        tracing::warn!("following the cluster's request-header settings: {e}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY.1);
    }
}

/// One read, then watches from its resourceVersion for as long as they
/// succeed; returns why it stopped. A successful read resets `pause`.
async fn read_and_watch(
    proxy: &Proxy,
    f: &mut Follower,
    pause: &mut Duration,
) -> Result<std::convert::Infallible, String> {
    let (data, mut rv) = data_of(&proxy.get_json(CONFIGMAP).await?)?;
    f.apply(data);
    *pause = RETRY.0;
    loop {
        let started = tokio::time::Instant::now();
        let resp = proxy.get_upstream(&format!("{WATCH}{rv}")).await?;
        if !resp.status().is_success() {
            return Err(format!("watch: {}", resp.status()));
        }
        let mut lines = Lines::new(resp.into_body(), MAX_EVENT);
        while let Some(line) = lines.next().await.map_err(|e| format!("watch: {e}"))? {
            let ev: Json =
                serde_json::from_slice(&line).map_err(|e| format!("watch event: {e}"))?;
            match ev["type"].as_str() {
                Some("ADDED") | Some("MODIFIED") => {
                    let (data, new_rv) = data_of(&ev["object"])?;
                    f.apply(data);
                    rv = new_rv;
                }
                Some("BOOKMARK") => {
                    if let Some(r) = ev["object"]["metadata"]["resourceVersion"].as_str() {
                        rv = r.to_owned();
                    }
                }
                Some("DELETED") => {
                    tracing::warn!(
                        "kube-system/extension-apiserver-authentication was deleted; \
                         keeping the last request-header settings"
                    );
                    return Err("the ConfigMap was deleted".into());
                }
                // ERROR (410 Gone: too old) and anything unknown: read again.
                _ => {
                    let msg = ev["object"]["message"].as_str().unwrap_or("unknown event");
                    return Err(format!("watch: {msg}"));
                }
            }
        }
        // The watch ended (its timeout): watch again, but never in a tight
        // loop against a server that ends watches at once.
        tokio::time::sleep_until(started + RETRY.0).await;
    }
}
