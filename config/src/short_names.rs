//! Names for people, per copy: a renamed group's CRD `shortNames` and
//! `categories` (and the same fields in discovery) get the copy's prefix
//! on the cluster (the config's `names.shortNamePrefix`).
//!
//! Every copy's CRD would otherwise say `shortNames: [fo]`, so `kubectl get
//! fo` on the cluster resolves to whichever copy discovery lists first, and
//! `kubectl get <category>` lists every copy. With a prefix `t1-`, the
//! cluster holds `t1-fo` and the app still reads `fo`.
//!
//! Categories in `keepCategories` (by default `all`, kubectl's own "every
//! resource of this namespace") pass both ways as they are: `kubectl get
//! all` on the cluster still lists every copy's resources.
//!
//! The mapping is a bijection over every string that can arrive from the
//! cluster: a name of a renamed group's resource that does not carry the
//! prefix (a CRD installed by hand, another tool's name) is shown to the
//! app with [`SHADOW_SUFFIX`] (a `.` never occurs in a valid short name or
//! category) and loses it again on the way back, so a read-modify-write
//! keeps its bytes.

use std::fmt;

/// What a name of the copy's own group that the copy did not mark gets
/// toward the app (and loses toward the cluster).
pub const SHADOW_SUFFIX: &str = ".shadowed";

/// The categories kept as they are when the config lists none.
pub const DEFAULT_KEPT_CATEGORIES: &[&str] = &["all"];

/// Kubernetes' limit on a short name or a category (a DNS-1035 label).
pub const MAX_LEN: usize = 63;

/// The validated `names.shortNamePrefix` / `names.keepCategories`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShortNames {
    prefix: String,
    keep_categories: Vec<String>,
}

/// Which of the two lists a name is in: categories have a keep list.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ShortForm {
    /// `shortNames[]`.
    ShortName,
    /// `categories[]`.
    Category,
}

/// Why the section was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShortNamesProblem(pub String);

impl fmt::Display for ShortNamesProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why `s` is not a DNS-1035 label (what the apiserver requires of a short
/// name and a category), or `None`.
pub fn dns1035_problem(s: &str) -> Option<&'static str> {
    if s.is_empty() {
        return Some("is empty");
    }
    if s.len() > MAX_LEN {
        return Some("is longer than 63 characters");
    }
    if !s.starts_with(|c: char| c.is_ascii_lowercase()) {
        return Some("must start with a lower-case letter");
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        return Some("may hold only lower-case letters, digits and `-`");
    }
    if s.ends_with('-') {
        return Some("must end with a letter or a digit");
    }
    None
}

impl ShortNames {
    /// Validates the section: the prefix starts a DNS-1035 label (a
    /// lower-case letter, then letters, digits, `-`) and leaves room for
    /// at least one character; each kept category is a DNS-1035 label,
    /// listed once.
    pub fn new(
        prefix: &str,
        keep_categories: Option<&[String]>,
    ) -> Result<ShortNames, Vec<ShortNamesProblem>> {
        let mut problems = Vec::new();
        // `t1-` is a valid start even though a label can't end in `-`.
        let probe = format!("{prefix}x");
        if prefix.is_empty() {
            problems.push(ShortNamesProblem("names.shortNamePrefix: is empty".into()));
        } else if let Some(p) = dns1035_problem(&probe) {
            problems.push(ShortNamesProblem(format!(
                "names.shortNamePrefix: `{prefix}` can't start a short name: a short name or \
                 category {p}"
            )));
        }
        let keep: Vec<String> = match keep_categories {
            Some(k) => k.to_vec(),
            None => DEFAULT_KEPT_CATEGORIES
                .iter()
                .map(|s| s.to_string())
                .collect(),
        };
        for (i, k) in keep.iter().enumerate() {
            if let Some(p) = dns1035_problem(k) {
                problems.push(ShortNamesProblem(format!(
                    "names.keepCategories: `{k}` {p}"
                )));
            }
            if keep[..i].contains(k) {
                problems.push(ShortNamesProblem(format!(
                    "names.keepCategories: `{k}` is listed twice"
                )));
            }
            // `t1-x` kept would be both this copy's `x` and itself.
            if k.starts_with(prefix) && !prefix.is_empty() {
                problems.push(ShortNamesProblem(format!(
                    "names.keepCategories: `{k}` starts with names.shortNamePrefix `{prefix}`: \
                     it would read back as another category"
                )));
            }
        }
        if problems.is_empty() {
            Ok(ShortNames {
                prefix: prefix.to_owned(),
                keep_categories: keep,
            })
        } else {
            Err(problems)
        }
    }

    /// The copy's prefix.
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// The categories kept as they are.
    pub fn kept_categories(&self) -> &[String] {
        &self.keep_categories
    }

