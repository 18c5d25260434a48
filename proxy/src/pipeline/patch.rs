//! PATCHes of the objects a hook keeps differently in the cluster and in
//! the app's view (the app's own APIService for the front trust, a webhook
//! registration; the hook asked through [`PatchHook`], the driver's): they
//! can't always be forwarded as written. This
//! step produces what goes upstream and leaves the sending and the
//! renaming of the answer to the pipeline's one tail (`forward`).
//!
//! - A JSON Patch the amendment rewrites ([`PatchHook::rewrites_json_patch`])
//!   is applied as kube-apiserver applies any patch, but on the app's view
//!   of the object: GET the current object, show it as the app reads it
//!   (app names, [`PatchHook::json_to_app`]), apply the patch, turn the
//!   result back into the cluster's form ([`PatchHook::patched_to_cluster`]),
//!   and PUT it with the resourceVersion that was read, again from the GET
//!   on a conflict. Other JSON Patches go on renamed.
//! - A merge, strategic-merge or apply patch that reaches what the
//!   amendment keeps ([`PatchHook::patch_needs_current`]) is amended against
//!   the current object ([`PatchHook::amend_patch`]) and sent with the
//!   resourceVersion read as a precondition, read again on a conflict.
//!
//! The current object is read with the request's own credential.

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::{Method, Response, StatusCode, Uri};

use crate::upstream::ResponseBody;
use json_patch::PatchOperation;
use serde_json::Value as Json;

use super::exchange::{Exchange, Forward, Next, Outgoing, BODY_LIMIT};
use super::hook_calls::PatchHook;
use crate::body::{collect, full, Body};
use crate::hooks::json_doc;
use crate::kube::{MediaType, PatchKind, Wire};
use crate::rewrite::Context;
use crate::status::Failure;

/// kube-apiserver's limit on the operations of one JSON Patch.
const MAX_OPERATIONS: usize = 10_000;

/// Times the object is read, patched and written before a conflict is
/// returned to the app (kube-apiserver retries a patch on conflicts too).
const ATTEMPTS: usize = 5;

/// The PATCH query parameters that an update takes as well (kube-apiserver's
/// `patchToUpdateOptions`).
const UPDATE_PARAMETERS: &[&str] = &["dryRun", "fieldManager", "fieldValidation"];

/// How a patch served by an amendment starts.
pub(crate) enum Started<'a> {
    /// Forwarded as it now is (renamed): nothing to read first.
    Then(Next),
    /// A run that asks for this first.
    Asks(Box<Run<'a>>, Step),
}

/// What a patch served by an amendment wants next.
pub(crate) enum Step {
    /// Send this through the pipeline's sender and hand the answer to
    /// [`Run::answered`].
    Ask(Outgoing, Body),
    /// What goes on to the pipeline's tail.
    Then(Next),
}

/// A patch an amendment serves (`Hooks::patch`), one request upstream at a time: it
/// never sends anything itself. The driver (`forward`) sends what
/// [`Run::start`] and [`Run::answered`] ask for through the one sender and
/// hands each answer back, until the run says what goes on to the tail.
pub(crate) struct Run<'a> {
    amend: PatchHook<'a>,
    /// The caller's request as the steps before made it.
    uri: Uri,
    headers: HeaderMap,
    lent: bool,
    /// The read of the current object, sent again on a conflict.
    get: (Uri, HeaderMap),
    mode: Mode,
    state: State,
    attempt: usize,
}

