//! The validating reader and its tape checked against serde_json: which
//! texts it accepts, and its reading of each container. Used by the unit
//! tests (proptest among them) and the `json` fuzz target (a differential
//! check on every input the fuzzer makes, and on its corpus replayed on
//! stable).

use serde::de::{Deserialize, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::{validate, Raw, Walk, MAX_DEPTH};

/// The validating reader accepts `text` exactly when serde_json does
/// (into `IgnoredAny`) and it nests no deeper than `MAX_DEPTH`, with
/// the tape recorded and without; panics otherwise. Returns whether it
/// was accepted.
pub fn validates_as_serde_json(text: &str) -> bool {
    let want = serde_json::from_str::<IgnoredAny>(text).is_ok() && depth(text) <= MAX_DEPTH;
    let plain = Raw::parse(text);
    let recorded = validate::read::<true>(text);
    assert_eq!(
        plain.is_ok(),
        want,
        "serde_json: {want}, reader: {plain:?}, {text:.80}"
    );
    assert_eq!(recorded.is_ok(), want, "recording: {text:.80}");
    // The wide reader (where this CPU has AVX2) and the word-at-a-time one
    // read the same tape, and refuse alike.
    let narrow = validate::read_narrow::<true>(text);
    match (&recorded, &narrow) {
        (Ok(a), Ok(b)) => assert!(a == b, "tapes differ: {text:.80}"),
        (Err(a), Err(b)) => assert_eq!(a.to_string(), b.to_string(), "{text:.80}"),
        _ => panic!(
            "wide {:?}, narrow {:?}: {text:.80}",
            recorded.is_ok(),
            narrow.is_ok()
        ),
    }
    assert_eq!(
        validate::read_narrow::<false>(text).is_ok(),
        want,
        "narrow, not recording: {text:.80}"
    );
    want
}

/// How deep arrays and objects nest in `text`, which serde_json accepts.
fn depth(text: &str) -> usize {
    let (mut depth, mut deepest, mut in_string, mut escaped) = (0usize, 0, false, false);
    for c in text.bytes() {
        if in_string {
            match c {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            b'"' => in_string = true,
            b'{' | b'[' => {
                depth += 1;
                deepest = deepest.max(depth);
            }
            b'}' | b']' => depth -= 1,
            _ => {}
        }
    }
    deepest
}

/// serde_json's own reading of one container level, the reference the
/// structural scan must agree with.
enum Level<'a> {
    Object(Vec<(String, &'a RawValue)>),
    Array(Vec<&'a RawValue>),
}

impl<'de> Deserialize<'de> for Level<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Level<'de>;
            fn expecting(&self, f: &mut std::fmt::Formatter) -> std::fmt::Result {
                f.write_str("a container")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Level<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = m.next_entry::<String, &'de RawValue>()? {
                    out.push(kv);
                }
                Ok(Level::Object(out))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Level<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(e) = s.next_element::<&'de RawValue>()? {
                    out.push(e);
                }
                Ok(Level::Array(out))
            }
        }
        d.deserialize_any(V)
    }
}

/// Every container of `raw`, at every depth: the scan's entries are
/// serde_json's, key for key and value text for value text. Returns how
/// many containers were compared.
pub(crate) fn agree<'i>(w: &mut Walk<'i>, raw: Raw<'i>) -> usize {
    let t = raw.get();
    if !(t.starts_with('{') || t.starts_with('[')) {
        return 0;
    }
    let reference: Level = match serde_json::from_str(t) {
        Ok(level) => level,
        Err(_) => {
            // Validation accepts what decoding a key refuses (a lone
            // surrogate escape, as Go's decoder accepts): the walk must
            // then refuse this level too, with an error, not a panic.
            let refused = if t.starts_with('{') {
                w.members(raw).is_err()
            } else {
                w.elements(raw).is_err()
            };
            assert!(refused, "serde_json refuses, the walk reads: {t:.80}");
            return 1;
        }
    };
    let mut n = 1;
    match reference {
        Level::Object(want) => {
            let got = w.members(raw).unwrap().unwrap();
            assert_eq!(got.len(), want.len(), "members of {t:.80}");
            for ((k, v), (wk, wv)) in got.iter().zip(&want) {
                assert_eq!(k.0, *wk);
                assert_eq!(v.get(), wv.get());
                n += agree(w, v);
            }
        }
        Level::Array(want) => {
            let got = w.elements(raw).unwrap().unwrap();
            assert_eq!(got.len(), want.len(), "elements of {t:.80}");
            for (v, wv) in got.iter().zip(&want) {
                assert_eq!(v.get(), wv.get());
                n += agree(w, v);
            }
        }
    }
    n
}

/// `agree` with the walk's tape read whole and level by level: both
/// must give serde_json's reading. Returns how many containers were
/// compared (in one of the two).
pub fn agree_both_ways(text: &str, raw: Raw<'_>) -> usize {
    let n = agree(&mut Walk::new(text), raw);
    let mut levels = Walk::new(text);
    levels.whole_tape_max = 0;
    assert_eq!(agree(&mut levels, raw), n);
    n
}
