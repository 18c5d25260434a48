//! `regroup migrate`: moves an operator's objects from the groups one
//! configuration gives them on the cluster to the groups another gives
//! them, keeping every child (ownerReferences re-pointed), every status
//! (copied through the status subresource) and every field.
//!
//! Per object, in dependency order (owners first): create the target
//! (annotated with the source's uid), copy its status, re-point every
//! dependent found by the scan, release finalizers when told to, delete
//! the source with `propagationPolicy: Orphan` and a uid precondition. A
//! source is deleted only after all of that succeeded; a run stopped
//! anywhere is resumed by running it again (the annotation tells a target
//! made from this source from any other). See docs/migrate.md.

pub mod api;
pub mod plan;
mod progress;
#[cfg(test)]
mod tests;

use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;

use futures_util::StreamExt as _;
use regroup_config::Settings;
use serde_json::{json, Value as Json};

use crate::rewrite::{Catalog, Engine};
use crate::upstream::own_client::OwnClient;
use crate::upstream::Upstream;
use api::{Api, CallError};
use plan::{Crd, Dependent, KindPlan, ScanKind, Sides, MIGRATED_FROM};

/// How many collections the scan for dependents lists at once.
const SCAN_CONCURRENCY: usize = 8;

/// What `regroup migrate` was asked.
pub struct Options {
    /// FROM: `None` is the identity (the original, unrenamed install).
    pub from: Option<Settings>,
    /// TO: `None` is the identity.
    pub to: Option<Settings>,
    /// `--kubeconfig`.
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    pub context: Option<String>,
    /// Act (else print the plan only).
    pub yes: bool,
    /// Remove the sources' finalizers before deleting them.
    pub release_finalizers: bool,
    /// Only these kinds (kind, plural or `plural.group`); empty: all.
    pub kinds: Vec<String>,
    /// Also rename the source groups in RBAC rules and webhook
    /// configurations' rules (else they are only listed).
    pub rename_references: bool,
    /// Act even though a source was written by someone else moments ago.
    pub controllers_stopped: bool,
    /// How many objects move at once (at least 1).
    pub concurrency: usize,
}

/// A source written by another field manager within this many seconds
/// suggests its controller still runs (see `plan::recent_writers`).
const RECENT_WRITE_SECS: i64 = 60;

/// An object outside the migration that names a source group.
struct Reference {
    /// `Kind namespace/name: paths`.
    line: String,
    /// Its API path, when `--rename-references` can rename it.
    path: Option<String>,
}

