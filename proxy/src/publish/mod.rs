//! Publish mode (docs/publish.md): the aggregated front whose backend is
//! another (central) cluster. The remote cluster's callers are authorized
//! by the remote cluster, their namespaces mapped to central target
//! namespaces, names held by another source refused, and only the
//! published groups shown in discovery and OpenAPI.

pub(crate) mod filter;
