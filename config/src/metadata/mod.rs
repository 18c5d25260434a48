//! Metadata identity: the label, annotation and finalizer keys of an
//! operator's own DNS prefixes (and label values it owns), renamed per copy
//! so two copies never see or overwrite each other's keys on shared objects.
//!
//! A key `prefix/name` is renamed when its prefix equals a rule's prefix or
//! ends in `.` + it (a label boundary), or when the whole key is an exact
//! rule's. The mapping is a bijection over *all* keys, including the keys of
//! other copies that happen to carry the app's own original prefix on the
//! cluster ("shadowed" keys): those are shown to the app with the label
//! [`SHADOW_LABEL`] put in front of their prefix, which it can't mistake for
//! its own, and they travel back unchanged. The label goes in front, not
//! behind, so the key stays in its DNS family: a tool that recognises its
//! peers by suffix (Kopf leaves alone keys under `*.kopf.zalando.org`)
//! still sees another copy's key as a peer's. A key's leading
//! [`SHADOW_LABEL`]s are never renamed. Concretely, with `F` the keys a rule
//! reads on the app side, `T` those it writes on the cluster, and `k·n` a key
//! whose prefix carries the label `n` times:
//!
//! | app         | cluster     |
//! |-------------|-------------|
//! | `f·0` (F)   | `t·0` (T)   |
//! | `f·(n+1)`   | `f·n`       |
//! | `t·n`       | `t·(n+1)`   |
//! | other       | the same    |
//!
//! Label values owned by the operator (`app.kubernetes.io/managed-by:
//! foo-operator`) follow the same scheme per key, with [`SHADOW_VALUE`].
//! docs/config.md ("Metadata") is the user's account of it.

use crate::dns::has_label_suffix;

mod check;
mod selector;

use crate::rule::Direction;
pub use check::metadata_from_spec;
pub use selector::map_label_selector;

/// Put (as a DNS label, with a `.`) in front of the prefix of a key the
/// cluster holds in the app's own original prefix: `kopf.zalando.org/x` of
/// another copy is `regroup-shadow.kopf.zalando.org/x` to the app. Rule
/// sides may not start with it (`check` refuses them).
pub const SHADOW_LABEL: &str = "regroup-shadow";

/// Appended to a label value the cluster holds that equals one the app owns
/// under its original name.
pub const SHADOW_VALUE: &str = ".shadowed";

/// The longest key prefix (a DNS subdomain) and name Kubernetes accepts.
pub const MAX_PREFIX: usize = 253;
/// See [`MAX_PREFIX`].
pub const MAX_NAME: usize = 63;

/// One prefix (or exact key) rule: `app` on the app's side is `cluster`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pair {
    /// The app's name.
    pub app: String,
    /// The cluster's name.
    pub cluster: String,
}

impl Pair {
    fn ends(&self, dir: Direction) -> (&str, &str) {
        match dir {
            Direction::ToCluster => (&self.app, &self.cluster),
            Direction::ToApp => (&self.cluster, &self.app),
        }
    }
}

/// A label value rule: under the key `key` (app names), `value.app` is
/// `value.cluster`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValueRule {
    /// The label key, as the app names it.
    pub key: String,
    /// The value on each side.
    pub value: Pair,
}

/// Objects whose metadata is never renamed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exclusion {
    /// The kind (`Secret`).
    pub kind: String,
    /// Only the object of this name, when set.
    pub name: Option<String>,
    /// Only objects whose labels match, when set. An excluded object's
    /// labels are not renamed, so they are the same on both sides: the
    /// selector reads them as they arrive, in either direction.
    pub selector: Option<crate::label_selector::LabelSelector>,
}

