//! JSON Patch (RFC 6902) request bodies: each operation's `value` renamed
//! as the part of an object of the addressed kind it lands in.

use serde_json::Value as Json;

use super::JsonRewriter;
use crate::rewrite::error::RewriteError;

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
        let value = op.get("value").cloned();
        let (new_path, new_value) = place(rw, &path, value.clone(), api_version, kind)?;
        if let (Some(v), Some(old)) = (new_value, &value) {
            if &v != old {
                op["value"] = v;
                changed = true;
            }
        }
        if let Some(p) = new_path.filter(|p| *p != path) {
            op["path"] = Json::String(p);
            changed = true;
        }
        // `move` and `copy` read from a second path, which names keys too.
        if let Some(from) = op.get("from").and_then(Json::as_str).map(str::to_owned) {
            if let (Some(p), _) = place(rw, &from, None, api_version, kind)? {
                if p != from {
                    op["from"] = Json::String(p);
                    changed = true;
                }
            }
        }
    }
    Ok(changed.then(|| serde_json::to_vec(&ops).expect("values serialize")))
}

fn is_index(token: &str) -> bool {
    token == "-" || token.parse::<usize>().is_ok()
}

/// `value` (`null` when the operation has none) placed at `path` in an
/// otherwise empty object of the addressed kind and renamed there: the
/// renamed path (the member names the catalog renamed on the way, such as
/// a label key in `/metadata/labels/example.io~1x`) and value. `None`s:
/// nothing renamed.
fn place(
    rw: &JsonRewriter<'_>,
    path: &str,
    value: Option<Json>,
    api_version: &str,
    kind: &str,
) -> Result<(Option<String>, Option<Json>), RewriteError> {
    let tokens: Vec<String> = path
        .split('/')
        .skip(1)
        .map(|t| t.replace("~1", "/").replace("~0", "~"))
        .collect();
    let mut wrapped = value.clone().unwrap_or(Json::Null);
    for t in tokens.iter().rev() {
        wrapped = if is_index(t) {
            Json::Array(vec![wrapped])
        } else {
            let mut m = serde_json::Map::new();
            m.insert(t.clone(), wrapped);
            Json::Object(m)
        };
    }
    if !wrapped.is_object() || !rw.rewrite_value(&mut wrapped, Some((api_version, kind)), None)? {
        return Ok((None, None));
    }
    // Each level holds one member (or element): its name is the token.
    let mut v = &wrapped;
    let mut renamed = String::with_capacity(path.len() + 16);
    for t in &tokens {
        v = if is_index(t) {
            renamed.push('/');
            renamed.push_str(t);
            &v[0]
        } else {
            let Some((k, inner)) = v.as_object().and_then(|m| m.iter().next()) else {
                return Err(RewriteError::Malformed(format!(
                    "JSON Patch path `{path}` could not be renamed"
                )));
            };
            renamed.push('/');
            renamed.push_str(&k.replace('~', "~0").replace('/', "~1"));
            inner
        };
    }
    Ok((Some(renamed), value.map(|_| v.clone())))
}
