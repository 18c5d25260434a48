//! Every container's entries (key and value byte ranges) of a JSON
//! document, so a walk never reads a level twice. Entries are kept in
//! document order, each container's first, then its first child's
//! subtree, and so on: the reader writes each once, as it meets it, and
//! a container's entries are chained by [`Entry::next`] (an entry that is
//! itself a container skips its subtree). A container is its own entry in
//! its parent: its members or elements are the entries after it, up to
//! where its `next` points, so no list of containers is kept (the root,
//! which is no entry, holds the whole tape). Inputs up to
//! [`WHOLE_TAPE_MAX`](super::WHOLE_TAPE_MAX) get theirs whole from the
//! validating reader ([`validate`](super::validate)), in the pass that
//! validates them; larger ones are validated without recording, then read
//! here one level at a time as the walk steps in. This level reader relies
//! on that validation and need not repeat it; it still never indexes out
//! of bounds, and answers an error (not a panic) should the text not be
//! what validation promised.

use crate::rewrite::error::{malformed, RewriteError};

fn broken() -> RewriteError {
    malformed("JSON structure not as validated")
}

/// One entry of a container: its key's range (quotes included; `(0, 0)`
/// in arrays), its value's, and where its container's next entry is in
/// [`Tape::entries`] (past this entry's subtree), with [`ESCAPED_KEYS`]
/// set when the value is an object one of whose member names has an
/// escape.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: (u32, u32),
    pub value: (u32, u32),
    pub next: u32,
}

/// The bit of [`Entry::next`] that says an object's member names need
/// decoding; entries are fewer than 2^31 (a recorded tape's input is at
/// most [`WHOLE_TAPE_MAX`](super::WHOLE_TAPE_MAX), a level's is refused
/// past it).
pub(crate) const ESCAPED_KEYS: u32 = 1 << 31;

impl Entry {
    /// Where the container's next entry is.
    #[inline(always)]
    pub fn next(&self) -> usize {
        (self.next & !ESCAPED_KEYS) as usize
    }
}

/// One container's entries: `first..end` of [`Tape::entries`], chained,
/// and whether a member name of it has an escape (the names are then
/// decoded when it is listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Container {
    pub first: u32,
    pub end: u32,
    pub escaped: bool,
}

impl Container {
    /// `{}` or `[]`.
    pub const EMPTY: Container = Container {
        first: 0,
        end: 0,
        escaped: false,
    };

    /// Whether it has no entry.
    pub fn is_empty(&self) -> bool {
        self.end <= self.first
    }
}

/// Every container of one document.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Tape {
    /// Every entry, in document order (so by where its value starts);
    /// a container's are chained by [`Entry::next`].
    pub(crate) entries: Vec<Entry>,
    /// Where the outermost container starts: it is no entry.
    pub(crate) root_start: u32,
    /// Whether a member name of the outermost container has an escape.
    pub(crate) root_escaped: bool,
    /// Whether a string of the document has an escape (set by the
    /// validating reader, for the whole document, recorded or not).
    pub(crate) escapes: bool,
}

const NO_KEY: (u32, u32) = (0, 0);

impl Tape {
    pub(super) fn with_capacity(entries: usize) -> Tape {
        Tape {
            entries: Vec::with_capacity(entries),
            root_start: u32::MAX,
            root_escaped: false,
            escapes: true,
        }
    }

    /// The entries of the container opening at byte `from` of validated
    /// `text`, its own level only (the walk reads each level it enters,
    /// holding only those): they follow each other, each `next` the one
    /// after it.
    pub(crate) fn level(text: &str, from: usize) -> Result<Tape, RewriteError> {
        let b = text.as_bytes();
        let pos = |i: usize| u32::try_from(i).map_err(|_| malformed("a JSON body over 4 GiB"));
        let mut tape = Tape::with_capacity(0);
        // Containers open, the one at `from` the first.
        let mut depth = 0usize;
        let mut object = false;
        // The key of the member whose value comes next, in the object.
        let mut key: Option<(u32, u32)> = None;
        // A value of the container that is itself one: where it opened,
        // and its key.
        let mut nested = (0usize, NO_KEY);
        let mut escaped = false;
        // The entry after the next one, checked to stay below the flag.
        let after = |tape: &Tape| match u32::try_from(tape.entries.len() + 1) {
            Ok(n) if n < ESCAPED_KEYS => Ok(n),
            _ => Err(malformed("a JSON array or object of over 2^31 entries")),
        };
        let mut i = from;
        while i < b.len() {
            let (start, end) = match b[i] {
                b' ' | b'\t' | b'\n' | b'\r' | b',' | b':' => {
                    i += 1;
                    continue;
                }
                c @ (b'{' | b'[') => {
                    depth += 1;
                    if depth == 1 {
                        object = c == b'{';
                        tape.root_start = pos(i)?;
                    } else if depth == 2 {
                        nested = (i, key.take().unwrap_or(NO_KEY));
                    }
                    i += 1;
                    continue;
                }
                b'}' | b']' => {
                    depth = depth.checked_sub(1).ok_or_else(broken)?;
                    i += 1;
                    match depth {
                        0 => {
                            tape.root_escaped = object && escaped;
                            return Ok(tape);
                        }
                        1 => {
                            let next = after(&tape)?;
                            tape.entries.push(Entry {
                                key: nested.1,
                                value: (pos(nested.0)?, pos(i)?),
                                next,
                            });
                        }
                        _ => {}
                    }
                    continue;
                }
                b'"' => {
                    let end = string_end(b, i)?;
                    if depth == 1 && object && key.is_none() {
                        escaped |= b[i..end].contains(&b'\\');
                        key = Some((pos(i)?, pos(end)?));
                        i = end;
                        continue;
                    }
                    (i, end)
                }
                _ => (i, scalar_end(b, i)),
            };
            i = end;
            if depth == 1 {
                let next = after(&tape)?;
                tape.entries.push(Entry {
                    key: key.take().unwrap_or(NO_KEY),
                    value: (pos(start)?, pos(end)?),
                    next,
                });
            }
        }
        Err(broken())
    }

