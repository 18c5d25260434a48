//! One entry point per decoder, each taking arbitrary bytes: what the
//! cargo-fuzz targets in `fuzz/` call, and what the stable test
//! `corpus.rs` (a unit test) replays every corpus file through (so CI without
//! a nightly toolchain still runs every input the fuzzer kept). Each
//! returns normally on any input; a panic, an abort or an allocation past
//! the fuzzer's limit is the bug. See docs/fuzzing.md.
//!
//! The rules are the captures' own (`samplecontroller.k8s.io` ↔
//! `samplecontroller.team1.example.com`, `wardle.example.com` ↔
//! `wardle.team1.example.com`), so that the seeds from `testdata/` reach
//! the renaming paths, not only the "nothing to rename" shortcut.

#[cfg(test)]
mod corpus;

use std::sync::OnceLock;

use http::{HeaderMap, HeaderName, HeaderValue};
use regroup_config::{Direction, Settings};
use rustls::pki_types::CertificateDer;

use crate::front::auth::{self, RequestHeaderConfig};
use crate::kube::media::Wire;
use crate::kube::request::{is_watch, RequestInfo};
use crate::listen::path_check::check_path;
use crate::rewrite::framing::{Framer, Framing};
use crate::rewrite::list_stream::{rewrite_in_chunks, ListStream};
use crate::rewrite::protobuf::stream::WatchStream;
use crate::rewrite::raw::{reference, Raw};
use crate::rewrite::{Catalog, Context, Engine};
use crate::url_rename::{rewrite_path, rewrite_query};

/// Both directions, the order every target tries them in.
const DIRECTIONS: [Direction; 2] = [Direction::ToCluster, Direction::ToApp];

/// The largest frame or buffered list the stream targets accept: small, so
/// that a framer that buffers without bound trips it quickly.
const STREAM_LIMIT: usize = 1 << 20;

const CONFIG: &str = "rules:
  - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
  - {from: wardle.example.com, to: wardle.team1.example.com}
names:
  suffix: -renamed
  kinds: [ClusterRole, ClusterRoleBinding, ValidatingWebhookConfiguration]
";

fn engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let s = settings();
        Engine::new(s.map.clone(), Catalog::for_map(&s.fields, &s.map))
    })
}

/// `regroup render`'s renamer for `dir`, built once like the engine.
fn renderer(dir: Direction) -> &'static crate::render::Renderer<'static> {
    static RENDERERS: OnceLock<[crate::render::Renderer<'static>; 2]> = OnceLock::new();
    let r = RENDERERS.get_or_init(|| {
        [
            crate::render::Renderer::new(settings(), Direction::ToCluster),
            crate::render::Renderer::new(settings(), Direction::ToApp),
        ]
    });
    match dir {
        Direction::ToCluster => &r[0],
        Direction::ToApp => &r[1],
    }
}

/// The captures' rules with `metadata:` rules: keys of two prefixes and one
/// label value renamed, one kind excluded.
const METADATA_CONFIG: &str = "rules:
  - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
names: {kinds: []}
metadata:
  prefixes:
    - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
    - {from: kopf.zalando.org, to: kopf.team1.example.com}
  values:
    - {key: app.kubernetes.io/managed-by, from: foo-operator, to: foo-operator-team1}
  exclude:
    - {kind: Secret, name: shared}
";

fn metadata_engine() -> &'static Engine {
    static ENGINE: OnceLock<Engine> = OnceLock::new();
    ENGINE.get_or_init(|| {
        let s = regroup_config::load(METADATA_CONFIG).expect("the metadata config is valid");
        Engine::new(s.map.clone(), Catalog::for_map(&s.fields, &s.map))
    })
}

fn settings() -> &'static Settings {
    static SETTINGS: OnceLock<Settings> = OnceLock::new();
    SETTINGS.get_or_init(|| regroup_config::load(CONFIG).expect("the captures' config is valid"))
}

