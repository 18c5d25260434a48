//! The validating structural reader: one pass over a JSON text that
//! checks it against the grammar serde_json accepts (into `IgnoredAny`)
//! and, when asked, records every container's entries into a [`Tape`] as
//! it goes, so the body is read once, not once to validate and once more
//! for structure.
//!
//! serde_json stays the reference: the differential tests (unit,
//! proptest, the `json` fuzz target and its corpus replayed on stable)
//! check that this reader accepts exactly what serde_json accepts, nesting
//! within [`MAX_DEPTH`] aside. When it refuses, serde_json is asked for the
//! message, so the `Status` a client sees says what it said before.
//!
//! The grammar, as serde_json's `ignore_value` reads it: whitespace is
//! space, tab, LF, CR; strings hold no byte below 0x20 and only the
//! escapes `\" \\ \/ \b \f \n \r \t \uXXXX` (four hex digits; surrogates
//! are not paired when a value is only validated, so a lone one passes);
//! numbers are `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`; `true`,
//! `false`, `null`; no trailing comma; nothing after the value but
//! whitespace.

use std::cell::Cell;

use super::tape::{Entry, Tape, ESCAPED_KEYS};
use super::MAX_DEPTH;
use crate::rewrite::error::{malformed, RewriteError};

/// A container being read: whether it is an object, and its own entry
/// (in its parent).
struct Open {
    object: bool,
    entry: u32,
    /// Whether one of its member names has an escape.
    escaped: bool,
}

/// [`Open::entry`] of the outermost container, which is no entry.
const NO_ENTRY: u32 = u32::MAX;

const NO_KEY: (u32, u32) = (0, 0);

/// The text is refused; [`refusal`] finds the message.
struct Refused;

/// Validates `text` as serde_json would (and nesting within
/// [`MAX_DEPTH`]); with `RECORD`, returns the tape of every container,
/// otherwise an empty one (large inputs, read level by level later, so
/// memory follows what the walk visits).
pub(crate) fn read<const RECORD: bool>(text: &str) -> Result<Tape, RewriteError> {
    let mut tape = Tape::with_capacity(0);
    read_into::<RECORD>(text, &mut tape)?;
    Ok(tape)
}

/// [`read`] into `tape`, whatever it held before, reusing its buffers.
pub(crate) fn read_into<const RECORD: bool>(
    text: &str,
    tape: &mut Tape,
) -> Result<(), RewriteError> {
    // Positions are `u32`, and entries (fewer than the bytes) stay below
    // the flag bit of `Entry::next`.
    if RECORD && text.len() >= ESCAPED_KEYS as usize {
        return Err(malformed("a JSON body over 2 GiB"));
    }
    let b = text.as_bytes();
    let mut stack = STACK.take();
    #[cfg(target_arch = "x86_64")]
    let read = if wide::supported() {
        // SAFETY: `supported()` found AVX2.
        unsafe { wide::scan::<RECORD>(b, tape, &mut stack) }
    } else {
        scan::<RECORD, false>(b, tape, &mut stack)
    };
    #[cfg(not(target_arch = "x86_64"))]
    let read = scan::<RECORD, false>(b, tape, &mut stack);
    STACK.set(stack);
    read.or_else(|Refused| refusal(text))
}

thread_local! {
    /// The reader's stack of open containers, kept for the thread's next
    /// read (at most [`MAX_DEPTH`] deep, a few KB): one allocation less
    /// a body.
    static STACK: Cell<Vec<Open>> = const { Cell::new(Vec::new()) };
}

/// Whether [`read`] takes the wide reader on this CPU (the list split
/// asks too).
#[inline]
pub(crate) fn wide_supported() -> bool {
    #[cfg(target_arch = "x86_64")]
    return wide::supported();
    #[cfg(not(target_arch = "x86_64"))]
    return false;
}

/// [`read`] a word at a time, as on a CPU without AVX2: the reference the
/// wide reader is tested against.
pub(crate) fn read_narrow<const RECORD: bool>(text: &str) -> Result<Tape, RewriteError> {
    let mut tape = Tape::with_capacity(0);
    scan::<RECORD, false>(text.as_bytes(), &mut tape, &mut Vec::new())
        .or_else(|Refused| refusal(text))?;
    Ok(tape)
}

