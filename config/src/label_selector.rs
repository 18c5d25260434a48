//! Label selectors as strings (`labelSelector=` of list, watch and
//! deletecollection; a SubjectAccessReview's `rawSelector`; a `metadata:`
//! exclusion's `selector`): parsed with each requirement's byte ranges, so
//! the metadata rules (metadata/selector.rs) rename keys and values in place.
//!
//! The grammar is kube-apiserver's (its `labels.Parse`): requirements
//! separated by `,`; each is `key`, `!key`, `key=value`, `key==value`,
//! `key!=value`, `key in (v1,v2)`, `key notin (v1,v2)`, `key>n`, `key<n`,
//! with spaces allowed between tokens. Values of `>` and `<` are numbers,
//! never renamed.

/// Why a label selector can't be parsed (or, empty, is refused where it
/// would select every object).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum LabelSelectorError {
    /// Empty where a selector is written to select some objects.
    #[error("an empty label selector selects every object; omit it instead")]
    Empty,
    /// Something else than the grammar wants, at a byte.
    #[error("label selector `{selector}`: {expected} at byte {at}")]
    Unexpected {
        /// The selector as written.
        selector: String,
        /// What the grammar wants there (`a key expected`).
        expected: &'static str,
        /// Where, in bytes.
        at: usize,
    },
}

/// One token and where it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok<'a> {
    Ident(&'a str),
    Op(&'a str),
    Open,
    Close,
    Comma,
    Not,
}

fn is_special(c: u8) -> bool {
    matches!(c, b'!' | b'=' | b'(' | b')' | b',' | b'<' | b'>') || c.is_ascii_whitespace()
}

fn tokens(s: &str) -> Vec<(Tok<'_>, usize, usize)> {
    let b = s.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        let start = i;
        let tok = match c {
            _ if c.is_ascii_whitespace() => {
                i += 1;
                continue;
            }
            b'(' => {
                i += 1;
                Tok::Open
            }
            b')' => {
                i += 1;
                Tok::Close
            }
            b',' => {
                i += 1;
                Tok::Comma
            }
            b'!' if b.get(i + 1) == Some(&b'=') => {
                i += 2;
                Tok::Op("!=")
            }
            b'!' => {
                i += 1;
                Tok::Not
            }
            b'=' if b.get(i + 1) == Some(&b'=') => {
                i += 2;
                Tok::Op("==")
            }
            b'=' => {
                i += 1;
                Tok::Op("=")
            }
            b'<' | b'>' => {
                i += 1;
                Tok::Op(&s[start..i])
            }
            _ => {
                while i < b.len() && !is_special(b[i]) {
                    i += 1;
                }
                Tok::Ident(&s[start..i])
            }
        };
        out.push((tok, start, i));
    }
    out
}

/// The parts of one requirement that name something renamable.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Requirement {
    /// The key's byte range.
    pub(crate) key: (usize, usize),
    /// The operator: `!` (absent), `` (present), `=`, `==`, `!=`, `in`,
    /// `notin`, `<`, `>`.
    pub(crate) op: &'static str,
    /// The values' byte ranges (empty for existence operators).
    pub(crate) values: Vec<(usize, usize)>,
}

