//! Lazy access to raw JSON text and the edits that rename it.
//!
//! `Walk::parse` validates the input whole (the grammar serde_json
//! accepts, checked against it by differential tests) and, in the same
//! pass, reads the structure of every container into a tape (for large
//! inputs: validation only, then level by level as the walk steps in), so
//! no byte is parsed twice. Its values are [`Raw`] slices of the input.
//! A walker records edits (byte ranges and their replacement);
//! `Walk::finish` applies them, copying every other byte as it came.

use std::borrow::Cow;
use std::rc::Rc;

use regroup_config::Form;

use super::error::{malformed, RewriteError};
use super::needles::Needles;
use super::same_bytes::same_bytes;

pub mod reference;
pub(crate) mod spare;
mod tape;
mod validate;
use tape::{Container, Entry, Tape};
pub(crate) use validate::{special, wide_supported};

/// One replacement of `input[start..end]` by `texts[text.0..text.1]` of
/// its walk (every edit's text is written into one buffer, [`Walk::texts`],
/// so an edit allocates nothing and a repeated mapping shares its text);
/// `form`: the form a string value was mapped in, when the edit is such a
/// mapping (see [`Walk::mapped_before`]).
#[derive(Clone, Copy)]
pub(crate) struct Edit {
    pub start: usize,
    pub end: usize,
    pub text: (usize, usize),
    pub form: Option<Form>,
}

/// Maps keyed by a value's offset in the input. The keys come from regroup's
/// own parse, never chosen by a peer, so a fast hash (foldhash) is safe and
/// SipHash's flooding resistance buys nothing.
type ByOffset<V> = foldhash::HashMap<usize, V>;

/// The edits collected over one input text, and its tape: every container's
/// entries, read once. Stepping into a container ([`members`](Self::members),
/// [`elements`](Self::elements)) hands out a view of the tape, not a copy,
/// so visiting one many times (places and the heuristic do) costs a lookup.
pub(crate) struct Walk<'i> {
    pub input: &'i str,
    edits: Vec<Edit>,
    /// The edits' replacement texts, one after another.
    texts: String,
    /// Where an object's places end (see `JsonRewriter::places_in`): one
    /// buffer lent to each object in turn, instead of one per object.
    pub found: Vec<(usize, Raw<'i>)>,
    /// Every container's entries, read in the pass that validated the
    /// input (inputs up to [`WHOLE_TAPE_MAX`]). Shared with the
    /// [`Members`] and [`Elements`] handed out, which are views of it.
    tape: Option<Rc<Tape>>,
    /// Larger inputs: the entries of each container stepped into, read
    /// level by level, so memory follows what the walk visits (a tape
    /// entry is 16 bytes for as little as 2 bytes of JSON).
    levels: ByOffset<Rc<Tape>>,
    /// The largest input read whole into one tape.
    pub whole_tape_max: usize,
    /// The entry of the whole tape's container found last (`usize::MAX`:
    /// the outermost or none): a value without its entry is looked for
    /// first just after it (see [`Tape::container_after`]).
    last_container: usize,
    /// Where the index's names occur in the input (every occurrence,
    /// overlapping ones too), sorted by start; found once, on the first
    /// [`may_contain`](Self::may_contain).
    occurrences: Option<Vec<(usize, usize)>>,
    /// Walk every value, not only those where a mapped name shows: the
    /// object may hold a name `names:` renames, which no byte search finds.
    pub force: bool,
    /// Whether a string of the input has an escape, which could hide a
    /// name from the byte search; true when not known (the input was not
    /// read by [`Walk::parse`]).
    pub escapes: bool,
}

impl<'i> Walk<'i> {
    /// The JSON document `text` validated (syntax, escapes, nesting depth)
    /// and, up to [`WHOLE_TAPE_MAX`], its structure read in the same pass;
    /// the walk over it and its root value, without the whitespace
    /// around it.
    pub fn parse(text: &'i str) -> Result<(Walk<'i>, Raw<'i>), RewriteError> {
        let mut walk = Walk::new(text);
        if text.len() <= walk.whole_tape_max {
            let tape = whole_tape(text)?;
            walk.escapes = tape.escapes;
            walk.tape = Some(tape);
        } else {
            walk.escapes = validate::read::<false>(text)?.escapes;
        }
        Ok((walk, Raw::outside(trim_json(text))))
    }