/// The (apiVersion, kind) and (group, kind) contexts a body is read in:
/// none, a Foo in each world, and an APIService (whose group is in its name).
const HINTS: [Option<(&str, &str)>; 3] = [
    None,
    Some(("samplecontroller.k8s.io/v1alpha1", "Foo")),
    Some(("samplecontroller.team1.example.com/v1alpha1", "Foo")),
];
const ADDRESSED: [Option<(&str, &str)>; 3] = [
    None,
    Some(("samplecontroller.k8s.io", "Foo")),
    Some(("apiregistration.k8s.io", "APIService")),
];

/// Chunk sizes taken from the input's first byte: the same bytes cut
/// differently by the network.
fn chunk_size(data: &[u8]) -> usize {
    data.first().map_or(1, |b| usize::from(*b % 64) + 1)
}

/// JSON bodies (objects, lists, Tables, discovery, Status), both ways:
/// whole, in each context, and streamed through the list splicer in chunks.
pub fn json(data: &[u8]) {
    // Differential: the validating reader accepts exactly what serde_json
    // accepts, and on valid JSON the walk's tape, read whole or level by
    // level, reads every container as serde_json does (panics otherwise).
    if let Ok(text) = std::str::from_utf8(data) {
        if reference::validates_as_serde_json(text) {
            let root = Raw::parse(text).expect("validated");
            reference::agree_both_ways(text, root);
        }
    }
    let e = engine();
    for dir in DIRECTIONS {
        let rw = e.json(dir);
        let _ = e.body(dir, Wire::Json, Context::default(), data);
        for (hint, addressed) in HINTS.into_iter().zip(ADDRESSED) {
            let _ = e.body(dir, Wire::Json, Context { hint, addressed }, data);
        }
        let _ = rewrite_in_chunks(rw, data, chunk_size(data));
        let mut list = ListStream::new(None, STREAM_LIMIT);
        let mut ok = true;
        for chunk in data.chunks(chunk_size(data)) {
            if e.list_feed(dir, &mut list, chunk).is_err() {
                ok = false;
                break;
            }
        }
        if ok {
            let _ = e.list_finish(dir, list);
        }
    }
}

/// Kubernetes protobuf: the `k8s\0` envelope, the `Unknown` wrapper and the
/// walk of the message inside, both ways, whole and as watch events.
pub fn protobuf(data: &[u8]) {
    let e = engine();
    for dir in DIRECTIONS {
        let rw = e.proto(dir);
        for addressed in ADDRESSED {
            let cx = Context {
                hint: None,
                addressed,
            };
            let _ = e.body(dir, Wire::Protobuf, cx, data);
            let _ = e.watch_event(dir, Framing::LengthPrefixed, cx, data);
            let _ = e.hides_event(dir, Framing::LengthPrefixed, cx, data);
        }
        let _ = rw.rewrite_watch_frame(data);
    }
}

/// Watch streams: newline-delimited JSON and length-prefixed protobuf,
/// cut into chunks, framed, and each frame renamed; the protobuf watch
/// stream codec on the same bytes.
pub fn watch(data: &[u8]) {
    let e = engine();
    let size = chunk_size(data);
    for framing in [Framing::Lines, Framing::LengthPrefixed] {
        for dir in DIRECTIONS {
            let mut framer = Framer::new(framing, STREAM_LIMIT);
            'stream: for chunk in data.chunks(size) {
                framer.push(chunk);
                loop {
                    match framer.next_frame() {
                        Ok(Some(frame)) => {
                            let event = framing.content(&frame);
                            let cx = Context::default();
                            if let Ok(Some(out)) = e.watch_event(dir, framing, cx, event) {
                                let _ = framing.frame(&out);
                            }
                            let _ = e.hides_event(dir, framing, cx, event);
                        }
                        Ok(None) => break,
                        Err(_) => break 'stream,
                    }
                }
            }
            let _ = framer.finish();
        }
    }
    for dir in DIRECTIONS {
        let rw = e.proto(dir);
        let mut stream = WatchStream::new(None, STREAM_LIMIT);
        let mut ok = true;
        for chunk in data.chunks(size) {
            if stream.feed(rw, chunk).is_err() {
                ok = false;
                break;
            }
        }
        if ok {
            let _ = stream.finish();
        }
        let _ = rw.rewrite_watch_stream(data, None);
    }
}

