//! The catalog, translated to field numbers: for one message and the places
//! of one kind, a tree of the fields to descend into and what to do where
//! the places end.
//!
//! Each JSON field name of a catalog path is looked up by the descriptors'
//! `json_name`; a field whose `json_name` is `,inline` is embedded in JSON
//! (Go's `json:",inline"`), so a name not found in a message is looked up in
//! its inline fields too (`rules[].apiGroups[]` of a webhook is
//! `rules[].rule.apiGroups[]` in protobuf). `[]` steps must follow repeated
//! fields, exactly as in JSON they must follow arrays; a name after a map
//! field is a map key (`metadata.annotations["..."]`). A root `apiVersion`
//! that the message lacks is the envelope's `typeMeta.apiVersion`. A path
//! that doesn't exist in the message (a place of another version of the
//! kind, or of a JSON-only form) is no place of it. The members a `NameOf`
//! place names (a Status's `details.group`, `.kind`, `.name`) are found the
//! same way, as field numbers of its message.

use std::sync::Arc;

use prost_reflect::{FieldDescriptor, Kind, MessageDescriptor};
use regroup_config::field_path::{FieldPath, Step};
use regroup_config::Form;

use super::types::RAW_EXTENSION;
use crate::rewrite::catalog::{is_metadata_slot, Catalog, Slot};

/// The JSON name marking a field embedded inline in JSON.
pub const INLINE: &str = ",inline";

/// One step of a catalog path in protobuf terms.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtoStep {
    /// Into this field (each occurrence, when repeated).
    Field(FieldDescriptor),
    /// Into the value of the map entry with this key (the previous step is
    /// a map field).
    MapKey(String),
}

/// What to do with each value of a field where a place ends.
#[derive(Debug)]
pub(super) enum Act {
    /// A string naming a group in this form.
    Value(Form),
    /// A string holding JSON; inside it, the value at this path.
    JsonString(FieldPath, Form),
    /// A string holding a whole object as JSON.
    JsonObject,
    /// A map of labels (`Slot::Labels`): each entry's key and value.
    Labels,
    /// A label selector requirement, by these field numbers.
    LabelRequirement { key: u32, values: u32 },
    /// A `FieldsV1` message of an object of this group (app names) and kind:
    /// its `raw` JSON, renamed by the JSON codec.
    FieldsV1 { group: String, kind: String },
    /// A `RawExtension`: its `raw` is an enveloped object (or JSON).
    Object,
    /// A list's items, each a message walked with this plan.
    Items(Arc<Plan>),
    /// A map field's entries: each key (entry field 1) names a group in
    /// this form.
    Keys(Form),
    /// A selector requirement: the strings at `values` name a group in the
    /// form the string at `key` calls for (see `json::requirement_form`).
    Requirement { key: u32, values: u32 },
    /// A message naming an object by (group, resource, name), by these
    /// field numbers (a Status's `details`): the name is a qualified name
    /// when that resource's names carry a group.
    NameOf {
        group: u32,
        resource: u32,
        name: u32,
    },
    /// A message naming an object by type and name, by these field
    /// numbers (`Slot::NamedRef`): the name in the form of the named kind's
    /// own name, if it has one.
    NamedRef {
        api: u32,
        api_form: Form,
        kind: u32,
        name: u32,
    },
    /// A short name or category (`Slot::ShortForm`), renamed in this form
    /// when the object's group is renamed (see `Plan::short_forms_group`).
    ShortForm(Form),
}

