//! The `metadata:` section validated: every problem with its line, and the
//! rules a [`MetadataMap`] may hold (a bijection: no prefix of one rule
//! overlaps another's, on either side).

use super::{key_problem, split, Exclusion, MetadataMap, Pair, ValueRule};
use crate::dns::{has_label_suffix, subdomain_problem};
use crate::group_map::{MapRule, Rule};
use crate::label_selector::LabelSelector;
use crate::schema::MetadataSpec;

/// Prefixes that hold the keys of Kubernetes itself and of everyone
/// (`app.kubernetes.io/name`, `node.kubernetes.io/...`): never an
/// operator's own. A rule on one of these, or on a parent of one, would
/// rename keys every copy must share.
const SHARED: &[&str] = &["kubernetes.io", "k8s.io"];

fn shared_problem(prefix: &str) -> Option<String> {
    for s in SHARED {
        if has_label_suffix(s, prefix) {
            return Some(format!(
                "`{prefix}` covers `{s}`, whose keys every copy shares; name the operator's own prefixes"
            ));
        }
        if *s == "kubernetes.io" && has_label_suffix(prefix, s) {
            return Some(format!(
                "`{prefix}` is under `kubernetes.io`, reserved for Kubernetes' own keys"
            ));
        }
    }
    None
}

/// A label value as Kubernetes accepts it: at most 63 characters,
/// alphanumerics, `-`, `_`, `.`, beginning and ending alphanumeric.
fn label_value_problem(v: &str) -> Option<String> {
    if v.len() > super::MAX_NAME {
        return Some(format!(
            "`{v}` is longer than {} characters",
            super::MAX_NAME
        ));
    }
    let ok_char = |c: char| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.');
    let edge = |c: Option<char>| c.is_none_or(|c| c.is_ascii_alphanumeric());
    if !v.chars().all(ok_char) || !edge(v.chars().next()) || !edge(v.chars().last()) {
        return Some(format!(
            "`{v}` is not a valid label value (alphanumerics, `-`, `_`, `.`; alphanumeric at both ends)"
        ));
    }
    None
}

/// A qualified key with a prefix (`example.io/name`).
fn prefixed_key_problem(k: &str) -> Option<String> {
    let Some((prefix, name)) = split(k) else {
        return Some(format!(
            "`{k}` has no prefix (`example.io/{k}`): only prefixed keys are renamed"
        ));
    };
    if let Some(p) = subdomain_problem(prefix) {
        return Some(format!("the prefix of `{k}` {p}"));
    }
    if name.is_empty() || label_value_problem(name).is_some() {
        return Some(format!("the name of `{k}` is not a valid key name"));
    }
    key_problem(k)
}

/// One rule's side and where it was written.
struct Named<'a> {
    text: &'a str,
    line: String,
    /// Which rule (sides of one rule may nest).
    rule: usize,
}

/// A prefix that starts with the label regroup puts in front of another
/// copy's keys can't be a rule's side: it would be read as a shadow.
fn shadow_problem(prefix: &str) -> Option<String> {
    super::starts_with_shadow_label(prefix).then(|| {
        format!(
            "starts with `{}.`, which regroup reserves for other copies' keys",
            super::SHADOW_LABEL
        )
    })
}

