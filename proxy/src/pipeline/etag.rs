//! regroup's tag on the ETags of bodies it may rewrite (and on OpenAPI v3
//! hashes), so that a cache keyed by them never mixes renamed and unrenamed
//! bytes, or two rule sets; taken off again before anything goes upstream.

use http::header::{self, HeaderMap, HeaderValue};

use crate::rewrite::Engine;

/// `text` without regroup's tag.
pub(crate) fn untag(engine: &Engine, text: &str) -> String {
    text.replace(engine.tag(), "")
}

/// The response's `ETag` with regroup's tag.
pub(crate) fn tag(engine: &Engine, h: &mut HeaderMap) {
    if let Some(v) = h.get(header::ETAG).and_then(|v| v.to_str().ok()) {
        let tagged = match v.strip_suffix('"') {
            Some(head) => format!("{head}{}\"", engine.tag()),
            None => format!("{v}{}", engine.tag()),
        };
        if let Ok(v) = HeaderValue::from_str(&tagged) {
            h.insert(header::ETAG, v);
        }
    }
}

/// An `If-None-Match` value as the upstream issued it.
pub(crate) fn untag_value(engine: &Engine, value: &HeaderValue) -> HeaderValue {
    value
        .to_str()
        .ok()
        .and_then(|v| HeaderValue::from_str(&untag(engine, v)).ok())
        .unwrap_or_else(|| value.clone())
}