/// A field on the way to places, or where places end.
#[derive(Debug, Default)]
pub(super) struct Node {
    /// What to do with the field's values.
    pub act: Option<Act>,
    /// Entries to drop: each whose string at these field numbers inside it
    /// names a shadowed group in this form (`Group`: a discovery entry's
    /// group; `QualifiedName`: a hidden object's `metadata.name`, see
    /// `Slot::DropHidden`). Checked before anything else.
    pub drop: Option<(Vec<u32>, Form)>,
    /// The sub-fields to descend into, by number.
    pub fields: Vec<(u32, Node)>,
    /// For a map field: the entries to descend into, by key; the node
    /// applies to the entry's value.
    pub entries: Vec<(String, Node)>,
    /// On the way to a [`Act::ShortForm`]: entered without the byte
    /// search when the object's group is renamed (the names hold no mapped
    /// name).
    pub short_forms: bool,
}

impl Node {
    pub(super) fn child(&self, number: u32) -> Option<&Node> {
        self.fields
            .iter()
            .find(|(n, _)| *n == number)
            .map(|(_, node)| node)
    }

    pub(super) fn entry(&self, key: &[u8]) -> Option<&Node> {
        self.entries
            .iter()
            .find(|(k, _)| k.as_bytes() == key)
            .map(|(_, node)| node)
    }

    fn child_mut(&mut self, number: u32) -> &mut Node {
        let i = match self.fields.iter().position(|(n, _)| *n == number) {
            Some(i) => i,
            None => {
                self.fields.push((number, Node::default()));
                self.fields.len() - 1
            }
        };
        &mut self.fields[i].1
    }

    fn entry_mut(&mut self, key: &str) -> &mut Node {
        let i = match self.entries.iter().position(|(k, _)| k == key) {
            Some(i) => i,
            None => {
                self.entries.push((key.to_owned(), Node::default()));
                self.entries.len() - 1
            }
        };
        &mut self.entries[i].1
    }

    /// True when nothing below needs this field's bytes.
    pub(super) fn is_empty(&self) -> bool {
        self.act.is_none()
            && self.drop.is_none()
            && self.fields.is_empty()
            && self.entries.is_empty()
    }
}

/// The places of one kind in one message.
#[derive(Debug)]
pub(super) struct Plan {
    /// The envelope's `typeMeta.apiVersion` is a place, in this form.
    pub api_version: Option<Form>,
    /// The message's fields.
    pub root: Node,
    /// A fallback message for a kind regroup doesn't know: bytes that don't
    /// follow the convention are left as they are instead of refused.
    pub lenient: bool,
    /// Objects of this kind that these exclusions cover keep their
    /// metadata (a `metadata:` exclusion by name or label selector): the
    /// field number of `metadata`, the exclusions, and the plan without
    /// metadata places to walk them with.
    pub unless: Option<(u32, Vec<regroup_config::metadata::Exclusion>, Arc<Plan>)>,
    /// Where the object's group is (singular field numbers from the root)
    /// and its form, when it has `Act::ShortForm` places: they apply
    /// only when that group is renamed.
    pub short_forms_group: Option<(Vec<u32>, Form)>,
}

/// The fields of `message` reached by the JSON name `name`, through inline
/// fields when the message has no such field itself.
fn by_json_name(message: &MessageDescriptor, name: &str) -> Option<Vec<FieldDescriptor>> {
    if let Some(f) = message.fields().find(|f| f.json_name() == name) {
        return Some(vec![f]);
    }
    for f in message.fields().filter(|f| f.json_name() == INLINE) {
        if let Kind::Message(inner) = f.kind() {
            if let Some(mut rest) = by_json_name(&inner, name) {
                rest.insert(0, f.clone());
                return Some(rest);
            }
        }
    }
    None
}