/// Why a migration stopped before it could say what was left.
#[derive(Debug, thiserror::Error)]
pub enum MigrateError {
    /// Nothing is renamed.
    #[error("--from and --to are both the identity: there is nothing to move")]
    Identity,
    /// The cluster the settings name.
    #[error(transparent)]
    Upstream(#[from] crate::upstream::from_settings::FromSettingsError),
    /// The async runtime.
    #[error("starting the runtime: {0}")]
    Runtime(#[source] std::io::Error),
    /// The CRDs could not be listed.
    #[error("listing CRDs: {0}")]
    ListCrds(#[source] CallError),
    /// A kind's objects could not be listed.
    #[error("listing {label}: {source}")]
    List {
        /// The kind.
        label: String,
        /// Why.
        source: CallError,
    },
    /// A listed object is not JSON.
    #[error("listing {label}: {source}")]
    Item {
        /// The kind.
        label: String,
        /// The parser's complaint.
        source: serde_json::Error,
    },
    /// A listed object has no name or uid.
    #[error("listing {0}: an item without a name or uid")]
    Unnamed(String),
    /// A target collection could not be listed.
    #[error("listing the targets {path}: {source}")]
    ListTargets {
        /// The collection.
        path: String,
        /// Why.
        source: CallError,
    },
    /// A listed target is not JSON.
    #[error("listing the targets {0}: an item is not JSON")]
    TargetNotJson(String),
    /// The cluster's discovery.
    #[error("discovery: {0}")]
    Discovery(#[source] CallError),
}

/// Runs a migration. `Ok(true)`: everything moved (or, in a dry run, the
/// plan can be carried out); `Ok(false)`: something was left, as printed.
pub fn run(opts: Options) -> Result<bool, MigrateError> {
    let settings = opts
        .to
        .as_ref()
        .or(opts.from.as_ref())
        .ok_or(MigrateError::Identity)?;
    let (upstream, _) = Upstream::from_settings(
        settings,
        &crate::upstream::from_settings::Target {
            kubeconfig: opts.kubeconfig.as_deref(),
            context: opts.context.as_deref(),
        },
    )?;
    let engine = |s: &Settings| Engine::new(s.map.clone(), Catalog::for_map(&s.fields, &s.map));
    let from = opts.from.as_ref().map(engine);
    let to = opts.to.as_ref().map(engine);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(MigrateError::Runtime)?;
    println!("cluster: {}", upstream.describe());
    let api = Api::new(OwnClient::new(Arc::new(upstream)));
    let sides = Sides {
        from: from.as_ref(),
        to: to.as_ref(),
    };
    runtime.block_on(Migration::new(&api, sides, &opts).run())
}

/// One object to move.
struct Source {
    kind: usize,
    obj: Json,
    uid: String,
    namespace: Option<String>,
    name: String,
}

impl Source {
    fn label(&self, k: &KindPlan) -> String {
        match &self.namespace {
            Some(ns) => format!("{} {ns}/{}", k.source.kind, self.name),
            None => format!("{} {}", k.source.kind, self.name),
        }
    }
}

/// What became of one object.
enum Outcome {
    /// Target made (or found), status copied, dependents re-pointed,
    /// source deleted.
    Moved,
    /// Moved but for the source's deletion: it has finalizers and
    /// `--release-finalizers` was not given.
    Blocked(String),
    /// Left in place (the source untouched or, if the target exists, not
    /// deleted): why.
    Failed(String),
}

/// A target that exists before the move, by what made it.
enum Existing {
    /// Its source, in an earlier run: the move resumes.
    Ours,
    /// Someone else: its [`MIGRATED_FROM`] annotation's value, or `absent`.
    Theirs(String),
}

struct Migration<'a> {
    api: &'a Api,
    sides: Sides<'a>,
    opts: &'a Options,
    kinds: Vec<KindPlan>,
    sources: Vec<Source>,
    /// Dependents of the sources, by owner uid.
    dependents: RefCell<BTreeMap<String, Vec<Dependent>>>,
    /// Kinds the scan could not list: (collection, why).
    unscanned: Vec<(String, String)>,
    /// Targets that already exist, by source uid.
    existing: HashMap<String, Existing>,
    /// source uid → (target apiVersion, target uid), as moved.
    moved: RefCell<HashMap<String, (String, String)>>,
    /// Dependents re-pointed in this run: (path, label).
    repointed: RefCell<Vec<(String, String)>>,
}

impl<'a> Migration<'a> {
    fn new(api: &'a Api, sides: Sides<'a>, opts: &'a Options) -> Self {
        Migration {
            api,
            sides,
            opts,
            kinds: Vec::new(),
            sources: Vec::new(),
            dependents: RefCell::new(BTreeMap::new()),
            unscanned: Vec::new(),
            existing: HashMap::new(),
            moved: RefCell::new(HashMap::new()),
            repointed: RefCell::new(Vec::new()),
        }
    }

    async fn run(mut self) -> Result<bool, MigrateError> {
        let crds: Vec<Crd> = self
            .api
            .list(
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                false,
            )
            .await
            .map_err(MigrateError::ListCrds)?
            .iter()
            .filter_map(|raw| plan::Crd::parse(&serde_json::from_str(raw.get()).ok()?))
            .collect();
        self.kinds = plan::kinds(&crds, &self.sides, &self.opts.kinds);
        if self.kinds.is_empty() {
            if self.opts.kinds.is_empty() {
                println!("nothing to move: no CRD on the cluster is in a group FROM and TO place differently");
                return Ok(true);
            }
            println!(
                "nothing to move: no CRD of kind {} is in a group FROM and TO place differently",
                self.opts.kinds.join(", ")
            );
            return Ok(false);
        }
        self.list_sources().await?;
        self.find_existing_targets().await?;
        self.scan_dependents().await?;
        let references = self.references().await;
        let plan_ok = self.print_plan(&references);
        if self.opts.yes && !self.unscanned.is_empty() {
            // A dependent not found is a dependent whose owner would be
            // deleted under it: nothing moves until every kind is scanned.
            println!();
            println!("result: NOTHING moved: some kinds could not be scanned for dependents (above); fix access to them (or narrow --kinds) and run again");
            return Ok(false);
        }
        let recent = self.recently_written();
        if !recent.is_empty() {
            println!();
            println!("a controller may still be running: written in the last {RECENT_WRITE_SECS} s by someone other than regroup migrate:");
            for r in &recent {
                println!("  {r}");
            }
            if self.opts.yes && !self.opts.controllers_stopped {
                println!("refusing to move while they may be written: stop the operator's controllers (or, if these writes were yours, pass --controllers-stopped)");
                return Ok(false);
            }
        }
        if !self.opts.yes {
            println!();
            println!("dry run: nothing was changed. Stop the operator's controllers for these groups, then run again with --yes to move.");
            return Ok(plan_ok);
        }
        let mut all_ok = self.act().await;
        if self.opts.rename_references {
            all_ok &= self.rename_references(&references).await;
        }
        let verified = self.verify().await;
        println!();
        if plan_ok && all_ok && verified {
            println!("result: everything moved");
            Ok(true)
        } else {
            println!("result: NOT everything moved (see above); run again to resume once fixed");
            Ok(false)
        }
    }

    async fn list_sources(&mut self) -> Result<(), MigrateError> {
        for (i, k) in self.kinds.iter().enumerate() {
            if k.target.is_err() {
                continue;
            }
            let path = k.source.collection(&k.version, None);
            let items = self
                .api
                .list(&path, false)
                .await
                .map_err(|source| MigrateError::List {
                    label: k.label(),
                    source,
                })?;
            for raw in items {
                let obj: Json =
                    serde_json::from_str(raw.get()).map_err(|source| MigrateError::Item {
                        label: k.label(),
                        source,
                    })?;
                let s = |key| plan::meta_str(&obj, key).map(str::to_owned);
                let (Some(uid), Some(name)) = (s("uid"), s("name")) else {
                    return Err(MigrateError::Unnamed(k.label()));
                };
                self.sources.push(Source {
                    kind: i,
                    namespace: s("namespace"),
                    obj,
                    uid,
                    name,
                });
            }
        }
        let objs: Vec<Json> = self.sources.iter().map(|s| s.obj.clone()).collect();
        let order = plan::order(&objs);
        let mut taken: Vec<Option<Source>> = std::mem::take(&mut self.sources)
            .into_iter()
            .map(Some)
            .collect();
        self.sources = order
            .into_iter()
            .map(|i| taken[i].take().expect("each index once"))
            .collect();
        Ok(())
    }

    /// Lists each movable kind's target collection and records, for every
    /// source whose target name is taken already, whether that target was
    /// made from it (an earlier run, resumed) or is someone else's (the
    /// move would leave both alone): the plan shows both.
    async fn find_existing_targets(&mut self) -> Result<(), MigrateError> {
        for (i, k) in self.kinds.iter().enumerate() {
            let Ok(target) = &k.target else { continue };
            if !self.sources.iter().any(|s| s.kind == i) {
                continue;
            }
            let path = target.collection(&k.version, None);
            let items = match self.api.list(&path, true).await {
                Ok(items) => items,
                Err(e) if e.is_not_found() => continue,
                Err(source) => return Err(MigrateError::ListTargets { path, source }),
            };
            let mut taken: HashMap<(Option<String>, String), Json> = HashMap::new();
            for raw in items {
                let Ok(o) = serde_json::from_str::<Json>(raw.get()) else {
                    return Err(MigrateError::TargetNotJson(path));
                };
                let ns = plan::meta_str(&o, "namespace").map(str::to_owned);
                let name = plan::meta_str(&o, "name").unwrap_or("").to_owned();
                taken.insert((ns, name), o);
            }
            for s in self.sources.iter().filter(|s| s.kind == i) {
                let key = (s.namespace.clone(), s.name.clone());
                if let Some(t) = taken.get(&key) {
                    let made = match plan::made_from(t, &s.uid) {
                        Ok(()) => Existing::Ours,
                        Err(from) => Existing::Theirs(from.to_owned()),
                    };
                    self.existing.insert(s.uid.clone(), made);
                }
            }
        }
        Ok(())
    }

    /// Lists every kind discovery shows as listable and patchable (top-level
    /// resources of every group's preferred version, the core group's too)
    /// in each namespace holding a source object, and across the cluster
    /// when a source is cluster-scoped, and keeps the objects whose
    /// ownerReferences name a source's uid.
    async fn scan_dependents(&mut self) -> Result<(), MigrateError> {
        if self.sources.is_empty() {
            return Ok(());
        }
        let mut kinds: Vec<ScanKind> = Vec::new();
        let mut prefixes = vec!["/api/v1".to_owned()];
        let groups = self
            .api
            .get("/apis")
            .await
            .map_err(MigrateError::Discovery)?;
        for g in groups
            .get("groups")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(gv) = g
                .pointer("/preferredVersion/groupVersion")
                .and_then(Json::as_str)
            {
                prefixes.push(format!("/apis/{gv}"));
            }
        }
        for p in prefixes {
            match self.api.get(&p).await {
                Ok(list) => kinds.extend(plan::scan_kinds(&p, &list)),
                // Listed in /apis, served by no one: nothing to scan.
                Err(e) if e.is_not_found() => {}
                Err(e) => self.unscanned.push((p, e.to_string())),
            }
        }
        let namespaces: BTreeSet<&str> = self
            .sources
            .iter()
            .filter_map(|s| s.namespace.as_deref())
            .collect();
        let cluster_wide = self.sources.iter().any(|s| s.namespace.is_none());
        let mut collections = Vec::new();
        for k in &kinds {
            if cluster_wide {
                collections.push((k, k.collection(None)));
            } else if k.namespaced {
                for ns in &namespaces {
                    collections.push((k, k.collection(Some(ns))));
                }
            }
        }
        // Up to SCAN_CONCURRENCY lists at once, results kept in order.
        let api = self.api;
        let lists: Vec<_> = futures_util::stream::iter(collections)
            .map(|(k, path)| async move {
                let r = api.list(&path, true).await;
                (k, path, r)
            })
            .buffered(SCAN_CONCURRENCY)
            .collect()
            .await;
        let mut found = Vec::new();
        for (k, path, r) in lists {
            match r {
                Ok(items) => {
                    found.extend(items.iter().filter_map(|raw| {
                        plan::dependent(k, &serde_json::from_str(raw.get()).ok()?)
                    }))
                }
                // Discovery lists it, the server does not serve it (an
                // aggregated API without its backend's objects, the stand-in):
                // nothing there to re-point.
                Err(e) if e.is_not_found() || e.code() == Some(405) => {}
                Err(e) => self.unscanned.push((path, e.to_string())),
            }
        }
        let uids: HashSet<String> = self.sources.iter().map(|s| s.uid.clone()).collect();
        self.dependents = RefCell::new(plan::dependents_by_owner(&found, &uids));
        Ok(())
    }

    /// Objects that still name a source group where the migration does
    /// not rename (RBAC rules, webhook rules, APIServices, the source
    /// CRDs): `Kind name: paths`.
    async fn references(&self) -> Vec<Reference> {
        let groups: Vec<String> = self
            .kinds
            .iter()
            .map(|k| k.source.group.clone())
            .collect::<BTreeSet<_>>()
            .into_iter()
            .collect();
        let mut out = Vec::new();
        for (path, kind) in [
            (
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                "ClusterRole",
            ),
            ("/apis/rbac.authorization.k8s.io/v1/roles", "Role"),
            (
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                "ValidatingWebhookConfiguration",
            ),
            (
                "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
                "MutatingWebhookConfiguration",
            ),
            ("/apis/apiregistration.k8s.io/v1/apiservices", "APIService"),
        ] {
            match self.api.list(path, false).await {
                Ok(items) => {
                    for raw in items {
                        let Ok(o) = serde_json::from_str::<Json>(raw.get()) else {
                            continue;
                        };
                        // The apiserver's own APIService of a CRD group
                        // comes and goes with the CRD: not a reference.
                        if kind == "APIService" && plan::local_apiservice(&o) {
                            continue;
                        }
                        let at = plan::references(&o, &groups);
                        if at.is_empty() {
                            continue;
                        }
                        let bare = plan::meta_str(&o, "name").unwrap_or("");
                        let ns = plan::meta_str(&o, "namespace");
                        let name = match ns {
                            Some(ns) => format!("{ns}/{bare}"),
                            None => bare.to_owned(),
                        };
                        let aggregated = plan::aggregated_cluster_role(kind, &o);
                        let path =
                            (plan::renamable_reference(kind) && !aggregated).then(|| match ns {
                                Some(ns) => {
                                    let (base, plural) =
                                        path.rsplit_once('/').unwrap_or(("", path));
                                    format!("{base}/namespaces/{ns}/{plural}/{bare}")
                                }
                                None => format!("{path}/{bare}"),
                            });
                        let hint = if kind == "APIService" {
                            " (served by its Service, not by the CRD: register it for the new group with `regroup render`, then delete it)"
                        } else if aggregated {
                            " (its rules are aggregated by Kubernetes from the ClusterRoles its aggregationRule selects: rename those, this one follows)"
                        } else {
                            ""
                        };
                        out.push(Reference {
                            line: format!("{kind} {name}: {}{hint}", at.join(", ")),
                            path,
                        });
                    }
                }
                Err(e) if e.is_not_found() => {}
                Err(e) => out.push(Reference {
                    line: format!("{kind}s not checked: {e}"),
                    path: None,
                }),
            }
        }
        for k in &self.kinds {
            out.push(Reference {
                line: format!(
                    "CustomResourceDefinition {}: the source CRD (delete it once no object is left in it)",
                    k.source.name
                ),
                path: None,
            });
        }
        out
    }

    /// Renames the source groups in the rules of the references that can
    /// be renamed in place (a PUT of the object as read, only its rules
    /// changed; read again on a conflict). False when one failed.
    async fn rename_references(&self, references: &[Reference]) -> bool {
        println!();
        println!("renaming references:");
        let mut ok = true;
        for r in references {
            let Some(path) = &r.path else { continue };
            let mut tries = 0;
            let line = loop {
                tries += 1;
                let cur = match self.api.get(path).await {
                    Ok(c) => c,
                    Err(e) if e.is_not_found() => break "gone".to_owned(),
                    Err(e) => break format!("FAILED: {e}"),
                };
                let next = match plan::renamed_references(&self.sides, &cur) {
                    Ok(Some(n)) => n,
                    Ok(None) => break "nothing to rename".to_owned(),
                    Err(e) => break format!("FAILED: {e}"),
                };
                match self.api.replace(path, &next).await {
                    Ok(_) => break "renamed".to_owned(),
                    Err(e) if e.is_conflict() && tries < 5 => continue,
                    Err(e) => break format!("FAILED: {e}"),
                }
            };
            ok &= !line.starts_with("FAILED");
            let what = r.line.split(':').next().unwrap_or(&r.line);
            println!("  {what}: {line}");
        }
        ok
    }

    /// Sources another field manager wrote in the last
    /// [`RECENT_WRITE_SECS`]: `label: manager Ns ago`.
    fn recently_written(&self) -> Vec<String> {
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_secs() as i64);
        self.sources
            .iter()
            .filter_map(|s| {
                let w = plan::recent_writers(&s.obj, now, RECENT_WRITE_SECS);
                let (manager, age) = w.first()?;
                Some(format!(
                    "{}: written by {manager} {age} s ago",
                    s.label(&self.kinds[s.kind])
                ))
            })
            .collect()
    }

    /// Prints the plan; false when some kind can't move.
    fn print_plan(&self, references: &[Reference]) -> bool {
        let mut ok = true;
        let from_to: BTreeSet<(String, String)> = self
            .kinds
            .iter()
            .map(|k| (k.source.group.clone(), k.target_group.clone()))
            .collect();
        println!("plan:");
        for (a, b) in &from_to {
            println!("  group {a} -> {b}");
        }
        for (i, k) in self.kinds.iter().enumerate() {
            let objs: Vec<&Source> = self.sources.iter().filter(|s| s.kind == i).collect();
            match &k.target {
                Err(why) => {
                    ok = false;
                    println!("  {} ({}): CANNOT MOVE: {why}", k.label(), k.source.plural);
                }
                Ok(t) => println!(
                    "  {} -> {}: {} object{} in {} (status {})",
                    k.label(),
                    t.name,
                    objs.len(),
                    if objs.len() == 1 { "" } else { "s" },
                    k.version,
                    if t.has_status(&k.version) {
                        "through the status subresource"
                    } else {
                        "with the object (no status subresource)"
                    }
                ),
            }
            for s in objs {
                let dependents = self.dependents.borrow();
                let deps = dependents.get(&s.uid).map(Vec::as_slice).unwrap_or(&[]);
                let (fins, _) = plan::finalizers(&s.obj);
                let mut line = format!("    {}", s.label(k));
                if s.obj.get("status").is_some() {
                    line.push_str(", with status");
                }
                match self.existing.get(&s.uid) {
                    Some(Existing::Ours) => {
                        line.push_str(", target made by an earlier run (resumed)")
                    }
                    Some(Existing::Theirs(from)) => {
                        ok = false;
                        line.push_str(&format!(
                            ", TARGET EXISTS and was not made from this object ({MIGRATED_FROM}: {from}): neither will be touched"
                        ));
                    }
                    None => {}
                }
                if !fins.is_empty() {
                    line.push_str(&format!(
                        ", finalizers [{}]{}",
                        fins.join(", "),
                        if self.opts.release_finalizers {
                            " (to be removed)"
                        } else {
                            " (kept: the source will not be deleted without --release-finalizers)"
                        }
                    ));
                }
                println!("{line}");
                for d in deps {
                    println!("      dependent to re-point: {}", d.label());
                }
            }
        }
        if !self.unscanned.is_empty() {
            ok = false;
            println!("  NOT scanned for dependents (a failure: their dependents would lose the owner; nothing moves until each is scanned):");
            for (p, why) in &self.unscanned {
                println!("    {p}: {why}");
            }
        }
        let (renamed, listed): (Vec<&Reference>, Vec<&Reference>) = references
            .iter()
            .partition(|r| self.opts.rename_references && r.path.is_some());
        if !renamed.is_empty() {
            println!(
                "  references to rename (--rename-references: their rules move to the new group):"
            );
            for r in renamed {
                println!("    {}", r.line);
            }
        }
        println!("  references still pointing at the old group (not changed by migrate):");
        for r in listed {
            let hint = if r.path.is_some() {
                " (--rename-references renames it)"
            } else {
                ""
            };
            println!("    {}{hint}", r.line);
        }
        ok
    }

    /// Moves every source, up to `--concurrency` at once, each only once
    /// the owners among the sources planned before it have finished (the
    /// plan's order puts owners first), so a dependent among them is made
    /// pointing at its owner's target. Lines are printed as moves finish.
    async fn act(&self) -> bool {
        println!();
        println!("moving:");
        let mut ok = true;
        let total = self.sources.len();
        let mut counts: BTreeMap<&'static str, usize> = BTreeMap::new();
        let mut progress = progress::Progress::on_stderr(total);
        let objs: Vec<&Json> = self.sources.iter().map(|s| &s.obj).collect();
        let waits_for = plan::waits_for(&objs);
        let limit = self.opts.concurrency.max(1);
        let mut finished = vec![false; total];
        let mut next = 0;
        let mut done = 0;
        let mut in_flight = futures_util::stream::FuturesUnordered::new();
        loop {
            while in_flight.len() < limit
                && next < total
                && waits_for[next].iter().all(|&j| finished[j])
            {
                let i = next;
                next += 1;
                let k = self.kinds[self.sources[i].kind].clone();
                in_flight.push(async move {
                    let outcome = self.move_one(i, &k).await;
                    (i, self.sources[i].label(&k), outcome)
                });
            }
            let Some((i, label, outcome)) = in_flight.next().await else {
                break;
            };
            finished[i] = true;
            done += 1;
            let (word, line) = match &outcome {
                Outcome::Moved => ("moved", "moved".to_owned()),
                Outcome::Blocked(why) => ("blocked", format!("NOT finished: {why}")),
                Outcome::Failed(why) => ("failed", format!("FAILED, left in place: {why}")),
            };
            *counts.entry(word).or_default() += 1;
            ok &= matches!(outcome, Outcome::Moved);
            progress.clear();
            println!("  [{done}/{total}] {label}: {line}");
            progress.show(done, &counts);
        }
        progress.finish();
        let summary: Vec<String> = counts.iter().map(|(w, n)| format!("{n} {w}")).collect();
        if total == 0 {
            println!("  nothing to move");
        } else {
            println!("  {}", summary.join(", "));
        }
        ok
    }

    async fn move_one(&self, i: usize, k: &KindPlan) -> Outcome {
        let target = k
            .target
            .as_ref()
            .expect("sources only of movable kinds")
            .clone();
        let (uid, ns, name) = {
            let s = &self.sources[i];
            (s.uid.clone(), s.namespace.clone(), s.name.clone())
        };
        let ns = ns.as_deref();
        let v = k.version.as_str();
        let src_path = k.source.object(v, ns, &name);
        let tgt_path = target.object(v, ns, &name);
        // The source as it is now (its latest status and resourceVersion).
        let bytes = match self.api.get_bytes(&src_path).await {
            Ok(b) => b,
            Err(e) if e.is_not_found() => {
                return Outcome::Failed("the source went away during the run".into())
            }
            Err(e) => return Outcome::Failed(format!("reading the source: {e}")),
        };
        let src: Json = match serde_json::from_slice(&bytes) {
            Ok(s) => s,
            Err(e) => return Outcome::Failed(format!("reading the source: {e}")),
        };
        if plan::meta_str(&src, "uid") != Some(&uid) {
            return Outcome::Failed("the source was replaced during the run (another uid)".into());
        }
        let terminating = src.pointer("/metadata/deletionTimestamp").is_some();
        let converted = match self.sides.convert(&bytes) {
            Ok(c) => c,
            Err(e) => return Outcome::Failed(e.to_string()),
        };
        // The target: made now, or found from an earlier run.
        let mut tgt = match self.api.get(&tgt_path).await {
            Ok(t) => t,
            // Deleted by someone before this run made its target: not
            // brought back. (One this run made and deleted, stopped before
            // the deletion completed, has its target and goes on below.)
            Err(e) if e.is_not_found() && terminating => {
                return Outcome::Failed(format!(
                    "the source is being deleted (deletionTimestamp set, finalizers [{}]) and has no target: not moved",
                    finalizers(&src).join(", ")
                ))
            }
            Err(e) if e.is_not_found() => {
                let body = plan::target_body(&converted, &src, &self.moved.borrow());
                match self.api.create(&target.collection(v, ns), &body).await {
                    Ok(t) => t,
                    // Made by an attempt whose answer was lost: checked below.
                    Err(e) if e.is_conflict() => match self.api.get(&tgt_path).await {
                        Ok(t) => t,
                        Err(e) => return Outcome::Failed(format!("reading the target: {e}")),
                    },
                    Err(e) => return Outcome::Failed(format!("the target was refused: {e}")),
                }
            }
            Err(e) => return Outcome::Failed(format!("reading the target: {e}")),
        };
        if let Err(from) = plan::made_from(&tgt, &uid) {
            return Outcome::Failed(format!(
                "{tgt_path} exists and was not made from this object ({MIGRATED_FROM}: {from}): neither is touched"
            ));
        }
        // Status, through the subresource (without one it came with the
        // object).
        if let (Some(status), true) = (converted.get("status"), target.has_status(v)) {
            let mut tries = 0;
            while tgt.get("status") != Some(status) {
                tries += 1;
                let mut body = tgt.clone();
                body["status"] = status.clone();
                match self.api.replace(&format!("{tgt_path}/status"), &body).await {
                    Ok(_) => break,
                    Err(e) if e.is_conflict() && tries < 5 => match self.api.get(&tgt_path).await {
                        Ok(t) => tgt = t,
                        Err(e) => return Outcome::Failed(format!("reading the target: {e}")),
                    },
                    Err(e) => {
                        return Outcome::Failed(format!(
                            "the target's status was refused: {e}; the source stays"
                        ))
                    }
                }
            }
        }
        let tuid = plan::meta_str(&tgt, "uid").unwrap_or("").to_owned();
        let tav = target.api_version(v);
        self.moved
            .borrow_mut()
            .insert(uid.clone(), (tav.clone(), tuid.clone()));
        // A moved object owned by a moved one is a re-pointed dependent
        // too (made pointing at its owner's target): verified with them.
        let owned_by_moved = plan::owner_refs(&tgt)
            .iter()
            .any(|r| self.moved.borrow().values().any(|(_, t)| *t == r.uid));
        if owned_by_moved {
            self.repointed.borrow_mut().push((
                tgt_path.clone(),
                format!("{} in {}", self.sources[i].label(k), target.group),
            ));
        }
        // A moved object that still names an unmoved source owner (which
        // only an ownership cycle leaves) is that owner's dependent now.
        for r in plan::owner_refs(&tgt) {
            if self.sources.iter().any(|s| s.uid == r.uid)
                && !self.moved.borrow().contains_key(&r.uid)
            {
                self.dependents
                    .borrow_mut()
                    .entry(r.uid.clone())
                    .or_default()
                    .push(Dependent {
                        path: tgt_path.clone(),
                        kind: target.kind.clone(),
                        namespace: ns.map(str::to_owned),
                        name: name.clone(),
                        uid: tuid.clone(),
                        owners: vec![r.uid.clone()],
                    });
            }
        }
        // Dependents.
        let deps = self
            .dependents
            .borrow()
            .get(&uid)
            .cloned()
            .unwrap_or_default();
        for d in &deps {
            if let Err(e) = self.repoint(d, &uid, &tav, &tuid).await {
                return Outcome::Failed(format!(
                    "dependent {} not re-pointed: {e}; the source stays",
                    d.label()
                ));
            }
        }
        // Finalizers, then the source.
        // The app's finalizers; the apiserver's own (a deletion of an
        // earlier run caught in progress) are left to the garbage collector.
        let (mut fins, mut system) = plan::finalizers(&src);
        let mut rv = plan::meta_str(&src, "resourceVersion")
            .unwrap_or("")
            .to_owned();
        let mut tries = 0;
        while !fins.is_empty() {
            if !self.opts.release_finalizers {
                return Outcome::Blocked(format!(
                    "the target and its dependents are in place, but the source has finalizers [{}]: it stays until they are removed (run again with --release-finalizers, or let its controller finish)",
                    fins.join(", ")
                ));
            }
            tries += 1;
            let keep = if system.is_empty() {
                Json::Null
            } else {
                json!(system)
            };
            let patch = json!({"metadata": {"finalizers": keep, "resourceVersion": rv}});
            match self.api.merge_patch(&src_path, &patch).await {
                Ok(_) => {
                    println!("    released finalizers of the source: {}", fins.join(", "));
                    break;
                }
                Err(e) if e.is_conflict() && tries < 5 => match self.api.get(&src_path).await {
                    Ok(s) if plan::meta_str(&s, "uid") == Some(&uid) => {
                        (fins, system) = plan::finalizers(&s);
                        rv = plan::meta_str(&s, "resourceVersion")
                            .unwrap_or("")
                            .to_owned();
                    }
                    Ok(_) => {
                        return Outcome::Failed("the source was replaced during the run".into())
                    }
                    Err(e) if e.is_not_found() => return Outcome::Moved,
                    Err(e) => return Outcome::Failed(format!("reading the source: {e}")),
                },
                Err(e) if e.is_not_found() => return Outcome::Moved,
                Err(e) => return Outcome::Failed(format!("releasing finalizers: {e}")),
            }
        }
        // Deleted with Orphan by an earlier run and still there: a real
        // cluster's garbage collector removes the `orphan` finalizer in its
        // own time (a new CRD's kind once its monitors see it). Deleting
        // again would change nothing and count as a write; the deletion is
        // under way.
        if terminating && system.iter().any(|f| f == "orphan") && fins.is_empty() {
            return Outcome::Moved;
        }
        let options = json!({
            "kind": "DeleteOptions",
            "apiVersion": "v1",
            "propagationPolicy": "Orphan",
            "preconditions": {"uid": uid},
        });
        match self.api.delete(&src_path, &options).await {
            Ok(_) => Outcome::Moved,
            Err(e) if e.is_not_found() => Outcome::Moved,
            Err(e) => Outcome::Failed(format!("deleting the source: {e}")),
        }
    }

    /// Re-points `d`'s references to `uid` at the target, read fresh and
    /// guarded (a list changed meanwhile is read again).
    async fn repoint(
        &self,
        d: &Dependent,
        uid: &str,
        tav: &str,
        tuid: &str,
    ) -> Result<(), CallError> {
        let mut tries = 0;
        loop {
            tries += 1;
            let cur = match self.api.get(&d.path).await {
                Ok(c) => c,
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(e),
            };
            // A dependent that is itself moved is verified as its target
            // (its source goes).
            let moved = self.sources.iter().any(|s| s.uid == d.uid);
            let Some(ops) = plan::repoint(&cur, uid, tav, tuid) else {
                if !moved {
                    self.repointed
                        .borrow_mut()
                        .push((d.path.clone(), d.label()));
                }
                return Ok(());
            };
            match self.api.json_patch(&d.path, &ops).await {
                Ok(_) => {
                    if !moved {
                        self.repointed
                            .borrow_mut()
                            .push((d.path.clone(), d.label()));
                    }
                    return Ok(());
                }
                // A failed `test` (422) or a conflict: the list changed.
                Err(e) if (e.is_conflict() || e.code() == Some(422)) && tries < 5 => continue,
                Err(e) if e.is_not_found() => return Ok(()),
                Err(e) => return Err(e),
            }
        }
    }

    /// Counts per kind and every re-pointed dependent's owners resolved.
    async fn verify(&self) -> bool {
        println!();
        println!("verification:");
        let mut ok = true;
        for (i, k) in self.kinds.iter().enumerate() {
            let target = match &k.target {
                Ok(target) => target,
                Err(why) => {
                    println!("  {}: not moved ({why})", k.label());
                    ok = false;
                    continue;
                }
            };
            let planned = self.sources.iter().filter(|s| s.kind == i).count();
            let left = self
                .api
                .list(&k.source.collection(&k.version, None), true)
                .await;
            let there = self
                .api
                .list(&target.collection(&k.version, None), true)
                .await;
            match (left, there) {
                (Ok(left), Ok(there)) => {
                    // A source whose deletion waits on the garbage collector
                    // (the `orphan` finalizer) is as good as gone.
                    let (going, left): (Vec<_>, Vec<_>) = left.into_iter().partition(|raw| {
                        serde_json::from_str::<Json>(raw.get())
                            .is_ok_and(|o| o.pointer("/metadata/deletionTimestamp").is_some())
                    });
                    let migrated = there
                        .iter()
                        .filter(|raw| {
                            serde_json::from_str::<Json>(raw.get()).is_ok_and(|o| {
                                o.pointer(&format!(
                                    "/metadata/annotations/{}",
                                    MIGRATED_FROM.replace('/', "~1")
                                ))
                                .is_some()
                            })
                        })
                        .count();
                    ok &= left.is_empty();
                    println!(
                        "  {} -> {}: {planned} to move in this run, {} left in the source{}, {} in the target ({migrated} of them migrated)",
                        k.label(),
                        target.name,
                        left.len(),
                        if going.is_empty() {
                            String::new()
                        } else {
                            format!(" ({} more being deleted)", going.len())
                        },
                        there.len()
                    );
                }
                (l, t) => {
                    ok = false;
                    let e = l.err().or(t.err()).expect("one failed");
                    println!("  {}: could not count: {e}", k.label());
                }
            }
        }
        // Owners of every re-pointed dependent, read back.
        let moved = self.moved.borrow().clone();
        let targets: HashSet<&str> = moved.values().map(|(_, u)| u.as_str()).collect();
        let repointed = self.repointed.borrow().clone();
        let mut unresolved = 0;
        let mut seen = HashSet::new();
        for (path, label) in &repointed {
            if !seen.insert(path) {
                continue;
            }
            let dep = match self.api.get(path).await {
                Ok(d) => d,
                Err(e) if e.is_not_found() => {
                    println!("  dependent {label}: GONE");
                    unresolved += 1;
                    continue;
                }
                Err(e) => {
                    println!("  dependent {label}: could not read it back: {e}");
                    unresolved += 1;
                    continue;
                }
            };
            let ns = plan::meta_str(&dep, "namespace");
            for r in plan::owner_refs(&dep) {
                if self.sources.iter().any(|s| s.uid == r.uid) {
                    println!(
                        "  dependent {label}: still owned by the source {} {} ({})",
                        r.kind, r.name, r.uid
                    );
                    unresolved += 1;
                    continue;
                }
                if !targets.contains(r.uid.as_str()) {
                    continue;
                }
                let resolved = self.owner_resolves(&r, ns).await;
                if !resolved {
                    println!(
                        "  dependent {label}: owner {} {} ({}) does not resolve",
                        r.kind, r.name, r.uid
                    );
                    unresolved += 1;
                }
            }
        }
        println!(
            "  dependents re-pointed in this run: {}, owners unresolved: {unresolved}",
            seen.len()
        );
        ok && unresolved == 0
    }

    async fn owner_resolves(&self, r: &plan::OwnerRef, ns: Option<&str>) -> bool {
        let Some((group, version)) = r.api_version.split_once('/') else {
            return false;
        };
        let Some(t) = self
            .kinds
            .iter()
            .filter_map(|k| k.target.as_ref().ok())
            .find(|t| t.group == group && t.kind == r.kind)
        else {
            return false;
        };
        match self.api.get(&t.object(version, ns, &r.name)).await {
            Ok(o) => plan::meta_str(&o, "uid") == Some(r.uid.as_str()),
            Err(_) => false,
        }
    }
}

/// Every finalizer of `obj`, the app's first.
fn finalizers(obj: &Json) -> Vec<String> {
    let (mut app, system) = plan::finalizers(obj);
    app.extend(system);
    app
}
