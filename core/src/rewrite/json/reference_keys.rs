//! The reference-key heuristic: string values of keys named `apiGroup` or
//! `apiVersion` anywhere in an object name a group (custom resources carry
//! app-specific references this way), bounded by
//! [`Catalog::reference_keys_skip`].

use crate::rewrite::raw::Raw;

use super::JsonRewriter;
use crate::rewrite::catalog::Catalog;
use crate::rewrite::error::RewriteError;
use crate::rewrite::raw::{Members, Walk};

impl JsonRewriter<'_> {
    /// The heuristic: string values of keys named `apiGroup`/`apiVersion`
    /// anywhere in the object, except in user-data maps and in embedded
    /// objects (which get their own pass, knowing their kind). `listed`:
    /// `raw`'s members when the caller has them already.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn reference_keys<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        kind: &str,
        parent: Option<&str>,
        depth: usize,
        embedded: &[&str],
        listed: Option<&Members<'i>>,
    ) -> Result<(), RewriteError> {
        if !self.may(w, raw) {
            return Ok(());
        }
        let ms = match listed {
            Some(ms) => Some(ms.clone()),
            None => w.members(raw)?,
        };
        if let Some(ms) = ms {
            for (k, child) in ms.iter() {
                let child: Raw<'i> = child;
                let k = k.0.as_ref();
                // A scalar matters only under one of the two keys; the
                // bounds below are about the others' containers.
                let reference = matches!(k, "apiVersion" | "apiGroup");
                if !reference && !is_container(child) {
                    continue;
                }
                if (depth == 0 && embedded.contains(&k))
                    || Catalog::reference_keys_skip(kind, parent, depth, k)
                {
                    continue;
                }
                // Only these two keys' values are read as strings. One a
                // catalog place already renamed (an object's own
                // `apiVersion`) is left: `finish` would drop a second edit
                // of the same bytes anyway.
                if reference && w.replaced_lately(child) {
                    continue;
                }
                let mapped = match k {
                    "apiVersion" => ms
                        .string(child)?
                        .and_then(|s| self.map.map_api_version_by_reference_key(&s, self.dir)),
                    "apiGroup" => ms
                        .string(child)?
                        .and_then(|s| self.map.map_group_by_reference_key(&s, self.dir)),
                    _ => None,
                };
                match mapped {
                    Some(m) => w.replace_quoted(child, None, &m),
                    // Only containers hold keys.
                    None if is_container(child) => {
                        self.reference_keys(w, child, kind, Some(k), depth + 1, embedded, None)?
                    }
                    None => {}
                }
            }
        } else if let Some(es) = w.elements(raw)? {
            for e in es.iter().filter(|e| is_container(*e)) {
                self.reference_keys(w, e, kind, parent, depth, embedded, None)?;
            }
        }
        Ok(())
    }
}

/// True for an object or an array: a scalar holds no key.
fn is_container(raw: Raw<'_>) -> bool {
    matches!(raw.get().as_bytes().first(), Some(b'{' | b'['))
}
