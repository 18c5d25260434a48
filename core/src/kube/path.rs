//! A request path cut at its slashes, one way for the readers of a path
//! ([`RequestInfo`](super::RequestInfo), the URL rename, the listener's
//! path check). The next slash is found eight bytes at a time in a plain
//! `u64`: Kubernetes segments are a few bytes long, where `str::split('/')`
//! and `memchr_iter` pay a searcher's set-up for each and a byte loop pays
//! per byte (callgrind, docs/performance.md "Request handling":
//! `RequestInfo::parse` 1.6k instructions a request with `memchr_iter`,
//! 1.3k with a byte loop, less with this).

/// The index of the first `/` in `bytes`.
pub fn find_slash(bytes: &[u8]) -> Option<usize> {
    const ONES: u64 = u64::from_le_bytes([0x01; 8]);
    const HIGHS: u64 = u64::from_le_bytes([0x80; 8]);
    const SLASHES: u64 = u64::from_le_bytes([b'/'; 8]);
    let mut words = bytes.chunks_exact(8);
    let mut at = 0;
    for word in words.by_ref() {
        let w = u64::from_le_bytes(word.try_into().expect("eight bytes"));
        // A byte of `x` is zero where `w` holds a slash; the lowest high
        // bit set below marks the first (a borrow only carries upwards).
        let x = w ^ SLASHES;
        let zero = x.wrapping_sub(ONES) & !x & HIGHS;
        if zero != 0 {
            return Some(at + zero.trailing_zeros() as usize / 8);
        }
        at += 8;
    }
    words
        .remainder()
        .iter()
        .position(|&b| b == b'/')
        .map(|i| at + i)
}

/// `path.split('/')`: every piece between slashes, empty ones included.
pub fn split(path: &str) -> Split<'_> {
    Split {
        path,
        next: Some(0),
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
    /// Where the next piece starts; `None` once the last was returned.
    next: Option<usize>,
}

impl<'a> Iterator for Split<'a> {
    type Item = &'a str;

    fn next(&mut self) -> Option<&'a str> {
        let start = self.next?;
        let rest = &self.path.as_bytes()[start..];
        // `/` is ASCII: both ends are character boundaries.
        match find_slash(rest) {
            Some(i) => {
                self.next = Some(start + i + 1);
                Some(&self.path[start..start + i])
            }
            None => {
                self.next = None;
                Some(&self.path[start..])
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_first_slash_is_found_at_any_offset(path in "[/a%é.]{0,40}") {
            proptest::prop_assert_eq!(find_slash(path.as_bytes()), path.find('/'));
        }

        #[test]
        fn split_is_str_split(path in "[/a%é]{0,12}") {
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
