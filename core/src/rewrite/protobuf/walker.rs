//! The wire-format walk: along a [`Plan`], only into fields whose bytes hold
//! a mapped name, collecting edits (renamed strings, dropped entries, the
//! length prefixes above them); everything else is copied as it came.

use regroup_config::dns::MAX_SUBDOMAIN;
use regroup_config::field_path::FieldPath;
use regroup_config::{Direction, Form};

use super::plan::{Act, Node, Plan};
use super::wire::{last_len_field, put_varint, wrong_wire, Field, Fields, LEN};
use super::{malformed, ProtoRewriter};
use crate::rewrite::catalog::Catalog;
use crate::rewrite::error::RewriteError;
use crate::rewrite::json::{check_generate_name, requirement_form, short_form};

/// A replacement of `input[start..end]`.
#[derive(Debug)]
pub(super) struct Edit {
    start: usize,
    end: usize,
    text: Vec<u8>,
}

/// Marks an edit slot reserved for a length prefix that didn't change.
const UNUSED: usize = usize::MAX;

/// One walk over one input: where mapped names occur, and the edits.
pub(super) struct Walk<'i> {
    pub input: &'i [u8],
    /// Every occurrence of a mapped name (either side's), sorted by start.
    matches: Vec<(usize, usize)>,
    edits: Vec<Edit>,
    /// Nested envelopes entered (embedded objects inside embedded objects).
    pub depth: usize,
    /// The group and kind the request addressed, for metadata-only objects.
    pub addressed: Option<(String, String)>,
    /// Walk every field the plan names, not only those where a mapped name
    /// shows: the object may hold a name `names:` renames.
    pub force: bool,
    /// The object being walked is of a renamed group: its short forms
    /// (`Act::ShortForm`) are renamed, and the fields on their way entered.
    pub short_forms: bool,
}

impl<'i> Walk<'i> {
    pub(super) fn new(
        input: &'i [u8],
        mut matches: Vec<(usize, usize)>,
        addressed: Option<(&str, &str)>,
    ) -> Self {
        matches.sort_unstable();
        Walk {
            input,
            matches,
            edits: Vec::new(),
            depth: 0,
            addressed: addressed.map(|(g, k)| (g.to_owned(), k.to_owned())),
            force: false,
            short_forms: false,
        }
    }

    /// True when a mapped name lies wholly inside `input[start..end]`, or
    /// the walk is forced (see [`ProtoRewriter::names_involved`]).
    pub(super) fn has_match(&self, start: usize, end: usize) -> bool {
        if self.force {
            return true;
        }
        let i = self.matches.partition_point(|m| m.0 < start);
        self.matches[i..]
            .iter()
            .take_while(|m| m.0 < end)
            .any(|m| m.1 <= end)
    }

    fn push(&mut self, start: usize, end: usize, text: Vec<u8>) {
        self.edits.push(Edit { start, end, text });
    }

    /// Replaces `input[start..end]` by `text`; returns the change in length.
    fn replace(&mut self, start: usize, end: usize, text: Vec<u8>) -> isize {
        let d = change(text.len(), end - start);
        self.push(start, end, text);
        d
    }

    fn reserve(&mut self) -> usize {
        self.push(UNUSED, UNUSED, Vec::new());
        self.edits.len() - 1
    }

    /// The input with the edits applied; `None` when there are none.
    pub(super) fn finish(self) -> Option<Vec<u8>> {
        let mut edits: Vec<Edit> = self
            .edits
            .into_iter()
            .filter(|e| e.start != UNUSED)
            .collect();
        if edits.is_empty() {
            return None;
        }
        edits.sort_by_key(|e| e.start);
        let grown: usize = edits.iter().map(|e| e.text.len()).sum();
        let mut out = Vec::with_capacity(self.input.len() + grown);
        let mut at = 0;
        for e in &edits {
            debug_assert!(e.start >= at, "edits never overlap");
            out.extend_from_slice(&self.input[at..e.start]);
            out.extend_from_slice(&e.text);
            at = e.end;
        }
        out.extend_from_slice(&self.input[at..]);
        Some(out)
    }
}

