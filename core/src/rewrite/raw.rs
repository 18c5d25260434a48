//! Lazy access to raw JSON text and the edits that rename it.
//!
//! [`Walk::parse`] validates the input whole (the grammar serde_json
//! accepts, checked against it by differential tests) and, in the same
//! pass, reads the structure of every container into a tape (for large
//! inputs: validation only, then level by level as the walk steps in), so
//! no byte is parsed twice. Its values are [`Raw`] slices of the input. A walker records edits (byte
//! ranges and their replacement); [`Walk::finish`] applies them, copying
//! every other byte as it came.

use std::borrow::Cow;
use std::rc::Rc;

use super::error::{malformed, RewriteError};
use super::needles::Needles;

pub mod reference;
mod tape;
mod validate;
use tape::Tape;

/// One replacement of `input[start..end]`.
pub(crate) struct Edit {
    pub start: usize,
    pub end: usize,
    pub text: String,
}

pub(crate) type MemberList<'i> = Rc<Vec<(Key<'i>, Raw<'i>)>>;
pub(crate) type ElementList<'i> = Rc<Vec<Raw<'i>>>;

/// Maps keyed by a value's offset in the input. The keys come from regroup's
/// own parse, never chosen by a peer, so a fast hash (foldhash) is safe and
/// SipHash's flooding resistance buys nothing; it was ~7% of a renamed GET.
type ByOffset<V> = foldhash::HashMap<usize, V>;

/// The edits collected over one input text, and what was already read of
/// it (each container's entries are listed at most once, however many
/// places and the heuristic visit it).
pub(crate) struct Walk<'i> {
    pub input: &'i str,
    pub edits: Vec<Edit>,
    /// Every container's entries, read in the pass that validated the
    /// input (inputs up to [`WHOLE_TAPE_MAX`]).
    tape: Option<Tape>,
    /// Larger inputs: the entries of each container stepped into, read
    /// level by level, so memory follows what the walk visits (a tape
    /// entry is 16 bytes for as little as 2 bytes of JSON).
    levels: ByOffset<Tape>,
    /// The largest input read whole into one tape.
    pub whole_tape_max: usize,
    members: ByOffset<Option<MemberList<'i>>>,
    elements: ByOffset<Option<ElementList<'i>>>,
    /// Where the index's names occur in the input (every occurrence,
    /// overlapping ones too), sorted by start; found once, on the first
    /// [`may_contain`](Self::may_contain).
    occurrences: Option<Vec<(usize, usize)>>,
    /// Walk every value, not only those where a mapped name shows: the
    /// object may hold a name `names:` renames, which no byte search finds.
    pub force: bool,
}

impl<'i> Walk<'i> {
    /// The JSON document `text` validated (syntax, escapes, nesting depth)
    /// and, up to [`WHOLE_TAPE_MAX`], its structure read in the same pass;
    /// the walk over it and its root value, without the whitespace
    /// around it.
    pub fn parse(text: &'i str) -> Result<(Walk<'i>, Raw<'i>), RewriteError> {
        let mut walk = Walk::new(text);
        if text.len() <= walk.whole_tape_max {
            walk.tape = Some(validate::read::<true>(text)?);
        } else {
            validate::read::<false>(text)?;
        }
        Ok((walk, Raw(text.trim_matches(JSON_WHITESPACE))))
    }

    /// A walk over `input`, which [`Raw::parse`] has validated; its
    /// structure is read on the first step into a container.
    pub fn new(input: &'i str) -> Self {
        Walk {
            input,
            edits: Vec::new(),
            tape: None,
            levels: ByOffset::default(),
            whole_tape_max: WHOLE_TAPE_MAX,
            members: ByOffset::default(),
            elements: ByOffset::default(),
            occurrences: None,
            force: false,
        }
    }

