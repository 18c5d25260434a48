//! Serving: everything between a socket and the upstream, in rooms by
//! concern (docs/architecture.md draws them):
//!
//! - `listen/`: listeners and connections (the accept loop, the
//!   per-request access checks, in-flight tracking, shutdown); TLS tools
//!   are the ground floor's (`net/`).
//! - `stack/`: the request pipeline (one driver, its steps, the two
//!   stacks' listeners).
//! - `amend/`: the hooks, one extension point (`Amend`) and its
//!   implementations (the front identity, the front trust, webhook
//!   registrations).
//! - `front/`: the aggregated front (caller authentication, its TLS,
//!   readiness, the request-header CA follower, identity headers).
//! - `webhook/`: the webhook listener.
//! - `observe/`: metrics, process metrics, log format and writer.
//! - `run/`: command-line start-up and configuration reload.
//! - `status`: every failure as a Kubernetes `Status`; `respond`: every
//!   failure and answer counted and logged, in one place.
//! - `live`: the engine in force, swapped on reload; every listener reads it.

pub mod amend;
pub mod front;
pub mod listen;
pub mod live;
pub mod observe;
pub(crate) mod respond;
pub mod run;
pub mod stack;
pub mod status;
pub mod webhook;
