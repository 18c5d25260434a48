//! The plan on real objects: the kube-apiserver 1.24 captures
//! (`testdata/kube-1.24`), where the `orig` world holds the Foos under
//! `samplecontroller.k8s.io` and the `renamed` world under
//! `samplecontroller.team1.example.com`, with a Deployment and ConfigMaps
//! owned by them (real uids).

use std::collections::{HashMap, HashSet};

use regroup_config::Settings;
use serde_json::{json, Value as Json};

use super::plan::{self, Crd, Sides, MIGRATED_FROM};
use crate::rewrite::{Catalog, Engine};

const ORIG: &str = "samplecontroller.k8s.io";
const TEAM1: &str = "samplecontroller.team1.example.com";
const TEAM2: &str = "samplecontroller.team2.example.com";
const ALPHA: &str = "0b4459ae-6b7f-4714-8b54-c2a993ef70c6";
const BETA: &str = "3866c317-3349-4653-bb32-edf8fdf9116d";
const GAMMA: &str = "6d015ede-5983-4f0e-bf48-2ecb4ecb0fcd";

fn capture(world: &str, case: &str) -> Vec<u8> {
    let path = format!(
        "{}/../testdata/kube-1.24/{world}/{case}/response.body",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn json_of(b: &[u8]) -> Json {
    serde_json::from_slice(b).unwrap()
}

/// The items of a captured list, each as its own bytes (as the migration
/// takes them from a list).
fn items(world: &str, case: &str) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct L {
        items: Vec<Box<serde_json::value::RawValue>>,
    }
    let l: L = serde_json::from_slice(&capture(world, case)).unwrap();
    l.items.into_iter().map(|r| r.get().to_owned()).collect()
}

fn settings(to: &str) -> Settings {
    regroup_config::load(&format!("rules:\n  - from: {ORIG}\n    to: {to}\n")).unwrap()
}

fn engine(s: &Settings) -> Engine {
    Engine::new(s.map.clone(), Catalog::for_map(&s.fields, &s.map))
}

#[test]
fn which_groups_move() {
    let (t1, t2) = (settings(TEAM1), settings(TEAM2));
    let tg = |from: Option<&Settings>, to: Option<&Settings>, g: &str| {
        plan::target_group(from.map(|s| &s.map), to.map(|s| &s.map), g)
    };
    // A copy moves from one renamed group to another.
    assert_eq!(tg(Some(&t1), Some(&t2), TEAM1).as_deref(), Some(TEAM2));
    // The original group belongs to another install, TEAM2 already is the
    // target, `apps` is no one's.
    for g in [ORIG, TEAM2, "apps", "example.com"] {
        assert_eq!(tg(Some(&t1), Some(&t2), g), None, "{g}");
    }
    // The original install moves under a renamed group; nothing else does.
    assert_eq!(tg(None, Some(&t1), ORIG).as_deref(), Some(TEAM1));
    for g in [TEAM1, TEAM2, "apps"] {
        assert_eq!(tg(None, Some(&t1), g), None, "{g}");
    }
    // And back (rollback of the first situation).
    assert_eq!(tg(Some(&t1), None, TEAM1).as_deref(), Some(ORIG));
    assert_eq!(tg(Some(&t1), None, ORIG), None);
}

#[test]
fn kinds_are_checked_against_the_target_crd() {
    let t1 = settings(TEAM1);
    let e1 = engine(&t1);
    let sides = Sides {
        from: None,
        to: Some(&e1),
    };
    let orig = Crd::parse(&json_of(&capture("orig", "036-get-crd-json"))).unwrap();
    let renamed = Crd::parse(&json_of(&capture("renamed", "036-get-crd-json"))).unwrap();
    assert_eq!(orig.group, ORIG);
    assert_eq!((orig.storage.as_str(), orig.namespaced), ("v1alpha1", true));
    assert!(orig.has_status("v1alpha1") && orig.established);

    let ks = plan::kinds(&[orig.clone(), renamed.clone()], &sides, &[]);
    assert_eq!(ks.len(), 1, "only the original group moves");
    let k = &ks[0];
    assert_eq!(
        (k.label().as_str(), k.target_group.as_str()),
        ("Foo.samplecontroller.k8s.io", TEAM1)
    );
    assert_eq!(k.target.as_ref().unwrap(), &renamed);
    assert_eq!(k.version, "v1alpha1");
    assert_eq!(
        k.source.collection(&k.version, Some("orig")),
        "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/orig/foos"
    );
    let mut cluster_scoped = orig.clone();
    cluster_scoped.namespaced = false;
    assert_eq!(
        cluster_scoped.object("v1alpha1", Some("orig"), "x"),
        "/apis/samplecontroller.k8s.io/v1alpha1/foos/x"
    );

    // --kind filters; an unknown kind gives nothing.
    assert_eq!(
        plan::kinds(&[orig.clone(), renamed.clone()], &sides, &["foos".into()]).len(),
        1
    );
    assert!(plan::kinds(&[orig.clone(), renamed.clone()], &sides, &["Bar".into()]).is_empty());

    // No target CRD, or one not Established, or not serving the storage
    // version: the kind can't move, saying why.
    let why = |crds: &[Crd]| {
        plan::kinds(crds, &sides, &[])[0]
            .target
            .clone()
            .unwrap_err()
            .to_string()
    };
    assert!(why(std::slice::from_ref(&orig))
        .contains("foos.samplecontroller.team1.example.com does not exist"));
    let mut pending = renamed.clone();
    pending.established = false;
    assert!(why(&[orig.clone(), pending]).contains("is not Established"));
    let mut other = renamed.clone();
    other.served = vec!["v1beta1".into()];
    assert!(why(&[orig, other]).contains("does not serve v1alpha1"));
}

#[test]
fn a_crd_converts_to_the_target_groups_crd() {
    // The renamed world's CRD, moved from team1 to team2: the CRD a user
    // renders for TO names the new group everywhere.
    let (t1, t2) = (settings(TEAM1), settings(TEAM2));
    let (e1, e2) = (engine(&t1), engine(&t2));
    let sides = Sides {
        from: Some(&e1),
        to: Some(&e2),
    };
    let crd = sides
        .convert(&capture("renamed", "036-get-crd-json"))
        .unwrap();
    let c = Crd::parse(&crd).unwrap();
    assert_eq!(c.name, format!("foos.{TEAM2}"));
    assert_eq!(c.group, TEAM2);
}

#[test]
fn an_object_converts_with_every_field_kept() {
    let (t1, t2) = (settings(TEAM1), settings(TEAM2));
    let (e1, e2) = (engine(&t1), engine(&t2));
    let sides = Sides {
        from: Some(&e1),
        to: Some(&e2),
    };
    let foos = items("renamed", "111-list-foo-json");
    let alpha_src = json_of(foos[0].as_bytes());
    // A field regroup knows nothing about, holding the group's name, stays.
    let mut with_unknown = alpha_src.clone();
    with_unknown["spec"]["note"] = json!({"group": TEAM1, "nested": [1.5, "x"]});
    let bytes = serde_json::to_vec(&with_unknown).unwrap();
    let conv = sides.convert(&bytes).unwrap();
    assert_eq!(conv["apiVersion"], format!("{TEAM2}/v1alpha1"));
    assert_eq!(conv["spec"]["note"], with_unknown["spec"]["note"]);
    assert_eq!(conv["spec"]["replicas"], 1);
    assert_eq!(conv["status"], json!({"availableReplicas": 1}));
    // managedFields are renamed too (but dropped from the body to create).
    assert_eq!(
        conv["metadata"]["managedFields"][0]["apiVersion"],
        format!("{TEAM2}/v1alpha1")
    );

    let body = plan::target_body(&conv, &alpha_src, &HashMap::new());
    let md = body["metadata"].as_object().unwrap();
    for gone in [
        "uid",
        "resourceVersion",
        "creationTimestamp",
        "generation",
        "managedFields",
    ] {
        assert!(!md.contains_key(gone), "{gone} kept");
    }
    assert_eq!(md["name"], "alpha");
    assert_eq!(md["namespace"], "renamed");
    assert_eq!(md["labels"], json!({"app": "alpha"}));
    assert_eq!(md["annotations"], json!({MIGRATED_FROM: ALPHA}));
    assert!(!md.contains_key("ownerReferences"));
    assert_eq!(body["status"], conv["status"]);
    // Everything else is the converted object's.
    let strip = |o: &Json| {
        let mut o = o.clone();
        o.as_object_mut().unwrap().remove("metadata");
        o
    };
    assert_eq!(strip(&body), strip(&conv));

    // The app's finalizers go with the object; the apiserver's deletion
    // finalizers (a source caught being deleted) do not.
    let mut held = conv.clone();
    held["metadata"]["finalizers"] = json!([
        "samplecontroller.k8s.io/cleanup",
        "orphan",
        "foregroundDeletion"
    ]);
    let body = plan::target_body(&held, &alpha_src, &HashMap::new());
    assert_eq!(
        body["metadata"]["finalizers"],
        json!(["samplecontroller.k8s.io/cleanup"])
    );
    held["metadata"]["finalizers"] = json!(["orphan"]);
    let body = plan::target_body(&held, &alpha_src, &HashMap::new());
    assert!(body["metadata"].get("finalizers").is_none());
    // Released by --release-finalizers: the app's only (the garbage
    // collector's `orphan` still has to orphan what the scan did not see).
    let f = json!({"metadata": {"finalizers": ["a.example/x", "orphan", "b.example/y"]}});
    assert_eq!(
        plan::finalizers(&f),
        (
            vec!["a.example/x".to_owned(), "b.example/y".to_owned()],
            vec!["orphan".to_owned()]
        )
    );
    assert_eq!(plan::finalizers(&json!({"metadata": {}})), (vec![], vec![]));
}

/// The renamed world's Foos, each owned as `owners` says (by index).
fn foos_owned(owners: &[(usize, usize)]) -> Vec<Json> {
    let mut foos: Vec<Json> = items("renamed", "111-list-foo-json")
        .iter()
        .map(|s| json_of(s.as_bytes()))
        .collect();
    for &(dep, owner) in owners {
        let o = &foos[owner];
        let r = json!({"apiVersion": o["apiVersion"], "kind": "Foo", "name": o["metadata"]["name"],
                       "uid": o["metadata"]["uid"], "controller": true, "blockOwnerDeletion": true});
        foos[dep]["metadata"]["ownerReferences"] = json!([r]);
    }
    foos
}

fn names(objs: &[Json], order: &[usize]) -> Vec<String> {
    order
        .iter()
        .map(|&i| objs[i]["metadata"]["name"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn owners_move_before_what_they_own() {
    // As listed (alpha, beta, gamma), nothing owned: that order.
    let foos = foos_owned(&[]);
    assert_eq!(
        names(&foos, &plan::order(&foos)),
        ["alpha", "beta", "gamma"]
    );
    // alpha owned by beta, beta by gamma: gamma, beta, alpha.
    let foos = foos_owned(&[(0, 1), (1, 2)]);
    assert_eq!(
        names(&foos, &plan::order(&foos)),
        ["gamma", "beta", "alpha"]
    );
    // A cycle (alpha <-> beta) comes after what can be ordered.
    let foos = foos_owned(&[(0, 1), (1, 0)]);
    assert_eq!(
        names(&foos, &plan::order(&foos)),
        ["gamma", "alpha", "beta"]
    );
    // An owner outside the moved set does not hold anything back.
    let mut foos = foos_owned(&[]);
    foos[0]["metadata"]["ownerReferences"] =
        json!([{"apiVersion": "v1", "kind": "ConfigMap", "name": "x", "uid": "elsewhere"}]);
    assert_eq!(
        names(&foos, &plan::order(&foos)),
        ["alpha", "beta", "gamma"]
    );
}

/// Concurrent moves: each object waits for its owners planned before it,
/// nothing else; in a cycle the later owner is not waited for (no
/// deadlock).
#[test]
fn each_object_waits_for_its_earlier_owners_only() {
    let waited = |owners: &[(usize, usize)]| -> Vec<(String, Vec<String>)> {
        let objs = foos_owned(owners);
        let order = plan::order(&objs);
        let ordered: Vec<&Json> = order.iter().map(|&i| &objs[i]).collect();
        let name = |i: usize| plan::meta_str(ordered[i], "name").unwrap().to_owned();
        plan::waits_for(&ordered)
            .iter()
            .enumerate()
            .map(|(i, w)| {
                assert!(w.iter().all(|&j| j < i), "only earlier ones");
                (name(i), w.iter().map(|&j| name(j)).collect())
            })
            .collect()
    };
    let none = Vec::<String>::new;
    // gamma owned by beta, beta by alpha: a chain; alpha waits for nobody.
    assert_eq!(
        waited(&[(2, 1), (1, 0)]),
        [
            ("alpha".to_owned(), none()),
            ("beta".to_owned(), vec!["alpha".to_owned()]),
            ("gamma".to_owned(), vec!["beta".to_owned()]),
        ]
    );
    // alpha and beta own each other: exactly one waits for the other.
    let cycle = waited(&[(0, 1), (1, 0)]);
    assert_eq!(
        cycle.iter().map(|(_, w)| w.len()).sum::<usize>(),
        1,
        "{cycle:?}"
    );
    assert!(cycle.iter().any(|(n, w)| n == "gamma" && w.is_empty()));
}

#[test]
fn a_moved_dependent_points_at_its_owners_target_once_that_exists() {
    // beta owned by alpha; alpha moved already, gamma's owner not.
    let foos = foos_owned(&[(1, 0), (2, 1)]);
    let (t1, t2) = (settings(TEAM1), settings(TEAM2));
    let (e1, e2) = (engine(&t1), engine(&t2));
    let sides = Sides {
        from: Some(&e1),
        to: Some(&e2),
    };
    let moved: HashMap<String, (String, String)> = [(
        ALPHA.to_owned(),
        (format!("{TEAM2}/v1alpha1"), "alpha-target-uid".to_owned()),
    )]
    .into();
    let conv = sides
        .convert(&serde_json::to_vec(&foos[1]).unwrap())
        .unwrap();
    let beta = plan::target_body(&conv, &foos[1], &moved);
    assert_eq!(
        beta["metadata"]["ownerReferences"],
        json!([{"apiVersion": format!("{TEAM2}/v1alpha1"), "kind": "Foo", "name": "alpha",
                "uid": "alpha-target-uid", "controller": true, "blockOwnerDeletion": true}])
    );
    // gamma's owner (beta) has no target yet: gamma keeps the reference to
    // the source beta, in the source's group, which still resolves.
    let conv = sides
        .convert(&serde_json::to_vec(&foos[2]).unwrap())
        .unwrap();
    let gamma = plan::target_body(&conv, &foos[2], &moved);
    assert_eq!(
        gamma["metadata"]["ownerReferences"],
        foos[2]["metadata"]["ownerReferences"]
    );
    assert_eq!(
        gamma["metadata"]["ownerReferences"][0]["apiVersion"],
        format!("{TEAM1}/v1alpha1")
    );
}

#[test]
fn scan_kinds_are_the_listable_patchable_top_level_resources() {
    let core = json_of(&capture("common", "004-discovery-api-v1-json"));
    let ks = plan::scan_kinds("/api/v1", &core);
    let names: HashSet<&str> = ks.iter().map(|k| k.plural.as_str()).collect();
    for want in ["configmaps", "pods", "secrets", "services", "namespaces"] {
        assert!(names.contains(want), "{want}");
    }
    // bindings (create only), subresources, componentstatuses (no patch).
    for not in ["bindings", "pods/log", "pods/status", "componentstatuses"] {
        assert!(!names.contains(not), "{not}");
    }
    let cm = ks.iter().find(|k| k.plural == "configmaps").unwrap();
    assert_eq!((cm.kind.as_str(), cm.namespaced), ("ConfigMap", true));
    assert_eq!(
        cm.collection(Some("renamed")),
        "/api/v1/namespaces/renamed/configmaps"
    );
    let ns = ks.iter().find(|k| k.plural == "namespaces").unwrap();
    assert_eq!(ns.collection(Some("renamed")), "/api/v1/namespaces");
}

fn captured_dependents() -> Vec<plan::Dependent> {
    let deploy = plan::ScanKind {
        prefix: "/apis/apps/v1".into(),
        plural: "deployments".into(),
        kind: "Deployment".into(),
        namespaced: true,
    };
    let cms = plan::ScanKind {
        prefix: "/api/v1".into(),
        plural: "configmaps".into(),
        kind: "ConfigMap".into(),
        namespaced: true,
    };
    let mut out = Vec::new();
    for (k, case) in [
        (&deploy, "121-list-deployment-json"),
        (&cms, "126-list-configmap-json"),
    ] {
        for i in items("renamed", case) {
            out.extend(plan::dependent(k, &json_of(i.as_bytes())));
        }
    }
    out
}

#[test]
fn dependents_are_found_by_owner_uid() {
    let found = captured_dependents();
    let uids: HashSet<String> = [ALPHA, BETA, GAMMA].map(String::from).into();
    let by = plan::dependents_by_owner(&found, &uids);
    let labels = |uid: &str| -> Vec<String> {
        by.get(uid)
            .map(|v| v.iter().map(|d| d.label()).collect())
            .unwrap_or_default()
    };
    assert_eq!(
        labels(ALPHA),
        [
            "Deployment renamed/alpha-deploy",
            "ConfigMap renamed/alpha-cm"
        ]
    );
    assert_eq!(labels(BETA), ["ConfigMap renamed/beta-cm"]);
    assert!(labels(GAMMA).is_empty());
    let d = &by[ALPHA][0];
    assert_eq!(
        d.path,
        "/apis/apps/v1/namespaces/renamed/deployments/alpha-deploy"
    );
    // Only the owners being moved are indexed.
    let only_beta: HashSet<String> = [BETA.to_owned()].into();
    assert_eq!(plan::dependents_by_owner(&found, &only_beta).len(), 1);
}

#[test]
fn a_dependent_is_re_pointed_and_nothing_else_changes() {
    let cms: Vec<Json> = items("renamed", "126-list-configmap-json")
        .iter()
        .map(|s| json_of(s.as_bytes()))
        .collect();
    let alpha_cm = &cms[0];
    assert_eq!(alpha_cm["metadata"]["name"], "alpha-cm");
    let tav = format!("{TEAM2}/v1alpha1");
    let ops = plan::repoint(alpha_cm, ALPHA, &tav, "target-uid").unwrap();
    // Guarded by a test of the uid it replaces.
    assert_eq!(
        ops[0],
        json!({"op": "test", "path": "/metadata/ownerReferences/0/uid", "value": ALPHA})
    );
    let mut patched = alpha_cm.clone();
    json_patch::patch(
        &mut patched,
        &serde_json::from_value::<json_patch::Patch>(ops).unwrap(),
    )
    .unwrap();
    assert_eq!(
        patched["metadata"]["ownerReferences"],
        json!([{"apiVersion": tav, "kind": "Foo", "name": "alpha", "uid": "target-uid",
                "controller": true, "blockOwnerDeletion": true}])
    );
    let mut rest = patched.clone();
    let mut before = alpha_cm.clone();
    rest["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    before["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("ownerReferences");
    assert_eq!(rest, before, "only the ownerReference changed");
    // Done is done: a second pass has nothing to do.
    assert_eq!(plan::repoint(&patched, ALPHA, &tav, "target-uid"), None);
    // A dependent of another owner is not touched.
    assert_eq!(plan::repoint(&cms[1], ALPHA, &tav, "target-uid"), None);

    // Already holding a reference to the target too: the source's is removed.
    let mut both = alpha_cm.clone();
    let mut t = both["metadata"]["ownerReferences"][0].clone();
    t["uid"] = json!("target-uid");
    t["apiVersion"] = json!(tav);
    t["controller"] = json!(false);
    both["metadata"]["ownerReferences"]
        .as_array_mut()
        .unwrap()
        .push(t.clone());
    let ops = plan::repoint(&both, ALPHA, &tav, "target-uid").unwrap();
    json_patch::patch(
        &mut both,
        &serde_json::from_value::<json_patch::Patch>(ops).unwrap(),
    )
    .unwrap();
    assert_eq!(both["metadata"]["ownerReferences"], json!([t]));
}

#[test]
fn references_to_the_old_group_are_found() {
    let role = json_of(&capture("renamed", "010-create-role"));
    assert_eq!(
        plan::references(&role, &[TEAM1.to_owned()]),
        ["rules[0].apiGroups[0]"]
    );
    assert!(plan::references(&role, &[TEAM2.to_owned()]).is_empty());
    // A qualified name (`foos.GROUP`), an apiVersion; not a label-like key
    // that merely contains the group, not a longer group.
    let o = json!({"spec": {"a": format!("foos.{TEAM1}"), "b": format!("{TEAM1}/v1"),
                            "c": format!("{TEAM1}/owner-x/y"), "d": format!("x{TEAM1}"),
                            "e": format!("{TEAM1}.other")},
                   "metadata": {"name": format!("foos.{TEAM1}")}});
    assert_eq!(
        plan::references(&o, &[TEAM1.to_owned()]),
        ["spec.a", "spec.b", "spec.c"]
    );
}

/// `--rename-references`: a ClusterRole's and a webhook configuration's
/// rules move from TEAM1 to TEAM2; their names (which `names:` would
/// rename in a whole-object conversion), other groups and every other
/// field stay; an object naming no source group is left.
#[test]
fn references_are_renamed_in_their_rules_only() {
    let (t1, t2) = (settings(TEAM1), settings(TEAM2));
    let (e1, e2) = (engine(&t1), engine(&t2));
    let sides = Sides {
        from: Some(&e1),
        to: Some(&e2),
    };
    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
        "metadata": {"name": "team1-example-com-foo-editor", "resourceVersion": "9"},
        "rules": [{"apiGroups": [TEAM1, "apps"], "resources": ["foos", "deployments"], "verbs": ["*"]},
                  {"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get"]}]});
    let next = plan::renamed_references(&sides, &role).unwrap().unwrap();
    assert_eq!(next["rules"][0]["apiGroups"], json!([TEAM2, "apps"]));
    assert_eq!(next["rules"][1], role["rules"][1]);
    assert_eq!(
        next["metadata"], role["metadata"],
        "identity and resourceVersion kept"
    );

    let hook = json!({"apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration", "metadata": {"name": "foo-hook"},
        "webhooks": [{"name": "v.foo.example.com", "sideEffects": "None",
            "clientConfig": {"url": "https://x/validate"},
            "rules": [{"apiGroups": [TEAM1], "apiVersions": ["v1alpha1"],
                       "operations": ["CREATE"], "resources": ["foos"]}]}]});
    let next = plan::renamed_references(&sides, &hook).unwrap().unwrap();
    assert_eq!(next["webhooks"][0]["rules"][0]["apiGroups"], json!([TEAM2]));
    assert_eq!(
        next["webhooks"][0]["clientConfig"],
        hook["webhooks"][0]["clientConfig"]
    );
    assert_eq!(next["metadata"], hook["metadata"]);

    let other = json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
        "metadata": {"name": "r", "namespace": "x"},
        "rules": [{"apiGroups": ["apps"], "resources": ["deployments"], "verbs": ["get"]}]});
    assert_eq!(plan::renamed_references(&sides, &other).unwrap(), None);
    assert!(!plan::renamable_reference("APIService"));
}