/// serde_json's reason for refusing `text`; the depth message when it
/// accepts (the only thing this reader refuses that serde_json does not).
fn refusal(text: &str) -> Result<(), RewriteError> {
    serde_json::from_str::<serde::de::IgnoredAny>(text).map_err(malformed)?;
    Err(malformed(format!("nested deeper than {MAX_DEPTH} levels")))
}

#[inline(always)]
fn skip_ws(b: &[u8], i: usize) -> usize {
    // The apiserver writes no whitespace: one compare answers most calls.
    if b.get(i).is_none_or(|c| *c > b' ') {
        return i;
    }
    skip_ws_from(b, i)
}

/// [`skip_ws`] past whitespace found: out of line, so the reader's hot
/// loop keeps its registers (−66 instructions a rename of the Deployment).
#[cold]
#[inline(never)]
fn skip_ws_from(b: &[u8], mut i: usize) -> usize {
    while let Some(c) = b.get(i) {
        if !matches!(c, b' ' | b'\n' | b'\t' | b'\r') {
            break;
        }
        i += 1;
    }
    i
}

/// The first byte at or after `b[i]` that is not whitespace, and where it
/// is (`None` and `b.len()` at the end), read once.
#[inline(always)]
fn peek(b: &[u8], i: usize) -> (usize, Option<u8>) {
    match b.get(i) {
        Some(&c) if c > b' ' => (i, Some(c)),
        None => (i, None),
        Some(_) => {
            let j = skip_ws(b, i);
            (j, b.get(j).copied())
        }
    }
}

/// The reader; `WIDE` finds strings' ends 32 bytes at a time (AVX2: only
/// inside [`wide::scan`]), otherwise eight.
#[inline(always)]
fn scan<const RECORD: bool, const WIDE: bool>(
    b: &[u8],
    tape: &mut Tape,
    stack: &mut Vec<Open>,
) -> Result<(), Refused> {
    tape.entries.clear();
    tape.root_start = u32::MAX;
    tape.root_escaped = false;
    if RECORD {
        // Sizes from typical Kubernetes objects, to spare regrowing: the
        // captured bodies have a median of 21 bytes an entry (p10 19).
        tape.entries.reserve(b.len() / 16);
    }
    stack.clear();
    stack.reserve(16);
    // Whether any string has an escape (which could hide a name from a
    // byte search).
    let mut escapes = false;
    let mut i = skip_ws(b, 0);
    // A document that is a scalar or an empty container has no entry;
    // otherwise every value read below is in a container.
    let opens = match b.get(i) {
        Some(b'{') => b.get(i + 1) != Some(&b'}'),
        Some(b'[') => b.get(i + 1) != Some(&b']'),
        _ => false,
    };
    if !opens {
        let end = match b.get(i) {
            Some(b'{' | b'[') => i + 2,
            _ => scalar_end::<WIDE>(b, i, &mut escapes)?,
        };
        return document_end(b, end, tape, escapes);
    }
    // Whether the innermost open container is an object (kept here, not
    // read off the stack, after every value).
    let mut object = false;
    // The key of the member whose value comes next.
    let mut key = NO_KEY;
    'value: loop {
        // A value (or whitespace before it) starts at `i`.
        let start = i;
        let end = match b.get(i) {
            Some(c @ (b'{' | b'[')) => {
                if stack.len() >= MAX_DEPTH {
                    // serde_json accepts any depth; `refusal` says why.
                    return Err(Refused);
                }
                let opened = *c == b'{';
                let close = if opened { b'}' } else { b']' };
                if b.get(i + 1) == Some(&close) {
                    // Empty, as half a managed field's objects are: only
                    // its entry, below, as a scalar's, without the stack
                    // (the Deployment: −1.4k instructions), and no
                    // container: the walk knows `{}` and `[]` by their
                    // text (`Walk::container`).
                    Some(i + 2)
                } else {
                    // Its own entry in its parent, written now (document
                    // order) and completed when it closes; its entries
                    // follow it. The outermost container is no entry.
                    let entry = if stack.is_empty() {
                        if RECORD {
                            tape.root_start = i as u32;
                        }
                        NO_ENTRY
                    } else if RECORD {
                        tape.entries.push(Entry {
                            key,
                            value: (i as u32, 0),
                            next: 0,
                        });
                        tape.entries.len() as u32 - 1
                    } else {
                        NO_ENTRY
                    };
                    stack.push(Open {
                        object: opened,
                        entry,
                        escaped: false,
                    });
                    object = opened;
                    key = NO_KEY;
                    i = skip_ws(b, i + 1);
                    if b.get(i) == Some(&close) {
                        // Empty with whitespace inside: closed below, as any
                        // container.
                        None
                    } else {
                        if object {
                            i = member_key::<WIDE>(b, i, &mut key, stack, &mut escapes)?;
                        }
                        continue 'value;
                    }
                }
            }
            // Whitespace before a value is skipped here, where the byte is
            // read anyway (the apiserver writes none).
            Some(b' ' | b'\t' | b'\n' | b'\r') => {
                i = skip_ws(b, i);
                continue 'value;
            }
            _ => Some(scalar_end::<WIDE>(b, i, &mut escapes)?),
        };
        // A scalar ends at `end`, or an empty container's closer is at `i`.
        match end {
            Some(end) => {
                if RECORD {
                    let next = tape.entries.len() as u32 + 1;
                    tape.entries.push(Entry {
                        key,
                        value: (start as u32, end as u32),
                        next,
                    });
                }
                i = end;
            }
            None => {
                i = close::<RECORD>(i, stack, tape)?;
                match stack.last() {
                    Some(o) => object = o.object,
                    None => return document_end(b, i, tape, escapes),
                }
            }
        }
        // After a value: a comma and the next one, or closers.
        loop {
            let c;
            (i, c) = peek(b, i);
            // A comma first: most values are followed by one.
            if c == Some(b',') {
                i += 1;
                if object {
                    i = member_key::<WIDE>(b, i, &mut key, stack, &mut escapes)?;
                } else {
                    key = NO_KEY;
                }
                continue 'value;
            }
            if c != Some(if object { b'}' } else { b']' }) {
                return Err(Refused);
            }
            i = close::<RECORD>(i, stack, tape)?;
            match stack.last() {
                Some(o) => object = o.object,
                None => return document_end(b, i, tape, escapes),
            }
        }
    }
}

