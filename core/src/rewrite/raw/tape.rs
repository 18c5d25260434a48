//! Every container's entries (key and value byte ranges) of a JSON
//! document, so a walk never reads a level twice. Entries are kept in
//! document order, each container's first, then its first child's
//! subtree, and so on: the reader writes each once, as it meets it, and
//! a container's entries are chained by [`Entry::next`] (an entry that is
//! itself a container skips its subtree). Inputs up to
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
/// [`Tape::entries`] (past this entry's subtree).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: (u32, u32),
    pub value: (u32, u32),
    pub next: u32,
}

/// One container: its first byte, its first entry in [`Tape::entries`]
/// and how many it has, and whether a member name of it has an escape
/// (the names are then decoded when it is listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Container {
    pub start: u32,
    pub first: u32,
    pub n: u32,
    pub escaped: bool,
}

/// Every container of one document.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct Tape {
    /// Every entry, in document order; a container's are chained by
    /// [`Entry::next`] from its [`Container::first`].
    pub(crate) entries: Vec<Entry>,
    /// Each container, in the order they open: sorted by first byte.
    pub(super) containers: Vec<Container>,
    /// Whether a string of the document has an escape (set by the
    /// validating reader, for the whole document, recorded or not).
    pub(crate) escapes: bool,
}

const NO_KEY: (u32, u32) = (0, 0);

impl Tape {
    pub(super) fn with_capacity(entries: usize, containers: usize) -> Tape {
        Tape {
            entries: Vec::with_capacity(entries),
            containers: Vec::with_capacity(containers),
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
        let mut tape = Tape::with_capacity(0, 1);
        // Containers open, the one at `from` the first.
        let mut depth = 0usize;
        let mut object = false;
        // The key of the member whose value comes next, in the object.
        let mut key: Option<(u32, u32)> = None;
        // A value of the container that is itself one: where it opened,
        // and its key.
        let mut nested = (0usize, NO_KEY);
        let mut escaped = false;
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
                        tape.containers.push(Container {
                            start: pos(i)?,
                            first: 0,
                            n: 0,
                            escaped: false,
                        });
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
                            let n = pos(tape.entries.len())?;
                            let root = tape.containers.first_mut().ok_or_else(broken)?;
                            root.n = n;
                            root.escaped = object && escaped;
                            return Ok(tape);
                        }
                        1 => {
                            let next = pos(tape.entries.len() + 1)?;
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
                let next = pos(tape.entries.len() + 1)?;
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

    /// [`container`](Self::container), and its index, trying first the one
    /// after container `last` (`usize::MAX`: the first): a walk entering a
    /// value's first container, or the next of a list, finds it at once
    /// instead of by a binary search.
    #[inline]
    pub(crate) fn container_after(
        &self,
        at: usize,
        last: usize,
    ) -> Result<(usize, Container), RewriteError> {
        let at = u32::try_from(at).map_err(|_| broken())?;
        let next = last.wrapping_add(1);
        let i = match self.containers.get(next) {
            Some(c) if c.start == at => next,
            _ => self
                .containers
                .binary_search_by_key(&at, |c| c.start)
                .map_err(|_| broken())?,
        };
        let c = self.containers[i];
        if c.n > 0 && self.entries.len() <= c.first as usize {
            return Err(broken());
        }
        Ok((i, c))
    }

    /// The entries of container `c`, which [`container`](Self::container)
    /// answered, in order.
    pub(crate) fn entries_of(&self, c: Container) -> Chain<'_> {
        Chain {
            entries: &self.entries,
            at: c.first as usize,
            left: c.n as usize,
        }
    }
}

/// A container's entries, following [`Entry::next`]. Should a link not
/// be where the reader put it, the chain ends early rather than index out
/// of bounds.
#[derive(Clone)]
pub(crate) struct Chain<'t> {
    entries: &'t [Entry],
    at: usize,
    left: usize,
}

impl<'t> Iterator for Chain<'t> {
    type Item = &'t Entry;

    #[inline]
    fn next(&mut self) -> Option<&'t Entry> {
        if self.left == 0 {
            return None;
        }
        let e = self.entries.get(self.at)?;
        self.left -= 1;
        self.at = e.next as usize;
        Some(e)
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        (0, Some(self.left))
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
