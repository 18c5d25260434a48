//! Properties of the protobuf rewriter on random messages built from
//! regroup's descriptors: every declared field (repeated ones several
//! times, maps, nested messages, embedded enveloped objects), unknown fields
//! of every wire type, in random order.
//!
//! - Renaming for the app and back for the cluster gives back the input
//!   byte for byte.
//! - The result decodes to what the naive decode -> rename -> encode gives.
//! - Group names anywhere but at catalog places are never renamed.

use crate::common;
use crate::protobuf_support;

use proptest::prelude::*;
use prost::Message;
use prost_reflect::{DynamicMessage, FieldDescriptor, Kind, MessageDescriptor};
use protobuf_support::{envelope_json, md, message_of, to_json, Naive, RAW_EXTENSION, WATCH_EVENT};
use regroup::rewrite::catalog::Slot;
use regroup::rewrite::protobuf::test_wire as wire;
use regroup::rewrite::protobuf::{known_kinds, translate_path, ProtoStep, MAGIC};
use regroup::rewrite::{Catalog, ProtoRewriter};
use regroup_config::{Direction, Form};
use wire::{key, ld, varint};

/// Names as the cluster knows them, in every form, and text around them.
const CLUSTER_NAMES: &[&str] = &[
    "samplecontroller.team1.example.com",
    "samplecontroller.team1.example.com/v1alpha1",
    "foos.samplecontroller.team1.example.com",
    "v1alpha1.wardle.team1.example.com",
    "wardle.team1.example.com/v1",
    "samplecontroller.team1.example.com/owner",
    "foos.samplecontroller.team1.example.com \"alpha\" not found in samplecontroller.team1.example.com",
    "involvedObject.apiVersion=samplecontroller.team1.example.com/v1alpha1,involvedObject.name=x",
    "ConfigMap,Foo.samplecontroller.team1.example.com",
    "request.resource.group == 'samplecontroller.team1.example.com'",
];
/// The same names as the app knows them.
const APP_NAMES: &[&str] = &[
    "samplecontroller.k8s.io",
    "samplecontroller.k8s.io/v1alpha1",
    "foos.samplecontroller.k8s.io",
    "v1alpha1.wardle.example.com",
];
/// Strings that name no mapped group.
const NEUTRAL: &[&str] = &[
    "",
    "alpha",
    "apps/v1",
    "v1",
    "apps",
    "kube-system",
    "example.com",
    "team1",
];

/// Deterministic randomness from proptest's seed.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick(&mut self, from: &[&'static str]) -> &'static str {
        from[self.below(from.len())]
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    F(u32),
    K(String),
}

/// A name in each form, as the cluster knows it.
fn cluster_name(form: Form) -> &'static str {
    match form {
        Form::Group => "samplecontroller.team1.example.com",
        Form::ApiVersion => "samplecontroller.team1.example.com/v1alpha1",
        Form::QualifiedName => "v1alpha1.wardle.team1.example.com",
        Form::FieldSelector => {
            "involvedObject.apiVersion=samplecontroller.team1.example.com/v1alpha1,involvedObject.name=x"
        }
        Form::GroupKinds => "ConfigMap,Foo.samplecontroller.team1.example.com",
        Form::Cel => "request.resource.group == 'samplecontroller.team1.example.com'",
        Form::Literal => "samplecontroller.team1.example.com",
        _ => "foos.samplecontroller.team1.example.com \"alpha\" not found",
    }
}

/// Where a kind's string places are, as field numbers and map keys, with
/// their form; `true` for a string holding JSON.
type Places = Vec<(Vec<Seg>, Form, bool)>;

