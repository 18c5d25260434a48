//! The hooks of one request: its stack's list (`hooks/`), asked once by
//! the driver which of them look at the request. Every phase calls its
//! hooks through here, in the list's order, each on what the one before it
//! left, with the request's one context; no step walks the list itself.
//! The hook serving a patch is handed to the patch step, which asks it
//! what only it knows (`patch.rs`).

use std::sync::Arc;

use bytes::Bytes;
use http::{HeaderMap, Method, Request, Response};
use hyper::body::Incoming;
use regroup_config::{Direction, GroupMap};
use rustls::pki_types::CertificateDer;

use crate::body::Body;
use crate::front::auth::Rejection;
use crate::hooks::Ctx;
use crate::hooks::{Amend, Amendments, Route};
use crate::kube::MediaType;
use crate::rewrite::framing::Framing;
use crate::rewrite::{Engine, RewriteError};
use crate::status::Failure;

/// On arrival: admits the caller of `req` through every hook of `list`
/// (the front's identity), before anything of the request is read:
/// whether one of them authenticates callers and admitted it.
pub(crate) fn admit(
    list: &[Arc<dyn Amend>],
    ctx: &mut Ctx,
    req: &mut Request<Incoming>,
    peer: Option<&[CertificateDer<'static>]>,
) -> Result<bool, Rejection> {
    let mut admitted = false;
    for hook in list {
        admitted |= hook.admit(ctx, req, peer)?;
    }
    Ok(admitted)
}

/// Before forwarding: each hook that routes, in order, until one answers.
pub(crate) async fn route(
    list: &[Arc<dyn Amend>],
    ctx: &mut Ctx,
    engine: &Arc<Engine>,
    req: &mut Request<Incoming>,
) -> Result<Option<Response<Body>>, Failure> {
    for hook in list.iter().filter(|h| h.routes()) {
        if let Route::Answered(resp) = hook.route(ctx, engine, req).await? {
            return Ok(Some(resp));
        }
    }
    Ok(None)
}

/// The hooks one request goes through.
/// Cloned into a watch's stream: the list's `Arc`s.
#[derive(Clone, Default)]
pub(crate) struct Hooks {
    /// Those of the stack that look at this request, in order.
    looking: Amendments,
    /// Those that want the answer last.
    answering: Amendments,
    /// The stack's one that serves this request's patch, if any.
    patch: Option<Arc<dyn Amend>>,
}

impl Hooks {
    /// The hooks of `list` for a request: those that look at it, and the
    /// one that serves its patch (a PATCH whose forwarded `headers` say
    /// its media type, renamed in `dir`).
    pub(crate) fn of(
        list: &[Arc<dyn Amend>],
        ctx: &Ctx,
        method: &Method,
        headers: &HeaderMap,
        map: &GroupMap,
        dir: Direction,
    ) -> Hooks {
        if list.is_empty() {
            return Hooks::default();
        }
        let looking: Amendments = list.iter().filter(|a| a.looks_at(ctx)).cloned().collect();
        let answering = looking.iter().filter(|a| a.answers(ctx)).cloned().collect();
        let patch = if *method == Method::PATCH {
            let media = MediaType::of(headers);
            list.iter()
                .find(|a| a.serves_patch(ctx, method, media, map, dir))
                .cloned()
        } else {
            None
        };
        Hooks {
            looking,
            answering,
            patch,
        }
    }

    /// True when no hook looks at the request (its list may stream).
    pub(crate) fn is_empty(&self) -> bool {
        self.looking.is_empty()
    }

    /// The hook that serves the request's patch (`patch.rs`), if any.
    pub(crate) fn patch_server(&self) -> Option<&dyn Amend> {
        self.patch.as_deref()
    }

    /// A request body, renamed, through every hook.
    pub(crate) fn request_body(
        &self,
        ctx: &mut Ctx,
        map: &GroupMap,
        media: MediaType,
        mut bytes: Bytes,
    ) -> Result<Bytes, Failure> {
        for a in &self.looking {
            bytes = a.request_body(ctx, map, media, bytes)?;
        }
        Ok(bytes)
    }

    /// A whole response body (`renamed`, or `bytes` when renaming changed
    /// nothing) through every hook: the new body, if any changed it.
    pub(crate) fn response_body(
        &self,
        ctx: &Ctx,
        media: MediaType,
        success: bool,
        bytes: &[u8],
        mut renamed: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        for a in &self.looking {
            let body = renamed.as_deref().unwrap_or(bytes);
            let amended = a.response_body(ctx, media, success, body)?;
            renamed = amended.or(renamed);
        }
        Ok(renamed)
    }

    /// One watch event, likewise.
    pub(crate) fn watch_event(
        &self,
        ctx: &Ctx,
        framing: Framing,
        event: &[u8],
        mut renamed: Option<Vec<u8>>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        for a in &self.looking {
            let amended = a.watch_event(ctx, framing, renamed.as_deref().unwrap_or(event))?;
            renamed = amended.or(renamed);
        }
        Ok(renamed)
    }

    /// The answer, last, through every hook that wants it.
    pub(crate) async fn answered(
        &self,
        ctx: &Ctx,
        mut resp: Response<Body>,
    ) -> Result<Response<Body>, Failure> {
        for a in &self.answering {
            resp = a.answered(ctx, resp).await?;
        }
        Ok(resp)
    }
}
