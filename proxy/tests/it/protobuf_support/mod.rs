//! Protobuf helpers shared by the protobuf tests and the benchmark: decoding
//! enveloped objects with prost-reflect's DynamicMessage (into JSON-like
//! values for comparisons), and the naive decode -> rename -> encode
//! approach the byte-splicing rewriter is measured against.
#![allow(dead_code)]

use std::cell::RefCell;
use std::collections::HashMap;
use std::rc::Rc;

use base64::Engine;
use prost::Message;
use prost_reflect::{DynamicMessage, Kind, MapKey, MessageDescriptor, ReflectMessage, Value};
use regroup::rewrite::catalog::{Catalog, Slot};
use regroup::rewrite::protobuf::{descriptor_pool, message_for, translate_path, ProtoStep, MAGIC};
use regroup_config::field_path::{FieldPath, Step};
use regroup_config::{Direction, Form, GroupMap};
use serde_json::Value as Json;

pub const UNKNOWN: &str = "k8s.io.apimachinery.pkg.runtime.Unknown";
pub const RAW_EXTENSION: &str = "k8s.io.apimachinery.pkg.runtime.RawExtension";
pub const WATCH_EVENT: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent";

pub fn md(name: &str) -> MessageDescriptor {
    descriptor_pool()
        .get_message_by_name(name)
        .unwrap_or_else(|| panic!("{name} in core/proto"))
}

/// The message for an object's type: regroup's, or the generic fallbacks.
pub fn message_of(api_version: &str, kind: &str) -> MessageDescriptor {
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    message_for(group, version, kind).unwrap_or_else(|| {
        if kind.len() > 4 && kind.ends_with("List") {
            md("regroup.v1.GenericList")
        } else {
            md("regroup.v1.GenericObject")
        }
    })
}

/// An enveloped object: (apiVersion, kind, the envelope, the object).
pub fn decode_envelope(bytes: &[u8]) -> (String, String, DynamicMessage, DynamicMessage) {
    let body = bytes.strip_prefix(MAGIC).expect("k8s\\0 envelope");
    let unknown = DynamicMessage::decode(md(UNKNOWN), body).expect("runtime.Unknown");
    let tm = unknown
        .get_field_by_name("typeMeta")
        .and_then(|v| v.as_message().cloned());
    let get = |name: &str| {
        tm.as_ref()
            .and_then(|t| t.get_field_by_name(name))
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default()
    };
    let (api_version, kind) = (get("apiVersion"), get("kind"));
    let raw = unknown
        .get_field_by_name("raw")
        .and_then(|v| v.as_bytes().cloned())
        .unwrap_or_default();
    let object = DynamicMessage::decode(message_of(&api_version, &kind), raw).expect("object");
    (api_version, kind, unknown, object)
}

/// A decoded object as JSON for comparisons: known fields by JSON name,
/// bytes holding JSON (FieldsV1) parsed, embedded envelopes decoded.
pub fn to_json(m: &DynamicMessage) -> Json {
    let mut out = serde_json::Map::new();
    for (f, v) in m.fields() {
        let name = if f.json_name() == ",inline" {
            f.name().to_owned()
        } else {
            f.json_name().to_owned()
        };
        out.insert(
            name,
            value_json(v, m.descriptor().full_name() == RAW_EXTENSION),
        );
    }
    Json::Object(out)
}

fn value_json(v: &Value, in_raw_extension: bool) -> Json {
    match v {
        Value::Bool(b) => Json::Bool(*b),
        Value::I32(n) => Json::from(*n),
        Value::I64(n) => Json::from(*n),
        Value::U32(n) => Json::from(*n),
        Value::U64(n) => Json::from(*n),
        Value::F32(n) => Json::from(*n),
        Value::F64(n) => Json::from(*n),
        Value::EnumNumber(n) => Json::from(*n),
        Value::String(s) => Json::String(s.clone()),
        Value::Bytes(b) => {
            if in_raw_extension && b.starts_with(MAGIC) {
                let (api_version, kind, _, object) = decode_envelope(b);
                let mut o = to_json(&object);
                if let Json::Object(m) = &mut o {
                    m.insert("apiVersion".into(), Json::String(api_version));
                    m.insert("kind".into(), Json::String(kind));
                }
                return o;
            }
            serde_json::from_slice::<Json>(b).unwrap_or_else(|_| {
                Json::String(base64::engine::general_purpose::STANDARD.encode(b))
            })
        }
        Value::Message(m) => to_json(m),
        Value::List(l) => Json::Array(l.iter().map(|e| value_json(e, false)).collect()),
        Value::Map(m) => {
            let mut out = serde_json::Map::new();
            for (k, v) in m {
                let key = match k {
                    MapKey::String(s) => s.clone(),
                    other => format!("{other:?}"),
                };
                out.insert(key, value_json(v, false));
            }
            Json::Object(out)
        }
    }
}

