//! OpenAPI v2 and v3 documents in JSON, renamed by splicing bytes.
//!
//! Where groups live in OpenAPI (the catalog's OpenAPI row, `catalog::openapi`):
//! `paths` keys (`/apis/{group}/{version}/...`), definition and schema names
//! in reverse-DNS form (`io.k8s.samplecontroller.v1alpha1.Foo`, keys of v2
//! `definitions` and v3 `components.schemas`) and every `$ref` to them,
//! `x-kubernetes-group-version-kind[].group`, and in the v3 index the path
//! keys (or the 1.24 `{"Paths": [...]}` list) and each `serverRelativeURL`.
//! Entries of shadowed groups (paths and definitions) are dropped, as in
//! discovery. Operation ids and tags embed a camel-cased group and are left
//! as they are: no client reads them as references.

use crate::rewrite::raw::Raw;
use regroup_config::{Direction, GroupMap};

use super::catalog::openapi::{
    COMPONENTS, DEFINITIONS, GVK, PATHS, PATH_LIST, REF, SCHEMAS, SERVER_RELATIVE_URL,
};
use super::error::{malformed, RewriteError};
use super::names::NameIndex;
use super::raw::{quote, string, Walk};

/// Renames groups in OpenAPI documents, in one direction.
pub struct OpenApiRewriter<'a> {
    map: &'a GroupMap,
    dir: Direction,
    /// Names of both sides, forward and reverse-DNS, and `\u`.
    index: NameIndex,
    /// Appended to the `hash` of each v3 `serverRelativeURL`, so a client
    /// cache keyed by it never mixes renamed and unrenamed documents (the
    /// proxy strips it from requests).
    hash_tag: String,
}

impl<'a> OpenApiRewriter<'a> {
    /// A rewriter for `dir`; `hash_tag` is appended to v3 document hashes.
    pub fn new(map: &'a GroupMap, dir: Direction, hash_tag: &str) -> Self {
        Self::with_index(map, dir, hash_tag, NameIndex::new(map))
    }

    /// [`new`](Self::new) sharing the configuration's name index.
    pub fn with_index(map: &'a GroupMap, dir: Direction, hash_tag: &str, index: NameIndex) -> Self {
        OpenApiRewriter {
            map,
            dir,
            index,
            hash_tag: hash_tag.to_owned(),
        }
    }

    /// Renames an OpenAPI v2 or v3 document or a v3 index. `Ok(None)`:
    /// nothing to rename.
    pub fn rewrite_bytes(&self, input: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        if !self.index.dns_json().is_match(input) {
            return Ok(None);
        }
        let text = std::str::from_utf8(input).map_err(malformed)?;
        let (mut w, root) = Walk::parse(text)?;
        if let Some(ms) = w.members(root)? {
            for (k, v) in ms.iter() {
                match k.0.as_ref() {
                    PATHS if v.get().starts_with('{') => self.paths(&mut w, v)?,
                    PATH_LIST => self.path_list(&mut w, v)?,
                    DEFINITIONS => self.schemas(&mut w, v)?,
                    COMPONENTS => {
                        if let Some(cs) = w.members(v)? {
                            for (ck, cv) in cs.iter() {
                                if ck.0 == SCHEMAS {
                                    self.schemas(&mut w, cv)?;
                                } else {
                                    self.generic(&mut w, cv)?;
                                }
                            }
                        }
                    }
                    _ => self.generic(&mut w, v)?,
                }
            }
        }
        Ok(w.finish().map(String::into_bytes))
    }

