use std::path::Path;

use super::reference::{self, agree_both_ways};
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
    let (mut w, root) = Walk::parse(doc).unwrap();
    let ms = w.members(root).unwrap().unwrap();
    let names: Vec<String> = ms.iter().map(|(k, _)| k.0.into_owned()).collect();
    assert_eq!(names, ["k\"ey", "A"]);
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
    // The innermost container empty (read without the stack): the same
    // limit, recorded or not, wide or narrow.
    let empty = |n: usize| "[".repeat(n) + &"]".repeat(n);
    assert!(reference::validates_as_serde_json(&empty(MAX_DEPTH)));
    assert!(!reference::validates_as_serde_json(&empty(MAX_DEPTH + 1)));
    let objects = |n: usize| "{\"a\":".repeat(n - 1) + "{}" + &"}".repeat(n - 1);
    assert!(reference::validates_as_serde_json(&objects(MAX_DEPTH)));
    assert!(!reference::validates_as_serde_json(&objects(MAX_DEPTH + 1)));
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
fn the_outermost_value_is_no_entry_and_whitespace_is_no_part_of_a_value() {
    // A scalar or an empty container is the whole document, read before
    // the reader's loop: no entry, whatever whitespace is around or in it.
    for doc in [
        " 12 ",
        "\t\"s\"\n",
        " {} ",
        "[ ]",
        "{ }",
        " [\n] ",
        "{}",
        "[]",
    ] {
        assert!(reference::validates_as_serde_json(doc), "{doc:?}");
        let tape = validate::read::<true>(doc).unwrap();
        assert!(tape.entries.is_empty(), "{doc:?}");
    }
    for bad in [
        "{ ]",
        "[ }",
        "{]",
        "[}",
        " 1 2",
        "{} {}",
        "[] ]",
        " ",
        "{ \"a\" }",
    ] {
        assert!(!reference::validates_as_serde_json(bad), "{bad:?}");
    }
    // The whitespace the reader skips before a value (after a colon, an
    // array's comma or its opening) is outside the value's range.
    let doc = "{\"a\": 1,\"b\":\n[ true,\t\"x\" ]}";
    let tape = validate::read::<true>(doc).unwrap();
    let values: Vec<&str> = tape
        .entries
        .iter()
        .map(|e| &doc[e.value.0 as usize..e.value.1 as usize])
        .collect();
    assert_eq!(values, ["1", "[ true,\t\"x\" ]", "true", "\"x\""]);
}

