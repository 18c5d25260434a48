//! A request path cut at its slashes, one way for the readers of a path
//! ([`RequestInfo`](super::RequestInfo), the URL rename, the listener's
//! path check). Slashes are found eight bytes at a time in a plain `u64`,
//! and each word is read once: its slashes are kept as a mask and handed
//! out piece by piece. Kubernetes segments are a few bytes long, where
//! `str::split('/')` and `memchr_iter` pay a searcher's set-up for each,
//! a byte loop pays per byte, and a search per piece reads again the word
//! the last piece ended in (callgrind, docs/performance.md "Request
//! handling" and "One reading of a path's slashes").

const LOWS: u64 = u64::from_le_bytes([0x7f; 8]);
const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);

/// The high bit of each byte of `w` that equals `c`, exactly (no carry
/// between bytes: every byte is judged on its own).
pub fn bytes_equal(w: u64, c: u8) -> u64 {
    let x = w ^ u64::from_le_bytes([c; 8]);
    !(((x & LOWS) + LOWS) | x) & HIGHS
}

/// The eight bytes of `bytes` from `at`, little-endian; past the end,
/// zero bytes (no `/`, `%` or `.`).
pub fn word_at(bytes: &[u8], at: usize) -> u64 {
    match bytes.get(at..at + 8) {
        Some(w) => u64::from_le_bytes(w.try_into().expect("eight bytes")),
        None => {
            let mut tail = [0u8; 8];
            let rest = bytes.get(at..).unwrap_or_default();
            tail[..rest.len()].copy_from_slice(rest);
            u64::from_le_bytes(tail)
        }
    }
}

/// `path.split('/')`: every piece between slashes, empty ones included.
pub fn split(path: &str) -> Split<'_> {
    Split {
        path,
        start: 0,
        word: 0,
        slashes: bytes_equal(word_at(path.as_bytes(), 0), b'/'),
        done: false,
    }
}

/// The non-empty pieces between slashes (`path.split('/')` without the
/// empty ones).
pub fn segments(path: &str) -> impl Iterator<Item = &str> {
    split(path).filter(|s| !s.is_empty())
}

/// See [`split`].
#[derive(Clone, Debug)]
pub struct Split<'a> {
    path: &'a str,
    /// Where the next piece starts.
    start: usize,
    /// Where the word `slashes` was read from starts.
    word: usize,
    /// That word's slashes not handed out yet: a high bit a slash.
    slashes: u64,
    /// The last piece was returned.
    done: bool,
}

impl<'a> Iterator for Split<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        if self.done {
            return None;
        }
        let bytes = self.path.as_bytes();
        while self.slashes == 0 {
            self.word += 8;
            if self.word >= bytes.len() {
                self.done = true;
                return Some(&self.path[self.start..]);
            }
            self.slashes = bytes_equal(word_at(bytes, self.word), b'/');
        }
        let at = self.word + self.slashes.trailing_zeros() as usize / 8;
        self.slashes &= self.slashes - 1;
        // `/` is ASCII: both ends are character boundaries.
        let piece = &self.path[self.start..at];
        self.start = at + 1;
        Some(piece)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn bytes_equal_marks_exactly_the_bytes_equal(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 8), c in proptest::prelude::any::<u8>()) {
            let w = u64::from_le_bytes(bytes.clone().try_into().unwrap());
            let want = bytes.iter().enumerate().fold(0u64, |m, (i, &b)| if b == c { m | 0x80 << (8 * i) } else { m });
            proptest::prop_assert_eq!(bytes_equal(w, c), want);
        }

        #[test]
        fn split_is_str_split(path in "[/a%é]{0,40}") {
            let want: Vec<&str> = path.split('/').collect();
            proptest::prop_assert_eq!(split(&path).collect::<Vec<_>>(), want);
        }

        #[test]
        fn segments_are_the_non_empty_pieces_between_slashes(path in "[/a%é]{0,12}") {
            let want: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
            proptest::prop_assert_eq!(segments(&path).collect::<Vec<_>>(), want);
        }
    }
}
