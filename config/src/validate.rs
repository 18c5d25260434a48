//! Validation of rename rules: names, built-in groups and the bijection.
//!
//! A rule set is valid when every name is a DNS-1123 subdomain, no rule
//! touches a group kube-apiserver owns, and the map is a bijection with no
//! chains: no two originals share a target, no target is also an original,
//! and an exact rule may overlap a suffix rule only where they agree (so the
//! result never depends on rule order).

use crate::builtin::{builtin_under_suffix, is_builtin};
use crate::dns::{has_label_suffix, subdomain_problem, MAX_SUBDOMAIN};
use crate::rule::{Direction, MapRule, Rule};

/// A problem with one or more rules (indexes into the rule list).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RuleProblem {
    /// The rules involved, by index in configuration order.
    pub rules: Vec<usize>,
    /// What is wrong, naming the rules' groups.
    pub message: String,
}

fn problem(rules: Vec<usize>, message: String) -> RuleProblem {
    RuleProblem { rules, message }
}

/// Human form of a rule for messages: `from -> to` or `*.from -> *.to`.
pub fn describe(rule: &Rule) -> String {
    match rule {
        Rule::Exact { from, to } => format!("`{from}` -> `{to}`"),
        Rule::Suffix { from, to } => format!("suffix `{from}` -> `{to}`"),
    }
}

/// A set of group names: one exact name, or everything under a suffix.
#[derive(Clone, Copy)]
struct Names<'a> {
    name: &'a str,
    suffix: bool,
}

impl Names<'_> {
    fn intersects(self, other: Names<'_>) -> bool {
        match (self.suffix, other.suffix) {
            (false, false) => self.name == other.name,
            (false, true) => has_label_suffix(self.name, other.name),
            (true, false) => has_label_suffix(other.name, self.name),
            (true, true) => {
                has_label_suffix(self.name, other.name) || has_label_suffix(other.name, self.name)
            }
        }
    }
}

fn sides(r: &Rule) -> (Names<'_>, Names<'_>) {
    let suffix = r.is_suffix();
    let (from, to) = r.ends(Direction::ToCluster);
    (Names { name: from, suffix }, Names { name: to, suffix })
}

/// True when two rules with intersecting originals give the same cluster
/// name for every group both cover.
fn agree(a: &Rule, b: &Rule) -> bool {
    use Rule::*;
    match (a, b) {
        (Exact { .. }, Exact { .. }) => false, // a duplicate is always an error
        (Exact { from, to }, s @ Suffix { .. }) | (s @ Suffix { .. }, Exact { from, to }) => {
            s.covers(from, Direction::ToCluster)
                && GroupMapLite(s).apply(from).as_deref() == Some(to.as_str())
        }
        (Suffix { from: f1, to: t1 }, Suffix { from: f2, to: t2 }) => {
            // The narrower suffix must be the wider one's image of it.
            let (nf, nt, w) = if has_label_suffix(f1, f2) {
                (f1, t1, b)
            } else {
                (f2, t2, a)
            };
            GroupMapLite(w).apply(nf).as_deref() == Some(nt.as_str())
        }
    }
}

/// Applies one rule in the ToCluster direction (used before a map exists).
struct GroupMapLite<'a>(&'a Rule);

impl GroupMapLite<'_> {
    fn apply(&self, group: &str) -> Option<String> {
        self.apply_in(group, Direction::ToCluster)
    }

    fn apply_in(&self, group: &str, dir: Direction) -> Option<String> {
        if !self.0.covers(group, dir) {
            return None;
        }
        let (source, target) = self.0.ends(dir);
        Some(match self.0 {
            Rule::Exact { .. } => target.to_owned(),
            Rule::Suffix { .. } => format!("{}{}", &group[..group.len() - source.len()], target),
        })
    }
}

/// Of two intersecting name sets, the name inside both: the exact name, or
/// the longer of two nested suffixes.
fn narrower<'a>(a: Names<'a>, b: Names<'a>) -> &'a str {
    if !a.suffix || (b.suffix && has_label_suffix(a.name, b.name)) {
        a.name
    } else {
        b.name
    }
}

