//! The hooks of one request: its stack's list (`hooks/`), asked once
//! by the driver which of them look at the request. Every phase calls its
//! hooks through here, in the list's order, each on what the one before it
//! left; no step walks the list itself, and no step calls a hook: the
//! patch a hook serves reaches it through [`PatchHook`], here too.

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Request};
use hyper::body::Incoming;
use json_patch::PatchOperation;
use regroup_config::{Direction, GroupMap};
use rustls::pki_types::CertificateDer;
use serde_json::Value as Json;

use crate::front::auth::Rejection;
use crate::hooks::{Amend, Amendments};
use crate::kube::{MediaType, RequestInfo};
use crate::rewrite::framing::Framing;
use crate::rewrite::RewriteError;
use crate::status::Failure;

/// Admits the caller of `req` through every hook of `list` (the front's
/// identity), before anything of the request is read: whether one of them
/// authenticates callers and admitted it.
pub(crate) fn admit(
    list: &[Arc<dyn Amend>],
    req: &mut Request<Incoming>,
    peer: Option<&[CertificateDer<'static>]>,
) -> Result<bool, Rejection> {
    let mut admitted = false;
    for hook in list {
        admitted |= hook.admit(req, peer)?;
    }
    Ok(admitted)
}

/// The hooks one request goes through.
/// Cloned into a watch's stream: the list's `Arc`s.
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    /// Those of the stack that look at this request, in order.
    looking: Amendments,
    /// The stack's one that serves this request's patch, if any.
    patch: Option<Arc<dyn Amend>>,
}

impl Hooks {
    /// The hooks of `list` for a request: those that look at `info`, and
    /// the one that serves its patch (a PATCH whose forwarded `headers`
    /// say its media type, renamed in `dir`).
    pub(crate) fn of(
        list: &[Arc<dyn Amend>],
        info: &RequestInfo,
        method: &Method,
        headers: &HeaderMap,
        map: &GroupMap,
        dir: Direction,
    ) -> Hooks {
        if list.is_empty() {
            return Hooks::default();
        }
        let looking = list.iter().filter(|a| a.looks_at(info)).cloned().collect();
        let patch = if *method == Method::PATCH {
            let media = MediaType::of(headers);
            list.iter()
                .find(|a| a.serves_patch(info, method, media, map, dir))
                .cloned()
        } else {
            None
        };
        Hooks { looking, patch }
    }

    /// True when no hook looks at the request (its list may stream).
    pub(crate) fn is_empty(&self) -> bool {
        self.looking.is_empty()
    }

    /// The hook that serves the request's patch (`patch.rs`), if any.
    pub(crate) fn patch(&self) -> Option<PatchHook<'_>> {
        self.patch.as_deref().map(PatchHook)
    }

    /// A request body, renamed, through every hook.
    pub(crate) fn request_body(
        &self,
        info: &RequestInfo,
        map: &GroupMap,
        media: MediaType,
        mut bytes: Bytes,
    ) -> Result<Bytes, Failure> {
        for a in &self.looking {
            bytes = a.request_body(info, map, media, bytes)?;
        }
        Ok(bytes)
    }

    /// A whole response body (`renamed`, or `bytes` when renaming changed
    /// nothing) through every hook: the new body, if any changed it.
    pub(crate) fn response_body(
        &self,
        media: MediaType,
        success: bool,
        bytes: &[u8],
        mut renamed: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        for a in &self.looking {
            let amended = a.response_body(media, success, renamed.as_deref().unwrap_or(bytes))?;
            renamed = amended.or(renamed);
        }
        Ok(renamed)
    }

    /// One watch event, likewise.
    pub(crate) fn watch_event(
        &self,
        framing: Framing,
        event: &[u8],
        mut renamed: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        for a in &self.looking {
            let amended = a.watch_event(framing, renamed.as_deref().unwrap_or(event))?;
            renamed = amended.or(renamed);
        }
        Ok(renamed)
    }
}

/// The hook that serves a request's patch, as the patch step
/// (`patch.rs`) asks it: what it keeps differently, and how a patch of it
/// is amended.
#[derive(Clone, Copy)]
pub(crate) struct PatchHook<'a>(&'a dyn Amend);

impl PatchHook<'_> {
    /// What the hook keeps, for messages ("APIService").
    pub(crate) fn noun(self) -> &'static str {
        self.0.noun()
    }

    /// Whether a JSON Patch's operations reach what the hook keeps (then
    /// it is read-modify-written).
    pub(crate) fn rewrites_json_patch(self, ops: &[PatchOperation]) -> bool {
        self.0.rewrites_json_patch(ops)
    }

    /// Whether a merge, strategic-merge or apply patch needs the current
    /// object first.
    pub(crate) fn patch_needs_current(self, patch: &mut Json) -> bool {
        self.0.patch_needs_current(patch)
    }

    /// The object read, as the app sees it.
    pub(crate) fn json_to_app(self, doc: &mut Json) -> bool {
        self.0.json_to_app(doc)
    }

    /// The patched object back in the cluster's form.
    pub(crate) fn patched_to_cluster(self, patched: &mut Json, info: &RequestInfo, map: &GroupMap) {
        self.0.patched_to_cluster(patched, info, map)
    }

    /// A patch amended against the `current` object (422 when it can't be).
    pub(crate) fn amend_patch(
        self,
        patch: &mut Json,
        info: &RequestInfo,
        current: &Json,
    ) -> Result<bool, Failure> {
        self.0
            .amend_patch(patch, info, current)
            .map_err(|e| Failure::invalid(e.to_string()))
    }
}