impl Exclusion {
    /// True when it excludes an object of `kind` named `name` whose label
    /// `k` is `label(k)`.
    pub fn covers<'a>(
        &self,
        kind: &str,
        name: Option<&str>,
        label: impl Fn(&str) -> Option<&'a str>,
    ) -> bool {
        self.kind == kind
            && self.name.as_deref().is_none_or(|n| Some(n) == name)
            && self.selector.as_ref().is_none_or(|s| s.matches(label))
    }

    /// True when every object of its kind is excluded (no name, no
    /// selector): no need to read the object.
    pub fn is_whole_kind(&self) -> bool {
        self.name.is_none() && self.selector.is_none()
    }
}

/// The validated metadata rules of a configuration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MetadataMap {
    prefixes: Vec<Pair>,
    keys: Vec<Pair>,
    values: Vec<ValueRule>,
    exclude: Vec<Exclusion>,
    /// Renaming manifests (`render`, `inject`): a key or value already in
    /// the names a rule writes is left as it is instead of shadowed, so
    /// rendering a rendered manifest again changes nothing.
    manifests: bool,
}

/// Which side of the rules a key (without shadow suffixes) is on.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Side {
    /// Read by a rule in the direction asked (renamed).
    Source,
    /// Written by a rule in the direction asked.
    Target,
    /// Neither: never renamed.
    Other,
}

/// `prefix` without its leading [`SHADOW_LABEL`]s, and how many there were.
fn unshadow(prefix: &str) -> (&str, usize) {
    let mut p = prefix;
    let mut n = 0;
    while let Some(rest) = p
        .strip_prefix(SHADOW_LABEL)
        .and_then(|r| r.strip_prefix('.'))
    {
        if rest.is_empty() {
            break;
        }
        p = rest;
        n += 1;
    }
    (p, n)
}

/// True when `prefix` starts with the [`SHADOW_LABEL`] label.
pub fn starts_with_shadow_label(prefix: &str) -> bool {
    unshadow(prefix).1 > 0 || prefix == SHADOW_LABEL
}

fn unshadow_value(value: &str) -> (&str, usize) {
    let mut v = value;
    let mut n = 0;
    while let Some(rest) = v.strip_suffix(SHADOW_VALUE) {
        if rest.is_empty() {
            break;
        }
        v = rest;
        n += 1;
    }
    (v, n)
}

/// What a label value becomes.
enum Step<'a> {
    /// Renamed by this rule's target.
    Rename(&'a str),
    /// One shadow suffix less.
    Unshadow,
    /// One shadow suffix more.
    Shadow,
}

impl MetadataMap {
    /// Rules as validated by [`crate::load()`] (no overlaps: see
    /// `crate::validate::metadata_conflicts`).
    pub fn new(
        prefixes: Vec<Pair>,
        keys: Vec<Pair>,
        values: Vec<ValueRule>,
        exclude: Vec<Exclusion>,
    ) -> MetadataMap {
        MetadataMap {
            prefixes,
            keys,
            values,
            exclude,
            manifests: false,
        }
    }

    /// The same rules for manifests (`regroup render` and `inject`): keys
    /// and label values already in the names the rules write are kept, not
    /// shadowed (a manifest holds no other copy's keys; it may have been
    /// rendered before).
    pub fn for_manifests(mut self) -> MetadataMap {
        self.manifests = true;
        self
    }

    /// The prefix rules.
    pub fn prefixes(&self) -> &[Pair] {
        &self.prefixes
    }

    /// The exact key rules.
    pub fn keys(&self) -> &[Pair] {
        &self.keys
    }

    /// The label value rules.
    pub fn values(&self) -> &[ValueRule] {
        &self.values
    }

    /// The exclusions.
    pub fn exclusions(&self) -> &[Exclusion] {
        &self.exclude
    }

