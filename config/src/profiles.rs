//! Operator profiles (`profiles: [cert-manager]`): what a known operator
//! needs besides its group rules, so that a second copy never reaches the
//! first — the fields where it names its own group, the key prefixes it
//! marks shared objects with, the Leases it elects its leader on. Each
//! entry says where in the operator's code or chart it comes from
//! (docs/config.md, "Profiles", is the user's account).
//!
//! A profile is expanded into the configuration before it is validated,
//! as if the user had written its entries: `fields`, `metadata.prefixes`
//! (each following the group rule that renames it, so keys move with the
//! groups) and `names.namespaced`. What the user wrote wins: an entry
//! already there is not added twice.

use serde_saphyr::{Location, Spanned};

use crate::schema::{ConfigFile, FieldForm, FieldSpec, NamespacedNamesSpec, PairSpec};
use crate::{Direction, GroupMap};

/// A key prefix an operator marks objects with, and how its copy's prefix
/// is made.
#[derive(Clone, Copy, Debug)]
pub enum KeyPrefix {
    /// Renamed as the group rule renames this group (the operator's keys
    /// live under its own group's name: `cert-manager.io/certificate-name`).
    FollowsGroup(&'static str),
    /// Nested under itself with the copy's mark as a label in front
    /// (`kopf.zalando.org` -> `team-b-1a2b3c4d.kopf.zalando.org`): the
    /// operator recognises its peers by this DNS suffix.
    Nested(&'static str),
}

/// One known operator.
#[derive(Debug)]
pub struct Profile {
    /// Its name in `profiles:`.
    pub name: &'static str,
    /// The groups of its CRDs: at least one must be renamed by the rules.
    pub groups: &'static [&'static str],
    /// Where its objects name a group in a field no catalog row covers
    /// (a key named `group`: `referenceKeys` covers `apiGroup` and
    /// `apiVersion` keys already): `(group, kind, path)`, form `group`.
    pub fields: &'static [(&'static str, &'static str, &'static str)],
    /// Its metadata key prefixes.
    pub prefixes: &'static [KeyPrefix],
    /// The Leases it takes under fixed names (in its leader-election
    /// namespace, `kube-system` for some).
    pub leases: &'static [&'static str],
}

/// The profiles regroup knows.
pub const PROFILES: &[Profile] = &[
    Profile {
        name: "cert-manager",
        groups: &["cert-manager.io", "acme.cert-manager.io"],
        // `IssuerRef.Group` (cert-manager's `pkg/apis/meta/v1` ObjectReference,
        // embedded in Certificate, CertificateRequest and ACME Order and
        // Challenge specs): the issuer's group, `cert-manager.io` for its own
        // Issuers and ClusterIssuers.
        fields: &[
            ("cert-manager.io", "Certificate", "spec.issuerRef.group"),
            (
                "cert-manager.io",
                "CertificateRequest",
                "spec.issuerRef.group",
            ),
            ("acme.cert-manager.io", "Order", "spec.issuerRef.group"),
            ("acme.cert-manager.io", "Challenge", "spec.issuerRef.group"),
        ],
        // `cert-manager.io/*` annotations on Ingresses and Secrets,
        // `acme.cert-manager.io/http01-solver`, `controller.cert-manager.io/fao`
        // (the Secret cache filter): all under `cert-manager.io`.
        prefixes: &[KeyPrefix::FollowsGroup("cert-manager.io")],
        // The chart's kube-system leader-election Roles name these
        // (`templates/rbac.yaml`, `templates/cainjector-rbac.yaml`).
        leases: &[
            "cert-manager-controller",
            "cert-manager-cainjector-leader-election",
            "cert-manager-cainjector-leader-election-core",
        ],
    },
    Profile {
        name: "external-secrets",
        groups: &["external-secrets.io", "generators.external-secrets.io"],
        // `sourceRef.generatorRef.apiVersion` is an `apiVersion` key:
        // `referenceKeys` renames it.
        fields: &[],
        // `reconcile.external-secrets.io/*` and `external-secrets.io/*`
        // labels and annotations on the Secrets it writes.
        prefixes: &[KeyPrefix::FollowsGroup("external-secrets.io")],
        // controller-runtime's LeaderElectionID in `cmd/root.go`.
        leases: &["external-secrets-controller"],
    },
    Profile {
        name: "argo-cd",
        groups: &["argoproj.io"],
        // Group-valued `group` keys of Application and AppProject specs.
        fields: &[
            (
                "argoproj.io",
                "Application",
                "spec.ignoreDifferences[].group",
            ),
            ("argoproj.io", "Application", "status.resources[].group"),
            (
                "argoproj.io",
                "AppProject",
                "spec.clusterResourceWhitelist[].group",
            ),
            (
                "argoproj.io",
                "AppProject",
                "spec.clusterResourceBlacklist[].group",
            ),
            (
                "argoproj.io",
                "AppProject",
                "spec.namespaceResourceWhitelist[].group",
            ),
            (
                "argoproj.io",
                "AppProject",
                "spec.namespaceResourceBlacklist[].group",
            ),
            (
                "argoproj.io",
                "AppProject",
                "spec.orphanedResources.ignore[].group",
            ),
        ],
        // `argocd.argoproj.io/tracking-id`, `argocd.argoproj.io/secret-type`,
        // `notifications.argoproj.io/*`: under `argoproj.io`.
        prefixes: &[KeyPrefix::FollowsGroup("argoproj.io")],
        leases: &[],
    },
    Profile {
        name: "kopf",
        // KopfPeering and ClusterKopfPeering (optional: only for peering).
        groups: &["kopf.dev"],
        fields: &[],
        // Its progress, `last-handled-configuration` and finalizer keys;
        // Kopf leaves a peer's alone only under `*.kopf.zalando.org`.
        prefixes: &[KeyPrefix::Nested("kopf.zalando.org")],
        leases: &[],
    },
];

