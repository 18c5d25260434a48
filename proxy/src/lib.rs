//! regroup: a transforming reverse proxy for the Kubernetes API that renames
//! API groups both ways. This library holds the proxy (listeners, the
//! request pipeline, the upstream client) and the commands; `main.rs` is
//! only the command line. The rewriting engine, the codecs and the URL
//! renamer are the pure core, `regroup-core`, re-exported here under their
//! own names so that `regroup::rewrite::…` reads as before.

pub mod body;
pub mod cmd;
pub mod file_stamp;
// The fuzz targets' entry points: built for the fuzzer (feature
// `fuzz-harness`, which fuzz/Cargo.toml turns on) and for the corpus replay
// test, not into every build.
pub mod front;
#[cfg(any(test, feature = "fuzz-harness"))]
pub mod fuzz_harness;
pub mod hooks;
pub mod listen;
pub mod net;
pub mod observe;
pub mod pipeline;
pub mod publish;
pub mod render;
pub mod stacks;
pub mod status;
pub mod upstream;
pub mod webhook;

pub use regroup_core::{kube, rewrite, url_rename};

/// regroup's image, as the manifests `inject` and `publish-manifests` write
/// name it unless told otherwise: the name `dist/build-image.sh` gives the
/// image archive it makes (`regroup:VERSION`, loaded onto the nodes with
/// `kind load image-archive`, `ctr images import` or `docker load`), and the
/// chart's default (`regroup.image`: repository `regroup`, tag appVersion).
pub const IMAGE: &str = concat!("regroup:", env!("CARGO_PKG_VERSION"));
