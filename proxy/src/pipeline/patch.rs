//! PATCHes of the objects a hook keeps differently in the cluster and in
//! the app's view (the app's own APIService for the front trust, a webhook
//! registration): they can't always be forwarded as written. The hook that
//! serves the patch is asked what only it knows; everything else of the
//! pipeline (renaming, the one sender, the answer's way back) is the
//! driver's. One loop, one retry policy:
//!
//! - A JSON Patch the hook rewrites ([`Amend::rewrites_json_patch`]) is
//!   applied as kube-apiserver applies any patch, but on the app's view of
//!   the object: GET the current object, show it as the app reads it (the
//!   hook's [`Amend::response_body`]), apply the patch, turn the result back
//!   into the cluster's form ([`Amend::patched_to_cluster`]) and PUT it with
//!   the resourceVersion that was read. Other JSON Patches go on renamed.
//! - A merge, strategic-merge or apply patch that reaches what the hook
//!   keeps ([`Amend::patch_needs_current`]) is amended against the current
//!   object ([`Amend::amend_patch`]) and sent with the resourceVersion read
//!   as a precondition.
//!
//! Either write that meets a conflict it did not ask for is read, amended
//! and written again, up to [`ATTEMPTS`] times. The current object is read
//! with the request's own credential.

use std::future::Future;

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode, Uri};
use json_patch::PatchOperation;
use regroup_config::Direction;
use serde_json::Value as Json;

use super::exchange::{Exchange, Outgoing, BODY_LIMIT};
use crate::body::{collect, full, Body};
use crate::hooks::Ctx;
use crate::hooks::{json_doc, Amend};
use crate::kube::{MediaType, PatchKind, Wire};
use crate::rewrite::Context;
use crate::status::Failure;
use crate::upstream::ResponseBody;

/// kube-apiserver's limit on the operations of one JSON Patch.
const MAX_OPERATIONS: usize = 10_000;

/// Times the object is read, patched and written before a conflict is
/// returned to the app (kube-apiserver retries a patch on conflicts too).
const ATTEMPTS: usize = 5;

/// The PATCH query parameters that an update takes as well (kube-apiserver's
/// `patchToUpdateOptions`).
const UPDATE_PARAMETERS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];

/// Which of the ways the patch is served.
enum Plan {
    /// Forwarded as it now is (renamed): nothing to read first.
    AsIs(Bytes),
    /// A JSON Patch applied to the app's view and written back whole with
    /// a PUT (its URI and headers).
    ReadModifyWrite {
        ops: Vec<PatchOperation>,
        put: (Uri, HeaderMap),
    },
    /// A merge, strategic-merge or apply patch amended against the current
    /// object: the patch as read (`doc`) and as renamed (`bytes`).
    AgainstCurrent {
        media: MediaType,
        doc: Json,
        bytes: Bytes,
    },
}

/// What one pass of the loop writes, given the object read.
enum Write {
    /// The request to send; `may_retry`: nothing pinned the version read,
    /// so a conflict may be read again and retried.
    Send(Outgoing, Bytes, bool),
    /// The read's own answer goes to the app (not found, forbidden, ...).
    Answer(Response<ResponseBody>),
}

/// What the patch step is given of the driver's: how a body is renamed
/// towards the upstream (`rename`), the one sender (`send`), and the
/// direction requests are renamed in.
pub(crate) struct Driver<R, S> {
    pub rename: R,
    pub send: S,
    pub dir: Direction,
}

/// Serves a patch for `hook`: `to` is the request as the steps before made
/// it, `bytes` the patch (whole, plain). Returns the upstream's last
/// answer, for the driver's way back.
pub(crate) async fn serve<R, S, F>(
    x: &Exchange,
    ctx: &Ctx,
    hook: &dyn Amend,
    to: Outgoing,
    bytes: Bytes,
    d: Driver<R, S>,
) -> Result<Response<ResponseBody>, Failure>
where
    R: Fn(MediaType, Bytes) -> Result<Bytes, Failure>,
    S: Fn(Outgoing, Body) -> F,
    F: Future<Output = Result<Response<ResponseBody>, Failure>>,
{
    let media = MediaType::of(&to.headers);
    let plan = plan(x, hook, &to, media, bytes, &d.rename)?;
    if let Plan::AsIs(bytes) = plan {
        let (o, b) = with_body(to, Method::PATCH, bytes);
        return (d.send)(o, b).await;
    }
    let get = read_of(x, &to)?;
    let mut attempt = 1;
    loop {
        let read = (d.send)(get.clone_outgoing(), full(Bytes::new())).await?;
        let (o, bytes, may_retry) = match write(x, ctx, hook, &plan, &to, read, d.dir).await? {
            Write::Send(o, bytes, may_retry) => (o, bytes, may_retry),
            Write::Answer(answer) => return Ok(answer),
        };
        let answer = (d.send)(o, full(bytes)).await?;
        if answer.status() != StatusCode::CONFLICT || !may_retry || attempt >= ATTEMPTS {
            return Ok(answer);
        }
        tracing::debug!(
            attempt,
            path = x.caller_path(),
            what = hook.noun(),
            "the object changed while it was patched; patching again"
        );
        let _ = collect(answer.into_body(), BODY_LIMIT).await;
        attempt += 1;
    }
}

