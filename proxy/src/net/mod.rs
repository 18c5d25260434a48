//! The ground floor of TLS every listener and command shares: identities
//! generated for tests, the front, `inject` and `publish-manifests`
//! ([`tls`]); a serving certificate reloaded when its files change
//! ([`serving_cert`]) or issued from the app's own CA ([`issued_cert`]).
//! It knows no listener, stack or command.

pub mod issued_cert;
pub mod serving_cert;
pub mod tls;
