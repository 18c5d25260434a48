//! Applies the [catalog](super::catalog) to JSON, splicing bytes.
//!
//! The input is validated and its containers read into a tape in one
//! pass (see [`super::raw`]); the walk follows only the catalog's
//! paths, and only into subtrees whose bytes contain a mapped name (or a
//! `\u` escape that could hide one). Each renamed string becomes an
//! edit of its byte range; every other byte (whitespace, member order,
//! number spelling, escapes) is copied as it came. A body with no mapped name
//! at all is not parsed.

use std::borrow::Cow;

use crate::rewrite::raw::Raw;
use regroup_config::dns::MAX_SUBDOMAIN;
use regroup_config::field_path::Step;
use regroup_config::{Direction, Form, GroupMap};
use serde_json::Value as Json;

use super::catalog::{self, Catalog, PlaceTree, RefMembers, Slot};
use super::names::NameIndex;
use super::raw::{member, plain_or_string, quote, string, Members, Walk};
use precheck::Precheck;

pub(crate) use super::error::malformed;
pub use super::error::RewriteError;

/// The group and kind of an object, as found in its input.
/// Borrowed from the input (or the caller's hint) unless escaped.
#[derive(Clone, Debug, Default)]
struct TypeOf<'t> {
    /// `apiVersion` as it arrived (input naming), or empty.
    api_version: Cow<'t, str>,
    kind: Cow<'t, str>,
}

impl TypeOf<'_> {
    fn group(&self) -> &str {
        crate::kube::group_of(&self.api_version)
    }
}

/// Renames groups in JSON bodies, in one direction.
pub struct JsonRewriter<'a> {
    map: &'a GroupMap,
    catalog: &'a Catalog,
    dir: Direction,
    /// Every mapped name of both directions (shadowing looks for the other
    /// side's names), shared by the configuration's codecs.
    index: NameIndex,
    /// The searches run over a whole body before it is parsed: the names,
    /// the `names:` kinds and the quoted member names of places whose value
    /// hides names from the byte search (a base64 JSON Patch, see
    /// [`Catalog::encoded_members`]).
    precheck: Precheck,
}

impl<'a> JsonRewriter<'a> {
    /// A rewriter for `dir`, for this crate's tests: otherwise the
    /// [`Engine`](super::engine::Engine) builds them.
    #[cfg(test)]
    pub(crate) fn new(map: &'a GroupMap, catalog: &'a Catalog, dir: Direction) -> Self {
        Self::with_index(map, catalog, dir, NameIndex::new(map))
    }

    /// A rewriter for `dir` sharing the configuration's name index.
    pub(crate) fn with_index(
        map: &'a GroupMap,
        catalog: &'a Catalog,
        dir: Direction,
        index: NameIndex,
    ) -> Self {
        let members: Vec<String> = catalog.encoded_members().collect();
        let precheck = Precheck::new(&index, &members);
        JsonRewriter {
            map,
            catalog,
            dir,
            index,
            precheck,
        }
    }

    /// The direction this rewriter renames in.
    pub fn direction(&self) -> Direction {
        self.dir
    }

    /// True when `bytes` could contain a name this rewriter maps (or hides).
    /// When false, the bytes can be forwarded untouched without parsing.
    pub fn may_contain(&self, bytes: &[u8]) -> bool {
        self.index.json().is_match(bytes)
    }

    /// True when binary `bytes` (protobuf) contain a mapped name of either
    /// side.
    pub fn may_contain_name(&self, bytes: &[u8]) -> bool {
        self.index.names().is_match(bytes)
    }

    /// Renames every catalogued place in `input`, one JSON object of any
    /// kind (including lists, tables, watch events, Status and discovery
    /// documents). `Ok(None)`: nothing to rename; forward `input` as is.
    /// For this crate's tests; bodies are renamed through the
    /// [`Engine`](super::engine::Engine).
    #[cfg(test)]
    pub(crate) fn rewrite_bytes(&self, input: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        self.bytes(input, None, None)
    }

    /// [`rewrite_bytes`](Self::rewrite_bytes) with what the body is about:
    /// `hint` (`apiVersion`, `kind`, input naming) stands in for members a
    /// partial object (a merge or strategic-merge patch) lacks; `addressed`
    /// (`group`, `kind`, app names) is what the request addressed, for
    /// metadata-only forms (`PartialObjectMetadata`, also in lists, Table
    /// rows and watch events) that lose their kind while their name may
    /// still carry a group (`version.group` of an APIService, see
    /// [`Catalog::kind_for_resource`]).
    pub(crate) fn rewrite_bytes_with(
        &self,
        input: &[u8],
        hint: Option<(&str, &str)>,
        addressed: Option<(&str, &str)>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        let hint = hint.map(|(a, k)| TypeOf {
            api_version: Cow::Borrowed(a),
            kind: Cow::Borrowed(k),
        });
        self.bytes(input, hint.as_ref(), addressed)
    }

