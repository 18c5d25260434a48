//! YAML bodies, renamed through the JSON codec and edited in place
//! (`yaml_edit.rs`): only the group-bearing scalars change; comments,
//! quoting, flow style and every other scalar (`0644`, `y`, `1e3`) keep
//! their bytes.

use serde_json::Value as Json;

use super::error::RewriteError;
use super::json::JsonRewriter;
use super::yaml_edit::{apply, changed_strings, documents, edits};

fn malformed(what: &str, e: impl std::fmt::Display) -> RewriteError {
    RewriteError::Malformed(format!("{what}: {e}"))
}

/// YAML (one document or several) renamed in place. `Ok(None)`: nothing
/// renamed; forward the bytes as they are. A document whose renaming can't
/// be written in place (a value its scalar style can't hold, an entry
/// dropped) is written anew, as YAML. Outside this crate, through
/// [`Engine::body`](super::engine::Engine::body) with `Wire::Yaml`.
pub(crate) fn rewrite(
    rw: &JsonRewriter<'_>,
    bytes: &[u8],
    hint: Option<(&str, &str)>,
    addressed: Option<(&str, &str)>,
) -> Result<Option<Vec<u8>>, RewriteError> {
    if !rw.may_contain(bytes) && !rw.names_involved(bytes, hint, addressed) {
        return Ok(None);
    }
    let text = std::str::from_utf8(bytes).map_err(|e| malformed("not UTF-8", e))?;
    let mut all = Vec::new();
    for doc in documents(text)? {
        let src = &text[doc.start..doc.end];
        let before: Json =
            // YAML 1.1's octal, as kubectl reads it (`0644` is 420).
            serde_saphyr::from_str_with_options(
                src,
                {
                    let mut o = serde_saphyr::Options::default();
                    o.legacy_octal_numbers = true;
                    o
                },
            )
            .map_err(|e| malformed("not valid YAML", e))?;
        if before.is_null() {
            continue;
        }
        let json = serde_json::to_vec(&before).expect("values serialize");
        let Some(renamed) = rw.rewrite_bytes_with(&json, hint, addressed)? else {
            continue;
        };
        let after: Json = serde_json::from_slice(&renamed).map_err(|e| malformed("renamed", e))?;
        match changed_strings(&before, &after).and_then(|c| edits(&doc, &c)) {
            Some(e) => all.extend(e),
            None => {
                // Written anew; an explicit `---` stays.
                let body_at = if src.starts_with("---") {
                    src.find('\n').map_or(src.len(), |n| n + 1)
                } else {
                    0
                };
                let yaml =
                    serde_saphyr::to_string(&after).map_err(|e| malformed("writing YAML", e))?;
                all.push((doc.start + body_at, doc.end, yaml));
            }
        }
    }
    Ok((!all.is_empty()).then(|| apply(text, all).into_bytes()))
}
