//! Decoders never panic on hostile input: random bytes, biased towards
//! JSON structure and the mapped names (so the parsers are actually
//! reached), through every entry point that reads bodies or URLs.

use crate::common;
use crate::common::EngineJson;

use proptest::prelude::*;
use regroup::rewrite::list_stream::rewrite_in_chunks;
use regroup::rewrite::openapi::OpenApiRewriter;
use regroup::rewrite::openapi_proto::OpenApiProtoRewriter;
use regroup::rewrite::{Catalog, ProtoRewriter};
use regroup::url_rename::{rewrite_path, rewrite_query, RequestInfo};
use regroup_config::Direction;

/// Fragments that make random input look like Kubernetes JSON/protobuf.
const PIECES: &[&str] = &[
    "{",
    "}",
    "[",
    "]",
    ",",
    ":",
    "\"",
    "\\",
    "\\u002e",
    "\"apiVersion\"",
    "\"kind\"",
    "\"items\"",
    "\"rows\"",
    "\"metadata\"",
    "\"ownerReferences\"",
    "\"apiGroup\"",
    "\"group\"",
    "\"paths\"",
    "\"definitions\"",
    "\"$ref\"",
    "\"FooList\"",
    "\"Table\"",
    "\"APIGroupList\"",
    "\"groups\"",
    "\"name\"",
    "samplecontroller.k8s.io",
    "samplecontroller.team1.example.com",
    "/v1alpha1",
    "io.k8s.samplecontroller",
    "com.example.team1.samplecontroller",
    "k8s\0",
    "\n",
    " ",
    "0",
    "null",
    "true",
    "/apis/",
    "%2E",
    "?watch=1",
    "&fieldSelector=",
    "\u{ff}",
];

fn input() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            prop::sample::select(PIECES).prop_map(|s| s.as_bytes().to_vec()),
            prop::collection::vec(any::<u8>(), 0..4),
        ],
        0..64,
    )
    .prop_map(|parts| parts.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    #[test]
    fn body_rewriters_never_panic(bytes in input(), chunk in 1usize..64) {
        let map = common::fixture_map();
        let catalog = Catalog::new(&[]);
        for dir in [Direction::ToApp, Direction::ToCluster] {
            let json = EngineJson::new(&map, &catalog, dir);
            let _ = json.rewrite_bytes(&bytes);
            let _ = json.rewrite_bytes_as(&bytes, "samplecontroller.k8s.io/v1alpha1", "Foo");
            let _ = json.rewrite_bytes_addressed(&bytes, "apiregistration.k8s.io", "APIService");
            let _ = rewrite_in_chunks(json.codec(), &bytes, chunk);
            let proto = ProtoRewriter::new(&map, &catalog, dir);
            let _ = proto.rewrite_bytes(&bytes);
            let _ = proto.rewrite_watch_frame(&bytes);
            let _ = proto.rewrite_watch_stream(&bytes, None);
            let _ = OpenApiRewriter::new(&map, dir, "-t").rewrite_bytes(&bytes);
            let _ = OpenApiProtoRewriter::new(&map, dir).rewrite_bytes(&bytes);
        }
    }

    #[test]
    fn url_readers_never_panic(bytes in input()) {
        let map = common::fixture_map();
        let s = String::from_utf8_lossy(&bytes);
        let (path, query) = s.split_once('?').unwrap_or((&s, ""));
        let _ = RequestInfo::parse(path, Some(query));
        for dir in [Direction::ToApp, Direction::ToCluster] {
            let _ = rewrite_path(path, &map, dir);
            let _ = rewrite_query(query, &map, dir);
            let _ = map.map_text(&s, dir);
            let _ = map.map_reverse_dns(&s, dir);
            let _ = map.map_api_path(&s, dir);
        }
    }
}