    fn bytes(
        &self,
        input: &[u8],
        hint: Option<&TypeOf<'_>>,
        addressed: Option<(&str, &str)>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        // One search for every question asked of the whole body (unless
        // the request already says a `names:` kind is involved): where the
        // names occur, the pre-check and the walk's own search; whether a
        // `names:` kind occurs; whether a value hides names. A body with
        // none of them and no `\u` (which could hide a name) is not parsed.
        let mut force = self.kind_named(hint.map(|h| (&*h.api_version, &*h.kind)), addressed);
        let mut found = None;
        if !force {
            let seen = self.precheck.scan(input);
            if seen.found.is_empty() && !seen.kinds && !seen.hides {
                return Ok(None);
            }
            force = seen.kinds;
            found = (!force).then_some(seen.found);
        }
        let text = utf8(input)?;
        let (mut walk, root) = Walk::parse(text)?;
        walk.force = force;
        if let Some(found) = found {
            walk.found(found);
        }
        self.object(&mut walk, root, hint, addressed)?;
        Ok(walk.finish().map(String::into_bytes))
    }

    /// [`rewrite_bytes_with`](Self::rewrite_bytes_with) on a
    /// `serde_json::Value`, in place (through the same byte engine).
    /// Returns whether anything changed.
    pub(crate) fn rewrite_value(
        &self,
        obj: &mut Json,
        hint: Option<(&str, &str)>,
        addressed: Option<(&str, &str)>,
    ) -> Result<bool, RewriteError> {
        self.value_via_bytes(obj, |b| self.rewrite_bytes_with(b, hint, addressed))
    }

    fn value_via_bytes(
        &self,
        obj: &mut Json,
        f: impl FnOnce(&[u8]) -> Result<Option<Vec<u8>>, RewriteError>,
    ) -> Result<bool, RewriteError> {
        let bytes = serde_json::to_vec(obj).map_err(malformed)?;
        match f(&bytes)? {
            Some(out) => {
                *obj = serde_json::from_slice(&out).map_err(malformed)?;
                Ok(true)
            }
            None => Ok(false),
        }
    }

    /// True when `input` (of type `hint`, `apiVersion` and `kind`, when it
    /// names none; answering a request for `addressed`) may hold a name of
    /// a kind listed in `names:`. Such names are any string, so no byte
    /// search finds them: the whole object is then walked (see
    /// [`Walk::force`]).
    pub(crate) fn names_involved(
        &self,
        input: &[u8],
        hint: Option<(&str, &str)>,
        addressed: Option<(&str, &str)>,
    ) -> bool {
        self.kind_named(hint, addressed) || self.index.names_involved(input)
    }

    /// True when the object's kind, by `hint` or `addressed` (see
    /// [`names_involved`](Self::names_involved)), is one `names:` lists.
    fn kind_named(&self, hint: Option<(&str, &str)>, addressed: Option<(&str, &str)>) -> bool {
        let Some(names) = self.map.object_names() else {
            return false;
        };
        let group = |api_version: &str| crate::kube::group_of(api_version).to_owned();
        addressed.is_some_and(|(g, k)| names.involves_kind(g, k))
            || hint.is_some_and(|(a, k)| names.involves_kind(&group(a), k))
    }