/// Another manager's write in the last minute is a sign of a running
/// controller; migrate's own writes, old writes and entries without a
/// time are not.
#[test]
fn recent_writers_are_other_managers_within_the_window() {
    let obj = json!({"metadata": {"managedFields": [
        {"manager": "sample-controller", "operation": "Update", "time": "2026-11-26T10:00:50Z"},
        {"manager": "kubectl-client-side-apply", "operation": "Update", "time": "2026-11-26T09:00:00Z"},
        {"manager": super::api::FIELD_MANAGER, "operation": "Update", "time": "2026-11-26T10:00:59Z"},
        {"manager": "no-time", "operation": "Update"},
        {"manager": "other", "operation": "Update", "time": "2026-11-26T10:00:10Z"}
    ]}});
    let now = time::OffsetDateTime::parse(
        "2026-11-26T10:01:00Z",
        &time::format_description::well_known::Rfc3339,
    )
    .unwrap()
    .unix_timestamp();
    assert_eq!(
        plan::recent_writers(&obj, now, 60),
        vec![
            ("sample-controller".to_owned(), 10),
            ("other".to_owned(), 50)
        ]
    );
    assert!(plan::recent_writers(&obj, now, 5).is_empty());
    assert!(plan::recent_writers(&json!({}), now, 60).is_empty());
}

