//! Every container's entries (key and value byte ranges) of a JSON
//! document, so a walk never reads a level twice. Inputs up to
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
/// in arrays) and its value's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Entry {
    pub key: (u32, u32),
    pub value: (u32, u32),
}

/// One container: its first byte, its entries' range in
/// [`Tape::entries`], and whether a member name of it has an escape (the
/// names are then decoded when it is listed).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Container {
    pub start: u32,
    pub first: u32,
    pub n: u32,
    pub escaped: bool,
}

/// Every container of one document.
#[derive(PartialEq, Eq)]
pub(crate) struct Tape {
    /// Each container's entries, contiguous and in order.
    pub(crate) entries: Vec<Entry>,
    /// Each container, in the order they open: sorted by first byte.
    pub(super) containers: Vec<Container>,
    /// Whether a string of the document has an escape (set by the
    /// validating reader, for the whole document, recorded or not).
    pub(crate) escapes: bool,
}

/// A container being read: where it starts, where its entries start in
/// the pending list, and the key it is the value of.
struct Open {
    start: usize,
    object: bool,
    mark: usize,
    key: (u32, u32),
    /// Its place in [`Tape::containers`].
    index: usize,
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
    /// holding only those).
    pub(crate) fn level(text: &str, from: usize) -> Result<Tape, RewriteError> {
        let b = text.as_bytes();
        let pos = |i: usize| u32::try_from(i).map_err(|_| malformed("a JSON body over 4 GiB"));
        let mut tape = Tape::with_capacity(0, 1);
        let mut stack: Vec<Open> = Vec::with_capacity(16);
        // Entries of the containers still open (and recorded), innermost
        // last.
        let mut pending: Vec<Entry> = Vec::with_capacity(64);
        // The key of the member whose value comes next, in an object.
        let mut key: Option<(u32, u32)> = None;
        // Only the container's own level is recorded.
        let records = |depth: usize| depth == 1;
        let mut i = from;
        while i < b.len() {
            match b[i] {
                b' ' | b'\t' | b'\n' | b'\r' | b',' | b':' => i += 1,
                c @ (b'{' | b'[') => {
                    stack.push(Open {
                        start: i,
                        object: c == b'{',
                        mark: pending.len(),
                        key: key.take().unwrap_or(NO_KEY),
                        index: tape.containers.len(),
                    });
                    if records(stack.len()) {
                        tape.containers.push(Container {
                            start: pos(i)?,
                            first: 0,
                            n: 0,
                            escaped: false,
                        });
                    }
                    i += 1;
                }
                b'}' | b']' => {
                    let depth = stack.len();
                    let open = stack.pop().ok_or_else(broken)?;
                    i += 1;
                    if records(depth) {
                        let first = tape.entries.len();
                        tape.entries.extend(pending.drain(open.mark..));
                        let n = tape.entries.len() - first;
                        let escaped = open.object
                            && tape.entries[first..].iter().any(|e| {
                                text.as_bytes()[e.key.0 as usize..e.key.1 as usize].contains(&b'\\')
                            });
                        tape.containers[open.index] = Container {
                            start: pos(open.start)?,
                            first: pos(first)?,
                            n: pos(n)?,
                            escaped,
                        };
                    }
                    if stack.is_empty() {
                        return Ok(tape);
                    }
                    if records(stack.len()) {
                        pending.push(Entry {
                            key: open.key,
                            value: (pos(open.start)?, pos(i)?),
                        });
                    }
                }
                b'"' => {
                    let end = string_end(b, i)?;
                    match stack.last() {
                        Some(o) if o.object && key.is_none() => key = Some((pos(i)?, pos(end)?)),
                        Some(_) => {
                            let k = key.take().unwrap_or(NO_KEY);
                            if records(stack.len()) {
                                pending.push(Entry {
                                    key: k,
                                    value: (pos(i)?, pos(end)?),
                                });
                            }
                        }
                        None => {}
                    }
                    i = end;
                }
                _ => {
                    let end = scalar_end(b, i);
                    let k = key.take().unwrap_or(NO_KEY);
                    if records(stack.len()) {
                        pending.push(Entry {
                            key: k,
                            value: (pos(i)?, pos(end)?),
                        });
                    }
                    i = end;
                }
            }
        }
        if !stack.is_empty() {
            return Err(broken());
        }
        Ok(tape)
    }

    /// The container whose first byte is at `at`.
    pub(crate) fn container(&self, at: usize) -> Result<Container, RewriteError> {
        let at = u32::try_from(at).map_err(|_| broken())?;
        let c = self
            .containers
            .binary_search_by_key(&at, |c| c.start)
            .map_err(|_| broken())?;
        let c = self.containers[c];
        if self.entries.len() < (c.first + c.n) as usize {
            return Err(broken());
        }
        Ok(c)
    }

    /// The entries of container `c`, which [`container`](Self::container)
    /// answered.
    pub(crate) fn entries_of(&self, c: Container) -> &[Entry] {
        &self.entries[c.first as usize..(c.first + c.n) as usize]
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
