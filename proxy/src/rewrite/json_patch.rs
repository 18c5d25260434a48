//! JSON Patch (RFC 6902) request bodies: each operation's `value` renamed
//! as the part of an object of the addressed kind it lands in.

use serde_json::Value as Json;

use super::{JsonRewriter, RewriteError};

/// Renames each operation of a JSON Patch: the `value` is placed at its
/// `path` in an otherwise empty object of the addressed kind, renamed there
/// by the catalog, and taken back out.
pub fn rewrite(
    rw: &JsonRewriter<'_>,
    bytes: &[u8],
    api_version: &str,
    kind: &str,
) -> Result<Option<Vec<u8>>, RewriteError> {
    if !rw.may_contain(bytes) && !rw.names_involved(bytes, Some((api_version, kind)), None) {
        return Ok(None);
    }
    let mut ops: Vec<Json> =
        serde_json::from_slice(bytes).map_err(|e| RewriteError::Malformed(e.to_string()))?;
    let mut changed = false;
    for op in &mut ops {
        let Some(path) = op.get("path").and_then(Json::as_str).map(str::to_owned) else {
            continue;
        };
        let Some(value) = op.get_mut("value") else {
            continue;
        };
        let tokens: Vec<String> = path
            .split('/')
            .skip(1)
            .map(|t| t.replace("~1", "/").replace("~0", "~"))
            .collect();
        let mut wrapped = value.clone();
        for t in tokens.iter().rev() {
            wrapped = if t == "-" || t.parse::<usize>().is_ok() {
                Json::Array(vec![wrapped])
            } else {
                let mut m = serde_json::Map::new();
                m.insert(t.clone(), wrapped);
                Json::Object(m)
            };
        }
        if !wrapped.is_object() {
            continue;
        }
        if rw.rewrite_as(&mut wrapped, api_version, kind)? {
            let mut v = &wrapped;
            for t in &tokens {
                v = if t == "-" || t.parse::<usize>().is_ok() {
                    &v[0]
                } else {
                    &v[t.as_str()]
                };
            }
            if v != value {
                *value = v.clone();
                changed = true;
            }
        }
    }
    Ok(changed.then(|| serde_json::to_vec(&ops).expect("values serialize")))
}