/// One past the scalar at `b[i]` (a string's escape noted in `escapes`).
#[inline(always)]
fn scalar_end<const WIDE: bool>(b: &[u8], i: usize, escapes: &mut bool) -> Result<usize, Refused> {
    match b.get(i) {
        Some(b'"') => {
            let (end, escaped) = string_end::<WIDE>(b, i)?;
            *escapes |= escaped;
            Ok(end)
        }
        Some(b'-' | b'0'..=b'9') => number_end(b, i),
        Some(b't') => literal_end(b, i, b"true"),
        Some(b'f') => literal_end(b, i, b"false"),
        Some(b'n') => literal_end(b, i, b"null"),
        _ => Err(Refused),
    }
}

/// The document's value ended before `b[i]`: only whitespace may follow.
#[inline(always)]
fn document_end(b: &[u8], i: usize, tape: &mut Tape, escapes: bool) -> Result<(), Refused> {
    if skip_ws(b, i) == b.len() {
        tape.escapes = escapes;
        Ok(())
    } else {
        Err(Refused)
    }
}

/// Closes the innermost container at its closer `b[i]`: its own entry in
/// its parent gets its end, the parent's next entry (its own end) and
/// whether a member name had an escape; the outermost container's escape
/// goes to the tape. Returns one past the closer.
///
/// Out of line: inlined, its loads of the stack and the tape were hoisted
/// into every value's path (a call per container costs less: −334
/// instructions a rename of the Deployment, −147 of the Foo).
#[inline(never)]
fn close<const RECORD: bool>(
    i: usize,
    stack: &mut Vec<Open>,
    tape: &mut Tape,
) -> Result<usize, Refused> {
    let open = stack.pop().ok_or(Refused)?;
    let end = i + 1;
    if RECORD {
        let after = tape.entries.len() as u32;
        match tape.entries.get_mut(open.entry as usize) {
            Some(e) => {
                e.value.1 = end as u32;
                e.next = after | if open.escaped { ESCAPED_KEYS } else { 0 };
            }
            None => tape.root_escaped = open.escaped,
        }
    }
    Ok(end)
}