/// YAML bodies (edited in place) and `regroup render`, both ways.
pub fn yaml(data: &[u8]) {
    let e = engine();
    for dir in DIRECTIONS {
        for (hint, addressed) in HINTS.into_iter().zip(ADDRESSED) {
            let _ = e.body(dir, Wire::Yaml, Context { hint, addressed }, data);
        }
        if let Ok(text) = std::str::from_utf8(data) {
            let _ = renderer(dir).render(text);
        }
    }
}

/// JSON Patch (RFC 6902) request bodies, through the engine as the
/// pipeline renames them: patches of a Foo and of an APIService, and one
/// addressed by its URL, both ways.
pub fn json_patch(data: &[u8]) {
    let e = engine();
    let patched = [
        ("samplecontroller.k8s.io/v1alpha1", "Foo"),
        ("apiregistration.k8s.io/v1", "APIService"),
    ];
    for dir in DIRECTIONS {
        for hint in patched {
            let cx = Context {
                hint: Some(hint),
                addressed: None,
            };
            let _ = e.body(dir, Wire::JsonPatch, cx, data);
        }
        let cx = Context {
            hint: HINTS[1],
            addressed: ADDRESSED[1],
        };
        let _ = e.body(dir, Wire::JsonPatch, cx, data);
    }
}

/// OpenAPI documents: v2 and v3 JSON, and the v2 protobuf (gnostic).
pub fn openapi(data: &[u8]) {
    let e = engine();
    for dir in DIRECTIONS {
        let _ = e.openapi(dir, false, data);
        let _ = e.openapi(dir, true, data);
    }
}

/// Request targets: `path?query` as it arrives (lossy UTF-8, as the
/// server's URI parser would refuse worse) through the path check, the
/// request classifier and the path and query renaming, both ways.
pub fn url(data: &[u8]) {
    let s = String::from_utf8_lossy(data);
    let (path, query) = match s.split_once('?') {
        Some((p, q)) => (p, Some(q)),
        None => (&*s, None),
    };
    let _ = check_path(path);
    let info = RequestInfo::parse(path, query);
    let _ = info.api_version();
    let _ = info.template(path);
    let _ = is_watch(path, query);
    let map = engine().map();
    for dir in DIRECTIONS {
        let _ = rewrite_path(path, map, dir);
        if let Some(q) = query {
            let _ = rewrite_query(q, map, dir);
        }
    }
    // The same bytes as the server's URI parser sees them.
    if let Ok(uri) = http::Uri::try_from(data) {
        let _ = check_path(uri.path());
        let _ = RequestInfo::parse(uri.path(), uri.query());
    }
}

/// Metadata rules: the input as a label selector (the query parameter's
/// grammar), renamed both ways, where a renamed selector must parse and
/// name back to the input's requirements; and as a JSON body, a JSON
/// Patch (its `path`/`from` tokens) and a merge patch of a ConfigMap.
pub fn metadata(data: &[u8]) {
    let e = metadata_engine();
    let map = e.map();
    if let Ok(selector) = std::str::from_utf8(data) {
        for dir in DIRECTIONS {
            if let Ok(Some(renamed)) = map.map_label_selector(selector, dir) {
                // A bijection: back and forth again gives the same text.
                let back = map
                    .map_label_selector(&renamed, dir.flip())
                    .expect("a renamed selector parses")
                    .unwrap_or_else(|| renamed.clone());
                let forth = map
                    .map_label_selector(&back, dir)
                    .expect("a selector renamed back parses")
                    .unwrap_or_else(|| back.clone());
                assert_eq!(forth, renamed, "{selector:?}");
            }
        }
    }
    let configmap = Context {
        hint: Some(("v1", "ConfigMap")),
        addressed: Some(("", "ConfigMap")),
    };
    for dir in DIRECTIONS {
        for wire in [Wire::Json, Wire::JsonPatch, Wire::Yaml] {
            let _ = e.body(dir, wire, Context::default(), data);
            let _ = e.body(dir, wire, configmap, data);
        }
    }
}