pub(crate) fn parse(s: &str) -> Result<Vec<Requirement>, LabelSelectorError> {
    let toks = tokens(s);
    let mut reqs = Vec::new();
    let mut i = 0;
    let err = |expected: &'static str, at: usize| LabelSelectorError::Unexpected {
        selector: s.to_owned(),
        expected,
        at,
    };
    let at = |i: usize| toks.get(i).map_or(s.len(), |t| t.1);
    loop {
        let negated = matches!(toks.get(i), Some((Tok::Not, ..)));
        if negated {
            i += 1;
        }
        let key = match toks.get(i) {
            Some((Tok::Ident(_), a, b)) => (*a, *b),
            _ => return Err(err("a key expected", at(i))),
        };
        i += 1;
        let mut values = Vec::new();
        let mut op: &'static str = if negated { "!" } else { "" };
        match toks.get(i) {
            None | Some((Tok::Comma, ..)) => {}
            _ if negated => return Err(err("`,` or the end expected after `!key`", at(i))),
            Some((Tok::Op(o), ..)) => {
                op = match *o {
                    "=" => "=",
                    "==" => "==",
                    "!=" => "!=",
                    "<" => "<",
                    _ => ">",
                };
                let numeric = matches!(op, "<" | ">");
                i += 1;
                match toks.get(i) {
                    Some((Tok::Ident(_), a, b)) => {
                        // Numeric values are kept for matching, never renamed.
                        values.push((*a, *b));
                        i += 1;
                    }
                    // `key=` selects an empty value.
                    None | Some((Tok::Comma, ..)) if !numeric => {}
                    _ => return Err(err("a value expected", at(i))),
                }
            }
            Some((Tok::Ident(w), ..)) if *w == "in" || *w == "notin" => {
                op = if *w == "in" { "in" } else { "notin" };
                i += 1;
                if !matches!(toks.get(i), Some((Tok::Open, ..))) {
                    return Err(err("`(` expected", at(i)));
                }
                i += 1;
                loop {
                    match toks.get(i) {
                        Some((Tok::Ident(_), a, b)) => {
                            values.push((*a, *b));
                            i += 1;
                        }
                        Some((Tok::Close, ..)) => {}
                        _ => return Err(err("a value expected", at(i))),
                    }
                    match toks.get(i) {
                        Some((Tok::Comma, ..)) => i += 1,
                        Some((Tok::Close, ..)) => {
                            i += 1;
                            break;
                        }
                        _ => return Err(err("`,` or `)` expected", at(i))),
                    }
                }
            }
            _ => return Err(err("an operator expected", at(i))),
        }
        reqs.push(Requirement { key, op, values });
        match toks.get(i) {
            None => return Ok(reqs),
            Some((Tok::Comma, ..)) => i += 1,
            _ => return Err(err("`,` expected", at(i))),
        }
    }
}

/// A parsed label selector, to test objects' labels against (a `metadata:`
/// exclusion's `selector`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LabelSelector {
    text: String,
    requirements: Vec<Requirement>,
}

impl LabelSelector {
    /// Parses `text`; the error says where it can't be parsed.
    pub fn parse(text: &str) -> Result<LabelSelector, LabelSelectorError> {
        if text.trim().is_empty() {
            return Err(LabelSelectorError::Empty);
        }
        Ok(LabelSelector {
            requirements: parse(text)?,
            text: text.to_owned(),
        })
    }

    /// The selector as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// True when `label` (the value of a label key, `None` when absent)
    /// satisfies every requirement, as kube-apiserver's `labels.Selector`
    /// decides.
    pub fn matches<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.requirements.iter().all(|r| {
            let key = &self.text[r.key.0..r.key.1];
            let got = label(key);
            let mut values = r.values.iter().map(|(a, b)| &self.text[*a..*b]);
            match r.op {
                "!" => got.is_none(),
                "" => got.is_some(),
                "=" | "==" | "in" => got.is_some_and(|g| values.any(|v| v == g)),
                // A missing label satisfies `!=` and `notin`.
                "!=" | "notin" => got.is_none_or(|g| values.all(|v| v != g)),
                op => {
                    let (Some(g), Some(v)) = (got, values.next()) else {
                        return false;
                    };
                    match (g.parse::<i64>(), v.parse::<i64>()) {
                        (Ok(g), Ok(v)) if op == "<" => g < v,
                        (Ok(g), Ok(v)) => g > v,
                        _ => false,
                    }
                }
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn selectors_match_labels_as_kube_apiserver_does() {
        let labels = [("team", "a"), ("tier", "db"), ("replicas", "3")];
        let get = |k: &str| labels.iter().find(|(x, _)| *x == k).map(|(_, v)| *v);
        let yes = [
            "team",
            "team=a",
            "team==a",
            "!missing",
            "team!=b",
            "missing!=b",
            "tier in (web, db)",
            "tier notin (web)",
            "missing notin (web)",
            "replicas>2",
            "replicas<4",
            "team=a,tier=db",
        ];
        for s in yes {
            assert!(LabelSelector::parse(s).unwrap().matches(get), "{s}");
        }
        let no = [
            "missing",
            "!team",
            "team=b",
            "team!=a",
            "tier in (web)",
            "tier notin (db)",
            "missing in (db)",
            "replicas>3",
            "team<4",
            "team=a,tier=web",
        ];
        for s in no {
            assert!(!LabelSelector::parse(s).unwrap().matches(get), "{s}");
        }
        assert!(LabelSelector::parse("").is_err());
        assert!(LabelSelector::parse("a in (b").is_err());
    }
}