/// A string field's text; not UTF-8 is no name (Go doesn't check proto2
/// strings), so it reads as empty.
fn string_text<'i>(input: &'i [u8], f: &Field) -> Result<&'i str, RewriteError> {
    if f.wire != LEN {
        return Err(wrong_wire(f));
    }
    Ok(std::str::from_utf8(&input[f.value_start..f.end]).unwrap_or(""))
}

fn change(new: usize, old: usize) -> isize {
    new as isize - old as isize
}

impl ProtoRewriter<'_> {
    /// Walks the message in `input[start..end]` along `node`'s fields;
    /// returns how much its length changed.
    pub(super) fn message(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        node: &Node,
    ) -> Result<isize, RewriteError> {
        if node.fields.is_empty() {
            return Ok(0);
        }
        let mut delta = 0;
        for f in Fields::new(w.input, start, end) {
            let f = f?;
            if let Some(child) = node.child(f.number) {
                delta += self.field(w, &f, child)?;
            }
        }
        Ok(delta)
    }

    /// An object's message, per its plan: a fallback message for an unknown
    /// kind is left alone when its bytes don't parse as the convention says.
    pub(super) fn object(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        plan: &Plan,
    ) -> Result<isize, RewriteError> {
        let Some((at, form)) = &plan.short_forms_group else {
            return self.object_of(w, start, end, plan);
        };
        let outer = w.short_forms;
        w.short_forms = self.group_renamed(w, start, end, at, *form)?;
        let d = self.object_of(w, start, end, plan);
        w.short_forms = outer;
        d
    }

    /// True when the object in `input[start..end]` names, at the singular
    /// fields `path`, a group (in `form`: a group or `group/version`) the
    /// rules rename in this direction.
    fn group_renamed(
        &self,
        w: &Walk<'_>,
        mut start: usize,
        mut end: usize,
        path: &[u32],
        form: Form,
    ) -> Result<bool, RewriteError> {
        for &n in path {
            match last_len_field(w.input, start, end, n)? {
                Some(f) => (start, end) = (f.value_start, f.end),
                None => return Ok(false),
            }
        }
        let Ok(text) = std::str::from_utf8(&w.input[start..end]) else {
            return Ok(false);
        };
        let group = match form {
            Form::ApiVersion => crate::kube::group_of(text),
            _ => text,
        };
        Ok(self.map.rule_for(group, self.dir).is_some())
    }

    fn object_of(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        plan: &Plan,
    ) -> Result<isize, RewriteError> {
        if let Some((meta, exclusions, bare)) = &plan.unless {
            if self.excluded(w.input, start, end, *meta, exclusions)? {
                return self.object(w, start, end, bare);
            }
        }
        if !plan.lenient {
            return self.message(w, start, end, &plan.root);
        }
        let saved = w.edits.len();
        match self.message(w, start, end, &plan.root) {
            // Bytes that don't follow the convention; other errors (a name
            // too long) are errors whatever the kind.
            Err(RewriteError::Protobuf(_)) => {
                w.edits.truncate(saved);
                Ok(0)
            }
            other => other,
        }
    }

    /// One occurrence of a field the plan descends into.
    fn field(&self, w: &mut Walk<'_>, f: &Field, node: &Node) -> Result<isize, RewriteError> {
        if f.wire != LEN {
            return Err(wrong_wire(f));
        }
        if node.is_empty()
            || !((node.short_forms && w.short_forms) || w.has_match(f.value_start, f.end))
        {
            return Ok(0);
        }
        if let Some((path, form)) = &node.drop {
            if self.shadowed(w, f.value_start, f.end, path, *form)? {
                w.push(f.start, f.end, Vec::new());
                return Ok(-((f.end - f.start) as isize));
            }
        }
        let (start, end) = (f.value_start, f.end);
        self.length_delimited(w, f, |w| {
            let mut d = match &node.act {
                None => 0,
                Some(Act::Value(form)) => self.value(w, start, end, *form)?,
                Some(Act::JsonString(path, form)) => {
                    self.json_string(w, start, end, path, *form)?
                }
                Some(Act::JsonObject) => self.json_object(w, start, end)?,
                Some(Act::Labels) => self.labels(w, start, end)?,
                Some(Act::LabelRequirement { key, values }) => {
                    self.label_requirement(w, start, end, *key, *values)?
                }
                Some(Act::FieldsV1 { group, kind }) => {
                    self.fields_v1(w, start, end, group, kind)?
                }
                Some(Act::Object) => self.raw_extension(w, start, end)?,
                Some(Act::Items(plan)) => self.object(w, start, end, plan)?,
                Some(Act::NameOf {
                    group,
                    resource,
                    name,
                }) => self.name_of(w, start, end, [*group, *resource, *name], node)?,
                Some(Act::NamedRef {
                    api,
                    api_form,
                    kind,
                    name,
                }) => self.named_ref(w, start, end, [*api, *kind, *name], *api_form, node)?,
                Some(Act::Keys(form)) => self.map_keys(w, start, end, *form)?,
                Some(Act::Requirement { key, values }) => {
                    self.requirement(w, start, end, *key, *values)?
                }
                Some(Act::ShortForm(form)) if w.short_forms => {
                    let Ok(s) = std::str::from_utf8(&w.input[start..end]) else {
                        return Ok(0);
                    };
                    match short_form(self.map, *form, s, self.dir)? {
                        Some(mapped) => w.replace(start, end, mapped.into_bytes()),
                        None => 0,
                    }
                }
                Some(Act::ShortForm(_)) => 0,
            };
            if !node.fields.is_empty() {
                d += self.message(w, start, end, node)?;
            }
            if !node.entries.is_empty() {
                d += self.map_entry(w, start, end, node)?;
            }
            Ok(d)
        })
    }

    /// Runs `inner` on the value of length-delimited field `f` and, when the
    /// value's length changed, re-encodes its length prefix (shortest form;
    /// an unchanged length keeps its bytes).
    pub(super) fn length_delimited(
        &self,
        w: &mut Walk<'_>,
        f: &Field,
        inner: impl FnOnce(&mut Walk<'_>) -> Result<isize, RewriteError>,
    ) -> Result<isize, RewriteError> {
        let slot = w.reserve();
        let d = inner(w)?;
        if d == 0 {
            return Ok(0);
        }
        let len = (f.end - f.value_start) as isize + d;
        let mut prefix = Vec::with_capacity(10);
        put_varint(len as u64, &mut prefix);
        let grown = change(prefix.len(), f.value_start - f.len_start);
        w.edits[slot] = Edit {
            start: f.len_start,
            end: f.value_start,
            text: prefix,
        };
        Ok(d + grown)
    }

    /// A string field's own length prefix and its renamed value.
    pub(super) fn string_field(
        &self,
        w: &mut Walk<'_>,
        f: &Field,
        form: Form,
    ) -> Result<isize, RewriteError> {
        if f.wire != LEN {
            return Err(wrong_wire(f));
        }
        let (start, end) = (f.value_start, f.end);
        self.length_delimited(w, f, |w| self.value(w, start, end, form))
    }

    /// A string naming a group in `form`.
    fn value(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        form: Form,
    ) -> Result<isize, RewriteError> {
        // Not UTF-8: not a name (Go doesn't check proto2 strings).
        let Ok(s) = std::str::from_utf8(&w.input[start..end]) else {
            return Ok(0);
        };
        if matches!(form, Form::MetadataKey | Form::LabelSelector | Form::Cel) {
            return match self.json.metadata_value(form, s)? {
                Some(mapped) => Ok(w.replace(start, end, mapped.into_bytes())),
                None => Ok(0),
            };
        }
        check_generate_name(self.map, form, s, self.dir)?;
        let Some(mapped) = self.map.map(form, s, self.dir) else {
            return Ok(0);
        };
        if matches!(form, Form::Group | Form::QualifiedName) && mapped.len() > MAX_SUBDOMAIN {
            return Err(RewriteError::TooLong {
                from: s.to_owned(),
                to: mapped,
            });
        }
        Ok(w.replace(start, end, mapped.into_bytes()))
    }

    /// A message naming an object by the fields numbered (group, resource,
    /// name): each name is renamed when that resource's names are (a CRD's
    /// or APIService's `plural.group`, a kind listed in `names:`). Group
    /// and resource are read first: on the wire they may come after the
    /// name.
    fn name_of(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        numbers: [u32; 3],
        node: &Node,
    ) -> Result<isize, RewriteError> {
        self.reference(w, start, end, numbers, node, |g, r| {
            Catalog::name_form_of_resource(self.map, g, r)
        })
    }

    /// A message naming an object by type and name, by the fields numbered
    /// (api, kind, name), `api` a group or `group/version` (`api_form`):
    /// each name in the form of the named kind's own name, if it has one.
    fn named_ref(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        numbers: [u32; 3],
        api_form: Form,
        node: &Node,
    ) -> Result<isize, RewriteError> {
        self.reference(w, start, end, numbers, node, |api, kind| {
            let group = match api_form {
                Form::ApiVersion => crate::kube::group_of(api),
                _ => api,
            };
            let app = match self.dir {
                Direction::ToApp => self.map.map_group(group, Direction::ToApp),
                Direction::ToCluster => None,
            };
            self.catalog
                .name_form(app.as_deref().unwrap_or(group), kind)
        })
    }

    /// The names (field `name`) of a message that names an object by two
    /// other string fields (`a`, `b`), renamed in the form `form_of(a, b)`
    /// says. Absent is empty (protobuf's default); the last of each wins.
    fn reference(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        [a, b, name]: [u32; 3],
        node: &Node,
        form_of: impl Fn(&str, &str) -> Option<Form>,
    ) -> Result<isize, RewriteError> {
        // A name with a place of its own (a config field) is that place's:
        // one edit per byte range.
        if node.child(name).is_some_and(|c| c.act.is_some()) {
            return Ok(0);
        }
        let input = w.input;
        let (mut va, mut vb, mut names) = ("", "", Vec::new());
        for f in Fields::new(input, start, end) {
            let f = f?;
            if f.number == name {
                names.push(f);
            } else if f.number == a {
                va = string_text(input, &f)?;
            } else if f.number == b {
                vb = string_text(input, &f)?;
            }
        }
        let Some(form) = form_of(va, vb) else {
            return Ok(0);
        };
        let mut d = 0;
        for f in &names {
            d += self.string_field(w, f, form)?;
        }
        Ok(d)
    }

    /// A map entry's key (field 1; every occurrence, so no spelling of a
    /// name survives), in `form`.
    fn map_keys(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        form: Form,
    ) -> Result<isize, RewriteError> {
        let input = w.input;
        let mut d = 0;
        for f in Fields::new(input, start, end) {
            let f = f?;
            if f.number == 1 {
                d += self.string_field(w, &f, form)?;
            }
        }
        Ok(d)
    }

    /// A selector requirement: its values, in the form its key calls for.
    /// The key is read first: on the wire it may come after the values.
    fn requirement(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        key: u32,
        values: u32,
    ) -> Result<isize, RewriteError> {
        let input = w.input;
        let Some(k) = last_len_field(input, start, end, key)? else {
            return Ok(0);
        };
        let Some(form) = requirement_form(string_text(input, &k)?) else {
            return Ok(0);
        };
        let mut d = 0;
        for f in Fields::new(input, start, end) {
            let f = f?;
            if f.number == values {
                d += self.string_field(w, &f, form)?;
            }
        }
        Ok(d)
    }

    /// A string holding JSON with a place inside.
    fn json_string(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        path: &FieldPath,
        form: Form,
    ) -> Result<isize, RewriteError> {
        let text = std::str::from_utf8(&w.input[start..end])
            .map_err(|e| RewriteError::EmbeddedJson(path.to_string(), e.to_string()))?;
        let Some(new) = self.json.rename_embedded(text, path, form)? else {
            return Ok(0);
        };
        Ok(w.replace(start, end, new.into_bytes()))
    }

    /// True when an exclusion covers the object in `input[start..end]`
    /// (its `metadata` is field `meta`): its name (`ObjectMeta` field 1)
    /// and labels (field 11, entries of key 1 and value 2) as they arrive.
    fn excluded(
        &self,
        input: &[u8],
        start: usize,
        end: usize,
        meta: u32,
        exclusions: &[regroup_config::metadata::Exclusion],
    ) -> Result<bool, RewriteError> {
        let Some(m) = last_len_field(input, start, end, meta)? else {
            return Ok(false);
        };
        let name = match last_len_field(input, m.value_start, m.end, 1)? {
            Some(n) => Some(string_text(input, &n)?),
            None => None,
        };
        let mut labels: Vec<(&str, &str)> = Vec::new();
        if exclusions.iter().any(|e| e.selector.is_some()) {
            for f in Fields::new(input, m.value_start, m.end) {
                let f = f?;
                if f.number != 11 || f.wire != LEN {
                    continue;
                }
                let key = match last_len_field(input, f.value_start, f.end, 1)? {
                    Some(k) => string_text(input, &k)?,
                    None => "",
                };
                let value = match last_len_field(input, f.value_start, f.end, 2)? {
                    Some(v) => string_text(input, &v)?,
                    None => "",
                };
                // The last entry of a key wins, as when decoding a map.
                labels.retain(|(k, _)| *k != key);
                labels.push((key, value));
            }
        }
        let label = |k: &str| labels.iter().find(|(x, _)| *x == k).map(|(_, v)| *v);
        // The kind was matched when the plan was built.
        Ok(exclusions.iter().any(|e| e.covers(&e.kind, name, label)))
    }

    /// A map entry of labels: its value by the label value rules of its key
    /// (read first: on the wire it may come after the value), then its key.
    fn labels(&self, w: &mut Walk<'_>, start: usize, end: usize) -> Result<isize, RewriteError> {
        let Some(meta) = self.map.metadata() else {
            return Ok(0);
        };
        let input = w.input;
        let Some(k) = last_len_field(input, start, end, 1)? else {
            return Ok(0);
        };
        let key = string_text(input, &k)?;
        let mut d = 0;
        for f in Fields::new(input, start, end) {
            let f = f?;
            if f.number == 2 {
                let value = string_text(input, &f)?;
                if let Some(mapped) = meta.map_value(key, value, self.dir) {
                    let (s, e) = (f.value_start, f.end);
                    d +=
                        self.length_delimited(w, &f, |w| Ok(w.replace(s, e, mapped.into_bytes())))?;
                }
            } else if f.number == 1 {
                d += self.string_field(w, &f, Form::MetadataKey)?;
            }
        }
        Ok(d)
    }

    /// A label selector requirement: its values by the rules of its key
    /// (read first), then its key.
    fn label_requirement(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        key: u32,
        values: u32,
    ) -> Result<isize, RewriteError> {
        let Some(meta) = self.map.metadata() else {
            return Ok(0);
        };
        let input = w.input;
        let Some(k) = last_len_field(input, start, end, key)? else {
            return Ok(0);
        };
        let name = string_text(input, &k)?;
        let mut d = 0;
        for f in Fields::new(input, start, end) {
            let f = f?;
            if f.number == values {
                let value = string_text(input, &f)?;
                if let Some(mapped) = meta.map_value(name, value, self.dir) {
                    let (s, e) = (f.value_start, f.end);
                    d +=
                        self.length_delimited(w, &f, |w| Ok(w.replace(s, e, mapped.into_bytes())))?;
                }
            } else if f.number == key {
                d += self.string_field(w, &f, Form::MetadataKey)?;
            }
        }
        Ok(d)
    }

    /// A `FieldsV1` message: its `raw` (field 1) is JSON, renamed by the
    /// JSON codec for an object of `group`/`kind`.
    fn fields_v1(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        group: &str,
        kind: &str,
    ) -> Result<isize, RewriteError> {
        let input = w.input;
        let mut d = 0;
        for f in Fields::new(input, start, end) {
            let f = f?;
            if f.number != 1 || f.wire != LEN {
                continue;
            }
            let Ok(text) = std::str::from_utf8(&input[f.value_start..f.end]) else {
                return Err(malformed("a FieldsV1 that is not UTF-8"));
            };
            if let Some(new) = self.json.rename_fields_v1(text, group, kind)? {
                let (s, e) = (f.value_start, f.end);
                d += self.length_delimited(w, &f, |w| Ok(w.replace(s, e, new.into_bytes())))?;
            }
        }
        Ok(d)
    }

    /// A string holding a whole object as JSON, renamed as that object by
    /// the JSON codec (text that is not UTF-8 is not JSON: left, counted).
    fn json_object(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
    ) -> Result<isize, RewriteError> {
        let Ok(text) = std::str::from_utf8(&w.input[start..end]) else {
            crate::rewrite::tally::object_annotation_not_json();
            return Ok(0);
        };
        let Some(new) = self.json.rename_object_text(text)? else {
            return Ok(0);
        };
        Ok(w.replace(start, end, new.into_bytes()))
    }

    /// A map entry: the node of its key, applied to its value.
    fn map_entry(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
        node: &Node,
    ) -> Result<isize, RewriteError> {
        let Some(key) = last_len_field(w.input, start, end, 1)? else {
            return Ok(0);
        };
        let Some(entry) = node.entry(&w.input[key.value_start..key.end]) else {
            return Ok(0);
        };
        let mut d = 0;
        for f in Fields::new(w.input, start, end) {
            let f = f?;
            if f.number == 2 {
                d += self.field(w, &f, entry)?;
            }
        }
        Ok(d)
    }

    /// A `RawExtension` message: its `raw` (field 1) is an embedded object.
    fn raw_extension(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
    ) -> Result<isize, RewriteError> {
        let mut d = 0;
        for f in Fields::new(w.input, start, end) {
            let f = f?;
            if f.number != 1 {
                continue;
            }
            if f.wire != LEN {
                return Err(wrong_wire(&f));
            }
            if !w.has_match(f.value_start, f.end) {
                continue;
            }
            let (rs, re) = (f.value_start, f.end);
            d += self.length_delimited(w, &f, |w| self.embedded(w, rs, re))?;
        }
        Ok(d)
    }

    /// Embedded object bytes: an envelope, or JSON.
    fn embedded(&self, w: &mut Walk<'_>, start: usize, end: usize) -> Result<isize, RewriteError> {
        let bytes = &w.input[start..end];
        if bytes.starts_with(super::wire::MAGIC) {
            return self.envelope(w, start, end);
        }
        if bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{') {
            let addressed = w.addressed.as_ref().map(|(g, k)| (g.as_str(), k.as_str()));
            return match self.json.rewrite_bytes_with(bytes, None, addressed)? {
                Some(new) => Ok(w.replace(start, end, new)),
                None => Ok(0),
            };
        }
        Err(malformed(
            "an embedded object is neither an enveloped protobuf object nor JSON",
        ))
    }

    /// Whether the entry in `input[start..end]` names a shadowed group at
    /// `path`, in `form` (a group, or a `plural.group`/`version.group`
    /// name).
    pub(super) fn shadowed(
        &self,
        w: &Walk<'_>,
        mut start: usize,
        mut end: usize,
        path: &[u32],
        form: Form,
    ) -> Result<bool, RewriteError> {
        for &n in path {
            match last_len_field(w.input, start, end, n)? {
                Some(f) => (start, end) = (f.value_start, f.end),
                None => return Ok(false),
            }
        }
        let Ok(text) = std::str::from_utf8(&w.input[start..end]) else {
            return Ok(false);
        };
        Ok(match form {
            // A hidden object: only in the app's view (`Slot::DropHidden`).
            Form::QualifiedName | Form::ObjectName | Form::FixedName => {
                self.map.hides_name(form, text, self.dir)
            }
            _ => self.map.is_shadowed(text, self.dir),
        })
    }
}
