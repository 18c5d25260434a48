//! The plan of a migration, without I/O: which kinds move to which group,
//! each object's target, the order objects move in, and the
//! `ownerReferences` to re-point. Tested on real captures (`tests.rs`).

use std::collections::{BTreeMap, HashMap, HashSet};

use regroup_config::{Direction, GroupMap};
use serde_json::{json, Value as Json};

use crate::kube::media::Wire;
use crate::rewrite::Context;
use crate::rewrite::Engine;
use crate::rewrite::RewriteError;

/// The annotation a target carries: the uid of the object it was made from.
pub const MIGRATED_FROM: &str = "regroup.dev/migrated-from-uid";

/// The apiserver's own deletion finalizers (set by a DELETE with
/// `propagationPolicy` Orphan or Foreground and handled by the garbage
/// collector): never copied to a target, never released by the migration.
pub const SYSTEM_FINALIZERS: [&str; 2] = ["orphan", "foregroundDeletion"];

/// An object's finalizers: (the app's, the apiserver's own).
pub fn finalizers(obj: &Json) -> (Vec<String>, Vec<String>) {
    obj.pointer("/metadata/finalizers")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(Json::as_str)
        .map(str::to_owned)
        .partition(|f| !SYSTEM_FINALIZERS.contains(&f.as_str()))
}

/// Why an object can't be had under TO's names ([`Sides::convert`]).
#[derive(Debug, thiserror::Error)]
pub enum ConvertError {
    /// FROM's engine refused it.
    #[error("renaming to the app's names: {0}")]
    ToApp(#[source] RewriteError),
    /// TO's engine refused it.
    #[error("renaming to the target's names: {0}")]
    ToTarget(#[source] RewriteError),
    /// What the engines gave is not JSON.
    #[error("not a JSON object: {0}")]
    NotJson(#[from] serde_json::Error),
}

/// The two configurations: `None` is the identity (the original,
/// unrenamed install).
pub struct Sides<'a> {
    pub from: Option<&'a Engine>,
    pub to: Option<&'a Engine>,
}

/// Where a cluster group under FROM goes under TO: `None` when it stays
/// (not one of FROM's cluster groups, or the same under both).
///
/// Under FROM identity every group is its own app name, and moves when TO
/// renames it; under a FROM configuration only the groups FROM renames to
/// are its copy's (any other group, an original among them, belongs to
/// someone else).
pub fn target_group(from: Option<&GroupMap>, to: Option<&GroupMap>, group: &str) -> Option<String> {
    let app = match from {
        None => group.to_owned(),
        Some(m) => m.map_group(group, Direction::ToApp)?,
    };
    let target = match to {
        None => app,
        Some(m) => m.map_group(&app, Direction::ToCluster).unwrap_or(app),
    };
    (target != group).then_some(target)
}

impl Sides<'_> {
    /// See [`target_group`].
    pub fn target_group(&self, group: &str) -> Option<String> {
        target_group(self.from.map(|e| e.map()), self.to.map(|e| e.map()), group)
    }

    /// An object as the cluster holds it under FROM, as it must be under
    /// TO: the app's names through FROM's engine (`ToApp`), then the
    /// cluster's through TO's (`ToCluster`). Every catalogued place is
    /// renamed; every other byte stays as the apiserver sent it.
    pub fn convert(&self, source: &[u8]) -> Result<Json, ConvertError> {
        let mut bytes = source.to_vec();
        if let Some(e) = self.from {
            if let Some(b) = e
                .body(Direction::ToApp, Wire::Json, Context::default(), &bytes)
                .map_err(ConvertError::ToApp)?
            {
                bytes = b;
            }
        }
        if let Some(e) = self.to {
            if let Some(b) = e
                .body(Direction::ToCluster, Wire::Json, Context::default(), &bytes)
                .map_err(ConvertError::ToTarget)?
            {
                bytes = b;
            }
        }
        Ok(serde_json::from_slice(&bytes)?)
    }
}

/// What the migration needs of a CustomResourceDefinition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Crd {
    pub name: String,
    pub group: String,
    pub kind: String,
    pub plural: String,
    pub namespaced: bool,
    /// The storage version (objects are read and written in it: no
    /// conversion on either side).
    pub storage: String,
    pub served: Vec<String>,
    /// Versions with a status subresource.
    pub status: Vec<String>,
    pub established: bool,
}

