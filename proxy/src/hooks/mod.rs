//! The one extension point for edits beyond renaming: an `Amend` looks
//! at some requests (the objects it keeps differently in the cluster and
//! in the app's view) and takes part in them at fixed places of the
//! request's way, its phases, in this order: on arrival (`Amend::admit`),
//! before forwarding (`Amend::route`), the request body
//! (`Amend::request_body`) or the patch it serves (`serves_patch` and the
//! four after it), the response body or each watch event
//! (`Amend::response_body`, `Amend::watch_event`), and the answer
//! last (`Amend::answered`). Every phase gets the request's one context
//! (`Ctx`, `context.rs`): what a hook learns on the way in it
//! keeps there for the way out. The phases are named by where they sit;
//! the encodings (JSON, YAML, protobuf) are dispatched below them
//! (`to_app`).
//!
//! Four implementations: the front identity (`front_identity.rs`: the
//! aggregator's callers authenticated, on the front and in publish mode),
//! the front trust (`front_trust/`: the app trusts regroup's front), the
//! webhook registrations (`registrations/`: the cluster calls the app's
//! webhooks through regroup) and publish mode's (`publish/publisher.rs`).
//! Every stack's list is composed in `stacks.rs`.

pub mod front_identity;
pub mod front_trust;
pub mod registrations;

use std::sync::Arc;

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::{Method, Request, Response};
use hyper::body::Incoming;
use json_patch::PatchOperation;
use regroup_config::{Direction, GroupMap};
use rustls::pki_types::CertificateDer;
use serde_json::Value as Json;

use crate::body::Body;
use crate::front::auth::Rejection;
use crate::kube::MediaType;
use crate::rewrite::framing::Framing;
use crate::rewrite::{Engine, RewriteError};
use crate::status::Failure;

pub(crate) mod context;

pub(crate) use context::{Ctx, SentCtx};

/// The amendments a stack applies, in order.
pub(crate) type Amendments = Vec<Arc<dyn Amend>>;

/// What a hook's [`Amend::route`] decided.
pub(crate) enum Route {
    /// The request goes on (its URI and headers as the hook left them).
    Forward,
    /// The hook answered it: nothing is forwarded.
    Answered(Response<Body>),
}