/// Reads `"key" :` at `b[i]` (or after whitespace there), setting `key`
/// to its range and noting an escape in it on the innermost open object;
/// returns the byte after the colon (the value, or whitespace before it).
#[inline(always)]
fn member_key<const WIDE: bool>(
    b: &[u8],
    i: usize,
    key: &mut (u32, u32),
    stack: &mut [Open],
    escapes: &mut bool,
) -> Result<usize, Refused> {
    // The quote first: whitespace before it is rare.
    let i = if b.get(i) == Some(&b'"') {
        i
    } else {
        let i = skip_ws(b, i);
        if b.get(i) != Some(&b'"') {
            return Err(Refused);
        }
        i
    };
    let (end, escaped) = string_end::<WIDE>(b, i)?;
    if escaped {
        *escapes = true;
        if let Some(o) = stack.last_mut() {
            o.escaped = true;
        }
    }
    *key = (i as u32, end as u32);
    let (colon, c) = peek(b, end);
    if c != Some(b':') {
        return Err(Refused);
    }
    // Whitespace before the value is the value's reader's to skip.
    Ok(colon + 1)
}

/// One past the closing quote of the string opening at `b[i]`, its
/// escapes and bytes checked, and whether it has an escape. Its end and
/// the check for raw control bytes are one pass: [`special`] (or
/// [`wide::special`]) finds the first quote, backslash or control byte.
#[inline(always)]
fn string_end<const WIDE: bool>(b: &[u8], i: usize) -> Result<(usize, bool), Refused> {
    let find = |j| {
        if WIDE {
            wide::special(b, j)
        } else {
            special::<true>(b, j)
        }
    };
    let mut j = find(i + 1);
    // Most strings have no escape: the first byte found is their end.
    if b.get(j) == Some(&b'"') {
        return Ok((j + 1, false));
    }
    let mut escaped = false;
    loop {
        match *b.get(j).ok_or(Refused)? {
            b'"' => return Ok((j + 1, escaped)),
            b'\\' => {
                escaped = true;
                j = match b.get(j + 1) {
                    Some(b'"' | b'\\' | b'/' | b'b' | b'f' | b'n' | b'r' | b't') => j + 2,
                    Some(b'u') => match b.get(j + 2..j + 6) {
                        Some(hex) if hex.iter().all(u8::is_ascii_hexdigit) => j + 6,
                        _ => return Err(Refused),
                    },
                    _ => return Err(Refused),
                };
            }
            c if c < 0x20 => return Err(Refused),
            _ => j += 1,
        }
        j = find(j);
    }
}

/// The first quote, backslash or (with `CONTROL`) control byte at or
/// after `b[j]`, or `b.len()`: eight bytes at a time, then byte by byte
/// up to the end. The reader's strings take it with control bytes; the
/// list split (`list_stream.rs`) without.
///
/// One word test flags all three: the "has a zero byte" trick,
/// `(x - 0x01..01) & !x & 0x80..80`, flags the bytes of `x` that are zero
/// (below 0x20 with `0x20..20` subtracted); a borrow can flag a byte only
/// above one truly flagged, so the lowest flag is exact. Measured against
/// `memchr2` per string plus a vectorized control-byte check: 39,701
/// against 44,040 instructions per rename of the Foo (docs/performance.md,
/// "Renaming"); in the list split against `memchr2`, 345.0M against 332.7M
/// for regroup serving a 10 MiB list.
#[inline(always)]
pub(crate) fn special<const CONTROL: bool>(b: &[u8], mut j: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = b.get(j..j + 8) {
        let Ok(word) = chunk.try_into() else { break };
        let v = u64::from_le_bytes(word);
        let q = v ^ (ONES * u64::from(b'"'));
        let s = v ^ (ONES * u64::from(b'\\'));
        let control = if CONTROL {
            v.wrapping_sub(ONES * 0x20) & !v
        } else {
            0
        };
        let m = ((q.wrapping_sub(ONES) & !q) | (s.wrapping_sub(ONES) & !s) | control) & HIGH;
        if m != 0 {
            return j + (m.trailing_zeros() / 8) as usize;
        }
        j += 8;
    }
    while let Some(&c) = b.get(j) {
        if c == b'"' || c == b'\\' || (CONTROL && c < 0x20) {
            break;
        }
        j += 1;
    }
    j
}

