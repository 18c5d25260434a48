//! The one search of a JSON body before it is parsed. It answers the
//! three questions the codec asks of every body at once: where the mapped
//! names (and `\u` escapes) occur, whether a kind `names:` lists occurs
//! (the whole object is then walked), and whether a member whose base64
//! value hides names occurs. One pass of the packed searcher over the
//! body for all of them, not one per question; `\u` is looked for by a
//! pass of its own, as a two-byte pattern beside the others would have the
//! packed searcher match on two bytes of each, not four, and verify many
//! more candidates (measured: docs/performance.md, "The JSON walk alone").

use crate::rewrite::names::NameIndex;
use crate::rewrite::needles::Needles;
use memchr::memmem::Finder;

/// The patterns of every question, in one search.
pub(super) struct Precheck {
    needles: Needles,
    escape: Finder<'static>,
    /// Patterns `0..names` are the mapped names.
    names: usize,
    /// Patterns `names..kinds` are `names:` kinds; the rest, members
    /// whose value hides names.
    kinds: usize,
}

/// What one search of a body found.
pub(super) struct Seen {
    /// Where the mapped names occur, sorted by start, then end.
    pub found: Vec<(usize, usize)>,
    /// A kind `names:` lists occurs.
    pub kinds: bool,
    /// A member whose base64 value hides names occurs.
    pub hides: bool,
}

impl Precheck {
    /// The search for `index`'s names and `names:` kinds, and `encoded`
    /// (quoted member names).
    pub fn new(index: &NameIndex, encoded: &[String]) -> Precheck {
        let (mut patterns, names, kinds) = index.names_and_kinds();
        patterns.extend(encoded.iter().map(String::as_str));
        Precheck {
            needles: Needles::new(&patterns),
            escape: Finder::new(b"\\u").into_owned(),
            names,
            kinds: names + kinds,
        }
    }

    /// Searches `body` once.
    pub fn scan(&self, body: &[u8]) -> Seen {
        let mut seen = Seen {
            found: Vec::new(),
            kinds: false,
            hides: false,
        };
        let sorted = self.needles.each(body, |id, start, end| {
            if id < self.names {
                seen.found.push((start, end));
            } else if id < self.kinds {
                seen.kinds = true;
            } else {
                seen.hides = true;
            }
        });
        if !sorted {
            seen.found.sort_unstable();
        }
        seen
    }

    /// True when `body` holds a `\u` escape, which could hide a name.
    pub fn has_escape(&self, body: &[u8]) -> bool {
        self.escape.find(body).is_some()
    }

    /// Adds where `\u` occurs in `body` to `found` (of [`scan`](Self::scan)),
    /// keeping it sorted: the walk's occurrences when the body has escapes.
    pub fn add_escapes(&self, body: &[u8], found: &mut Vec<(usize, usize)>) {
        let before = found.len();
        let mut at = 0;
        while let Some(i) = self.escape.find(&body[at..]) {
            found.push((at + i, at + i + 2));
            at += i + 2;
        }
        if found.len() > before {
            found.sort_unstable();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use regroup_config::object_names::ObjectNames;
    use regroup_config::{GroupMap, MapRule, Rule};

    /// `a.example.io` renamed, with `names:` for ClusterRoles when `names`.
    fn index(names: bool) -> NameIndex {
        let rules = [("a.example.io", "a.team1.example.com")];
        let map = GroupMap::new(vec![MapRule {
            rule: Rule::Exact {
                from: rules[0].0.into(),
                to: rules[0].1.into(),
            },
            reference_keys: true,
        }])
        .unwrap()
        .with_object_names(
            names.then(|| ObjectNames::derived(&rules, &["ClusterRole".into()], &[]).unwrap()),
        );
        NameIndex::new(&map)
    }

    #[test]
    fn one_search_tells_names_kinds_and_hiding_members_apart() {
        let p = Precheck::new(&index(true), &["\"patch\"".to_owned()]);
        let body =
            br#"{"apiVersion":"a.example.io/v1","kind":"ClusterRole","x":"\u0061","patch":"e30="}"#;
        let seen = p.scan(body);
        let at = |s: &str| {
            let i = body
                .windows(s.len())
                .position(|w| w == s.as_bytes())
                .unwrap();
            (i, i + s.len())
        };
        assert_eq!(seen.found, vec![at("a.example.io")]);
        assert!(seen.kinds);
        assert!(seen.hides);
        assert!(p.has_escape(body));
        let mut found = seen.found;
        p.add_escapes(body, &mut found);
        assert_eq!(found, vec![at("a.example.io"), at("\\u")]);
        let none = p.scan(br#"{"kind":"Role","a":"b.example.io"}"#);
        assert!(none.found.is_empty() && !none.kinds && !none.hides);
        assert!(!p.has_escape(br#"{"a":"\n"}"#));
    }

    #[test]
    fn without_names_no_kind_is_looked_for() {
        let p = Precheck::new(&index(false), &[]);
        let seen = p.scan(br#"{"kind":"ClusterRole","g":"a.team1.example.com"}"#);
        assert_eq!(seen.found.len(), 1);
        assert!(!seen.kinds && !seen.hides);
    }
}
