//! Serving: everything between a socket and the upstream, in rooms by
//! concern (docs/architecture.md draws them):
//!
//! - `listen/`: listeners and connections (accept loops, the per-request
//!   access checks, in-flight tracking, shutdown, TLS and the serving
//!   certificate).
//! - `stack/`: the request pipeline (the two stacks and their layers).
//! - `amend/`: edits beyond renaming, one extension point (`Amend`) and
//!   its two implementations (the front trust, webhook registrations).
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