fn place_paths(
    catalog: &Catalog,
    message: &MessageDescriptor,
    group: &str,
    kind: &str,
    prefix: &[Seg],
    out: &mut Places,
) {
    for place in catalog.places_for(group, kind) {
        let Some((steps, _)) = translate_path(message, &place.path) else {
            continue;
        };
        let mut path = prefix.to_vec();
        path.extend(steps.iter().map(|s| match s {
            ProtoStep::Field(f) => Seg::F(f.number()),
            ProtoStep::MapKey(k) => Seg::K(k.clone()),
        }));
        match place.slot {
            Slot::Value(form) => out.push((path, form, false)),
            Slot::JsonString(_, form) => out.push((path, form, true)),
            Slot::Items => {
                if let (Some(ProtoStep::Field(f)), Some(item_kind)) =
                    (steps.last(), kind.strip_suffix("List"))
                {
                    if let Kind::Message(item) = f.kind() {
                        if item.full_name() != RAW_EXTENSION && !item_kind.is_empty() {
                            place_paths(catalog, &item, group, item_kind, &path, out);
                        }
                    }
                }
            }
            _ => {}
        }
    }
}

struct Gen<'a> {
    rng: Rng,
    catalog: &'a Catalog,
    /// Strings allowed at places, and elsewhere.
    at_places: &'a [&'static str],
    elsewhere: &'a [&'static str],
    objects: usize,
}

impl Gen<'_> {
    /// A random kind of the table (or a custom one), as `(apiVersion, kind)`.
    fn kind(&mut self, custom_group: &str) -> (String, String) {
        let kinds = known_kinds();
        let n = self.rng.below(kinds.len() + 2);
        if n >= kinds.len() {
            let kind = if n == kinds.len() { "Foo" } else { "FooList" };
            return (format!("{custom_group}/v1alpha1"), kind.into());
        }
        let (g, v, k, _) = &kinds[n];
        let api_version = if g.is_empty() {
            v.to_string()
        } else {
            format!("{g}/{v}")
        };
        (api_version, k.clone())
    }

    fn object(&mut self, api_version: &str, kind: &str, custom_group: &str) -> Vec<u8> {
        self.objects += 1;
        let message = message_of(api_version, kind);
        let (group, _) = api_version.split_once('/').unwrap_or(("", api_version));
        // Places are selected by the app's group; built-in groups are the
        // same on both sides, and custom kinds have only generic places.
        let mut places = Vec::new();
        place_paths(self.catalog, &message, group, kind, &[], &mut places);
        let raw = self.message(&message, &mut Vec::new(), &places, 0, custom_group);
        let tm = [ld(1, api_version.as_bytes()), ld(2, kind.as_bytes())].concat();
        let mut fields = [ld(1, &tm), ld(2, &raw), ld(3, b""), ld(4, b"")];
        if self.rng.below(4) == 0 {
            fields.swap(0, 1);
        }
        let mut out = MAGIC.to_vec();
        out.extend(fields.concat());
        out
    }

    /// A string for `path`: at a place, mostly a name in the place's form
    /// (when names are allowed there).
    fn at_place(&mut self, form: Form) -> &'static str {
        let named = self.at_places.contains(&cluster_name(form));
        // A CEL place holds CEL: text naming a group there that does not
        // parse is refused (tests/it/render.rs, core/src/rewrite/json/schema.rs).
        if form == Form::Cel {
            return if named && self.rng.below(4) != 0 {
                cluster_name(form)
            } else {
                "x == 'alpha'"
            };
        }
        if named && self.rng.below(4) != 0 {
            cluster_name(form)
        } else {
            self.rng.pick(self.at_places)
        }
    }

    fn string(&mut self, path: &[Seg], places: &Places) -> Vec<u8> {
        match places.iter().find(|(p, _, _)| p == path) {
            Some((_, form, true)) => {
                let v = self.at_place(*form);
                serde_json::to_string(&serde_json::json!([
                    {"type": "Object", "object": {"target": {"kind": "Foo", "name": "x", "apiVersion": v}}},
                    {"type": "Resource"}
                ]))
                .unwrap()
                .into_bytes()
            }
            Some((_, form, false)) => self.at_place(*form).as_bytes().to_vec(),
            None => self.rng.pick(self.elsewhere).as_bytes().to_vec(),
        }
    }

    fn message(
        &mut self,
        message: &MessageDescriptor,
        path: &mut Vec<Seg>,
        places: &Places,
        depth: usize,
        custom_group: &str,
    ) -> Vec<u8> {
        let mut fields = Vec::new();
        for f in message.fields() {
            let count = if f.is_list() || f.is_map() {
                self.rng.below(3)
            } else {
                usize::from(self.rng.below(3) != 0)
            };
            for _ in 0..count {
                path.push(Seg::F(f.number()));
                if let Some(v) = self.field(&f, path, places, depth, custom_group) {
                    fields.push(v);
                }
                path.pop();
            }
        }
        for _ in 0..self.rng.below(3) {
            let n = 500 + self.rng.below(100) as u32;
            fields.push(match self.rng.below(4) {
                0 => [key(n, 0), varint(self.rng.next())].concat(),
                1 => [key(n, 1), self.rng.next().to_le_bytes().to_vec()].concat(),
                2 => [key(n, 5), (self.rng.next() as u32).to_le_bytes().to_vec()].concat(),
                _ => ld(n, self.rng.pick(self.elsewhere).as_bytes()),
            });
        }
        // Any order.
        for i in (1..fields.len()).rev() {
            let j = self.rng.below(i + 1);
            fields.swap(i, j);
        }
        fields.concat()
    }

    fn field(
        &mut self,
        f: &FieldDescriptor,
        path: &mut Vec<Seg>,
        places: &Places,
        depth: usize,
        custom_group: &str,
    ) -> Option<Vec<u8>> {
        let n = f.number();
        if f.is_map() {
            let Kind::Message(entry) = f.kind() else {
                unreachable!()
            };
            let keys: Vec<String> = places
                .iter()
                .filter_map(|(p, _, _)| match p.split_last() {
                    Some((Seg::K(k), head)) if head == path.as_slice() => Some(k.clone()),
                    _ => None,
                })
                .collect();
            let k = if !keys.is_empty() && self.rng.below(2) == 0 {
                keys[self.rng.below(keys.len())].clone()
            } else {
                self.rng.pick(self.elsewhere).to_owned()
            };
            path.push(Seg::K(k.clone()));
            let value = self.field(
                &entry.map_entry_value_field(),
                path,
                places,
                depth,
                custom_group,
            );
            path.pop();
            let mut e = ld(1, k.as_bytes());
            // The entry's value field is number 2: `field` wrote its key.
            e.extend(value.unwrap_or_default());
            return Some(ld(n, &e));
        }
        Some(match f.kind() {
            Kind::String => ld(n, self.string(path, places)),
            Kind::Bytes => {
                if f.parent_message().full_name() == RAW_EXTENSION {
                    if depth > 3 || self.objects > 6 || self.rng.below(3) == 0 {
                        ld(n, b"")
                    } else {
                        let (av, k) = self.kind(custom_group);
                        let obj = self.object(&av, &k, custom_group);
                        ld(n, &obj)
                    }
                } else {
                    let s = self.rng.pick(self.elsewhere);
                    ld(n, format!("\x00\x01 {s}").as_bytes())
                }
            }
            Kind::Message(m) => {
                if depth > 5 {
                    return None;
                }
                let inner = self.message(&m, path, places, depth + 1, custom_group);
                ld(n, &inner)
            }
            Kind::Bool => [key(n, 0), varint(self.rng.below(2) as u64)].concat(),
            _ => [key(n, 0), varint(self.rng.next() >> self.rng.below(64))].concat(),
        })
    }
}