    /// A walk over `input`, which [`Raw::parse`] has validated; its
    /// structure is read on the first step into a container.
    pub fn new(input: &'i str) -> Self {
        Walk {
            input,
            // A walk is started only where a mapped name shows: it
            // usually edits, and a few edits fit without regrowing.
            edits: spare::edits(),
            texts: spare::texts(),
            // Likewise the places found in an object (grown from empty,
            // −300 instructions a rename of the Foo).
            found: spare::found(),
            tape: None,
            levels: ByOffset::default(),
            whole_tape_max: WHOLE_TAPE_MAX,
            last_container: usize::MAX,
            occurrences: None,
            force: false,
            escapes: true,
        }
    }

    /// The members of `raw` when it is an object: a view of the tape, no
    /// copy (names with escapes, rare, are decoded here by serde_json).
    pub fn members(&mut self, raw: Raw<'i>) -> Result<Option<Members<'i>>, RewriteError> {
        if !raw.get().starts_with('{') {
            return Ok(None);
        }
        let input = self.input;
        let (tape, c) = self.container(raw)?;
        let keys = if c.escaped {
            let names = tape
                .entries_of(c)
                .map(|(_, e)| {
                    let quoted = &input[e.key.0 as usize..e.key.1 as usize];
                    serde_json::from_str::<String>(quoted).map_err(malformed)
                })
                .collect::<Result<Vec<String>, _>>()?;
            Some(Rc::from(names))
        } else {
            None
        };
        Ok(Some(Members {
            input,
            tape,
            container: c,
            keys,
            escapes: self.escapes,
        }))
    }

    /// The elements of `raw` when it is an array: a view of the tape.
    pub fn elements(&mut self, raw: Raw<'i>) -> Result<Option<Elements<'i>>, RewriteError> {
        if !raw.get().starts_with('[') {
            return Ok(None);
        }
        let (tape, c) = self.container(raw)?;
        Ok(Some(Elements {
            input: self.input,
            tape,
            container: c,
        }))
    }

    /// The tape holding the container `raw`, and where in it.
    fn container(&mut self, raw: Raw<'i>) -> Result<(Rc<Tape>, Container), RewriteError> {
        let at = self.offset(raw);
        let input = self.input;
        if input.len() <= self.whole_tape_max {
            let tape = match &self.tape {
                Some(t) => t,
                None => self.tape.insert(whole_tape(input)?),
            };
            if raw.get().len() == 2 {
                // `{}` or `[]` (half a managed field's objects are
                // empty): nothing to look up.
                return Ok((tape.clone(), Container::EMPTY));
            }
            // A value handed out by this tape knows its entry.
            if let Some(c) = tape.container_of_entry(raw.entry as usize, at) {
                self.last_container = raw.entry as usize;
                return Ok((tape.clone(), c));
            }
            let (i, c) = tape.container_after(at, self.last_container)?;
            self.last_container = i;
            return Ok((tape.clone(), c));
        }
        let tape = match self.levels.entry(at) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => {
                e.insert(Rc::new(Tape::level(input, at)?))
            }
        };
        let c = tape.container(at)?;
        Ok((tape.clone(), c))
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

    /// The occurrences [`may_contain`](Self::may_contain) would find,
    /// found by the caller already with the same needles.
    pub fn found(&mut self, occurrences: Vec<(usize, usize)>) {
        self.occurrences = Some(occurrences);
    }

    pub fn offset(&self, raw: Raw<'_>) -> usize {
        raw.get().as_ptr() as usize - self.input.as_ptr() as usize
    }

    /// Replaces the value `raw` by `text`.
    pub fn replace(&mut self, raw: Raw<'_>, text: &str) {
        let start = self.offset(raw);
        self.replace_range(start, start + raw.get().len(), text);
    }

    /// Replaces the string value `raw` by `mapped` (unquoted) as a JSON
    /// string, `mapped` being its mapping in `form` (`None`: not a
    /// mapping [`mapped_before`](Self::mapped_before) may reuse).
    pub fn replace_quoted(&mut self, raw: Raw<'_>, form: Option<Form>, mapped: &str) {
        let from = self.texts.len();
        if needs_escape(mapped) {
            self.texts
                .push_str(&serde_json::to_string(mapped).expect("strings serialize"));
        } else {
            self.texts.push('"');
            self.texts.push_str(mapped);
            self.texts.push('"');
        }
        self.push_edit(raw, (from, self.texts.len()), form);
    }

    /// [`replace_quoted`](Self::replace_quoted) with the mapping written
    /// by `map` straight into the walk's texts (no `String` of its own);
    /// `map` answers false, leaving what it was given as it was, when
    /// nothing is mapped. Returns what `map` answered.
    pub fn replace_quoted_with(
        &mut self,
        raw: Raw<'_>,
        form: Form,
        map: impl FnOnce(&mut String) -> bool,
    ) -> bool {
        let from = self.texts.len();
        self.texts.push('"');
        if !map(&mut self.texts) {
            self.texts.truncate(from);
            return false;
        }
        if needs_escape(&self.texts[from + 1..]) {
            // Rare (a version with a quote or a control byte, decoded
            // from an escape): written again as JSON.
            let quoted = serde_json::to_string(&self.texts[from + 1..]).expect("strings serialize");
            self.texts.truncate(from);
            self.texts.push_str(&quoted);
        } else {
            self.texts.push('"');
        }
        self.push_edit(raw, (from, self.texts.len()), Some(form));
        true
    }

    /// Replaces the string value `raw` by the text of an earlier edit
    /// that mapped the same string in `form` (from
    /// [`mapped_before`](Self::mapped_before)): the text is shared.
    pub fn replace_again(&mut self, raw: Raw<'_>, form: Form, text: (usize, usize)) {
        self.push_edit(raw, text, Some(form));
    }

    fn push_edit(&mut self, raw: Raw<'_>, text: (usize, usize), form: Option<Form>) {
        let start = self.offset(raw);
        self.edits.push(Edit {
            start,
            end: start + raw.get().len(),
            text,
            form,
        });
    }

    /// The text of one of the last few edits that mapped the same string
    /// as `raw` in `form` (its place in [`texts`](Self::texts)): one walk
    /// maps with one rule set in one direction, so the same string maps
    /// the same way again (an object's `apiVersion` and its managed
    /// fields' repeat it). Only a few are looked at; a miss costs only a
    /// second mapping.
    pub fn mapped_before(&self, raw: Raw<'_>, form: Form) -> Option<(usize, usize)> {
        let text = raw.get().as_bytes();
        let input = self.input.as_bytes();
        self.edits
            .iter()
            .rev()
            .take(8)
            .find(|e| {
                e.form == Some(form)
                    && e.end - e.start == text.len()
                    && input.get(e.start..e.end) == Some(text)
            })
            .map(|e| e.text)
    }

    /// True when one of the last few edits replaces exactly `raw`: the
    /// catalog's edits of an object are the last ones made before the
    /// reference-key heuristic visits it. Only a few are looked at, so a
    /// long list's edits are not scanned once per item; missing an older
    /// one costs only a duplicate edit, which `finish` drops.
    pub fn replaced_lately(&self, raw: Raw<'_>) -> bool {
        let start = self.offset(raw);
        let end = start + raw.get().len();
        self.edits
            .iter()
            .rev()
            .take(16)
            .any(|e| e.start == start && e.end == end)
    }

    /// How many edits are made so far: where an object's own begin, for
    /// [`names_all_replaced`](Self::names_all_replaced).
    pub fn edit_count(&self) -> usize {
        self.edits.len()
    }

    /// True when every occurrence of a name inside `raw` lies inside an
    /// edit made since edit `since`: nothing there is left to rename by a
    /// string's value (a string holding an occurrence is either replaced
    /// already or inside a replaced range, so another edit of it would be
    /// a duplicate or nested one, which [`finish`](Self::finish) drops).
    /// False when the occurrences are not known, or with
    /// [`force`](Self::force) (a name no byte search finds).
    pub fn names_all_replaced(&self, raw: Raw<'_>, since: usize) -> bool {
        let (Some(found), false) = (&self.occurrences, self.force) else {
            return false;
        };
        let start = self.offset(raw);
        let end = start + raw.get().len();
        let edits = self.edits.get(since..).unwrap_or_default();
        let first = found.partition_point(|(s, _)| *s < start);
        found[first..]
            .iter()
            .take_while(|(s, _)| *s < end)
            .all(|&(s, e)| edits.iter().any(|x| x.start <= s && e <= x.end))
    }

    /// Replaces `input[start..end]` (a member name, found by
    /// [`member_start`](Self::member_start) and [`string_end`](Self::string_end)).
    pub fn replace_range(&mut self, start: usize, end: usize, text: &str) {
        let from = self.texts.len();
        self.texts.push_str(text);
        self.edits.push(Edit {
            start,
            end,
            text: (from, self.texts.len()),
            form: None,
        });
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
            self.replace_range(start, end, text);
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
        // The exact length first: a body whose buffer is full becomes
        // `Bytes` without an allocation of its own (one with spare room
        // needs a shared header), and never grows while written.
        let (mut len, mut cursor) = (self.input.len(), 0);
        for e in &self.edits {
            if e.start >= cursor {
                len = len + (e.text.1 - e.text.0) - (e.end - e.start);
                cursor = e.end;
            }
        }
        let mut out = String::with_capacity(len);
        let mut cursor = 0;
        for e in &self.edits {
            if e.start < cursor {
                continue;
            }
            out.push_str(&self.input[cursor..e.start]);
            out.push_str(&self.texts[e.text.0..e.text.1]);
            cursor = e.end;
        }
        out.push_str(&self.input[cursor..]);
        debug_assert_eq!((out.len(), out.capacity()), (len, len));
        Some(out)
    }
}

impl Drop for Walk<'_> {
    fn drop(&mut self) {
        if let Some(tape) = self.tape.take() {
            spare::keep_tape(tape);
        }
        spare::keep_edits(
            std::mem::take(&mut self.edits),
            std::mem::take(&mut self.texts),
            std::mem::take(&mut self.found),
        );
        if let Some(found) = self.occurrences.take() {
            spare::keep_occurrences(found);
        }
    }
}

/// The tape of every container of `text`, read into a kept one.
fn whole_tape(text: &str) -> Result<Rc<Tape>, RewriteError> {
    let mut tape = spare::tape();
    let read = validate::read_into::<true>(text, Rc::make_mut(&mut tape));
    match read {
        Ok(()) => Ok(tape),
        Err(e) => {
            spare::keep_tape(tape);
            Err(e)
        }
    }
}

/// The value of entry `e` of `input`'s tape.
fn value<'i>(input: &'i str, (i, e): (usize, &tape::Entry)) -> Raw<'i> {
    Raw {
        text: &input[e.value.0 as usize..e.value.1 as usize],
        entry: i as u32,
    }
}