    pub fn members(&mut self, raw: Raw<'i>) -> Result<Option<MemberList<'i>>, RewriteError> {
        let at = self.offset(raw);
        if let Some(m) = self.members.get(&at) {
            return Ok(m.clone());
        }
        let m = if raw.get().starts_with('{') {
            let input = self.input;
            let entries = self.entries(at)?;
            let mut out = Vec::with_capacity(entries.len());
            for e in entries {
                let quoted = &input[e.key.0 as usize..e.key.1 as usize];
                let name = &quoted[1..quoted.len() - 1];
                let key = if has_escape(name) {
                    // Escaped names are rare; serde_json decodes them as it
                    // did when it validated the document.
                    Cow::Owned(serde_json::from_str::<String>(quoted).map_err(malformed)?)
                } else {
                    Cow::Borrowed(name)
                };
                out.push((Key(key), value(input, e)));
            }
            Some(Rc::new(out))
        } else {
            None
        };
        self.members.insert(at, m.clone());
        Ok(m)
    }

    pub fn elements(&mut self, raw: Raw<'i>) -> Result<Option<ElementList<'i>>, RewriteError> {
        let at = self.offset(raw);
        if let Some(e) = self.elements.get(&at) {
            return Ok(e.clone());
        }
        let e = if raw.get().starts_with('[') {
            let input = self.input;
            let out = self.entries(at)?.iter().map(|e| value(input, e)).collect();
            Some(Rc::new(out))
        } else {
            None
        };
        self.elements.insert(at, e.clone());
        Ok(e)
    }

    /// The entries of the container starting at byte `at`.
    fn entries(&mut self, at: usize) -> Result<&[tape::Entry], RewriteError> {
        let input = self.input;
        let tape = if input.len() <= self.whole_tape_max {
            if self.tape.is_none() {
                self.tape = Some(validate::read::<true>(input)?);
            }
            self.tape.as_ref().expect("just read")
        } else {
            match self.levels.entry(at) {
                std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
                std::collections::hash_map::Entry::Vacant(e) => e.insert(Tape::level(input, at)?),
            }
        };
        tape.container(at)
    }

    /// True when `raw` holds a whole occurrence of one of `names`'
    /// patterns: what `names.is_match(raw)` answers, from one search of the
    /// whole input instead of one per value. A walk must always pass the
    /// same needles.
    pub fn may_contain(&mut self, names: &Needles, raw: Raw<'i>) -> bool {
        let input = self.input;
        let found = self
            .occurrences
            .get_or_insert_with(|| names.find_all(input.as_bytes()));
        let start = raw.get().as_ptr() as usize - input.as_ptr() as usize;
        let end = start + raw.get().len();
        let first = found.partition_point(|(s, _)| *s < start);
        found[first..]
            .iter()
            .take_while(|(s, _)| *s < end)
            .any(|(_, e)| *e <= end)
    }

    pub fn offset(&self, raw: Raw<'_>) -> usize {
        raw.get().as_ptr() as usize - self.input.as_ptr() as usize
    }

    pub fn replace(&mut self, raw: Raw<'_>, text: String) {
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
    pub fn delete_entries(&mut self, raw: Raw<'_>, spans: &[(usize, usize)], keep: &[bool]) {
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
    pub fn member_start(&self, value: Raw<'_>) -> Option<usize> {
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

/// The value of entry `e` of `input`'s tape.
fn value<'i>(input: &'i str, e: &tape::Entry) -> Raw<'i> {
    Raw(&input[e.value.0 as usize..e.value.1 as usize])
}

/// An object member name, borrowed unless it had escapes.
pub(crate) struct Key<'a>(pub Cow<'a, str>);

/// One JSON value's text, borrowed from an input validated whole
/// ([`Walk::parse`], [`Raw::parse`]). Stepping into it
/// ([`Walk::members`]/[`Walk::elements`]) looks its entries up in the
/// walk's tape, read once per input.
#[derive(Clone, Copy, Debug)]
pub struct Raw<'i>(&'i str);

impl<'i> Raw<'i> {
    /// The JSON document `text`, validated (syntax, escapes, nesting
    /// depth) without reading its structure, and without the whitespace
    /// around it. A walk over it starts with [`Walk::parse`] instead.
    pub fn parse(text: &'i str) -> Result<Raw<'i>, RewriteError> {
        validate::read::<false>(text)?;
        Ok(Raw(text.trim_matches(JSON_WHITESPACE)))
    }

    /// The value's text.
    pub fn get(self) -> &'i str {
        self.0
    }
}

/// The largest input whose containers are all read in one pass (a few
/// MB of tape at most); larger ones are read level by level.
pub(crate) const WHOLE_TAPE_MAX: usize = 1 << 20;

/// The deepest nesting of arrays and objects a walk accepts. serde_json's
/// validation into `IgnoredAny` has no limit of its own, and the walk recurses once per level
/// on a worker thread's stack; Kubernetes objects nest a few dozen levels
/// (a CRD's schema the most).
pub(crate) const MAX_DEPTH: usize = 512;

const JSON_WHITESPACE: &[char] = &[' ', '\t', '\n', '\r'];

/// A JSON string's value; `None` for any other JSON type.
pub(crate) fn string(raw: Raw<'_>) -> Result<Option<Cow<'_, str>>, RewriteError> {
    let t = raw.get();
    if !t.starts_with('"') {
        return Ok(None);
    }
    if !has_escape(t) {
        return Ok(Some(Cow::Borrowed(&t[1..t.len() - 1])));
    }
    serde_json::from_str::<String>(t)
        .map(|s| Some(Cow::Owned(s)))
        .map_err(malformed)
}

/// True when the JSON string text `s` holds an escape.
fn has_escape(s: &str) -> bool {
    // Most member names are short: the slice's own search (a plain loop
    // for a few bytes) costs less there than the vectorized memchr's
    // set-up (a renamed Foo GET: ~1.9k instructions for its 26 keys).
    let b = s.as_bytes();
    if b.len() <= 32 {
        return b.contains(&b'\\');
    }
    memchr::memchr(b'\\', b).is_some()
}

pub(crate) fn member<'a>(ms: &[(Key<'a>, Raw<'a>)], name: &str) -> Option<Raw<'a>> {
    // Duplicate names: the last wins, as in Go's decoder.
    ms.iter().rev().find(|(k, _)| k.0 == name).map(|(_, v)| *v)
}

pub(crate) fn quote(s: &str) -> String {
    serde_json::to_string(s).expect("strings serialize")
}

#[cfg(test)]
mod tests;