/// The metadata rules of `spec`, or `None` (with `problems` added). The
/// group `rules` give the derived prefixes when `fromRules` is set.
pub fn metadata_from_spec(
    spec: &MetadataSpec,
    rules: &[MapRule],
    problems: &mut Vec<String>,
) -> Option<MetadataMap> {
    let before = problems.len();
    let mut prefixes: Vec<(Pair, String)> = Vec::new();
    for p in &spec.prefixes {
        let at = format!("line {}", p.referenced.line());
        let mut ok = true;
        for side in [&p.value.from, &p.value.to] {
            if let Some(why) = subdomain_problem(side)
                .or_else(|| shared_problem(side))
                .or_else(|| shadow_problem(side))
            {
                problems.push(format!("{at}: metadata prefix `{side}`: {why}"));
                ok = false;
            }
        }
        if p.value.from == p.value.to {
            problems.push(format!(
                "{at}: metadata prefix: `from` and `to` are both `{}`",
                p.value.from
            ));
            ok = false;
        }
        if ok {
            prefixes.push((
                Pair {
                    app: p.value.from.clone(),
                    cluster: p.value.to.clone(),
                },
                at,
            ));
        }
    }
    if spec.from_rules {
        for r in rules {
            let (from, to) = match &r.rule {
                Rule::Exact { from, to } | Rule::Suffix { from, to } => (from, to),
            };
            let dup = prefixes
                .iter()
                .any(|(p, _)| &p.app == from && &p.cluster == to);
            if !dup && shared_problem(from).is_none() && shared_problem(to).is_none() {
                prefixes.push((
                    Pair {
                        app: from.clone(),
                        cluster: to.clone(),
                    },
                    format!("`fromRules` (rule {from})"),
                ));
            }
        }
    }
    let mut keys: Vec<(Pair, String)> = Vec::new();
    for k in &spec.keys {
        let at = format!("line {}", k.referenced.line());
        let mut ok = true;
        for side in [&k.value.from, &k.value.to] {
            if let Some(why) = prefixed_key_problem(side) {
                problems.push(format!("{at}: metadata key: {why}"));
                ok = false;
            }
        }
        if ok {
            keys.push((
                Pair {
                    app: k.value.from.clone(),
                    cluster: k.value.to.clone(),
                },
                at,
            ));
        }
    }
    // The bijection: no name of one rule covers a name of another. A rule's
    // own two sides may nest (`kopf.zalando.org` -> `team-b.kopf.zalando.org`,
    // so that the copy's keys stay in the family its peers recognise): the
    // inner side is always matched before the outer one, so each key still
    // has one meaning (docs/config.md, "Peers recognised"). Exact keys are
    // compared by their prefixes with the prefix rules, and whole with each
    // other.
    let mut names: Vec<Named<'_>> = Vec::new();
    for (i, (p, at)) in prefixes.iter().enumerate() {
        names.push(Named {
            text: &p.app,
            line: format!("{at} (from)"),
            rule: i,
        });
        names.push(Named {
            text: &p.cluster,
            line: format!("{at} (to)"),
            rule: i,
        });
    }
    for (i, a) in names.iter().enumerate() {
        for b in &names[i + 1..] {
            if a.rule == b.rule {
                continue;
            }
            if has_label_suffix(a.text, b.text) || has_label_suffix(b.text, a.text) {
                problems.push(format!(
                    "{} and {}: metadata prefixes `{}` and `{}` overlap (one is, or ends in, the other), so a key would have two meanings",
                    a.line, b.line, a.text, b.text
                ));
            }
        }
    }
    let mut whole: Vec<Named<'_>> = Vec::new();
    for (i, (k, at)) in keys.iter().enumerate() {
        whole.push(Named {
            text: &k.app,
            line: format!("{at} (from)"),
            rule: usize::MAX - i,
        });
        whole.push(Named {
            text: &k.cluster,
            line: format!("{at} (to)"),
            rule: usize::MAX - i,
        });
    }
    for (i, a) in whole.iter().enumerate() {
        for b in &whole[i + 1..] {
            if a.text == b.text {
                problems.push(format!(
                    "{} and {}: metadata key `{}` is named twice",
                    a.line, b.line, a.text
                ));
            }
        }
        let prefix = split(a.text).map_or("", |(p, _)| p);
        for n in &names {
            if has_label_suffix(prefix, n.text) {
                problems.push(format!(
                    "{} and {}: metadata key `{}` is under prefix `{}` already renamed",
                    a.line, n.line, a.text, n.text
                ));
            }
        }
    }
    let mut values: Vec<ValueRule> = Vec::new();
    for v in &spec.values {
        let at = format!("line {}", v.referenced.line());
        let v = &v.value;
        let mut ok = true;
        if let Some(why) = key_syntax_problem(&v.key) {
            problems.push(format!("{at}: metadata value rule: key {why}"));
            ok = false;
        }
        for side in [&v.from, &v.to] {
            if let Some(why) = label_value_problem(side).or_else(|| {
                side.ends_with(super::SHADOW_VALUE)
                    .then(|| format!("`{side}` ends in `{}`, reserved", super::SHADOW_VALUE))
            }) {
                problems.push(format!("{at}: metadata value rule: {why}"));
                ok = false;
            }
        }
        if v.from == v.to {
            problems.push(format!(
                "{at}: metadata value rule: `from` and `to` are both `{}`",
                v.from
            ));
            ok = false;
        }
        let clash = values.iter().find(|r| {
            r.key == v.key
                && [&r.value.app, &r.value.cluster]
                    .iter()
                    .any(|x| *x == &v.from || *x == &v.to)
        });
        if let Some(r) = clash {
            problems.push(format!(
                "{at}: metadata value rule: key `{}` already maps `{}` to `{}`",
                v.key, r.value.app, r.value.cluster
            ));
            ok = false;
        }
        if ok {
            values.push(ValueRule {
                key: v.key.clone(),
                value: Pair {
                    app: v.from.clone(),
                    cluster: v.to.clone(),
                },
            });
        }
    }
    let mut exclude = Vec::new();
    for e in &spec.exclude {
        let at = format!("line {}", e.referenced.line());
        let k = &e.value.kind;
        if k.is_empty() || !k.starts_with(|c: char| c.is_ascii_uppercase()) {
            problems.push(format!(
                "{at}: metadata exclusion: kind `{k}` must be a Kubernetes kind (UpperCamelCase)"
            ));
            continue;
        }
        let selector = match e.value.selector.as_deref().map(LabelSelector::parse) {
            None => None,
            Some(Ok(s)) => Some(s),
            Some(Err(why)) => {
                problems.push(format!("{at}: metadata exclusion: selector: {why}"));
                continue;
            }
        };
        exclude.push(Exclusion {
            kind: k.clone(),
            name: e.value.name.clone(),
            selector,
        });
    }
    if problems.len() > before {
        return None;
    }
    Some(MetadataMap::new(
        prefixes.into_iter().map(|(p, _)| p).collect(),
        keys.into_iter().map(|(k, _)| k).collect(),
        values,
        exclude,
    ))
}