/// An enveloped object as JSON, with its `apiVersion` and `kind`.
pub fn envelope_json(bytes: &[u8]) -> Json {
    let (api_version, kind, _, object) = decode_envelope(bytes);
    let mut o = to_json(&object);
    if let Json::Object(m) = &mut o {
        m.insert("apiVersion".into(), Json::String(api_version));
        m.insert("kind".into(), Json::String(kind));
    }
    o
}

/// A watch frame (raw WatchEvent) as JSON.
pub fn frame_json(frame: &[u8]) -> Json {
    to_json(&DynamicMessage::decode(md(WATCH_EVENT), frame).expect("WatchEvent"))
}

/// The frames of a protobuf watch body.
pub fn frames(body: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    let mut rest = body;
    while rest.len() >= 4 {
        let len = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
        out.push(&rest[4..4 + len]);
        rest = &rest[4 + len..];
    }
    assert!(rest.is_empty(), "frames tile the body");
    out
}

/// Translated places of a message for a kind: (steps, slot).
type Translated = Rc<Vec<(Vec<ProtoStep>, Slot)>>;

/// The naive approach: decode everything with DynamicMessage, rename the
/// catalog's places in the decoded tree, encode everything again. (Place
/// translations are cached per message and kind, as the rewriter's are.)
pub struct Naive<'a> {
    pub map: &'a GroupMap,
    pub catalog: &'a Catalog,
    pub dir: Direction,
    cache: RefCell<HashMap<(String, String, String), Translated>>,
}

impl<'a> Naive<'a> {
    pub fn new(map: &'a GroupMap, catalog: &'a Catalog, dir: Direction) -> Self {
        Naive {
            map,
            catalog,
            dir,
            cache: RefCell::new(HashMap::new()),
        }
    }

    fn places(&self, desc: &MessageDescriptor, group: &str, kind: &str) -> Translated {
        let key = (
            desc.full_name().to_owned(),
            group.to_owned(),
            kind.to_owned(),
        );
        if let Some(t) = self.cache.borrow().get(&key) {
            return t.clone();
        }
        let t: Translated = Rc::new(
            self.catalog
                .places_for(group, kind)
                .filter_map(|p| translate_path(desc, &p.path).map(|(steps, _)| (steps, p.slot)))
                .collect(),
        );
        self.cache.borrow_mut().insert(key, t.clone());
        t
    }

    /// Renames an enveloped object.
    pub fn rewrite(&self, bytes: &[u8]) -> Vec<u8> {
        let (api_version, kind, mut unknown, mut object) = decode_envelope(bytes);
        let (group, _) = api_version.split_once('/').unwrap_or(("", &api_version));
        let app_group = match self.dir {
            Direction::ToApp => self.map.map_group(group, Direction::ToApp),
            Direction::ToCluster => None,
        }
        .unwrap_or_else(|| group.to_owned());
        if let Some(new) = self.map.map_api_version(&api_version, self.dir) {
            let mut tm = unknown
                .get_field_by_name("typeMeta")
                .and_then(|v| v.as_message().cloned())
                .unwrap();
            tm.set_field_by_name("apiVersion", Value::String(new));
            unknown.set_field_by_name("typeMeta", Value::Message(tm));
        }
        self.object(&mut object, &app_group, &kind);
        unknown.set_field_by_name("raw", Value::Bytes(object.encode_to_vec().into()));
        let mut out = MAGIC.to_vec();
        out.extend(unknown.encode_to_vec());
        out
    }

    /// Renames a raw watch frame.
    pub fn rewrite_frame(&self, frame: &[u8]) -> Vec<u8> {
        let mut event = DynamicMessage::decode(md(WATCH_EVENT), frame).unwrap();
        self.object(&mut event, "meta.k8s.io", "WatchEvent");
        event.encode_to_vec()
    }

    fn object(&self, m: &mut DynamicMessage, group: &str, kind: &str) {
        let places = self.places(&m.descriptor(), group, kind);
        let item_kind = kind.strip_suffix("List").unwrap_or(kind);
        for (steps, slot) in places.iter() {
            self.apply(m, steps, *slot, group, item_kind);
        }
    }