    fn may<'i>(&self, w: &mut Walk<'i>, raw: Raw<'i>) -> bool {
        w.may_contain(self.index.dns_json(), raw)
    }

    fn path_shadowed(&self, path: &str) -> bool {
        group_of_path(path).is_some_and(|g| self.map.is_shadowed(g, self.dir))
    }

    /// An object keyed by API paths: rename or drop each key, walk values.
    fn paths<'i>(&self, w: &mut Walk<'i>, obj: Raw<'i>) -> Result<(), RewriteError> {
        self.keyed(
            w,
            obj,
            |s, k| s.path_shadowed(k),
            |s, k| s.map.map_api_path(k, s.dir),
        )
    }

    /// An object keyed by reverse-DNS schema names.
    fn schemas<'i>(&self, w: &mut Walk<'i>, obj: Raw<'i>) -> Result<(), RewriteError> {
        self.keyed(
            w,
            obj,
            |s, k| s.map.map_reverse_dns(k, s.dir.flip()).is_some(),
            |s, k| s.map.map_reverse_dns(k, s.dir),
        )
    }

    fn keyed<'i>(
        &self,
        w: &mut Walk<'i>,
        obj: Raw<'i>,
        shadowed: impl Fn(&Self, &str) -> bool,
        rename: impl Fn(&Self, &str) -> Option<String>,
    ) -> Result<(), RewriteError> {
        if !self.may(w, obj) {
            return Ok(());
        }
        let Some(ms) = w.members(obj)? else {
            return Ok(());
        };
        let mut spans = Vec::with_capacity(ms.len());
        let mut keep = Vec::with_capacity(ms.len());
        for (k, v) in ms.iter() {
            let start = w.member_start(v);
            let end = w.offset(v) + v.get().len();
            let key = k.0.as_ref();
            let drop = start.is_some() && shadowed(self, key);
            spans.push((start.unwrap_or(w.offset(v)), end));
            keep.push(!drop);
            if drop {
                continue;
            }
            if let (Some(s), Some(new)) = (start, rename(self, key)) {
                let key_end = w.string_end(s);
                w.replace_range(s, key_end, &quote(&new));
            }
            self.generic(w, v)?;
        }
        w.delete_entries(obj, &spans, &keep);
        Ok(())
    }

    /// The 1.24 v3 index: `{"Paths": ["apis/g/v", ...]}`.
    fn path_list<'i>(&self, w: &mut Walk<'i>, list: Raw<'i>) -> Result<(), RewriteError> {
        let Some(es) = w.elements(list)? else {
            return Ok(());
        };
        let mut spans = Vec::with_capacity(es.len());
        let mut keep = Vec::with_capacity(es.len());
        for e in es.iter() {
            let s = w.offset(e);
            spans.push((s, s + e.get().len()));
            let Some(p) = string(e)? else {
                keep.push(true);
                continue;
            };
            let drop = self.path_shadowed(&p);
            keep.push(!drop);
            if !drop {
                if let Some(m) = self.map.map_api_path(&p, self.dir) {
                    w.replace_quoted(e, None, &m);
                }
            }
        }
        w.delete_entries(list, &spans, &keep);
        Ok(())
    }

    /// Everywhere else: `$ref`, `x-kubernetes-group-version-kind`,
    /// `serverRelativeURL`.
    fn generic<'i>(&self, w: &mut Walk<'i>, v: Raw<'i>) -> Result<(), RewriteError> {
        if !self.may(w, v) {
            return Ok(());
        }
        if let Some(ms) = w.members(v)? {
            for (k, c) in ms.iter() {
                match k.0.as_ref() {
                    REF => {
                        if let Some(r) = string(c)? {
                            if let Some(m) = self.map_ref(&r) {
                                w.replace_quoted(c, None, &m);
                            }
                        }
                    }
                    GVK => {
                        // A list on definitions, a single object on operations.
                        let gvks: Vec<Raw<'i>> = match w.elements(c)? {
                            Some(es) => es.iter().collect(),
                            None => vec![c],
                        };
                        for gvk in gvks {
                            if let Some(gms) = w.members(gvk)? {
                                for (gk, gv) in gms.iter() {
                                    if gk.0 == "group" {
                                        if let Some(m) = string(gv)?
                                            .and_then(|g| self.map.map_group(&g, self.dir))
                                        {
                                            w.replace_quoted(gv, None, &m);
                                        }
                                    }
                                }
                            }
                        }
                    }
                    SERVER_RELATIVE_URL => {
                        if let Some(u) = string(c)? {
                            let mut url = self
                                .map
                                .map_api_path(&u, self.dir)
                                .unwrap_or_else(|| u.to_string());
                            if let Some(at) = url.find("hash=") {
                                let end = url[at..].find('&').map_or(url.len(), |e| at + e);
                                url.insert_str(end, &self.hash_tag);
                            }
                            if url != u.as_ref() {
                                w.replace_quoted(c, None, &url);
                            }
                        }
                    }
                    _ => self.generic(w, c)?,
                }
            }
        } else if let Some(es) = w.elements(v)? {
            for e in es.iter() {
                self.generic(w, e)?;
            }
        }
        Ok(())
    }

    /// `#/definitions/NAME` or `#/components/schemas/NAME`.
    fn map_ref(&self, r: &str) -> Option<String> {
        let (prefix, name) = r.rsplit_once('/')?;
        let m = self.map.map_reverse_dns(name, self.dir)?;
        Some(format!("{prefix}/{m}"))
    }
}

/// The group a path names after `apis/` (also `/openapi/v3/apis/`), if any.
pub(crate) fn group_of_path(path: &str) -> Option<&str> {
    let p = path.trim_start_matches('/');
    let p = p.strip_prefix("openapi/v3/").unwrap_or(p);
    let rest = p.strip_prefix("apis/")?;
    Some(rest.split(['/', '?']).next().unwrap_or(rest))
}

#[cfg(test)]
mod tests;
