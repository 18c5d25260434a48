//! The one extension point for edits beyond renaming: an [`Amend`] looks
//! at some requests (the objects it keeps differently in the cluster and
//! in the app's view) and edits their request bodies, response bodies,
//! watch events and patches. The pipeline carries a list of them
//! ([`Amendments`]) and calls each hook once per body, in order, after the
//! engine has renamed it.
//!
//! Three implementations today: the front identity (`front_identity.rs`:
//! the aggregator's callers authenticated, the front's one hook), the front
//! trust (`front_trust/`: the app trusts regroup's front) and the webhook
//! registrations (`registrations/`: the cluster calls the app's webhooks
//! through regroup). The sidecar and the front are one driver over two
//! lists of hooks. A new one is a type implementing [`Amend`] in a folder
//! of its own here, pushed onto a stack's list in `cmd/serve/`.

pub mod front_identity;
pub mod front_trust;
pub mod registrations;

use std::sync::Arc;

use bytes::Bytes;
use http::{Method, Request};
use hyper::body::Incoming;
use json_patch::PatchOperation;
use regroup_config::{Direction, GroupMap};
use rustls::pki_types::CertificateDer;
use serde_json::Value as Json;

use crate::front::auth::Rejection;
use crate::kube::{MediaType, RequestInfo};
use crate::rewrite::framing::Framing;
use crate::rewrite::RewriteError;
use crate::status::Failure;

/// The amendments a stack applies, in order.
pub(crate) type Amendments = Vec<Arc<dyn Amend>>;

/// What one amendment does to the requests it looks at. Every body hook
/// gets bytes already renamed (towards the cluster for requests, towards
/// the app for responses) and returns `None` (or the same bytes) when it
/// changes nothing.
///
/// Every hook has a default that changes nothing, so an amendment writes
/// only the hooks it needs.
pub(crate) trait Amend: Send + Sync {
    /// What is amended, in messages and logs.
    fn noun(&self) -> &'static str {
        "object"
    }

    /// Admits the caller before anything of its request is read or
    /// forwarded (the front's authentication, [`front_identity`]), from the
    /// connection's verified client certificate chain (`peer`), leaving in
    /// its headers only the identity regroup vouches for. `Ok(true)`: this
    /// hook authenticates callers and admitted this one; `Ok(false)`: not
    /// its concern (a stack whose hooks admit no one refuses a caller that
    /// presented a certificate).
    fn admit(
        &self,
        _req: &mut Request<Incoming>,
        _peer: Option<&[CertificateDer<'static>]>,
    ) -> Result<bool, Rejection> {
        Ok(false)
    }

    /// Whether this request's objects are amended at all: the one place
    /// that decides, so every other hook may assume it.
    fn looks_at(&self, _info: &RequestInfo) -> bool {
        false
    }

    /// A request body on its way to the cluster (create, update, a patch
    /// that [`Amend::serves_patch`] does not take).
    fn request_body(
        &self,
        _info: &RequestInfo,
        _map: &GroupMap,
        _media: MediaType,
        bytes: Bytes,
    ) -> Result<Bytes, Failure> {
        Ok(bytes)
    }

    /// A JSON document on its way to the app (an object, a list, a watch
    /// event; the cluster's object of a read-modify-write): whether it
    /// changed.
    fn json_to_app(&self, _doc: &mut Json) -> bool {
        false
    }

    /// A whole protobuf response body on its way to the app.
    fn proto_body_to_app(&self, _body: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        Ok(None)
    }

    /// A protobuf watch event's content on its way to the app.
    fn proto_event_to_app(&self, _event: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        Ok(None)
    }

    /// A whole response body on its way to the app.
    fn response_body(
        &self,
        media: MediaType,
        success: bool,
        body: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        match media {
            MediaType::Json => Ok(edit_json(body, |v| self.json_to_app(v))),
            // Errors are Status objects, whatever the body.
            MediaType::Protobuf if success => self.proto_body_to_app(body),
            _ => Ok(None),
        }
    }

    /// One watch event's content on its way to the app.
    fn watch_event(&self, framing: Framing, event: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        match framing {
            Framing::Lines => Ok(edit_json(event, |v| self.json_to_app(v))),
            Framing::LengthPrefixed => self.proto_event_to_app(event),
        }
    }

    /// Whether a PATCH (`media`: its content type) is served by the patch
    /// step (`pipeline/patch.rs`) for this amendment, rather than forwarded
    /// with its body amended.
    fn serves_patch(
        &self,
        _info: &RequestInfo,
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
    fn patched_to_cluster(&self, _patched: &mut Json, _info: &RequestInfo, _map: &GroupMap) {}

    /// A merge, strategic-merge or apply patch (already in the cluster's
    /// names) amended against the `current` object in the cluster:
    /// whether it changed, or why it can't be. Only asked for the patches
    /// [`Amend::serves_patch`] takes that are not JSON Patches.
    fn amend_patch(
        &self,
        _patch: &mut Json,
        _info: &RequestInfo,
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

/// Why a hook can't amend a patch ([`Amend::amend_patch`]): answered 422
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
