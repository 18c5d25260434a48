//! JSON Patches (RFC 6902) of the app's own APIService when regroup makes
//! the cluster trust its front (see [`FrontTrust`]).
//!
//! The cluster's APIService holds regroup's serving CA in `spec.caBundle`
//! and the app's bundle in an annotation, so the app's patch can't be
//! forwarded as written: its `replace /spec/caBundle` would make the
//! aggregator distrust regroup, and its `test /spec/caBundle` would compare
//! against regroup's CA. Instead regroup does what kube-apiserver does with
//! any patch, on the app's view of the object: GET the current object, show
//! it as the app would read it (app names, the app's bundle), apply the
//! patch, turn the result back into the cluster's form, and PUT it with the
//! resourceVersion that was read, again from the GET on a conflict.
//!
//! The same read-modify-write serves JSON Patches of the app's webhook
//! registrations (`registration_patch.rs`): any [`Amend`] that shows the
//! app its own object and turns it back into the cluster's form.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Request, Response, StatusCode};
use hyper::body::Incoming;
use json_patch::PatchOperation;
use regroup_config::{Direction, GroupMap};
use serde_json::Value as Json;

use super::credentials::send_once;
use super::request_body::read;
use super::{response, Exchange, Forward, BODY_LIMIT};
use crate::kube::{MediaType, PatchKind, RequestInfo};
use crate::serve::body::{collect, full};
use crate::serve::status::Failure;
use crate::serve::trust::webhooks::WebhookRegistration;
use crate::serve::trust::FrontTrust;
use crate::upstream::Body;

/// What regroup keeps differently in the cluster and in the app's view of
/// an object it read-modify-writes for a JSON Patch.
pub(crate) trait Amend {
    /// What is patched, in messages and logs.
    fn noun(&self) -> &'static str;
    /// The cluster's object (renamed to the app's names) as the app reads it.
    fn to_app(&self, view: &mut Json);
    /// The patched object (renamed to the cluster's names) as the cluster
    /// stores it.
    fn to_cluster(&self, patched: &mut Json, x: &Exchange);
}

impl Amend for FrontTrust {
    fn noun(&self) -> &'static str {
        "APIService"
    }
    fn to_app(&self, view: &mut Json) {
        FrontTrust::to_app(self, view);
    }
    fn to_cluster(&self, patched: &mut Json, x: &Exchange) {
        FrontTrust::to_cluster(self, patched, x.engine.map(), None);
    }
}

impl Amend for WebhookRegistration {
    fn noun(&self) -> &'static str {
        "webhook registration"
    }
    fn to_app(&self, view: &mut Json) {
        WebhookRegistration::to_app(self, view);
    }
    fn to_cluster(&self, patched: &mut Json, x: &Exchange) {
        WebhookRegistration::to_cluster(self, patched, &x.info);
    }
}

/// kube-apiserver's limit on the operations of one JSON Patch.
const MAX_OPERATIONS: usize = 10_000;

/// Times the object is read, patched and written before a conflict is
/// returned to the app (kube-apiserver retries a patch on conflicts too).
const ATTEMPTS: usize = 5;

/// The PATCH query parameters that an update takes as well (kube-apiserver's
/// `patchToUpdateOptions`).
const UPDATE_PARAMETERS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];

/// True for a JSON Patch of an APIService of a renamed group, named as the
/// app names it: the APIServices whose `caBundle` regroup looks after.
pub(crate) fn applies(
    info: &RequestInfo,
    method: &Method,
    media: &str,
    map: &GroupMap,
    dir: Direction,
) -> bool {
    *method == Method::PATCH
        && MediaType::parse(Some(media)) == MediaType::Patch(PatchKind::Json)
        && info.is_api
        && info.group == "apiregistration.k8s.io"
        && info.resource.as_deref() == Some("apiservices")
        && info.subresource.is_none()
        && info
            .name
            .as_deref()
            .and_then(|n| n.split_once('.'))
            .is_some_and(|(_, group)| map.rule_for(group, dir).is_some())
}

