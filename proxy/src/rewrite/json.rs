//! Applies the [catalog](super::catalog) to `serde_json::Value` objects.
//!
//! The reference walker: used by `regroup render`, for request bodies, and as
//! the structured path the streaming codecs fall back to when a buffer
//! contains a mapped name.

use regroup_config::dns::MAX_SUBDOMAIN;
use regroup_config::field_path::Step;
use regroup_config::{Direction, Form, GroupMap};
use serde_json::Value as Json;

use super::catalog::{Catalog, Slot};

/// Why an object could not be renamed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RewriteError {
    /// A field that must hold JSON (an apiserver-written annotation) doesn't.
    #[error("`{0}` must hold JSON: {1}")]
    EmbeddedJson(String, String),
    /// A renamed name would not be a valid Kubernetes name any more.
    #[error("renaming `{from}` gives `{to}`, longer than {MAX_SUBDOMAIN} characters")]
    TooLong {
        /// The name before.
        from: String,
        /// The name after.
        to: String,
    },
}

/// The group and kind of an object, as found in its input.
#[derive(Clone, Debug)]
struct TypeOf {
    /// `apiVersion` as it arrived (input naming), or empty.
    api_version: String,
    kind: String,
}

impl TypeOf {
    fn group(&self) -> &str {
        self.api_version.split_once('/').map_or("", |(g, _)| g)
    }
}

/// Renames groups in JSON objects, in one direction.
pub struct JsonRewriter<'a> {
    map: &'a GroupMap,
    catalog: &'a Catalog,
    dir: Direction,
}

impl<'a> JsonRewriter<'a> {
    /// A rewriter for `dir`.
    pub fn new(map: &'a GroupMap, catalog: &'a Catalog, dir: Direction) -> Self {
        JsonRewriter { map, catalog, dir }
    }

    /// Renames every catalogued place in `obj`, an object of any kind
    /// (including lists, tables, watch events, Status and discovery
    /// documents). Returns whether anything changed.
    pub fn rewrite(&self, obj: &mut Json) -> Result<bool, RewriteError> {
        self.object(obj, None, None)
    }

    /// Like [`rewrite`](Self::rewrite), for a response to a request that
    /// addressed objects of `group`/`kind` (app names): metadata-only forms
    /// (`PartialObjectMetadata`, also inside lists, Table rows and watch
    /// events) lose their kind, but their name may still carry a group
    /// (`version.group` of an APIService). See [`Catalog::kind_for_resource`].
    pub fn rewrite_addressed(
        &self,
        obj: &mut Json,
        group: &str,
        kind: &str,
    ) -> Result<bool, RewriteError> {
        let addressed = (group, kind);
        self.object(obj, None, Some(addressed))
    }

    /// Like [`rewrite`](Self::rewrite), for a partial object (a merge or
    /// strategic-merge patch) that may lack `apiVersion`/`kind`: they are
    /// taken from `api_version`/`kind` (input naming) when absent.
    pub fn rewrite_as(
        &self,
        obj: &mut Json,
        api_version: &str,
        kind: &str,
    ) -> Result<bool, RewriteError> {
        let hint = TypeOf {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        };
        self.object(obj, Some(&hint), None)
    }

    fn object(
        &self,
        obj: &mut Json,
        hint: Option<&TypeOf>,
        addressed: Option<(&str, &str)>,
    ) -> Result<bool, RewriteError> {
        let Some(members) = obj.as_object() else {
            return Ok(false);
        };
        let str_of = |k: &str| members.get(k).and_then(Json::as_str).map(str::to_owned);
        let mut ty = TypeOf {
            api_version: str_of("apiVersion")
                .or_else(|| hint.map(|h| h.api_version.clone()))
                .unwrap_or_default(),
            kind: str_of("kind")
                .or_else(|| hint.map(|h| h.kind.clone()))
                .unwrap_or_default(),
        };
        if ty.kind.is_empty() && members.contains_key("type") && members.contains_key("object") {
            ty = TypeOf {
                api_version: "meta.k8s.io/v1".into(),
                kind: "WatchEvent".into(),
            };
        }
        let group_in = ty.group();
        let app_group = match self.dir {
            Direction::ToApp => self.map.map_group(group_in, Direction::ToApp),
            Direction::ToCluster => None,
        };
        let mut app_group = app_group.as_deref().unwrap_or(group_in);
        let mut kind = ty.kind.as_str();
        if let Some((g, k)) = addressed.filter(|_| kind == "PartialObjectMetadata") {
            (app_group, kind) = (g, k);
        }

        let mut changed = false;
        let mut embedded: Vec<&str> = Vec::new();
        for place in self.catalog.places_for(app_group, kind) {
            let slot = place.slot;
            if matches!(slot, Slot::Object | Slot::Items) {
                if let Some(Step::Key(k)) = place.path.steps().first() {
                    embedded.push(k);
                }
            }
            let mut result = Ok(());
            visit(obj, place.path.steps(), &mut |leaf| {
                if result.is_err() {
                    return;
                }
                match self.slot(leaf, slot, &ty, addressed) {
                    Ok(c) => changed |= c,
                    Err(e) => result = Err(e),
                }
            });
            result?;
        }
        changed |= self.reference_keys(obj, kind, None, 0, &embedded);
        Ok(changed)
    }

