//! The response's headers: hop-by-hop ones removed, and the group-bearing
//! ones (`Warning`, `Location`) renamed back towards the caller.

use http::header::{self, HeaderMap, HeaderValue};

use super::exchange::Forward;
use super::headers::HOP_BY_HOP;
use crate::rewrite::Engine;
use crate::url_rename;

/// Removes the hop-by-hop headers of a response: those whose bit is set
/// in `present` (bit `i`: [`HOP_BY_HOP`]`[i]`, as the response step's one
/// pass over the headers found them; usually `Connection` alone). A
/// removal hashes its name: only those present are removed.
pub(crate) fn strip_hop_by_hop(h: &mut HeaderMap, present: u8) {
    for (i, name) in HOP_BY_HOP.iter().enumerate() {
        if present & (1 << i) != 0 {
            h.remove(name);
        }
    }
}

/// `Warning` texts and `Location` paths name groups too.
pub(crate) fn rename_back(fwd: &Forward, engine: &Engine, h: &mut HeaderMap) {
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
    fn hop_by_hop_headers_are_removed() {
        let mut h = HeaderMap::new();
        h.insert(header::CONNECTION, HeaderValue::from_static("close"));
        h.insert("keep-alive", HeaderValue::from_static("timeout=5"));
        h.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        );
        let present = h
            .keys()
            .filter_map(|k| super::super::headers::hop_by_hop_index(k.as_str()))
            .fold(0, |m, i| m | 1 << i);
        strip_hop_by_hop(&mut h, present);
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