impl Crd {
    /// Reads a CRD (apiextensions.k8s.io/v1); `None` if it lacks a field.
    pub fn parse(o: &Json) -> Option<Crd> {
        let spec = o.get("spec")?;
        let names = spec.get("names")?;
        let versions = spec.get("versions")?.as_array()?;
        let vname = |v: &Json| v.get("name").and_then(Json::as_str).map(str::to_owned);
        let flag = |v: &Json, k: &str| v.get(k).and_then(Json::as_bool).unwrap_or(false);
        let established = o
            .pointer("/status/conditions")
            .and_then(Json::as_array)
            .is_some_and(|cs| {
                cs.iter().any(|c| {
                    c.get("type").and_then(Json::as_str) == Some("Established")
                        && c.get("status").and_then(Json::as_str) == Some("True")
                })
            });
        Some(Crd {
            name: o.pointer("/metadata/name")?.as_str()?.to_owned(),
            group: spec.get("group")?.as_str()?.to_owned(),
            kind: names.get("kind")?.as_str()?.to_owned(),
            plural: names.get("plural")?.as_str()?.to_owned(),
            namespaced: spec.get("scope").and_then(Json::as_str) != Some("Cluster"),
            storage: versions
                .iter()
                .find(|v| flag(v, "storage"))
                .and_then(vname)?,
            served: versions
                .iter()
                .filter(|v| flag(v, "served"))
                .filter_map(vname)
                .collect(),
            status: versions
                .iter()
                .filter(|v| v.pointer("/subresources/status").is_some())
                .filter_map(vname)
                .collect(),
            established,
        })
    }

    /// True when `version` has a status subresource.
    pub fn has_status(&self, version: &str) -> bool {
        self.status.iter().any(|v| v == version)
    }

    /// `group/version`.
    pub fn api_version(&self, version: &str) -> String {
        format!("{}/{version}", self.group)
    }

    /// The collection's path, in a namespace or across all of them.
    pub fn collection(&self, version: &str, ns: Option<&str>) -> String {
        match ns {
            Some(ns) if self.namespaced => {
                format!(
                    "/apis/{}/{version}/namespaces/{ns}/{}",
                    self.group, self.plural
                )
            }
            _ => format!("/apis/{}/{version}/{}", self.group, self.plural),
        }
    }

    /// An object's path.
    pub fn object(&self, version: &str, ns: Option<&str>, name: &str) -> String {
        format!("{}/{name}", self.collection(version, ns))
    }
}

/// Why a kind can't move: its target CRD (`plural.target-group`) is not
/// one its objects can be written to.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum TargetCrdError {
    /// Not in the cluster.
    #[error(
        "the target CRD {0} does not exist: install it first (regroup render -c TO.yaml -f \
         crds.yaml | kubectl apply -f -)"
    )]
    Missing(String),
    /// Not yet served.
    #[error("the target CRD {0} is not Established")]
    NotEstablished(String),
    /// Of another kind than the source's.
    #[error("the target CRD {name} is of kind {kind}, not {source_kind}")]
    OtherKind {
        /// The target CRD.
        name: String,
        /// Its kind.
        kind: String,
        /// The source's.
        source_kind: String,
    },
    /// Cluster-scoped where the source is namespaced, or the reverse.
    #[error("the target CRD {0} has another scope")]
    OtherScope(String),
    /// Not serving the version the objects are read and written in.
    #[error("the target CRD {name} does not serve {version}, the source's storage version")]
    NotServed {
        /// The target CRD.
        name: String,
        /// The source's storage version.
        version: String,
    },
}

/// One kind to move.
#[derive(Debug, Clone)]
pub struct KindPlan {
    pub source: Crd,
    pub target_group: String,
    /// The target CRD, checked; or why this kind can't move.
    pub target: Result<Crd, TargetCrdError>,
    /// The version objects are read and written in: the source's storage
    /// version (the target must serve it).
    pub version: String,
}

impl KindPlan {
    /// `Kind.group` of the source.
    pub fn label(&self) -> String {
        format!("{}.{}", self.source.kind, self.source.group)
    }
}