fn frame(g: &mut Gen<'_>, custom_group: &str) -> Vec<u8> {
    let (av, k) = g.kind(custom_group);
    let obj = g.object(&av, &k, custom_group);
    let raw_ext = ld(1, &obj);
    let ty = *["ADDED", "MODIFIED", "DELETED", "BOOKMARK", "ERROR"]
        .get(g.rng.below(5))
        .unwrap();
    let mut fields = [ld(1, ty.as_bytes()), ld(2, &raw_ext)];
    if g.rng.below(3) == 0 {
        fields.reverse();
    }
    fields.concat()
}

fn frame_json(frame: &[u8]) -> serde_json::Value {
    to_json(&DynamicMessage::decode(md(WATCH_EVENT), frame).expect("WatchEvent"))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Cluster names everywhere: for the app and back gives the same
    /// bytes, and the app's view is the naive rename's.
    #[test]
    fn random_objects_round_trip_and_match_the_naive_rename(seed in any::<u64>(), watch in any::<bool>()) {
        let map = common::fixture_map();
        let catalog = Catalog::new(&[]);
        let names: Vec<&str> = CLUSTER_NAMES.iter().chain(NEUTRAL).copied().collect();
        let mut g = Gen { rng: Rng(seed), catalog: &catalog, at_places: &names, elsewhere: &names, objects: 0 };
        let custom = "samplecontroller.team1.example.com";
        let input = if watch { frame(&mut g, custom) } else {
            let (av, k) = g.kind(custom);
            g.object(&av, &k, custom)
        };
        let to_app = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
        let to_cluster = ProtoRewriter::new(&map, &catalog, Direction::ToCluster);
        let naive = Naive::new(&map, &catalog, Direction::ToApp);
        let (out, back, want) = if watch {
            let out = to_app.rewrite_watch_frame(&input).unwrap();
            let back = out.as_ref().map(|o| to_cluster.rewrite_watch_frame(o).unwrap().expect("renamed back"));
            (out, back, frame_json(&naive.rewrite_frame(&input)))
        } else {
            let out = to_app.rewrite_bytes(&input).unwrap();
            let back = out.as_ref().map(|o| to_cluster.rewrite_bytes(o).unwrap().expect("renamed back"));
            (out, back, envelope_json(&naive.rewrite(&input)))
        };
        if let Some(back) = back {
            prop_assert_eq!(&back, &input);
        }
        let got_bytes = out.unwrap_or_else(|| input.clone());
        let got = if watch { frame_json(&got_bytes) } else { envelope_json(&got_bytes) };
        prop_assert_eq!(got, want);
        // And DynamicMessage reads the output as a whole message.
        if !watch {
            let body = got_bytes.strip_prefix(MAGIC).unwrap();
            prop_assert!(DynamicMessage::decode(md(protobuf_support::UNKNOWN), body).is_ok());
        }
    }

    /// Names of both sides everywhere but at places: nothing is renamed.
    #[test]
    fn names_outside_catalog_places_are_never_renamed(seed in any::<u64>(), watch in any::<bool>()) {
        let map = common::fixture_map();
        let catalog = Catalog::new(&[]);
        let everywhere: Vec<&str> = CLUSTER_NAMES.iter().chain(APP_NAMES).chain(NEUTRAL).copied().collect();
        let mut g = Gen { rng: Rng(seed), catalog: &catalog, at_places: NEUTRAL, elsewhere: &everywhere, objects: 0 };
        let custom = "other.example.org";
        let input = if watch { frame(&mut g, custom) } else {
            let (av, k) = g.kind(custom);
            g.object(&av, &k, custom)
        };
        for dir in [Direction::ToApp, Direction::ToCluster] {
            let rw = ProtoRewriter::new(&map, &catalog, dir);
            let out = if watch { rw.rewrite_watch_frame(&input) } else { rw.rewrite_bytes(&input) };
            prop_assert_eq!(out, Ok(None), "{:?}", dir);
        }
    }
}

/// The generator reaches every kind and puts names at places (the
/// properties aren't vacuous).
#[test]
fn the_generator_puts_names_where_they_are_renamed() {
    let map = common::fixture_map();
    let catalog = Catalog::new(&[]);
    let to_app = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let names: Vec<&str> = CLUSTER_NAMES.to_vec();
    let mut renamed = 0;
    let mut kinds = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let mut g = Gen {
            rng: Rng(seed),
            catalog: &catalog,
            at_places: &names,
            elsewhere: NEUTRAL,
            objects: 0,
        };
        let (av, k) = g.kind("samplecontroller.team1.example.com");
        let input = g.object(&av, &k, "samplecontroller.team1.example.com");
        if to_app.rewrite_bytes(&input).unwrap().is_some() {
            renamed += 1;
            kinds.insert(k);
        }
        let _ = DynamicMessage::decode(md(protobuf_support::UNKNOWN), &input[4..])
            .unwrap()
            .encode_to_vec();
    }
    assert!(renamed > 90, "only {renamed} of 200 random objects renamed");
    assert!(kinds.len() > 30, "renamed kinds: {kinds:?}");
}
