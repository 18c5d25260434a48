//! A string field holding JSON (autoscaling/v1's metrics annotations): the
//! catalog's inner path is renamed inside it by splicing, so every other byte
//! of the JSON text stays as the apiserver wrote it.

use std::collections::HashMap;

use regroup_config::field_path::{FieldPath, Step};
use regroup_config::{Direction, Form, GroupMap};
use serde_json::value::RawValue;

use crate::rewrite::json::RewriteError;

struct Splice {
    start: usize,
    end: usize,
    text: String,
}

/// Renames the value at `path` (in each element when the document is an
/// array) in the JSON `text`. `Ok(None)`: nothing renamed.
pub(super) fn rename(
    text: &str,
    path: &FieldPath,
    form: Form,
    map: &GroupMap,
    dir: Direction,
) -> Result<Option<String>, RewriteError> {
    let bad = |e: serde_json::Error| RewriteError::EmbeddedJson(path.to_string(), e.to_string());
    let doc: &RawValue = serde_json::from_str(text).map_err(bad)?;
    let mut splices = Vec::new();
    let roots: Vec<&RawValue> = if doc.get().starts_with('[') {
        serde_json::from_str(doc.get()).map_err(bad)?
    } else {
        vec![doc]
    };
    for root in roots {
        walk(text, root, path.steps(), form, map, dir, &mut splices).map_err(bad)?;
    }
    if splices.is_empty() {
        return Ok(None);
    }
    splices.sort_by_key(|s| s.start);
    let mut out = String::with_capacity(text.len() + 32);
    let mut at = 0;
    for s in splices {
        if s.start < at {
            continue;
        }
        out.push_str(&text[at..s.start]);
        out.push_str(&s.text);
        at = s.end;
    }
    out.push_str(&text[at..]);
    Ok(Some(out))
}

fn walk<'t>(
    text: &'t str,
    value: &'t RawValue,
    steps: &[Step],
    form: Form,
    map: &GroupMap,
    dir: Direction,
    out: &mut Vec<Splice>,
) -> Result<(), serde_json::Error> {
    let raw = value.get();
    match steps.split_first() {
        None => {
            if !raw.starts_with('"') {
                return Ok(());
            }
            let s: String = serde_json::from_str(raw)?;
            if let Some(mapped) = map.map(form, &s, dir) {
                let start = raw.as_ptr() as usize - text.as_ptr() as usize;
                out.push(Splice {
                    start,
                    end: start + raw.len(),
                    text: serde_json::to_string(&mapped)?,
                });
            }
            Ok(())
        }
        Some((Step::Key(k), rest)) => {
            if !raw.starts_with('{') {
                return Ok(());
            }
            // Duplicate names: the last wins, as in Go's decoder.
            let members: HashMap<String, &RawValue> = serde_json::from_str(raw)?;
            match members.get(k.as_str()) {
                Some(v) => walk(text, v, rest, form, map, dir, out),
                None => Ok(()),
            }
        }
        Some((Step::Each, rest)) => {
            if !raw.starts_with('[') {
                return Ok(());
            }
            let elements: Vec<&RawValue> = serde_json::from_str(raw)?;
            for e in elements {
                walk(text, e, rest, form, map, dir, out)?;
            }
            Ok(())
        }
    }
}
