//! The webhook registrations as an [`Amend`]: whole objects written by the
//! app pointed at regroup, objects read by the app shown as it wrote them,
//! and patches of a named registration served by the patch step
//! (`pipeline/patch.rs`): a JSON Patch that reaches a `clientConfig` is
//! read-modify-written, a merge, strategic-merge or apply patch that writes
//! one is amended against the current object.

use bytes::Bytes;
use http::Method;
use json_patch::PatchOperation;
use regroup_config::{Direction, GroupMap};
use serde_json::Value as Json;

use super::{client_configs_mut, relevant, WebhookRegistration};
use crate::hooks::{event_to_app, json_doc, to_app, Amend, Ctx, ShownToApp};
use crate::kube::{MediaType, PatchKind};
use crate::rewrite::framing::Framing;
use crate::rewrite::RewriteError;
use crate::status::Failure;

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

impl Amend for WebhookRegistration {
    fn noun(&self) -> &'static str {
        "webhook registration"
    }

    fn looks_at(&self, ctx: &Ctx) -> bool {
        relevant(&ctx.info)
    }

    /// A whole object (create, update) in JSON, YAML or protobuf, or a
    /// patch the patch step does not take.
    fn request_body(
        &self,
        ctx: &mut Ctx,
        _map: &GroupMap,
        media: MediaType,
        bytes: Bytes,
    ) -> Result<Bytes, Failure> {
        let info = &ctx.info;
        let unreadable = |e: &dyn std::fmt::Display| {
            Failure::bad_request(format!("the request body can't be read: {e}"))
        };
        if media == MediaType::Protobuf {
            return Ok(self
                .proto_to_cluster(&bytes, info)
                .map_err(|e| unreadable(&e))?
                .map(Bytes::from)
                .unwrap_or(bytes));
        }
        let Some(mut v) = json_doc(media, &bytes).map_err(|e| unreadable(&e))? else {
            return Ok(bytes);
        };
        if !self.to_cluster(&mut v, info) {
            return Ok(bytes);
        }
        // JSON is YAML too: a YAML body goes on as JSON.
        Ok(Bytes::from(
            serde_json::to_vec(&v).expect("values serialize"),
        ))
    }

    /// Objects read are shown as the app wrote them.
    fn response_body(
        &self,
        _ctx: &Ctx,
        media: MediaType,
        success: bool,
        body: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        to_app(self, media, success, body)
    }

    fn watch_event(
        &self,
        _ctx: &Ctx,
        framing: Framing,
        event: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        event_to_app(self, framing, event)
    }

    /// A patch of a named registration, in a form the patch step serves.
    fn serves_patch(
        &self,
        ctx: &Ctx,
        method: &Method,
        media: MediaType,
        _map: &GroupMap,
        _dir: Direction,
    ) -> bool {
        let info = &ctx.info;
        *method == Method::PATCH
            && info.is_api
            && relevant(info)
            && info.name.is_some()
            && matches!(
                media,
                MediaType::Patch(
                    PatchKind::Json
                        | PatchKind::Merge
                        | PatchKind::StrategicMerge
                        | PatchKind::ApplyYaml
                )
            )
    }

    fn rewrites_json_patch(&self, ops: &[PatchOperation]) -> bool {
        ops.iter().any(touches_client_configs)
    }

    fn patched_to_cluster(&self, ctx: &Ctx, patched: &mut Json, _map: &GroupMap) {
        self.to_cluster(patched, &ctx.info);
    }

    fn amend_patch(
        &self,
        ctx: &Ctx,
        patch: &mut Json,
        current: &Json,
    ) -> Result<bool, crate::hooks::PatchRefused> {
        WebhookRegistration::amend_patch(self, patch, &ctx.info, current)
    }

    fn patch_needs_current(&self, patch: &mut Json) -> bool {
        !client_configs_mut(patch).is_empty()
    }
}

impl ShownToApp for WebhookRegistration {
    fn json_to_app(&self, doc: &mut Json) -> bool {
        self.to_app(doc)
    }

    fn proto_to_app(&self, body: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        WebhookRegistration::proto_to_app(self, body)
    }

    fn proto_event_to_app(&self, event: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        self.proto_watch_event_to_app(event)
    }
}

#[cfg(test)]
mod tests;
