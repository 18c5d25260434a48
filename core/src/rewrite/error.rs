//! Why a body could not be renamed: one error type for every codec.

use std::fmt;

use regroup_config::dns::MAX_SUBDOMAIN;

/// Why a body could not be renamed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    /// The body is not valid JSON (where a rewrite was required).
    #[error("malformed JSON: {0}")]
    Malformed(String),
    /// A field that must hold JSON (an apiserver-written annotation) doesn't.
    #[error("`{0}` must hold JSON: {1}")]
    EmbeddedJson(String, String),
    /// A renamed name would not be a valid Kubernetes name any more.
    #[error("renaming `{from}` gives `{to}`, longer than {MAX_SUBDOMAIN} characters")]
    TooLong {
        /// The name before.
        from: String,
        /// The name after.
        to: String,
    },
    /// A renamed label, annotation or finalizer key that Kubernetes would
    /// refuse.
    #[error("renaming the key `{from}` gives `{to}`, which Kubernetes refuses: {why}")]
    Key {
        /// The key before.
        from: String,
        /// The key after.
        to: String,
        /// What is wrong with it.
        why: String,
    },
    /// A name can't be renamed the way `names:` says (a `generateName`
    /// with a suffix).
    #[error("{0}")]
    Names(String),
    /// The body is not valid Kubernetes protobuf (where a rewrite was
    /// required).
    #[error("malformed protobuf: {0}")]
    Protobuf(String),
    /// Where a list waits to be sent is full or failed (its spill file).
    #[error("{0}")]
    Storage(String),
}

pub(crate) fn malformed(e: impl fmt::Display) -> RewriteError {
    RewriteError::Malformed(e.to_string())
}