/// How the patch (`bytes`, the whole body, inflated) is served.
fn plan(
    x: &Exchange,
    hook: &dyn Amend,
    to: &Outgoing,
    media: MediaType,
    bytes: Bytes,
    rename: &dyn Fn(MediaType, Bytes) -> Result<Bytes, Failure>,
) -> Result<Plan, Failure> {
    let renamed = |bytes| rename(media, bytes);
    if media == MediaType::Patch(PatchKind::Json) {
        let ops = parse(&bytes)?;
        if !hook.rewrites_json_patch(&ops) {
            return renamed(bytes).map(Plan::AsIs);
        }
        let put_uri = match update_query(to.uri.query()) {
            Some(q) => x.upstream.uri(&format!("{}?{q}", x.upstream_path())),
            None => x.upstream.uri(x.upstream_path()),
        }
        .map_err(bad_uri)?;
        let mut put_headers = headers_without_body(&to.headers);
        put_headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        return Ok(Plan::ReadModifyWrite {
            ops,
            put: (put_uri, put_headers),
        });
    }
    let bytes = renamed(bytes)?;
    let mut doc = json_doc(media, &bytes)
        .map_err(|e| Failure::bad_request(format!("the patch can't be read: {e}")))?
        .unwrap_or(Json::Null);
    if !hook.patch_needs_current(&mut doc) {
        return Ok(Plan::AsIs(bytes));
    }
    Ok(Plan::AgainstCurrent { media, doc, bytes })
}

/// The read of the current object, with the request's own credential.
fn read_of(x: &Exchange, to: &Outgoing) -> Result<Outgoing, Failure> {
    let uri = x.upstream.uri(x.upstream_path()).map_err(bad_uri)?;
    let mut headers = headers_without_body(&to.headers);
    headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
    Ok(Outgoing {
        method: Method::GET,
        uri,
        headers,
        lent: to.lent,
    })
}

/// What to write, given the answer to the read of the current object.
async fn write(
    x: &Exchange,
    ctx: &Ctx,
    hook: &dyn Amend,
    plan: &Plan,
    to: &Outgoing,
    read: Response<ResponseBody>,
    dir: Direction,
) -> Result<Write, Failure> {
    let status = read.status();
    match plan {
        Plan::AsIs(_) => unreachable!("a patch as is reads nothing"),
        Plan::ReadModifyWrite { ops, put } => {
            if !status.is_success() {
                // Not found, forbidden, ...: the app sees the upstream's
                // answer, renamed as any.
                return Ok(Write::Answer(read));
            }
            let kind = x.kind().unwrap_or_default();
            let current = read_object(hook, read).await?;
            let (view, read_version) = app_view(x, ctx, hook, kind, &current, dir)?;
            let mut patched = apply(view, ops)?;
            let pinned = pin_resource_version(&mut patched, read_version.as_deref());
            let api_version = x.info.api_version().unwrap_or_default();
            let cx = Context {
                hint: Some((api_version.as_str(), kind)),
                addressed: None,
            };
            x.engine.value(dir, cx, &mut patched).map_err(|e| {
                Failure::bad_request(format!("the patched object can't be renamed: {e}"))
            })?;
            hook.patched_to_cluster(ctx, &mut patched, x.engine.map());
            let o = Outgoing {
                method: Method::PUT,
                uri: put.0.clone(),
                headers: put.1.clone(),
                lent: to.lent,
            };
            Ok(Write::Send(o, to_bytes(&patched), !pinned))
        }
        Plan::AgainstCurrent { media, doc, bytes } => {
            let current = if status == StatusCode::NOT_FOUND
                && *media == MediaType::Patch(PatchKind::ApplyYaml)
            {
                // An apply may create: nothing kept to merge with.
                let _ = collect(read.into_body(), BODY_LIMIT).await;
                Json::Null
            } else if status.is_success() {
                as_object(hook, &read_object(hook, read).await?)?
            } else {
                return Ok(Write::Answer(read));
            };
            let mut patch = doc.clone();
            let amend = |e: crate::hooks::PatchRefused| Failure::invalid(e.to_string());
            let changed = hook.amend_patch(ctx, &mut patch, &current).map_err(amend)?;
            let (body, may_retry) = if current.is_null() {
                (to_bytes(&patch), false)
            } else if !changed {
                (bytes.clone(), false)
            } else {
                let read = current["metadata"]["resourceVersion"].as_str();
                let pinned = pin_precondition(&mut patch, read);
                (to_bytes(&patch), !pinned)
            };
            let (o, body) = with_body_bytes(to, body);
            Ok(Write::Send(o, body, may_retry))
        }
    }
}

