//! Lazy access to raw JSON text and the edits that rename it.
//!
//! Values are serde_json `RawValue`s borrowed from the input: parsed only
//! when a walker steps into them, and each at most once per walk (memoized
//! by offset). A walker records edits (byte ranges and their replacement);
//! [`Walk::finish`] applies them, copying every other byte as it came.

use std::borrow::Cow;
use std::fmt;
use std::rc::Rc;

use serde::de::{Deserialize, Deserializer, MapAccess, SeqAccess, Visitor};
use serde_json::value::RawValue;

use super::error::{malformed, RewriteError};

/// One replacement of `input[start..end]`.
pub(crate) struct Edit {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

pub(crate) type MemberList<'i> = Rc<Vec<(Key<'i>, &'i RawValue)>>;
pub(crate) type ElementList<'i> = Rc<Vec<&'i RawValue>>;

/// Maps keyed by a value's offset in the input. The keys come from regroup's
/// own parse, never chosen by a peer, so a fast hash (foldhash) is safe and
/// SipHash's flooding resistance buys nothing; it was ~7% of a renamed GET.
type ByOffset<V> = foldhash::HashMap<usize, V>;

/// The edits collected over one input text, and what was already parsed
/// of it (each value is parsed at most once, however many places and the
/// heuristic visit it).
pub(crate) struct Walk<'i> {
    pub input: &'i str,
    pub edits: Vec<Edit>,
    members: ByOffset<Option<MemberList<'i>>>,
    elements: ByOffset<Option<ElementList<'i>>>,
    pub contains: ByOffset<bool>,
    /// Walk every value, not only those where a mapped name shows: the
    /// object may hold a name `names:` renames, which no byte search finds.
    pub force: bool,
}

impl<'i> Walk<'i> {
    pub fn new(input: &'i str) -> Self {
        Walk {
            input,
            edits: Vec::new(),
            members: ByOffset::default(),
            elements: ByOffset::default(),
            contains: ByOffset::default(),
            force: false,
        }
    }

    pub fn members(&mut self, raw: &'i RawValue) -> Result<Option<MemberList<'i>>, RewriteError> {
        let at = self.offset(raw);
        if let Some(m) = self.members.get(&at) {
            return Ok(m.clone());
        }
        let m = members(raw)?.map(Rc::new);
        self.members.insert(at, m.clone());
        Ok(m)
    }

    pub fn elements(&mut self, raw: &'i RawValue) -> Result<Option<ElementList<'i>>, RewriteError> {
        let at = self.offset(raw);
        if let Some(e) = self.elements.get(&at) {
            return Ok(e.clone());
        }
        let e = elements(raw)?.map(Rc::new);
        self.elements.insert(at, e.clone());
        Ok(e)
    }

    pub fn offset(&self, raw: &RawValue) -> usize {
        raw.get().as_ptr() as usize - self.input.as_ptr() as usize
    }

    pub fn replace(&mut self, raw: &RawValue, text: String) {
        let start = self.offset(raw);
        self.edits.push(Edit {
            start,
            end: start + raw.get().len(),
            text,
        });
    }

    /// Replaces `input[start..end]` (a member name, found by
    /// [`member_start`](Self::member_start) and [`string_end`](Self::string_end)).
    pub fn replace_range(&mut self, start: usize, end: usize, text: String) {
        self.edits.push(Edit { start, end, text });
    }

    /// Deletes the entries of a container (`raw`, an array or an object)
    /// whose `keep` is false, with their separating commas; `spans` are the
    /// entries' byte ranges (members: from the key's opening quote).
    pub fn delete_entries(&mut self, raw: &RawValue, spans: &[(usize, usize)], keep: &[bool]) {
        if keep.iter().all(|k| *k) {
            return;
        }
        let base = self.offset(raw);
        let content = (base + 1, base + raw.get().len() - 1);
        let kept: Vec<(usize, usize)> = spans
            .iter()
            .zip(keep)
            .filter(|(_, k)| **k)
            .map(|(s, _)| *s)
            .collect();
        let mut deletions: Vec<(usize, usize, &str)> = Vec::new();
        match (kept.first(), kept.last()) {
            (Some(first), Some(last)) => {
                if first.0 > spans[0].0 {
                    deletions.push((content.0, first.0, ""));
                }
                for pair in kept.windows(2) {
                    if self.input[pair[0].1..pair[1].0].trim() != "," {
                        deletions.push((pair[0].1, pair[1].0, ","));
                    }
                }
                if last.1 < spans[spans.len() - 1].1 {
                    deletions.push((last.1, content.1, ""));
                }
            }
            _ => deletions.push((content.0, content.1, "")),
        }
        for (start, end, text) in deletions {
            self.edits.push(Edit {
                start,
                end,
                text: text.to_owned(),
            });
        }
    }

    /// One past the closing quote of the JSON string starting at `start`.
    pub fn string_end(&self, start: usize) -> usize {
        let b = self.input.as_bytes();
        let mut i = start + 1;
        while i < b.len() {
            match b[i] {
                b'\\' => i += 2,
                b'"' => return i + 1,
                _ => i += 1,
            }
        }
        b.len()
    }

    /// Where the member whose value is `value` starts: its key's opening
    /// quote, found by scanning back over `"key" :`.
    pub fn member_start(&self, value: &RawValue) -> Option<usize> {
        let b = self.input.as_bytes();
        let mut i = self.offset(value);
        let skip_ws = |i: &mut usize| {
            while *i > 0 && b[*i - 1].is_ascii_whitespace() {
                *i -= 1;
            }
        };
        skip_ws(&mut i);
        if i == 0 || b[i - 1] != b':' {
            return None;
        }
        i -= 1;
        skip_ws(&mut i);
        if i == 0 || b[i - 1] != b'"' {
            return None;
        }
        i -= 1; // the closing quote
        while i > 0 {
            i -= 1;
            if b[i] == b'"' {
                let slashes = b[..i].iter().rev().take_while(|c| **c == b'\\').count();
                if slashes % 2 == 0 {
                    return Some(i);
                }
            }
        }
        None
    }

    /// The input with the edits applied; `None` when there are none. Edits
    /// nested in an earlier one (a rename inside a dropped entry) and
    /// duplicates are skipped.
    pub fn finish(mut self) -> Option<String> {
        if self.edits.is_empty() {
            return None;
        }
        self.edits
            .sort_by(|a, b| a.start.cmp(&b.start).then(b.end.cmp(&a.end)));
        let mut out = String::with_capacity(self.input.len() + 64);
        let mut cursor = 0;
        for e in &self.edits {
            if e.start < cursor {
                continue;
            }
            out.push_str(&self.input[cursor..e.start]);
            out.push_str(&e.text);
            cursor = e.end;
        }
        out.push_str(&self.input[cursor..]);
        Some(out)
    }
}

/// An object member name, borrowed unless it had escapes.
pub(crate) struct Key<'a>(pub Cow<'a, str>);

impl<'de> Deserialize<'de> for Key<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("a string")
            }
            fn visit_borrowed_str<E>(self, v: &'de str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Borrowed(v)))
            }
            fn visit_str<E>(self, v: &str) -> Result<Key<'de>, E> {
                Ok(Key(Cow::Owned(v.to_owned())))
            }
        }
        d.deserialize_str(V)
    }
}

