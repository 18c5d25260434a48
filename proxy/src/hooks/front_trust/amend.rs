//! The front trust as an [`Amend`]: request bodies on the way to the
//! cluster, responses and watch events on the way to the app, and the JSON
//! Patches of the app's own APIService (read, patched in the app's view,
//! written back; `pipeline/patch.rs`).

use bytes::Bytes;
use http::Method;
use json_patch::PatchOperation;
use regroup_config::{Direction, Form, GroupMap};
use serde_json::Value as Json;

use super::FrontTrust;
use crate::hooks::{event_to_app, to_app, Amend, Ctx, ShownToApp};
use crate::kube::{MediaType, PatchKind, RequestInfo};
use crate::rewrite::framing::Framing;
use crate::rewrite::RewriteError;
use crate::status::Failure;

/// Requests whose objects the trust amends: the authentication ConfigMap
/// (in `kube-system`) and APIServices.
pub(crate) fn relevant(info: &RequestInfo) -> bool {
    match (info.group.as_str(), info.resource.as_deref()) {
        ("", Some("configmaps")) => info.namespace.as_deref() == Some("kube-system"),
        ("apiregistration.k8s.io", Some("apiservices")) => true,
        _ => false,
    }
}

/// True for a JSON Patch of an APIService of a renamed group, named as the
/// app names it: the APIServices whose `caBundle` regroup looks after.
/// Their `caBundle` differs in the cluster and in the app's view, so the
/// app's `replace` or `test` of it can't be forwarded as written.
pub(crate) fn applies(
    info: &RequestInfo,
    method: &Method,
    media: MediaType,
    map: &GroupMap,
    dir: Direction,
) -> bool {
    *method == Method::PATCH
        && media == MediaType::Patch(PatchKind::Json)
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

impl Amend for FrontTrust {
    fn noun(&self) -> &'static str {
        "APIService"
    }

    fn looks_at(&self, ctx: &Ctx) -> bool {
        relevant(&ctx.info)
    }

    /// JSON Patches never get here: those of the app's APIService are
    /// served by the patch step; others have no object to amend.
    fn request_body(
        &self,
        ctx: &mut Ctx,
        map: &GroupMap,
        media: MediaType,
        bytes: Bytes,
    ) -> Result<Bytes, Failure> {
        let info = &ctx.info;
        if media == MediaType::Patch(PatchKind::Json) {
            return Ok(bytes);
        }
        if media == MediaType::Protobuf {
            return Ok(self
                .proto_to_cluster(&bytes, map)
                .map_err(|e| Failure::bad_request(format!("the request body can't be read: {e}")))?
                .map(Bytes::from)
                .unwrap_or(bytes));
        }
        // A merge or apply patch names its APIService in the URL only.
        let patched = media
            .is_partial()
            .then_some(info.name.as_deref())
            .flatten()
            .map(|n| {
                map.map(Form::QualifiedName, n, Direction::ToCluster)
                    .unwrap_or_else(|| n.to_owned())
            });
        let Ok(mut v) = serde_json::from_slice::<Json>(&bytes) else {
            return Ok(bytes);
        };
        if !self.to_cluster(&mut v, map, patched.as_deref()) {
            return Ok(bytes);
        }
        Ok(Bytes::from(
            serde_json::to_vec(&v).expect("values serialize"),
        ))
    }

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

    fn serves_patch(
        &self,
        ctx: &Ctx,
        method: &Method,
        media: MediaType,
        map: &GroupMap,
        dir: Direction,
    ) -> bool {
        applies(&ctx.info, method, media, map, dir)
    }

    /// Every JSON Patch it serves: the app's `caBundle` is not the
    /// cluster's.
    fn rewrites_json_patch(&self, _ops: &[PatchOperation]) -> bool {
        true
    }

    fn patched_to_cluster(&self, _ctx: &Ctx, patched: &mut Json, map: &GroupMap) {
        self.to_cluster(patched, map, None);
    }

    // `amend_patch` and `patch_needs_current`: never asked, it serves JSON
    // Patches only (the defaults).
}

impl ShownToApp for FrontTrust {
    fn json_to_app(&self, doc: &mut Json) -> bool {
        self.to_app(doc)
    }

    fn proto_to_app(&self, body: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        FrontTrust::proto_to_app(self, body)
    }

    fn proto_event_to_app(&self, event: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        self.proto_watch_event_to_app(event)
    }
}

#[cfg(test)]
mod tests;