/// The kinds to move: every CRD whose group moves (see [`target_group`]),
/// restricted to `only` (kinds, plurals or `plural.group`s) when given,
/// each checked against its target CRD (`plural.target-group`): present,
/// Established, same kind and scope, serving the source's storage version.
pub fn kinds(crds: &[Crd], sides: &Sides<'_>, only: &[String]) -> Vec<KindPlan> {
    let mut out: Vec<KindPlan> = crds
        .iter()
        .filter(|c| {
            only.is_empty()
                || only
                    .iter()
                    .any(|k| k.eq_ignore_ascii_case(&c.kind) || *k == c.plural || *k == c.name)
        })
        .filter_map(|c| {
            let target_group = sides.target_group(&c.group)?;
            let want = format!("{}.{target_group}", c.plural);
            let version = c.storage.clone();
            let target = match crds.iter().find(|t| t.name == want) {
                None => Err(TargetCrdError::Missing(want)),
                Some(t) if !t.established => Err(TargetCrdError::NotEstablished(want)),
                Some(t) if t.kind != c.kind => Err(TargetCrdError::OtherKind {
                    name: want,
                    kind: t.kind.clone(),
                    source_kind: c.kind.clone(),
                }),
                Some(t) if t.namespaced != c.namespaced => Err(TargetCrdError::OtherScope(want)),
                Some(t) if !t.served.contains(&version) => Err(TargetCrdError::NotServed {
                    name: want,
                    version: version.clone(),
                }),
                Some(t) => Ok(t.clone()),
            };
            Some(KindPlan {
                source: c.clone(),
                target_group,
                target,
                version,
            })
        })
        .collect();
    out.sort_by_key(KindPlan::label);
    out
}

/// An owner reference, as the migration reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OwnerRef {
    pub api_version: String,
    pub kind: String,
    pub name: String,
    pub uid: String,
}

/// The `ownerReferences` of an object (or of a PartialObjectMetadata).
pub fn owner_refs(obj: &Json) -> Vec<OwnerRef> {
    obj.pointer("/metadata/ownerReferences")
        .and_then(Json::as_array)
        .map(|refs| {
            refs.iter()
                .map(|r| {
                    let s = |k: &str| r.get(k).and_then(Json::as_str).unwrap_or("").to_owned();
                    OwnerRef {
                        api_version: s("apiVersion"),
                        kind: s("kind"),
                        name: s("name"),
                        uid: s("uid"),
                    }
                })
                .collect()
        })
        .unwrap_or_default()
}

/// `metadata.<key>` as a string.
pub fn meta_str<'a>(obj: &'a Json, key: &str) -> Option<&'a str> {
    obj.get("metadata")?.get(key)?.as_str()
}

/// The order objects move in: an owner before the objects it owns (so a
/// moved dependent is created already pointing at its owner's target);
/// otherwise as given. Objects in an ownership cycle (which no apiserver
/// creates, but a hand-edited cluster may hold) come last, as given.
pub fn order(objects: &[Json]) -> Vec<usize> {
    let at: HashMap<&str, usize> = objects
        .iter()
        .enumerate()
        .filter_map(|(i, o)| Some((meta_str(o, "uid")?, i)))
        .collect();
    // Owners among the moved objects, per object.
    let owners: Vec<Vec<usize>> = objects
        .iter()
        .map(|o| {
            let mut v: Vec<usize> = owner_refs(o)
                .iter()
                .filter_map(|r| at.get(r.uid.as_str()).copied())
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect();
    let mut done = vec![false; objects.len()];
    let mut out = Vec::with_capacity(objects.len());
    loop {
        let before = out.len();
        for i in 0..objects.len() {
            if !done[i] && owners[i].iter().all(|&o| done[o] || o == i) {
                done[i] = true;
                out.push(i);
            }
        }
        if out.len() == objects.len() {
            return out;
        }
        if out.len() == before {
            out.extend((0..objects.len()).filter(|&i| !done[i]));
            return out;
        }
    }
}

/// For objects in the order they move (see [`order`]): the earlier ones
/// each must wait for, its owners among them. A later owner (only an
/// ownership cycle puts one there) is not waited for, so every object can
/// start once the ones before it have finished.
pub fn waits_for(objects: &[&Json]) -> Vec<Vec<usize>> {
    let at: HashMap<&str, usize> = objects
        .iter()
        .enumerate()
        .filter_map(|(i, o)| Some((meta_str(o, "uid")?, i)))
        .collect();
    objects
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let mut v: Vec<usize> = owner_refs(o)
                .iter()
                .filter_map(|r| at.get(r.uid.as_str()).copied())
                .filter(|&j| j < i)
                .collect();
            v.sort_unstable();
            v.dedup();
            v
        })
        .collect()
}