    fn is_kept(&self, which: ShortForm, name: &str) -> bool {
        which == ShortForm::Category && self.keep_categories.iter().any(|k| k == name)
    }

    /// The cluster's name for the app's `name`; `None` when it stays.
    pub fn to_cluster(&self, which: ShortForm, name: &str) -> Option<String> {
        if let Some(other) = name.strip_suffix(SHADOW_SUFFIX) {
            return Some(other.to_owned());
        }
        if name.is_empty() || self.is_kept(which, name) {
            return None;
        }
        Some(format!("{}{name}", self.prefix))
    }

    /// The app's name for the cluster's `name`; `None` when it stays (a
    /// kept category).
    pub fn to_app(&self, which: ShortForm, name: &str) -> Option<String> {
        if name.is_empty() || self.is_kept(which, name) {
            return None;
        }
        match name.strip_prefix(self.prefix.as_str()) {
            Some(own)
                if !own.is_empty()
                    && !self.is_kept(which, own)
                    && !own.ends_with(SHADOW_SUFFIX) =>
            {
                Some(own.to_owned())
            }
            _ => Some(format!("{name}{SHADOW_SUFFIX}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ShortForm::{Category, ShortName};

    fn t1() -> ShortNames {
        ShortNames::new("t1-", None).unwrap()
    }

    #[test]
    fn the_prefix_goes_on_toward_the_cluster_and_comes_off_toward_the_app() {
        let s = t1();
        assert_eq!(s.to_cluster(ShortName, "fo").as_deref(), Some("t1-fo"));
        assert_eq!(s.to_app(ShortName, "t1-fo").as_deref(), Some("fo"));
        assert_eq!(
            s.to_cluster(Category, "samplecontroller").as_deref(),
            Some("t1-samplecontroller")
        );
        assert_eq!(
            s.to_app(Category, "t1-samplecontroller").as_deref(),
            Some("samplecontroller")
        );
    }

    #[test]
    fn all_is_kept_both_ways_by_default_and_only_for_categories() {
        let s = t1();
        assert_eq!(s.to_cluster(Category, "all"), None);
        assert_eq!(s.to_app(Category, "all"), None);
        // A short name `all` is no category: it gets the prefix.
        assert_eq!(s.to_cluster(ShortName, "all").as_deref(), Some("t1-all"));
        // `t1-all` is not the app's `all` (that one is kept).
        assert_eq!(
            s.to_app(Category, "t1-all").as_deref(),
            Some("t1-all.shadowed")
        );
        let none = ShortNames::new("t1-", Some(&[])).unwrap();
        assert_eq!(none.to_cluster(Category, "all").as_deref(), Some("t1-all"));
    }

    #[test]
    fn an_unmarked_cluster_name_is_shown_shadowed_and_written_back_as_it_was() {
        let s = t1();
        for cluster in [
            "fo",
            "t2-fo",
            "t1-",
            "t1-x.shadowed",
            "t1-all",
            "x.shadowed",
        ] {
            for which in [ShortName, Category] {
                let app = s.to_app(which, cluster).unwrap_or(cluster.to_owned());
                let back = s.to_cluster(which, &app).unwrap_or(app.clone());
                assert_eq!(back, cluster, "{which:?} {cluster} -> {app}");
            }
        }
        assert_eq!(s.to_app(ShortName, "fo").as_deref(), Some("fo.shadowed"));
    }

    #[test]
    fn every_valid_app_name_round_trips() {
        let s = t1();
        for app in ["fo", "a", "all", "t1-fo", "x-1"] {
            for which in [ShortName, Category] {
                let cluster = s.to_cluster(which, app).unwrap_or(app.to_owned());
                assert!(dns1035_problem(&cluster).is_none(), "{cluster}");
                let back = s.to_app(which, &cluster).unwrap_or(cluster.clone());
                assert_eq!(back, app, "{which:?} {app} -> {cluster}");
            }
        }
    }

    #[test]
    fn bad_sections_say_what_is_wrong() {
        let p = |prefix: &str, keep: Option<&[String]>| ShortNames::new(prefix, keep).unwrap_err();
        assert!(p("", None)[0].0.contains("is empty"));
        assert!(p("1t-", None)[0].0.contains("lower-case letter"));
        assert!(p("T1-", None)[0].0.contains("lower-case letter"));
        assert!(p("t1.", None)[0].0.contains("only lower-case"));
        assert!(p(&"t".repeat(63), None)[0].0.contains("longer than 63"));
        let keep = ["all".to_string(), "all".to_string()];
        assert!(p("t1-", Some(&keep))[0].0.contains("twice"));
        let keep = ["t1-x".to_string()];
        assert!(p("t1-", Some(&keep))[0].0.contains("starts with"));
        let keep = ["Bad".to_string()];
        assert!(p("t1-", Some(&keep))[0].0.contains("`Bad`"));
    }
}