/// A label key, prefixed or not.
fn key_syntax_problem(k: &str) -> Option<String> {
    match split(k) {
        Some(_) => prefixed_key_problem(k),
        None if k.is_empty() => Some("must not be empty".into()),
        None => label_value_problem(k),
    }
}

#[cfg(test)]
mod tests {
    use crate::load;

    const BASE: &str = "rules:\n  - {from: foo.example.io, to: foo.team-b.example.com}\n";

    fn problems(metadata: &str) -> Vec<String> {
        match load(&format!("{BASE}metadata:\n{metadata}")) {
            Ok(_) => vec![],
            Err(e) => e.problems,
        }
    }

    #[test]
    fn a_valid_section_loads() {
        let s = load(&format!(
            "{BASE}metadata:\n  fromRules: true\n  prefixes:\n    - {{from: cert-manager.io, to: cert-manager.team-b.example.com}}\n  keys:\n    - {{from: argocd.argoproj.io/tracking-id, to: argocd.argoproj.io/tracking-id-b}}\n  values:\n    - {{key: app.kubernetes.io/managed-by, from: foo-operator, to: foo-operator-b}}\n  exclude:\n    - {{kind: Secret, name: kept}}\n    - {{kind: ConfigMap, selector: \"team=a\"}}\n"
        ))
        .unwrap();
        let m = s.map.metadata().unwrap();
        assert_eq!(m.prefixes().len(), 2, "one written, one from the rule");
        assert!(m.excludes("ConfigMap", None, |k| (k == "team").then_some("a")));
        assert_eq!(
            m.map_key("foo.example.io/x", crate::Direction::ToCluster)
                .as_deref(),
            Some("foo.team-b.example.com/x")
        );
    }