    /// True when `raw` could hold a mapped name (memoized per value).
    fn may<'i>(&self, w: &mut Walk<'i>, raw: Raw<'i>) -> bool {
        if w.force {
            return true;
        }
        // Without an escape in the input, no name hides behind one: the
        // search for `\u` is left out.
        let needles = if w.escapes {
            self.index.json()
        } else {
            self.index.names()
        };
        w.may_contain(needles, raw)
    }

    /// [`may`](Self::may), or `raw` holds a base64 place.
    fn may_or_hides<'i>(&self, w: &mut Walk<'i>, raw: Raw<'i>) -> bool {
        self.may(w, raw) || self.precheck.may_hide(raw.get().as_bytes())
    }

    fn object<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        hint: Option<&TypeOf<'_>>,
        addressed: Option<(&str, &str)>,
    ) -> Result<(), RewriteError> {
        if !self.may_or_hides(w, raw) {
            return Ok(());
        }
        let Some(ms) = w.members(raw)? else {
            return Ok(());
        };
        let ty = type_of(&ms, hint)?;
        let (app_group, kind) = self.app_type(&ty, addressed);
        let app_group = app_group.as_ref();

        let excluded = self.excluded(w, raw, kind)?;
        let places = self.catalog.type_places(app_group, kind);
        let tree = places.tree;
        // Where each place's path ends in this object, found in one walk
        // down the places' tree, then applied in the places' order (the
        // sort is stable: one place's values stay in document order), as
        // if each place were walked on its own. Only the places found and
        // those the tree lists as always visited are looked at, in order
        // (one merge), not every place of the type: most find nothing.
        let since = w.edit_count();
        let mut found = std::mem::take(&mut w.found);
        found.clear();
        self.places_in(w, raw, tree, 0, true, excluded, &mut found, Some(&ms))?;
        found.sort_by_key(|(at, _)| *at);
        let (mut next, mut always) = (0, 0);
        let mut embedded: Vec<&str> = Vec::new();
        loop {
            let at = match (found.get(next), tree.visited.get(always)) {
                (None, None) => break,
                (Some((f, _)), None) => *f,
                (None, Some(v)) => *v,
                (Some((f, _)), Some(v)) => (*f).min(*v),
            };
            if tree.visited.get(always) == Some(&at) {
                always += 1;
            }
            let place = places.place(at);
            if excluded && catalog::is_metadata_slot(&place.slot) {
                // The tree found none of them (`places_in` skips them).
                while found.get(next).is_some_and(|(a, _)| *a == at) {
                    next += 1;
                }
                continue;
            }
            if PlaceTree::embeds(&place.slot) {
                if let Some(Step::Key(k)) = place.path.steps().first() {
                    embedded.push(k);
                }
            }
            if let Slot::ShortForm {
                group,
                group_form,
                form,
            } = place.slot
            {
                self.short_forms(w, raw, group, group_form, place.path.steps(), form)?;
                continue;
            }
            if let Slot::TableRows {
                columns,
                cells,
                object,
            } = place.slot
            {
                self.table_rows(w, raw, &place.path, [columns, cells, object], addressed)?;
                continue;
            }
            while let Some((_, v)) = found.get(next).filter(|(a, _)| *a == at) {
                self.slot(w, *v, place.slot, &ty, addressed)?;
                next += 1;
            }
        }
        w.found = found;
        // The heuristic renames only strings holding a name; when the
        // places replaced every one already, it has nothing left to do
        // (−1.8k instructions a rename of the Foo).
        if w.names_all_replaced(raw, since) {
            return Ok(());
        }
        self.reference_keys(w, raw, kind, None, 0, &embedded, Some(&ms))
    }

    /// The group (app names) and kind whose places apply to an object of
    /// type `ty`: metadata-only objects take the addressed kind.
    fn app_type<'t>(
        &self,
        ty: &'t TypeOf<'_>,
        addressed: Option<(&'t str, &'t str)>,
    ) -> (Cow<'t, str>, &'t str)
    where
        'a: 't,
    {
        let group_in = ty.group();
        let mut app_group = match self.dir {
            Direction::ToApp => self
                .map
                .map_group_cow(group_in, Direction::ToApp)
                .unwrap_or(Cow::Borrowed(group_in)),
            Direction::ToCluster => Cow::Borrowed(group_in),
        };
        let mut kind: &str = &ty.kind;
        if let Some((g, k)) = addressed.filter(|_| kind == "PartialObjectMetadata") {
            (app_group, kind) = (Cow::Borrowed(g), k);
        }
        (app_group, kind)
    }

    fn place<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        steps: &[Step],
        slot: Slot,
        ty: &TypeOf<'_>,
        addressed: Option<(&str, &str)>,
    ) -> Result<(), RewriteError> {
        // Shadowing must see every entry; everything else only where a
        // mapped name could be.
        let visit = match slot {
            Slot::DropShadowed(_) => true,
            // The encoded value itself hides what it holds.
            Slot::Base64JsonPatch => steps.is_empty() || self.may_or_hides(w, raw),
            _ => self.may(w, raw),
        };
        if !visit {
            return Ok(());
        }
        match steps.split_first() {
            None => self.slot(w, raw, slot, ty, addressed),
            Some((Step::Key(k), rest)) => {
                if let Some(ms) = w.members(raw)? {
                    for v in ms.named(k) {
                        self.place(w, v, rest, slot, ty, addressed)?;
                    }
                }
                Ok(())
            }
            Some((Step::Each, rest)) => {
                if let Some(es) = w.elements(raw)? {
                    for e in es.iter() {
                        self.place(w, e, rest, slot, ty, addressed)?;
                    }
                }
                Ok(())
            }
        }
    }

    fn slot<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        slot: Slot,
        ty: &TypeOf<'_>,
        addressed: Option<(&str, &str)>,
    ) -> Result<(), RewriteError> {
        match slot {
            Slot::Value(form) => self.value(w, raw, form),
            Slot::Object => self.object(w, raw, None, addressed),
            Slot::Items => {
                let Some(items) = w.elements(raw)? else {
                    return Ok(());
                };
                let hint = item_hint(ty);
                for item in items.iter() {
                    self.object(w, item, hint.as_ref(), addressed)?;
                }
                Ok(())
            }
            Slot::JsonString(inner, form) => self.json_string(w, raw, inner, form),
            Slot::JsonObject => self.json_object(w, raw),
            Slot::Labels => self.labels(w, raw),
            Slot::LabelRequirement { key, values } => self.label_requirement(w, raw, key, values),
            Slot::FieldsV1 => self.fields_v1(w, raw, ty, addressed),
            Slot::Keys(Form::MetadataKey) => self.metadata_keys(w, raw),
            Slot::Base64JsonPatch => self.base64_json_patch(w, raw, addressed),
            Slot::DropShadowed(sub) => self.drop_shadowed(w, raw, sub),
            Slot::DropHidden => self.drop_hidden(w, raw, ty, addressed),
            // Applied from the Table itself (see `object`).
            Slot::TableRows { .. } => Ok(()),
            Slot::Keys(form) => self.keys(w, raw, form),
            Slot::Requirement { key, values } => {
                let Some(ms) = w.members(raw)? else {
                    return Ok(());
                };
                let Some(k) = member(&ms, key).map(string).transpose()?.flatten() else {
                    return Ok(());
                };
                let Some(form) = requirement_form(&k) else {
                    return Ok(());
                };
                let Some(vs) = member(&ms, values) else {
                    return Ok(());
                };
                if let Some(es) = w.elements(vs)? {
                    for e in es.iter() {
                        self.value(w, e, form)?;
                    }
                }
                Ok(())
            }
            Slot::NameOf {
                group,
                resource,
                name,
            } => {
                let Some(ms) = w.members(raw)? else {
                    return Ok(());
                };
                let text = |k: &str| -> Result<Option<Cow<'i, str>>, RewriteError> {
                    Ok(match member(&ms, k) {
                        Some(v) => string(v)?,
                        None => None,
                    })
                };
                let (Some(g), Some(r)) = (text(group)?, text(resource)?) else {
                    return Ok(());
                };
                match (
                    member(&ms, name),
                    Catalog::name_form_of_resource(self.map, &g, &r),
                ) {
                    (Some(v), Some(form)) => self.value(w, v, form),
                    _ => Ok(()),
                }
            }
            Slot::NamedRef(m) => self.named_ref(w, raw, m),
            Slot::JsonSchema => self.json_schema(w, raw),
            // Applied from the object itself, which holds the group (see
            // `object`).
            Slot::ShortForm { .. } => Ok(()),
        }
    }

    /// The short forms at `steps` of the object `raw`
    /// ([`Slot::ShortForm`]): renamed when the object's group, read at
    /// `group` (a dotted path) in `group_form`, is one the rules rename in
    /// this direction. The names themselves hold no mapped name, so the
    /// walk to them skips the byte search.
    fn short_forms<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        group: &str,
        group_form: Form,
        steps: &[Step],
        form: Form,
    ) -> Result<(), RewriteError> {
        let mut v = raw;
        for k in group.split('.') {
            let Some(ms) = w.members(v)? else {
                return Ok(());
            };
            match member(&ms, k) {
                Some(next) => v = next,
                None => return Ok(()),
            }
        }
        let Some(g) = string(v)? else {
            return Ok(());
        };
        let g = match group_form {
            Form::ApiVersion => crate::kube::group_of(&g),
            _ => &g,
        };
        if self.map.rule_for(g, self.dir).is_none() {
            return Ok(());
        }
        self.each_short_form(w, raw, steps, form)
    }

    fn each_short_form<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        steps: &[Step],
        form: Form,
    ) -> Result<(), RewriteError> {
        match steps.split_first() {
            None => {
                let Some(s) = string(raw)? else {
                    return Ok(());
                };
                if let Some(mapped) = short_form(self.map, form, &s, self.dir)? {
                    w.replace_quoted(raw, None, &mapped);
                }
                Ok(())
            }
            Some((Step::Key(k), rest)) => {
                if let Some(ms) = w.members(raw)? {
                    for v in ms.named(k) {
                        self.each_short_form(w, v, rest, form)?;
                    }
                }
                Ok(())
            }
            Some((Step::Each, rest)) => {
                if let Some(es) = w.elements(raw)? {
                    for e in es.iter() {
                        self.each_short_form(w, e, rest, form)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// A reference by type and name ([`Slot::NamedRef`]): the name in the
    /// form of the named kind's own name, if it has one.
    fn named_ref<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        m: RefMembers,
    ) -> Result<(), RewriteError> {
        let flat = ![m.api, m.kind, m.name].iter().any(|p| p.contains('.'));
        let (api, kind, name) = if flat {
            // One look-up of the members and one pass over them, instead
            // of one each (−1.2k instructions a Deployment's owner).
            let Some(ms) = w.members(raw)? else {
                return Ok(());
            };
            let [api, kind, name] = ms.get_all([m.api, m.kind, m.name]);
            (api, kind, name)
        } else {
            // Members may be dotted sub-paths (`kind.group` of a review).
            let mut at = |path: &str| -> Result<Option<Raw<'i>>, RewriteError> {
                let mut v = raw;
                for k in path.split('.') {
                    let Some(ms) = w.members(v)? else {
                        return Ok(None);
                    };
                    match member(&ms, k) {
                        Some(next) => v = next,
                        None => return Ok(None),
                    }
                }
                Ok(Some(v))
            };
            (at(m.api)?, at(m.kind)?, at(m.name)?)
        };
        let text = |v: Option<Raw<'i>>| -> Result<Option<Cow<'i, str>>, RewriteError> {
            Ok(match v {
                Some(v) => string(v)?,
                None => None,
            })
        };
        let (Some(api), Some(kind)) = (text(api)?, text(kind)?) else {
            return Ok(());
        };
        let group = match m.api_form {
            Form::ApiVersion => crate::kube::group_of(&api),
            _ => &api,
        };
        let app_group = match self.dir {
            Direction::ToApp => self.map.map_group_cow(group, Direction::ToApp),
            Direction::ToCluster => None,
        };
        let group = app_group.as_deref().unwrap_or(group);
        match (name, self.catalog.name_form(group, &kind)) {
            (Some(v), Some(form)) => self.value(w, v, form),
            _ => Ok(()),
        }
    }

    /// The member names of the object `raw` that name a group in `form`.
    fn keys<'i>(&self, w: &mut Walk<'i>, raw: Raw<'i>, form: Form) -> Result<(), RewriteError> {
        let Some(ms) = w.members(raw)? else {
            return Ok(());
        };
        for (key, v) in ms.iter() {
            let Some(mapped) = self.map.map(form, &key.0, self.dir) else {
                continue;
            };
            let start = w
                .member_start(v)
                .ok_or_else(|| malformed("a member name not found before its value"))?;
            let end = w.string_end(start);
            w.replace_range(start, end, &quote(&mapped));
        }
        Ok(())
    }

    fn value<'i>(&self, w: &mut Walk<'i>, raw: Raw<'i>, form: Form) -> Result<(), RewriteError> {
        let Some(s) = plain_or_string(w.escapes, raw)? else {
            return Ok(());
        };
        if matches!(form, Form::MetadataKey | Form::LabelSelector | Form::Cel) {
            if let Some(mapped) = self.metadata_value(form, &s)? {
                w.replace_quoted(raw, None, &mapped);
            }
            return Ok(());
        }
        check_generate_name(self.map, form, &s, self.dir)?;
        if let Some(text) = w.mapped_before(raw, form) {
            w.replace_again(raw, form, text);
            return Ok(());
        }
        if form == Form::ApiVersion {
            // The most common place: mapped into the walk's texts.
            let (map, dir) = (self.map, self.dir);
            w.replace_quoted_with(raw, form, |out| map.map_api_version_into(&s, dir, out));
            return Ok(());
        }
        let Some(mapped) = self.map.map(form, &s, self.dir) else {
            return Ok(());
        };
        if matches!(form, Form::Group | Form::QualifiedName) && mapped.len() > MAX_SUBDOMAIN {
            return Err(RewriteError::TooLong {
                from: s.into_owned(),
                to: mapped,
            });
        }
        w.replace_quoted(raw, Some(form), &mapped);
        Ok(())
    }
}

