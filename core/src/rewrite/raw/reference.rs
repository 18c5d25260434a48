//! The tape checked against serde_json's own reading of the same text,
//! container by container: used by the unit tests and the `json` fuzz
//! target (a differential check on every valid input the fuzzer makes).

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::{Raw, Walk};

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
                n += agree(w, *v);
            }
        }
        Level::Array(want) => {
            let got = w.elements(raw).unwrap().unwrap();
            assert_eq!(got.len(), want.len(), "elements of {t:.80}");
            for (v, wv) in got.iter().zip(&want) {
                assert_eq!(v.get(), wv.get());
                n += agree(w, *v);
            }
        }
    }
    n
}

/// [`agree`] with the walk's tape read whole and level by level: both
/// must give serde_json's reading. Returns how many containers were
/// compared (in one of the two).
pub fn agree_both_ways(text: &str, raw: Raw<'_>) -> usize {
    let n = agree(&mut Walk::new(text), raw);
    let mut levels = Walk::new(text);
    levels.whole_tape_max = 0;
    assert_eq!(agree(&mut levels, raw), n);
    n
}
