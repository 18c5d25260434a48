//! The request pipeline every stack shares: one driver (`forward`) that
//! calls the steps in order, each in its own file, over one exchange
//! (`exchange.rs`) and one context (`hooks/context.rs`: made when the request
//! arrives, handed to every phase of every hook), and is the only caller
//! of the hooks' phases (`hook_calls.rs`) but the patch's.
//!
//! 1. `hook_calls::route`: before forwarding, a hook may answer the
//!    request or change where it goes (publish mode).
//! 2. `target`: the shadowed group answers 404; the path and query renamed
//!    towards the upstream.
//! 3. The head: `headers` (what is forwarded: hop-by-hop, the caller's
//!    identity headers and regroup's ETag tags removed, in one place) and
//!    `credentials::lend` (whose credential goes upstream), made by one
//!    closure the sender may call again to resend a bodyless read.
//! 4. `upgrade`: exec/attach/port-forward are spliced as bytes; done.
//! 5. Either `patch`: a patch of an object a hook keeps differently in the
//!    cluster and the app's view, read, amended and written in one loop
//!    with one retry policy; or `request_body`: the body read within its
//!    limits and the memory budget (gzip inflated by `gzip`, the one
//!    inflater), renamed by the engine, amended by the hooks, and sent
//!    (`credentials::send`, the one sender: a 401 retried once with a fresh
//!    token).
//! 6. `response`: `response_headers` renamed back, then the body by its
//!    form (`openapi`, `watch`, `list`, `proto_list`, `whole`), amended;
//!    then the hooks' last look at the answer (`hook_calls::Hooks::answered`).
//!
//! Every failure is a [`Failure`]; `respond.rs` (the `Responder`) turns it
//! into a `Status`, a metric and a log line, in one place. The stacks are
//! composed in `stacks.rs` (above `pipeline/` and `publish/`); `proxy.rs` serves a request on one.

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
pub(crate) use crate::hooks::Ctx;
use crate::rewrite::Engine;
use crate::status::{page_not_found, Failure};
pub use exchange::BodyLimits;
pub(crate) use exchange::{Exchange, Forward, Outgoing};
use request_body::Taken;

/// The pipeline: one request (`ctx`: its context, what its URL
/// addresses), caller to upstream and back.
pub(crate) async fn forward(
    fwd: &Forward,
    engine: Arc<Engine>,
    mut req: Request<Incoming>,
    mut ctx: Ctx,
) -> Result<Response<Body>, Failure> {
    // Before forwarding: a hook may answer, or change where it goes.
    if let Some(answer) = hook_calls::route(&fwd.amendments, &mut ctx, &engine, &mut req).await? {
        return Ok(answer);
    }
    let info = ctx.info.clone();
    target::refuse_shared_collection_delete(fwd, &engine, &info, req.method())?;
    let Some(to) = target::resolve(fwd, &engine, &info, req.uri())? else {
        // The caller named the other side's group: it doesn't exist here.
        return Ok(page_not_found());
    };
    let (mut parts, body) = req.into_parts();
    let upgrade = headers::is_upgrade(&parts.headers);
    let upstream = ctx.upstream(&fwd.upstream).clone();
    // The head towards the upstream: what is forwarded, and whose
    // credential. Made here, and made again the same way for the sender's
    // resend of a bodyless read (the body steps change no header of one).
    let head =
        |engine: &Engine, upgrade| headers::head(fwd, &upstream, engine, &parts.headers, upgrade);
    let (out, lent) = head(&engine, upgrade);
    if upgrade {
        let on_upgrade = parts.extensions.remove::<hyper::upgrade::OnUpgrade>();
        return upgrade::splice(fwd, &upstream, parts.method, to.uri, out, body, on_upgrade).await;
    }
    // The hooks of this request, asked once; the steps call them.
    let hooks = hook_calls::Hooks::of(
        &fwd.amendments,
        &ctx,
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
        upstream: upstream.clone(),
    };
    let mut to = Outgoing {
        method: x.method.clone(),
        uri: to.uri,
        headers: out,
        lent,
    };
    // The sender's resend of a bodyless read makes its head again.
    let remake = || head(&x.engine, false).0;
    let remake: &(dyn Fn() -> http::HeaderMap + Sync) = &remake;
    // The one sender: the request's upstream, its failures as Statuses.
    let send = |o, body, again| credentials::send(fwd, &x.upstream, o, body, again);
    // How the patch step renames a body (the engine's, as any request's).
    let rename = |media, bytes| request_body::renamed(fwd, &x, media, bytes);
    let answer = match request_body::take(fwd, &x, &mut ctx, &mut to.headers, body).await? {
        // The main path: the sender's future awaited here, not through
        // `send` (a layer more to move).
        Taken::Body(body) => {
            let lent = to.lent;
            let sent = x
                .upstream
                .send_as(lent, credentials::request(to, body), Some(remake));
            credentials::answered(fwd, sent.await)?
        }
        // A patch a hook serves: read, amended, written, one loop; held
        // until it ends.
        Taken::Patch(bytes, _held) => {
            let hook = x.hooks.patch_server().expect("taken for a hook's patch");
            let d = patch::Driver {
                rename,
                send: |o, body| send(o, body, None),
                dir: fwd.dir,
            };
            // Boxed: its state is KBs, and inline it would size every
            // request's future, which hyper keeps in a box of that size
            // for as long as the connection lives.
            Box::pin(patch::serve(&x, &ctx, hook, to, bytes, d)).await?
        }
    };
    // The caller's header map, no longer read, for the next request's
    // head (`headers::spare_map`).
    headers::spare_map::keep(std::mem::take(&mut parts.headers));
    // From here the context is read only, shared with a watch's stream.
    let mut ctx = ctx.sent();
    let resp = response::towards_caller(fwd, &x, &mut ctx, answer).await?;
    x.hooks.answered(&ctx, resp).await
}
