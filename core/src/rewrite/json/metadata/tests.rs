//! Metadata keys in JSON, on the captured Deployment and Foo
//! (testdata/kube-1.24/orig/041, 027) with an operator's own keys put in
//! by substitution, both ways, byte for byte.

use regroup_config::{Direction, GroupMap};
use serde_json::{json, Value as Json};

use crate::rewrite::json::JsonRewriter;
use crate::rewrite::Catalog;

const CONFIG: &str = "
rules:
  - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
names: {kinds: []}   # metadata alone (names are on by default)
metadata:
  prefixes:
    - {from: kopf.zalando.org, to: kopf.team1.example.com}
  values:
    - {key: controller, from: alpha, to: alpha-team1}
  exclude:
    - {kind: Secret, name: kept}
    - {kind: ConfigMap, selector: 'regroup.example.org/shared=yes'}
";

fn settings() -> (GroupMap, Catalog) {
    let s = regroup_config::load(CONFIG).unwrap();
    let c = Catalog::for_map(&s.fields, &s.map);
    (s.map, c)
}

fn rename(dir: Direction, input: &str) -> String {
    let (m, c) = settings();
    let rw = JsonRewriter::new(&m, &c, dir);
    match rw.rewrite_bytes(input.as_bytes()).unwrap() {
        Some(out) => String::from_utf8(out).unwrap(),
        None => input.to_owned(),
    }
}

/// `app` renamed to the cluster is `cluster` byte for byte, and back.
fn both_ways(app: &str, cluster: &str) {
    assert_eq!(rename(Direction::ToCluster, app), cluster, "to the cluster");
    assert_eq!(rename(Direction::ToApp, cluster), app, "to the app");
}

/// The captured Deployment with its `app` label (and the managed field
/// recording it) under the operator's prefix `p`, and its `controller`
/// label's value `v`.
fn deployment(p: &str, v: &str) -> String {
    include_str!("../../../../../testdata/kube-1.24/orig/041-get-deployment-json/response.body")
        .replace("\"app\":", &format!("\"{p}/app\":"))
        .replace("\"f:app\":", &format!("\"f:{p}/app\":"))
        .replace(
            "\"controller\":\"alpha\"",
            &format!("\"controller\":\"{v}\""),
        )
}

#[test]
fn labels_selectors_templates_and_managed_fields_of_a_deployment() {
    let app = deployment("kopf.zalando.org", "alpha");
    assert!(app.contains("\"kopf.zalando.org/app\":\"nginx\""));
    let cluster = deployment("kopf.team1.example.com", "alpha-team1").replace(
        "samplecontroller.k8s.io",
        "samplecontroller.team1.example.com",
    );
    both_ways(&app, &cluster);
    // Every occurrence: metadata, selector, template, managed fields (2).
    assert_eq!(cluster.matches("kopf.team1.example.com/app").count(), 5);
}

#[test]
fn without_metadata_rules_nothing_changes() {
    let s = regroup_config::load(
        "rules:\n  - {from: wardle.example.com, to: wardle.team1.example.com}\nnames: {kinds: []}\n",
    )
    .unwrap();
    let c = Catalog::for_map(&s.fields, &s.map);
    assert_eq!(c.places(), Catalog::new(&[]).places());
    let rw = JsonRewriter::new(&s.map, &c, Direction::ToCluster);
    let d = deployment("kopf.zalando.org", "alpha");
    assert!(rw.rewrite_bytes(d.as_bytes()).unwrap().is_none());
}