#[test]
fn text_that_is_not_what_validation_promised_is_an_error_not_a_panic() {
    // Never produced by `Raw::parse`; the scan still answers an error.
    for t in [r#"{"a""#, r#"{"a":1"#, r#"{"a":"#, r#"["x"#, r#"["\"#] {
        let raw = Raw::outside(t);
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
        values.push(v);
        values.extend(
            w.elements(v)
                .unwrap()
                .map(|e| e.iter().collect::<Vec<_>>())
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
                    stack.extend(ms.iter().map(|(_, v)| v));
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

/// The validating reader's verdicts on the cases its grammar turns on,
/// each also checked against serde_json by `validates_as_serde_json`.
#[test]
fn the_reader_accepts_what_serde_json_accepts_case_by_case() {
    let nested = |n: usize| "[".repeat(n) + &"]".repeat(n);
    let accepted = [
        "0",
        "-0",
        "1.5",
        "-12.25e+10",
        "1E5",
        "2e-0",
        "0.0",
        " \t\n\r1\r\n",
        "true",
        "false",
        "null",
        r#""""#,
        r#""\u00e9\ud800 lone surrogate""#,
        r#""\"\\\/\b\f\n\r\t""#,
        "\"\u{7f}é\"",
        r#"{"a":[1,{"b":null}],"c":"d"}"#,
        " [ ] ",
        "{ }",
        r#"[[],{},"",0]"#,
    ];
    let refused = [
        "",
        " ",
        "01",
        "-",
        "1.",
        "1e",
        "1e+",
        ".5",
        "+1",
        "-01",
        "1.e5",
        "0x1",
        "tru",
        "nul",
        "truex",
        "True",
        "[1,]",
        r#"{"a":1,}"#,
        "[,1]",
        r#"{,"a":1}"#,
        "[1 2]",
        r#"{"a" 1}"#,
        r#"{"a":}"#,
        r#"{1:2}"#,
        r#"{'a':1}"#,
        "[1}",
        r#"{"a":1]"#,
        "[",
        "]",
        "{",
        "}",
        r#""abc"#,
        r#""\q""#,
        r#""\u12G4""#,
        r#""\u12""#,
        r#""\"#,
        "\"\u{1}\"",
        "\"tab\there\"",
        "\"\u{1f}\"",
        "1 2",
        "[] []",
        "{} x",
        "\u{feff}1",
        "[1]\u{0}",
        "\u{a0}1",
        "[1,\u{b}2]",
    ];
    for t in accepted {
        assert!(reference::validates_as_serde_json(t), "{t:?}");
    }
    for t in refused {
        assert!(!reference::validates_as_serde_json(t), "{t:?}");
    }
    // Nesting: serde_json accepts any depth; the reader stops at MAX_DEPTH.
    assert!(reference::validates_as_serde_json(&nested(MAX_DEPTH)));
    assert!(!reference::validates_as_serde_json(&nested(MAX_DEPTH + 1)));
    assert!(!reference::validates_as_serde_json(&nested(100_000)));
    // A refusal keeps serde_json's message.
    let err = Raw::parse("[1,]").unwrap_err().to_string();
    let want = serde_json::from_str::<serde::de::IgnoredAny>("[1,]").unwrap_err();
    assert_eq!(err, format!("malformed JSON: {want}"));
}

/// Every captured body, cut short at many points and with bytes changed
/// at many places: the reader and serde_json agree on each.
#[test]
fn the_reader_agrees_with_serde_json_on_mutated_captures() {
    let bodies = [
        include_str!("../../../../testdata/kube-1.24/renamed/027-get-foo-json/response.body"),
        include_str!(
            "../../../../testdata/kube-1.24/renamed/041-get-deployment-json/response.body"
        ),
    ];
    let swaps = b"{}[],:\"\\ 0-.eE+tfnu/\x01\x1fx";
    let (mut accepted, mut refused) = (0, 0);
    for body in bodies {
        let b = body.as_bytes();
        let mut tally = |t: &[u8]| {
            if let Ok(t) = std::str::from_utf8(t) {
                if reference::validates_as_serde_json(t) {
                    accepted += 1;
                } else {
                    refused += 1;
                }
            }
        };
        for cut in 0..=b.len() {
            tally(&b[..cut]);
        }
        for at in (0..b.len()).step_by(3) {
            for s in swaps {
                let mut m = b.to_vec();
                m[at] = *s;
                tally(&m);
            }
            let mut m = b.to_vec();
            m.remove(at);
            tally(&m);
        }
    }
    assert!(accepted > 1000 && refused > 10_000, "{accepted} {refused}");
}

mod generated {
    use proptest::prelude::*;

    use super::reference;

    fn ws() -> BoxedStrategy<String> {
        "[ \t\n\r]{0,2}".boxed()
    }

    fn scalar() -> impl Strategy<Value = String> {
        prop_oneof![
            Just("null".to_owned()),
            Just("true".to_owned()),
            Just("false".to_owned()),
            "-?(0|[1-9][0-9]{0,3})(\\.[0-9]{1,3})?([eE][+-]?[0-9]{1,2})?",
            r#""([a-zé ]|\\["\\/bfnrt]|\\u[0-9a-fA-F]{4}|\\ud83d)*""#,
        ]
    }

    /// Valid JSON, whitespace between every token.
    fn json() -> impl Strategy<Value = String> {
        scalar().prop_recursive(5, 48, 6, |inner| {
            let entry = (ws(), inner, ws());
            prop_oneof![
                prop::collection::vec(entry.clone(), 0..6).prop_map(|es| {
                    let es: Vec<String> = es.into_iter().map(|(a, v, b)| a + &v + &b).collect();
                    format!("[{}]", es.join(","))
                }),
                prop::collection::vec(("[a-c\"\\\\]{0,2}", ws(), entry), 0..6).prop_map(|ms| {
                    let ms: Vec<String> = ms
                        .into_iter()
                        .map(|(k, w, (a, v, b))| {
                            format!("{w}{}{a}:{v}{b}", serde_json::to_string(&k).unwrap())
                        })
                        .collect();
                    format!("{{{}}}", ms.join(","))
                }),
            ]
        })
    }

    /// One change to a text: cut it, or put, replace or remove one byte.
    fn mutate(t: &str, op: u8, at: usize, byte: u8) -> Vec<u8> {
        let mut b = t.as_bytes().to_vec();
        let at = at % (b.len() + 1);
        match op % 4 {
            0 => b.truncate(at),
            1 => b.insert(at, byte),
            2 if at < b.len() => b[at] = byte,
            _ if at < b.len() => {
                b.remove(at);
            }
            _ => {}
        }
        b
    }

    const BYTES: &[u8] = b"{}[],:\"\\ \t0123456789-+.eEtrufalsnbx/\x00\x01\x1f\x7f";

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(2000))]

        #[test]
        fn valid_json_is_accepted(pre in ws(), t in json(), post in ws()) {
            let text = pre + &t + &post;
            prop_assert!(reference::validates_as_serde_json(&text), "{}", text);
        }

        #[test]
        fn changed_json_is_judged_as_serde_json_judges_it(
            t in json(),
            changes in prop::collection::vec((any::<u8>(), any::<usize>(), prop::sample::select(BYTES)), 1..3),
        ) {
            let mut text = t.into_bytes();
            for (op, at, byte) in changes {
                text = mutate(std::str::from_utf8(&text).unwrap_or(""), op, at, byte);
            }
            if let Ok(text) = std::str::from_utf8(&text) {
                reference::validates_as_serde_json(text);
            }
        }

        #[test]
        fn token_soup_is_judged_as_serde_json_judges_it(
            soup in prop::collection::vec(prop::sample::select(BYTES), 0..24),
        ) {
            if let Ok(text) = std::str::from_utf8(&soup) {
                reference::validates_as_serde_json(text);
            }
        }
    }
}

