//! The ground floor of TLS every listener and command shares: identities
//! generated for tests, the front, `inject` and `publish-manifests`
//! ([`tls`]); a serving certificate reloaded when its files change
//! ([`serving_cert`]) or issued from the app's own CA ([`issued_cert`]);
//! the files they read ([`pem_file`]); the errors of a TLS configuration's
//! parts, in one vocabulary for every room ([`tls_error`]).
//! It knows no listener, stack or command.

pub mod issued_cert;
pub mod pem_file;
pub mod serving_cert;
pub mod tls;
pub mod tls_error;
