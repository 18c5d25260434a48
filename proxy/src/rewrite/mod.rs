//! Renaming groups in bodies: the catalog of places and the codecs that
//! walk it.

pub mod catalog;
pub mod json;
pub mod list_stream;
pub mod openapi;
pub mod openapi_proto;
pub mod protobuf;
mod raw;

pub use catalog::Catalog;
pub use json::{JsonRewriter, RewriteError};
pub use protobuf::ProtoRewriter;