/// The body to create a source object's target from: `converted` (see
/// [`Sides::convert`]) without what the apiserver sets (uid,
/// resourceVersion, creationTimestamp, generation, managedFields,
/// deletion marks, selfLink, and the apiserver's own deletion finalizers
/// `orphan` and `foregroundDeletion`), annotated with the source's uid, with the
/// source's `ownerReferences` each re-pointed at its owner's target when
/// that exists already (`moved`: source uid → (target apiVersion, target
/// uid)) and else kept exactly as the source has it, so that it still
/// resolves (to the source owner) until it is re-pointed.
pub fn target_body(
    converted: &Json,
    source: &Json,
    moved: &HashMap<String, (String, String)>,
) -> Json {
    let mut t = converted.clone();
    let uid = meta_str(source, "uid").unwrap_or("").to_owned();
    if let Some(md) = t.get_mut("metadata").and_then(Json::as_object_mut) {
        for k in [
            "uid",
            "resourceVersion",
            "creationTimestamp",
            "generation",
            "managedFields",
            "deletionTimestamp",
            "deletionGracePeriodSeconds",
            "selfLink",
        ] {
            md.remove(k);
        }
        if let Some(Json::Array(f)) = md.get_mut("finalizers") {
            f.retain(|x| !x.as_str().is_some_and(|x| SYSTEM_FINALIZERS.contains(&x)));
            if f.is_empty() {
                md.remove("finalizers");
            }
        }
        let ann = md
            .entry("annotations")
            .or_insert_with(|| Json::Object(Default::default()));
        if !ann.is_object() {
            *ann = Json::Object(Default::default());
        }
        ann.as_object_mut()
            .expect("an object")
            .insert(MIGRATED_FROM.to_owned(), Json::String(uid));
        match source
            .pointer("/metadata/ownerReferences")
            .and_then(Json::as_array)
        {
            Some(refs) => {
                let refs = refs
                    .iter()
                    .map(|r| {
                        let mut r = r.clone();
                        let owner = r.get("uid").and_then(Json::as_str).unwrap_or("");
                        if let Some((av, tuid)) = moved.get(owner) {
                            r["apiVersion"] = Json::String(av.clone());
                            r["uid"] = Json::String(tuid.clone());
                        }
                        r
                    })
                    .collect();
                md.insert("ownerReferences".into(), Json::Array(refs));
            }
            None => {
                md.remove("ownerReferences");
            }
        }
    }
    t
}

/// A JSON Patch that re-points `obj`'s owner references to the source
/// (`source_uid`) at the target (`target_api_version`, `target_uid`),
/// each guarded by a `test` of the uid it replaces (so a list that changed
/// meanwhile fails the patch instead of being rewritten blindly). A
/// reference to the target already there makes the source's a `remove`
/// (never two references to one owner). `None`: nothing points at the
/// source.
pub fn repoint(
    obj: &Json,
    source_uid: &str,
    target_api_version: &str,
    target_uid: &str,
) -> Option<Json> {
    let refs = owner_refs(obj);
    let has_target = refs.iter().any(|r| r.uid == target_uid);
    let mut ops = Vec::new();
    let mut removed = 0;
    for (i, r) in refs.iter().enumerate() {
        if r.uid != source_uid {
            continue;
        }
        let at = format!("/metadata/ownerReferences/{}", i - removed);
        ops.push(json!({"op": "test", "path": format!("{at}/uid"), "value": source_uid}));
        if has_target {
            ops.push(json!({"op": "remove", "path": at}));
            removed += 1;
        } else {
            ops.push(
                json!({"op": "replace", "path": format!("{at}/apiVersion"), "value": target_api_version}),
            );
            ops.push(json!({"op": "replace", "path": format!("{at}/uid"), "value": target_uid}));
        }
    }
    (!ops.is_empty()).then_some(Json::Array(ops))
}

/// An object that may own others' dependents: found by the scan.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Dependent {
    /// Its path (GET and PATCH).
    pub path: String,
    pub kind: String,
    pub namespace: Option<String>,
    pub name: String,
    pub uid: String,
    /// The uids it names as owners.
    pub owners: Vec<String>,
}

impl Dependent {
    /// `Kind ns/name`.
    pub fn label(&self) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", self.kind, self.name),
            None => format!("{} {}", self.kind, self.name),
        }
    }
}

/// A kind the scan lists: its collection's path prefix (`/api/v1` or
/// `/apis/G/V`), plural, kind and scope.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScanKind {
    pub prefix: String,
    pub plural: String,
    pub kind: String,
    pub namespaced: bool,
}

