//! The request pipeline both stacks share, as small layers called in
//! order, each in its own file:
//!
//! 1. `target`: the shadowed group answers 404; the path and query renamed
//!    towards the upstream.
//! 2. `headers` and `etag`: what is forwarded (hop-by-hop, identity and
//!    regroup's ETag tags removed).
//! 3. `credentials`: whose credential goes upstream.
//! 4. `upgrade`: exec/attach/port-forward are spliced as bytes; done.
//! 5. `patch`: a patch of an object an amendment (`hooks/`) keeps
//!    differently in the cluster and the app's view: read-modify-written,
//!    or amended against the current object. The step asks for one request
//!    at a time and never sends: the driver sends each through the one
//!    sender (7.) and hands the answer back; the last goes on to the tail.
//! 6. `request_body`: the body renamed by the engine, then amended.
//! 7. `credentials::send`: sent, a 401 retried once with a fresh token.
//! 8. `response`: headers and body renamed back (`openapi`, `watch`,
//!    `list`, `proto_list`, `whole`), then amended.
//!
//! Every failure is a [`Failure`], turned into a `Status` in one place
//! (`errors`). The sidecar stack is this pipeline; the front stack puts
//! `identity` (front-proxy authentication) before it.

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
    let mut out = headers::request(fwd, &engine, &parts.headers, upgrade);
    let own = credentials::lend(fwd, &parts.headers, &mut out);
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
    // The request body of a served patch is held until the patch ends.
    let mut _held = None;
    let next = match x.hooks.patch() {
        Some(amend) => {
            let method = x.method.clone();
            let (uri, headers) = (to.uri, out);
            let to = Outgoing {
                method,
                uri,
                headers,
                own,
            };
            let (bytes, held) = request_body::read(fwd, body).await?;
            _held = Some(held);
            // The patch step asks, the one sender sends, until it says
            // what goes on to the tail.
            match patch::Run::start(fwd, amend, &x, to, bytes)? {
                patch::Started::Then(next) => next,
                patch::Started::Asks(mut run, mut step) => loop {
                    match step {
                        patch::Step::Then(next) => break next,
                        patch::Step::Ask(o, body) => {
                            let (uri, headers) = (o.uri, o.headers);
                            let answer =
                                credentials::send(fwd, &o.method, uri, headers, body, o.own, None)
                                    .await?;
                            step = run.answered(fwd, &x, answer).await?;
                        }
                    }
                },
            }
        }
        None => {
            let body = request_body::rename(fwd, &x, &mut out, body).await?;
            let method = x.method.clone();
            let (uri, headers) = (to.uri, out);
            Next::Send(
                Outgoing {
                    method,
                    uri,
                    headers,
                    own,
                },
                body,
            )
        }
    };
    let resp = match next {
        Next::Send(o, body) => {
            // The head made again, by the driver, for the sender's resend
            // of a bodyless read (the body layers change no header of one).
            let remake = || {
                let mut h = headers::request(fwd, &x.engine, &parts.headers, false);
                credentials::lend(fwd, &parts.headers, &mut h);
                h
            };
            let (uri, headers) = (o.uri, o.headers);
            credentials::send(fwd, &o.method, uri, headers, body, o.own, Some(&remake)).await?
        }
        Next::Answered(resp) => resp,
    };
    response::rename(fwd, &x, resp).await
}