/// A `generateName` the cluster can't honour with this copy's names (a
/// suffix can't follow the random part): an error, said to the app.
pub(crate) fn check_generate_name(
    map: &GroupMap,
    form: Form,
    value: &str,
    dir: Direction,
) -> Result<(), RewriteError> {
    match map.object_names() {
        Some(n)
            if form == Form::GenerateName && dir == Direction::ToCluster && !value.is_empty() =>
        {
            n.generate_name_to_cluster(value)
                .map(drop)
                .map_err(|e| RewriteError::Names(e.to_string()))
        }
        _ => Ok(()),
    }
}

/// A short name or category renamed per copy (`names.shortNamePrefix`);
/// one that would exceed Kubernetes' limit (a DNS-1035 label, 63
/// characters) is refused, naming it.
pub(crate) fn short_form(
    map: &GroupMap,
    form: Form,
    value: &str,
    dir: Direction,
) -> Result<Option<String>, RewriteError> {
    let Some(mapped) = map.map(form, value, dir) else {
        return Ok(None);
    };
    if dir == Direction::ToCluster && mapped.len() > regroup_config::short_names::MAX_LEN {
        let what = if form == Form::Category {
            "category"
        } else {
            "short name"
        };
        return Err(RewriteError::Names(format!(
            "the {what} `{value}` with names.shortNamePrefix is `{mapped}`, longer than {} \
             characters, which Kubernetes refuses (shorten the prefix or the name)",
            regroup_config::short_names::MAX_LEN
        )));
    }
    Ok(Some(mapped))
}