mod quoting {
    use super::super::{quote, Walk};
    use proptest::prelude::*;

    /// `s` written by [`Walk::replace_quoted`] over a one-string document.
    fn replaced(s: &str) -> String {
        let (mut w, root) = Walk::parse("\"x\"").unwrap();
        w.replace_quoted(root, None, s);
        w.finish().unwrap()
    }

    #[test]
    fn names_and_strings_needing_escapes_are_quoted_as_serde_json_quotes_them() {
        for s in [
            "",
            "samplecontroller.k8s.io/v1",
            "a\"b",
            "a\\b",
            "\n",
            "\u{1f}",
            "\u{7f}é",
        ] {
            assert_eq!(quote(s), serde_json::to_string(s).unwrap(), "{s:?}");
            assert_eq!(replaced(s), quote(s), "{s:?}");
        }
    }

    proptest! {
        #[test]
        fn any_string_is_quoted_as_serde_json_quotes_it(s in any::<String>()) {
            prop_assert_eq!(quote(&s), serde_json::to_string(&s).unwrap());
            prop_assert_eq!(replaced(&s), quote(&s));
        }
    }
}

#[test]
fn the_walk_knows_whether_a_string_of_the_input_has_an_escape() {
    for (text, escapes) in [
        (r#"{"a":["b",1,{"c":"d"}]}"#, false),
        (r#"{"a":"\u0062"}"#, true),
        (r#"{"\n":1}"#, true),
        (r#"["x\/y"]"#, true),
    ] {
        let (w, _) = Walk::parse(text).unwrap();
        assert_eq!(w.escapes, escapes, "{text}");
        assert!(Walk::new(text).escapes, "not read: not known");
    }
}

/// Strings' ends are found 32 bytes a step where the CPU has AVX2, eight
/// otherwise: every special byte (an escape, a bad escape, a raw control
/// byte, a quote, a multi-byte character, a DEL) at every offset of strings
/// up to 100 bytes, as a key and as a value, near the text's end too, read
/// as serde_json reads it and the same by both readers.
#[test]
fn specials_at_every_offset_of_long_strings() {
    let specials = [
        "\\\"", "\\\\", "\\u00e9", "\\x", "\\u12", "\u{1}", "\t", "\u{1f}", "\"", "é", "\u{7f}",
        "€",
    ];
    let mut accepted = 0;
    for len in 0..100 {
        for at in 0..=len {
            for s in specials {
                let text: String = "a".repeat(at) + s + &"b".repeat(len - at);
                for doc in [
                    format!("{{\"{text}\":1}}"),
                    format!("[\"{text}\"]"),
                    format!("{{\"k\":\"{text}\",\"z\":[true]}}"),
                    format!("\"{text}\""),
                ] {
                    accepted += usize::from(reference::validates_as_serde_json(&doc));
                }
            }
        }
    }
    // Most are JSON; the bad escapes, raw control bytes and bare quotes not.
    assert!(accepted > 5000 * 4, "{accepted}");
}

/// The reader chosen at run time is the one the CPU allows, when the run
/// says which to expect: `e2e/cpu-baseline-check.sh` runs these tests on
/// qemu's Nehalem (no AVX2) with `REGROUP_EXPECT_WIDE=0` and on its Haswell
/// with `1`.
#[test]
fn the_reader_chosen_is_the_one_this_cpu_allows() {
    match std::env::var("REGROUP_EXPECT_WIDE").as_deref() {
        Ok("0") => assert!(!validate::wide_supported(), "AVX2 found"),
        Ok("1") => assert!(validate::wide_supported(), "no AVX2 found"),
        _ => {
            eprintln!("skipped: REGROUP_EXPECT_WIDE is not set (e2e/cpu-baseline-check.sh sets it)")
        }
    }
}

#[test]
fn a_kept_tape_is_read_afresh_by_the_next_walk_on_the_thread() {
    // A large document, a refused one, a walk held while another is made,
    // then small ones: each must read as serde_json does, whatever tape the
    // thread kept from the walk before.
    let big = format!(
        "{{\"items\":[{}]}}",
        (0..3000)
            .map(|i| format!("{{\"a\":{i},\"b\":[\"x\",{{\"c\":null}}]}}"))
            .collect::<Vec<_>>()
            .join(",")
    );
    let small = r#"{"apiVersion":"v1","kind":"List","items":[{"a":[1,{"b":2}]},[3]]}"#;
    for doc in [
        big.as_str(),
        small,
        r#"{"a":[1,2}"#,
        small,
        "[[],[{}]]",
        small,
    ] {
        match Raw::parse(doc) {
            Ok(raw) => {
                let (mut outer, root) = Walk::parse(doc).unwrap();
                // A second walk while the first holds its tape.
                let (mut inner, inner_root) = Walk::parse(small).unwrap();
                assert!(reference::agree(&mut inner, inner_root) > 0);
                drop(inner);
                assert!(reference::agree(&mut outer, root) > 0);
                assert!(agree_both_ways(doc, raw) > 0);
            }
            Err(_) => assert!(Walk::parse(doc).is_err()),
        }
    }
}

#[test]
fn a_mapping_is_reused_only_for_the_same_text_in_the_same_form() {
    let doc = r#"{"a":"g.io/v1","b":"g.io/v1","c":"g.io\/v1","d":"g.io"}"#;
    let (mut w, root) = Walk::parse(doc).unwrap();
    let ms = w.members(root).unwrap().unwrap();
    let [a, b] = ["a", "b"].map(|k| ms.get(k).unwrap());
    assert_eq!(w.mapped_before(b, Form::ApiVersion), None);
    w.replace_quoted(a, Some(Form::ApiVersion), "h.io/v1");
    let text = w.mapped_before(b, Form::ApiVersion).unwrap();
    // The earlier edit's text is shared, and the result has it twice.
    w.replace_again(b, Form::ApiVersion, text);
    assert_eq!(
        w.finish().unwrap(),
        r#"{"a":"h.io/v1","b":"h.io/v1","c":"g.io\/v1","d":"g.io"}"#
    );
    let (mut w, root) = Walk::parse(doc).unwrap();
    let ms = w.members(root).unwrap().unwrap();
    let [a, b, c, d] = ["a", "b", "c", "d"].map(|k| ms.get(k).unwrap());
    w.replace_quoted(a, Some(Form::ApiVersion), "h.io/v1");
    assert!(w.mapped_before(b, Form::ApiVersion).is_some());
    // Another form, other bytes (an escape), another string: mapped afresh.
    assert_eq!(w.mapped_before(b, Form::Group), None);
    assert_eq!(w.mapped_before(c, Form::ApiVersion), None);
    assert_eq!(w.mapped_before(d, Form::ApiVersion), None);
    // A plain replacement is no mapping.
    w.replace(d, r#""x""#);
    assert_eq!(w.mapped_before(d, Form::ApiVersion), None);
}

#[test]
fn get_two_answers_as_two_gets_the_last_duplicate_winning() {
    for doc in [
        r#"{"kind":"A","x":1,"apiVersion":"v1","kind":"B"}"#,
        r#"{"apiVersion":"v1"}"#,
        r#"{"k\u0069nd":"C","apiVersion":"v2","apiVersion":"v3"}"#,
        r#"{}"#,
    ] {
        let (mut w, root) = Walk::parse(doc).unwrap();
        let ms = w.members(root).unwrap().unwrap();
        let (a, k) = ms.get_two("apiVersion", "kind");
        let text = |r: Option<Raw<'_>>| r.map(|r| r.get().to_owned());
        assert_eq!(text(a), text(ms.get("apiVersion")), "{doc}");
        assert_eq!(text(k), text(ms.get("kind")), "{doc}");
        let names = ["kind", "x", "apiVersion", "kind", "absent"];
        let all = ms.get_all(names);
        for (got, name) in all.into_iter().zip(names) {
            assert_eq!(text(got), text(ms.get(name)), "{doc} {name}");
        }
    }
}

#[test]
fn names_all_replaced_only_when_every_occurrence_is_inside_an_edit_since() {
    let names = Needles::new(&["g.io"]);
    let doc = r#"{"a":"g.io/v1","s":{"b":"g.io/v1"},"c":"x"}"#;
    let (mut w, root) = Walk::parse(doc).unwrap();
    // Occurrences not looked for yet: not known, so not all replaced.
    assert!(!w.names_all_replaced(root, 0));
    assert!(w.may_contain(&names, root));
    let ms = w.members(root).unwrap().unwrap();
    let [a, s, c] = ["a", "s", "c"].map(|k| ms.get(k).unwrap());
    assert!(!w.names_all_replaced(root, 0));
    w.replace_quoted(a, None, "h.io/v1");
    // `s` still holds one.
    assert!(!w.names_all_replaced(root, 0));
    assert!(w.names_all_replaced(a, 0));
    // Nothing inside `c`: vacuously true.
    assert!(w.names_all_replaced(c, 0));
    let since = w.edit_count();
    // A range around the other occurrence (a deletion) covers it; edits
    // before `since` do not count.
    w.replace(s, "{}");
    assert!(w.names_all_replaced(root, 0));
    assert!(!w.names_all_replaced(root, since));
    assert!(w.names_all_replaced(s, since));
    w.force = true;
    assert!(!w.names_all_replaced(root, 0));
}

#[test]
fn a_container_is_found_whatever_the_last_one_found_was() {
    let text = r#"{"a":{"b":[1,{"c":{}}]},"d":[],"e":{"f":2}}"#;
    let tape = validate::read::<true>(text).unwrap();
    let starts: Vec<usize> = text
        .char_indices()
        .filter(|&(_, c)| matches!(c, '{' | '['))
        .map(|(i, _)| i)
        .collect();
    for &at in &starts {
        let (want_i, want) = tape.container_after(at, usize::MAX).unwrap();
        // Every hint, right (the entry before, the one whose subtree ends
        // before it), wrong, past the end or none.
        for last in (0..=tape.entries.len() + 1).chain([usize::MAX]) {
            let got = tape.container_after(at, last).unwrap();
            assert_eq!(got, (want_i, want), "container at {at}, last {last}");
        }
        // Its entries are exactly its members or elements.
        let inner = &text[at..];
        let level: serde_json::Value = serde_json::Deserializer::from_str(inner)
            .into_iter()
            .next()
            .unwrap()
            .unwrap();
        let n = level
            .as_object()
            .map_or_else(|| level.as_array().unwrap().len(), |o| o.len());
        assert_eq!(tape.entries_of(want).count(), n, "container at {at}");
    }
    // A byte where no container opens is an error, hinted or not.
    assert!(tape.container_after(1, 0).is_err());
    assert!(tape.container_after(1, usize::MAX).is_err());
    // The walk still finds the empty ones, with nothing in them.
    let (mut w, root) = Walk::parse(text).unwrap();
    let ms = w.members(root).unwrap().unwrap();
    let d = w.elements(ms.get("d").unwrap()).unwrap().unwrap();
    assert_eq!(d.iter().count(), 0);
    let a = w.members(ms.get("a").unwrap()).unwrap().unwrap();
    let b = w.elements(a.get("b").unwrap()).unwrap().unwrap();
    let inner = b.iter().nth(1).unwrap();
    let c = w.members(inner).unwrap().unwrap().get("c").unwrap();
    assert_eq!(w.members(c).unwrap().unwrap().iter().count(), 0);
    assert!(w.elements(c).unwrap().is_none());
}

#[test]
fn a_value_steps_in_by_its_entry_and_is_checked_against_where_it_starts() {
    let text = r#"{"a":{"b":[{"c":1},{"d":[2,3]}]},"e":{"f":{"g":4}}}"#;
    let (mut w, root) = Walk::parse(text).unwrap();
    let ms = w.members(root).unwrap().unwrap();
    let (a, e) = (ms.get("a").unwrap(), ms.get("e").unwrap());
    let b = w.members(a).unwrap().unwrap().get("b").unwrap();
    let items: Vec<Raw<'_>> = w.elements(b).unwrap().unwrap().iter().collect();
    let d = w.members(items[1]).unwrap().unwrap().get("d").unwrap();
    assert_eq!(w.elements(d).unwrap().unwrap().len(), 2);
    let f = w.members(e).unwrap().unwrap().get("f").unwrap();
    let names = |w: &mut Walk<'_>, v| -> Vec<String> {
        let ms = w.members(v).unwrap().unwrap();
        ms.iter().map(|(k, _)| k.0.into_owned()).collect()
    };
    assert_eq!(names(&mut w, f), ["g"]);
    // Another walk of a text whose entry of the same number is another
    // value: found by where the value starts, not misread.
    let other = r#"{"x":[[[{"g":5}]]],"e":{"f":{"g":4}}}"#;
    let (mut w2, root2) = Walk::parse(other).unwrap();
    let e2 = w2.members(root2).unwrap().unwrap().get("e").unwrap();
    let f2 = w2.members(e2).unwrap().unwrap().get("f").unwrap();
    let forged = Raw {
        text: f2.get(),
        entry: f.entry,
    };
    assert_eq!(names(&mut w2, forged), ["g"]);
    assert_eq!(
        w2.members(forged).unwrap().unwrap().get("g").unwrap().get(),
        "4"
    );
}
