//! The rewrite engine: built once from the configuration, it owns the rules,
//! the catalog, one name index (`names.rs`: four automata shared by every
//! codec) and one codec per wire form and direction. Every layer that
//! renames asks it with `(direction, wire form, context, bytes)`; nothing
//! else constructs a codec on the request path.

use regroup_config::{Direction, GroupMap};

use super::catalog::Catalog;
use super::codec::{self, Codec, Context};
use super::error::RewriteError;
use super::json::JsonRewriter;
use super::list_stream;
use super::names::NameIndex;
use super::openapi::OpenApiRewriter;
use super::openapi_proto::OpenApiProtoRewriter;
use super::protobuf::{self, ProtoRewriter};
use crate::kube::Wire;
use crate::rewrite::framing::Framing;

/// What the rules are, owned by the engine.
struct Rules {
    map: GroupMap,
    catalog: Catalog,
}

/// The codecs, one per wire form and direction (`[ToCluster, ToApp]`),
/// borrowing the rules.
struct Codecs<'a> {
    json: [JsonRewriter<'a>; 2],
    proto: [ProtoRewriter<'a>; 2],
    openapi: [OpenApiRewriter<'a>; 2],
    openapi_proto: [OpenApiProtoRewriter<'a>; 2],
}

self_cell::self_cell!(
    struct Cell {
        owner: Rules,
        #[covariant]
        dependent: Codecs,
    }
);

/// The engine. Immutable; a new configuration is a new engine.
pub struct Engine {
    cell: Cell,
    tag: String,
}

fn at(dir: Direction) -> usize {
    match dir {
        Direction::ToCluster => 0,
        Direction::ToApp => 1,
    }
}

impl Engine {
    /// Builds every codec once for `map` and `catalog`.
    pub fn new(map: GroupMap, catalog: Catalog) -> Engine {
        let tag = rules_tag(&map);
        let cell = Cell::new(Rules { map, catalog }, |r| {
            let (c, a) = (Direction::ToCluster, Direction::ToApp);
            let index = NameIndex::new(&r.map);
            Codecs {
                json: [
                    JsonRewriter::with_index(&r.map, &r.catalog, c, index.clone()),
                    JsonRewriter::with_index(&r.map, &r.catalog, a, index.clone()),
                ],
                proto: [
                    ProtoRewriter::with_index(&r.map, &r.catalog, c, index.clone()),
                    ProtoRewriter::with_index(&r.map, &r.catalog, a, index.clone()),
                ],
                openapi: [
                    OpenApiRewriter::with_index(&r.map, c, &tag, index.clone()),
                    OpenApiRewriter::with_index(&r.map, a, &tag, index.clone()),
                ],
                openapi_proto: [
                    OpenApiProtoRewriter::with_index(&r.map, c, index.clone()),
                    OpenApiProtoRewriter::with_index(&r.map, a, index),
                ],
            }
        });
        Engine { cell, tag }
    }

    /// The rename rules.
    pub fn map(&self) -> &GroupMap {
        &self.cell.borrow_owner().map
    }

    /// The catalog of group-bearing places.
    pub fn catalog(&self) -> &Catalog {
        &self.cell.borrow_owner().catalog
    }

    /// A tag derived from the rules, appended to ETags and OpenAPI hashes so
    /// that no cache mixes renamed and unrenamed bytes, or two rule sets.
    pub fn tag(&self) -> &str {
        &self.tag
    }

    /// The JSON codec for `dir`.
    pub fn json(&self, dir: Direction) -> &JsonRewriter<'_> {
        &self.cell.borrow_dependent().json[at(dir)]
    }

    /// The Kubernetes protobuf codec for `dir`.
    pub fn proto(&self, dir: Direction) -> &ProtoRewriter<'_> {
        &self.cell.borrow_dependent().proto[at(dir)]
    }

    /// Renames one body. `Ok(None)`: nothing to rename, forward the bytes as
    /// they are.
    /// `Wire::Opaque` bodies are never renamed; `Wire::Unrenamable` ones are
    /// an error (the caller refuses them before reading).
    pub fn body(
        &self,
        dir: Direction,
        wire: Wire,
        cx: Context<'_>,
        bytes: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        let json = self.json(dir);
        let codec: &dyn Codec = match wire {
            Wire::Json => json,
            Wire::JsonPatch => &codec::JsonPatch(json),
            Wire::Yaml => &codec::Yaml(json),
            Wire::Protobuf => self.proto(dir),
            Wire::Unrenamable => &codec::Refused,
            Wire::Opaque => &codec::Untouched,
        };
        codec.rewrite(cx, bytes)
    }

    /// Renames one JSON object held as a value, in place: a manifest
    /// (`regroup render`), the object of a patch's read-modify-write.
    /// `cx` as for [`body`](Self::body). Returns whether anything changed.
    pub fn value(
        &self,
        dir: Direction,
        cx: Context<'_>,
        obj: &mut serde_json::Value,
    ) -> Result<bool, RewriteError> {
        self.json(dir).rewrite_value(obj, cx.hint, cx.addressed)
    }

    /// Renames the next chunk of a JSON list as it streams: the renamed
    /// bytes ready to send (items are renamed as they complete).
    pub fn list_feed(
        &self,
        dir: Direction,
        list: &mut list_stream::ListStream,
        chunk: &[u8],
    ) -> Result<Vec<u8>, RewriteError> {
        list.feed(self.json(dir), chunk)
    }

    /// Ends a JSON list: the renamed rest (an error if it ended inside an
    /// item).
    pub fn list_finish(
        &self,
        dir: Direction,
        list: list_stream::ListStream,
    ) -> Result<Vec<u8>, RewriteError> {
        list.finish(self.json(dir))
    }

    /// Renames the next chunk of a protobuf list: its items are renamed as
    /// they complete and spooled until the list ends (the length prefix
    /// comes first; see `protobuf/list_stream.rs`).
    pub fn proto_list_feed(
        &self,
        dir: Direction,
        list: &mut protobuf::list_stream::ListStream,
        chunk: &[u8],
    ) -> Result<(), RewriteError> {
        list.feed(self.proto(dir), chunk)
    }

    /// Ends a protobuf list: its head with the new length, then the spooled
    /// items.
    pub fn proto_list_finish(
        &self,
        dir: Direction,
        list: protobuf::list_stream::ListStream,
    ) -> Result<protobuf::list_stream::Output, RewriteError> {
        list.finish(self.proto(dir))
    }

    /// Renames the content of one watch frame (without its `\n` or length
    /// prefix): a JSON `WatchEvent` line or a raw protobuf `WatchEvent`.
    pub fn watch_event(
        &self,
        dir: Direction,
        framing: Framing,
        cx: Context<'_>,
        event: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        match framing {
            Framing::Lines => self.json(dir).rewrite_bytes_with(event, None, cx.addressed),
            Framing::LengthPrefixed => self
                .proto(dir)
                .rewrite_watch_frame_with(event, cx.addressed),
        }
    }

    /// True when a watch event's object (content as for
    /// [`watch_event`](Self::watch_event), in the input's names) is hidden
    /// in `dir`: a CRD or APIService of a shadowed group, which the other
    /// side must never see (a GET of it is a 404).
    pub fn hides_event(
        &self,
        dir: Direction,
        framing: Framing,
        cx: Context<'_>,
        event: &[u8],
    ) -> Result<bool, RewriteError> {
        match (framing, cx.addressed) {
            (Framing::Lines, Some((g, k))) => self.json(dir).hides_addressed(event, g, k),
            (Framing::Lines, None) => self.json(dir).hides(event),
            (Framing::LengthPrefixed, Some((g, k))) => self.proto(dir).hides_addressed(event, g, k),
            (Framing::LengthPrefixed, None) => self.proto(dir).hides(event),
        }
    }

    /// Renames an OpenAPI document: v2 or v3 JSON, or the v2 protobuf
    /// (gnostic) when `proto`.
    pub fn openapi(
        &self,
        dir: Direction,
        proto: bool,
        bytes: &[u8],
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        let codecs = self.cell.borrow_dependent();
        let codec: &dyn Codec = if proto {
            &codecs.openapi_proto[at(dir)]
        } else {
            &codecs.openapi[at(dir)]
        };
        codec.rewrite(Context::default(), bytes)
    }
}

/// A tag derived from the rules (FNV-1a).
fn rules_tag(map: &GroupMap) -> String {
    let mut h: u32 = 0x811c_9dc5;
    for r in map.rules() {
        let (from, to) = r.rule.ends(Direction::ToCluster);
        for b in from.bytes().chain([0]).chain(to.bytes()).chain([0]) {
            h = (h ^ u32::from(b)).wrapping_mul(0x0100_0193);
        }
    }
    format!("-rg{h:08x}")
}

// `engine` is shared with the proxy crate's tests (feature `test-support`).
#[cfg(any(test, feature = "test-support"))]
pub mod tests {
    use super::*;
    use regroup_config::{MapRule, Rule};

    /// An engine renaming `samplecontroller.k8s.io` to `to`.
    pub fn engine(to: &str) -> Engine {
        let map = GroupMap::new(vec![MapRule {
            rule: Rule::Exact {
                from: "samplecontroller.k8s.io".into(),
                to: to.into(),
            },
            reference_keys: true,
        }])
        .unwrap();
        Engine::new(map, Catalog::new(&[]))
    }

    #[test]
    fn direction_is_data() {
        let e = engine("samplecontroller.team1.example.com");
        let app = br#"{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo"}"#;
        let cluster = e
            .body(Direction::ToCluster, Wire::Json, Context::default(), app)
            .unwrap()
            .unwrap();
        assert_eq!(
            cluster,
            br#"{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo"}"#
        );
        let back = e
            .body(Direction::ToApp, Wire::Json, Context::default(), &cluster)
            .unwrap()
            .unwrap();
        assert_eq!(back, app);
        assert_eq!(
            e.body(Direction::ToCluster, Wire::Opaque, Context::default(), app)
                .unwrap(),
            None
        );
        assert!(e
            .body(
                Direction::ToCluster,
                Wire::Unrenamable,
                Context::default(),
                app
            )
            .is_err());
    }

    #[test]
    fn values_yaml_and_lists_go_through_the_engine() {
        let e = engine("samplecontroller.team1.example.com");
        let mut v =
            serde_json::json!({"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo"});
        assert!(e
            .value(Direction::ToCluster, Context::default(), &mut v)
            .unwrap());
        assert_eq!(
            v["apiVersion"],
            "samplecontroller.team1.example.com/v1alpha1"
        );
        // A partial object: its type from the hint.
        let mut patch = serde_json::json!({"spec": {"group": "samplecontroller.k8s.io"}});
        let crd = Context {
            hint: Some(("apiextensions.k8s.io/v1", "CustomResourceDefinition")),
            addressed: None,
        };
        assert!(e.value(Direction::ToCluster, crd, &mut patch).unwrap());
        assert_eq!(patch["spec"]["group"], "samplecontroller.team1.example.com");

        let yaml = b"# kept\napiVersion: samplecontroller.k8s.io/v1alpha1\nkind: Foo\n";
        let out = e
            .body(Direction::ToCluster, Wire::Yaml, Context::default(), yaml)
            .unwrap()
            .unwrap();
        assert_eq!(
            out,
            b"# kept\napiVersion: samplecontroller.team1.example.com/v1alpha1\nkind: Foo\n"
        );

        let list = br#"{"kind":"FooList","apiVersion":"samplecontroller.k8s.io/v1alpha1","items":[{"apiVersion":"samplecontroller.k8s.io/v1alpha1","kind":"Foo"}]}"#;
        let mut stream = list_stream::ListStream::new(None, 1 << 20);
        let mut out = Vec::new();
        for chunk in list.chunks(7) {
            out.extend(
                e.list_feed(Direction::ToCluster, &mut stream, chunk)
                    .unwrap(),
            );
        }
        out.extend(e.list_finish(Direction::ToCluster, stream).unwrap());
        let whole = e
            .body(Direction::ToCluster, Wire::Json, Context::default(), list)
            .unwrap()
            .unwrap();
        assert_eq!(out, whole, "streamed as renamed whole");
        assert!(!String::from_utf8(out)
            .unwrap()
            .contains("samplecontroller.k8s.io"));
    }

    #[test]
    fn the_tag_follows_the_rules() {
        let a = engine("samplecontroller.team1.example.com");
        let b = engine("samplecontroller.team2.example.com");
        assert_ne!(a.tag(), b.tag());
        assert_eq!(a.tag(), engine("samplecontroller.team1.example.com").tag());
        assert!(a.tag().starts_with("-rg"));
    }
}