/// Adds what `file.profiles` asks for to `file`; problems (an unknown
/// profile, none of its groups renamed) to `problems`. `mark` is the
/// copy's names mark as a DNS label (`team-b-1a2b3c4d`), for nested key
/// prefixes.
pub fn expand(file: &mut ConfigFile, map: &GroupMap, mark: &str, problems: &mut Vec<String>) {
    let target = |group: &str| map.map_group(group, Direction::ToCluster);
    let asked = std::mem::take(&mut file.profiles);
    for name in &asked {
        let at = Location::UNKNOWN;
        let line = name.referenced.line();
        let Some(p) = PROFILES.iter().find(|p| p.name == name.value) else {
            problems.push(format!(
                "line {line}: profiles: `{}` is not known; the profiles are {}",
                name.value,
                PROFILES
                    .iter()
                    .map(|p| p.name)
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
            continue;
        };
        let renamed: Vec<&str> = p
            .groups
            .iter()
            .copied()
            .filter(|g| target(g).is_some())
            .collect();
        if renamed.is_empty() && p.name != "kopf" {
            problems.push(format!(
                "line {line}: profiles: `{}` needs a rule for its groups ({}); none renames them",
                p.name,
                p.groups.join(", ")
            ));
            continue;
        }
        for (group, kind, path) in p.fields {
            let dup = file
                .fields
                .iter()
                .any(|f| f.value.group == *group && f.value.kind == *kind && f.value.path == *path);
            if renamed.contains(group) && !dup {
                file.fields.push(Spanned::new(
                    FieldSpec {
                        group: group.to_string(),
                        kind: kind.to_string(),
                        path: path.to_string(),
                        form: FieldForm::Group,
                    },
                    name.referenced,
                    at,
                ));
            }
        }
        for prefix in p.prefixes {
            let (from, to) = match *prefix {
                KeyPrefix::FollowsGroup(g) => match target(g) {
                    Some(t) => (g.to_string(), t),
                    None => continue,
                },
                KeyPrefix::Nested(g) => (g.to_string(), format!("{mark}.{g}")),
            };
            let metadata = file.metadata.get_or_insert_with(Default::default);
            if metadata.prefixes.iter().any(|x| x.value.from == from) {
                continue;
            }
            metadata
                .prefixes
                .push(Spanned::new(PairSpec { from, to }, name.referenced, at));
        }
        if !p.leases.is_empty() {
            let names = file
                .names
                .get_or_insert_with(|| Spanned::new(Default::default(), name.referenced, at));
            let ns = names
                .value
                .namespaced
                .get_or_insert_with(NamespacedNamesSpec::default);
            if !ns.kinds.iter().any(|k| k == "Lease") {
                ns.kinds.push("Lease".into());
            }
            for l in p.leases {
                if !ns.names.iter().any(|n| n == l) {
                    ns.names.push(l.to_string());
                }
            }
        }
    }
    file.profiles = asked;
}
