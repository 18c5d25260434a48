//! Names of cluster-scoped objects, renamed per copy of an app (the
//! config's `names:`).
//!
//! Two copies of one app create ClusterRoles, webhook configurations and
//! the like under the same fixed names, and would overwrite each other's.
//! With `names:`, every name of a listed kind gets the copy's prefix (or
//! suffix) on the cluster and loses it on the way back: the app writes and
//! reads `foo-editor`, the cluster stores `team1-foo-editor`. Names the
//! cluster itself owns (`system:*`, the default ClusterRoles, the `keep`
//! list) are never renamed, so the app can still bind `view` or
//! `system:auth-delegator`. Toward the app, an object of a listed kind
//! whose cluster name is neither the copy's nor kept is **hidden** (another
//! copy's, or the app's name without a prefix): the app could not address
//! it, so it must not list it either.

use std::fmt;

/// A cluster-scoped kind whose names can be renamed: its group, kind and
/// resource (plural).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct NamedKind {
    /// API group (`rbac.authorization.k8s.io`).
    pub group: &'static str,
    /// Kind (`ClusterRole`).
    pub kind: &'static str,
    /// Resource (`clusterroles`).
    pub resource: &'static str,
}

const fn k(group: &'static str, kind: &'static str, resource: &'static str) -> NamedKind {
    NamedKind {
        group,
        kind,
        resource,
    }
}

const RBAC: &str = "rbac.authorization.k8s.io";
const COORDINATION: &str = "coordination.k8s.io";
const ADMREG: &str = "admissionregistration.k8s.io";
const SCHEDULING: &str = "scheduling.k8s.io";
const NODE: &str = "node.k8s.io";

/// Strings that every body able to reference a PriorityClass or a
/// RuntimeClass holds: the kinds whose pod spec names one (`Pod` also
/// matches `PodTemplate`, `Job` also `CronJob`; their lists and watch
/// events name them too) as their envelope's TypeMeta or their JSON `kind`
/// says, and the JSON field itself, for partial bodies (a merge patch
/// names no kind).
const POD_SPEC_HOLDERS: &[&str] = &[
    "Pod",
    "ReplicationController",
    "Deployment",
    "ReplicaSet",
    "StatefulSet",
    "DaemonSet",
    "Job",
];

/// The kinds `names.kinds` may list: cluster-scoped kinds that apps create
/// under fixed names, whose every reference regroup knows (the catalog's
/// name places).
pub const SUPPORTED: &[NamedKind] = &[
    k(RBAC, "ClusterRole", "clusterroles"),
    k(RBAC, "ClusterRoleBinding", "clusterrolebindings"),
    k(
        ADMREG,
        "ValidatingWebhookConfiguration",
        "validatingwebhookconfigurations",
    ),
    k(
        ADMREG,
        "MutatingWebhookConfiguration",
        "mutatingwebhookconfigurations",
    ),
    k(
        ADMREG,
        "ValidatingAdmissionPolicy",
        "validatingadmissionpolicies",
    ),
    k(
        ADMREG,
        "ValidatingAdmissionPolicyBinding",
        "validatingadmissionpolicybindings",
    ),
    k(
        ADMREG,
        "MutatingAdmissionPolicy",
        "mutatingadmissionpolicies",
    ),
    k(
        ADMREG,
        "MutatingAdmissionPolicyBinding",
        "mutatingadmissionpolicybindings",
    ),
    k(SCHEDULING, "PriorityClass", "priorityclasses"),
    k(NODE, "RuntimeClass", "runtimeclasses"),
];

/// The namespaced kinds `names.namespaced.kinds` may list: kinds apps
/// create under a fixed name in their own namespace to coordinate their
/// replicas (client-go's and Kopf's leader election: a Lease, or a
/// ConfigMap in older versions). Only the names listed in
/// `names.namespaced.names` are renamed: the other objects of these kinds
/// in a shared namespace belong to everyone.
pub const SUPPORTED_NAMESPACED: &[NamedKind] = &[
    k(COORDINATION, "Lease", "leases"),
    k("", "ConfigMap", "configmaps"),
    // What an app puts into a namespace it shares with other copies
    // (`kube-system`): the Role and RoleBinding that let it take its
    // leader-election Lease there.
    k(RBAC, "Role", "roles"),
    k(RBAC, "RoleBinding", "rolebindings"),
];

/// The namespaces an app shares with every other copy when the config
/// names none (`names.sharedNamespaces`).
pub const DEFAULT_SHARED_NAMESPACES: &[&str] = &["kube-system"];

/// Names in a shared namespace that the cluster owns and apps refer to:
/// never given a copy's mark when read from manifests (besides `system:*`
/// and `names.keep`).
pub const CLUSTER_OWNED_NAMESPACED: &[&str] = &[
    "extension-apiserver-authentication",
    "extension-apiserver-authentication-reader",
    "kube-root-ca.crt",
];