/// What one amendment does to the requests it looks at. Every body hook
/// gets bytes already renamed (towards the upstream for requests, towards
/// the caller for responses) and returns `None` (or the same bytes) when it
/// changes nothing.
///
/// Every phase has a default that changes nothing, so an amendment writes
/// only the phases it needs.
pub(crate) trait Amend: Send + Sync {
    /// What is amended, in messages and logs.
    fn noun(&self) -> &'static str {
        "object"
    }

    /// On arrival, before anything of the request is read or forwarded:
    /// admits the caller (the front's authentication, [`front_identity`])
    /// from the connection's verified client certificate chain (`peer`),
    /// leaving in its headers only the identity regroup vouches for and
    /// the identity in `ctx.who`. `Ok(true)`: this hook authenticates
    /// callers and admitted this one; `Ok(false)`: not its concern (a stack
    /// whose hooks admit no one refuses a caller that presented a
    /// certificate).
    fn admit(
        &self,
        _ctx: &mut Ctx,
        _req: &mut Request<Incoming>,
        _peer: Option<&[CertificateDer<'static>]>,
    ) -> Result<bool, Rejection> {
        Ok(false)
    }

    /// Whether [`Amend::route`] is to be asked (most hooks never route:
    /// asked without a future made).
    fn routes(&self) -> bool {
        false
    }

    /// Before forwarding, after admission: the hook may answer the request
    /// itself, or change where it goes (its URI, `ctx.upstream`), keeping
    /// what it learned in `ctx.slots`. Asked of every hook whose
    /// [`Amend::routes`] says so, in order, until one answers.
    fn route<'a>(
        &'a self,
        _ctx: &'a mut Ctx,
        _engine: &'a Arc<Engine>,
        _req: &'a mut Request<Incoming>,
    ) -> BoxFuture<'a, Result<Route, Failure>> {
        Box::pin(std::future::ready(Ok(Route::Forward)))
    }

    /// Whether this request's objects are amended at all: the one place
    /// that decides, so every other phase may assume it.
    fn looks_at(&self, _ctx: &Ctx) -> bool {
        false
    }

    /// A request body on its way upstream (create, update, a patch that
    /// [`Amend::serves_patch`] does not take).
    fn request_body(
        &self,
        _ctx: &mut Ctx,
        _map: &GroupMap,
        _media: MediaType,
        bytes: Bytes,
    ) -> Result<Bytes, Failure> {
        Ok(bytes)
    }

    /// Whether a PATCH (`media`: its content type) is served by the patch
    /// step (`pipeline/patch.rs`) for this amendment, rather than forwarded
    /// with its body amended.
    fn serves_patch(
        &self,
        _ctx: &Ctx,
        _method: &Method,
        _media: MediaType,
        _map: &GroupMap,
        _dir: Direction,
    ) -> bool {
        false
    }

    /// Whether a JSON Patch it serves is applied to the app's view of the
    /// object and written back whole (read-modify-write), rather than
    /// forwarded renamed.
    fn rewrites_json_patch(&self, _ops: &[PatchOperation]) -> bool {
        false
    }

    /// The patched object (renamed to the cluster's names) as the cluster
    /// stores it, for a read-modify-write.
    fn patched_to_cluster(&self, _ctx: &Ctx, _patched: &mut Json, _map: &GroupMap) {}

    /// A merge, strategic-merge or apply patch (already in the cluster's
    /// names) amended against the `current` object in the cluster:
    /// whether it changed, or why it can't be. Only asked for the patches
    /// [`Amend::serves_patch`] takes that are not JSON Patches.
    fn amend_patch(
        &self,
        _ctx: &Ctx,
        _patch: &mut Json,
        _current: &Json,
    ) -> Result<bool, PatchRefused> {
        Ok(false)
    }

    /// Whether a merge, strategic-merge or apply patch (as a JSON value)
    /// reaches what this amendment keeps, so the current object must be
    /// read first.
    fn patch_needs_current(&self, _patch: &mut Json) -> bool {
        false
    }

    /// A whole response body on its way to the caller (`success`: a 2xx;
    /// errors are Status objects, whatever the body); also the object a
    /// read-modify-write read, as the app is shown it.
    fn response_body(
        &self,
        _ctx: &Ctx,
        _media: MediaType,
        _success: bool,
        _body: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        Ok(None)
    }

    /// One watch event's content on its way to the caller.
    fn watch_event(
        &self,
        _ctx: &Ctx,
        _framing: Framing,
        _event: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        Ok(None)
    }

    /// Whether [`Amend::answered`] is to be asked.
    fn answers(&self, _ctx: &Ctx) -> bool {
        false
    }

    /// The answer, last: its head and whole body in the caller's names,
    /// after every body phase; the hook may replace it.
    fn answered<'a>(
        &'a self,
        _ctx: &'a Ctx,
        resp: Response<Body>,
    ) -> BoxFuture<'a, Result<Response<Body>, Failure>> {
        Box::pin(std::future::ready(Ok(resp)))
    }
}

/// A hook that shows the objects it keeps to the app in every encoding
/// (the front trust, the webhook registrations): the encodings are
/// dispatched below the phases, by [`to_app`] and [`event_to_app`].
pub(crate) trait ShownToApp {
    /// A JSON document as the app sees it: whether it changed.
    fn json_to_app(&self, doc: &mut Json) -> bool;
    /// A whole protobuf body.
    fn proto_to_app(&self, body: &[u8]) -> Result<Option<Vec<u8>>, RewriteError>;
    /// A protobuf watch event's content.
    fn proto_event_to_app(&self, event: &[u8]) -> Result<Option<Vec<u8>>, RewriteError>;
}

