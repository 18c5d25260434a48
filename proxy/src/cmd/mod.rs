//! The commands that run for long or change a cluster: `serve` (the
//! sidecar, the front and publish mode), `inject` (the sidecar added to an
//! app's manifests) and `migrate` (one copy's objects moved to another
//! group). Each depends on the rooms below (pipeline, upstream, render,
//! publish), never on another command; `main.rs` is the command line.

pub mod inject;
pub mod migrate;
pub mod serve;