/// A catalog path in `message`: the steps, and whether it ends on a
/// repeated field itself (no `[]` after it). `None` when the path doesn't
/// exist in the message.
pub fn translate_path(
    message: &MessageDescriptor,
    path: &FieldPath,
) -> Option<(Vec<ProtoStep>, bool)> {
    let mut current = Some(message.clone());
    let mut last: Option<FieldDescriptor> = None;
    let mut pending_list = false;
    let mut out = Vec::new();
    for step in path.steps() {
        match step {
            Step::Key(k) => {
                if pending_list {
                    // A name after an array without `[]`: nothing in JSON.
                    return None;
                }
                if let Some(map) = last.as_ref().filter(|f| f.is_map()) {
                    let Kind::Message(entry) = map.kind() else {
                        return None;
                    };
                    let value = entry.map_entry_value_field();
                    out.push(ProtoStep::MapKey(k.clone()));
                    current = value.kind().as_message().cloned();
                    last = Some(value);
                    continue;
                }
                let fields = by_json_name(&current.take()?, k)?;
                let f = fields.last().expect("by_json_name returns a field").clone();
                out.extend(fields.into_iter().map(ProtoStep::Field));
                pending_list = f.is_list();
                current = if f.is_map() {
                    None
                } else {
                    f.kind().as_message().cloned()
                };
                last = Some(f);
            }
            Step::Each => {
                if !pending_list {
                    return None;
                }
                pending_list = false;
            }
        }
    }
    Some((out, pending_list))
}

fn is_string(f: &FieldDescriptor) -> bool {
    matches!(f.kind(), Kind::String)
}

/// The number of `message`'s own singular string field named `json`: the
/// walker reads it directly, so not one reached through an inline field.
/// The field numbers of a requirement message's string `key` and repeated
/// string `values` (a field or label selector requirement), when `field`
/// is such a message.
fn requirement_fields(field: &FieldDescriptor, key: &str, values: &str) -> Option<(u32, u32)> {
    let Kind::Message(inner) = field.kind() else {
        return None;
    };
    let key = string_field_number(&inner, key)?;
    match by_json_name(&inner, values)?.as_slice() {
        [v] if is_string(v) && v.is_list() => Some((key, v.number())),
        _ => None,
    }
}

fn string_field_number(message: &MessageDescriptor, json: &str) -> Option<u32> {
    match by_json_name(message, json)?.as_slice() {
        [f] if is_string(f) && !f.is_list() => Some(f.number()),
        _ => None,
    }
}

fn is_raw_extension(f: &FieldDescriptor) -> bool {
    matches!(f.kind(), Kind::Message(m) if m.full_name() == RAW_EXTENSION)
}

/// What a plan is built for.
pub(super) struct Target<'a> {
    pub message: &'a MessageDescriptor,
    /// The object's group (app names) and kind, selecting the places.
    pub group: &'a str,
    pub kind: &'a str,
    /// For metadata-only responses: the group and kind the request
    /// addressed (see `ProtoRewriter::rewrite_bytes_addressed`).
    pub addressed: Option<(&'a str, &'a str)>,
    pub lenient: bool,
    /// The metadata rules, for their exclusions.
    pub metadata: Option<&'a regroup_config::MetadataMap>,
    /// Build without metadata places (an excluded object's plan).
    pub bare: bool,
}

