//! The one search of a JSON body before it is parsed. It answers the
//! three questions the codec asks of every body: where the mapped names
//! (and `\u` escapes, which could hide one) occur, whether a kind
//! `names:` lists occurs (the whole object is then walked), and whether a
//! member whose base64 value hides names occurs.
//!
//! The packed searcher matches on as many leading bytes of its patterns as
//! the shortest has, up to four: a two-byte `\u` beside the long names is
//! cheap while the names are few, and makes every `names:` kind a source
//! of false candidates. So the layout depends on the configuration
//! (measured: docs/performance.md, "The JSON walk alone"):
//! - without `names:`, the names, `\u` and the hiding members are one
//!   search (a hiding member reported only in a body where it found
//!   nothing else);
//! - with `names:`, the names, the kinds and the hiding members are one
//!   search, and `\u` is looked for by a pass of its own only where it
//!   matters: in a body with nothing else found, or with an escape.

use crate::rewrite::names::NameIndex;
use crate::rewrite::needles::Needles;
use memchr::memmem::Finder;

/// The searches answering the pre-check for one configuration.
pub(super) struct Precheck {
    needles: Needles,
    /// Patterns `0..names` of `needles` are the mapped names (and `\u`
    /// when [`Layout::Names`]).
    names: usize,
    /// Patterns `names..kinds` are `names:` kinds; the rest, members
    /// whose value hides names.
    kinds: usize,
    /// The hiding members one by one, for a value inside a body
    /// ([`Self::may_hide`]).
    hiding: Vec<Finder<'static>>,
    layout: Layout,
}

enum Layout {
    /// No `names:` kinds: `\u` is among the names, the hiding members
    /// follow them.
    Names,
    /// Names, kinds and hiding members in `needles`; `\u` apart.
    All { escape: Box<Finder<'static>> },
}

/// What a search of a body found.
pub(super) struct Seen {
    /// Where the mapped names occur (and `\u`, when the layout searches
    /// them together), sorted by start, then end.
    pub found: Vec<(usize, usize)>,
    /// A kind `names:` lists occurs.
    pub kinds: bool,
    /// A member whose base64 value hides names occurs (without `names:`
    /// looked for only when nothing else was found: it matters only then).
    pub hides: bool,
}

impl Precheck {
    /// The searches for `index`'s names and `names:` kinds, and `encoded`
    /// (quoted member names).
    pub fn new(index: &NameIndex, encoded: &[String]) -> Precheck {
        let (mut patterns, names, kinds) = index.names_and_kinds();
        let hiding = encoded
            .iter()
            .map(|m| Finder::new(m.as_bytes()).into_owned())
            .collect();
        if kinds == 0 {
            // The hiding members too: a second pass over a body with no
            // name cost more than their few false candidates in this one.
            patterns.push("\\u");
            patterns.extend(encoded.iter().map(String::as_str));
            return Precheck {
                needles: Needles::new(&patterns),
                names: names + 1,
                kinds: names + 1,
                hiding,
                layout: Layout::Names,
            };
        }
        patterns.extend(encoded.iter().map(String::as_str));
        Precheck {
            needles: Needles::new(&patterns),
            names,
            kinds: names + kinds,
            hiding,
            layout: Layout::All {
                escape: Box::new(Finder::new(b"\\u").into_owned()),
            },
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
        if let Layout::Names = self.layout {
            // Reported only where it matters, as with `names:`.
            seen.hides &= seen.found.is_empty();
        }
        seen
    }

    /// True when `bytes` hold a member whose base64 value could hide a
    /// mapped name from the byte search.
    pub fn may_hide(&self, bytes: &[u8]) -> bool {
        self.hiding.iter().any(|f| f.find(bytes).is_some())
    }

    /// True when `body` holds a `\u` escape that [`scan`](Self::scan) did
    /// not report.
    pub fn has_escape(&self, body: &[u8]) -> bool {
        match &self.layout {
            Layout::Names => false,
            // Most bodies hold no backslash at all: one byte search (about
            // half the instructions of the pair search) answers for them.
            Layout::All { escape } => {
                memchr::memchr(b'\\', body).is_some() && escape.find(body).is_some()
            }
        }
    }

    /// Adds where `\u` occurs in `body` to `found` (of [`scan`](Self::scan)),
    /// keeping it sorted, unless the scan reported them already: the walk's
    /// occurrences when the body has escapes.
    pub fn add_escapes(&self, body: &[u8], found: &mut Vec<(usize, usize)>) {
        let Layout::All { escape } = &self.layout else {
            return;
        };
        let before = found.len();
        let mut at = 0;
        while let Some(i) = escape.find(&body[at..]) {
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
        let p = Precheck::new(&index(false), &["\"patch\"".to_owned()]);
        let body = br#"{"kind":"ClusterRole","g":"a.team1.example.com","e":"\u0061"}"#;
        let seen = p.scan(body);
        // `\u` is found with the names.
        assert_eq!(seen.found, vec![(27, 46), (53, 55)]);
        assert!(!seen.kinds && !seen.hides);
        assert!(!p.has_escape(body));
        let mut found = seen.found.clone();
        p.add_escapes(body, &mut found);
        assert_eq!(found, seen.found);
        // The hiding members, in a body where nothing else is found.
        assert!(p.scan(br#"{"patch":"e30="}"#).hides);
        assert!(!p.scan(br#"{"kind":"Role"}"#).hides);
    }
}
