//! A request path cut at its slashes, one way for the readers of a path
//! ([`RequestInfo`](super::RequestInfo), the URL rename). A plain byte loop
//! per segment: Kubernetes segments are a few bytes long, where
//! `str::split('/')` and `memchr_iter` pay a searcher's set-up for each
//! (callgrind: `RequestInfo::parse` 1.6k instructions a request with
//! `memchr_iter`, 1.3k with this; docs/performance.md, "Request handling").

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
        match rest.iter().position(|&b| b == b'/') {
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
