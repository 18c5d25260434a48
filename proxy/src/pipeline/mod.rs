//! The request pipeline every stack shares: one driver (`forward`) that
//! calls the steps in order, each in its own file, over one exchange
//! (`exchange.rs`), and is the only caller of the hooks (`hook_calls.rs`).
//!
//! 1. `target`: the shadowed group answers 404; the path and query renamed
//!    towards the upstream.
//! 2. The head: `headers` (what is forwarded: hop-by-hop, identity and
//!    regroup's ETag tags removed) and `credentials::lend` (whose
//!    credential goes upstream), made by one closure the sender may call
//!    again to resend a bodyless read.
//! 3. `upgrade`: exec/attach/port-forward are spliced as bytes; done.
//! 4. `patch`: a patch of an object a hook (`hooks/`) keeps differently in
//!    the cluster and the app's view: read-modify-written, or amended
//!    against the current object. The step asks for one request at a time
//!    and never sends.
//! 5. `request_body`: the body read within its limits and the memory
//!    budget (gzip inflated by `gzip`, the one inflater), renamed by the
//!    engine, then amended by the hooks.
//! 6. `credentials::send`: the one call of the one sender
//!    (`upstream/sender.rs`): each request the patch step asks for, its
//!    answer handed back, then the tail's; a 401 retried once with a fresh
//!    token.
//! 7. `response`: `response_headers` renamed back, then the body by its
//!    form (`openapi`, `watch`, `list`, `proto_list`, `whole`), amended.
//!
//! Every failure is a [`Failure`]; `respond.rs` (the `Responder`) turns it
//! into a `Status`, a metric and a log line, in one place. The stacks
//! (`proxy.rs`) are this driver over a list of hooks each.

pub(crate) mod credentials;
pub(crate) mod errors;
pub(crate) mod etag;
pub(crate) mod exchange;
pub(crate) mod gzip;
pub(crate) mod headers;
pub(crate) mod hook_calls;
pub(crate) mod list;
pub mod live;
pub(crate) mod openapi;
pub(crate) mod patch;
pub(crate) mod proto_list;
pub mod proxy;
pub(crate) mod request_body;
pub(crate) mod respond;
pub(crate) mod response;
pub(crate) mod response_headers;
pub(crate) mod target;
pub(crate) mod upgrade;
pub(crate) mod watch;
pub(crate) mod whole;

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;

use crate::body::Body;
use crate::kube::RequestInfo;
use crate::rewrite::Engine;
use crate::status::{page_not_found, Failure};
pub use exchange::BodyLimits;
pub(crate) use exchange::{Exchange, Forward, Next, Outgoing};

/// The pipeline: one request (`info`: what its URL addresses), caller to
/// upstream and back.
pub(crate) async fn forward(
    fwd: &Forward,
    engine: Arc<Engine>,
    req: Request<Incoming>,
    info: Arc<RequestInfo>,
) -> Result<Response<Body>, Failure> {
    target::refuse_shared_collection_delete(fwd, &engine, &info, req.method())?;
    let Some(to) = target::resolve(fwd, &engine, &info, req.uri())? else {
        // The caller named the other side's group: it doesn't exist here.
        return Ok(page_not_found());
    };
    let (mut parts, body) = req.into_parts();
    let upgrade = headers::is_upgrade(&parts.headers);
    // The head towards the upstream: what is forwarded, and whose
    // credential. Made here, and made again the same way for the sender's
    // resend of a bodyless read (the body steps change no header of one).
    let head = |engine: &Engine, upgrade| {
        let mut out = headers::request(fwd, engine, &parts.headers, upgrade);
        let lent = credentials::lend(fwd, &parts.headers, &mut out);
        (out, lent)
    };
    let (out, lent) = head(&engine, upgrade);
    if upgrade {
        let on_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
        return upgrade::splice(fwd, parts.method, to.uri, out, body, on_upgrade).await;
    }
    // The hooks of this request, asked once; the steps call them.
    let hooks = hook_calls::Hooks::of(
        &fwd.amendments,
        &info,
        &parts.method,
        &out,
        engine.map(),
        fwd.dir,
    );
    let x = Exchange {
        engine,
        info,
        method: parts.method,
        caller_uri: parts.uri,
        renamed_path: to.path,
        hooks,
    };
    let mut to = Outgoing {
        method: x.method.clone(),
        uri: to.uri,
        headers: out,
        lent,
    };
    // The request body of a served patch is held until the patch ends.
    let mut _held = None;
    // What goes upstream: a served patch may ask for reads and writes
    // first (`run`); every other request goes on as its body step made it.
    let (mut run, mut step) = match x.hooks.patch() {
        Some(amend) => {
            let (bytes, held) = request_body::read_plain(fwd, &mut to.headers, body).await?;
            _held = Some(held);
            let renamed = |media, bytes| request_body::renamed(fwd, &x, media, bytes);
            match patch::Run::start(fwd, amend, &x, to, bytes, &renamed)? {
                patch::Started::Then(next) => (None, patch::Step::Then(next)),
                patch::Started::Asks(run, first) => (Some(run), first),
            }
        }
        None => {
            let body = request_body::towards_upstream(fwd, &x, &mut to.headers, body).await?;
            (None, patch::Step::Then(Next::Send(to, body)))
        }
    };
    // The one sender: each request the patch step asks for, its answer
    // handed back, then the request for the tail.
    let resp = loop {
        let (o, body, last) = match step {
            patch::Step::Ask(o, body) => (o, body, false),
            patch::Step::Then(Next::Send(o, body)) => (o, body, true),
            patch::Step::Then(Next::Answered(resp)) => break resp,
        };
        let remake = || head(&x.engine, false).0;
        let remake: Option<&(dyn Fn() -> http::HeaderMap + Sync)> = last.then_some(&remake);
        let (uri, headers) = (o.uri, o.headers);
        let answer = credentials::send(fwd, &o.method, uri, headers, body, o.lent, remake).await?;
        match run.as_mut().filter(|_| !last) {
            Some(run) => step = run.answered(fwd, &x, answer).await?,
            None => break answer,
        }
    };
    response::towards_caller(fwd, &x, resp).await
}
