//! A list or a watch across every remote namespace when they map to several
//! central namespaces: one request per central namespace, each with the
//! credential of a remote namespace that goes there (a credential stays
//! inside its namespaces, as docs/publish.md has its Role; one the central
//! cluster refuses, `401` or `403`, gives way to the next remote
//! namespace's), the answers merged into one, in the remote names.
//!
//! A merged list's resourceVersion is the lowest of its parts': a watch
//! from it may see again what a part already held (an informer takes a
//! repeated event in its stride), never miss what happened between the
//! parts. A merged watch passes each part's events as they come, keeps
//! no periodic bookmark (one part's would skip another's pending events
//! on a resume), sends one initial-events-end bookmark once every part
//! has sent its own (with the lowest resourceVersion), and ends when any
//! part ends, as a watch may: the client watches again.

use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::{Method, Response, StatusCode};
use http_body_util::BodyExt;
use regroup_config::Direction;
use serde_json::Value as Json;

use super::amend::Published;
use crate::body::{full, Body, Lines};
use crate::rewrite::{Context, Engine};
use crate::status::Failure;
use crate::upstream::own_client::OwnClient;

/// The longest watch event read.
const EVENT_LIMIT: usize = 16 << 20;
/// The annotation of a watch-list's last initial bookmark.
const INITIAL_EVENTS_END: &str = "k8s.io/initial-events-end";

/// A path and the central clients that may read it, in order: each is
/// tried when the ones before it were refused.
pub(crate) type Part = (Vec<OwnClient>, String);

/// Whether a part's answer says its credential may not: the next one is
/// tried.
fn refused(status: StatusCode) -> bool {
    matches!(status, StatusCode::UNAUTHORIZED | StatusCode::FORBIDDEN)
}

/// Lists every path (one per central namespace) and answers one list (or
/// Table) in the remote names and namespaces.
pub(crate) async fn list(
    engine: &Engine,
    published: &Published,
    paths: &[Part],
    accept: HeaderValue,
) -> Result<Response<Body>, Failure> {
    let mut merged: Option<Json> = None;
    let mut lowest: Option<u64> = None;
    for (clients, p) in paths {
        let mut answered = None;
        for (i, central) in clients.iter().enumerate() {
            let (status, _, body) = central
                .request(Method::GET, p, accept.clone(), None)
                .await
                .map_err(|e| {
                    Failure::unavailable(format!("listing in the central cluster: {e}"))
                })?;
            answered = Some((status, body));
            if !(refused(status) && i + 1 < clients.len()) {
                break;
            }
        }
        let Some((status, body)) = answered else {
            continue;
        };
        if !status.is_success() {
            return answer(status, engine, published, &body);
        }
        let mut part: Json = serde_json::from_slice(&body)
            .map_err(|_| Failure::bad_gateway("the central cluster's list is not JSON"))?;
        if let Some(rv) = rv_of(&part["metadata"]) {
            lowest = Some(lowest.map_or(rv, |l| l.min(rv)));
        }
        match merged.as_mut() {
            None => merged = Some(part),
            Some(m) => {
                let member = if m["kind"] == "Table" {
                    "rows"
                } else {
                    "items"
                };
                let more = part[member].as_array_mut().map(std::mem::take);
                match (m[member].as_array_mut(), more) {
                    (Some(all), Some(more)) => all.extend(more),
                    (None, Some(more)) => m[member] = Json::Array(more),
                    _ => {}
                }
            }
        }
    }
    let mut merged = merged.unwrap_or_else(|| serde_json::json!({"items": []}));
    if let Some(meta) = merged.get_mut("metadata").and_then(Json::as_object_mut) {
        // One answer, whole: no page of a part's.
        meta.remove("continue");
        meta.remove("remainingItemCount");
        if let Some(rv) = lowest {
            meta.insert("resourceVersion".into(), rv.to_string().into());
        }
    }
    let bytes = to_remote(engine, published, merged)?;
    Ok(json_response(StatusCode::OK, bytes))
}

/// Watches every path (one per central namespace) as one watch, in the
/// remote names and namespaces.
pub(crate) async fn watch(
    engine: Arc<Engine>,
    published: Arc<Published>,
    paths: &[Part],
    accept: HeaderValue,
) -> Result<Response<Body>, Failure> {
    let mut parts = Vec::new();
    for (clients, p) in paths {
        let mut answered = None;
        for (i, central) in clients.iter().enumerate() {
            let resp = central
                .get_accepting(p, accept.clone())
                .await
                .map_err(|e| {
                    Failure::unavailable(format!("watching in the central cluster: {e}"))
                })?;
            let next = refused(resp.status()) && i + 1 < clients.len();
            answered = Some(resp);
            if !next {
                break;
            }
        }
        let Some(resp) = answered else {
            continue;
        };
        if !resp.status().is_success() {
            let status = resp.status();
            let body = resp
                .into_body()
                .collect()
                .await
                .map(|c| c.to_bytes())
                .unwrap_or_default();
            return answer(status, &engine, &published, &body);
        }
        parts.push(resp.into_body());
    }
    let (tx, rx) = tokio::sync::mpsc::channel::<Option<Bytes>>(64);
    let ends = Arc::new(Mutex::new(InitialEnds {
        waiting: parts.len(),
        lowest: None,
    }));
    let mut tasks = Vec::new();
    for body in parts {
        let (tx, engine, published, ends) =
            (tx.clone(), engine.clone(), published.clone(), ends.clone());
        tasks.push(tokio::spawn(async move {
            let mut lines = Lines::new(body, EVENT_LIMIT);
            while let Ok(Some(line)) = lines.next().await {
                let Some(out) = event(&engine, &published, &ends, &line) else {
                    continue;
                };
                if tx.send(Some(out)).await.is_err() {
                    return;
                }
            }
            // This part ended: so does the merged watch.
            let _ = tx.send(None).await;
        }));
    }
    let stop = Aborting(tasks);
    let s = futures_util::stream::unfold((rx, stop), |(mut rx, stop)| async move {
        match rx.recv().await {
            Some(Some(line)) => Some((
                Ok::<_, crate::body::BoxError>(http_body::Frame::data(line)),
                (rx, stop),
            )),
            _ => None,
        }
    });
    let mut resp = Response::new(http_body_util::StreamBody::new(s).boxed());
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    Ok(resp)
}

