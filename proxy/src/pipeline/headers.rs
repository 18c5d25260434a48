//! The request's headers: what is forwarded upstream (hop-by-hop, identity
//! and regroup's ETag tags removed). The response's are
//! `response_headers.rs`'s.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::etag;
use super::exchange::Forward;
use crate::kube::media;
use crate::rewrite::Engine;
use crate::upstream::Upstream;

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
    hop_by_hop_index(name.as_str()).is_some()
}

/// Where a (lowercase) name is in [`HOP_BY_HOP`], if it is there. One
/// match: the compiler switches on the length first, where comparing
/// with each of the seven reads the custom names' bytes.
pub(crate) fn hop_by_hop_index(name: &str) -> Option<u8> {
    Some(match name {
        "connection" => 0,
        "keep-alive" => 1,
        "proxy-connection" => 2,
        "te" => 3,
        "trailer" => 4,
        "transfer-encoding" => 5,
        "upgrade" => 6,
        _ => return None,
    })
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

/// The head of the request upstream: the headers forwarded and whose
/// credential. `Accept` loses the media types regroup
/// can't rename, so the upstream answers in one it can.
///
/// The one place that decides which of the caller's identity headers go
/// on: `Authorization` (unless the stack passes the caller's own),
/// `X-Remote-*` (only the front, which set them itself) and
/// `Impersonate-*` (not in publish mode; not with regroup's credential
/// when its kubeconfig impersonates: the upstream adds its own).
/// Returns them with whether regroup's credential was lent (put in them:
/// the caller brought none, or `passThrough` is off); the sender keeps a
/// lent one fresh (protocol upgrades go with the one put here).
pub(crate) fn head(
    fwd: &Forward,
    upstream: &Upstream,
    engine: &Engine,
    incoming: &HeaderMap,
    upgrade: bool,
) -> (HeaderMap, bool) {
    let lent = !(fwd.pass_through_auth && incoming.contains_key(header::AUTHORIZATION));
    let mut h = request(
        fwd,
        upstream.impersonates() && lent,
        engine,
        incoming,
        upgrade,
    );
    if lent {
        upstream.lend_credential(&mut h);
    }
    (h, lent)
}

/// The caller's headers that go on; `impersonated`: regroup's kubeconfig
/// impersonates with the credential lent.
fn request(
    fwd: &Forward,
    impersonated: bool,
    engine: &Engine,
    incoming: &HeaderMap,
    upgrade: bool,
) -> HeaderMap {
    let impersonation = fwd.forwards_impersonation && !impersonated;
    let mut h = spare_map::take(incoming.len() + 1);
    for (name, value) in incoming {
        let n = name.as_str();
        let hop = is_hop_by_hop(name)
            && !(upgrade && (name == header::CONNECTION || name == header::UPGRADE));
        if hop
            || name == header::HOST
            || name == header::ACCEPT_ENCODING
            || (!fwd.pass_through_auth && name == header::AUTHORIZATION)
            || (!fwd.forwards_identity && n.starts_with("x-remote-"))
            || (!impersonation && n.starts_with("impersonate-"))
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

/// A finished request's header map, kept for the next request's head on
/// the same thread.
///
/// hyper recycles the maps it parses into: the head a connection writes
/// (cleared) is what it parses the next head into. The caller's request
/// map, sized by the last response on its connection, fits a response;
/// the map regroup built for the upstream, sized by the caller's few
/// headers, did not, so hyper grew it to parse the response (two
/// allocations and two frees), and a new one was allocated for every
/// request. Passing the caller's map, cleared, on to the next request
/// spares all four (docs/performance.md, "Session 34").
pub(crate) mod spare_map {
    use std::cell::RefCell;

    use http::HeaderMap;

    /// Maps with room for more entries than this are not kept: a thread
    /// keeps a few hundred bytes, whatever a client sent.
    const KEEP: usize = 32;

    thread_local! {
        static SPARE: RefCell<Option<HeaderMap>> = const { RefCell::new(None) };
    }

    /// An empty map with room for `n` entries: the thread's kept one when
    /// it has the room.
    pub(crate) fn take(n: usize) -> HeaderMap {
        SPARE
            .with_borrow_mut(|s| s.take_if(|m| m.capacity() >= n))
            .unwrap_or_else(|| HeaderMap::with_capacity(n))
    }

    /// Keeps `map`, cleared, for the next [`take`] on this thread.
    pub(crate) fn keep(mut map: HeaderMap) {
        if map.capacity() > KEEP {
            return;
        }
        map.clear();
        SPARE.with_borrow_mut(|s| *s = Some(map));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kept_map_comes_back_empty_with_its_room() {
        let mut m = HeaderMap::with_capacity(12);
        m.insert(header::ACCEPT, HeaderValue::from_static("a"));
        let room = m.capacity();
        spare_map::keep(m);
        let again = spare_map::take(2);
        assert!(again.is_empty());
        assert_eq!(again.capacity(), room);
        // Nothing kept now: a new one, of the room asked for.
        assert!(spare_map::take(2).capacity() >= 2);
        // One too small for the ask is not handed out.
        spare_map::keep(HeaderMap::with_capacity(1));
        assert!(spare_map::take(20).capacity() >= 20);
        // Nor is a large one kept.
        spare_map::keep(HeaderMap::with_capacity(100));
        assert!(spare_map::take(0).capacity() < 100);
    }

    #[test]
    fn the_hop_by_hop_match_is_the_list() {
        for (i, n) in HOP_BY_HOP.iter().enumerate() {
            assert!(is_hop_by_hop(n), "{n}");
            assert_eq!(hop_by_hop_index(n.as_str()), Some(i as u8), "{n}");
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