/// The front's request-header authentication: the input is a client
/// certificate (DER) and then, after a NUL, header lines (`name: value`)
/// and the ConfigMap data kube-apiserver publishes (a JSON object after a
/// second NUL).
pub fn cert_identity(data: &[u8]) {
    let mut parts = data.splitn(3, |b| *b == 0);
    let der = parts.next().unwrap_or_default();
    let header_block = parts.next().unwrap_or_default();
    let configmap = parts.next().unwrap_or_default();
    let mut headers = HeaderMap::new();
    for line in header_block.split(|b| *b == b'\n') {
        let Some(colon) = line.iter().position(|b| *b == b':') else {
            continue;
        };
        let (name, value) = (&line[..colon], &line[colon + 1..]);
        if let (Ok(n), Ok(v)) = (
            HeaderName::from_bytes(name),
            HeaderValue::from_bytes(value.trim_ascii()),
        ) {
            headers.append(n, v);
        }
    }
    let chain = [CertificateDer::from(der.to_vec())];
    let named = RequestHeaderConfig {
        allowed_names: vec!["front-proxy-client".into()],
        ..RequestHeaderConfig::default()
    };
    for cfg in [RequestHeaderConfig::default(), named] {
        let _ = auth::authenticate(Some(&chain), &headers, &cfg);
        let mut stripped = headers.clone();
        auth::strip_identity_headers(&mut stripped, &cfg);
    }
    if let Ok(serde_json::Value::Object(data)) = serde_json::from_slice(configmap) {
        let _ = auth::parse_extension_apiserver_authentication_json(&data);
    }
}

/// kubeconfig files: the YAML read into kubeconfig's schema (the part that
/// takes bytes; resolving reads the files it names).
pub fn kubeconfig(data: &[u8]) {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = crate::upstream::kubeconfig::parse_text(text);
    }
}

/// One harness function.
pub type Harness = fn(&[u8]);

/// Every target by name: the fuzz targets' names and the corpus
/// directories' (`fuzz/corpus/<name>`).
pub const TARGETS: &[(&str, Harness)] = &[
    ("json", json),
    ("protobuf", protobuf),
    ("watch", watch),
    ("yaml", yaml),
    ("json_patch", json_patch),
    ("openapi", openapi),
    ("url", url),
    ("cert_identity", cert_identity),
    ("kubeconfig", kubeconfig),
    ("metadata", metadata),
];

#[cfg(test)]
mod tests {
    /// The metadata target's bijection check is reached: the seeds'
    /// selectors are renamed (a selector no rule names would skip it).
    #[test]
    fn the_metadata_seeds_reach_the_renaming() {
        let map = super::metadata_engine().map();
        for sel in [
            "kopf.zalando.org/handled=yes",
            "app.kubernetes.io/managed-by notin (foo-operator, foo-operator-team1)",
        ] {
            let out = map
                .map_label_selector(sel, regroup_config::Direction::ToCluster)
                .unwrap();
            assert!(out.is_some(), "{sel}");
            super::metadata(sel.as_bytes());
        }
    }

    use proptest::prelude::*;

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]
        /// Selectors built from the grammar's pieces and the rules' own
        /// keys and values, in any order: the target's checks (parse,
        /// round trip) hold, on stable, without the fuzzer.
        #[test]
        fn selectors_from_the_grammar_round_trip(
            parts in prop::collection::vec(
                prop::sample::select(vec![
                    "kopf.zalando.org/x", "a.kopf.zalando.org/y", "kopf.team1.example.com/z",
                    "regroup-shadow.kopf.zalando.org/x", "samplecontroller.k8s.io/o",
                    "app.kubernetes.io/managed-by", "plain", "foo-operator", "foo-operator-team1",
                    "foo-operator.shadowed", "=", "==", "!=", "!", " in ", " notin ", "(", ")",
                    ",", " ", "v",
                ]),
                0..12,
            )
        ) {
            super::metadata(parts.concat().as_bytes());
        }
    }
}