    /// True when the metadata of an object of `kind` named `name`, with
    /// label `k` valued `label(k)`, is never renamed.
    pub fn excludes<'a>(
        &self,
        kind: &str,
        name: Option<&str>,
        label: impl Fn(&str) -> Option<&'a str> + Copy,
    ) -> bool {
        self.exclude.iter().any(|e| e.covers(kind, name, label))
    }

    /// Which side `key` (prefix unshadowed) is on for `dir`, and the rule's
    /// target when it is a source.
    fn side<'a>(&'a self, prefix: &str, name: &str, dir: Direction) -> (Side, Option<Target<'a>>) {
        for k in &self.keys {
            let (src, dst) = k.ends(dir);
            if split(src) == Some((prefix, name)) {
                return (Side::Source, Some(Target::Key(dst)));
            }
            if split(dst) == Some((prefix, name)) {
                return (Side::Target, None);
            }
        }
        for p in &self.prefixes {
            let (src, dst) = p.ends(dir);
            if nested_side(prefix, src, dst) {
                return (Side::Source, Some(Target::Prefix(src, dst)));
            }
            if nested_side(prefix, dst, src) {
                return (Side::Target, None);
            }
        }
        (Side::Other, None)
    }

    /// Maps a label key, annotation key or finalizer arriving in `dir`.
    /// `None`: unchanged. The result may exceed Kubernetes' limits (see
    /// [`key_problem`]); the caller refuses it then.
    pub fn map_key(&self, key: &str, dir: Direction) -> Option<String> {
        let (prefix, name) = split(key)?;
        let (base, depth) = unshadow(prefix);
        match self.side(base, name, dir) {
            (Side::Source, Some(target)) if depth == 0 => Some(target.apply(base, name)),
            (Side::Source, _) => {
                let fewer = &prefix[SHADOW_LABEL.len() + 1..];
                Some(format!("{fewer}/{name}"))
            }
            (Side::Target, _) if self.manifests => None,
            (Side::Target, _) => Some(format!("{SHADOW_LABEL}.{prefix}/{name}")),
            (Side::Other, _) => None,
        }
    }

    /// Maps the value of label `key` (in `dir`'s input names) arriving in
    /// `dir`. `None`: unchanged.
    pub fn map_value(&self, key: &str, value: &str, dir: Direction) -> Option<String> {
        if self.values.is_empty() {
            return None;
        }
        let app_key = match dir {
            Direction::ToCluster => std::borrow::Cow::Borrowed(key),
            Direction::ToApp => self
                .map_key(key, dir)
                .map_or(std::borrow::Cow::Borrowed(key), std::borrow::Cow::Owned),
        };
        let (base, depth) = unshadow_value(value);
        let mut step = None;
        for r in self.values.iter().filter(|r| r.key == app_key.as_ref()) {
            let (src, dst) = r.value.ends(dir);
            if base == src {
                step = Some(if depth == 0 {
                    Step::Rename(dst)
                } else {
                    Step::Unshadow
                });
                break;
            }
            if base == dst {
                step = Some(Step::Shadow);
                break;
            }
        }
        match step? {
            Step::Rename(dst) => Some(dst.to_owned()),
            Step::Unshadow => Some(value[..value.len() - SHADOW_VALUE.len()].to_owned()),
            Step::Shadow if self.manifests => None,
            Step::Shadow => Some(format!("{value}{SHADOW_VALUE}")),
        }
    }

    /// The strings whose absence from a body proves no key or value in it
    /// is renamed, in either direction.
    pub fn needles(&self) -> Vec<&str> {
        let mut v: Vec<&str> = Vec::new();
        for p in self.prefixes.iter().chain(&self.keys) {
            v.push(&p.app);
            v.push(&p.cluster);
        }
        for r in &self.values {
            v.push(&r.value.app);
            v.push(&r.value.cluster);
        }
        if !v.is_empty() {
            v.push(SHADOW_LABEL);
            if !self.values.is_empty() {
                v.push(SHADOW_VALUE);
            }
        }
        v
    }

    /// True when no rule is configured.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty() && self.keys.is_empty() && self.values.is_empty()
    }
}

