//! The one search of a JSON body before it is parsed. It answers the
//! three questions the codec asks of every body: where the mapped names
//! (and `\u` escapes, which could hide one) occur, whether a kind
//! `names:` lists occurs (the whole object is then walked), and whether a
//! member whose base64 value hides names occurs.
//!
//! All of them are one pass of the packed searcher. It matches on as many
//! leading bytes of its patterns as the shortest has, up to four, so the
//! two-byte `\u` makes it match on two: more false candidates from the
//! `names:` kinds, but a cheaper step, and no second pass for `\u` or for
//! the hiding members. Measured in docs/performance.md ("Session 36").

use crate::rewrite::names::NameIndex;
use crate::rewrite::needles::Needles;
use memchr::memmem::Finder;

/// The search answering the pre-check for one configuration.
pub(super) struct Precheck {
    /// The mapped names, `\u`, the `names:` kinds, the hiding members.
    needles: Needles,
    /// Patterns `0..names` of `needles` are the mapped names and `\u`.
    names: usize,
    /// Patterns `names..kinds` are `names:` kinds; the rest, members
    /// whose value hides names.
    kinds: usize,
    /// The hiding members one by one, for a value inside a body
    /// ([`Self::may_hide`]).
    hiding: Vec<Finder<'static>>,
}

/// What a search of a body found.
pub(super) struct Seen {
    /// Where the mapped names and `\u` occur, sorted by start, then end.
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
        patterns.insert(names, "\\u");
        patterns.extend(encoded.iter().map(String::as_str));
        Precheck {
            needles: Needles::new(&patterns),
            names: names + 1,
            kinds: names + 1 + kinds,
            hiding: encoded
                .iter()
                .map(|m| Finder::new(m.as_bytes()).into_owned())
                .collect(),
        }
    }

    /// Searches `body`.
    pub fn scan(&self, body: &[u8]) -> Seen {
        let mut seen = Seen {
            found: Vec::new(),
            kinds: false,
            hides: false,
        };
        let sorted = self.needles.each(body, |id, start, end| {
            if id < self.names {
                if seen.found.capacity() == 0 {
                    // The thread's kept list, only once a name is found:
                    // a body without one never looks.
                    seen.found = crate::rewrite::raw::spare::occurrences();
                }
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

    /// True when `bytes` hold a member whose base64 value could hide a
    /// mapped name from the byte search.
    pub fn may_hide(&self, bytes: &[u8]) -> bool {
        self.hiding.iter().any(|f| f.find(bytes).is_some())
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
    fn one_search_tells_names_escapes_kinds_and_hiding_members_apart() {
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
        assert_eq!(seen.found, vec![at("a.example.io"), at("\\u")]);
        assert!(seen.kinds);
        assert!(seen.hides);
        let none = p.scan(br#"{"kind":"Role","a":"b.example.io","e":"\n"}"#);
        assert!(none.found.is_empty() && !none.kinds && !none.hides);
        // Each question alone.
        assert_eq!(p.scan(br#"{"e":"\u0061"}"#).found, vec![(6, 8)]);
        assert!(p.scan(br#"{"kind":"ClusterRole"}"#).kinds);
        assert!(p.scan(br#"{"patch":"e30="}"#).hides);
    }

    #[test]
    fn without_names_no_kind_is_looked_for() {
        let p = Precheck::new(&index(false), &["\"patch\"".to_owned()]);
        let body = br#"{"kind":"ClusterRole","g":"a.team1.example.com","e":"\u0061"}"#;
        let seen = p.scan(body);
        assert_eq!(seen.found, vec![(27, 46), (53, 55)]);
        assert!(!seen.kinds && !seen.hides);
        assert!(p.scan(br#"{"patch":"e30="}"#).hides);
        assert!(!p.scan(br#"{"kind":"Role"}"#).hides);
    }
}
