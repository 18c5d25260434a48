//! PriorityClass and RuntimeClass names renamed per copy (`names:`) where a
//! pod spec names them (`priorityClassName`, `runtimeClassName`), in JSON,
//! YAML and protobuf, both ways.
//!
//! Built from kube-apiserver 1.24's captured Deployment
//! (`testdata/kube-1.24/renamed/041-get-deployment-json` and
//! `042-get-deployment-protobuf`, copied from the shared fixtures): the
//! captures name no class, so the tests set one in them (the JSON member
//! after `schedulerName`, the protobuf PodSpec field) and compare the
//! answers byte for byte. Other kinds are built with the protobuf field
//! numbers of Kubernetes' generated.proto (`test_wire`), independently of
//! regroup's descriptors.

use crate::common;
use common::names_engine as engine;
use regroup::kube::Wire;
use regroup::rewrite::protobuf::test_wire as wire;
use regroup::rewrite::protobuf::{message_for, translate_path, ProtoStep};
use regroup::rewrite::{Catalog, Context, Engine};
use regroup_config::field_path::FieldPath;
use regroup_config::Direction::{self, ToApp, ToCluster};
use wire::{cat, envelope, ld, MAGIC};

const APP_GROUP: &str = "samplecontroller.k8s.io";
const CLUSTER_GROUP: &str = "samplecontroller.team1.example.com";

fn classes() -> Engine {
    engine("  prefix: team1-\n  kinds: [PriorityClass, RuntimeClass]\n")
}

