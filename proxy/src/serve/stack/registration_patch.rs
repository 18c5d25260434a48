//! Patches of the app's webhook registrations (a Validating or
//! MutatingWebhookConfiguration, a CRD, named in the URL) when regroup
//! fronts webhooks ([`WebhookRegistration`]; docs/front.md, "Webhooks").
//!
//! The cluster's object holds regroup's `clientConfig`s and the app's in
//! an annotation, so a patch can't always be forwarded as written:
//!
//! - A JSON Patch whose operations reach a `clientConfig` (or what holds
//!   one, or the annotations) is applied to the app's view of the object and
//!   written back in the cluster's form, as a whole write is
//!   (`trust_patch::read_modify_write`). Other JSON Patches go on renamed.
//! - A merge, strategic-merge or apply patch that writes a `clientConfig`
//!   is amended against the current object: fronted ones pointed at
//!   regroup, the annotation the current one with this patch's changes (a
//!   strategic-merge or apply patch names only the webhooks it changes; a
//!   `caBundle` alone keeps regroup's CA in the cluster and the app's in
//!   the annotation), then sent with the resourceVersion read as a
//!   precondition, read again on a conflict.
//!
//! The current object is read with the request's own credential.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode, Uri};
use hyper::body::Incoming;
use json_patch::PatchOperation;
use serde_json::{Map, Value as Json};

use super::credentials::send;
use super::request_body::{read, renamed};
use super::trust_patch::{parse, read_modify_write};
use super::{gzip, response, Exchange, Forward, BODY_LIMIT};
use crate::kube::{MediaType, PatchKind};
use crate::serve::body::{collect, full};
use crate::serve::status::Failure;
use crate::serve::trust::hooks::registration_doc;
use crate::serve::trust::webhooks::{self, client_configs_mut, WebhookRegistration};
use crate::upstream::Body;

/// Times the object is read and the patch sent before a conflict is
/// returned to the app.
const ATTEMPTS: usize = 5;

/// True for a patch of a named registration in a form this layer serves.
pub(crate) fn applies_to(x: &Exchange, headers: &HeaderMap) -> bool {
    x.method == Method::PATCH
        && x.info.is_api
        && webhooks::relevant(&x.info)
        && x.info.name.is_some()
        && matches!(
            MediaType::of(headers),
            MediaType::Patch(
                PatchKind::Json
                    | PatchKind::Merge
                    | PatchKind::StrategicMerge
                    | PatchKind::ApplyYaml
            )
        )
}

/// True when a JSON Patch operation reaches a `clientConfig`, something
/// that holds one, or the annotations: the app's view and the cluster's
/// object differ there.
pub(crate) fn touches_client_configs(op: &PatchOperation) -> bool {
    let from = match op {
        PatchOperation::Move(m) => Some(&m.from),
        PatchOperation::Copy(c) => Some(&c.from),
        _ => None,
    };
    std::iter::once(op.path())
        .chain(from.map(|f| f.as_ref()))
        .any(|p| {
            let tokens: Vec<String> = p.tokens().map(|t| t.decoded().into_owned()).collect();
            let tokens: Vec<&str> = tokens.iter().map(String::as_str).collect();
            matches!(
                tokens.as_slice(),
                [] | ["webhooks"]
                    | ["webhooks", _]
                    | ["webhooks", _, "clientConfig", ..]
                    | ["spec"]
                    | ["spec", "conversion", ..]
                    | ["metadata"]
                    | ["metadata", "annotations", ..]
            )
        })
}