/// An object's members, in order, values unparsed.
struct Members<'a>(Vec<(Key<'a>, &'a RawValue)>);

impl<'de> Deserialize<'de> for Members<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Members<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Members<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(kv) = m.next_entry::<Key<'de>, &'de RawValue>()? {
                    out.push(kv);
                }
                Ok(Members(out))
            }
        }
        d.deserialize_map(V)
    }
}

/// An array's elements, unparsed.
struct Elements<'a>(Vec<&'a RawValue>);

impl<'de> Deserialize<'de> for Elements<'de> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Elements<'de>;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an array")
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Elements<'de>, A::Error> {
                let mut out = Vec::new();
                while let Some(e) = s.next_element::<&'de RawValue>()? {
                    out.push(e);
                }
                Ok(Elements(out))
            }
        }
        d.deserialize_seq(V)
    }
}

pub(crate) fn members(raw: &RawValue) -> Result<Option<Vec<(Key<'_>, &RawValue)>>, RewriteError> {
    if !raw.get().starts_with('{') {
        return Ok(None);
    }
    let m: Members = serde_json::from_str(raw.get()).map_err(malformed)?;
    Ok(Some(m.0))
}

pub(crate) fn elements(raw: &RawValue) -> Result<Option<Vec<&RawValue>>, RewriteError> {
    if !raw.get().starts_with('[') {
        return Ok(None);
    }
    let e: Elements = serde_json::from_str(raw.get()).map_err(malformed)?;
    Ok(Some(e.0))
}

/// A JSON string's value; `None` for any other JSON type.
pub(crate) fn string(raw: &RawValue) -> Result<Option<Cow<'_, str>>, RewriteError> {
    let t = raw.get();
    if !t.starts_with('"') {
        return Ok(None);
    }
    if !t.contains('\\') {
        return Ok(Some(Cow::Borrowed(&t[1..t.len() - 1])));
    }
    serde_json::from_str::<String>(t)
        .map(|s| Some(Cow::Owned(s)))
        .map_err(malformed)
}

pub(crate) fn member<'a>(ms: &[(Key<'a>, &'a RawValue)], name: &str) -> Option<&'a RawValue> {
    // Duplicate names: the last wins, as in Go's decoder.
    ms.iter().rev().find(|(k, _)| k.0 == name).map(|(_, v)| *v)
}

pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}