/// True when `prefix` is on the side of a prefix rule whose names end in
/// `this` (the other side's in `that`). Sides that don't nest: every
/// prefix under `this`. When one side is nested in the other
/// (`kopf.zalando.org` and `team-b.kopf.zalando.org`), the outer side is
/// its names outside the inner one, and the inner side the names the outer
/// ones map to; what is left (`team-b.team-b.kopf.zalando.org`) is neither
/// and never renamed. So the rule stays a bijection.
fn nested_side(prefix: &str, this: &str, that: &str) -> bool {
    if !has_label_suffix(prefix, this) {
        return false;
    }
    let swap = |p: &str, from: &str, to: &str| format!("{}{to}", &p[..p.len() - from.len()]);
    if has_label_suffix(that, this) {
        // `this` is the outer side: its names outside the inner one.
        !has_label_suffix(prefix, that)
    } else if has_label_suffix(this, that) {
        // `this` is the inner side: the names the outer side's map to.
        !has_label_suffix(&swap(prefix, this, that), this)
    } else {
        true
    }
}

/// What a source key becomes.
#[derive(Clone, Copy)]
enum Target<'a> {
    /// This whole key.
    Key(&'a str),
    /// The prefix's suffix `.0` replaced by `.1`.
    Prefix(&'a str, &'a str),
}

impl Target<'_> {
    fn apply(self, prefix: &str, name: &str) -> String {
        match self {
            Target::Key(k) => k.to_owned(),
            Target::Prefix(src, dst) => {
                let head = &prefix[..prefix.len() - src.len()];
                format!("{head}{dst}/{name}")
            }
        }
    }
}

/// A qualified key's prefix and name; `None` for a key without a prefix
/// (never renamed: rules name prefixed keys only).
pub fn split(key: &str) -> Option<(&str, &str)> {
    key.split_once('/')
}