/// What is wrong with `name` as the name of an RBAC object (a path
/// segment: not empty, no `/` or `%`, not `.` or `..`).
fn path_segment_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        Some("must not be empty")
    } else if name == "." || name == ".." {
        Some("may not be `.` or `..`")
    } else if name.contains('/') || name.contains('%') {
        Some("may not contain `/` or `%`")
    } else {
        None
    }
}

/// Fixed names of namespaced kinds renamed per copy (`names.namespaced`).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Fixed {
    kinds: Vec<NamedKind>,
    names: Vec<String>,
}

/// The kinds renamed when the config gives no `names.kinds` (or no
/// `names:` at all): the cluster-scoped kinds apps register under fixed
/// names at run time (Kopf's `auto.kopf.dev`, an operator's ClusterRoles).
/// PriorityClass and RuntimeClass are left out: their names sit in every
/// pod spec, which makes workload bodies cost more (`docs/config.md`).
pub const DEFAULT_KINDS: &[&str] = &[
    "ClusterRole",
    "ClusterRoleBinding",
    "ValidatingWebhookConfiguration",
    "MutatingWebhookConfiguration",
    "ValidatingAdmissionPolicy",
    "ValidatingAdmissionPolicyBinding",
    "MutatingAdmissionPolicy",
    "MutatingAdmissionPolicyBinding",
];

/// The prefix of a copy whose config names none, for people to read: the
/// labels its cluster groups add to the app's groups, joined by `-`
/// (`samplecontroller.k8s.io` -> `samplecontroller.team-b.example.com`
/// gives `team-b-example-com-`). Two copies of one app map its groups to
/// cluster groups that must differ, so their prefixes differ too.
///
/// Kept stable as rules come and go: the labels every rule adds, in the
/// order of the first rule (by app side), so a copy's usual scheme (one
/// team's suffix on every group) keeps its prefix when a group is added;
/// only rules with nothing in common fall back to the first rule's labels.
/// At most [`DERIVED_MAX`] characters, cut at a label. `names.prefix` pins
/// it, and `regroup inject` pins it in the sidecar's configuration.
///
/// `rules` are (app side, cluster side) pairs, the groups or suffixes of
/// the rules in any order.
pub fn derived_prefix(rules: &[(&str, &str)]) -> String {
    let mut sides: Vec<&(&str, &str)> = rules.iter().collect();
    sides.sort_by(|a, b| a.0.cmp(b.0).then(a.1.cmp(b.1)));
    let added = |(app, cluster): &(&str, &str)| -> Vec<String> {
        let app: Vec<&str> = app.split('.').collect();
        cluster
            .split('.')
            .filter(|l| !l.is_empty() && !app.contains(l))
            .map(str::to_owned)
            .collect()
    };
    let first = sides.first().map(|r| added(r)).unwrap_or_default();
    let common: Vec<String> = first
        .iter()
        .filter(|l| sides.iter().all(|r| added(r).contains(l)))
        .cloned()
        .collect();
    let labels = if common.is_empty() { first } else { common };
    let mut out = String::new();
    for l in &labels {
        let l = l.trim_matches('-');
        if l.is_empty() {
            continue;
        }
        if !out.is_empty() && out.len() + 1 + l.len() > DERIVED_MAX {
            break;
        }
        if !out.is_empty() {
            out.push('-');
        }
        out.push_str(&l[..l.len().min(DERIVED_MAX)]);
    }
    if out.is_empty() {
        out.push_str("regroup");
    }
    out.push('-');
    out
}

/// Most characters of a derived prefix, before its final `-`.
pub const DERIVED_MAX: usize = 30;

/// The prefix regroup derived before it derived readable ones (the first
/// added label and 8 hex digits of an FNV-1a hash of every cluster-side
/// group: `team-b-8286340e-`), for `regroup check` to name: a copy that ran
/// with it keeps its objects by pinning it.
pub fn earlier_derived_prefix(rules: &[(&str, &str)]) -> String {
    let mut sides: Vec<&(&str, &str)> = rules.iter().collect();
    sides.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
    let label = sides
        .first()
        .and_then(|(app, cluster)| {
            let app: Vec<&str> = app.split('.').collect();
            cluster
                .split('.')
                .find(|l| !l.is_empty() && !app.contains(l))
        })
        .unwrap_or("regroup");
    let label: String = label.chars().take(20).collect();
    let label = label.trim_end_matches('-');
    let mut hash: u32 = 0x811c_9dc5;
    for (i, (_, cluster)) in sides.iter().enumerate() {
        if i > 0 {
            hash ^= u32::from(b'\n');
            hash = hash.wrapping_mul(0x0100_0193);
        }
        for b in cluster.bytes() {
            hash ^= u32::from(b);
            hash = hash.wrapping_mul(0x0100_0193);
        }
    }
    format!("{label}-{hash:08x}-")
}

