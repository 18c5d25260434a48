//! Renaming groups in bodies: the catalog of places, the codecs that walk
//! it (one per wire form), the framer of streams, and the engine that holds
//! them all for one configuration.

pub mod catalog;
pub(crate) mod codec;
pub mod discovery_order;
pub mod engine;
pub(crate) mod error;
pub mod framing;
pub(crate) mod json;
pub mod list_stream;
pub(crate) mod names;
mod needles;
pub mod openapi;
pub mod openapi_proto;
pub mod protobuf;
pub mod raw;
mod same_bytes;
pub mod tally;
pub(crate) mod yaml;
mod yaml_edit;

// The names the crate's users reach as `rewrite::...`. Inside the crate,
// modules import from the module that defines a name, never through these:
// this file stands above every module it declares.
pub use catalog::Catalog;
pub use codec::Codec;
pub use codec::Context;
pub use engine::Engine;
pub use error::RewriteError;
pub use json::JsonRewriter;
pub use protobuf::ProtoRewriter;
