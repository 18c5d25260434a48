//! A fixed set of byte patterns and the cheapest searches for it.
//!
//! Both questions, "is any here?" and "where are they all?", are answered
//! by one pass of `aho-corasick`'s packed searcher (Teddy): it looks for
//! the first bytes of every pattern at once, 16 or 32 bytes a step, and
//! verifies the few candidates. It reports leftmost matches without
//! overlaps, so the search for all of them restarts one byte past each
//! occurrence's start and checks every pattern there: every occurrence,
//! overlapping ones included. A configuration maps one to three groups, so
//! the index holds two to seven patterns, the packed searcher's strength.
//! Measured (bench/json_walk_cases.sh, docs/performance.md "The JSON walk alone") against
//! one `memmem` pass per pattern, which read the body once per pattern,
//! and against the automaton's own prefilter, which skips well only when
//! every pattern's first byte is rare in JSON (`wardle`, not
//! `samplecontroller`).
//!
//! Where the packed searcher cannot be built (no SIMD on the target, more
//! patterns than it takes), up to [`FEW`] patterns are searched one by
//! one with `memchr`'s `memmem` and more by the automaton.

use aho_corasick::packed::{self, MatchKind};
use aho_corasick::{AhoCorasick, Span};
use memchr::memmem::Finder;

/// Up to this many patterns are searched one by one when the packed
/// searcher is not available.
const FEW: usize = 8;

/// A pattern and its index in the caller's list.
type Tagged = (Vec<u8>, usize);

/// How a [`Needles`] searches.
enum Search {
    /// One packed pass; at each occurrence's start, the pattern found and
    /// those prefix-related to it are checked.
    Packed {
        searcher: packed::Searcher,
        /// By pattern index: the patterns that can match where it does
        /// (itself, and those it is a prefix of or that are a prefix of
        /// it), shortest first, each with its index in the caller's list.
        related: Vec<Box<[Tagged]>>,
    },
    /// One `memmem` pass per pattern.
    Each(Vec<Finder<'static>>),
    /// The automaton, for many patterns (built only then: a few KB per
    /// search the others do not need).
    Automaton(AhoCorasick),
}

/// Patterns, searched for whole occurrences anywhere in a haystack.
pub struct Needles {
    search: Search,
}

impl Needles {
    /// The search for `patterns`.
    pub fn new<S: AsRef<[u8]>>(patterns: &[S]) -> Needles {
        Needles::build(patterns, true)
    }

    /// The search for `patterns`, the packed searcher only when `packed`
    /// (the tests hold the other searches to the same answers).
    fn build<S: AsRef<[u8]>>(patterns: &[S], packed: bool) -> Needles {
        let nonempty = patterns.iter().all(|p| !p.as_ref().is_empty());
        let packed = (packed && nonempty)
            .then(|| {
                packed::Config::new()
                    .match_kind(MatchKind::LeftmostFirst)
                    .builder()
                    .extend(patterns)
                    .build()
            })
            .flatten();
        let search = match packed {
            Some(searcher) => {
                let bytes: Vec<&[u8]> = patterns.iter().map(AsRef::as_ref).collect();
                let related = bytes
                    .iter()
                    .map(|p| {
                        // Two patterns match at one start only when one is
                        // a prefix of the other.
                        let mut group: Vec<Tagged> = bytes
                            .iter()
                            .enumerate()
                            .filter(|(_, q)| p.starts_with(q) || q.starts_with(p))
                            .map(|(j, q)| (q.to_vec(), j))
                            .collect();
                        // Shortest first: the occurrences of one start
                        // come out sorted by end.
                        group.sort_by_key(|(q, _)| q.len());
                        group.into_boxed_slice()
                    })
                    .collect();
                Search::Packed { searcher, related }
            }
            None if nonempty && patterns.len() <= FEW => Search::Each(
                patterns
                    .iter()
                    .map(|p| Finder::new(p.as_ref()).into_owned())
                    .collect(),
            ),
            None => {
                Search::Automaton(AhoCorasick::new(patterns).expect("patterns build an automaton"))
            }
        };
        Needles { search }
    }

    /// True when any pattern occurs in `hay`.
    pub fn is_match(&self, hay: impl AsRef<[u8]>) -> bool {
        let hay = hay.as_ref();
        match &self.search {
            Search::Packed { searcher, .. } => searcher.find(hay).is_some(),
            Search::Each(finders) => finders.iter().any(|f| f.find(hay).is_some()),
            Search::Automaton(automaton) => automaton.is_match(hay),
        }
    }

    /// Every occurrence of every pattern, overlapping ones included, as
    /// `(start, end)` byte ranges sorted by start, then end.
    pub fn find_all(&self, hay: &[u8]) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        if !self.each(hay, |_, start, end| found.push((start, end))) {
            found.sort_unstable();
        }
        found
    }

