//! Paths to fields inside an object: `spec.group`, `rules[].apiGroups[]`.
//!
//! One syntax for the built-in catalog and for the config's app-specific
//! `fields`: dot-separated JSON field names, `[]` after a name meaning "each
//! element of this array".

use std::fmt;

/// One step of a [`FieldPath`].
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    /// Into the member with this JSON name.
    Key(String),
    /// Into every element of an array.
    Each,
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
    pub fn parse(s: &str) -> Result<FieldPath, String> {
        if s.is_empty() {
            return Err("path is empty".into());
        }
        let mut steps = Vec::new();
        for part in s.split('.') {
            let mut name = part;
            let mut each = 0;
            while let Some(n) = name.strip_suffix("[]") {
                name = n;
                each += 1;
            }
            if name.is_empty() {
                return Err(format!("path `{s}` has an empty field name"));
            }
            if name.contains(['[', ']']) {
                return Err(format!(
                    "path `{s}`: `{part}` is not a field name (only `[]`, meaning every element, may follow a name)"
                ));
            }
            steps.push(Step::Key(name.to_owned()));
            steps.extend(std::iter::repeat_n(Step::Each, each));
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
        for s in ["spec.group", "rules[].apiGroups[]", "items", "a[][].b"] {
            assert_eq!(FieldPath::parse(s).unwrap().to_string(), s);
        }
    }

    #[test]
    fn malformed_paths_are_rejected() {
        assert!(FieldPath::parse("").is_err());
        assert!(FieldPath::parse("spec..group").is_err());
        assert!(FieldPath::parse("spec.[]").is_err());
        assert!(FieldPath::parse("a[0].b").is_err());
    }
}