/// Translates the places of `target` into a plan.
pub(super) fn build(catalog: &Catalog, target: &Target<'_>) -> Plan {
    let (group, kind) = match target.addressed {
        Some(a) if target.kind == "PartialObjectMetadata" => a,
        _ => (target.group, target.kind),
    };
    let mut plan = Plan {
        api_version: None,
        root: Node::default(),
        lenient: target.lenient,
        unless: None,
        short_forms_group: None,
    };
    let exclusions: Vec<&regroup_config::metadata::Exclusion> = target
        .metadata
        .map(|m| m.exclusions().iter().filter(|e| e.kind == kind).collect())
        .unwrap_or_default();
    let skip_metadata = target.bare || exclusions.iter().any(|e| e.is_whole_kind());
    for place in catalog.places_for(group, kind) {
        if skip_metadata && is_metadata_slot(&place.slot) {
            continue;
        }
        let steps = place.path.steps();
        if let ([Step::Key(k)], Slot::Value(form)) = (steps, place.slot) {
            if k == "apiVersion" && by_json_name(target.message, k).is_none() {
                plan.api_version.get_or_insert(form);
                continue;
            }
        }
        let Some((path, on_list)) = translate_path(target.message, &place.path) else {
            continue;
        };
        let Some(ProtoStep::Field(last)) = path.last() else {
            // A map value: only strings are catalogued there.
            if let (
                Some(ProtoStep::MapKey(_)),
                Slot::Value(_) | Slot::JsonString(..) | Slot::JsonObject,
            ) = (path.last(), place.slot)
            {
                insert(&mut plan.root, &path, slot_act(place.slot));
            }
            continue;
        };
        match place.slot {
            Slot::Value(_) | Slot::JsonString(..) | Slot::JsonObject
                if !on_list && is_string(last) =>
            {
                insert(&mut plan.root, &path, slot_act(place.slot));
            }
            Slot::Object if !on_list && is_raw_extension(last) => {
                insert(&mut plan.root, &path, Some(Act::Object));
            }
            Slot::Items if on_list && is_raw_extension(last) => {
                insert(&mut plan.root, &path, Some(Act::Object));
            }
            Slot::Items if on_list => {
                let (Kind::Message(item), Some(item_kind)) = (
                    last.kind(),
                    kind.strip_suffix("List").filter(|k| !k.is_empty()),
                ) else {
                    continue;
                };
                let items = build(
                    catalog,
                    &Target {
                        message: &item,
                        group,
                        kind: item_kind,
                        addressed: target.addressed,
                        lenient: target.lenient,
                        metadata: target.metadata,
                        bare: target.bare,
                    },
                );
                insert(&mut plan.root, &path, Some(Act::Items(Arc::new(items))));
            }
            Slot::Keys(form) if last.is_map() => {
                insert(&mut plan.root, &path, Some(Act::Keys(form)));
            }
            Slot::Labels if last.is_map() => {
                insert(&mut plan.root, &path, Some(Act::Labels));
            }
            Slot::LabelRequirement { key, values } if !on_list => {
                if let Some((key, values)) = requirement_fields(last, key, values) {
                    let act = Act::LabelRequirement { key, values };
                    insert(&mut plan.root, &path, Some(act));
                }
            }
            Slot::FieldsV1 if !on_list && matches!(last.kind(), Kind::Message(_)) => {
                let act = Act::FieldsV1 {
                    group: group.to_owned(),
                    kind: kind.to_owned(),
                };
                insert(&mut plan.root, &path, Some(act));
            }
            Slot::Requirement { key, values } if !on_list => {
                if let Some((key, values)) = requirement_fields(last, key, values) {
                    let act = Act::Requirement { key, values };
                    insert(&mut plan.root, &path, Some(act));
                }
            }
            Slot::NameOf {
                group,
                resource,
                name,
            } if !on_list => {
                let Kind::Message(inner) = last.kind() else {
                    continue;
                };
                let number = |json: &str| string_field_number(&inner, json);
                if let (Some(group), Some(resource), Some(name)) =
                    (number(group), number(resource), number(name))
                {
                    let act = Act::NameOf {
                        group,
                        resource,
                        name,
                    };
                    insert(&mut plan.root, &path, Some(act));
                }
            }
            Slot::NamedRef(m) if !on_list => {
                let Kind::Message(inner) = last.kind() else {
                    continue;
                };
                let number = |json: &str| string_field_number(&inner, json);
                if let (Some(api), Some(kind), Some(name)) =
                    (number(m.api), number(m.kind), number(m.name))
                {
                    let act = Act::NamedRef {
                        api,
                        api_form: m.api_form,
                        kind,
                        name,
                    };
                    insert(&mut plan.root, &path, Some(act));
                }
            }
            Slot::ShortForm {
                group: group_at,
                group_form,
                form,
            } if !on_list && is_string(last) => {
                let at = FieldPath::parse(group_at).expect("catalog sub-paths are valid");
                let Some((steps, false)) = translate_path(target.message, &at) else {
                    continue;
                };
                let Some(numbers) = singular_numbers(&steps) else {
                    continue;
                };
                plan.short_forms_group.get_or_insert((numbers, group_form));
                insert(&mut plan.root, &path, Some(Act::ShortForm(form)));
                let mut node = &mut plan.root;
                for step in &path {
                    node = match step {
                        ProtoStep::Field(f) => node.child_mut(f.number()),
                        ProtoStep::MapKey(k) => node.entry_mut(k),
                    };
                    node.short_forms = true;
                }
            }
            Slot::DropShadowed(sub) if on_list => {
                let Kind::Message(entry) = last.kind() else {
                    continue;
                };
                let sub = FieldPath::parse(sub).expect("catalog sub-paths are valid");
                let Some((sub_steps, false)) = translate_path(&entry, &sub) else {
                    continue;
                };
                if let Some(numbers) = singular_numbers(&sub_steps) {
                    let node = node_at(&mut plan.root, &path);
                    node.drop.get_or_insert((numbers, Form::Group));
                }
            }
            // A typed list's items (`v1 List`'s `RawExtension` items are
            // not looked into).
            Slot::DropHidden if on_list && !is_raw_extension(last) => {
                let (Kind::Message(item), Some(item_kind)) = (
                    last.kind(),
                    kind.strip_suffix("List").filter(|k| !k.is_empty()),
                ) else {
                    continue;
                };
                let (item_group, item_kind) = match target.addressed {
                    Some(a) if item_kind == "PartialObjectMetadata" => a,
                    _ => (group, item_kind),
                };
                let Some(form) = catalog.name_form(item_group, item_kind) else {
                    continue;
                };
                let name = FieldPath::parse("metadata.name").expect("a valid path");
                let Some((steps, false)) = translate_path(&item, &name) else {
                    continue;
                };
                if let Some(numbers) = singular_numbers(&steps) {
                    node_at(&mut plan.root, &path)
                        .drop
                        .get_or_insert((numbers, form));
                }
            }
            _ => {}
        }
    }
    let named: Vec<regroup_config::metadata::Exclusion> =
        exclusions.iter().map(|e| (*e).clone()).collect();
    if !skip_metadata && !named.is_empty() {
        let meta = by_json_name(target.message, "metadata");
        if let Some([m]) = meta.as_deref() {
            let bare = build(
                catalog,
                &Target {
                    bare: true,
                    ..*target
                },
            );
            plan.unless = Some((m.number(), named, Arc::new(bare)));
        }
    }
    plan
}

