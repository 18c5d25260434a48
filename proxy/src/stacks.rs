//! Every stack regroup serves, composed here and nowhere else: one
//! pipeline (`mod.rs`) over a list of hooks (`hooks/`) and where it
//! forwards. Read top to bottom:
//!
//! - **sidecar**: the caller is the app; requests renamed to the cluster's
//!   names, answers back. Hooks: the front trust (the app trusts regroup's
//!   front) and the webhook registrations (the cluster calls the app's
//!   webhooks through regroup), each when configured.
//! - **front**: the caller is the cluster's aggregator, the upstream the
//!   app's aggregated server; the direction flipped. Hook: the front
//!   identity, which authenticates the caller and forwards who it is.
//! - **publish**: the caller is the remote cluster's aggregator, the
//!   upstream the central cluster. Hooks: the front identity, which keeps
//!   who the caller is in the request's context and forwards nothing of
//!   theirs, then the publisher (`publish/publisher.rs`). Made once.
//!
//! The webhook listener is not a pipeline: kube-apiserver's reviews are
//! renamed whole (`webhook/`).

use std::sync::{Arc, RwLock};

use regroup_config::Direction;

use crate::front::auth::RequestHeaderConfig;
use crate::hooks::front_identity::FrontIdentity;
use crate::hooks::front_trust::FrontTrust;
use crate::hooks::registrations::WebhookRegistration;
use crate::hooks::Amend;
use crate::observe::metrics::Metrics;
use crate::pipeline::exchange::{BodyLimits, Forward};
use crate::pipeline::live::Live;
use crate::pipeline::proxy::Proxy;
use crate::publish::publisher::Publisher;
use crate::upstream::Upstream;

impl Proxy {
    /// A sidecar over the live engine: the caller is the app.
    pub fn sidecar(live: Live, upstream: Arc<Upstream>, pass_through_auth: bool) -> Proxy {
        Proxy {
            live,
            fwd: Forward {
                upstream,
                dir: Direction::ToCluster,
                pass_through_auth,
                // The app's own impersonation goes on with its own token.
                forwards_impersonation: true,
                amendments: Vec::new(),
                listener: "sidecar",
                forwards_identity: false,
                limits: BodyLimits::default(),
                metrics: Arc::new(Metrics::new()),
            },
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

    /// The sidecar with what is configured of its hooks, in their order:
    /// the front trust, then the webhook registrations.
    pub fn sidecar_with(
        live: Live,
        upstream: Arc<Upstream>,
        pass_through_auth: bool,
        trust: Option<FrontTrust>,
        registration: Option<WebhookRegistration>,
    ) -> Proxy {
        let mut p = Proxy::sidecar(live, upstream, pass_through_auth);
        if let Some(t) = trust {
            p = p.with_trust(t);
        }
        if let Some(r) = registration {
            p = p.with_registration(r);
        }
        p
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
                forwards_impersonation: true,
                amendments: vec![Arc::new(FrontIdentity {
                    auth,
                    forward: true,
                })],
                listener: "front",
                forwards_identity: true,
                limits: BodyLimits::default(),
                metrics: Arc::new(Metrics::new()),
            },
        }
    }

    /// Publish mode's front over the live engine: callers are this
    /// cluster's aggregator (its names), the upstream the central cluster
    /// (`publisher`'s). Nothing of the caller's goes there: no identity
    /// header, no `Authorization`, no `Impersonate-*`.
    pub fn publish(
        live: Live,
        publisher: Arc<Publisher>,
        auth: Arc<RwLock<RequestHeaderConfig>>,
    ) -> Proxy {
        let identity = FrontIdentity {
            auth,
            forward: false,
        };
        let hooks: Vec<Arc<dyn Amend>> = vec![Arc::new(identity), publisher.clone()];
        Proxy {
            live,
            fwd: Forward {
                upstream: publisher.central().clone(),
                dir: Direction::ToApp,
                pass_through_auth: false,
                forwards_impersonation: false,
                amendments: hooks,
                listener: "front",
                forwards_identity: false,
                limits: publisher.limits().clone(),
                metrics: Arc::new(Metrics::new()),
            },
        }
    }

    /// The same stack, also applying `amendment` (after those before).
    fn amended_by(mut self, amendment: Arc<dyn Amend>) -> Proxy {
        self.fwd.amendments.push(amendment);
        self
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
}