/// Serves a patch for which [`applies_to`] is true. `headers` are those
/// forwarded upstream (with the credential [`credentials::lend`] chose,
/// `own` when regroup's); `query` the app's.
///
/// [`credentials::lend`]: super::credentials::lend
#[allow(clippy::too_many_arguments)]
pub(crate) async fn serve(
    fwd: &Forward,
    r: &WebhookRegistration,
    x: &Exchange,
    uri: Uri,
    query: Option<&str>,
    mut headers: HeaderMap,
    body: Incoming,
    own: bool,
) -> Result<Response<Body>, Failure> {
    let media = MediaType::of(&headers);
    let (bytes, _held) = read(fwd, body).await?;
    if media == MediaType::Patch(PatchKind::Json) {
        let plain = inflated(fwd, &mut headers, bytes.clone())?;
        let ops = parse(&plain)?;
        if ops.iter().any(touches_client_configs) {
            return read_modify_write(fwd, r, x, query, headers, &ops).await;
        }
        let bytes = renamed(fwd, x, &mut headers, media, plain)?;
        return send_patch(fwd, x, uri, headers, bytes, own).await;
    }
    let bytes = renamed(fwd, x, &mut headers, media, bytes)?;
    let mut doc = registration_doc(media, &bytes)
        .map_err(|e| Failure::bad_request(format!("the patch can't be read: {e}")))?
        .unwrap_or(Json::Null);
    if client_configs_mut(&mut doc).is_empty() {
        return send_patch(fwd, x, uri, headers, bytes, own).await;
    }
    let mut get_headers = headers.clone();
    for name in [header::CONTENT_TYPE, header::CONTENT_LENGTH, header::EXPECT] {
        get_headers.remove(name);
    }
    get_headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    let get_uri = fwd
        .upstream
        .uri(&x.upstream_path)
        .map_err(|e| Failure::bad_request(format!("invalid request URI: {e}")))?;
    let mut attempt = 1;
    loop {
        let current = send(
            fwd,
            &Method::GET,
            get_uri.clone(),
            get_headers.clone(),
            full(Bytes::new()),
            own,
        )
        .await?;
        if current.status() == StatusCode::NOT_FOUND
            && media == MediaType::Patch(PatchKind::ApplyYaml)
        {
            // An apply may create: nothing kept to merge with.
            let _ = collect(current.into_body(), BODY_LIMIT).await;
            let mut patch = doc.clone();
            r.amend_patch(&mut patch, &x.info, &Json::Null)
                .map_err(Failure::invalid)?;
            return send_patch(fwd, x, uri, headers, to_bytes(&patch), own).await;
        }
        if !current.status().is_success() {
            return response::rename(fwd, x, current).await;
        }
        let current = read_current(current).await?;
        let mut patch = doc.clone();
        if !r
            .amend_patch(&mut patch, &x.info, &current)
            .map_err(Failure::invalid)?
        {
            return send_patch(fwd, x, uri, headers, bytes, own).await;
        }
        let pinned = pin(&mut patch, current["metadata"]["resourceVersion"].as_str());
        let written =
            send_patch_raw(fwd, uri.clone(), headers.clone(), to_bytes(&patch), own).await?;
        if written.status() == StatusCode::CONFLICT && !pinned && attempt < ATTEMPTS {
            tracing::debug!(
                attempt,
                path = x.caller_path,
                "the webhook registration changed while it was patched; patching again"
            );
            let _ = collect(written.into_body(), BODY_LIMIT).await;
            attempt += 1;
            continue;
        }
        return response::rename(fwd, x, written).await;
    }
}

/// A patch as its content type reads it: JSON (YAML's subset for apply).
fn to_bytes(patch: &Json) -> Bytes {
    Bytes::from(serde_json::to_vec(patch).expect("values serialize"))
}

/// The body without its `Content-Encoding` (gzip inflated).
fn inflated(fwd: &Forward, headers: &mut HeaderMap, bytes: Bytes) -> Result<Bytes, Failure> {
    match headers.get(header::CONTENT_ENCODING).map(|v| v.as_bytes()) {
        None => Ok(bytes),
        Some(e) if e.eq_ignore_ascii_case(b"identity") => Ok(bytes),
        Some(e) if e.eq_ignore_ascii_case(b"gzip") => {
            let limit = fwd.limits.inflated.min(fwd.limits.request);
            let out = gzip::inflate(&bytes, limit).map_err(gzip::InflateError::of_request)?;
            headers.remove(header::CONTENT_ENCODING);
            Ok(out)
        }
        Some(_) => Err(Failure::unsupported(
            "regroup can't rename a body in this Content-Encoding; send it uncompressed or gzip",
        )),
    }
}

/// The current object, as the cluster stores it (its annotation and
/// resourceVersion are all that is read).
async fn read_current(resp: Response<Incoming>) -> Result<Json, Failure> {
    let bad =
        |m: String| Failure::bad_gateway(format!("reading the webhook registration to patch: {m}"));
    if resp.headers().contains_key(header::CONTENT_ENCODING) {
        return Err(bad("the API server's answer is encoded".into()));
    }
    let bytes = collect(resp.into_body(), BODY_LIMIT)
        .await
        .map_err(|e| bad(e.to_string()))?;
    let doc: Json = serde_json::from_slice(&bytes).map_err(|e| bad(format!("not JSON: {e}")))?;
    if !doc.is_object() {
        return Err(bad("not an object".into()));
    }
    Ok(doc)
}

/// Makes the resourceVersion read a precondition of the patch, so the
/// annotation merged from it is not written over a change made since. A
/// patch that names another resourceVersion asks for that one: kept, and
/// `true` (a conflict is then the app's answer).
fn pin(patch: &mut Json, read: Option<&str>) -> bool {
    let Some(read) = read else {
        return false;
    };
    let Some(o) = patch.as_object_mut() else {
        return false;
    };
    let meta = o
        .entry("metadata")
        .or_insert_with(|| Json::Object(Map::new()));
    let Some(meta) = meta.as_object_mut() else {
        return false;
    };
    match meta.get("resourceVersion").and_then(Json::as_str) {
        Some(asked) if asked != read => true,
        _ => {
            meta.insert("resourceVersion".into(), Json::String(read.to_owned()));
            false
        }
    }
}

/// Sends the patch and renames the answer.
async fn send_patch(
    fwd: &Forward,
    x: &Exchange,
    uri: Uri,
    headers: HeaderMap,
    bytes: Bytes,
    own: bool,
) -> Result<Response<Body>, Failure> {
    let resp = send_patch_raw(fwd, uri, headers, bytes, own).await?;
    response::rename(fwd, x, resp).await
}

async fn send_patch_raw(
    fwd: &Forward,
    uri: Uri,
    mut headers: HeaderMap,
    bytes: Bytes,
    own: bool,
) -> Result<Response<Incoming>, Failure> {
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    send(fwd, &Method::PATCH, uri, headers, full(bytes), own).await
}

#[cfg(test)]
mod tests;
