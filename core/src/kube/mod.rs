//! Pure Kubernetes API machinery regroup reasons about: what a request
//! addresses, the media types of bodies, the `Status` error document. No
//! I/O here: the proxy (`serve`) and the codecs (`rewrite`) both read it.

pub mod media;
pub mod path;
pub mod request;
pub mod status;

pub use media::{MediaType, PatchKind, Wire};
pub use request::RequestInfo;