/// The operations of a JSON Patch, or the Status kube-apiserver answers:
/// 400 for a body that is not a list of objects, 413 past its operation
/// limit, 422 for an operation it can't apply (an unknown `op`, a missing
/// or invalid `path`). Messages never quote the body.
pub(crate) fn parse(bytes: &[u8]) -> Result<Vec<PatchOperation>, Failure> {
    let doc: Json = serde_json::from_slice(bytes).map_err(|e| {
        Failure::bad_request(format!(
            "invalid JSON patch: not JSON (line {}, column {})",
            e.line(),
            e.column()
        ))
    })?;
    let ops = match doc {
        // Go reads `null` as an empty list.
        Json::Null => Vec::new(),
        Json::Array(ops) if ops.iter().all(Json::is_object) => ops,
        _ => {
            return Err(Failure::bad_request(
                "invalid JSON patch: expected a list of operations",
            ))
        }
    };
    if ops.len() > MAX_OPERATIONS {
        return Err(Failure::too_large(format!(
            "Request entity too large: The allowed maximum operations in a JSON patch is {MAX_OPERATIONS}, got {}",
            ops.len()
        )));
    }
    ops.into_iter()
        .enumerate()
        .map(|(i, op)| {
            serde_json::from_value(op).map_err(|_| {
                tracing::info!(
                    operation = i,
                    "JSON patch operation is not valid (op, path or value)"
                );
                Failure::patch_does_not_apply()
            })
        })
        .collect()
}

/// Applies `ops` to `doc`, all or nothing: a failed `test` or a path that
/// does not exist is kube-apiserver's 422, and nothing is written.
pub(super) fn apply(mut doc: Json, ops: &[PatchOperation]) -> Result<Json, Failure> {
    // The document is dropped on failure: no need for the crate's undo.
    match json_patch::patch_unsafe(&mut doc, ops) {
        Ok(()) => Ok(doc),
        Err(e) => {
            tracing::info!(
                operation = e.operation,
                path = %e.path,
                "JSON patch of the app's object does not apply: {}",
                e.kind
            );
            Err(Failure::patch_does_not_apply())
        }
    }
}

/// Sets the patched object's `metadata.resourceVersion` to the one read
/// (`current`), so the write fails rather than overwrite a change made since.
/// A patch that sets another resourceVersion itself asks for that version
/// (a precondition, as kube-apiserver honors it): kept, and `true` (a
/// conflict is then the app's answer, not a reason to try again).
pub(super) fn pin_resource_version(patched: &mut Json, current: Option<&str>) -> bool {
    let Some(meta) = patched.get_mut("metadata").and_then(Json::as_object_mut) else {
        return false;
    };
    match (meta.get("resourceVersion").and_then(Json::as_str), current) {
        (Some(asked), Some(read)) if asked != read => true,
        (_, Some(read)) => {
            meta.insert("resourceVersion".into(), Json::String(read.to_owned()));
            false
        }
        (_, None) => false,
    }
}

/// The query of the update: the PATCH's parameters that an update takes,
/// byte for byte; `None` when there are none.
pub(super) fn update_query(query: Option<&str>) -> Option<String> {
    let kept: Vec<&str> = query?
        .split('&')
        .filter(|kv| {
            let key = kv.split_once('=').map_or(*kv, |(k, _)| k);
            UPDATE_PARAMETERS.contains(&key)
        })
        .collect();
    (!kept.is_empty()).then(|| kept.join("&"))
}

/// Headers of regroup's own requests on the app's behalf: the app's
/// (credentials, impersonation, user agent) without those of its body.
fn headers_without_body(headers: &HeaderMap) -> HeaderMap {
    let mut h = headers.clone();
    for name in [
        header::CONTENT_TYPE,
        header::CONTENT_LENGTH,
        header::CONTENT_ENCODING,
        header::EXPECT,
    ] {
        h.remove(name);
    }
    h
}

/// [`applies`] to a request on its way, given the headers it forwards.
pub(crate) fn applies_to(x: &Exchange, headers: &HeaderMap, dir: Direction) -> bool {
    let media = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    applies(&x.info, &x.method, media, x.engine.map(), dir)
}

/// Serves a JSON Patch for which [`applies`] is true. `headers` are those
/// forwarded upstream; `query` the app's, as it sent it.
pub(crate) async fn serve(
    fwd: &Forward,
    trust: &FrontTrust,
    x: &Exchange,
    query: Option<&str>,
    headers: HeaderMap,
    body: Incoming,
) -> Result<Response<Body>, Failure> {
    let (bytes, _held) = read(fwd, body).await?;
    let ops = parse(&bytes)?;
    read_modify_write(fwd, trust, x, query, headers, &ops).await
}

