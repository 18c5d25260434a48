//! A fixed set of byte patterns and the cheapest searches for it. "Is any
//! here?" is one Aho-Corasick pass, which skips ahead with its prefilter
//! and stops at the first occurrence. "Where are they all?" must report
//! overlapping occurrences, which the automaton does byte by byte; a
//! configuration usually maps one to three groups, so the name index holds
//! two to seven patterns, and searching them one by one with `memchr`'s
//! vectorized `memmem` costs a few hundred instructions per pattern over a
//! 1 KB body against several thousand for the automaton
//! (docs/performance.md). Beyond [`FEW`] patterns the passes add up, and the
//! automaton finds them all.

use aho_corasick::AhoCorasick;
use memchr::memmem::Finder;

/// Up to this many patterns are searched one by one.
const FEW: usize = 8;

/// Patterns, searched for whole occurrences anywhere in a haystack.
pub struct Needles {
    automaton: AhoCorasick,
    /// One finder per pattern, when there are few.
    each: Option<Vec<Finder<'static>>>,
}

impl Needles {
    /// The search for `patterns`.
    pub fn new<S: AsRef<[u8]>>(patterns: &[S]) -> Needles {
        let few = patterns.len() <= FEW && patterns.iter().all(|p| !p.as_ref().is_empty());
        Needles {
            automaton: AhoCorasick::new(patterns).expect("patterns build an automaton"),
            each: few.then(|| {
                patterns
                    .iter()
                    .map(|p| Finder::new(p.as_ref()).into_owned())
                    .collect()
            }),
        }
    }

    /// True when any pattern occurs in `hay`.
    pub fn is_match(&self, hay: impl AsRef<[u8]>) -> bool {
        self.automaton.is_match(hay.as_ref())
    }

    /// Every occurrence of every pattern, overlapping ones included, as
    /// `(start, end)` byte ranges sorted by start, then end.
    pub fn find_all(&self, hay: &[u8]) -> Vec<(usize, usize)> {
        let mut found = Vec::new();
        match &self.each {
            Some(finders) => {
                for f in finders {
                    let len = f.needle().len();
                    let mut at = 0;
                    while let Some(i) = f.find(&hay[at..]) {
                        found.push((at + i, at + i + len));
                        at += i + 1;
                    }
                }
            }
            None => found.extend(
                self.automaton
                    .find_overlapping_iter(hay)
                    .map(|m| (m.start(), m.end())),
            ),
        }
        found.sort_unstable();
        found
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
        let n = Needles::new(&["aa", "ab", "\\u"]);
        assert!(n.each.is_some());
        assert_eq!(n.find_all(b"aaab\\u"), vec![(0, 2), (1, 3), (2, 4), (4, 6)]);
        assert!(n.is_match("xab"));
        assert!(!n.is_match("a b"));
    }

    #[test]
    fn many_patterns_take_the_automaton_and_answer_the_same() {
        let patterns: Vec<String> = (0..20).map(|i| format!("g{i}.example.io")).collect();
        let n = Needles::new(&patterns);
        assert!(n.each.is_none());
        let hay = b"x g1.example.io g12.example.io g2.example.iog19.example.io";
        let p: Vec<Vec<u8>> = patterns.iter().map(|p| p.as_bytes().to_vec()).collect();
        assert_eq!(n.find_all(hay), naive(&p, hay));
        assert!(n.is_match(hay));
        assert!(!n.is_match("g.example.io"));
    }

    proptest! {
        #[test]
        fn both_searches_find_what_trying_every_position_finds(
            patterns in prop::collection::vec(prop::collection::vec(b'a'..=b'c', 1..4), 1..12),
            hay in prop::collection::vec(b'a'..=b'd', 0..64),
        ) {
            let n = Needles::new(&patterns);
            let want = naive(&patterns, &hay);
            // Duplicate patterns report one occurrence per pattern.
            let mut got = n.find_all(&hay);
            got.dedup();
            prop_assert_eq!(&got, &want);
            prop_assert_eq!(n.is_match(&hay), !want.is_empty());
        }
    }
}