fn capture(case: &str) -> Vec<u8> {
    let p = format!(
        "{}/../testdata/kube-1.24/renamed/{case}/response.body",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn body(e: &Engine, dir: Direction, wire: Wire, cx: Context, b: &[u8]) -> Vec<u8> {
    e.body(dir, wire, cx, b)
        .unwrap()
        .unwrap_or_else(|| b.to_vec())
}

const DEPLOYMENT: Context<'static> = Context {
    hint: None,
    addressed: Some(("apps", "Deployment")),
};

/// The captured JSON Deployment with `members` added to its pod spec.
fn json_deployment(members: &str) -> Vec<u8> {
    let captured = String::from_utf8(capture("041-get-deployment-json")).unwrap();
    let at = "\"schedulerName\":\"default-scheduler\"";
    assert_eq!(captured.matches(at).count(), 1);
    captured.replace(at, &format!("{at}{members}")).into_bytes()
}

/// The captured bytes as the app sees them when no class changes: the
/// owner reference's group only.
fn groups_to_app(cluster: &[u8]) -> Vec<u8> {
    String::from_utf8(cluster.to_vec())
        .unwrap()
        .replace(CLUSTER_GROUP, APP_GROUP)
        .into_bytes()
}

#[test]
fn a_json_deployment_names_the_copys_classes_both_ways_byte_for_byte() {
    let e = classes();
    let cluster = json_deployment(
        r#","priorityClassName":"team1-batch-high","runtimeClassName":"team1-gvisor""#,
    );
    let app = groups_to_app(&json_deployment(
        r#","priorityClassName":"batch-high","runtimeClassName":"gvisor""#,
    ));
    assert_eq!(
        String::from_utf8(body(&e, ToApp, Wire::Json, DEPLOYMENT, &cluster)).unwrap(),
        String::from_utf8(app.clone()).unwrap()
    );
    assert_eq!(
        String::from_utf8(body(&e, ToCluster, Wire::Json, Context::default(), &app)).unwrap(),
        String::from_utf8(cluster).unwrap()
    );
}

#[test]
fn kept_and_other_copies_classes_pass_unchanged() {
    let e = classes();
    // The cluster's own PriorityClasses (`system-`, a dash) both ways;
    // another copy's class toward the app (it is not this copy's, so it
    // keeps its cluster name).
    for members in [
        r#","priorityClassName":"system-cluster-critical""#,
        r#","priorityClassName":"system-node-critical""#,
        r#","priorityClassName":"team2-batch-high","runtimeClassName":"team2-gvisor""#,
    ] {
        let cluster = json_deployment(members);
        let app = body(&e, ToApp, Wire::Json, DEPLOYMENT, &cluster);
        assert_eq!(app, groups_to_app(&cluster), "{members}");
    }
    for members in [
        r#","priorityClassName":"system-cluster-critical""#,
        r#","priorityClassName":"system-node-critical""#,
    ] {
        let app = groups_to_app(&json_deployment(members));
        let cluster = body(&e, ToCluster, Wire::Json, Context::default(), &app);
        assert_eq!(cluster, json_deployment(members), "{members}");
    }
}

#[test]
fn a_deployment_without_classes_changes_only_its_groups() {
    let e = classes();
    let cluster = capture("041-get-deployment-json");
    let app = body(&e, ToApp, Wire::Json, DEPLOYMENT, &cluster);
    assert_eq!(app, groups_to_app(&cluster));
    let back = body(&e, ToCluster, Wire::Json, Context::default(), &app);
    assert_eq!(back, cluster);
    // Without PriorityClass or RuntimeClass listed, a class is left alone.
    let other = engine("  prefix: team1-\n  kinds: [ClusterRole]\n");
    let app = groups_to_app(&json_deployment(r#","priorityClassName":"batch-high""#));
    let cluster = body(&other, ToCluster, Wire::Json, Context::default(), &app);
    assert_eq!(
        cluster,
        json_deployment(r#","priorityClassName":"batch-high""#)
    );
}

#[test]
fn every_pod_spec_holder_names_the_copys_classes_in_json_and_yaml() {
    let e = classes();
    let spec =
        |p: &str, r: &str| format!(r#"{{"priorityClassName":"{p}","runtimeClassName":"{r}"}}"#);
    let template = |p: &str, r: &str| format!(r#"{{"spec":{}}}"#, spec(p, r));
    let objects = |p: &str, r: &str| {
        let t = template(p, r);
        vec![
            format!(
                r#"{{"apiVersion":"v1","kind":"Pod","spec":{}}}"#,
                spec(p, r)
            ),
            format!(r#"{{"apiVersion":"v1","kind":"PodTemplate","template":{t}}}"#),
            format!(
                r#"{{"apiVersion":"v1","kind":"ReplicationController","spec":{{"template":{t}}}}}"#
            ),
            format!(r#"{{"apiVersion":"apps/v1","kind":"Deployment","spec":{{"template":{t}}}}}"#),
            format!(r#"{{"apiVersion":"apps/v1","kind":"ReplicaSet","spec":{{"template":{t}}}}}"#),
            format!(r#"{{"apiVersion":"apps/v1","kind":"StatefulSet","spec":{{"template":{t}}}}}"#),
            format!(r#"{{"apiVersion":"apps/v1","kind":"DaemonSet","spec":{{"template":{t}}}}}"#),
            format!(r#"{{"apiVersion":"batch/v1","kind":"Job","spec":{{"template":{t}}}}}"#),
            format!(
                r#"{{"apiVersion":"batch/v1","kind":"CronJob","spec":{{"jobTemplate":{{"spec":{{"template":{t}}}}}}}}}"#
            ),
            // A list's items name no kind: the list's does.
            format!(
                r#"{{"apiVersion":"apps/v1","kind":"DeploymentList","items":[{{"spec":{{"template":{t}}}}}]}}"#
            ),
        ]
    };
    let app = objects("batch-high", "gvisor");
    let cluster = objects("team1-batch-high", "team1-gvisor");
    for (a, c) in app.iter().zip(&cluster) {
        let cx = Context::default();
        let to_cluster = body(&e, ToCluster, Wire::Json, cx, a.as_bytes());
        assert_eq!(String::from_utf8(to_cluster).unwrap(), *c);
        let to_app = body(&e, ToApp, Wire::Json, cx, c.as_bytes());
        assert_eq!(String::from_utf8(to_app).unwrap(), *a);
    }
    // YAML, as kubectl sends it.
    let yaml = |p: &str| {
        format!(
            "apiVersion: batch/v1\nkind: CronJob\nmetadata:\n  name: nightly\nspec:\n  schedule: '@daily'\n  jobTemplate:\n    spec:\n      template:\n        spec:\n          priorityClassName: {p}\n          containers:\n          - name: c\n            image: busybox\n"
        )
    };
    // YAML is renamed in place: every other byte is kept.
    let app = yaml("batch-high");
    let cluster = yaml("team1-batch-high");
    let cx = Context::default();
    let to_cluster = body(&e, ToCluster, Wire::Yaml, cx, app.as_bytes());
    assert_eq!(String::from_utf8(to_cluster).unwrap(), cluster);
    let to_app = body(&e, ToApp, Wire::Yaml, cx, cluster.as_bytes());
    assert_eq!(String::from_utf8(to_app).unwrap(), app);
}

#[test]
fn a_merge_patch_names_no_kind_and_is_renamed_by_the_addressed_one() {
    let e = classes();
    let patch = br#"{"spec":{"template":{"spec":{"priorityClassName":"batch-high"}}}}"#;
    let cx = Context {
        hint: Some(("apps/v1", "Deployment")),
        addressed: None,
    };
    let out = body(&e, ToCluster, Wire::Json, cx, patch);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"{"spec":{"template":{"spec":{"priorityClassName":"team1-batch-high"}}}}"#
    );
    // A JSON Patch, as `kubectl patch --type=json` sends it.
    let ops =
        br#"[{"op":"replace","path":"/spec/template/spec/runtimeClassName","value":"gvisor"}]"#;
    let out = body(&e, ToCluster, Wire::JsonPatch, cx, ops);
    assert_eq!(
        String::from_utf8(out).unwrap(),
        r#"[{"op":"replace","path":"/spec/template/spec/runtimeClassName","value":"team1-gvisor"}]"#
    );
    // The addressed resource gives the kind (`deployments` is `Deployment`).
    assert_eq!(
        Catalog::kind_for_resource("apps", "deployments"),
        Some("Deployment")
    );
    assert_eq!(
        Catalog::kind_for_resource("batch", "cronjobs"),
        Some("CronJob")
    );
}

#[test]
fn another_copys_priority_classes_are_hidden_and_the_clusters_shown() {
    let e = classes();
    let list = |items: &[&str]| {
        let items: Vec<String> = items
            .iter()
            .map(|n| format!(r#"{{"metadata":{{"name":"{n}"}},"value":1000}}"#))
            .collect();
        format!(
            r#"{{"kind":"PriorityClassList","apiVersion":"scheduling.k8s.io/v1","metadata":{{}},"items":[{}]}}"#,
            items.join(",")
        )
    };
    let cluster = list(&[
        "system-cluster-critical",
        "team1-batch-high",
        "team2-batch-high",
    ]);
    let cx = Context {
        hint: None,
        addressed: Some(("scheduling.k8s.io", "PriorityClass")),
    };
    let app = body(&e, ToApp, Wire::Json, cx, cluster.as_bytes());
    assert_eq!(
        String::from_utf8(app).unwrap(),
        list(&["system-cluster-critical", "batch-high"])
    );
}

// Protobuf.

/// `msg` with the length-delimited `field` set to `value` in the message at
/// `path` (a chain of length-delimited fields), in place when present, else
/// appended; every length above it re-encoded. Other bytes are kept.
fn set_field(msg: &[u8], path: &[u32], field: u32, value: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut set = false;
    let mut i = 0;
    while i < msg.len() {
        let start = i;
        let (key, n) = varint(&msg[i..]);
        i += n;
        let (num, wt) = ((key >> 3) as u32, key & 7);
        let payload = match wt {
            0 => {
                i += varint(&msg[i..]).1;
                None
            }
            1 => {
                i += 8;
                None
            }
            2 => {
                let (len, n) = varint(&msg[i..]);
                i += n;
                let p = &msg[i..i + len as usize];
                i += len as usize;
                Some(p)
            }
            5 => {
                i += 4;
                None
            }
            _ => panic!("wire type {wt}"),
        };
        match (path.first(), payload) {
            (None, Some(_)) if num == field => {
                out.extend(ld(field, value));
                set = true;
            }
            (Some(&p), Some(inner)) if num == p => {
                out.extend(ld(p, set_field(inner, &path[1..], field, value)));
            }
            _ => out.extend_from_slice(&msg[start..i]),
        }
    }
    if path.is_empty() && !set {
        out.extend(ld(field, value));
    }
    out
}

fn varint(b: &[u8]) -> (u64, usize) {
    let mut v = 0u64;
    for (i, c) in b.iter().enumerate() {
        v |= u64::from(c & 0x7f) << (7 * i);
        if c & 0x80 == 0 {
            return (v, i + 1);
        }
    }
    panic!("truncated varint")
}

/// runtime.Unknown `raw` (2) → Deployment `spec` (2) → DeploymentSpec
/// `template` (3) → PodTemplateSpec `spec` (2): the PodSpec.
const DEPLOYMENT_POD_SPEC: &[u32] = &[2, 2, 3, 2];
/// PodSpec `priorityClassName` and `runtimeClassName`.
const PRIORITY: u32 = 24;
const RUNTIME: u32 = 29;

fn pb_deployment(base: &[u8], priority: &str, runtime: &str) -> Vec<u8> {
    assert_eq!(&base[..4], MAGIC);
    let unknown = set_field(&base[4..], DEPLOYMENT_POD_SPEC, PRIORITY, priority);
    let unknown = set_field(&unknown, DEPLOYMENT_POD_SPEC, RUNTIME, runtime);
    cat(&[MAGIC.to_vec(), unknown])
}

/// The captured protobuf Deployment as the app sees it when no class
/// changes: its one owner reference's `apiVersion` (runtime.Unknown `raw`
/// 2 → metadata 1 → ownerReferences 13 → apiVersion 5) in the app's group.
fn pb_groups_to_app(captured: &[u8]) -> Vec<u8> {
    let owner = format!("{CLUSTER_GROUP}/v1alpha1");
    assert!(captured.windows(owner.len()).any(|w| w == owner.as_bytes()));
    let app = format!("{APP_GROUP}/v1alpha1");
    cat(&[
        MAGIC.to_vec(),
        set_field(&captured[4..], &[2, 1, 13], 5, &app),
    ])
}

#[test]
fn a_protobuf_deployment_names_the_copys_classes_both_ways_byte_for_byte() {
    let e = classes();
    let pb = Wire::Protobuf;
    let captured = capture("042-get-deployment-protobuf");
    // The capture sends an empty priorityClassName (24): nothing to rename.
    assert_eq!(
        body(&e, ToApp, pb, DEPLOYMENT, &captured),
        pb_groups_to_app(&captured)
    );
    let cluster = pb_deployment(&captured, "team1-batch-high", "team1-gvisor");
    let app = pb_deployment(&pb_groups_to_app(&captured), "batch-high", "gvisor");
    assert_eq!(body(&e, ToApp, pb, DEPLOYMENT, &cluster), app);
    assert_eq!(body(&e, ToCluster, pb, Context::default(), &app), cluster);
    // Kept and other copies' names stay.
    let kept = pb_deployment(&captured, "system-node-critical", "team2-gvisor");
    assert_eq!(
        body(&e, ToApp, pb, DEPLOYMENT, &kept),
        pb_deployment(
            &pb_groups_to_app(&captured),
            "system-node-critical",
            "team2-gvisor"
        )
    );
}

#[test]
fn protobuf_pods_and_cronjobs_name_the_copys_classes() {
    let e = classes();
    let pb = Wire::Protobuf;
    let meta = |n: &str| ld(1, ld(1, n));
    let pod_spec = |p: &str, r: &str| {
        cat(&[
            ld(2, ld(1, "c")), // containers[0].name
            ld(PRIORITY, p),
            ld(RUNTIME, r),
        ])
    };
    let pod = |p: &str, r: &str| envelope("v1", "Pod", &cat(&[meta("p"), ld(2, pod_spec(p, r))]));
    // CronJob spec (2) → jobTemplate (5) → spec (2) → template (6) → spec (2).
    let cronjob = |p: &str, r: &str| {
        let template = ld(6, ld(2, pod_spec(p, r)));
        envelope(
            "batch/v1",
            "CronJob",
            &cat(&[meta("nightly"), ld(2, ld(5, ld(2, template)))]),
        )
    };
    // A PodList: items (2), each a Pod.
    let pod_list = |p: &str, r: &str| {
        let item = cat(&[meta("p"), ld(2, pod_spec(p, r))]);
        envelope("v1", "PodList", &cat(&[ld(1, ""), ld(2, item)]))
    };
    for build in [&pod as &dyn Fn(&str, &str) -> Vec<u8>, &cronjob, &pod_list] {
        let app = build("batch-high", "gvisor");
        let cluster = build("team1-batch-high", "team1-gvisor");
        assert_eq!(body(&e, ToCluster, pb, Context::default(), &app), cluster);
        assert_eq!(body(&e, ToApp, pb, Context::default(), &cluster), app);
    }
}

#[test]
fn the_pod_spec_paths_reach_kubernetes_field_numbers() {
    // Each place's path, translated by regroup's descriptors, lands on the
    // numbers of Kubernetes' generated.proto.
    let cases: &[(&str, &str, &str, &str, &[u32])] = &[
        ("", "v1", "Pod", "spec.", &[2]),
        ("", "v1", "PodTemplate", "template.spec.", &[2, 2]),
        (
            "",
            "v1",
            "ReplicationController",
            "spec.template.spec.",
            &[2, 3, 2],
        ),
        (
            "apps",
            "v1",
            "Deployment",
            "spec.template.spec.",
            &[2, 3, 2],
        ),
        (
            "apps",
            "v1",
            "ReplicaSet",
            "spec.template.spec.",
            &[2, 3, 2],
        ),
        (
            "apps",
            "v1",
            "StatefulSet",
            "spec.template.spec.",
            &[2, 3, 2],
        ),
        ("apps", "v1", "DaemonSet", "spec.template.spec.", &[2, 2, 2]),
        ("batch", "v1", "Job", "spec.template.spec.", &[2, 6, 2]),
        (
            "batch",
            "v1",
            "CronJob",
            "spec.jobTemplate.spec.template.spec.",
            &[2, 5, 2, 6, 2],
        ),
    ];
    for (g, v, k, spec, numbers) in cases {
        let m = message_for(g, v, k).unwrap_or_else(|| panic!("{k} has a message"));
        for (field, last) in [
            ("priorityClassName", PRIORITY),
            ("runtimeClassName", RUNTIME),
        ] {
            let path = FieldPath::parse(&format!("{spec}{field}")).unwrap();
            let (steps, _) = translate_path(&m, &path).unwrap_or_else(|| panic!("{k} {path}"));
            let got: Vec<u32> = steps
                .iter()
                .map(|s| match s {
                    ProtoStep::Field(f) => f.number(),
                    ProtoStep::MapKey(k) => panic!("map key {k}"),
                })
                .collect();
            let want: Vec<u32> = numbers.iter().copied().chain([last]).collect();
            assert_eq!(got, want, "{k} {path}");
        }
        let list = message_for(g, v, &format!("{k}List")).unwrap_or_else(|| panic!("{k}List"));
        let items = translate_path(&list, &FieldPath::parse("items").unwrap()).unwrap();
        assert!(
            matches!(&items.0[..], [ProtoStep::Field(f)] if f.number() == 2),
            "{k}List"
        );
    }
}