/// The form of a selector requirement's values by its key, as a query's
/// field selector reads them.
pub(crate) fn requirement_form(key: &str) -> Option<Form> {
    let key = key.trim();
    if key.ends_with(".apiVersion") {
        Some(Form::ApiVersion)
    } else if key.ends_with(".apiGroup") {
        Some(Form::Group)
    } else {
        None
    }
}

/// The type of an object from its members, `hint` standing in for those it
/// lacks; a watch event (`type` and `object`, no kind) is a `WatchEvent`.
fn type_of<'t>(ms: &Members<'t>, hint: Option<&TypeOf<'t>>) -> Result<TypeOf<'t>, RewriteError> {
    let str_of = |v: Option<Raw<'t>>| -> Result<Option<Cow<'t, str>>, RewriteError> {
        Ok(match v {
            Some(v) => ms.string(v)?,
            None => None,
        })
    };
    let (api_version, kind) = ms.get_two("apiVersion", "kind");
    let ty = TypeOf {
        api_version: str_of(api_version)?
            .or_else(|| hint.map(|h| h.api_version.clone()))
            .unwrap_or_default(),
        kind: str_of(kind)?
            .or_else(|| hint.map(|h| h.kind.clone()))
            .unwrap_or_default(),
    };
    if ty.kind.is_empty() && member(ms, "type").is_some() && member(ms, "object").is_some() {
        return Ok(TypeOf {
            api_version: "meta.k8s.io/v1".into(),
            kind: "WatchEvent".into(),
        });
    }
    Ok(ty)
}

/// `input` as text, or the refusal std's `from_utf8` words (simdutf8's
/// fast check says only whether the bytes are UTF-8).
fn utf8(input: &[u8]) -> Result<&str, RewriteError> {
    simdutf8::basic::from_utf8(input).or_else(|_| std::str::from_utf8(input).map_err(malformed))
}

/// A typed list's items omit apiVersion/kind: the list's kind without
/// `List` stands in (`v1 List` items always carry their own).
fn item_hint<'a>(list: &'a TypeOf<'_>) -> Option<TypeOf<'a>> {
    list.kind
        .strip_suffix("List")
        .filter(|k| !k.is_empty())
        .map(|k| TypeOf {
            api_version: Cow::Borrowed(&list.api_version),
            kind: Cow::Borrowed(k),
        })
}

mod embedded;
mod encoded_patch;
pub(crate) mod json_patch;
mod metadata;
mod place_tree;
mod precheck;
mod reference_keys;
mod schema;
mod shadowed;
mod tables;

pub(crate) use tables::is_object_event;
pub(crate) use tables::name_column;

#[cfg(test)]
mod tests;