/// APIServices: the apiserver's own for a CRD group (local, no service;
/// written here as kube-apiserver's CRD registration makes it) is not a
/// reference; an aggregated server's (the captured one, with a Service) is
/// found and listed, never renamed.
#[test]
fn local_apiservices_are_the_crds_and_not_references() {
    let captured = json_of(&capture("renamed", "095-get-apiservice-json"));
    assert!(!plan::local_apiservice(&captured));
    let group = captured["spec"]["group"].as_str().unwrap().to_owned();
    assert_eq!(plan::references(&captured, &[group]), ["spec.group"]);
    let local = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": format!("v1alpha1.{TEAM1}"),
                     "labels": {"kube-aggregator.kubernetes.io/automanaged": "true"}},
        "spec": {"group": TEAM1, "version": "v1alpha1", "groupPriorityMinimum": 1000, "versionPriority": 100}});
    assert!(plan::local_apiservice(&local));
    let mut with_null = local.clone();
    with_null["spec"]["service"] = Json::Null;
    assert!(plan::local_apiservice(&with_null));
}

#[test]
fn an_aggregated_cluster_role_is_not_renamed_in_place() {
    let edit = json!({"kind": "ClusterRole", "metadata": {"name": "edit"},
        "aggregationRule": {"clusterRoleSelectors": [{"matchLabels": {"rbac.authorization.k8s.io/aggregate-to-edit": "true"}}]},
        "rules": [{"apiGroups": [ORIG], "resources": ["foos"], "verbs": ["*"]}]});
    assert!(plan::aggregated_cluster_role("ClusterRole", &edit));
    let own = json!({"kind": "ClusterRole", "metadata": {"name": "foo-editor"},
        "rules": [{"apiGroups": [ORIG], "resources": ["foos"], "verbs": ["*"]}]});
    assert!(!plan::aggregated_cluster_role("ClusterRole", &own));
    let null = json!({"kind": "ClusterRole", "aggregationRule": null, "rules": []});
    assert!(!plan::aggregated_cluster_role("ClusterRole", &null));
    assert!(!plan::aggregated_cluster_role("Role", &edit));
}

#[test]
fn a_target_is_the_sources_only_by_its_annotation() {
    let ours = json!({"metadata": {"annotations": {MIGRATED_FROM: ALPHA}}});
    assert_eq!(plan::made_from(&ours, ALPHA), Ok(()));
    assert_eq!(plan::made_from(&ours, BETA), Err(ALPHA));
    let theirs = json!({"metadata": {"name": "example"}});
    assert_eq!(plan::made_from(&theirs, ALPHA), Err("absent"));
}