/// The field numbers of a path of singular fields (none repeated), or
/// `None`.
fn singular_numbers(steps: &[ProtoStep]) -> Option<Vec<u32>> {
    steps
        .iter()
        .map(|s| match s {
            ProtoStep::Field(f) if !f.is_list() => Some(f.number()),
            _ => None,
        })
        .collect()
}

fn slot_act(slot: Slot) -> Option<Act> {
    match slot {
        Slot::Value(form) => Some(Act::Value(form)),
        Slot::JsonString(inner, form) => Some(Act::JsonString(
            FieldPath::parse(inner).expect("catalog sub-paths are valid"),
            form,
        )),
        Slot::JsonObject => Some(Act::JsonObject),
        _ => None,
    }
}

fn node_at<'n>(root: &'n mut Node, path: &[ProtoStep]) -> &'n mut Node {
    let mut node = root;
    for step in path {
        node = match step {
            ProtoStep::Field(f) => node.child_mut(f.number()),
            ProtoStep::MapKey(k) => node.entry_mut(k),
        };
    }
    node
}

/// Adds `act` at `path`; the first place to claim a field wins.
fn insert(root: &mut Node, path: &[ProtoStep], act: Option<Act>) {
    let node = node_at(root, path);
    if node.act.is_none() {
        node.act = act;
    }
}