/// An object's members, in order: a view of the walk's tape (cloning it
/// shares the tape), each name borrowed from the input unless it had
/// escapes.
#[derive(Clone)]
pub(crate) struct Members<'i> {
    input: &'i str,
    tape: Rc<Tape>,
    container: Container,
    /// Every name decoded, when one of them has an escape.
    keys: Option<Rc<[String]>>,
    /// The walk's [`escapes`](Walk::escapes).
    escapes: bool,
}

impl<'i> Members<'i> {
    /// How many members (the chain followed: only for a capacity).
    pub fn len(&self) -> usize {
        self.entries().count()
    }

    /// The value of the member `name`; with duplicate names the last
    /// wins, as in Go's decoder. Names are compared as bytes, and only the
    /// value found is sliced out of the input.
    pub fn get(&self, name: &str) -> Option<Raw<'i>> {
        self.named(name).last()
    }

    /// [`get`](Self::get) of two names in one pass over the members.
    pub fn get_two(&self, a: &str, b: &str) -> (Option<Raw<'i>>, Option<Raw<'i>>) {
        let (a, b) = (a.as_bytes(), b.as_bytes());
        let mut found = (None, None);
        for (i, ke) in self.entries() {
            if self.is_named(i, ke.1, a) {
                found.0 = Some(value(self.input, ke));
            } else if self.is_named(i, ke.1, b) {
                found.1 = Some(value(self.input, ke));
            }
        }
        found
    }

    /// [`get`](Self::get) of each of `names` in one pass over the members.
    pub fn get_all<const N: usize>(&self, names: [&str; N]) -> [Option<Raw<'i>>; N] {
        let mut found = [None; N];
        for (i, ke) in self.entries() {
            for (slot, name) in found.iter_mut().zip(names) {
                if self.is_named(i, ke.1, name.as_bytes()) {
                    *slot = Some(value(self.input, ke));
                }
            }
        }
        found
    }

    /// The values of the members named `name`, in order (more than one
    /// only with duplicate names). Names are compared as bytes, and only
    /// the values found are sliced out of the input.
    pub fn named<'s>(&'s self, name: &'s str) -> Named<'s, 'i> {
        Named {
            members: self,
            name: name.as_bytes(),
            chain: self.entries(),
        }
    }

    /// Whether `e`, member `i` (`0..len`), is named `name`.
    #[inline(always)]
    fn is_named(&self, i: usize, e: &Entry, name: &[u8]) -> bool {
        match &self.keys {
            Some(keys) => keys.get(i).is_some_and(|k| same_bytes(k.as_bytes(), name)),
            None => {
                let (start, end) = (e.key.0 as usize + 1, e.key.1 as usize - 1);
                end - start == name.len()
                    && self
                        .input
                        .as_bytes()
                        .get(start..end)
                        .is_some_and(|k| same_bytes(k, name))
            }
        }
    }

    /// [`string`] of a value of this walk's input: without an escape in
    /// the input, every string is its text between the quotes.
    #[inline]
    pub fn string(&self, raw: Raw<'i>) -> Result<Option<Cow<'i, str>>, RewriteError> {
        plain_or_string(self.escapes, raw)
    }

    /// Each member's name (as bytes, decoded when it has an escape) and
    /// its entry, whose value [`value_of`](Self::value_of) slices: the
    /// place tree reads every name and steps into few values (slicing
    /// each value was ~15 instructions a member).
    pub fn names_and_entries(&self) -> impl Iterator<Item = (&[u8], MemberEntry<'_>)> + '_ {
        self.entries()
            .map(move |(i, ke)| (self.name_bytes(i, ke.1), MemberEntry(ke)))
    }

    /// The value of a member [`names_and_entries`](Self::names_and_entries)
    /// handed out.
    #[inline]
    pub fn value_of(&self, m: MemberEntry<'_>) -> Raw<'i> {
        value(self.input, m.0)
    }

    /// Each member's name and value.
    pub fn iter(&self) -> impl Iterator<Item = (Key<'_>, Raw<'i>)> + '_ {
        let input = self.input;
        self.entries()
            .map(move |(i, ke)| (Key(Cow::Borrowed(self.name(i, ke.1))), value(input, ke)))
    }

    /// Each member's tape entry, numbered.
    #[inline]
    fn entries(&self) -> std::iter::Enumerate<tape::Chain<'_>> {
        self.tape.entries_of(self.container).enumerate()
    }

    /// The name of member `i`, entry `e`: decoded when the object has a
    /// name with an escape, else its text between the quotes.
    #[inline(always)]
    fn name<'s>(&'s self, i: usize, e: &Entry) -> &'s str {
        match &self.keys {
            Some(keys) => keys.get(i).map_or("", |k| k.as_str()),
            None => &self.input[e.key.0 as usize + 1..e.key.1 as usize - 1],
        }
    }

    /// [`name`](Self::name) as bytes, sliced without a character check.
    #[inline(always)]
    fn name_bytes<'s>(&'s self, i: usize, e: &Entry) -> &'s [u8] {
        match &self.keys {
            Some(keys) => keys.get(i).map_or(&b""[..], |k| k.as_bytes()),
            None => &self.input.as_bytes()[e.key.0 as usize + 1..e.key.1 as usize - 1],
        }
    }
}