/// Every problem with `rules`, in a stable order. Empty means valid.
pub fn rule_conflicts(rules: &[MapRule]) -> Vec<RuleProblem> {
    let mut out = Vec::new();
    for (i, r) in rules.iter().enumerate() {
        single_rule_problems(i, &r.rule, &mut out);
    }
    if !out.is_empty() {
        // Pairwise checks on malformed names would only add noise.
        return out;
    }
    for (i, a) in rules.iter().enumerate() {
        let (da, ra) = sides(&a.rule);
        for (j, b) in rules.iter().enumerate() {
            let (db, rb) = sides(&b.rule);
            if i != j && ra.intersects(db) {
                out.push(problem(
                    vec![i, j],
                    format!(
                        "chained rules: rule {} ({}) produces `{}`, which rule {} ({}) renames again; \
                         a cluster name must not also be an app name",
                        i + 1,
                        describe(&a.rule),
                        ra.name,
                        j + 1,
                        describe(&b.rule)
                    ),
                ));
            }
            if j <= i {
                continue;
            }
            if da.intersects(db) {
                if !da.suffix && !db.suffix {
                    out.push(problem(
                        vec![i, j],
                        format!(
                            "duplicate rules: rule {} ({}) and rule {} ({}) both rename `{}`; \
                             an app group may appear in one rule only",
                            i + 1,
                            describe(&a.rule),
                            j + 1,
                            describe(&b.rule),
                            da.name
                        ),
                    ));
                } else if !agree(&a.rule, &b.rule) {
                    out.push(problem(
                        vec![i, j],
                        format!(
                            "overlapping rules: rule {} ({}) and rule {} ({}) both rename `{}` \
                             differently, so the result would depend on rule order",
                            i + 1,
                            describe(&a.rule),
                            j + 1,
                            describe(&b.rule),
                            narrower(da, db)
                        ),
                    ));
                }
            } else if ra.intersects(rb) {
                // Some cluster group both rules produce; each rule's preimage
                // of it is a different app group.
                let shared = narrower(ra, rb);
                let app_a = GroupMapLite(&a.rule).apply_in(shared, Direction::ToApp);
                let app_b = GroupMapLite(&b.rule).apply_in(shared, Direction::ToApp);
                out.push(problem(
                    vec![i, j],
                    format!(
                        "not a bijection: rule {} ({}) and rule {} ({}) map two different app \
                         groups to one cluster group: `{}` (rule {}) and `{}` (rule {}) would \
                         both become `{shared}`",
                        i + 1,
                        describe(&a.rule),
                        j + 1,
                        describe(&b.rule),
                        app_a.unwrap_or_default(),
                        i + 1,
                        app_b.unwrap_or_default(),
                        j + 1,
                    ),
                ));
            }
        }
    }
    out
}

fn single_rule_problems(i: usize, rule: &Rule, out: &mut Vec<RuleProblem>) {
    let n = i + 1;
    let (from, to) = rule.ends(Direction::ToCluster);
    let suffix = rule.is_suffix();
    for (side, name) in [("from", from), ("to", to)] {
        let what = if suffix {
            format!("{side}Suffix")
        } else {
            side.to_string()
        };
        if name.is_empty() {
            out.push(problem(
                vec![i],
                format!(
                    "rule {n}: `{what}` is empty: the core group \"\" is served by kube-apiserver \
                     and can't be renamed"
                ),
            ));
            continue;
        }
        if let Some(p) = subdomain_problem(name) {
            out.push(problem(
                vec![i],
                format!(
                    "rule {n}: `{what}: {name}` is not a valid API group (DNS-1123 subdomain): {p}"
                ),
            ));
            continue;
        }
        // CRD names are `plural.group` and must fit in a DNS subdomain too.
        if name.len() + 2 > MAX_SUBDOMAIN {
            out.push(problem(
                vec![i],
                format!(
                    "rule {n}: `{what}: {name}` leaves no room for a CRD name `<plural>.{name}` \
                     within {MAX_SUBDOMAIN} characters"
                ),
            ));
        }
        if !suffix && is_builtin(name) {
            out.push(problem(
                vec![i],
                format!(
                    "rule {n}: `{what}: {name}` is a group kube-apiserver serves itself and \
                     can't be renamed"
                ),
            ));
        }
        if suffix {
            if let Some(b) = builtin_under_suffix(name) {
                out.push(problem(
                    vec![i],
                    format!(
                        "rule {n}: `{what}: {name}` covers `{b}`, a group kube-apiserver serves \
                         itself, which can't be renamed"
                    ),
                ));
            }
        }
    }
    if from == to {
        out.push(problem(
            vec![i],
            format!("rule {n}: `{from}` is mapped to itself"),
        ));
    } else if suffix && (has_label_suffix(from, to) || has_label_suffix(to, from)) {
        out.push(problem(
            vec![i],
            format!(
                "rule {n} ({}): the suffixes nest, so some group would be both an app name \
                 and a cluster name",
                describe(rule)
            ),
        ));
    }
}
