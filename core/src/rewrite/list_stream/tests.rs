//! The streaming list rename equals the whole-body rename, for any chunking,
//! on real captures and on odd shapes.

use super::*;
use crate::rewrite::Catalog;
use regroup_config::{Direction, GroupMap, MapRule, Rule};

fn map() -> GroupMap {
    GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: "samplecontroller.k8s.io".into(),
            to: "samplecontroller.team1.example.com".into(),
        },
        reference_keys: true,
    }])
    .unwrap()
}

fn capture(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../testdata/kube-1.24/renamed/{name}/response.body",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

#[test]
fn streaming_equals_whole_body_rename_for_every_chunk_size() {
    let map = map();
    let catalog = Catalog::new(&[]);
    let rw = JsonRewriter::new(&map, &catalog, Direction::ToApp);
    for case in [
        "111-list-foo-json",
        "113-list-foo-table",
        "114-list-foo-poml",
        "126-list-configmap-json",
        "156-list-hpa-json",
        "177-list-foo-table-include-object",
        "183-list-foo-all-namespaces-json",
        "027-get-foo-json",
        "230-get-foo-missing-404",
        "264-discovery-v1alpha1-json",
    ] {
        let input = capture(case);
        let whole = rw
            .rewrite_bytes(&input)
            .unwrap()
            .unwrap_or_else(|| input.clone());
        for chunk in [1, 2, 7, 64, 2048, input.len()] {
            let streamed = rewrite_in_chunks(&rw, &input, chunk).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&streamed),
                String::from_utf8_lossy(&whole),
                "{case} in chunks of {chunk}"
            );
        }
    }
}

#[test]
fn odd_shapes_stream_or_fall_back_to_whole() {
    let map = map();
    let catalog = Catalog::new(&[]);
    let rw = JsonRewriter::new(&map, &catalog, Direction::ToCluster);
    let av = "samplecontroller.k8s.io/v1alpha1";
    let cases = [
        // items first, whitespace everywhere, an escaped quote in a key
        format!(
            r#" {{ "items" : [ {{"apiVersion":"{av}"}} ,{{"kind":"x\"y"}} ] , "kind" : "FooList", "apiVersion":"{av}" }} "#
        ),
        // empty list
        format!(r#"{{"kind":"FooList","apiVersion":"{av}","items":[]}}"#),
        // a nested items member is not the list's
        format!(
            r#"{{"kind":"Foo","apiVersion":"{av}","spec":{{"items":[{{"apiVersion":"{av}"}}]}}}}"#
        ),
        // scalars in the array
        format!(r#"{{"kind":"Foo","apiVersion":"{av}","items":[1, "{av}", null,true]}}"#),
        // not an object at all
        format!(r#"["{av}"]"#),
        // brackets, quotes and backslashes inside items' strings; a
        // string ending in an escaped backslash; nested arrays
        format!(
            r#"{{"kind":"FooList","apiVersion":"{av}","items":[{{"apiVersion":"{av}","a":"]}},[{{\"","b":"x\\","c":[[1,{{"d":"}}"}}],[]],"e":"\\\""}},{{"apiVersion":"{av}"}} , [ "]" ] ]}}"#
        ),
    ];
    for input in cases {
        let whole = rw
            .rewrite_bytes(input.as_bytes())
            .unwrap()
            .unwrap_or_else(|| input.as_bytes().to_vec());
        for chunk in [1, 2, 3, 5, 8, 13, 1000] {
            let streamed = rewrite_in_chunks(&rw, input.as_bytes(), chunk).unwrap();
            assert_eq!(
                String::from_utf8_lossy(&streamed),
                String::from_utf8_lossy(&whole),
                "{input} in chunks of {chunk}"
            );
        }
    }
}

#[test]
fn a_truncated_list_is_an_error_not_a_partial_rename() {
    let map = map();
    let catalog = Catalog::new(&[]);
    let rw = JsonRewriter::new(&map, &catalog, Direction::ToApp);
    let input = capture("111-list-foo-json");
    let cut = &input[..input.len() / 2];
    assert!(rewrite_in_chunks(&rw, cut, 100).is_err());
}

#[test]
fn an_item_over_the_limit_is_refused() {
    let map = map();
    let catalog = Catalog::new(&[]);
    let rw = JsonRewriter::new(&map, &catalog, Direction::ToApp);
    let input = capture("111-list-foo-json");
    let mut s = ListStream::new(None, 256);
    let r = input.chunks(64).try_for_each(|c| s.feed(&rw, c).map(drop));
    assert!(r.is_err());
}
