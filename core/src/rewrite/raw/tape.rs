//! Structural reading of validated JSON: one pass over a document that
//! [`Raw::parse`](super::Raw::parse) has validated finds every container's
//! entries (key and value byte ranges), so a walk never reads a level
//! twice. It relies on that validation and need not repeat it; it still
//! never indexes out of bounds, and answers an error (not a panic) should
//! the text not be what validation promised.

use crate::rewrite::error::{malformed, RewriteError};

fn broken() -> RewriteError {
    malformed("JSON structure not as validated")
}

/// One entry of a container: its key's range (quotes included; `(0, 0)`
/// in arrays) and its value's.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Entry {
    pub key: (u32, u32),
    pub value: (u32, u32),
}

/// Every container of one document.
pub(crate) struct Tape {
    /// Each container's entries, contiguous and in order.
    entries: Vec<Entry>,
    /// Each container's first byte and its entries' range in `entries`
    /// (first, count), in the order they open: sorted by first byte.
    containers: Vec<(u32, u32, u32)>,
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
    /// The container opening at byte `from` of `text`: with `whole`, it
    /// and every container inside it; without, its own entries only (the
    /// walk then reads each level it enters, holding only those).
    pub(crate) fn read(text: &str, from: usize, whole: bool) -> Result<Tape, RewriteError> {
        let b = text.as_bytes();
        let pos = |i: usize| u32::try_from(i).map_err(|_| malformed("a JSON body over 4 GiB"));
        let span = if whole {
            b.len() - from.min(b.len())
        } else {
            0
        };
        // Sizes from typical Kubernetes objects, to spare regrowing.
        let mut tape = Tape {
            entries: Vec::with_capacity(span / 24),
            containers: Vec::with_capacity(span / 48 + 1),
        };
        let mut stack: Vec<Open> = Vec::with_capacity(16);
        // Entries of the containers still open (and recorded), innermost
        // last.
        let mut pending: Vec<Entry> = Vec::with_capacity(64);
        // The key of the member whose value comes next, in an object.
        let mut key: Option<(u32, u32)> = None;
        // Whether what is read at the current depth is recorded.
        let records = |depth: usize| whole || depth == 1;
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
                        tape.containers.push((pos(i)?, 0, 0));
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
                        tape.containers[open.index] = (pos(open.start)?, pos(first)?, pos(n)?);
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

    /// The entries of the container whose first byte is at `at`.
    pub(crate) fn container(&self, at: usize) -> Result<&[Entry], RewriteError> {
        let at = u32::try_from(at).map_err(|_| broken())?;
        let c = self
            .containers
            .binary_search_by_key(&at, |(start, _, _)| *start)
            .map_err(|_| broken())?;
        let (_, first, n) = self.containers[c];
        self.entries
            .get(first as usize..(first + n) as usize)
            .ok_or_else(broken)
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

/// True when arrays and objects in `b` nest deeper than `limit`. Text
/// with no more than `limit` brackets can't, and is not read.
pub(crate) fn deeper_than(b: &[u8], limit: usize) -> Result<bool, RewriteError> {
    if memchr::memchr2_iter(b'{', b'[', b).count() <= limit {
        return Ok(false);
    }
    let mut depth = 0usize;
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'"' => {
                i = string_end(b, i)?;
                continue;
            }
            b'{' | b'[' => {
                depth += 1;
                if depth > limit {
                    return Ok(true);
                }
            }
            b'}' | b']' => depth = depth.saturating_sub(1),
            _ => {}
        }
        i += 1;
    }
    Ok(false)
}
