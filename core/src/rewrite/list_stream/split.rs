//! Where one element of a list's array ends: depth, strings and escapes
//! only, no parsing (the element is validated whole when it is renamed).
//! Resumable: the state is kept when the buffer ends first.
//!
//! Two scans, one answer. The narrow one goes a run at a time: inside a
//! string to its next quote or backslash (a word test), inside a
//! container to its next quote or bracket. The wide one (AVX2, chosen at
//! run time) classifies 32 bytes at once: the quotes' running parity
//! says which bytes are inside strings, and only the brackets outside
//! them are visited, one bit each, to follow the depth. A block with a
//! backslash, the element's first and last bytes and the buffer's last
//! 31 are left to the narrow scan. The tests compare both on every
//! capture, cut at every chunk size, and on mutated lists.

use crate::rewrite::raw::special;

/// The bytes that change an element's scan inside a container, outside a
/// string: a quote and the brackets.
static NESTING: [bool; 256] = {
    let mut t = [false; 256];
    t[b'"' as usize] = true;
    t[b'{' as usize] = true;
    t[b'}' as usize] = true;
    t[b'[' as usize] = true;
    t[b']' as usize] = true;
    t
};

/// Where a scan stopped inside an element.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) struct State {
    pub depth: usize,
    pub in_string: bool,
    /// The byte before was a backslash inside a string.
    pub escaped: bool,
}

/// One past the last byte of the element being scanned from `*at` in
/// `buf` (a scalar ends before its delimiter), or `None` when the buffer
/// ends first; `*at` and `state` say where the scan stopped.
pub(super) fn element_end(buf: &[u8], at: &mut usize, state: &mut State) -> Option<usize> {
    #[cfg(target_arch = "x86_64")]
    if crate::rewrite::raw::wide_supported() {
        // SAFETY: `wide_supported()` found AVX2 and BMI1.
        return unsafe { wide::element_end(buf, at, state) };
    }
    narrow(buf, at, state, usize::MAX)
}

/// [`element_end`] a run at a time, returning `None` also once a run
/// ends at or past `limit` (the state then says where it is).
pub(super) fn narrow(buf: &[u8], at: &mut usize, state: &mut State, limit: usize) -> Option<usize> {
    let mut i = *at;
    let State {
        mut depth,
        mut in_string,
        mut escaped,
    } = *state;
    let end = loop {
        if i >= limit {
            break None;
        }
        if in_string {
            if escaped {
                if i >= buf.len() {
                    break None;
                }
                escaped = false;
                i += 1;
            }
            // Inline, eight bytes a step: most strings are shorter than
            // `memchr2`'s call and set-up.
            let k = special::<false>(buf, i);
            match buf.get(k) {
                Some(b'\\') => {
                    escaped = true;
                    i = k + 1;
                }
                Some(_) => {
                    in_string = false;
                    i = k + 1;
                    if depth == 0 {
                        break Some(i);
                    }
                }
                None => {
                    i = buf.len();
                    break None;
                }
            }
            continue;
        }
        if depth > 0 {
            match buf
                .get(i..)
                .unwrap_or_default()
                .iter()
                .position(|&c| NESTING[usize::from(c)])
            {
                Some(k) => i += k,
                None => {
                    i = buf.len();
                    break None;
                }
            }
        }
        let Some(&c) = buf.get(i) else {
            break None;
        };
        match c {
            b'"' => in_string = true,
            b'{' | b'[' => depth += 1,
            b',' | b']' if depth == 0 => break Some(i),
            _ if depth == 0 && c.is_ascii_whitespace() => break Some(i),
            b'}' | b']' => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    break Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    };
    *at = i;
    *state = State {
        depth,
        in_string,
        escaped,
    };
    end
}

/// The wide scan, compiled for AVX2 and BMI1 and called only where they
/// were found.
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    use super::{narrow, State};

    /// Bytes a step.
    const BLOCK: usize = 32;

    #[target_feature(enable = "avx2,bmi1")]
    pub(super) fn element_end(buf: &[u8], at: &mut usize, state: &mut State) -> Option<usize> {
        loop {
            let room = *at + BLOCK <= buf.len();
            if room && state.depth > 0 && !state.escaped {
                let m = classify(&buf[*at..*at + BLOCK]);
                if m.backslash == 0 {
                    // Inside a string: an odd number of quotes up to and
                    // including the byte (the opening quote counts in,
                    // the closing one out), or the other way round when
                    // the block starts inside one.
                    let carry = if state.in_string { u32::MAX } else { 0 };
                    let inside = prefix_xor(m.quote) ^ carry;
                    let mut brackets = (m.open | m.close) & !inside;
                    while brackets != 0 {
                        let k = brackets.trailing_zeros();
                        if m.open >> k & 1 == 1 {
                            state.depth += 1;
                        } else {
                            state.depth -= 1;
                            if state.depth == 0 {
                                *at += k as usize + 1;
                                state.in_string = false;
                                return Some(*at);
                            }
                        }
                        brackets &= brackets - 1;
                    }
                    state.in_string = inside >> 31 == 1;
                    *at += BLOCK;
                    continue;
                }
                // Past the backslash and the byte it escapes, narrowly.
                let limit = *at + m.backslash.trailing_zeros() as usize + 2;
                if let Some(end) = narrow(buf, at, state, limit) {
                    return Some(end);
                }
                continue;
            }
            // The element's first byte, just after an escape, or the
            // buffer's end: one run narrowly, then wide again.
            let limit = if room { *at + 1 } else { usize::MAX };
            let end = narrow(buf, at, state, limit);
            if end.is_some() || *at >= buf.len() {
                return end;
            }
        }
    }

    /// One bit a byte of a block.
    struct Masks {
        quote: u32,
        backslash: u32,
        open: u32,
        close: u32,
    }

    #[target_feature(enable = "avx2,bmi1")]
    #[inline]
    fn classify(block: &[u8]) -> Masks {
        if block.len() < BLOCK {
            return Masks {
                quote: 0,
                backslash: u32::MAX,
                open: 0,
                close: 0,
            };
        }
        // SAFETY: 32 bytes are there to read.
        let v = unsafe { _mm256_loadu_si256(block.as_ptr().cast()) };
        let mask = |c: u8, w: __m256i| {
            _mm256_movemask_epi8(_mm256_cmpeq_epi8(w, _mm256_set1_epi8(c as i8))) as u32
        };
        // `{` and `[`, `}` and `]` differ by 0x20 alone.
        let folded = _mm256_or_si256(v, _mm256_set1_epi8(0x20));
        Masks {
            quote: mask(b'"', v),
            backslash: mask(b'\\', v),
            open: mask(b'{', folded),
            close: mask(b'}', folded),
        }
    }

    /// Each bit the parity of the bits up to and including it.
    #[inline(always)]
    fn prefix_xor(mut x: u32) -> u32 {
        x ^= x << 1;
        x ^= x << 2;
        x ^= x << 4;
        x ^= x << 8;
        x ^= x << 16;
        x
    }
}
