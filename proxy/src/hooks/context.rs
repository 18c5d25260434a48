//! The context of one request: made by the stack when the request arrives,
//! owned by the driver (`pipeline/mod.rs`), handed to every phase of every hook
//! (`hooks/`). What a hook learns on the way in (who the caller is, where
//! the request goes, what it asked for) it keeps here for the way out, in
//! a slot of its own type: no hook needs a lock or a stack of its own per
//! request. The request phases get it to change (`&mut`); from the moment
//! the request is sent it is read only, shared with a watch's stream.

use std::sync::Arc;

use crate::front::auth::Identity;
use crate::kube::RequestInfo;
use crate::upstream::Upstream;

/// One request's context.
pub(crate) struct Ctx {
    /// What the request's URL addresses, as the pipeline forwards it (a
    /// hook's `route` may have changed the URL: then read again).
    pub info: Arc<RequestInfo>,
    /// The caller, when a hook that authenticates callers admitted it (the
    /// front's identity).
    pub who: Option<Identity>,
    /// Where this request goes when a hook chose (publish mode: the
    /// central cluster with its namespace's credential); else its stack's
    /// upstream.
    pub upstream: Option<Arc<Upstream>>,
    /// Each hook's own state, one value a type.
    pub slots: http::Extensions,
}

impl Ctx {
    /// The context of a request addressing `info`.
    pub(crate) fn new(info: Arc<RequestInfo>) -> Ctx {
        Ctx {
            info,
            who: None,
            upstream: None,
            slots: http::Extensions::new(),
        }
    }

    /// From here on read only (the request is sent).
    pub(crate) fn sent(self) -> SentCtx {
        SentCtx {
            own: Some(self),
            shared: None,
        }
    }

    /// The upstream this request goes to: the one a hook chose, else
    /// `stack`'s.
    pub(crate) fn upstream<'a>(&'a self, stack: &'a Arc<Upstream>) -> &'a Arc<Upstream> {
        self.upstream.as_ref().unwrap_or(stack)
    }
}

/// A context once its request is sent: read only, and put behind an `Arc`
/// only when a watch's stream shares it (an allocation every other request
/// spares).
pub(crate) struct SentCtx {
    own: Option<Ctx>,
    shared: Option<Arc<Ctx>>,
}

impl SentCtx {
    /// The context, shared from now on.
    pub(crate) fn share(&mut self) -> Arc<Ctx> {
        if let Some(c) = self.own.take() {
            self.shared = Some(Arc::new(c));
        }
        self.shared.clone().expect("a context is owned or shared")
    }
}

impl std::ops::Deref for SentCtx {
    type Target = Ctx;

    fn deref(&self) -> &Ctx {
        match (&self.own, &self.shared) {
            (Some(c), _) => c,
            (None, Some(c)) => c,
            (None, None) => unreachable!("a context is owned or shared"),
        }
    }
}
