//! The request's headers: what is forwarded upstream (hop-by-hop, identity
//! and regroup's ETag tags removed). The response's are
//! `response_headers.rs`'s.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::etag;
use super::exchange::Forward;
use crate::kube::media;
use crate::rewrite::Engine;

/// Hop-by-hop headers, never forwarded (RFC 9110 7.6.1). As `HeaderName`s:
/// comparing two is an enum compare for the standard ones, where comparing
/// strings reads every byte.
pub(crate) static HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
    header::UPGRADE,
];

pub(crate) fn is_hop_by_hop(name: &HeaderName) -> bool {
    // One match on the (always lowercase) name: the compiler switches on
    // its length first, where comparing with each of the seven reads the
    // custom names' bytes.
    matches!(
        name.as_str(),
        "connection"
            | "keep-alive"
            | "proxy-connection"
            | "te"
            | "trailer"
            | "transfer-encoding"
            | "upgrade"
    )
}

/// A protocol upgrade (`Connection: upgrade` and `Upgrade`).
pub(crate) fn is_upgrade(h: &HeaderMap) -> bool {
    h.contains_key(header::UPGRADE)
        && h.get_all(header::CONNECTION).iter().any(|v| {
            v.to_str().is_ok_and(|s| {
                s.split(',')
                    .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
            })
        })
}

/// The headers forwarded upstream. `Accept` loses the media types regroup
/// can't rename, so the upstream answers in one it can.
pub(crate) fn request(
    fwd: &Forward,
    engine: &Engine,
    incoming: &HeaderMap,
    upgrade: bool,
) -> HeaderMap {
    let mut h = HeaderMap::with_capacity(incoming.len());
    for (name, value) in incoming {
        let n = name.as_str();
        let hop = is_hop_by_hop(name)
            && !(upgrade && (name == header::CONNECTION || name == header::UPGRADE));
        if hop
            || name == header::HOST
            || name == header::ACCEPT_ENCODING
            || (!fwd.pass_through_auth && name == header::AUTHORIZATION)
            || (!fwd.forwards_identity && n.starts_with("x-remote-"))
        {
            continue;
        }
        if name == header::IF_NONE_MATCH {
            h.append(name.clone(), etag::untag_value(engine, value));
            continue;
        }
        if name == header::ACCEPT {
            if let Some(kept) = value
                .to_str()
                .ok()
                .and_then(media::accept_without_unrenamable)
            {
                if let Ok(v) = HeaderValue::from_str(&kept) {
                    if !kept.is_empty() {
                        h.append(name.clone(), v);
                    }
                }
                continue;
            }
        }
        h.append(name.clone(), value.clone());
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hop_by_hop_match_is_the_list() {
        for n in &HOP_BY_HOP {
            assert!(is_hop_by_hop(n), "{n}");
        }
        for n in [
            "content-type",
            "content-length",
            "connections",
            "host",
            "x-te",
        ] {
            assert!(!is_hop_by_hop(&HeaderName::from_static(n)), "{n}");
        }
    }
}
