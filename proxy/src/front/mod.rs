//! The aggregated front listener's caller authentication: TLS that verifies
//! front-proxy client certificates against the cluster's request-header CA
//! ([`tls`]), and the request-header authenticator that turns a verified
//! certificate and the `X-Remote-*` headers into an identity ([`auth`]),
//! both as kube-apiserver does it for an aggregated API server.

pub mod auth;
pub mod ca_follower;
pub(crate) mod identity;
pub mod ready;
pub mod tls;

#[cfg(test)]
mod tests;