/// Which of the two ways the patch is served.
enum Mode {
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

/// What the answer handed to [`Run::answered`] is the answer to.
enum State {
    Reading,
    /// The write; `may_retry`: nothing pinned the version read, so a 409
    /// may be read again and retried.
    Writing {
        may_retry: bool,
    },
}

impl<'a> Run<'a> {
    /// Reads the patch (`bytes`, the whole request body, inflated) for
    /// `amend`; `to` is the request as the steps before made it; `renamed`
    /// renames a patch that goes on in the cluster's names.
    pub(crate) fn start(
        fwd: &Forward,
        amend: PatchHook<'a>,
        x: &Exchange,
        to: Outgoing,
        bytes: Bytes,
        renamed: &dyn Fn(MediaType, Bytes) -> Result<Bytes, Failure>,
    ) -> Result<Started<'a>, Failure> {
        let Outgoing {
            uri, headers, lent, ..
        } = to;
        let media = MediaType::of(&headers);
        let bad_uri = |e: http::Error| Failure::bad_request(format!("invalid request URI: {e}"));
        let mode = if media == MediaType::Patch(PatchKind::Json) {
            let ops = parse(&bytes)?;
            if !amend.rewrites_json_patch(&ops) {
                let bytes = renamed(media, bytes)?;
                return Ok(Started::Then(patch_request(uri, headers, bytes, lent)));
            }
            let put_uri = match update_query(uri.query()) {
                Some(q) => fwd.upstream.uri(&format!("{}?{q}", x.upstream_path())),
                None => fwd.upstream.uri(x.upstream_path()),
            }
            .map_err(bad_uri)?;
            let mut put_headers = headers_without_body(&headers);
            put_headers.insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static("application/json"),
            );
            Mode::ReadModifyWrite {
                ops,
                put: (put_uri, put_headers),
            }
        } else {
            let bytes = renamed(media, bytes)?;
            let mut doc = json_doc(media, &bytes)
                .map_err(|e| Failure::bad_request(format!("the patch can't be read: {e}")))?
                .unwrap_or(Json::Null);
            if !amend.patch_needs_current(&mut doc) {
                return Ok(Started::Then(patch_request(uri, headers, bytes, lent)));
            }
            Mode::AgainstCurrent { media, doc, bytes }
        };
        // The read of the current object: only a patch that needs it.
        let get_uri = fwd.upstream.uri(x.upstream_path()).map_err(bad_uri)?;
        let mut get_headers = headers_without_body(&headers);
        get_headers.insert(header::ACCEPT, HeaderValue::from_static("application/json"));
        let run = Run {
            amend,
            uri,
            headers,
            lent,
            get: (get_uri, get_headers),
            mode,
            state: State::Reading,
            attempt: 1,
        };
        let first = run.read();
        Ok(Started::Asks(Box::new(run), first))
    }

    /// The read of the current object, with the request's own credential.
    fn read(&self) -> Step {
        Step::Ask(
            Outgoing {
                method: Method::GET,
                uri: self.get.0.clone(),
                headers: self.get.1.clone(),
                lent: self.lent,
            },
            full(Bytes::new()),
        )
    }

    /// A write of `bytes`: the PUT of a read-modify-write, else the
    /// amended PATCH.
    fn write(&mut self, bytes: Bytes, may_retry: bool) -> Step {
        self.state = State::Writing { may_retry };
        let (method, uri, headers) = match &self.mode {
            Mode::ReadModifyWrite { put, .. } => (Method::PUT, put.0.clone(), &put.1),
            Mode::AgainstCurrent { .. } => (Method::PATCH, self.uri.clone(), &self.headers),
        };
        let mut h = headers.clone();
        h.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
        Step::Ask(
            Outgoing {
                method,
                uri,
                headers: h,
                lent: self.lent,
            },
            full(bytes),
        )
    }

    /// The next step, given the upstream's answer to the last one asked.
    pub(crate) async fn answered(
        &mut self,
        fwd: &Forward,
        x: &Exchange,
        answer: Response<ResponseBody>,
    ) -> Result<Step, Failure> {
        if let State::Writing { may_retry } = self.state {
            if answer.status() == StatusCode::CONFLICT && may_retry && self.attempt < ATTEMPTS {
                tracing::debug!(
                    attempt = self.attempt,
                    path = x.caller_path(),
                    what = self.amend.noun(),
                    "the object changed while it was patched; patching again"
                );
                let _ = collect(answer.into_body(), BODY_LIMIT).await;
                self.attempt += 1;
                self.state = State::Reading;
                return Ok(self.read());
            }
            return Ok(Step::Then(Next::Answered(answer)));
        }
        match &self.mode {
            Mode::ReadModifyWrite { ops, .. } => {
                if !answer.status().is_success() {
                    // Not found, forbidden, ...: the app sees the
                    // upstream's answer, renamed as any.
                    return Ok(Step::Then(Next::Answered(answer)));
                }
                let kind = x.kind().unwrap_or_default();
                let (view, read_version) = app_view(fwd, x, answer, kind, self.amend).await?;
                let mut patched = apply(view, ops)?;
                let pinned = pin_resource_version(&mut patched, read_version.as_deref());
                let api_version = x.info.api_version().unwrap_or_default();
                let cx = Context {
                    hint: Some((api_version.as_str(), kind)),
                    addressed: None,
                };
                x.engine.value(fwd.dir, cx, &mut patched).map_err(|e| {
                    Failure::bad_request(format!("the patched object can't be renamed: {e}"))
                })?;
                self.amend
                    .patched_to_cluster(&mut patched, &x.info, x.engine.map());
                Ok(self.write(to_bytes(&patched), !pinned))
            }
            Mode::AgainstCurrent { media, doc, bytes } => {
                if answer.status() == StatusCode::NOT_FOUND
                    && *media == MediaType::Patch(PatchKind::ApplyYaml)
                {
                    // An apply may create: nothing kept to merge with.
                    let _ = collect(answer.into_body(), BODY_LIMIT).await;
                    let mut patch = doc.clone();
                    self.amend.amend_patch(&mut patch, &x.info, &Json::Null)?;
                    return Ok(Step::Then(self.patch(to_bytes(&patch))));
                }
                if !answer.status().is_success() {
                    return Ok(Step::Then(Next::Answered(answer)));
                }
                let current = read_current(self.amend, answer).await?;
                let mut patch = doc.clone();
                if !self.amend.amend_patch(&mut patch, &x.info, &current)? {
                    let bytes = bytes.clone();
                    return Ok(Step::Then(self.patch(bytes)));
                }
                let pinned =
                    pin_precondition(&mut patch, current["metadata"]["resourceVersion"].as_str());
                Ok(self.write(to_bytes(&patch), !pinned))
            }
        }
    }

    /// The caller's PATCH with `bytes`, for the tail.
    fn patch(&self, bytes: Bytes) -> Next {
        patch_request(self.uri.clone(), self.headers.clone(), bytes, self.lent)
    }
}