    #[test]
    fn an_empty_section_renames_nothing() {
        let s = load(&format!("{BASE}metadata: {{}}\n")).unwrap();
        assert!(s.map.metadata().is_none());
    }

    #[test]
    fn shared_prefixes_are_refused() {
        for p in ["kubernetes.io", "k8s.io", "io", "app.kubernetes.io"] {
            let ps = problems(&format!(
                "  prefixes:\n    - {{from: {p}, to: team-b.example.com}}\n"
            ));
            assert!(
                ps.iter().any(|m| m.starts_with("line 5:") && m.contains(p)),
                "{p}: {ps:?}"
            );
        }
    }

    #[test]
    fn overlapping_rules_are_refused_naming_both() {
        let ps = problems(
            "  prefixes:\n    - {from: cert-manager.io, to: cm.team-b.example.com}\n    - {from: acme.cert-manager.io, to: acme.team-b.example.com}\n",
        );
        assert!(
            ps.iter()
                .any(|m| m.contains("line 5 (from) and line 6 (from)") && m.contains("overlap")),
            "{ps:?}"
        );
        // A rule's own sides may nest (the copy's keys stay in the family
        // its peers recognise); another rule's may not.
        let ps =
            problems("  prefixes:\n    - {from: kopf.zalando.org, to: team-b.kopf.zalando.org}\n");
        assert!(ps.is_empty(), "{ps:?}");
        let ps = problems("  prefixes:\n    - {from: kopf.zalando.org, to: team-b.kopf.zalando.org}\n    - {from: x.example.io, to: kopf.zalando.org}\n");
        assert!(ps.iter().any(|m| m.contains("overlap")), "{ps:?}");
        let ps =
            problems("  prefixes:\n    - {from: regroup-shadow.example.io, to: b.example.io}\n");
        assert!(ps.iter().any(|m| m.contains("reserves")), "{ps:?}");
        let ps = problems(
            "  prefixes:\n    - {from: cert-manager.io, to: cm.team-b.example.com}\n  keys:\n    - {from: cert-manager.io/x, to: other.io/x}\n",
        );
        assert!(ps.iter().any(|m| m.contains("already renamed")), "{ps:?}");
    }

    #[test]
    fn bad_keys_and_values_are_refused() {
        let ps = problems("  keys:\n    - {from: owner, to: example.io/owner}\n");
        assert!(ps.iter().any(|m| m.contains("no prefix")), "{ps:?}");
        let ps = problems(&format!(
            "  keys:\n    - {{from: example.io/a, to: example.io/{}}}\n",
            "x".repeat(64)
        ));
        assert!(ps.iter().any(|m| m.contains("line 5")), "{ps:?}");
        let ps = problems("  values:\n    - {key: app, from: -bad, to: ok}\n");
        assert!(
            ps.iter().any(|m| m.contains("not a valid label value")),
            "{ps:?}"
        );
        let ps = problems("  values:\n    - {key: app, from: same, to: same}\n");
        assert!(ps.iter().any(|m| m.contains("both")), "{ps:?}");
        let ps = problems("  exclude:\n    - {kind: secret}\n");
        assert!(ps.iter().any(|m| m.contains("UpperCamelCase")), "{ps:?}");
        let ps = problems(
            "  exclude:\n    - {kind: Secret}\n    - {kind: Secret, selector: 'a in (b'}\n",
        );
        assert!(
            ps.iter()
                .any(|m| m.starts_with("line 6:") && m.contains("selector")),
            "{ps:?}"
        );
        let ps = problems("  exclude:\n    - {kind: Secret, selector: ''}\n");
        assert!(ps.iter().any(|m| m.starts_with("line 5:")), "{ps:?}");
    }
}
