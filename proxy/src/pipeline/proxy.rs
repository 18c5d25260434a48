//! The two stacks regroup serves, over one engine: the **sidecar** (the
//! caller is the app; requests are renamed to the cluster's names and
//! responses back) and the **front** (the caller is the cluster's
//! aggregator; the same pipeline with the direction flipped, after the
//! caller is authenticated). The steps are in this folder.

use std::convert::Infallible;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use http::{Request, Response};
use hyper::body::Incoming;
use regroup_config::Direction;
use rustls::pki_types::CertificateDer;

use crate::body::Body;
use crate::front::auth::RequestHeaderConfig;
use crate::hooks::front_identity::FrontIdentity;
use crate::hooks::front_trust::FrontTrust;
use crate::hooks::registrations::WebhookRegistration;
use crate::hooks::Amend;
use crate::kube::RequestInfo;
use crate::observe::metrics::Metrics;
use crate::pipeline;
use crate::pipeline::exchange::{BodyLimits, Forward};
use crate::pipeline::live::Live;
use crate::status::Failure;
use crate::upstream::own_client::OwnClient;
use crate::upstream::Upstream;

/// Which stack a [`Proxy`] is.
enum Stack {
    /// The pipeline over its list of hooks: the sidecar (the app's side)
    /// and the front (the aggregator's side, whose hook authenticates the
    /// caller first).
    Pipeline,
    /// Publish mode's front: the aggregator's callers authenticated as by
    /// the front, then answered by the service (`publish/`).
    Publish {
        auth: Arc<RwLock<RequestHeaderConfig>>,
        service: Arc<dyn Authenticated>,
    },
}

/// What answers an authenticated caller's request on a stack of its own
/// (publish mode's `Publisher`): given the live engine, the request, what
/// its URL addresses and who the front authenticated.
pub trait Authenticated: Send + Sync {
    /// Boxed as `Send`: the listener's future is checked for `Send` here,
    /// where the types are concrete, not through every borrow inside.
    fn answer<'a>(
        &'a self,
        engine: Arc<crate::rewrite::Engine>,
        req: Request<Incoming>,
        info: &'a RequestInfo,
        who: &'a crate::front::auth::Identity,
    ) -> std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Response<Body>, Failure>> + Send + 'a>,
    >;
}

/// One listener's stack and what it forwards to.
pub struct Proxy {
    live: Live,
    fwd: Forward,
    stack: Stack,
}

impl Proxy {
    /// A sidecar over the live engine: the caller is the app.
    pub fn sidecar(live: Live, upstream: Arc<Upstream>, pass_through_auth: bool) -> Proxy {
        Proxy {
            live,
            fwd: Forward {
                upstream,
                dir: Direction::ToCluster,
                pass_through_auth,
                amendments: Vec::new(),
                listener: "sidecar",
                forwards_identity: false,
                limits: BodyLimits::default(),
                metrics: Arc::new(Metrics::new()),
            },
            stack: Stack::Pipeline,
        }
    }

    /// The same sidecar, also making the app trust regroup's front.
    pub fn with_trust(self, trust: FrontTrust) -> Proxy {
        self.amended_by(Arc::new(trust))
    }

    /// The same sidecar, also pointing the app's fronted webhook
    /// registrations at regroup's webhook listener.
    pub fn with_registration(self, r: WebhookRegistration) -> Proxy {
        self.amended_by(Arc::new(r))
    }

    /// The same stack, also applying `amendment` (after those before).
    fn amended_by(mut self, amendment: Arc<dyn Amend>) -> Proxy {
        self.fwd.amendments.push(amendment);
        self
    }

    /// The aggregated front over the live engine: callers are the cluster's
    /// aggregator (cluster names), `backend` is the app's own aggregated
    /// server (app names).
    pub fn front(
        live: Live,
        backend: Arc<Upstream>,
        auth: Arc<RwLock<RequestHeaderConfig>>,
    ) -> Proxy {
        Proxy {
            live,
            fwd: Forward {
                upstream: backend,
                dir: Direction::ToApp,
                pass_through_auth: true,
                amendments: vec![Arc::new(FrontIdentity { auth })],
                listener: "front",
                forwards_identity: true,
                limits: BodyLimits::default(),
                metrics: Arc::new(Metrics::new()),
            },
            stack: Stack::Pipeline,
        }
    }

