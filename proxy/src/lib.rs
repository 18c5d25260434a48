//! regroup: a transforming reverse proxy for the Kubernetes API that renames
//! API groups both ways. This library holds the rewriting engine and the
//! commands; `main.rs` is only the command line.

pub mod body;
pub mod fuzz_harness;
pub mod inject;
pub mod kube;
pub mod migrate;
pub mod render;
pub mod rewrite;
pub mod serve;
pub mod upstream;
pub mod url_rename;
