//! Keeps the front's request-header CA and settings in step with
//! `kube-system/extension-apiserver-authentication`, as kube-apiserver's
//! own dynamic CA controllers do: read the ConfigMap, then watch it from
//! that resourceVersion; when the watch ends, watch again; after an error
//! (a 410 Gone, a dropped connection), read it again after a pause.
//! regroup's own credentials are used; nothing is renamed.

use std::sync::{Arc, RwLock};
use std::time::Duration;

use serde_json::{Map, Value as Json};

use crate::body::Lines;
use crate::front::auth::{parse_extension_apiserver_authentication_json, RequestHeaderConfig};
use crate::front::tls::ReloadingConfig;
use crate::upstream::own_client::{OwnClient, OwnClientError};

/// Why following the ConfigMap stopped (it is read again after a pause).
#[derive(Debug, thiserror::Error)]
pub enum FollowError {
    /// The read or the watch request failed.
    #[error(transparent)]
    Client(#[from] OwnClientError),
    /// The ConfigMap has no `data`.
    #[error("kube-system/extension-apiserver-authentication has no data")]
    NoData,
    /// The list is empty.
    #[error("kube-system/extension-apiserver-authentication does not exist")]
    Missing,
    /// The watch was answered with an error status.
    #[error("watch: {0}")]
    WatchStatus(http::StatusCode),
    /// The watch's stream failed.
    #[error("watch: {0}")]
    WatchRead(#[source] crate::body::LinesError),
    /// A watch event is not JSON.
    #[error("watch event: {0}")]
    Event(#[source] serde_json::Error),
    /// The ConfigMap was deleted.
    #[error("the ConfigMap was deleted")]
    Deleted,
    /// An `ERROR` event or one of an unknown type (the apiserver's message).
    #[error("watch: {0}")]
    WatchEnded(String),
}

const CONFIGMAP: &str =
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";
/// Listed, not read: a list's resourceVersion is the store's current one,
/// while an object unchanged for long has one etcd compacted away, which
/// a watch from it would get `410 Gone` for, again and again.
const LIST: &str = "/api/v1/namespaces/kube-system/configmaps\
    ?fieldSelector=metadata.name%3Dextension-apiserver-authentication";
const WATCH: &str = "/api/v1/namespaces/kube-system/configmaps?watch=1\
    &fieldSelector=metadata.name%3Dextension-apiserver-authentication\
    &allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion=";
/// A ConfigMap is at most 1 MiB; an event a little more.
const MAX_EVENT: usize = 2 << 20;
/// Pauses between failed attempts: doubled from the first to the last.
const RETRY: (Duration, Duration) = (Duration::from_secs(1), Duration::from_secs(60));

/// `kube-system/extension-apiserver-authentication`'s data, read with
/// regroup's own credentials.
pub async fn read_authentication_configmap(
    client: &OwnClient,
) -> Result<Map<String, Json>, FollowError> {
    let v = client.get_json(CONFIGMAP).await?;
    data_of(&v).map(|(d, _)| d)
}

fn data_of(obj: &Json) -> Result<(Map<String, Json>, String), FollowError> {
    let rv = obj["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or_default()
        .to_owned();
    match obj.get("data") {
        Some(Json::Object(m)) => Ok((m.clone(), rv)),
        _ => Err(FollowError::NoData),
    }
}

/// The ConfigMap's data from a list of it (or the object itself), and the
/// resourceVersion to watch from: the list's.
fn listed(doc: &Json) -> Result<(Map<String, Json>, String), FollowError> {
    let Some(items) = doc.get("items") else {
        return data_of(doc);
    };
    let obj = items.get(0).ok_or(FollowError::Missing)?;
    let (data, own_rv) = data_of(obj)?;
    let rv = doc["metadata"]["resourceVersion"]
        .as_str()
        .map_or(own_rv, str::to_owned);
    Ok((data, rv))
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
pub async fn follow(client: OwnClient, mut f: Follower) {
    let mut pause = RETRY.0;
    loop {
        let Err(e) = read_and_watch(&client, &mut f, &mut pause).await;
        tracing::warn!("following the cluster's request-header settings: {e}");
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(RETRY.1);
    }
}

/// One read, then watches from its resourceVersion for as long as they
/// succeed; returns why it stopped. A successful read resets `pause`.
async fn read_and_watch(
    client: &OwnClient,
    f: &mut Follower,
    pause: &mut Duration,
) -> Result<std::convert::Infallible, FollowError> {
    let (data, mut rv) = listed(&client.get_json(LIST).await?)?;
    f.apply(data);
    *pause = RETRY.0;
    loop {
        let started = tokio::time::Instant::now();
        let resp = client.get(&format!("{WATCH}{rv}")).await?;
        if !resp.status().is_success() {
            return Err(FollowError::WatchStatus(resp.status()));
        }
        let mut lines = Lines::new(resp.into_body(), MAX_EVENT);
        while let Some(line) = lines.next().await.map_err(FollowError::WatchRead)? {
            let ev: Json = serde_json::from_slice(&line).map_err(FollowError::Event)?;
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
                    return Err(FollowError::Deleted);
                }
                // ERROR (410 Gone: too old) and anything unknown: read again.
                _ => {
                    let msg = ev["object"]["message"].as_str().unwrap_or("unknown event");
                    return Err(FollowError::WatchEnded(msg.to_owned()));
                }
            }
        }
        // The watch ended (its timeout): watch again, but never in a tight
        // loop against a server that ends watches at once.
        tokio::time::sleep_until(started + RETRY.0).await;
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_list_is_watched_from_its_own_resource_version() {
        let list = serde_json::json!({"kind": "ConfigMapList", "metadata": {"resourceVersion": "9929"},
            "items": [{"metadata": {"resourceVersion": "22"}, "data": {"k": "v"}}]});
        let (data, rv) = super::listed(&list).unwrap();
        assert_eq!((data["k"].as_str(), rv.as_str()), (Some("v"), "9929"));
        let empty = serde_json::json!({"kind": "ConfigMapList", "metadata": {"resourceVersion": "1"}, "items": []});
        assert!(super::listed(&empty).is_err());
        let obj = serde_json::json!({"metadata": {"resourceVersion": "22"}, "data": {}});
        assert_eq!(super::listed(&obj).unwrap().1, "22");
    }

    use std::sync::atomic::{AtomicUsize, Ordering};

    use bytes::Bytes;
    use futures_util::StreamExt as _;
    use http::{Request, Response};
    use http_body_util::{BodyExt, StreamBody};
    use hyper::body::Frame;
    use hyper::service::service_fn;
    use hyper_util::rt::{TokioExecutor, TokioIo};
    use serde_json::json;
    use tokio::net::TcpListener;

    use super::*;
    use crate::front::tls::{ClientCaSource, ServingSource};
    use crate::net::tls;
    use crate::upstream::{Resolved, Upstream};

    fn configmap(ca: &str, names: &str, rv: &str) -> Json {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {
            "name": "extension-apiserver-authentication", "namespace": "kube-system",
            "resourceVersion": rv},
            "data": {"requestheader-client-ca-file": ca, "requestheader-allowed-names": names}})
    }

    /// An API server whose first watch fails with 410 Gone and whose second
    /// sends a MODIFIED event, then stays open. Counts the reads.
    async fn apiserver(ca: String, reads: Arc<AtomicUsize>) -> String {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let watches = Arc::new(AtomicUsize::new(0));
        tokio::spawn(async move {
            loop {
                let (s, _) = l.accept().await.unwrap();
                let (ca, reads, watches) = (ca.clone(), reads.clone(), watches.clone());
                let svc = service_fn(move |req: Request<hyper::body::Incoming>| {
                    let (ca, reads, watches) = (ca.clone(), reads.clone(), watches.clone());
                    async move {
                        let line = |v: Json| {
                            Ok::<_, crate::upstream::BoxError>(Frame::data(Bytes::from(format!(
                                "{v}\n"
                            ))))
                        };
                        let watch = req.uri().query().is_some_and(|q| q.contains("watch=1"));
                        let (frames, open) = if watch {
                            match watches.fetch_add(1, Ordering::SeqCst) {
                                0 => (
                                    vec![line(json!({"type": "ERROR", "object": {
                                    "kind": "Status", "code": 410, "message": "too old resource version"}}))],
                                    false,
                                ),
                                _ => (
                                    vec![line(json!({"type": "MODIFIED",
                                    "object": configmap(&ca, "[\"modified\"]", "20")}))],
                                    true,
                                ),
                            }
                        } else {
                            let n = reads.fetch_add(1, Ordering::SeqCst);
                            (
                                vec![line(configmap(&ca, &format!("[\"read-{n}\"]"), "10"))],
                                false,
                            )
                        };
                        let body = futures_util::stream::iter(frames);
                        let body: crate::body::Body = if open {
                            // The second watch stays open after its event.
                            let tail = futures_util::stream::pending();
                            BodyExt::boxed(StreamBody::new(body.chain(tail)))
                        } else {
                            BodyExt::boxed(StreamBody::new(body))
                        };
                        Ok::<_, std::convert::Infallible>(Response::new(body))
                    }
                });
                tokio::spawn(async move {
                    let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                        .serve_connection(TokioIo::new(s), svc)
                        .await;
                });
            }
        });
        format!("http://{addr}")
    }

    #[tokio::test]
    async fn a_gone_watch_is_read_again_and_the_next_change_applies() {
        let id = tls::generate().unwrap();
        let ca = id.ca_pem.clone().unwrap();
        let reads = Arc::new(AtomicUsize::new(0));
        let server = apiserver(ca.clone(), reads.clone()).await;
        let up = Upstream::new(
            &Resolved {
                server,
                ..Resolved::default()
            },
            false,
        )
        .unwrap();
        let client = crate::upstream::own_client::OwnClient::new(Arc::new(up));
        let auth = Arc::new(RwLock::new(RequestHeaderConfig::default()));
        let tls = Arc::new(
            ReloadingConfig::new(ServingSource::fixed(&id), ClientCaSource::Pem(ca.into()))
                .unwrap(),
        );
        let follower = Follower {
            auth: auth.clone(),
            tls,
            allowed: vec![],
            last: None,
        };
        let task = tokio::spawn(follow(client, follower));
        let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
        let names = || auth.read().unwrap().allowed_names.clone();
        while names() != ["modified"] && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        task.abort();
        assert_eq!(names(), ["modified"]);
        // Read, watch (410), read again, watch (MODIFIED).
        assert_eq!(reads.load(Ordering::SeqCst), 2);
    }
}