/// Applies a JSON Patch to the app's view of the object and writes the
/// result in the cluster's form, with the resourceVersion read (again from
/// the read on a conflict).
pub(crate) async fn read_modify_write(
    fwd: &Forward,
    trust: &(dyn Amend + Sync),
    x: &Exchange,
    query: Option<&str>,
    headers: HeaderMap,
    ops: &[PatchOperation],
) -> Result<Response<Body>, Failure> {
    let kind = x.kind().unwrap_or_default();
    let api_version = x.info.api_version().unwrap_or_default();
    let bad_uri = |e: http::Error| Failure::bad_request(format!("invalid request URI: {e}"));
    let get_uri = fwd.upstream.uri(&x.upstream_path).map_err(bad_uri)?;
    let put_uri = match update_query(query) {
        Some(q) => fwd.upstream.uri(&format!("{}?{q}", x.upstream_path)),
        None => fwd.upstream.uri(&x.upstream_path),
    }
    .map_err(bad_uri)?;
    let mut get_headers = headers_without_body(&headers);
    get_headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    let mut put_headers = headers_without_body(&headers);
    put_headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );

    let mut attempt = 1;
    loop {
        let mut get = Request::get(get_uri.clone())
            .body(full(Bytes::new()))
            .expect("parts are valid");
        *get.headers_mut() = get_headers.clone();
        let current = send_once(fwd, get).await?;
        if !current.status().is_success() {
            // Not found, forbidden, ...: the app sees the upstream's
            // answer, renamed as any.
            return response::rename(fwd, x, current).await;
        }
        let (view, read_version) = app_view(fwd, x, current, kind, trust).await?;
        let mut patched = apply(view, ops)?;
        let pinned = pin_resource_version(&mut patched, read_version.as_deref());
        x.engine
            .json(fwd.dir)
            .rewrite_as(&mut patched, &api_version, kind)
            .map_err(|e| {
                Failure::bad_request(format!("the patched object can't be renamed: {e}"))
            })?;
        trust.to_cluster(&mut patched, x);
        let bytes = Bytes::from(serde_json::to_vec(&patched).expect("values serialize"));
        let mut put = Request::put(put_uri.clone())
            .body(full(bytes.clone()))
            .expect("parts are valid");
        *put.headers_mut() = put_headers.clone();
        put.headers_mut()
            .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        let written = send_once(fwd, put).await?;
        if written.status() == StatusCode::CONFLICT && !pinned && attempt < ATTEMPTS {
            tracing::debug!(
                attempt,
                path = x.caller_path,
                what = trust.noun(),
                "the object changed while it was patched; patching again"
            );
            // Read to the end, so the connection can be used again.
            let _ = collect(written.into_body(), BODY_LIMIT).await;
            attempt += 1;
            continue;
        }
        return response::rename(fwd, x, written).await;
    }
}

/// The object as the app reads it (renamed, its own bundle shown), and
/// the resourceVersion read.
async fn app_view(
    fwd: &Forward,
    x: &Exchange,
    resp: Response<Incoming>,
    kind: &str,
    trust: &(dyn Amend + Sync),
) -> Result<(Json, Option<String>), Failure> {
    let bad =
        |m: String| Failure::bad_gateway(format!("reading the {} to patch: {m}", trust.noun()));
    if resp.headers().contains_key(header::CONTENT_ENCODING) {
        return Err(bad("the API server's answer is encoded".into()));
    }
    let bytes = collect(resp.into_body(), BODY_LIMIT)
        .await
        .map_err(|e| bad(e.to_string()))?;
    let renamed = x
        .engine
        .json(fwd.dir.flip())
        .rewrite_bytes_addressed(&bytes, &x.info.group, kind)
        .map_err(|e| bad(e.to_string()))?;
    let mut view: Json = serde_json::from_slice(renamed.as_deref().unwrap_or(&bytes))
        .map_err(|e| bad(format!("not JSON: {e}")))?;
    if !view.is_object() {
        return Err(bad("not an object".into()));
    }
    trust.to_app(&mut view);
    let version = view["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_owned);
    Ok((view, version))
}

#[cfg(test)]
mod tests;