/// The caller's request with `bytes` as its body and `method`.
fn with_body(mut to: Outgoing, method: Method, bytes: Bytes) -> (Outgoing, Body) {
    to.method = method;
    to.headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    (to, full(bytes))
}

/// The caller's PATCH again, with `bytes` and their length.
fn with_body_bytes(to: &Outgoing, bytes: Bytes) -> (Outgoing, Bytes) {
    let mut headers = to.headers.clone();
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    let o = Outgoing {
        method: Method::PATCH,
        uri: to.uri.clone(),
        headers,
        lent: to.lent,
    };
    (o, bytes)
}

impl Outgoing {
    /// The same request again (the read, on each pass).
    fn clone_outgoing(&self) -> Outgoing {
        Outgoing {
            method: self.method.clone(),
            uri: self.uri.clone(),
            headers: self.headers.clone(),
            lent: self.lent,
        }
    }
}

fn bad_uri(e: http::Error) -> Failure {
    Failure::bad_request(format!("invalid request URI: {e}"))
}

/// A patch as its content type reads it: JSON (YAML's subset for apply).
fn to_bytes(patch: &Json) -> Bytes {
    Bytes::from(serde_json::to_vec(patch).expect("values serialize"))
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
fn apply(mut doc: Json, ops: &[PatchOperation]) -> Result<Json, Failure> {
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
fn pin_resource_version(patched: &mut Json, current: Option<&str>) -> bool {
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

/// Makes the resourceVersion read a precondition of a merge, strategic-
/// merge or apply patch, so what was merged from the current object is not
/// written over a change made since. A patch that names another
/// resourceVersion asks for that one: kept, and `true` (a conflict is then
/// the app's answer).
fn pin_precondition(patch: &mut Json, read: Option<&str>) -> bool {
    let Some(read) = read else {
        return false;
    };
    let Some(meta) = crate::hooks::metadata_mut(patch) else {
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

/// The query of the update: the PATCH's parameters that an update takes,
/// byte for byte; `None` when there are none.
fn update_query(query: Option<&str>) -> Option<String> {
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

/// The object as the app reads it (renamed, then shown by the hook as
/// any answer), and the resourceVersion read.
fn app_view(
    x: &Exchange,
    ctx: &Ctx,
    hook: &dyn Amend,
    kind: &str,
    bytes: &[u8],
    dir: Direction,
) -> Result<(Json, Option<String>), Failure> {
    let cx = Context {
        hint: None,
        addressed: Some((x.info.group.as_str(), kind)),
    };
    let renamed = x
        .engine
        .body(dir.flip(), Wire::Json, cx, bytes)
        .map_err(|e| unreadable(hook, e.to_string()))?;
    let renamed = renamed.as_deref().unwrap_or(bytes);
    let shown = hook
        .response_body(ctx, MediaType::Json, true, renamed)
        .map_err(|e| unreadable(hook, e.to_string()))?;
    let view = as_object(hook, shown.as_deref().unwrap_or(renamed))?;
    let version = view["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_owned);
    Ok((view, version))
}

/// The answer to the read of the object to patch, whole (never encoded:
/// the read asked for none).
async fn read_object(hook: &dyn Amend, resp: Response<ResponseBody>) -> Result<Bytes, Failure> {
    if resp.headers().contains_key(header::CONTENT_ENCODING) {
        return Err(unreadable(
            hook,
            "the API server's answer is encoded".into(),
        ));
    }
    collect(resp.into_body(), BODY_LIMIT)
        .await
        .map_err(|e| unreadable(hook, e.to_string()))
}

/// The object read, which must be a JSON object.
fn as_object(hook: &dyn Amend, bytes: &[u8]) -> Result<Json, Failure> {
    let doc: Json =
        serde_json::from_slice(bytes).map_err(|e| unreadable(hook, format!("not JSON: {e}")))?;
    if !doc.is_object() {
        return Err(unreadable(hook, "not an object".into()));
    }
    Ok(doc)
}

/// The object to patch could not be read: the API server's fault (502).
fn unreadable(hook: &dyn Amend, m: String) -> Failure {
    Failure::bad_gateway(format!("reading the {} to patch: {m}", hook.noun()))
}

#[cfg(test)]
mod tests;