impl ScanKind {
    /// The collection in `ns` (namespaced kinds) or the whole cluster.
    pub fn collection(&self, ns: Option<&str>) -> String {
        match ns {
            Some(ns) if self.namespaced => {
                format!("{}/namespaces/{ns}/{}", self.prefix, self.plural)
            }
            _ => format!("{}/{}", self.prefix, self.plural),
        }
    }
}

/// The kinds of a discovery `APIResourceList` (`prefix`: its path) the scan
/// lists: top-level resources (no subresources) that can be listed and
/// patched.
pub fn scan_kinds(prefix: &str, resource_list: &Json) -> Vec<ScanKind> {
    resource_list
        .get("resources")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let name = r.get("name")?.as_str()?;
            let verbs: Vec<&str> = r
                .get("verbs")?
                .as_array()?
                .iter()
                .filter_map(Json::as_str)
                .collect();
            (!name.contains('/') && verbs.contains(&"list") && verbs.contains(&"patch")).then(
                || ScanKind {
                    prefix: prefix.to_owned(),
                    plural: name.to_owned(),
                    kind: r
                        .get("kind")
                        .and_then(Json::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    namespaced: r.get("namespaced").and_then(Json::as_bool).unwrap_or(false),
                },
            )
        })
        .collect()
}

/// A listed item (an object or a PartialObjectMetadata) of `kind` with
/// owners, as a [`Dependent`]; `None` without any.
pub fn dependent(kind: &ScanKind, item: &Json) -> Option<Dependent> {
    let owners: Vec<String> = owner_refs(item).into_iter().map(|r| r.uid).collect();
    if owners.is_empty() {
        return None;
    }
    let name = meta_str(item, "name")?.to_owned();
    let namespace = meta_str(item, "namespace").map(str::to_owned);
    Some(Dependent {
        path: format!("{}/{name}", kind.collection(namespace.as_deref())),
        kind: kind.kind.clone(),
        namespace,
        name,
        uid: meta_str(item, "uid").unwrap_or("").to_owned(),
        owners,
    })
}

/// Dependents by owner uid, for the owners in `uids`; each list in scan
/// order, an object once.
pub fn dependents_by_owner(
    found: &[Dependent],
    uids: &HashSet<String>,
) -> BTreeMap<String, Vec<Dependent>> {
    let mut out: BTreeMap<String, Vec<Dependent>> = BTreeMap::new();
    for d in found {
        let mut seen = HashSet::new();
        for o in &d.owners {
            if uids.contains(o) && seen.insert(o) {
                let list = out.entry(o.clone()).or_default();
                if !list.iter().any(|x| x.uid == d.uid && x.path == d.path) {
                    list.push(d.clone());
                }
            }
        }
    }
    out
}

/// Where `obj` still names one of `groups` (as a group, in an apiVersion,
/// or as the group of a `plural.group` name): JSON paths. For the report of
/// references a migration leaves pointing at the old group (RBAC rules,
/// webhook rules, APIServices).
pub fn references(obj: &Json, groups: &[String]) -> Vec<String> {
    fn names(s: &str, groups: &[String]) -> bool {
        groups.iter().any(|g| {
            s == g
                || s.strip_prefix(g.as_str())
                    .is_some_and(|r| r.starts_with('/'))
                || s.strip_suffix(g.as_str())
                    .is_some_and(|r| r.ends_with('.') && !r.contains('/'))
        })
    }
    fn walk(v: &Json, at: &str, groups: &[String], out: &mut Vec<String>) {
        match v {
            Json::String(s) if names(s, groups) => out.push(at.to_owned()),
            Json::Array(a) => {
                for (i, x) in a.iter().enumerate() {
                    walk(x, &format!("{at}[{i}]"), groups, out);
                }
            }
            Json::Object(m) => {
                for (k, x) in m {
                    if at.is_empty() && (k == "metadata" || k == "status") {
                        continue;
                    }
                    let p = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    walk(x, &p, groups, out);
                }
            }
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(obj, "", groups, &mut out);
    out
}

/// True for a local APIService (no `spec.service`): the one kube-apiserver
/// makes for every served version of a CRD's group (labelled
/// `kube-aggregator.kubernetes.io/automanaged`) and deletes with the CRD. It
/// is not a reference to move: the target CRD has its own. An APIService
/// with a Service is an aggregated API server's, whose objects the migration
/// can't move (they are not in a CRD): it is listed, never renamed.
pub fn local_apiservice(obj: &Json) -> bool {
    obj.pointer("/spec/service").is_none_or(Json::is_null)
}

/// The kinds whose references to a group `--rename-references` renames, and
/// the fields it replaces: each holds group names only in rules, never in
/// its name (an APIService's name carries its group, so it can't be renamed
/// in place and is only listed).
pub fn renamable_reference(kind: &str) -> bool {
    matches!(
        kind,
        "ClusterRole" | "Role" | "ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration"
    )
}

/// True for a ClusterRole whose rules Kubernetes aggregates (one with an
/// `aggregationRule`, as `admin`, `edit` and `view`): the controller
/// manager rewrites its rules from the ClusterRoles the rule selects, so
/// renaming them in place is undone at once. Those selected ClusterRoles
/// are what to rename.
pub fn aggregated_cluster_role(kind: &str, obj: &Json) -> bool {
    kind == "ClusterRole" && obj.get("aggregationRule").is_some_and(|a| !a.is_null())
}

/// Whether an existing target object was made from the source whose uid is
/// `source_uid` (its [`MIGRATED_FROM`] annotation): `Ok` when it was,
/// `Err` with the annotation's value (or `absent`) when it was not.
pub fn made_from<'a>(target: &'a Json, source_uid: &str) -> Result<(), &'a str> {
    let from = target
        .pointer(&format!(
            "/metadata/annotations/{}",
            MIGRATED_FROM.replace('/', "~1")
        ))
        .and_then(Json::as_str);
    match from {
        Some(u) if u == source_uid => Ok(()),
        other => Err(other.unwrap_or("absent")),
    }
}