/// A member's tape entry (its index and the entry), as
/// [`Members::names_and_entries`] hands it out.
#[derive(Clone, Copy)]
pub(crate) struct MemberEntry<'t>((usize, &'t Entry));

/// The values of an object's members of one name ([`Members::named`]).
pub(crate) struct Named<'s, 'i> {
    members: &'s Members<'i>,
    name: &'s [u8],
    /// The members not yet looked at, numbered.
    chain: std::iter::Enumerate<tape::Chain<'s>>,
}

impl<'i> Iterator for Named<'_, 'i> {
    type Item = Raw<'i>;

    fn next(&mut self) -> Option<Raw<'i>> {
        let (members, name) = (self.members, self.name);
        self.chain
            .find(|(i, (_, e))| members.is_named(*i, e, name))
            .map(|(_, ke)| value(members.input, ke))
    }
}

/// An array's elements, in order: a view of the walk's tape.
#[derive(Clone)]
pub(crate) struct Elements<'i> {
    input: &'i str,
    tape: Rc<Tape>,
    container: Container,
}

impl<'i> Elements<'i> {
    /// How many elements (the chain followed: only for a capacity).
    pub fn len(&self) -> usize {
        self.tape.entries_of(self.container).count()
    }

    pub fn is_empty(&self) -> bool {
        self.container.is_empty()
    }