/// Another copy's keys in the app's own original prefix: never shown as
/// the app's, and a PUT of what the app read gives the cluster's bytes back.
#[test]
fn another_copys_keys_survive_a_put_round_trip() {
    let cluster = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"shared","namespace":"e2e","labels":{"kopf.team1.example.com/handled":"yes","kopf.zalando.org/handled":"yes","app":"web"},"annotations":{"kopf.zalando.org/last-handled-configuration":"{\"spec\":{}}\n","kopf.team1.example.com/last-handled-configuration":"{}"},"finalizers":["kopf.zalando.org/KopfFinalizerMarker","kopf.team1.example.com/KopfFinalizerMarker"]},"data":{"kopf.zalando.org/x":"data keys are not metadata"}}"#;
    let seen = rename(Direction::ToApp, cluster);
    let v: Json = serde_json::from_str(&seen).unwrap();
    assert_eq!(
        v["metadata"]["labels"],
        json!({"kopf.zalando.org/handled": "yes",
               "regroup-shadow.kopf.zalando.org/handled": "yes", "app": "web"})
    );
    assert_eq!(
        v["metadata"]["finalizers"],
        json!([
            "regroup-shadow.kopf.zalando.org/KopfFinalizerMarker",
            "kopf.zalando.org/KopfFinalizerMarker"
        ])
    );
    assert_eq!(
        v["data"]["kopf.zalando.org/x"],
        json!("data keys are not metadata")
    );
    // The app writes back what it read: not one byte of the other copy's.
    assert_eq!(rename(Direction::ToCluster, &seen), cluster);
}

#[test]
fn finalizer_patches_and_their_managed_fields() {
    let patch = |p: &str| {
        format!(
            r#"{{"metadata":{{"$deleteFromPrimitiveList/finalizers":["{p}/KopfFinalizerMarker"],"$setElementOrder/finalizers":["{p}/KopfFinalizerMarker","other.io/f"],"labels":{{"{p}/x":null}}}}}}"#
        )
    };
    let (m, c) = settings();
    let rw = JsonRewriter::new(&m, &c, Direction::ToCluster);
    let out = rw
        .rewrite_bytes_with(
            patch("kopf.zalando.org").as_bytes(),
            Some(("v1", "ConfigMap")),
            None,
        )
        .unwrap()
        .unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        patch("kopf.team1.example.com")
    );
    let managed = |p: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","managedFields":[{{"manager":"kopf","operation":"Update","apiVersion":"v1","fieldsType":"FieldsV1","fieldsV1":{{"f:metadata":{{"f:annotations":{{".":{{}},"f:{p}/last-handled-configuration":{{}}}},"f:finalizers":{{".":{{}},"v:\"{p}/KopfFinalizerMarker\"":{{}}}},"f:labels":{{"f:{p}/x":{{}}}}}}}}}}]}}}}"#
        )
    };
    both_ways(
        &managed("kopf.zalando.org"),
        &managed("kopf.team1.example.com"),
    );
}

#[test]
fn excluded_objects_keep_their_metadata() {
    let secret = |name: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Secret","metadata":{{"name":"{name}","labels":{{"kopf.zalando.org/x":"1"}}}}}}"#
        )
    };
    assert_eq!(
        rename(Direction::ToCluster, &secret("kept")),
        secret("kept")
    );
    assert!(rename(Direction::ToCluster, &secret("other")).contains("kopf.team1.example.com/x"));
}

#[test]
fn objects_a_selector_excludes_keep_their_metadata() {
    let cm = |shared: &str, p: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"c","labels":{{"regroup.example.org/shared":"{shared}","{p}/x":"1"}},"annotations":{{"{p}/a":"b"}}}}}}"#
        )
    };
    // Matched: kept as it is, both ways; in a list too.
    let kept = cm("yes", "kopf.zalando.org");
    assert_eq!(rename(Direction::ToCluster, &kept), kept);
    assert_eq!(rename(Direction::ToApp, &kept), kept);
    let list = format!(r#"{{"apiVersion":"v1","kind":"ConfigMapList","items":[{kept}]}}"#);
    assert_eq!(rename(Direction::ToCluster, &list), list);
    // Not matched (another value): renamed, both ways.
    both_ways(
        &cm("no", "kopf.zalando.org"),
        &cm("no", "kopf.team1.example.com"),
    );
}