/// The reader compiled for AVX2 and BMI1, where a string's end (its first
/// quote, backslash or control byte) is found 32 bytes a step, most
/// strings in one: a rename of the Foo 26,600 → 22,765 instructions, of
/// the Deployment 47,752 → 39,008 (`bench/json_walk_cases.sh`). Chosen at
/// run time; any other CPU reads eight bytes a step.
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use super::{Open, Refused, Tape};

    pub(super) fn supported() -> bool {
        std::is_x86_feature_detected!("avx2") && std::is_x86_feature_detected!("bmi1")
    }

    #[target_feature(enable = "avx2,bmi1")]
    pub(super) fn scan<const RECORD: bool>(
        b: &[u8],
        tape: &mut Tape,
        stack: &mut Vec<Open>,
    ) -> Result<(), Refused> {
        super::scan::<RECORD, true>(b, tape, stack)
    }

    /// [`super::special`] 32 bytes at a time while 32 remain. Called only
    /// from [`scan`], so only where AVX2 was found.
    #[inline(always)]
    pub(super) fn special(b: &[u8], mut j: usize) -> usize {
        while let Some(chunk) = b.get(j..j + 32) {
            // SAFETY: reached only through `scan`, which runs where
            // `supported()` found AVX2 and BMI1.
            let m = unsafe { specials(chunk) };
            if m != 0 {
                return j + m.trailing_zeros() as usize;
            }
            j += 32;
        }
        super::special::<true>(b, j)
    }

    /// A bit for each quote, backslash or byte below 0x20 of `chunk`'s
    /// first 32 bytes (it has at least 32).
    #[target_feature(enable = "avx2,bmi1")]
    #[inline]
    fn specials(chunk: &[u8]) -> u32 {
        if chunk.len() < 32 {
            return 0;
        }
        // SAFETY: 32 bytes are there to read.
        let v = unsafe { _mm256_loadu_si256(chunk.as_ptr().cast()) };
        let low = _mm256_set1_epi8(0x1f);
        let hits = _mm256_or_si256(
            _mm256_or_si256(
                _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'"' as i8)),
                _mm256_cmpeq_epi8(v, _mm256_set1_epi8(b'\\' as i8)),
            ),
            // Below 0x20: the unsigned maximum with 0x1f is 0x1f.
            _mm256_cmpeq_epi8(_mm256_max_epu8(v, low), low),
        );
        _mm256_movemask_epi8(hits) as u32
    }
}

/// One past the number at `b[i]`: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`.
#[inline(always)]
fn number_end(b: &[u8], i: usize) -> Result<usize, Refused> {
    let digits = |mut j: usize| {
        while b.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
        j
    };
    let mut j = i + usize::from(b[i] == b'-');
    match b.get(j) {
        Some(b'0') => j += 1,
        Some(b'1'..=b'9') => j = digits(j + 1),
        _ => return Err(Refused),
    }
    if b.get(j) == Some(&b'.') {
        let k = digits(j + 1);
        if k == j + 1 {
            return Err(Refused);
        }
        j = k;
    }
    if matches!(b.get(j), Some(b'e' | b'E')) {
        j += 1;
        if matches!(b.get(j), Some(b'+' | b'-')) {
            j += 1;
        }
        let k = digits(j);
        if k == j {
            return Err(Refused);
        }
        j = k;
    }
    Ok(j)
}

/// One past `word` at `b[i]`.
#[inline]
fn literal_end(b: &[u8], i: usize, word: &[u8]) -> Result<usize, Refused> {
    let end = i + word.len();
    if b.get(i..end) == Some(word) {
        Ok(end)
    } else {
        Err(Refused)
    }
}
