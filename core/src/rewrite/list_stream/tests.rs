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

/// Every element end `split::element_end` finds in `buf` from `start`, fed
/// `chunk` bytes at a time (resuming with its state), against the narrow
/// scan of the whole buffer at once.
fn split_agrees(buf: &[u8], start: usize, chunk: usize) {
    let mut want_at = start;
    let mut want_state = split::State::default();
    let want = split::narrow(buf, &mut want_at, &mut want_state, usize::MAX);
    let mut at = start;
    let mut state = split::State::default();
    let mut seen = start;
    let got = loop {
        seen = (seen + chunk).min(buf.len());
        if let Some(end) = split::element_end(&buf[..seen], &mut at, &mut state) {
            break Some(end);
        }
        if seen == buf.len() {
            break None;
        }
    };
    assert_eq!(got, want, "from {start} in chunks of {chunk}");
    if got.is_none() {
        assert_eq!((at, state), (want_at, want_state), "from {start}");
    }
}

#[test]
fn the_wide_split_ends_every_element_where_the_narrow_one_does() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
    let mut dirs = vec![root];
    let mut bodies = Vec::new();
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.file_name().is_some_and(|n| n == "response.body") {
                let body = std::fs::read(&path).unwrap();
                if body.first() == Some(&b'{') {
                    bodies.push(body);
                }
            }
        }
    }
    assert!(bodies.len() > 100, "only {} JSON bodies", bodies.len());
    // Mutations: a byte of a body replaced by each of the bytes the scans
    // care about, at positions spread over it (a fixed generator: the
    // same cases every run).
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let mut cases = 0;
    // Kept small enough to run under qemu-user too
    // (e2e/cpu-baseline-check.sh).
    for body in &bodies {
        let one = if body.len() <= 4096 { 1 } else { 31 };
        for chunk in [one, 32, 33, body.len()] {
            split_agrees(body, 0, chunk);
            cases += 1;
        }
        // From every container opening in the first 512 bytes (an element
        // starting there), whole.
        for start in (0..body.len().min(512)).filter(|i| matches!(body[*i], b'{' | b'[')) {
            split_agrees(body, start, body.len());
            cases += 1;
        }
        for _ in 0..12 {
            let mut m = body.clone();
            let at = (next() as usize) % m.len();
            m[at] = *[b'"', b'\\', b'{', b'}', b'[', b']', b' ', b',']
                .get((next() as usize) % 8)
                .unwrap();
            for chunk in [5, m.len()] {
                split_agrees(&m, 0, chunk);
                cases += 1;
            }
        }
    }
    assert!(cases > 5_000, "only {cases} cases");
}

#[test]
fn the_wide_split_handles_escapes_and_strings_across_blocks() {
    // Strings and escapes at every offset around the 32-byte blocks.
    for pad in 0..70 {
        for tail in [r#"\\"#, r#"\""#, r#"\\\""#, r#"]}{["#, r#"\u0022"#] {
            let s = format!(
                r#"{{"a":"{}{tail}","b":[{{"c":"]"}},"{}"],"d":"\\"}}"#,
                "x".repeat(pad),
                "y".repeat(pad % 37)
            );
            for chunk in [1, 31, 32, 33, s.len()] {
                split_agrees(s.as_bytes(), 0, chunk);
            }
        }
    }
}