#[test]
fn selectors_of_every_kind() {
    let sar = |p: &str, v: &str| {
        format!(
            r#"{{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{{"resourceAttributes":{{"verb":"list","resource":"configmaps","labelSelector":{{"rawSelector":"{p}/x in (a),controller={v}","requirements":[{{"key":"{p}/x","operator":"Exists"}},{{"key":"controller","operator":"In","values":["{v}","beta"]}}]}}}}}}}}"#
        )
    };
    both_ways(
        &sar("kopf.zalando.org", "alpha"),
        &sar("kopf.team1.example.com", "alpha-team1"),
    );
    let pod = |p: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Pod","metadata":{{"name":"p"}},"spec":{{"affinity":{{"podAntiAffinity":{{"preferredDuringSchedulingIgnoredDuringExecution":[{{"weight":1,"podAffinityTerm":{{"labelSelector":{{"matchExpressions":[{{"key":"{p}/x","operator":"Exists"}}]}},"matchLabelKeys":["{p}/rev"],"topologyKey":"kubernetes.io/hostname"}}}}]}}}},"topologySpreadConstraints":[{{"labelSelector":{{"matchLabels":{{"{p}/x":"1"}}}},"matchLabelKeys":["{p}/rev"]}}]}}}}"#
        )
    };
    both_ways(&pod("kopf.zalando.org"), &pod("kopf.team1.example.com"));
    let svc = |p: &str| {
        format!(
            r#"{{"apiVersion":"v1","kind":"Service","metadata":{{"name":"s"}},"spec":{{"selector":{{"{p}/x":"1"}}}}}}"#
        )
    };
    both_ways(&svc("kopf.zalando.org"), &svc("kopf.team1.example.com"));
    let hook = |p: &str| {
        format!(
            r#"{{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{{"name":"h"}},"webhooks":[{{"name":"w","objectSelector":{{"matchLabels":{{"{p}/x":"1"}}}},"namespaceSelector":{{"matchExpressions":[{{"key":"{p}/y","operator":"DoesNotExist"}}]}}}}]}}"#
        )
    };
    both_ways(&hook("kopf.zalando.org"), &hook("kopf.team1.example.com"));
}

#[test]
fn bad_selectors_and_keys_too_long_are_errors() {
    let (m, c) = settings();
    let rw = JsonRewriter::new(&m, &c, Direction::ToCluster);
    let sar = r#"{"apiVersion":"authorization.k8s.io/v1","kind":"SubjectAccessReview","spec":{"resourceAttributes":{"labelSelector":{"rawSelector":"kopf.zalando.org/x in (a"}}}}"#;
    assert!(rw.rewrite_bytes(sar.as_bytes()).is_err());
    let long = format!(
        r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"labels":{{"{}.kopf.zalando.org/x":"1"}}}}}}"#,
        "a".repeat(240)
    );
    let err = rw.rewrite_bytes(long.as_bytes()).unwrap_err().to_string();
    assert!(err.contains("Kubernetes refuses"), "{err}");
}

#[test]
fn json_patch_paths_name_keys_too() {
    let (m, c) = settings();
    let rw = JsonRewriter::new(&m, &c, Direction::ToCluster);
    let ops = |p: &str| {
        json!([
            {"op": "add", "path": format!("/metadata/labels/{}", p.replace('/', "~1")), "value": "1"},
            {"op": "remove", "path": format!("/metadata/annotations/{}", p.replace('/', "~1"))},
            {"op": "add", "path": "/metadata/finalizers/-", "value": p},
            {"op": "move", "from": format!("/metadata/labels/{}", p.replace('/', "~1")), "path": "/metadata/labels/other"},
        ])
        .to_string()
    };
    let out = crate::rewrite::json::json_patch::rewrite(
        &rw,
        ops("kopf.zalando.org/x").as_bytes(),
        "v1",
        "ConfigMap",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        serde_json::from_slice::<Json>(&out).unwrap(),
        serde_json::from_str::<Json>(&ops("kopf.team1.example.com/x")).unwrap()
    );
}
