//! A listener's stack serving one request: its context made, the caller
//! admitted by the hooks that admit callers, then the pipeline (`mod.rs`),
//! every answer and failure through the responder. Which stacks there are
//! and what each is made of: `stacks.rs`.

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Instant;

use http::{Request, Response};
use hyper::body::Incoming;
use rustls::pki_types::CertificateDer;

use crate::body::Body;
use crate::hooks::Ctx;
use crate::kube::RequestInfo;
use crate::observe::metrics::Metrics;
use crate::pipeline;
use crate::pipeline::exchange::Forward;
use crate::pipeline::live::Live;
use crate::status::Failure;
use crate::upstream::own_client::OwnClient;

/// One listener's stack: the pipeline over its hooks, and what it
/// forwards to. Composed in `stacks.rs`.
pub struct Proxy {
    pub(crate) live: Live,
    pub(crate) fwd: Forward,
}

impl Proxy {
    /// The stack's metrics.
    pub fn metrics(&self) -> &Arc<Metrics> {
        &self.fwd.metrics
    }

    /// Where this stack forwards, for the start-up line.
    pub fn describe_backend(&self) -> String {
        self.fwd.upstream.describe().to_owned()
    }

    /// regroup's own client of this stack's upstream.
    pub fn own_client(&self) -> OwnClient {
        OwnClient::new(self.fwd.upstream.clone())
    }

    /// Serves one request on a listener without client certificates. Every
    /// failure becomes a `Status`.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
    ) -> Result<Response<Body>, Infallible> {
        Ok(self.serve(req, None, Instant::now()).await)
    }

    /// Serves one request whose connection presented the verified client
    /// certificate chain `peer` (front listeners; `None`: none presented,
    /// or not a TLS listener with client certificates).
    pub async fn handle_with_peer(
        self: Arc<Self>,
        req: Request<Incoming>,
        peer: Option<Arc<Vec<CertificateDer<'static>>>>,
    ) -> Result<Response<Body>, Infallible> {
        Ok(self.serve(req, peer, Instant::now()).await)
    }

    /// [`Proxy::handle_with_peer`] for a request that arrived at `started`
    /// (the listener's checks read the clock once for both): what the
    /// listeners call, directly, with no `async` layer between.
    pub(crate) async fn serve(
        self: Arc<Self>,
        mut req: Request<Incoming>,
        peer: Option<Arc<Vec<CertificateDer<'static>>>>,
        started: Instant,
    ) -> Response<Body> {
        // Shares the request's bytes: no copy of the path. Only the path
        // and query are kept (what `Uri::path` reads), not the whole URI.
        let pq = req.uri().path_and_query().cloned();
        let (path, query) = pq.as_ref().map_or(("", None), |pq| (pq.path(), pq.query()));
        let info = Arc::new(RequestInfo::parse(path, query));
        let mut ctx = Ctx::new(info.clone());
        // On arrival: the hooks that admit callers (the front's identity).
        let admitted = match pipeline::hook_calls::admit(
            &self.fwd.amendments,
            &mut ctx,
            &mut req,
            peer.as_deref().map(Vec::as_slice),
        ) {
            Ok(admitted) => admitted,
            Err(r) => return refused(&self.fwd, &req, started, &r),
        };
        if peer.is_some() && !admitted {
            let f = Failure::unavailable("not a front listener");
            return self.fwd.responder().refused_at_access(
                req.method(),
                req.uri().path(),
                req.uri().query(),
                started,
                "not_a_front_listener",
                f,
            );
        }
        let method = req.method().clone();
        let result = pipeline::forward(&self.fwd, self.live.load(), req, ctx).await;
        self.fwd
            .responder()
            .answer(&method, path, &info, started, result)
    }
}

/// A caller the front's authentication refused, answered and counted.
fn refused<B>(
    fwd: &Forward,
    req: &Request<B>,
    started: Instant,
    r: &crate::front::auth::Rejection,
) -> Response<Body> {
    fwd.responder().refused(
        req.method(),
        req.uri().path(),
        started,
        r.reason(),
        r.failure(),
    )
}