    /// Element `i`: the chain is followed to it (a Table's cells, a few).
    pub fn get(&self, i: usize) -> Option<Raw<'i>> {
        self.tape
            .entries_of(self.container)
            .nth(i)
            .map(|ke| value(self.input, ke))
    }

    pub fn iter(&self) -> impl Iterator<Item = Raw<'i>> + '_ {
        let input = self.input;
        self.tape
            .entries_of(self.container)
            .map(move |ke| value(input, ke))
    }
}

/// An object member name, borrowed unless it had escapes.
pub(crate) struct Key<'a>(pub Cow<'a, str>);

/// One JSON value's text, borrowed from an input validated whole
/// (`Walk::parse`, `Raw::parse`), and the index of its entry in the
/// tape that handed it out. Stepping into it
/// (`Walk::members`/`Walk::elements`) finds its entries in the
/// walk's tape, read once per input: at that index when the entry there
/// is this value's, else by where it starts.
#[derive(Clone, Copy, Debug)]
pub struct Raw<'i> {
    text: &'i str,
    entry: u32,
}

impl<'i> Raw<'i> {
    /// The JSON document `text`, validated (syntax, escapes, nesting
    /// depth) without reading its structure, and without the whitespace
    /// around it. A walk over it starts with `Walk::parse` instead.
    pub fn parse(text: &'i str) -> Result<Raw<'i>, RewriteError> {
        validate::read::<false>(text)?;
        Ok(Raw::outside(trim_json(text)))
    }

    /// A value no tape entry stands for (a document's root).
    fn outside(text: &'i str) -> Raw<'i> {
        Raw {
            text,
            entry: u32::MAX,
        }
    }

    /// The value's text.
    pub fn get(self) -> &'i str {
        self.text
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

/// `text` without the JSON whitespace around it: a loop over the few
/// bytes there are (the apiserver writes none before a body and a newline
/// after), where `trim_matches` over a set of chars costs ~140
/// instructions.
fn trim_json(text: &str) -> &str {
    let ws = |c: &u8| matches!(c, b' ' | b'\t' | b'\n' | b'\r');
    let b = text.as_bytes();
    let start = b.iter().position(|c| !ws(c)).unwrap_or(b.len());
    let end = b.iter().rposition(|c| !ws(c)).map_or(start, |i| i + 1);
    // Both ends are next to ASCII bytes, so on character boundaries.
    text.get(start..end).unwrap_or_default()
}

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

/// [`string`], where `escapes` is false when no string of the input has
/// an escape (the validating reader knows): the text between the quotes
/// is then the value, without looking for a backslash.
#[inline]
pub(crate) fn plain_or_string(
    escapes: bool,
    raw: Raw<'_>,
) -> Result<Option<Cow<'_, str>>, RewriteError> {
    if escapes {
        return string(raw);
    }
    let t = raw.get();
    Ok(t.starts_with('"')
        .then(|| Cow::Borrowed(&t[1..t.len() - 1])))
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

pub(crate) fn member<'i>(ms: &Members<'i>, name: &str) -> Option<Raw<'i>> {
    ms.get(name)
}

/// `s` as a JSON string. A renamed name needs no escape (no quote,
/// backslash or control byte): it is written as is, in one allocation;
/// anything else goes through serde_json.
pub(crate) fn quote(s: &str) -> String {
    if needs_escape(s) {
        return serde_json::to_string(s).expect("strings serialize");
    }
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    out.push_str(s);
    out.push('"');
    out
}

/// True when `s` holds a byte JSON escapes: a quote, a backslash or a
/// control byte. Every byte is looked at, without an early exit, so the
/// compiler checks many at once.
fn needs_escape(s: &str) -> bool {
    s.bytes().fold(false, |any, b| {
        any | (b < 0x20) | (b == b'"') | (b == b'\\')
    })
}

#[cfg(test)]
mod tests;
