//! Paths to fields inside an object: `spec.group`, `rules[].apiGroups[]`.
//!
//! One syntax for the built-in catalog and for the config's app-specific
//! `fields`: dot-separated JSON field names, `[]` after a name meaning "each
//! element of this array", and `["a.b/c"]` for a member whose name contains
//! dots (an annotation key).

use std::fmt;

/// One step of a [`FieldPath`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Into the member with this JSON name.
    Key(String),
    /// Into every element of an array.
    Each,
}

/// Why a field path can't be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum FieldPathError {
    /// Nothing was written.
    #[error("path is empty")]
    Empty,
    /// A `.`, `[]` or the end where a name belongs.
    #[error("path `{0}` has an empty field name")]
    EmptyName(String),
    /// A `["` without its `"]`.
    #[error("path `{0}`: unterminated `[\"`")]
    Unterminated(String),
    /// A name right after a name or a `["name"]`.
    #[error("path `{path}`: expected `.`, `[]` or `[\"` before `{rest}`")]
    Separator {
        /// The path.
        path: String,
        /// What follows where a separator belongs.
        rest: String,
    },
    /// A name holding `]`, or a bracket that can't start one.
    #[error(
        "path `{path}`: `{rest}` is not a field name (only `[]`, meaning every element, \
         or `[\"name\"]` may follow a name)"
    )]
    NotAName {
        /// The path.
        path: String,
        /// What stands where a name belongs.
        rest: String,
    },
    /// A bracket after a name that is neither `[]` nor `["`.
    #[error("path `{path}`: only `[]` (every element) or `[\"name\"]` may follow `{name}`")]
    Bracket {
        /// The path.
        path: String,
        /// The name the bracket follows.
        name: String,
    },
}

/// A parsed field path.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct FieldPath {
    steps: Vec<Step>,
}

impl FieldPath {
    /// Parses `a.b[].c`. Errors name the problem.
    ///
    /// ```
    /// use regroup_config::field_path::{FieldPath, Step};
    /// let p = FieldPath::parse("rules[].apiGroups[]").unwrap();
    /// assert_eq!(p.steps(), &[Step::Key("rules".into()), Step::Each,
    ///                         Step::Key("apiGroups".into()), Step::Each]);
    /// ```
    pub fn parse(s: &str) -> Result<FieldPath, FieldPathError> {
        if s.is_empty() {
            return Err(FieldPathError::Empty);
        }
        let mut steps = Vec::new();
        let mut rest = s;
        let mut expect_name = true;
        while !rest.is_empty() {
            if let Some(r) = rest.strip_prefix("[]") {
                if expect_name {
                    return Err(FieldPathError::EmptyName(s.to_owned()));
                }
                steps.push(Step::Each);
                rest = r;
            } else if let Some(r) = rest.strip_prefix("[\"") {
                let end = r
                    .find("\"]")
                    .ok_or_else(|| FieldPathError::Unterminated(s.to_owned()))?;
                if end == 0 {
                    return Err(FieldPathError::EmptyName(s.to_owned()));
                }
                steps.push(Step::Key(r[..end].to_owned()));
                rest = &r[end + 2..];
                expect_name = false;
            } else if let Some(r) = rest.strip_prefix('.') {
                if expect_name {
                    return Err(FieldPathError::EmptyName(s.to_owned()));
                }
                rest = r;
                expect_name = true;
                if rest.is_empty() || rest.starts_with('[') && !rest.starts_with("[\"") {
                    return Err(FieldPathError::EmptyName(s.to_owned()));
                }
            } else {
                if !expect_name {
                    return Err(FieldPathError::Separator {
                        path: s.to_owned(),
                        rest: rest.to_owned(),
                    });
                }
                let end = rest.find(['.', '[']).unwrap_or(rest.len());
                let name = &rest[..end];
                if name.is_empty() || name.contains(']') {
                    return Err(FieldPathError::NotAName {
                        path: s.to_owned(),
                        rest: rest.to_owned(),
                    });
                }
                steps.push(Step::Key(name.to_owned()));
                rest = &rest[end..];
                expect_name = false;
                if rest.starts_with('[') && !rest.starts_with("[]") && !rest.starts_with("[\"") {
                    return Err(FieldPathError::Bracket {
                        path: s.to_owned(),
                        name: name.to_owned(),
                    });
                }
            }
        }
        if expect_name {
            return Err(FieldPathError::EmptyName(s.to_owned()));
        }
        Ok(FieldPath { steps })
    }

    /// The steps, outermost first.
    pub fn steps(&self) -> &[Step] {
        &self.steps
    }
}

impl fmt::Display for FieldPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for s in &self.steps {
            match s {
                Step::Key(k) if k.contains(['.', '[', ']']) => write!(f, "[\"{k}\"]")?,
                Step::Key(k) => {
                    if !first {
                        f.write_str(".")?;
                    }
                    f.write_str(k)?;
                }
                Step::Each => f.write_str("[]")?,
            }
            first = false;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_round_trip_through_display() {
        for s in [
            "spec.group",
            "rules[].apiGroups[]",
            "items",
            "a[][].b",
            "metadata.annotations[\"autoscaling.alpha.kubernetes.io/metrics\"]",
        ] {
            assert_eq!(FieldPath::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn malformed_paths_are_rejected() {
        assert!(FieldPath::parse("").is_err());
        assert!(FieldPath::parse("spec..group").is_err());
        assert!(FieldPath::parse("spec.[]").is_err());
        assert!(FieldPath::parse("a[0].b").is_err());
        assert!(FieldPath::parse("a.").is_err());
        assert!(FieldPath::parse(".a").is_err());
        assert!(FieldPath::parse("a[\"b").is_err());
        assert!(FieldPath::parse("a[\"\"]").is_err());
        assert!(FieldPath::parse("a[\"b\"]c").is_err());
    }

    #[test]
    fn quoted_keys_may_contain_dots() {
        let p = FieldPath::parse("metadata.annotations[\"a.b/c\"][]").unwrap();
        assert_eq!(
            p.steps(),
            &[
                Step::Key("metadata".into()),
                Step::Key("annotations".into()),
                Step::Key("a.b/c".into()),
                Step::Each
            ]
        );
    }
}
