//! YAML bodies, renamed through the JSON codec: the document is read with a
//! YAML parser into JSON, renamed there, and written back.

use serde_json::Value as Json;

use super::{JsonRewriter, RewriteError};

fn malformed(what: &str, e: impl std::fmt::Display) -> RewriteError {
    RewriteError::Malformed(format!("{what}: {e}"))
}

fn to_json(bytes: &[u8]) -> Result<Vec<u8>, RewriteError> {
    let text = std::str::from_utf8(bytes).map_err(|e| malformed("not UTF-8", e))?;
    let doc: Json = serde_saphyr::from_str(text).map_err(|e| malformed("not valid YAML", e))?;
    Ok(serde_json::to_vec(&doc).expect("values serialize"))
}

/// A YAML request body that may name a group, as renamed JSON (JSON is
/// YAML, so `apply-patch+yaml` takes it as it is). `Ok(None)` when no
/// mapped name occurs: the YAML is forwarded untouched.
pub fn rewrite_to_json(
    rw: &JsonRewriter<'_>,
    bytes: &[u8],
    hint: Option<(&str, &str)>,
    addressed: Option<(&str, &str)>,
) -> Result<Option<Vec<u8>>, RewriteError> {
    if !rw.may_contain(bytes) {
        return Ok(None);
    }
    let json = to_json(bytes)?;
    let renamed = rw.rewrite_bytes_with(&json, hint, addressed)?;
    Ok(Some(renamed.unwrap_or(json)))
}

/// A YAML response body renamed, still YAML. `Ok(None)`: nothing renamed,
/// forward the bytes as they are.
pub fn rewrite(
    rw: &JsonRewriter<'_>,
    bytes: &[u8],
    addressed: Option<(&str, &str)>,
) -> Result<Option<Vec<u8>>, RewriteError> {
    if !rw.may_contain(bytes) {
        return Ok(None);
    }
    let json = to_json(bytes)?;
    let Some(renamed) = rw.rewrite_bytes_with(&json, None, addressed)? else {
        return Ok(None);
    };
    let v: Json = serde_json::from_slice(&renamed).map_err(|e| malformed("renamed", e))?;
    let yaml = serde_saphyr::to_string(&v).map_err(|e| malformed("writing YAML", e))?;
    Ok(Some(yaml.into_bytes()))
}