/// Why `key` is not a key Kubernetes accepts after renaming (only the
/// limits renaming can break: the prefix's and the name's lengths).
pub fn key_problem(key: &str) -> Option<String> {
    let (prefix, name) = split(key)?;
    if prefix.len() > MAX_PREFIX {
        return Some(format!(
            "its prefix is {} characters (at most {MAX_PREFIX})",
            prefix.len()
        ));
    }
    if name.len() > MAX_NAME {
        return Some(format!(
            "its name is {} characters (at most {MAX_NAME})",
            name.len()
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn pair(a: &str, c: &str) -> Pair {
        Pair {
            app: a.into(),
            cluster: c.into(),
        }
    }

    fn map() -> MetadataMap {
        MetadataMap::new(
            vec![
                pair("cert-manager.io", "cert-manager.team-b.example.com"),
                pair("kopf.zalando.org", "kopf.team-b.example.com"),
            ],
            vec![pair(
                "argocd.argoproj.io/tracking-id",
                "argocd.argoproj.io/tracking-id-team-b",
            )],
            vec![ValueRule {
                key: "app.kubernetes.io/managed-by".into(),
                value: pair("foo-operator", "foo-operator-team-b"),
            }],
            vec![
                Exclusion {
                    kind: "Secret".into(),
                    name: Some("kept".into()),
                    selector: None,
                },
                Exclusion {
                    kind: "ConfigMap".into(),
                    name: None,
                    selector: Some(
                        crate::label_selector::LabelSelector::parse("team=a,!mine").unwrap(),
                    ),
                },
            ],
        )
    }

    const C: Direction = Direction::ToCluster;
    const A: Direction = Direction::ToApp;

    #[test]
    fn prefixes_rename_on_a_label_boundary() {
        let m = map();
        assert_eq!(
            m.map_key("cert-manager.io/cluster-issuer", C).as_deref(),
            Some("cert-manager.team-b.example.com/cluster-issuer")
        );
        assert_eq!(
            m.map_key("controller.cert-manager.io/fao", C).as_deref(),
            Some("controller.cert-manager.team-b.example.com/fao")
        );
        assert_eq!(
            m.map_key("kopf.zalando.org/KopfFinalizerMarker", C)
                .as_deref(),
            Some("kopf.team-b.example.com/KopfFinalizerMarker")
        );
        // Not on a label boundary, no prefix, someone else's: unchanged.
        assert_eq!(m.map_key("xcert-manager.io/a", C), None);
        assert_eq!(m.map_key("app", C), None);
        assert_eq!(m.map_key("app.kubernetes.io/name", C), None);
        assert_eq!(
            m.map_key("cert-manager.team-b.example.com/cluster-issuer", A)
                .as_deref(),
            Some("cert-manager.io/cluster-issuer")
        );
    }

    #[test]
    fn another_copys_keys_are_shadowed_for_the_app_and_come_back_unchanged() {
        let m = map();
        // Copy A (unrenamed) wrote this on a shared object.
        let theirs = "cert-manager.io/certificate-name";
        let shown = m.map_key(theirs, A).unwrap();
        assert_eq!(shown, "regroup-shadow.cert-manager.io/certificate-name");
        // The app does not take it for its own prefix.
        assert_eq!(m.map_key(&shown, C).as_deref(), Some(theirs));
        // A key in the cluster's names written by the app itself.
        let odd = "cert-manager.team-b.example.com/x";
        let sent = m.map_key(odd, C).unwrap();
        assert_eq!(m.map_key(&sent, A).as_deref(), Some(odd));
        // Exact keys too.
        assert_eq!(
            m.map_key("argocd.argoproj.io/tracking-id", A).as_deref(),
            Some("regroup-shadow.argocd.argoproj.io/tracking-id")
        );
    }

    #[test]
    fn manifests_keep_what_is_already_renamed() {
        let m = map().for_manifests();
        let done = "cert-manager.team-b.example.com/cluster-issuer";
        assert_eq!(m.map_key(done, C), None);
        assert_eq!(
            m.map_key("cert-manager.io/cluster-issuer", C).as_deref(),
            Some(done)
        );
        let k = "app.kubernetes.io/managed-by";
        assert_eq!(m.map_value(k, "foo-operator-team-b", C), None);
        assert_eq!(
            m.map_value(k, "foo-operator", C).as_deref(),
            Some("foo-operator-team-b")
        );
    }

    #[test]
    fn values_follow_their_key() {
        let m = map();
        let k = "app.kubernetes.io/managed-by";
        assert_eq!(
            m.map_value(k, "foo-operator", C).as_deref(),
            Some("foo-operator-team-b")
        );
        assert_eq!(
            m.map_value(k, "foo-operator-team-b", A).as_deref(),
            Some("foo-operator")
        );
        assert_eq!(
            m.map_value(k, "foo-operator", A).as_deref(),
            Some("foo-operator.shadowed")
        );
        assert_eq!(m.map_value(k, "helm", C), None);
        assert_eq!(m.map_value("other", "foo-operator", C), None);
    }

    #[test]
    fn exclusions_by_kind_name_and_selector() {
        let m = map();
        let none = |_: &str| None;
        assert!(m.excludes("Secret", Some("kept"), none));
        assert!(!m.excludes("Secret", Some("other"), none));
        assert!(!m.excludes("Deployment", Some("kept"), none));
        let team_a = |k: &str| (k == "team").then_some("a");
        assert!(m.excludes("ConfigMap", Some("x"), team_a));
        assert!(!m.excludes("ConfigMap", Some("x"), none));
        let mine = |k: &str| match k {
            "team" => Some("a"),
            "mine" => Some(""),
            _ => None,
        };
        assert!(!m.excludes("ConfigMap", Some("x"), mine));
        assert!(!m.excludes("Secret", Some("x"), team_a));
    }

    fn key() -> impl Strategy<Value = String> {
        let prefix = prop_oneof![
            Just("cert-manager.io".to_string()),
            Just("acme.cert-manager.io".to_string()),
            Just("cert-manager.team-b.example.com".to_string()),
            Just("x.cert-manager.team-b.example.com".to_string()),
            Just("kopf.zalando.org".to_string()),
            Just("kopf.team-b.example.com".to_string()),
            Just("argocd.argoproj.io".to_string()),
            Just("example.com".to_string()),
            Just("".to_string()),
        ];
        (prefix, 0..3usize, "[a-z][a-z-]{0,8}").prop_map(|(p, n, name)| {
            if p.is_empty() {
                name
            } else {
                format!("{}{p}/{name}", format!("{SHADOW_LABEL}.").repeat(n))
            }
        })
    }

    /// Copy B's Kopf keys nested under Kopf's own family.
    fn nested() -> MetadataMap {
        MetadataMap::new(
            vec![Pair {
                app: "kopf.zalando.org".into(),
                cluster: "team-b.kopf.zalando.org".into(),
            }],
            vec![],
            vec![],
            vec![],
        )
    }

    #[test]
    fn a_nested_target_keeps_every_key_in_kopfs_family() {
        let m = nested();
        assert_eq!(
            m.map_key("kopf.zalando.org/last-handled-configuration", C)
                .as_deref(),
            Some("team-b.kopf.zalando.org/last-handled-configuration")
        );
        // Copy A's key (straight to the cluster), as copy B's app sees it:
        // still under `.kopf.zalando.org`, so Kopf takes it for a peer's.
        assert_eq!(
            m.map_key("kopf.zalando.org/last-handled-configuration", A)
                .as_deref(),
            Some("regroup-shadow.kopf.zalando.org/last-handled-configuration")
        );
        assert_eq!(
            m.map_key("team-b.kopf.zalando.org/x", A).as_deref(),
            Some("kopf.zalando.org/x")
        );
    }

    fn nested_key() -> impl Strategy<Value = String> {
        let prefix = prop_oneof![
            Just("kopf.zalando.org".to_string()),
            Just("team-b.kopf.zalando.org".to_string()),
            Just("team-b.team-b.kopf.zalando.org".to_string()),
            Just("other.kopf.zalando.org".to_string()),
            Just("zalando.org".to_string()),
        ];
        (prefix, 0..3usize, "[a-z][a-z-]{0,8}")
            .prop_map(|(p, n, name)| format!("{}{p}/{name}", format!("{SHADOW_LABEL}.").repeat(n)))
    }

    proptest! {
        /// With a target nested under its source, renaming one way then
        /// back is still the identity.
        #[test]
        fn nested_keys_round_trip(k in nested_key()) {
            let m = nested();
            for d in [C, A] {
                let there = m.map_key(&k, d).unwrap_or_else(|| k.clone());
                let back = m.map_key(&there, d.flip()).unwrap_or_else(|| there.clone());
                prop_assert_eq!(&back, &k);
            }
        }

        /// Renaming one way then back is the identity, for every key.
        #[test]
        fn keys_round_trip(k in key()) {
            let m = map();
            for d in [C, A] {
                let there = m.map_key(&k, d).unwrap_or_else(|| k.clone());
                let back = m.map_key(&there, d.flip()).unwrap_or_else(|| there.clone());
                prop_assert_eq!(&back, &k);
            }
        }

        #[test]
        fn values_round_trip(v in prop_oneof![
            Just("foo-operator".to_string()),
            Just("foo-operator-team-b".to_string()),
            Just("helm".to_string()),
        ], n in 0..3usize) {
            let m = map();
            let k = "app.kubernetes.io/managed-by";
            let v = format!("{v}{}", SHADOW_VALUE.repeat(n));
            for d in [C, A] {
                let key_there = m.map_key(k, d).unwrap_or_else(|| k.to_string());
                let there = m.map_value(k, &v, d).unwrap_or_else(|| v.clone());
                let back = m.map_value(&key_there, &there, d.flip()).unwrap_or_else(|| there.clone());
                prop_assert_eq!(&back, &v);
            }
        }
    }
}