    /// The container whose first byte is at `at`.
    #[inline]
    pub(crate) fn container(&self, at: usize) -> Result<Container, RewriteError> {
        Ok(self.container_after(at, usize::MAX)?.1)
    }

    /// [`container`](Self::container), and the index of its entry
    /// (`usize::MAX` for the outermost, which has none), trying first the
    /// entry after entry `last` (`usize::MAX`: the first) and the one
    /// after `last`'s subtree: a walk entering a value's first container,
    /// or the next of a list, finds it at once instead of by a binary
    /// search.
    #[inline]
    pub(crate) fn container_after(
        &self,
        at: usize,
        last: usize,
    ) -> Result<(usize, Container), RewriteError> {
        let at = u32::try_from(at).map_err(|_| broken())?;
        if at == self.root_start {
            let end = u32::try_from(self.entries.len()).map_err(|_| broken())?;
            let root = Container {
                first: 0,
                end,
                escaped: self.root_escaped,
            };
            return Ok((usize::MAX, root));
        }
        let starts_at = |i: usize| self.entries.get(i).is_some_and(|e| e.value.0 == at);
        let next = last.wrapping_add(1);
        let i = if starts_at(next) {
            next
        } else if let Some(after) = self
            .entries
            .get(last)
            .map(Entry::next)
            .filter(|&a| starts_at(a))
        {
            after
        } else {
            self.entries
                .binary_search_by_key(&at, |e| e.value.0)
                .map_err(|_| broken())?
        };
        let c = self.container_of_entry(i, at as usize).ok_or_else(broken)?;
        Ok((i, c))
    }

    /// The container whose own entry is entry `i`, if its value starts at
    /// `at` (a value's entry carried with it, checked, so that a value of
    /// another tape is looked up instead of misread).
    #[inline]
    pub(crate) fn container_of_entry(&self, i: usize, at: usize) -> Option<Container> {
        let e = self.entries.get(i).filter(|e| e.value.0 as usize == at)?;
        let (first, end) = (i + 1, e.next());
        if end < first || end > self.entries.len() {
            return None;
        }
        Some(Container {
            first: first as u32,
            end: end as u32,
            escaped: e.next & ESCAPED_KEYS != 0,
        })
    }

    /// The entries of container `c`, which [`container`](Self::container)
    /// answered, in order, each with its index.
    pub(crate) fn entries_of(&self, c: Container) -> Chain<'_> {
        Chain {
            entries: &self.entries,
            at: c.first as usize,
            end: c.end as usize,
        }
    }
}

/// A container's entries, following [`Entry::next`]. Should a link not
/// be where the reader put it (not past the entry it is in), the chain
/// ends early rather than loop or index out of bounds.
#[derive(Clone)]
pub(crate) struct Chain<'t> {
    entries: &'t [Entry],
    at: usize,
    end: usize,
}

impl<'t> Iterator for Chain<'t> {
    type Item = (usize, &'t Entry);

    #[inline]
    fn next(&mut self) -> Option<(usize, &'t Entry)> {
        if self.at >= self.end {
            return None;
        }
        let i = self.at;
        let e = self.entries.get(i)?;
        let next = e.next();
        self.at = if next > i { next } else { self.end };
        Some((i, e))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.end.saturating_sub(self.at)))
    }
}

/// One past the closing quote of the string opening at `b[i]`.
fn string_end(b: &[u8], i: usize) -> Result<usize, RewriteError> {
    // memchr2 even for short strings: with a plain loop over the first 32
    // bytes a renamed Foo GET cost ~2.9k more instructions (callgrind).
    let mut j = i + 1;
    loop {
        let rest = b.get(j..).ok_or_else(broken)?;
        let at = j + memchr::memchr2(b'"', b'\\', rest).ok_or_else(broken)?;
        if b[at] == b'"' {
            return Ok(at + 1);
        }
        j = at + 2;
    }
}

/// One past the end of the number, `true`, `false` or `null` at `b[i]`.
fn scalar_end(b: &[u8], i: usize) -> usize {
    let mut j = i + 1;
    while j < b.len() && !matches!(b[j], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r') {
        j += 1;
    }
    j
}