/// The parts' initial-events-end bookmarks not yet seen, and the lowest
/// resourceVersion of those seen.
struct InitialEnds {
    waiting: usize,
    lowest: Option<u64>,
}

/// One part's event as the merged watch sends it (a line), or `None`
/// when it is not sent (a bookmark, a line that is no event).
fn event(
    engine: &Engine,
    published: &Published,
    ends: &Mutex<InitialEnds>,
    line: &[u8],
) -> Option<Bytes> {
    let mut ev: Json = serde_json::from_slice(line).ok()?;
    if ev["type"] == "BOOKMARK" {
        let meta = &ev["object"]["metadata"];
        if meta["annotations"][INITIAL_EVENTS_END] != "true" {
            return None;
        }
        let rv = rv_of(meta);
        let mut e = ends.lock().unwrap_or_else(|p| p.into_inner());
        e.waiting = e.waiting.saturating_sub(1);
        if let Some(rv) = rv {
            e.lowest = Some(e.lowest.map_or(rv, |l| l.min(rv)));
        }
        if e.waiting > 0 {
            return None;
        }
        if let Some(rv) = e.lowest {
            ev["object"]["metadata"]["resourceVersion"] = rv.to_string().into();
        }
    }
    let mut bytes = to_remote(engine, published, ev).ok()?;
    bytes.push(b'\n');
    Some(Bytes::from(bytes))
}

/// A document in the remote namespaces and names.
fn to_remote(engine: &Engine, published: &Published, mut doc: Json) -> Result<Vec<u8>, Failure> {
    published.to_remote(&mut doc);
    let cx = Context {
        hint: None,
        addressed: None,
    };
    // Responses go the other way than the front's requests.
    engine
        .value(Direction::ToCluster, cx, &mut doc)
        .map_err(|e| Failure::bad_gateway(format!("renaming the central cluster's answer: {e}")))?;
    Ok(serde_json::to_vec(&doc).expect("values serialize"))
}

/// A part's refusal as the caller's answer (a Status, mapped as any).
fn answer(
    status: StatusCode,
    engine: &Engine,
    published: &Published,
    body: &[u8],
) -> Result<Response<Body>, Failure> {
    let bytes = match serde_json::from_slice::<Json>(body) {
        Ok(doc) => to_remote(engine, published, doc)?,
        Err(_) => body.to_vec(),
    };
    Ok(json_response(status, bytes))
}

fn json_response(status: StatusCode, bytes: Vec<u8>) -> Response<Body> {
    let mut resp = Response::new(full(bytes));
    *resp.status_mut() = status;
    resp.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    resp
}

fn rv_of(meta: &Json) -> Option<u64> {
    meta["resourceVersion"].as_str()?.parse().ok()
}

/// The parts' tasks, stopped when the merged watch's body is dropped (the
/// caller went away, or a part ended).
struct Aborting(Vec<tokio::task::JoinHandle<()>>);

impl Drop for Aborting {
    fn drop(&mut self) {
        for t in &self.0 {
            t.abort();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn published() -> Published {
        Published {
            cluster: "c1".into(),
            namespaces: None,
            uid: None,
            delete: false,
            created: None,
            shown_in: None,
        }
    }

    fn engine() -> Engine {
        let catalog = Box::leak(Box::new(crate::rewrite::Catalog::new(&[])));
        Engine::new(
            regroup_config::GroupMap::new(vec![]).unwrap(),
            catalog.clone(),
        )
    }

    #[test]
    fn one_initial_end_bookmark_once_every_part_sent_its_own_at_the_lowest_version() {
        let (e, p) = (engine(), published());
        let ends = Mutex::new(InitialEnds {
            waiting: 2,
            lowest: None,
        });
        let end = |rv: &str| {
            json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": rv,
                "annotations": {INITIAL_EVENTS_END: "true"}}}})
            .to_string()
        };
        let periodic =
            json!({"type": "BOOKMARK", "object": {"metadata": {"resourceVersion": "99"}}})
                .to_string();
        assert!(event(&e, &p, &ends, periodic.as_bytes()).is_none());
        assert!(event(&e, &p, &ends, end("12").as_bytes()).is_none());
        let added = json!({"type": "ADDED", "object": {"metadata": {"name": "x", "namespace": "bar",
            "labels": {"regroup.dev/source-namespace": "foo", "regroup.dev/source-cluster": "c1"}}}})
        .to_string();
        let out = event(&e, &p, &ends, added.as_bytes()).unwrap();
        let out: Json = serde_json::from_slice(&out).unwrap();
        assert_eq!(out["object"]["metadata"]["namespace"], "foo");
        let last = event(&e, &p, &ends, end("10").as_bytes()).unwrap();
        let last: Json = serde_json::from_slice(&last).unwrap();
        assert_eq!(last["object"]["metadata"]["resourceVersion"], "10");
    }
}
