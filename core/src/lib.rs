//! regroup's pure core: the catalog of group-bearing places, the codecs
//! that walk it (JSON, YAML, protobuf, OpenAPI), the engine that holds them
//! for one configuration, the URL renamer and the Kubernetes request model.
//!
//! No I/O: no sockets, no runtime, no file system. The crate's
//! dependencies are what keeps it so; the proxy (`regroup`) brings the I/O
//! and hands in what the core may not open itself (a protobuf list's spill
//! file, `rewrite::protobuf::spool::SpillFiles`).

pub mod kube;
pub mod rewrite;
pub mod url_rename;