/// `current` (a Role, ClusterRole or webhook configuration as the cluster
/// holds it) with its rules moved to TO's groups, or `None` when nothing
/// changes. Only the rules travel through the engines, in an object of the
/// same kind without a name, so no other field (and no `names:` rule) can
/// change: the object keeps its identity.
pub fn renamed_references(sides: &Sides<'_>, current: &Json) -> Result<Option<Json>, ConvertError> {
    let api_version = current.get("apiVersion").cloned().unwrap_or(Json::Null);
    let kind = current.get("kind").cloned().unwrap_or(Json::Null);
    let convert = |rules: &Json| -> Result<Json, ConvertError> {
        let probe = serde_json::json!({"apiVersion": api_version, "kind": kind, "rules": rules});
        let out = sides.convert(probe.to_string().as_bytes())?;
        Ok(out.get("rules").cloned().unwrap_or(Json::Null))
    };
    let mut next = current.clone();
    match kind.as_str() {
        Some("ClusterRole" | "Role") => {
            if let Some(rules) = current.get("rules") {
                next["rules"] = convert(rules)?;
            }
        }
        Some("ValidatingWebhookConfiguration" | "MutatingWebhookConfiguration") => {
            if let Some(hooks) = next.get_mut("webhooks").and_then(Json::as_array_mut) {
                for h in hooks {
                    if let Some(rules) = h.get("rules").cloned() {
                        // Webhook rules sit under `webhooks[]`: the probe
                        // carries them as one webhook's.
                        let probe = serde_json::json!({"apiVersion": api_version, "kind": kind,
                            "webhooks": [{"name": "probe", "rules": rules}]});
                        let out = sides.convert(probe.to_string().as_bytes())?;
                        h["rules"] = out
                            .pointer("/webhooks/0/rules")
                            .cloned()
                            .unwrap_or(Json::Null);
                    }
                }
            }
        }
        _ => return Ok(None),
    }
    Ok((next != *current).then_some(next))
}

/// Field managers other than regroup's own that wrote `obj` within
/// `window` seconds before `now` (Unix seconds), newest first, with how
/// long ago: a controller still running leaves such traces.
pub fn recent_writers(obj: &Json, now: i64, window: i64) -> Vec<(String, i64)> {
    let mut out: Vec<(String, i64)> = obj
        .pointer("/metadata/managedFields")
        .and_then(Json::as_array)
        .into_iter()
        .flatten()
        .filter_map(|m| {
            let manager = m.get("manager")?.as_str()?;
            if manager == super::api::FIELD_MANAGER {
                return None;
            }
            let t = m.get("time")?.as_str()?;
            let at = time::OffsetDateTime::parse(t, &time::format_description::well_known::Rfc3339)
                .ok()?
                .unix_timestamp();
            let age = now - at;
            (0..=window)
                .contains(&age)
                .then(|| (manager.to_owned(), age))
        })
        .collect();
    out.sort_by_key(|(_, age)| *age);
    out
}