/// Names kept as they are whatever the config says: the cluster's own
/// (every `system:` name, the user-facing default ClusterRoles, the two
/// PriorityClasses every cluster creates, `system-` with a dash), which an
/// app binds or names but never owns.
pub const ALWAYS_KEPT: &[&str] = &[
    "cluster-admin",
    "admin",
    "edit",
    "view",
    "system-cluster-critical",
    "system-node-critical",
];

/// Where the copy's mark goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Affix {
    /// `team1-` + name.
    Prefix(String),
    /// name + `-team1`.
    Suffix(String),
}

/// An app's `generateName` where the copy's mark is a suffix: the cluster
/// appends random characters after it, so the name would not end in the
/// suffix. Holds the `generateName`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`metadata.generateName` can't be used with `names.suffix`: the cluster appends \
     random characters after it, so the name would not end in the suffix \
     (use `names.prefix`, or give the object a name; generateName `{0}`)"
)]
pub struct GenerateNameWithSuffix(pub String);

/// The validated `names:` section.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ObjectNames {
    affix: Affix,
    kinds: Vec<NamedKind>,
    keep: Vec<String>,
    derived: bool,
    /// Manifests (`render`, `inject`): a name that already carries this
    /// copy's mark is left as it is, so rendering twice changes nothing.
    idempotent: bool,
    /// Fixed names of namespaced kinds (`names.namespaced`), if any.
    fixed: Option<Fixed>,
}

/// Why a `names:` section was refused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NamesProblem(pub String);

impl fmt::Display for NamesProblem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// True when `s` may start or end a Kubernetes object name once joined to
/// one: lower-case alphanumerics, `-`, `.` and `:` (RBAC names), not empty.
fn affix_problem(s: &str) -> Option<&'static str> {
    if s.is_empty() {
        return Some("is empty");
    }
    if !s
        .bytes()
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
    {
        return Some("may hold only lower-case letters, digits, `-` and `.`");
    }
    None
}

