use std::path::Path;

use super::reference::agree_both_ways;
use super::*;

#[test]
fn the_scan_reads_every_captured_json_body_as_serde_json_does() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../testdata");
    let mut stack = vec![root];
    let (mut files, mut containers) = (0, 0);
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            let Ok(text) = std::fs::read_to_string(&path) else {
                continue;
            };
            // Watch streams hold one document per line.
            for doc in std::iter::once(text.as_str()).chain(text.lines()) {
                if let Ok(raw) = Raw::parse(doc) {
                    files += 1;
                    containers += agree_both_ways(doc, raw);
                }
            }
        }
    }
    assert!(files > 300, "only {files} JSON documents found");
    assert!(containers > 10_000, "only {containers} containers compared");
}

#[test]
fn the_scan_agrees_on_hand_made_edge_cases() {
    for doc in [
        r#"{}"#,
        r#"[]"#,
        r#" { "a" : [ 1 , -2.5e+3 , true , false , null ] , "b" : { } } "#,
        r#"{"s":"a \"quoted\" } ] { [ and \\ backslash\\","t":"\\"}"#,
        r#"{"k\"ey":1,"k\\":2,"\u0041":[{"x":"]}"}],"e":"\ud83d\ude00"}"#,
        "{\n\t\"nested\": [[[[{\"deep\": [\"}\", \"]\"]}]]]],\r\n \"n\": 0\n}",
        r#"[1,"two",{"three":3},[4],null]"#,
        r#"{"dup":1,"dup":2}"#,
    ] {
        let raw = Raw::parse(doc).unwrap();
        assert!(agree_both_ways(doc, raw) >= 1, "{doc}");
    }
    let doc = r#"{"k\"ey":1,"\u0041":2}"#;
    let ms = Walk::new(doc)
        .members(Raw::parse(doc).unwrap())
        .unwrap()
        .unwrap();
    assert_eq!(ms[0].0 .0, "k\"ey");
    assert_eq!(ms[1].0 .0, "A");
    assert!(matches!(ms[1].0 .0, Cow::Owned(_)));
}

#[test]
fn invalid_json_is_refused_before_any_scan() {
    for bad in [
        "",
        "{",
        r#"{"a":}"#,
        r#"{"a":1,}"#,
        r#"{"a" 1}"#,
        r#"["\q"]"#,
        "[\"\u{1}\"]",
        r#"{"a":1} x"#,
        r#"[1 2]"#,
    ] {
        assert!(Raw::parse(bad).is_err(), "{bad:.40}");
    }
    let nested = |n: usize| "[".repeat(n) + "\"[{]}\"" + &"]".repeat(n);
    assert!(Raw::parse(&nested(MAX_DEPTH)).is_ok());
    let err = Raw::parse(&nested(MAX_DEPTH + 1)).unwrap_err();
    assert!(err.to_string().contains("nested deeper than 512"), "{err}");
    // Many brackets, none deep: accepted.
    let wide = format!("[{}[]]", "[],".repeat(10 * MAX_DEPTH));
    assert!(Raw::parse(&wide).is_ok());
}

#[test]
fn a_scalar_or_string_has_no_entries() {
    for doc in [r#""{}""#, "12", "true", "null"] {
        let raw = Raw::parse(doc).unwrap();
        let mut w = Walk::new(doc);
        assert!(w.members(raw).unwrap().is_none());
        assert!(w.elements(raw).unwrap().is_none());
    }
}

#[test]
fn text_that_is_not_what_validation_promised_is_an_error_not_a_panic() {
    // Never produced by `Raw::parse`; the scan still answers an error.
    for t in [r#"{"a""#, r#"{"a":1"#, r#"{"a":"#, r#"["x"#, r#"["\"#] {
        let raw = Raw(t);
        let mut w = Walk::new(t);
        let r = if t.starts_with('{') {
            w.members(raw).map(drop)
        } else {
            w.elements(raw).map(drop)
        };
        assert!(r.is_err(), "{t}");
    }
}

#[test]
fn may_contain_answers_as_a_search_of_the_value_would() {
    // Overlapping patterns: a leftmost-first search of the whole text
    // would report "ab" only and miss "bc" inside the second value.
    let names = Needles::new(&["ab", "bc", "\\u"]);
    let text = r#"{"x":"abc","y":["zbc"],"z":"a","w":"\u0062c","v":"b"}"#;
    let root = Raw::parse(text).unwrap();
    let mut w = Walk::new(text);
    let mut values = vec![root];
    for (_, v) in w.members(root).unwrap().unwrap().iter() {
        values.push(*v);
        values.extend(
            w.elements(*v)
                .unwrap()
                .map(|e| e.to_vec())
                .unwrap_or_default(),
        );
    }
    assert_eq!(values.len(), 7);
    for v in values {
        let want = names.is_match(v.get());
        assert_eq!(w.may_contain(&names, v), want, "{}", v.get());
    }
    // The same on every captured JSON body, against the name index.
    let e = crate::rewrite::engine::tests::engine("samplecontroller.team1.example.com");
    let ix = crate::rewrite::names::NameIndex::new(e.map());
    for auto in [ix.json(), ix.dns_json()] {
        for doc in [
            include_str!("../../../../testdata/kube-1.24/renamed/027-get-foo-json/response.body"),
            include_str!("../../../../testdata/kube-1.24/orig/027-get-foo-json/response.body"),
        ] {
            let root = Raw::parse(doc).unwrap();
            let mut w = Walk::new(doc);
            let mut stack = vec![root];
            while let Some(v) = stack.pop() {
                assert_eq!(w.may_contain(auto, v), auto.is_match(v.get()));
                if let Some(ms) = w.members(v).unwrap() {
                    stack.extend(ms.iter().map(|(_, v)| *v));
                } else if let Some(es) = w.elements(v).unwrap() {
                    stack.extend(es.iter());
                }
            }
        }
    }
}

#[test]
fn a_key_with_a_lone_surrogate_escape_is_an_error_not_a_panic() {
    // serde_json's validation accepts it (as Go's decoder does); decoding
    // the key refuses it. Found by the json fuzz target's differential check.
    let text = r#"{"a":{"max\udceax":5},"b":1}"#;
    let root = Raw::parse(text).unwrap();
    let mut w = Walk::new(text);
    let inner = member(&w.members(root).unwrap().unwrap(), "a").unwrap();
    assert!(w.members(inner).is_err());
    assert_eq!(agree_both_ways(text, root), 2);
}