/// A response body as `hook` shows it: JSON edited as a document,
/// protobuf only when `success` (errors are Status objects), other forms
/// untouched.
pub(crate) fn to_app(
    hook: &impl ShownToApp,
    media: MediaType,
    success: bool,
    body: &[u8],
) -> Result<Option<Vec<u8>>, RewriteError> {
    match media {
        MediaType::Json => Ok(edit_json(body, |d| hook.json_to_app(d))),
        MediaType::Protobuf if success => hook.proto_to_app(body),
        _ => Ok(None),
    }
}

/// A watch event as `hook` shows it, by the stream's framing.
pub(crate) fn event_to_app(
    hook: &impl ShownToApp,
    framing: Framing,
    event: &[u8],
) -> Result<Option<Vec<u8>>, RewriteError> {
    match framing {
        Framing::Lines => Ok(edit_json(event, |d| hook.json_to_app(d))),
        Framing::LengthPrefixed => hook.proto_event_to_app(event),
    }
}

/// A request or patch body as a JSON value: JSON (objects, merge and
/// strategic-merge patches) or YAML (objects, server-side apply). `None`
/// for other encodings (a JSON Patch is a list of operations).
pub(crate) fn json_doc(media: MediaType, bytes: &[u8]) -> Result<Option<Json>, DocError> {
    use crate::kube::PatchKind;
    match media {
        MediaType::Json
        | MediaType::Unspecified
        | MediaType::Patch(PatchKind::Merge)
        | MediaType::Patch(PatchKind::StrategicMerge) => serde_json::from_slice(bytes)
            .map(Some)
            .map_err(DocError::Json),
        MediaType::Yaml | MediaType::Patch(PatchKind::ApplyYaml) => {
            let text = std::str::from_utf8(bytes).map_err(|_| DocError::NotUtf8)?;
            // The parser's message may quote the body: not repeated.
            serde_saphyr::from_str(text)
                .map(Some)
                .map_err(|_| DocError::Yaml)
        }
        _ => Ok(None),
    }
}

/// Why a body could not be read as a JSON value ([`json_doc`]).
#[derive(Debug, thiserror::Error)]
pub(crate) enum DocError {
    #[error("not JSON: {0}")]
    Json(serde_json::Error),
    #[error("YAML that is not UTF-8")]
    NotUtf8,
    #[error("not valid YAML")]
    Yaml,
}

/// Why a hook can't amend a patch (`Amend::amend_patch`): answered 422
/// Invalid with this message.
#[derive(Debug, thiserror::Error)]
pub enum PatchRefused {
    /// A patch of a fronted webhook's clientConfig that sets more than its
    /// caBundle and less than all of it.
    #[error(
        "regroup fronts webhook {webhook:?}: a patch of its clientConfig may set \
         caBundle alone or the whole clientConfig (url or service), not {field:?}"
    )]
    PartialClientConfig {
        /// The webhook's key in the registration.
        webhook: String,
        /// The field set beside caBundle.
        field: String,
    },
}

/// A JSON document edited by `edit` (which says whether it changed);
/// `None` when it is not JSON or nothing changes.
pub(crate) fn edit_json(doc: &[u8], edit: impl FnOnce(&mut Json) -> bool) -> Option<Vec<u8>> {
    let mut v: Json = serde_json::from_slice(doc).ok()?;
    edit(&mut v).then(|| serde_json::to_vec(&v).expect("values serialize"))
}

/// An object's `metadata`, made when missing: `None` when the document or
/// its `metadata` is not a JSON object (a patch that can't carry one).
pub(crate) fn metadata_mut(doc: &mut Json) -> Option<&mut serde_json::Map<String, Json>> {
    doc.as_object_mut()?
        .entry("metadata")
        .or_insert_with(|| Json::Object(serde_json::Map::new()))
        .as_object_mut()
}