/// The PATCH to send, with its length.
fn patch_request(uri: Uri, mut headers: HeaderMap, bytes: Bytes, lent: bool) -> Next {
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    let method = Method::PATCH;
    Next::Send(
        Outgoing {
            method,
            uri,
            headers,
            lent,
        },
        full(bytes),
    )
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

/// The object as the app reads it (renamed, amended for the app), and the
/// resourceVersion read.
async fn app_view(
    fwd: &Forward,
    x: &Exchange,
    resp: Response<ResponseBody>,
    kind: &str,
    amend: PatchHook<'_>,
) -> Result<(Json, Option<String>), Failure> {
    let bytes = read_answer(amend, resp).await?;
    let cx = Context {
        hint: None,
        addressed: Some((x.info.group.as_str(), kind)),
    };
    let renamed = x
        .engine
        .body(fwd.dir.flip(), Wire::Json, cx, &bytes)
        .map_err(|e| unreadable(amend, e.to_string()))?;
    let mut view = as_object(amend, renamed.as_deref().unwrap_or(&bytes))?;
    amend.json_to_app(&mut view);
    let version = view["metadata"]["resourceVersion"]
        .as_str()
        .map(str::to_owned);
    Ok((view, version))
}

/// The current object, as the cluster stores it (what the amendment
/// keeps, and its resourceVersion, are all that is read).
async fn read_current(amend: PatchHook<'_>, resp: Response<ResponseBody>) -> Result<Json, Failure> {
    let bytes = read_answer(amend, resp).await?;
    as_object(amend, &bytes)
}

/// The answer to the read of the object to patch, whole (never encoded:
/// the read asked for none).
async fn read_answer(amend: PatchHook<'_>, resp: Response<ResponseBody>) -> Result<Bytes, Failure> {
    if resp.headers().contains_key(header::CONTENT_ENCODING) {
        return Err(unreadable(
            amend,
            "the API server's answer is encoded".into(),
        ));
    }
    collect(resp.into_body(), BODY_LIMIT)
        .await
        .map_err(|e| unreadable(amend, e.to_string()))
}

/// The object read, which must be a JSON object.
fn as_object(amend: PatchHook<'_>, bytes: &[u8]) -> Result<Json, Failure> {
    let doc: Json =
        serde_json::from_slice(bytes).map_err(|e| unreadable(amend, format!("not JSON: {e}")))?;
    if !doc.is_object() {
        return Err(unreadable(amend, "not an object".into()));
    }
    Ok(doc)
}

/// The object to patch could not be read: the API server's fault (502).
fn unreadable(amend: PatchHook<'_>, m: String) -> Failure {
    Failure::bad_gateway(format!("reading the {} to patch: {m}", amend.noun()))
}

#[cfg(test)]
mod tests;
