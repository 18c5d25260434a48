//! Headers both ways: what is forwarded upstream, and the group-bearing
//! response headers (`Warning`, `Location`) renamed back.

use http::header::{self, HeaderMap, HeaderName, HeaderValue};

use super::etag;
use super::exchange::Forward;
use crate::kube::media;
use crate::rewrite::Engine;
use crate::url_rename;

/// Hop-by-hop headers, never forwarded (RFC 9110 7.6.1). As `HeaderName`s:
/// comparing two is an enum compare for the standard ones, where comparing
/// strings reads every byte.
static HOP_BY_HOP: [HeaderName; 7] = [
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

/// Removes the hop-by-hop headers of a response.
pub(crate) fn strip_hop_by_hop(h: &mut HeaderMap) {
    // Removed by the names present (usually `Connection` alone): a removal
    // hashes its name.
    let mut present = [false; HOP_BY_HOP.len()];
    for k in h.keys().filter(|k| is_hop_by_hop(k)) {
        if let Some(i) = HOP_BY_HOP.iter().position(|n| n == k) {
            present[i] = true;
        }
    }
    for (name, _) in HOP_BY_HOP.iter().zip(present).filter(|(_, p)| *p) {
        h.remove(name);
    }
}

/// `Warning` texts and `Location` paths name groups too.
pub(crate) fn response(fwd: &Forward, engine: &Engine, h: &mut HeaderMap) {
    let (map, dir) = (engine.map(), fwd.dir.flip());
    let warnings: Vec<HeaderValue> = h.get_all(header::WARNING).iter().cloned().collect();
    if !warnings.is_empty() {
        h.remove(header::WARNING);
        for w in warnings {
            let v = w
                .to_str()
                .ok()
                .and_then(|s| map.map_text(s, dir))
                .and_then(|s| HeaderValue::from_str(&s).ok())
                .unwrap_or(w);
            h.append(header::WARNING, v);
        }
    }
    if let Some(loc) = h.get(header::LOCATION).and_then(|v| v.to_str().ok()) {
        let renamed = url_rename::rewrite_path(loc, map, dir);
        let tagged = tag_openapi_hash(renamed.as_deref().unwrap_or(loc), engine.tag());
        if let Some(v) = tagged
            .or(renamed)
            .and_then(|s| HeaderValue::from_str(&s).ok())
        {
            h.insert(header::LOCATION, v);
        }
    }
}

/// An OpenAPI v3 URL whose `hash` gets regroup's tag, as the hashes in the
/// index regroup serves do (a client caches the target as immutable).
fn tag_openapi_hash(location: &str, tag: &str) -> Option<String> {
    let (path, query) = location.split_once('?')?;
    if !path.starts_with("/openapi/v3/") {
        return None;
    }
    let mut changed = false;
    let query: Vec<String> = query
        .split('&')
        .map(|kv| match kv.strip_prefix("hash=") {
            Some(hash) if !hash.ends_with(tag) => {
                changed = true;
                format!("hash={hash}{tag}")
            }
            _ => kv.to_owned(),
        })
        .collect();
    changed.then(|| format!("{path}?{}", query.join("&")))
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
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        strip_hop_by_hop(&mut h);
        assert_eq!(h.len(), 1);
        assert!(h.contains_key(header::CONTENT_TYPE));
    }

    #[test]
    fn an_openapi_v3_location_gets_the_hash_tag_once() {
        assert_eq!(
            tag_openapi_hash("/openapi/v3/apis/g.example.com/v1?hash=AB", "-rg1").as_deref(),
            Some("/openapi/v3/apis/g.example.com/v1?hash=AB-rg1")
        );
        assert_eq!(
            tag_openapi_hash("/openapi/v3/apis/g/v1?hash=AB-rg1", "-rg1"),
            None
        );
        assert_eq!(tag_openapi_hash("/apis/g/v1?hash=AB", "-rg1"), None);
        assert_eq!(tag_openapi_hash("/openapi/v3/apis/g/v1", "-rg1"), None);
    }
}