impl ObjectNames {
    /// Validates a `names:` section: exactly one of `prefix`/`suffix`,
    /// kinds from [`SUPPORTED`] (by kind name), no `system:` name in `keep`
    /// (those are kept anyway).
    pub fn new(
        prefix: Option<&str>,
        suffix: Option<&str>,
        kinds: &[String],
        keep: &[String],
    ) -> Result<ObjectNames, Vec<NamesProblem>> {
        let mut problems = Vec::new();
        let affix = match (prefix, suffix) {
            (Some(p), None) => Some(Affix::Prefix(p.to_owned())),
            (None, Some(s)) => Some(Affix::Suffix(s.to_owned())),
            (Some(_), Some(_)) => {
                problems.push(NamesProblem(
                    "names: give either `prefix` or `suffix`, not both".into(),
                ));
                None
            }
            (None, None) => {
                problems.push(NamesProblem("names: needs a `prefix` or a `suffix`".into()));
                None
            }
        };
        for (what, v) in [("prefix", prefix), ("suffix", suffix)] {
            if let Some(p) = v.and_then(affix_problem) {
                problems.push(NamesProblem(format!("names.{what}: {p}")));
            }
        }
        if kinds.is_empty() {
            problems.push(NamesProblem(
                "names.kinds: list the kinds whose names are renamed".into(),
            ));
        }
        let mut listed = Vec::new();
        for kind in kinds {
            match SUPPORTED.iter().find(|s| s.kind == kind) {
                Some(s) if !listed.contains(s) => listed.push(*s),
                Some(_) => {}
                None => problems.push(NamesProblem(format!(
                    "names.kinds: `{kind}` is not supported; the supported kinds are {}",
                    SUPPORTED
                        .iter()
                        .map(|s| s.kind)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        }
        for name in keep {
            if name.is_empty() {
                problems.push(NamesProblem("names.keep: an empty name".into()));
            }
        }
        match affix {
            Some(affix) if problems.is_empty() => Ok(ObjectNames {
                affix,
                kinds: listed,
                keep: keep.to_vec(),
                derived: false,
                idempotent: false,
                fixed: None,
            }),
            _ => Err(problems),
        }
    }

    /// [`new`](Self::new) with the prefix [`derived_prefix`] made from the
    /// rules: what a config without `names.prefix`/`suffix` gets.
    pub fn derived(
        rules: &[(&str, &str)],
        kinds: &[String],
        keep: &[String],
    ) -> Result<ObjectNames, Vec<NamesProblem>> {
        let mut n = ObjectNames::new(Some(&derived_prefix(rules)), None, kinds, keep)?;
        n.derived = true;
        Ok(n)
    }

    /// These names, also renaming `names` in objects of the namespaced
    /// `kinds` (from [`SUPPORTED_NAMESPACED`]): the app's `foo-lock` Lease
    /// is the copy's `team1-foo-lock` in the same namespace.
    pub fn with_fixed(
        mut self,
        kinds: &[String],
        names: &[String],
    ) -> Result<ObjectNames, Vec<NamesProblem>> {
        let mut problems = Vec::new();
        let mut listed = Vec::new();
        for kind in kinds {
            match SUPPORTED_NAMESPACED.iter().find(|s| s.kind == kind) {
                Some(s) if !listed.contains(s) => listed.push(*s),
                Some(_) => {}
                None => problems.push(NamesProblem(format!(
                    "names.namespaced.kinds: `{kind}` is not supported; the supported kinds are {}",
                    SUPPORTED_NAMESPACED
                        .iter()
                        .map(|s| s.kind)
                        .collect::<Vec<_>>()
                        .join(", ")
                ))),
            }
        }
        if kinds.is_empty() {
            problems.push(NamesProblem(
                "names.namespaced.kinds: list the kinds whose fixed names are renamed".into(),
            ));
        }
        if names.is_empty() {
            problems.push(NamesProblem(
                "names.namespaced.names: list the fixed names to rename".into(),
            ));
        }
        // RBAC names are path segments (`cert-manager:leaderelection`);
        // every other kind's a DNS subdomain.
        let rbac_only = !listed.is_empty() && listed.iter().all(|k| k.group == RBAC);
        let rbac = listed.iter().any(|k| k.group == RBAC);
        for (i, name) in names.iter().enumerate() {
            let marked = match &self.affix {
                Affix::Prefix(p) => format!("{p}{name}"),
                Affix::Suffix(x) => format!("{name}{x}"),
            };
            let segment = rbac && path_segment_problem(name).is_none();
            if rbac_only || (segment && name.contains(':')) {
                if let Some(p) = path_segment_problem(name) {
                    problems.push(NamesProblem(format!(
                        "names.namespaced.names: `{name}` is not an object name: {p}"
                    )));
                }
            } else if let Some(p) = crate::dns::subdomain_problem(name) {
                problems.push(NamesProblem(format!(
                    "names.namespaced.names: `{name}` is not an object name: {p}"
                )));
            } else if let Some(p) = crate::dns::subdomain_problem(&marked) {
                problems.push(NamesProblem(format!(
                    "names.namespaced.names: `{name}` on the cluster would be `{marked}`, which \
                     is not an object name: {p}"
                )));
            }
            if names[..i].contains(name) {
                problems.push(NamesProblem(format!(
                    "names.namespaced.names: `{name}` is listed twice"
                )));
            }
            // `team1-x` listed with `x` would be both this copy's `x` and itself.
            if names.contains(&marked) {
                problems.push(NamesProblem(format!(
                    "names.namespaced.names: `{marked}` is `{name}` with this copy's mark: list \
                     one of them"
                )));
            }
        }
        if !problems.is_empty() {
            return Err(problems);
        }
        self.fixed = Some(Fixed {
            kinds: listed,
            names: names.to_vec(),
        });
        Ok(self)
    }

    /// These names with `kinds` and `names` added to their fixed names
    /// (each once): what `render` and `inject` find in the namespaces the
    /// app shares with other copies.
    pub fn with_more_fixed(
        self,
        kinds: &[&str],
        names: &[String],
    ) -> Result<ObjectNames, Vec<NamesProblem>> {
        let (mut all_kinds, mut all_names): (Vec<String>, Vec<String>) = match &self.fixed {
            Some(f) => (
                f.kinds.iter().map(|k| k.kind.to_owned()).collect(),
                f.names.clone(),
            ),
            None => (Vec::new(), Vec::new()),
        };
        for k in kinds {
            if !all_kinds.iter().any(|a| a == k) {
                all_kinds.push((*k).to_owned());
            }
        }
        for n in names {
            if !all_names.contains(n) {
                all_names.push(n.clone());
            }
        }
        if all_names.is_empty() {
            return Ok(self);
        }
        self.with_fixed(&all_kinds, &all_names)
    }

    /// True when `name` carries this copy's mark (a name `render` made).
    pub fn is_marked(&self, name: &str) -> bool {
        match &self.affix {
            Affix::Prefix(p) => name.len() > p.len() && name.starts_with(p.as_str()),
            Affix::Suffix(s) => name.len() > s.len() && name.ends_with(s.as_str()),
        }
    }

    /// `name` without this copy's mark, whatever it is (`None` when it
    /// carries none): the app's name of a name `render` marked.
    pub fn fixed_to_app_unlisted(&self, name: &str) -> Option<String> {
        let stripped = match &self.affix {
            Affix::Prefix(p) => name.strip_prefix(p.as_str()),
            Affix::Suffix(s) => name.strip_suffix(s.as_str()),
        }?;
        (!stripped.is_empty()).then(|| stripped.to_owned())
    }

    /// True when a namespaced object named `name` in a shared namespace
    /// belongs to the cluster (`system:*`, [`CLUSTER_OWNED_NAMESPACED`],
    /// `names.keep`): manifests never give it the copy's mark.
    pub fn keeps_shared(&self, name: &str) -> bool {
        name.starts_with("system:")
            || CLUSTER_OWNED_NAMESPACED.contains(&name)
            || self.keep.iter().any(|k| k == name)
    }

    /// The namespaced kinds whose fixed names are renamed, and the names.
    pub fn fixed(&self) -> Option<(&[NamedKind], &[String])> {
        self.fixed
            .as_ref()
            .map(|f| (f.kinds.as_slice(), f.names.as_slice()))
    }

    /// True when objects of `group`/`kind` have fixed names renamed.
    pub fn fixes_kind(&self, group: &str, kind: &str) -> bool {
        self.fixed
            .as_ref()
            .is_some_and(|f| f.kinds.iter().any(|k| k.group == group && k.kind == kind))
    }

    /// True when objects served at `group`/`resource` have fixed names
    /// renamed (URLs, `metadata.name` field selectors).
    pub fn fixes_resource(&self, group: &str, resource: &str) -> bool {
        self.fixed.as_ref().is_some_and(|f| {
            f.kinds
                .iter()
                .any(|k| k.group == group && k.resource == resource)
        })
    }

    /// True when objects of `group`/`kind` have their names renamed,
    /// every name ([`covers_kind`](Self::covers_kind)) or fixed ones.
    pub fn involves_kind(&self, group: &str, kind: &str) -> bool {
        self.covers_kind(group, kind) || self.fixes_kind(group, kind)
    }

    /// `name` without the copy's mark, if it carries it.
    fn unmarked<'n>(&self, name: &'n str) -> Option<&'n str> {
        match &self.affix {
            Affix::Prefix(p) => name.strip_prefix(p.as_str()),
            Affix::Suffix(s) => name.strip_suffix(s.as_str()),
        }
        .filter(|n| !n.is_empty())
    }

    /// True when `name` is a fixed name under zero or more marks
    /// (`cert-manager-controller`, `team-b-cert-manager-controller`, ...).
    fn is_fixed_family(&self, name: &str) -> bool {
        let Some(f) = self.fixed.as_ref() else {
            return false;
        };
        let mut n = name;
        loop {
            if f.names.iter().any(|x| x == n) {
                return true;
            }
            match self.unmarked(n) {
                Some(shorter) => n = shorter,
                None => return false,
            }
        }
    }

    /// The cluster's name for the app's fixed `name`; `None` for every
    /// other name (it stays). A fixed name gets the mark; so does a name
    /// that already carries it over a fixed one (the app's
    /// `team-b-cert-manager-controller` is the cluster's
    /// `team-b-team-b-cert-manager-controller`), so the app never reaches
    /// its own fixed object under a second name: one to one, as `to_cluster`.
    /// In manifests ([`for_manifests`](Self::for_manifests)) a marked name
    /// stays, so rendering again changes nothing.
    pub fn fixed_to_cluster(&self, name: &str) -> Option<String> {
        if !self.is_fixed_family(name) {
            return None;
        }
        let marked = self.unmarked(name).is_some_and(|n| self.is_fixed_family(n));
        if self.idempotent && marked {
            return None;
        }
        Some(match &self.affix {
            Affix::Prefix(p) => format!("{p}{name}"),
            Affix::Suffix(s) => format!("{name}{s}"),
        })
    }

    /// The app's fixed name for the cluster's `name`, when it is this
    /// copy's (one mark removed); `None` for every other name.
    pub fn fixed_to_app(&self, name: &str) -> Option<String> {
        self.unmarked(name)
            .filter(|n| self.is_fixed_family(n))
            .map(str::to_owned)
    }

    /// True when the cluster's object `name` (of a kind with fixed names)
    /// must not be shown to the app: it is one of the fixed names as it
    /// is, another copy's (or a copy run without regroup). The app's own
    /// is the marked one; showing both would give the app two objects of
    /// one name.
    pub fn hides_fixed(&self, name: &str) -> bool {
        self.fixed
            .as_ref()
            .is_some_and(|f| f.names.iter().any(|n| n == name))
    }

    /// The kinds renamed by default, as the config would list them.
    pub fn default_kinds() -> Vec<String> {
        DEFAULT_KINDS.iter().map(|k| k.to_string()).collect()
    }

    /// These names for manifests: a name already marked as this copy's is
    /// left as it is toward the cluster, so that rendering (or `inject`)
    /// output again changes nothing. Not for the proxy, where the app's
    /// names must map one to one.
    pub fn for_manifests(mut self) -> ObjectNames {
        self.idempotent = true;
        self
    }

    /// True when the prefix was derived from the rules, not configured.
    pub fn is_derived(&self) -> bool {
        self.derived
    }

    /// The copy's mark.
    pub fn affix(&self) -> &Affix {
        &self.affix
    }

    /// The listed kinds.
    pub fn kinds(&self) -> &[NamedKind] {
        &self.kinds
    }

    /// The config's `keep` list (besides [`ALWAYS_KEPT`] and `system:*`).
    pub fn keep(&self) -> &[String] {
        &self.keep
    }

    /// True when objects of `group`/`kind` have their names renamed.
    pub fn covers_kind(&self, group: &str, kind: &str) -> bool {
        self.kinds
            .iter()
            .any(|k| k.group == group && k.kind == kind)
    }

    /// True when objects served at `group`/`resource` have their names
    /// renamed (URLs, `metadata.name` field selectors, a Status's details).
    pub fn covers_resource(&self, group: &str, resource: &str) -> bool {
        self.kinds
            .iter()
            .any(|k| k.group == group && k.resource == resource)
    }

    /// True when `name` is never renamed: a `system:` name, a default
    /// ClusterRole, or one of `keep`.
    pub fn is_kept(&self, name: &str) -> bool {
        name.starts_with("system:")
            || ALWAYS_KEPT.contains(&name)
            || self.keep.iter().any(|k| k == name)
    }

    /// The cluster's name for the app's `name`; `None` when it is kept.
    pub fn to_cluster(&self, name: &str) -> Option<String> {
        if name.is_empty() || self.is_kept(name) || (self.idempotent && self.to_app(name).is_some())
        {
            return None;
        }
        Some(match &self.affix {
            Affix::Prefix(p) => format!("{p}{name}"),
            Affix::Suffix(s) => format!("{name}{s}"),
        })
    }

    /// The app's name for the cluster's `name`; `None` when it is not this
    /// copy's (kept, or another's: see [`hides`](Self::hides)).
    pub fn to_app(&self, name: &str) -> Option<String> {
        let stripped = match &self.affix {
            Affix::Prefix(p) => name.strip_prefix(p.as_str()),
            Affix::Suffix(s) => name.strip_suffix(s.as_str()),
        }?;
        // `team1-view` is not the app's `view`: that one is kept.
        (!stripped.is_empty() && !self.is_kept(stripped)).then(|| stripped.to_owned())
    }

    /// The cluster's `generateName` for the app's: a prefix can lead it,
    /// a suffix can't follow the random part the apiserver appends
    /// (`Err`: say so to the app).
    pub fn generate_name_to_cluster(
        &self,
        generate_name: &str,
    ) -> Result<String, GenerateNameWithSuffix> {
        match &self.affix {
            Affix::Prefix(p) if self.idempotent && generate_name.starts_with(p.as_str()) => {
                Ok(generate_name.to_owned())
            }
            Affix::Prefix(p) => Ok(format!("{p}{generate_name}")),
            Affix::Suffix(_) => Err(GenerateNameWithSuffix(generate_name.to_owned())),
        }
    }

    /// The app's `generateName` for the cluster's (its prefix removed).
    pub fn generate_name_to_app(&self, generate_name: &str) -> Option<String> {
        match &self.affix {
            Affix::Prefix(p) => generate_name.strip_prefix(p.as_str()).map(str::to_owned),
            Affix::Suffix(_) => None,
        }
    }

    /// True when the cluster's object `name` (of a listed kind) must not be
    /// shown to the app: it is neither this copy's nor kept.
    pub fn hides(&self, name: &str) -> bool {
        !self.is_kept(name) && self.to_app(name).is_none()
    }

    /// Strings whose absence from a body proves no name in it is renamed
    /// or hidden: the listed kinds (an object's own `kind`, a reference's
    /// `kind`). Bodies that name their kind nowhere (a list's items, a
    /// metadata-only answer) are recognised by the kind they were asked
    /// for, not by these. A PriorityClass or RuntimeClass is referenced by
    /// a pod spec, whose body names neither (and protobuf carries no field
    /// names): its needles are the kinds holding a pod spec and the JSON
    /// field (`priorityClassName`), so every workload body is walked whole
    /// when one of these kinds is listed.
    pub fn needles(&self) -> Vec<&'static str> {
        let mut out: Vec<&'static str> = self.kinds.iter().map(|k| k.kind).collect();
        for k in &self.kinds {
            let field = match k.kind {
                "PriorityClass" => "priorityClassName",
                "RuntimeClass" => "runtimeClassName",
                _ => continue,
            };
            out.push(field);
            out.extend(POD_SPEC_HOLDERS);
        }
        if let Some(f) = &self.fixed {
            out.extend(f.kinds.iter().map(|k| k.kind));
        }
        // An access review names an object by its resource and name
        // (`spec.resourceAttributes`): every one is walked.
        out.push("SubjectAccessReview");
        let mut seen = Vec::new();
        out.retain(|n| {
            let new = !seen.contains(n);
            seen.push(*n);
            new
        });
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(prefix: Option<&str>, suffix: Option<&str>) -> ObjectNames {
        ObjectNames::new(
            prefix,
            suffix,
            &[
                "ClusterRole".into(),
                "ValidatingWebhookConfiguration".into(),
            ],
            &["shared-reader".into()],
        )
        .unwrap()
    }

    #[test]
    fn a_prefix_goes_on_toward_the_cluster_and_comes_off_toward_the_app() {
        let n = names(Some("team1-"), None);
        assert_eq!(
            n.to_cluster("foo-editor").as_deref(),
            Some("team1-foo-editor")
        );
        assert_eq!(n.to_app("team1-foo-editor").as_deref(), Some("foo-editor"));
        assert_eq!(n.to_app("foo-editor"), None);
        assert_eq!(n.to_app("team2-foo-editor"), None);
        assert!(n.hides("foo-editor"));
        assert!(n.hides("team2-foo-editor"));
        assert!(!n.hides("team1-foo-editor"));
    }

    #[test]
    fn a_suffix_goes_at_the_end() {
        let n = names(None, Some("-team1"));
        assert_eq!(n.to_cluster("foo").as_deref(), Some("foo-team1"));
        assert_eq!(n.to_app("foo-team1").as_deref(), Some("foo"));
        assert_eq!(n.to_app("-team1"), None);
        assert!(n.generate_name_to_cluster("foo-").is_err());
    }

    #[test]
    fn the_clusters_own_names_are_kept_both_ways_and_never_hidden() {
        let n = names(Some("team1-"), None);
        for kept in [
            "view",
            "cluster-admin",
            "system:auth-delegator",
            "shared-reader",
        ] {
            assert_eq!(n.to_cluster(kept), None, "{kept}");
            assert_eq!(n.to_app(kept), None, "{kept}");
            assert!(!n.hides(kept), "{kept}");
        }
        // Not the app's `view` (that one is kept): another object, hidden.
        assert_eq!(n.to_app("team1-view"), None);
        assert!(n.hides("team1-view"));
    }

    #[test]
    fn for_manifests_a_name_already_marked_is_left_as_it_is() {
        let n = names(Some("team1-"), None);
        assert_eq!(n.to_cluster("team1-x").as_deref(), Some("team1-team1-x"));
        let m = n.for_manifests();
        assert_eq!(m.to_cluster("x").as_deref(), Some("team1-x"));
        assert_eq!(m.to_cluster("team1-x"), None);
        assert_eq!(m.generate_name_to_cluster("team1-x-").unwrap(), "team1-x-");
        assert_eq!(m.generate_name_to_cluster("x-").unwrap(), "team1-x-");
    }

    #[test]
    fn generate_name_takes_the_prefix() {
        let n = names(Some("team1-"), None);
        assert_eq!(n.generate_name_to_cluster("foo-").unwrap(), "team1-foo-");
        assert_eq!(
            n.generate_name_to_app("team1-foo-").as_deref(),
            Some("foo-")
        );
    }

    #[test]
    fn kinds_and_resources_are_covered_only_when_listed() {
        let n = names(Some("team1-"), None);
        assert!(n.covers_kind(RBAC, "ClusterRole"));
        assert!(!n.covers_kind(RBAC, "ClusterRoleBinding"));
        assert!(n.covers_resource(ADMREG, "validatingwebhookconfigurations"));
        assert!(!n.covers_resource(ADMREG, "mutatingwebhookconfigurations"));
        assert_eq!(
            n.needles(),
            vec![
                "ClusterRole",
                "ValidatingWebhookConfiguration",
                "SubjectAccessReview"
            ]
        );
    }

    #[test]
    fn priority_and_runtime_classes_are_found_by_the_kinds_that_reference_them() {
        let n = ObjectNames::new(
            Some("team1-"),
            None,
            &["PriorityClass".into(), "RuntimeClass".into()],
            &[],
        )
        .unwrap();
        assert!(n.covers_resource(SCHEDULING, "priorityclasses"));
        assert!(n.covers_kind(NODE, "RuntimeClass"));
        assert_eq!(
            n.needles(),
            vec![
                "PriorityClass",
                "RuntimeClass",
                "priorityClassName",
                "Pod",
                "ReplicationController",
                "Deployment",
                "ReplicaSet",
                "StatefulSet",
                "DaemonSet",
                "Job",
                "runtimeClassName",
                "SubjectAccessReview",
            ]
        );
        // The cluster's default PriorityClasses (a dash, not `system:`).
        for kept in ["system-cluster-critical", "system-node-critical"] {
            assert_eq!(n.to_cluster(kept), None, "{kept}");
            assert!(!n.hides(kept), "{kept}");
        }
        assert_eq!(
            n.to_cluster("system-other").as_deref(),
            Some("team1-system-other")
        );
    }

    #[test]
    fn a_fixed_name_maps_one_to_one_also_under_the_mark() {
        let n = ObjectNames::new(Some("team-b-"), None, &ObjectNames::default_kinds(), &[])
            .unwrap()
            .with_fixed(&["Lease".to_owned()], &["cm-controller".to_owned()])
            .unwrap();
        assert_eq!(
            n.fixed_to_cluster("cm-controller").as_deref(),
            Some("team-b-cm-controller")
        );
        // The app naming the cluster's name of its own Lease does not
        // reach it under a second name: another name, which no object has.
        assert_eq!(
            n.fixed_to_cluster("team-b-cm-controller").as_deref(),
            Some("team-b-team-b-cm-controller")
        );
        assert_eq!(n.fixed_to_cluster("other"), None);
        assert_eq!(n.fixed_to_cluster("team-b-other"), None);
        // Back: one mark off; the bare fixed name is hidden.
        assert_eq!(
            n.fixed_to_app("team-b-cm-controller").as_deref(),
            Some("cm-controller")
        );
        assert_eq!(
            n.fixed_to_app("team-b-team-b-cm-controller").as_deref(),
            Some("team-b-cm-controller")
        );
        assert_eq!(n.fixed_to_app("team-b-other"), None);
        assert!(n.hides_fixed("cm-controller"));
        // Manifests: an already-marked name stays.
        let m = n.for_manifests();
        assert_eq!(m.fixed_to_cluster("team-b-cm-controller"), None);
        assert_eq!(
            m.fixed_to_cluster("cm-controller").as_deref(),
            Some("team-b-cm-controller")
        );
    }

    #[test]
    fn a_derived_prefix_is_readable_and_differs_between_copies() {
        let a = derived_prefix(&[(
            "samplecontroller.k8s.io",
            "samplecontroller.team-a.example.com",
        )]);
        let b = derived_prefix(&[(
            "samplecontroller.k8s.io",
            "samplecontroller.team-b.example.com",
        )]);
        assert_eq!(a, "team-a-example-com-");
        assert_eq!(b, "team-b-example-com-");
        // The same first label, other cluster groups: still distinct.
        let c = derived_prefix(&[("kopf.dev", "kopf.team.example.org")]);
        let d = derived_prefix(&[("kopf.dev", "kopf.team.example.net")]);
        assert_ne!(c, d);
        // Order never matters, as for the rules themselves.
        let two = [
            ("a.k8s.io", "a.t1.example.com"),
            ("b.k8s.io", "b.t1.example.com"),
        ];
        let owt = [two[1], two[0]];
        assert_eq!(derived_prefix(&two), derived_prefix(&owt));
        assert_eq!(derived_prefix(&two), "t1-example-com-");
        // Stable as groups are added in the copy's scheme, even one whose
        // app side sorts first.
        let three = [two[0], two[1], ("0.k8s.io", "0.x.t1.example.com")];
        assert_eq!(derived_prefix(&three), "t1-example-com-");
        // Suffix rules read the same way.
        assert_eq!(
            derived_prefix(&[("pinniped.dev", "pinniped.team-b.example.com")]),
            "team-b-example-com-"
        );
        // Nothing new in the cluster's name: a fixed word.
        assert_eq!(
            derived_prefix(&[("x.example.com", "example.com")]),
            "regroup-"
        );
        // Long names are cut at a label.
        let long = derived_prefix(&[(
            "a.io",
            "a.platform-engineering.very-long-department.example.com",
        )]);
        assert_eq!(long, "platform-engineering-");
        // What earlier versions derived, for `check` to name.
        assert_eq!(
            earlier_derived_prefix(&[(
                "samplecontroller.k8s.io",
                "samplecontroller.team1.example.com"
            )]),
            "team1-2227b83a-"
        );
        let n = ObjectNames::derived(
            &[("kopf.dev", "kopf.team-b.example.com")],
            &ObjectNames::default_kinds(),
            &[],
        )
        .unwrap();
        assert!(n.is_derived());
        let cluster = n.to_cluster("auto.kopf.dev").unwrap();
        assert!(cluster.starts_with("team-b-") && cluster.ends_with("-auto.kopf.dev"));
        assert_eq!(n.to_app(&cluster).as_deref(), Some("auto.kopf.dev"));
        assert!(n.covers_resource(ADMREG, "mutatingwebhookconfigurations"));
        assert!(!n.covers_kind(SCHEDULING, "PriorityClass"));
    }

    #[test]
    fn bad_sections_say_what_is_wrong() {
        let problems = |p: Option<&str>, s: Option<&str>, kinds: &[&str]| {
            let kinds: Vec<String> = kinds.iter().map(|s| s.to_string()).collect();
            ObjectNames::new(p, s, &kinds, &[]).unwrap_err()
        };
        assert!(problems(Some("a-"), Some("-b"), &["ClusterRole"])[0]
            .0
            .contains("not both"));
        assert!(problems(None, None, &["ClusterRole"])[0]
            .0
            .contains("needs"));
        assert!(problems(Some("Team1-"), None, &["ClusterRole"])[0]
            .0
            .contains("lower-case"));
        let p = problems(Some("t-"), None, &["Namespace"]);
        assert!(p[0].0.contains("`Namespace` is not supported"), "{p:?}");
        assert!(p[0].0.contains("ClusterRoleBinding"));
        assert!(problems(Some("t-"), None, &[])[0]
            .0
            .contains("list the kinds"));
    }
}