    fn slot(
        &self,
        leaf: &mut Json,
        slot: Slot,
        ty: &TypeOf,
        addressed: Option<(&str, &str)>,
    ) -> Result<bool, RewriteError> {
        match slot {
            Slot::Value(form) => self.value(leaf, form),
            Slot::Object => self.object(leaf, None, addressed),
            Slot::Items => {
                let Some(items) = leaf.as_array_mut() else {
                    return Ok(false);
                };
                // A typed list's items omit apiVersion/kind; `v1 List` items
                // always carry their own.
                let hint = ty
                    .kind
                    .strip_suffix("List")
                    .filter(|k| !k.is_empty())
                    .map(|k| TypeOf {
                        api_version: ty.api_version.clone(),
                        kind: k.to_owned(),
                    });
                let mut changed = false;
                for item in items {
                    changed |= self.object(item, hint.as_ref(), addressed)?;
                }
                Ok(changed)
            }
            Slot::JsonString(inner, form) => {
                let Some(text) = leaf.as_str() else {
                    return Ok(false);
                };
                if !self.map.needles(self.dir).iter().any(|n| text.contains(n)) {
                    return Ok(false);
                }
                let mut doc: Json = serde_json::from_str(text)
                    .map_err(|e| RewriteError::EmbeddedJson(inner.to_owned(), e.to_string()))?;
                let steps = regroup_config::field_path::FieldPath::parse(inner)
                    .expect("catalog sub-paths are valid");
                let mut changed = false;
                let mut result = Ok(());
                let mut apply = |v: &mut Json| {
                    visit(v, steps.steps(), &mut |l| match self.value(l, form) {
                        Ok(c) => changed |= c,
                        Err(e) => result = Err(e),
                    })
                };
                match doc.as_array_mut() {
                    Some(elems) => elems.iter_mut().for_each(&mut apply),
                    None => apply(&mut doc),
                }
                result?;
                if changed {
                    *leaf = Json::String(doc.to_string());
                }
                Ok(changed)
            }
            Slot::DropShadowed(sub) => {
                let Some(entries) = leaf.as_array_mut() else {
                    return Ok(false);
                };
                let steps = regroup_config::field_path::FieldPath::parse(sub)
                    .expect("catalog sub-paths are valid");
                let before = entries.len();
                entries.retain(|e| {
                    let name = get(e, steps.steps()).and_then(Json::as_str);
                    !name.is_some_and(|g| self.map.is_shadowed(g, self.dir))
                });
                Ok(entries.len() != before)
            }
        }
    }

    fn value(&self, leaf: &mut Json, form: Form) -> Result<bool, RewriteError> {
        let Some(s) = leaf.as_str() else {
            return Ok(false);
        };
        let Some(mapped) = self.map.map(form, s, self.dir) else {
            return Ok(false);
        };
        if matches!(form, Form::Group | Form::QualifiedName) && mapped.len() > MAX_SUBDOMAIN {
            return Err(RewriteError::TooLong {
                from: s.to_owned(),
                to: mapped,
            });
        }
        *leaf = Json::String(mapped);
        Ok(true)
    }

    /// The heuristic: string values of keys named `apiGroup`/`apiVersion`
    /// anywhere in the object, except in user-data maps and in embedded
    /// objects (which get their own pass, knowing their kind).
    fn reference_keys(
        &self,
        v: &mut Json,
        kind: &str,
        parent: Option<&str>,
        depth: usize,
        embedded: &[&str],
    ) -> bool {
        let mut changed = false;
        match v {
            Json::Object(members) => {
                for (k, child) in members.iter_mut() {
                    if (depth == 0 && embedded.contains(&k.as_str()))
                        || Catalog::reference_keys_skip(kind, parent, depth, k)
                    {
                        continue;
                    }
                    let mapped = match (k.as_str(), child.as_str()) {
                        ("apiVersion", Some(s)) => {
                            self.map.map_api_version_by_reference_key(s, self.dir)
                        }
                        ("apiGroup", Some(s)) => self.map.map_group_by_reference_key(s, self.dir),
                        _ => None,
                    };
                    if let Some(m) = mapped {
                        *child = Json::String(m);
                        changed = true;
                    } else {
                        changed |= self.reference_keys(child, kind, Some(k), depth + 1, embedded);
                    }
                }
            }
            Json::Array(elems) => {
                for e in elems {
                    changed |= self.reference_keys(e, kind, parent, depth, embedded);
                }
            }
            _ => {}
        }
        changed
    }
}

/// Calls `f` on every value reached by `steps` (missing members and
/// mismatched types are simply not reached).
fn visit(v: &mut Json, steps: &[Step], f: &mut dyn FnMut(&mut Json)) {
    match steps.split_first() {
        None => f(v),
        Some((Step::Key(k), rest)) => {
            if let Some(child) = v.as_object_mut().and_then(|m| m.get_mut(k.as_str())) {
                visit(child, rest, f);
            }
        }
        Some((Step::Each, rest)) => {
            if let Some(elems) = v.as_array_mut() {
                for e in elems {
                    visit(e, rest, f);
                }
            }
        }
    }
}

/// The value at a path without `[]` steps.
fn get<'v>(v: &'v Json, steps: &[Step]) -> Option<&'v Json> {
    steps.iter().try_fold(v, |v, s| match s {
        Step::Key(k) => v.get(k.as_str()),
        Step::Each => None,
    })
}

#[cfg(test)]
mod tests;