    /// Publish mode's front over the live engine: callers are this
    /// cluster's aggregator (its names), the backend the central cluster.
    pub fn publish(
        live: Live,
        service: Arc<dyn Authenticated>,
        backend: Arc<Upstream>,
        auth: Arc<RwLock<RequestHeaderConfig>>,
    ) -> Proxy {
        let mut p = Proxy::front(live, backend, auth.clone());
        // The publisher authenticates its callers itself (no token to
        // review), and forwards through no pipeline hooks.
        p.fwd.amendments.clear();
        p.stack = Stack::Publish { auth, service };
        p
    }

    /// The same stack with other body limits.
    pub fn with_limits(mut self, limits: BodyLimits) -> Proxy {
        self.fwd.limits = limits;
        self
    }

    /// The same stack counting into `metrics` (the process's, shared with
    /// the listeners), its upstream's tallies with it.
    pub fn with_metrics(mut self, metrics: Arc<Metrics>) -> Proxy {
        metrics.count_upstream(self.fwd.upstream.tallies().clone());
        self.fwd.metrics = metrics;
        self
    }

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
        self.handle_with_peer(req, None).await
    }

    /// Serves one request whose connection presented the verified client
    /// certificate chain `peer` (front listeners; `None`: none presented,
    /// or not a TLS listener with client certificates).
    pub async fn handle_with_peer(
        self: Arc<Self>,
        mut req: Request<Incoming>,
        peer: Option<Arc<Vec<CertificateDer<'static>>>>,
    ) -> Result<Response<Body>, Infallible> {
        let started = Instant::now();
        if let Stack::Publish { auth, service } = &self.stack {
            return Ok(self
                .published(auth, service.as_ref(), req, peer, started)
                .await);
        }
        // The hooks that admit callers, first (the front's identity).
        let admitted = match pipeline::hook_calls::admit(
            &self.fwd.amendments,
            &mut req,
            peer.as_deref().map(Vec::as_slice),
        ) {
            Ok(admitted) => admitted,
            Err(r) => return Ok(refused(&self.fwd, &req, started, &r)),
        };
        if peer.is_some() && !admitted {
            let f = Failure::unavailable("not a front listener");
            return Ok(self.fwd.responder().refused_at_access(
                req.method(),
                req.uri().path(),
                req.uri().query(),
                started,
                "not_a_front_listener",
                f,
            ));
        }
        let method = req.method().clone();
        // Shares the request's bytes: no copy of the path.
        let uri = req.uri().clone();
        let info = Arc::new(RequestInfo::parse(uri.path(), uri.query()));
        let result = pipeline::forward(&self.fwd, self.live.load(), req, info.clone()).await;
        Ok(self
            .fwd
            .responder()
            .answer(&method, uri.path(), &info, started, result))
    }

    /// A request of publish mode's front: the caller authenticated (a
    /// front-proxy certificate only: there is no token to review), no
    /// identity or credential of theirs forwarded, then published.
    async fn published(
        &self,
        auth: &RwLock<RequestHeaderConfig>,
        service: &dyn Authenticated,
        mut req: Request<Incoming>,
        peer: Option<Arc<Vec<CertificateDer<'static>>>>,
        started: Instant,
    ) -> Response<Body> {
        let cfg = auth.read().unwrap_or_else(|p| p.into_inner()).clone();
        let who = crate::front::auth::authenticate(
            peer.as_deref().map(Vec::as_slice),
            req.headers(),
            &cfg,
        );
        crate::front::auth::strip_identity_headers(req.headers_mut(), &cfg);
        // The central cluster sees regroup's credential alone: nothing of
        // the caller's may ask it to act as someone else.
        let h = req.headers_mut();
        h.remove(http::header::AUTHORIZATION);
        let asks: Vec<_> = h
            .keys()
            .filter(|k| k.as_str().starts_with("impersonate-"))
            .cloned()
            .collect();
        for k in asks {
            h.remove(k);
        }
        let who = match who {
            Ok(who) => who,
            Err(r) => return refused(&self.fwd, &req, started, &r),
        };
        let method = req.method().clone();
        let uri = req.uri().clone();
        let info = RequestInfo::parse(uri.path(), uri.query());
        let result = service.answer(self.live.load(), req, &info, &who).await;
        self.fwd
            .responder()
            .answer(&method, uri.path(), &info, started, result)
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
