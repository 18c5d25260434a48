//! A rename rule and the words every module of the configuration shares:
//! which way a name travels ([`Direction`]) and the wire forms a group
//! takes ([`Form`]). Below the map, its validation and the metadata and
//! label-selector mappers, which all speak of them.

use crate::dns::has_label_suffix;

/// Which way a name travels.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// App names to cluster names (`foo.example.io` -> `foo.team-b.example.com`):
    /// requests from a sidecar app, responses from a fronted app.
    ToCluster,
    /// Cluster names to app names: responses to a sidecar app, requests to a
    /// fronted app.
    ToApp,
}

impl Direction {
    /// The other direction.
    pub fn flip(self) -> Direction {
        match self {
            Direction::ToCluster => Direction::ToApp,
            Direction::ToApp => Direction::ToCluster,
        }
    }

    pub(crate) fn index(self) -> usize {
        match self {
            Direction::ToCluster => 0,
            Direction::ToApp => 1,
        }
    }
}

/// One rename rule, as validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Rule {
    /// Exactly one group: `from` (the app's name) is `to` on the cluster.
    Exact { from: String, to: String },
    /// Every group equal to or ending in `.from` has that suffix replaced by `to`.
    Suffix { from: String, to: String },
}

impl Rule {
    /// The names this rule reads and writes in `dir`: `(source, target)`.
    pub fn ends(&self, dir: Direction) -> (&str, &str) {
        let (from, to) = match self {
            Rule::Exact { from, to } | Rule::Suffix { from, to } => (from, to),
        };
        match dir {
            Direction::ToCluster => (from, to),
            Direction::ToApp => (to, from),
        }
    }

    /// True for a DNS-suffix rule.
    pub fn is_suffix(&self) -> bool {
        matches!(self, Rule::Suffix { .. })
    }

    /// True when `group` is in this rule's source set in `dir`.
    pub fn covers(&self, group: &str, dir: Direction) -> bool {
        let (source, _) = self.ends(dir);
        match self {
            Rule::Exact { .. } => group == source,
            Rule::Suffix { .. } => has_label_suffix(group, source),
        }
    }

    /// Applies this rule to a group it covers; the string has room for
    /// `extra` more bytes (what the caller appends).
    pub(crate) fn apply(&self, group: &str, dir: Direction, extra: usize) -> String {
        let (source, target) = self.ends(dir);
        let head = match self {
            Rule::Exact { .. } => "",
            Rule::Suffix { .. } => &group[..group.len() - source.len()],
        };
        let mut out = String::with_capacity(head.len() + target.len() + extra);
        self.apply_into(group, dir, &mut out);
        out
    }

    /// [`apply`](Self::apply), appended to `out`.
    pub(crate) fn apply_into(&self, group: &str, dir: Direction, out: &mut String) {
        let (source, target) = self.ends(dir);
        if let Rule::Suffix { .. } = self {
            out.push_str(&group[..group.len() - source.len()]);
        }
        out.push_str(target);
    }
}

/// The wire form of a string that carries a group.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Form {
    /// A bare group: `foo.example.io`.
    Group,
    /// `group/version`; a bare `version` is the core group and never mapped.
    ApiVersion,
    /// `first.group` with one leading label: CRD names (`plural.group`),
    /// APIService names (`version.group`), `resource.group` references.
    QualifiedName,
    /// Free text (a `Status` message) with `resource.group` tokens inside.
    Text,
    /// Reverse-DNS OpenAPI definition name: `io.k8s.samplecontroller.v1.Foo`.
    ReverseDns,
    /// A path with the group after `apis/`.
    ApiPath,
    /// A field selector (`involvedObject.apiVersion=g/v,metadata.name=x`):
    /// the values of requirements on `*.apiVersion` and `*.apiGroup` keys.
    FieldSelector,
    /// A comma-separated list of `Kind.group` (kubectl ApplySet's
    /// `applyset.kubernetes.io/contains-group-kinds`); a core kind is a bare
    /// `Kind`.
    GroupKinds,
    /// A ResourceQuota object-count key, `count/<resource>.<group>`; other
    /// quota keys (`requests.cpu`, `requests.nvidia.com/gpu`) name no group.
    ObjectCount,
    /// The name of a cluster-scoped object of a kind listed in `names:`
    /// (see [`crate::object_names`]): not a group, but renamed per copy.
    ObjectName,
    /// The `metadata.generateName` of such an object.
    GenerateName,
    /// The name of a namespaced object of a kind listed in
    /// `names.namespaced`: renamed per copy only when it is one of the
    /// listed fixed names (a leader-election Lease).
    FixedName,
    /// A label or annotation key, or a finalizer, renamed by the metadata
    /// rules (see [`crate::metadata`]), not by group rules.
    MetadataKey,
    /// A label selector string (`k in (a,b),!k2`): its keys and values by
    /// the metadata rules.
    LabelSelector,
    /// A value that may be exactly a group, a `group/version` or a metadata
    /// key, and is renamed only when it is exactly one of them (a CRD
    /// schema's `enum` element or `default`): see
    /// [`crate::GroupMap::map_literal`].
    Literal,
    /// A CEL expression: its string literals renamed as [`Form::Literal`]
    /// (see [`crate::cel`]).
    Cel,
    /// A CRD's short name (`spec.names.shortNames[]`, also in discovery),
    /// renamed per copy by `names.shortNamePrefix` (see
    /// [`crate::short_names`]); only a renamed group's resources' names
    /// are (the catalog's `Slot::ShortForm` decides).
    ShortName,
    /// A CRD's category (`spec.names.categories[]`), likewise; kept
    /// categories (`all`) stay.
    Category,
    /// A name an RBAC rule grants by (`rules[].resourceNames[]`), or a
    /// CertificateSigningRequest's `spec.signerName` (the `signers` name a
    /// rule grants `sign` on). A signer name `DOMAIN/NAME`
    /// (`issuers.cert-manager.io/ns.ca`) is renamed when DOMAIN is a
    /// renamed group or ends in `.GROUP`; any other name (no object name
    /// holds a `/`) as [`Form::FixedName`], so a Role keeps granting the
    /// copy's own Lease.
    ResourceName,
}

/// A rule plus its per-rule switches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MapRule {
    /// The mapping itself.
    pub rule: Rule,
    /// Whether string values of keys named `apiGroup`/`apiVersion` anywhere in
    /// an object are renamed for this rule (the reference-key heuristic).
    pub reference_keys: bool,
}