    /// Calls `f(pattern, start, end)` for every occurrence of every
    /// pattern (`pattern`: its index in the list the search was built
    /// from), overlapping ones included. True when they came in order of
    /// start, then end (the packed search's order); otherwise the caller
    /// sorts what it keeps.
    pub fn each(&self, hay: &[u8], mut f: impl FnMut(usize, usize, usize)) -> bool {
        match &self.search {
            Search::Packed { searcher, related } => {
                let mut at = 0;
                while let Some(m) = searcher.find_in(hay, Span::from(at..hay.len())) {
                    let (start, found) = (m.start(), m.pattern().as_usize());
                    // The pattern reported matches; of the others only
                    // those prefix-related to it can match here too
                    // (−0.5k instructions a renamed Foo through the proxy,
                    // where every pattern was compared).
                    for (p, id) in related.get(found).map_or(&[][..], |g| &g[..]) {
                        if *id == found || hay[start..].starts_with(p) {
                            f(*id, start, start + p.len());
                        }
                    }
                    at = start + 1;
                }
                true
            }
            Search::Each(finders) => {
                for (id, finder) in finders.iter().enumerate() {
                    let len = finder.needle().len();
                    let mut at = 0;
                    while let Some(i) = finder.find(&hay[at..]) {
                        f(id, at + i, at + i + len);
                        at += i + 1;
                    }
                }
                false
            }
            Search::Automaton(automaton) => {
                for m in automaton.find_overlapping_iter(hay) {
                    f(m.pattern().as_usize(), m.start(), m.end());
                }
                false
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Every occurrence, by trying each pattern at each position.
    fn naive(patterns: &[Vec<u8>], hay: &[u8]) -> Vec<(usize, usize)> {
        let mut v: Vec<(usize, usize)> = (0..hay.len())
            .flat_map(|s| {
                patterns
                    .iter()
                    .filter(move |p| !p.is_empty() && hay[s..].starts_with(p))
                    .map(move |p| (s, s + p.len()))
            })
            .collect();
        v.sort_unstable();
        v.dedup();
        v
    }

    #[test]
    fn overlapping_and_self_overlapping_occurrences_are_all_found() {
        for packed in [true, false] {
            let n = Needles::build(&["aa", "ab", "\\u"], packed);
            assert_eq!(matches!(n.search, Search::Packed { .. }), packed);
            assert_eq!(n.find_all(b"aaab\\u"), vec![(0, 2), (1, 3), (2, 4), (4, 6)]);
            assert!(n.is_match("xab"));
            assert!(!n.is_match("a b"));
        }
    }

    #[test]
    fn many_patterns_answer_the_same_by_each_search() {
        let patterns: Vec<String> = (0..20).map(|i| format!("g{i}.example.io")).collect();
        let hay = b"x g1.example.io g12.example.io g2.example.iog19.example.io and some more bytes";
        let p: Vec<Vec<u8>> = patterns.iter().map(|p| p.as_bytes().to_vec()).collect();
        for packed in [true, false] {
            let n = Needles::build(&patterns, packed);
            let want = if packed { "packed" } else { "automaton" };
            let got = match n.search {
                Search::Packed { .. } => "packed",
                Search::Each(_) => "each",
                Search::Automaton(_) => "automaton",
            };
            assert_eq!(got, want);
            assert_eq!(n.find_all(hay), naive(&p, hay));
            assert!(n.is_match(hay));
            assert!(!n.is_match("g.example.io"));
        }
    }

    proptest! {
        #[test]
        // Haystacks short and long: the packed searcher hands spans
        // shorter than its vectors to a slower search of its own.
        fn every_search_finds_what_trying_every_position_finds(
            patterns in prop::collection::vec(prop::collection::vec(b'a'..=b'c', 1..5), 1..12),
            hay in prop::collection::vec(b'a'..=b'f', 0..300),
        ) {
            let want = naive(&patterns, &hay);
            for packed in [true, false] {
                let n = Needles::build(&patterns, packed);
                // Duplicate patterns report one occurrence per pattern.
                let mut got = n.find_all(&hay);
                got.dedup();
                prop_assert_eq!(&got, &want);
                prop_assert_eq!(n.is_match(&hay), !want.is_empty());
                // Each occurrence is told with the pattern that occurs.
                let mut tagged = Vec::new();
                n.each(&hay, |id, start, end| tagged.push((id, start, end)));
                for &(id, start, end) in &tagged {
                    prop_assert_eq!(&hay[start..end], &patterns[id][..]);
                }
                let mut spans: Vec<(usize, usize)> = tagged.iter().map(|&(_, s, e)| (s, e)).collect();
                spans.sort_unstable();
                spans.dedup();
                prop_assert_eq!(&spans, &want);
            }
        }
    }
}