    fn apply(
        &self,
        m: &mut DynamicMessage,
        steps: &[ProtoStep],
        slot: Slot,
        group: &str,
        item_kind: &str,
    ) {
        let Some((ProtoStep::Field(f), rest)) = steps.split_first() else {
            return;
        };
        if !m.has_field(f) {
            return;
        }
        if let (Some(ProtoStep::MapKey(key)), Value::Map(entries)) =
            (rest.first(), m.get_field_mut(f))
        {
            if let Some(Value::String(s)) = entries.get_mut(&MapKey::String(key.clone())) {
                if let Slot::JsonString(inner, form) = slot {
                    if let Some(new) = self.json_string(s, inner, form) {
                        *s = new;
                    }
                } else if let Slot::Value(form) = slot {
                    if let Some(new) = self.map.map(form, s, self.dir) {
                        *s = new;
                    }
                }
            }
            return;
        }
        let value = m.get_field_mut(f);
        if rest.is_empty() {
            self.leaf(value, slot, group, item_kind);
            return;
        }
        match value {
            Value::Message(inner) => self.apply(inner, rest, slot, group, item_kind),
            Value::List(items) => {
                for v in items {
                    if let Value::Message(inner) = v {
                        self.apply(inner, rest, slot, group, item_kind);
                    }
                }
            }
            _ => {}
        }
    }

    fn leaf(&self, value: &mut Value, slot: Slot, group: &str, item_kind: &str) {
        match (slot, value) {
            (Slot::Value(form), Value::String(s)) => {
                if let Some(new) = self.map.map(form, s, self.dir) {
                    *s = new;
                }
            }
            (Slot::Value(form), Value::List(l)) => {
                for v in l {
                    if let Value::String(s) = v {
                        if let Some(new) = self.map.map(form, s, self.dir) {
                            *s = new;
                        }
                    }
                }
            }
            (Slot::Items, Value::List(l)) => {
                for v in l {
                    if let Value::Message(item) = v {
                        if item.descriptor().full_name() == RAW_EXTENSION {
                            self.raw_extension(item);
                        } else {
                            self.object(item, group, item_kind);
                        }
                    }
                }
            }
            (Slot::Object, Value::Message(m)) => self.raw_extension(m),
            (Slot::DropShadowed(sub), Value::List(l)) => {
                let sub = FieldPath::parse(sub).unwrap();
                l.retain(|v| {
                    let Value::Message(entry) = v else {
                        return true;
                    };
                    let mut cur = entry.clone();
                    for step in sub.steps() {
                        let Step::Key(k) = step else { return true };
                        match cur.get_field_by_name(k).map(|c| c.into_owned()) {
                            Some(Value::Message(next)) => cur = next,
                            Some(Value::String(g)) => return !self.map.is_shadowed(&g, self.dir),
                            _ => return true,
                        }
                    }
                    true
                });
            }
            _ => {}
        }
    }

    fn raw_extension(&self, m: &mut DynamicMessage) {
        let Some(raw) = m
            .get_field_by_name("raw")
            .and_then(|v| v.as_bytes().cloned())
        else {
            return;
        };
        if raw.starts_with(MAGIC) {
            m.set_field_by_name("raw", Value::Bytes(self.rewrite(&raw).into()));
        }
    }

    fn json_string(&self, s: &str, inner: &str, form: Form) -> Option<String> {
        let mut doc: Json = serde_json::from_str(s).ok()?;
        let path = FieldPath::parse(inner).unwrap();
        let mut changed = false;
        let mut visit = |v: &mut Json| {
            let mut cur = v;
            for step in path.steps() {
                let Step::Key(k) = step else { return };
                match cur.get_mut(k.as_str()) {
                    Some(next) => cur = next,
                    None => return,
                }
            }
            if let Some(new) = cur.as_str().and_then(|g| self.map.map(form, g, self.dir)) {
                *cur = Json::String(new);
                changed = true;
            }
        };
        match &mut doc {
            Json::Array(a) => a.iter_mut().for_each(&mut visit),
            other => visit(other),
        }
        changed.then(|| serde_json::to_string(&doc).unwrap())
    }
}

/// Whether a field's values are strings (for generators).
pub fn is_string(kind: &Kind) -> bool {
    matches!(kind, Kind::String)
}
