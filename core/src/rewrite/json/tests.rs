//! Catalog rows that the captures don't cover (or cover only one way), the
//! reference-key heuristic, custom fields, shadowing and errors.

use regroup_config::field_path::FieldPath;
use regroup_config::{CustomField, Direction, Form, GroupMap, MapRule, Rule};
use serde_json::{json, Value as Json};

use super::*;
use crate::rewrite::Catalog;

fn rule(from: &str, to: &str, suffix: bool, reference_keys: bool) -> MapRule {
    let (from, to) = (from.to_string(), to.to_string());
    MapRule {
        rule: if suffix {
            Rule::Suffix { from, to }
        } else {
            Rule::Exact { from, to }
        },
        reference_keys,
    }
}

fn map() -> GroupMap {
    GroupMap::new(vec![
        rule(
            "samplecontroller.k8s.io",
            "samplecontroller.team1.example.com",
            false,
            true,
        ),
        rule("pinniped.dev", "pinniped.team1.example.com", true, true),
    ])
    .unwrap()
}

const APP: &str = "samplecontroller.k8s.io";
const CLUSTER: &str = "samplecontroller.team1.example.com";

/// Renames `app` to the cluster and checks it equals `cluster`, then renames
/// `cluster` back and checks it equals `app`.
fn both_ways(app: Json, cluster: Json) {
    both_ways_with(&map(), &Catalog::new(&[]), app, cluster);
}

fn both_ways_with(map: &GroupMap, catalog: &Catalog, app: Json, cluster: Json) {
    let mut v = app.clone();
    JsonRewriter::new(map, catalog, Direction::ToCluster)
        .rewrite_value(&mut v, None, None)
        .unwrap();
    assert_eq!(v, cluster, "to cluster");
    let mut v = cluster;
    JsonRewriter::new(map, catalog, Direction::ToApp)
        .rewrite_value(&mut v, None, None)
        .unwrap();
    assert_eq!(v, app, "to app");
}

fn to(dir: Direction, mut v: Json) -> Json {
    JsonRewriter::new(&map(), &Catalog::new(&[]), dir)
        .rewrite_value(&mut v, None, None)
        .unwrap();
    v
}

#[test]
fn every_object_renames_apiversion_owner_references_and_managed_fields() {
    let obj = |g: &str| {
        json!({"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo", "metadata": {
            "name": "a",
            "labels": {"samplecontroller.k8s.io/owner": "x"},
            "ownerReferences": [{"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo", "name": "p", "uid": "u"}],
            "managedFields": [{"manager": "m", "apiVersion": format!("{g}/v1alpha1"), "fieldsV1": {"f:spec": {}}}]
        }})
    };
    both_ways(obj(APP), obj(CLUSTER));
}

#[test]
fn validating_admission_policy_and_binding_rename_resource_rules_and_param_kind() {
    let vap = |g: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": "p"},
            "spec": {"paramKind": {"apiVersion": format!("{g}/v1"), "kind": "Params"},
                "matchConstraints": {
                    "resourceRules": [{"apiGroups": [g, "apps", "*"], "resources": ["foos"]}],
                    "excludeResourceRules": [{"apiGroups": [g], "resources": ["foos/status"]}]}}})
    };
    both_ways(vap(APP), vap(CLUSTER));
    let binding = |g: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": "b"},
            "spec": {"matchResources": {"resourceRules": [{"apiGroups": [g]}],
                "excludeResourceRules": [{"apiGroups": [g]}]}}})
    };
    both_ways(binding(APP), binding(CLUSTER));
}

#[test]
fn mutating_webhook_configuration_renames_rule_groups() {
    let mwc = |g: &str| {
        json!({"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": "m"},
            "webhooks": [{"name": "w.example.com", "rules": [{"apiGroups": [g, ""], "apiVersions": ["*"]}]}]})
    };
    both_ways(mwc(APP), mwc(CLUSTER));
}

#[test]
fn admission_review_renames_kinds_resources_and_embedded_objects() {
    let review = |g: &str| {
        let gvk = json!({"group": g, "version": "v1alpha1", "kind": "Foo"});
        let gvr = json!({"group": g, "version": "v1alpha1", "resource": "foos"});
        let obj = json!({"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo", "metadata": {"name": "a"}});
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {"uid": "1", "kind": gvk, "resource": gvr, "requestKind": gvk,
                "requestResource": gvr, "object": obj, "oldObject": obj,
                "userInfo": {"username": "samplecontroller.k8s.io"}}})
    };
    both_ways(review(APP), review(CLUSTER));
}

#[test]
fn self_subject_rules_review_status_groups_are_renamed() {
    let ssrr = |g: &str| {
        json!({"apiVersion": "authorization.k8s.io/v1", "kind": "SelfSubjectRulesReview",
            "spec": {"namespace": "n"},
            "status": {"resourceRules": [{"verbs": ["get"], "apiGroups": [g], "resources": ["foos"]}]}})
    };
    both_ways(ssrr(APP), ssrr(CLUSTER));
}

#[test]
fn aggregated_discovery_renames_groups_and_response_kinds() {
    // Hand-written per apidiscovery.k8s.io/v2 (the 1.24 capture predates it).
    let doc = |g: &str| {
        json!({"apiVersion": "apidiscovery.k8s.io/v2", "kind": "APIGroupDiscoveryList",
            "metadata": {}, "items": [
            {"metadata": {"name": "apps"}, "versions": [{"version": "v1", "resources": [
                {"resource": "deployments", "responseKind": {"group": "apps", "version": "v1", "kind": "Deployment"}}]}]},
            {"metadata": {"name": g}, "versions": [{"version": "v1alpha1", "resources": [
                {"resource": "foos", "responseKind": {"group": g, "version": "v1alpha1", "kind": "Foo"},
                 "subresources": [{"subresource": "scale",
                    "responseKind": {"group": "autoscaling", "version": "v1", "kind": "Scale"}},
                    {"subresource": "status", "responseKind": {"group": g, "version": "v1alpha1", "kind": "Foo"}}]}]}]}]})
    };
    both_ways(doc(APP), doc(CLUSTER));
}

#[test]
fn aggregated_discovery_hides_shadowed_upstream_groups_from_the_app() {
    let entry = |g: &str, v: &str| json!({"metadata": {"name": g}, "versions": [{"version": v}]});
    let upstream = json!({"apiVersion": "apidiscovery.k8s.io/v2beta1", "kind": "APIGroupDiscoveryList",
        "items": [entry(APP, "v1"), entry(CLUSTER, "v1alpha1")]});
    let seen = to(Direction::ToApp, upstream);
    assert_eq!(seen["items"], json!([entry(APP, "v1alpha1")]));
}

#[test]
fn discovery_group_list_from_a_real_cluster_shows_one_renamed_group() {
    // common/006: /apis of the capture cluster, which serves both worlds.
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/kube-1.24/common/006-discovery-apis-json/response.body"
    );
    let upstream: Json = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let names = |v: &Json| -> Vec<String> {
        v["groups"]
            .as_array()
            .unwrap()
            .iter()
            .map(|g| g["name"].as_str().unwrap().to_owned())
            .collect()
    };
    assert!(names(&upstream).contains(&APP.to_string()));
    assert!(names(&upstream).contains(&CLUSTER.to_string()));
    let app_view = to(Direction::ToApp, upstream.clone());
    let app_names = names(&app_view);
    assert_eq!(app_names.iter().filter(|n| *n == APP).count(), 1);
    assert!(!app_names.contains(&CLUSTER.to_string()));
    let original_index = names(&upstream).iter().position(|n| n == CLUSTER).unwrap();
    let mut renamed_entry = upstream["groups"][original_index].clone();
    let shown = app_view["groups"]
        .as_array()
        .unwrap()
        .iter()
        .find(|g| g["name"] == APP)
        .unwrap();
    // The one the app sees is the cluster's renamed group, renamed back.
    renamed_entry["name"] = json!(APP);
    for v in renamed_entry["versions"].as_array_mut().unwrap() {
        let gv = v["groupVersion"].as_str().unwrap().replace(CLUSTER, APP);
        v["groupVersion"] = json!(gv);
    }
    let pv = renamed_entry["preferredVersion"]["groupVersion"]
        .as_str()
        .unwrap()
        .replace(CLUSTER, APP);
    renamed_entry["preferredVersion"]["groupVersion"] = json!(pv);
    assert_eq!(shown, &renamed_entry);
    assert_eq!(app_names.len(), names(&upstream).len() - 1);
}

#[test]
fn status_message_and_causes_rename_resource_group_tokens() {
    let status = |g: &str| {
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
            "message": format!("Foo.{g} \"bad\" is invalid: spec: Required value"),
            "details": {"name": "bad", "group": g, "kind": "Foo",
                "causes": [{"message": format!("no matches for kind \"Foo\" in group \"{g}\""), "field": "spec"}]},
            "code": 422})
    };
    both_ways(status(APP), status(CLUSTER));
}

#[test]
fn watch_events_rename_their_object() {
    let ev = |g: &str| json!({"type": "ADDED", "object": {"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo"}});
    both_ways(ev(APP), ev(CLUSTER));
}

#[test]
fn reference_keys_anywhere_are_renamed_but_not_in_labels_annotations_or_configmap_data() {
    let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "c", "annotations": {"apiVersion": format!("{APP}/v1")},
                     "labels": {"apiGroup": APP}},
        "data": {"apiVersion": format!("{APP}/v1"), "apiGroup": APP}});
    assert_eq!(to(Direction::ToCluster, cm.clone()), cm);

    let custom = |g: &str| {
        json!({"apiVersion": "login.concierge.pinniped.dev/v1alpha1", "kind": "TokenCredentialRequest",
            "spec": {"authenticator": {"apiGroup": g, "kind": "WebhookAuthenticator"},
                     "deep": [{"ref": {"apiVersion": format!("{g}/v1")}}]}})
    };
    let mut want = custom("authentication.concierge.pinniped.team1.example.com");
    want["apiVersion"] = json!("login.concierge.pinniped.team1.example.com/v1alpha1");
    both_ways(custom("authentication.concierge.pinniped.dev"), want);
}

#[test]
fn reference_keys_can_be_turned_off_per_rule_while_catalog_places_still_rename() {
    let map = GroupMap::new(vec![rule(
        "pinniped.dev",
        "pinniped.team1.example.com",
        true,
        false,
    )])
    .unwrap();
    let mut v = json!({"apiVersion": "login.concierge.pinniped.dev/v1alpha1", "kind": "TokenCredentialRequest",
        "spec": {"authenticator": {"apiGroup": "authentication.concierge.pinniped.dev"}}});
    JsonRewriter::new(&map, &Catalog::new(&[]), Direction::ToCluster)
        .rewrite_value(&mut v, None, None)
        .unwrap();
    assert_eq!(
        v["apiVersion"],
        "login.concierge.pinniped.team1.example.com/v1alpha1"
    );
    assert_eq!(
        v["spec"]["authenticator"]["apiGroup"],
        "authentication.concierge.pinniped.dev"
    );

    // A configured field renames it regardless of the heuristic.
    let fields = [CustomField {
        group: "login.concierge.pinniped.dev".into(),
        kind: "TokenCredentialRequest".into(),
        path: FieldPath::parse("spec.authenticator.apiGroup").unwrap(),
        form: Form::Group,
    }];
    let catalog = Catalog::new(&fields);
    let app = json!({"apiVersion": "login.concierge.pinniped.dev/v1alpha1", "kind": "TokenCredentialRequest",
        "spec": {"authenticator": {"apiGroup": "authentication.concierge.pinniped.dev"}}});
    let cluster = json!({"apiVersion": "login.concierge.pinniped.team1.example.com/v1alpha1", "kind": "TokenCredentialRequest",
        "spec": {"authenticator": {"apiGroup": "authentication.concierge.pinniped.team1.example.com"}}});
    both_ways_with(&map, &catalog, app, cluster);
}

#[test]
fn custom_fields_take_each_form() {
    let map = GroupMap::new(vec![rule(APP, CLUSTER, false, false)]).unwrap();
    let field = |path: &str, form| CustomField {
        group: APP.into(),
        kind: "Foo".into(),
        path: FieldPath::parse(path).unwrap(),
        form,
    };
    let catalog = Catalog::new(&[
        field("spec.targets[].group", Form::Group),
        field("spec.ref.version", Form::ApiVersion),
        field("spec.crdName", Form::QualifiedName),
    ]);
    let foo = |g: &str| {
        json!({"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo", "spec": {
            "targets": [{"group": g}, {"group": "apps"}],
            "ref": {"version": format!("{g}/v1")},
            "crdName": format!("foos.{g}")}})
    };
    both_ways_with(&map, &catalog, foo(APP), foo(CLUSTER));
}

#[test]
fn secret_types_label_keys_and_free_text_stay() {
    let secret = json!({"apiVersion": "v1", "kind": "Secret", "type": "secrets.pinniped.dev/oidc-client",
        "metadata": {"name": "s", "labels": {"deployment.pinniped.dev": "x"},
                     "annotations": {"note": "see login.concierge.pinniped.dev"}},
        "stringData": {"apiGroup": "login.concierge.pinniped.dev"}});
    assert_eq!(to(Direction::ToCluster, secret.clone()), secret);
}

#[test]
fn merge_patches_without_type_use_the_addressed_kind() {
    let patch = |g: &str| json!({"rules": [{"apiGroups": [g], "verbs": ["get"]}]});
    let mut v = patch(APP);
    JsonRewriter::new(&map(), &Catalog::new(&[]), Direction::ToCluster)
        .rewrite_value(&mut v, Some(("rbac.authorization.k8s.io/v1", "Role")), None)
        .unwrap();
    assert_eq!(v, patch(CLUSTER));
}

#[test]
fn typed_list_items_inherit_the_list_kind() {
    let list = |g: &str| {
        json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleList",
            "items": [{"metadata": {"name": "r"}, "rules": [{"apiGroups": [g]}]}]})
    };
    both_ways(list(APP), list(CLUSTER));
}

#[test]
fn generic_v1_list_items_use_their_own_kinds() {
    let list = |g: &str| {
        json!({"apiVersion": "v1", "kind": "List", "items": [
            {"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
             "metadata": {"name": format!("foos.{g}")}, "spec": {"group": g}},
            {"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo", "metadata": {"name": "a"}}]})
    };
    both_ways(list(APP), list(CLUSTER));
}

#[test]
fn renamed_names_longer_than_a_dns_subdomain_are_an_error() {
    let long_to = format!("{}.example.com", "a".repeat(60)) + &".b".repeat(80);
    assert!(long_to.len() < 251);
    let map = GroupMap::new(vec![rule(APP, &long_to, false, true)]).unwrap();
    let mut crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{}.{APP}", "x".repeat(60))}, "spec": {"group": APP}});
    let err = JsonRewriter::new(&map, &Catalog::new(&[]), Direction::ToCluster)
        .rewrite_value(&mut crd, None, None)
        .unwrap_err();
    assert!(err.to_string().contains("longer than 253"), "{err}");
}

#[test]
fn nothing_mapped_reports_no_change() {
    let mut v = json!({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "d"}});
    let changed = JsonRewriter::new(&map(), &Catalog::new(&[]), Direction::ToCluster)
        .rewrite_value(&mut v, None, None)
        .unwrap();
    assert!(!changed);
}

fn bytes(dir: Direction, input: &str) -> Option<String> {
    JsonRewriter::new(&map(), &Catalog::new(&[]), dir)
        .rewrite_bytes(input.as_bytes())
        .unwrap()
        .map(|b| String::from_utf8(b).unwrap())
}

#[test]
fn splicing_keeps_every_other_byte() {
    let input = "{ \"kind\" : \"Foo\",\n  \"apiVersion\":\"samplecontroller.k8s.io/v1alpha1\", \"n\": 1.50e3, \"s\": \"\\u00e9\" }\n";
    let want = "{ \"kind\" : \"Foo\",\n  \"apiVersion\":\"samplecontroller.team1.example.com/v1alpha1\", \"n\": 1.50e3, \"s\": \"\\u00e9\" }\n";
    assert_eq!(bytes(Direction::ToCluster, input).as_deref(), Some(want));
}

#[test]
fn bodies_without_a_mapped_name_are_not_parsed() {
    // Not even valid JSON: without a needle, it is never looked at.
    assert_eq!(bytes(Direction::ToCluster, "{not json at all"), None);
}

#[test]
fn malformed_json_with_a_mapped_name_is_an_error() {
    let err = JsonRewriter::new(&map(), &Catalog::new(&[]), Direction::ToCluster)
        .rewrite_bytes(b"{\"apiVersion\": \"samplecontroller.k8s.io/v1\",")
        .unwrap_err();
    assert!(matches!(err, RewriteError::Malformed(_)), "{err}");
}

#[test]
fn bytes_that_are_not_utf8_are_refused_with_std_s_reason() {
    // A mapped name, then a lone continuation byte inside a string.
    let body = [
        &b"{\"apiVersion\": \"samplecontroller.k8s.io/v1\", \"x\": \""[..],
        &[0x80],
        b"\"}",
    ]
    .concat();
    let err = JsonRewriter::new(&map(), &Catalog::new(&[]), Direction::ToCluster)
        .rewrite_bytes(&body)
        .unwrap_err();
    let std_says = std::str::from_utf8(&body).unwrap_err().to_string();
    assert!(
        matches!(&err, RewriteError::Malformed(m) if m.contains(&std_says)),
        "{err}"
    );
}

#[test]
fn groups_hidden_behind_unicode_escapes_are_found() {
    let input = r#"{"apiVersion":"samplecontroller\u002ek8s.io/v1alpha1","kind":"Foo"}"#;
    assert_eq!(
        bytes(Direction::ToCluster, input).as_deref(),
        Some(r#"{"apiVersion":"samplecontroller.team1.example.com/v1alpha1","kind":"Foo"}"#)
    );
}

#[test]
fn a_mapped_api_version_whose_version_needs_escapes_keeps_them() {
    // The version holds a quote and a newline, decoded from escapes: the
    // mapped text is written as JSON again, not as the decoded bytes.
    let input = r#"{"apiVersion":"samplecontroller.k8s.io/v\"1\n","kind":"Foo"}"#;
    let got = bytes(Direction::ToCluster, input).unwrap();
    assert_eq!(
        got,
        r#"{"apiVersion":"samplecontroller.team1.example.com/v\"1\n","kind":"Foo"}"#
    );
    serde_json::from_str::<Json>(&got).unwrap();
}

#[test]
fn shadowed_discovery_entries_are_deleted_with_their_commas() {
    let list = |entries: &[&str]| {
        let groups: Vec<String> = entries
            .iter()
            .map(|g| format!("{{\"name\":\"{g}\"}}"))
            .collect();
        format!(
            r#"{{"kind":"APIGroupList","apiVersion":"v1","groups":[{}]}}"#,
            groups.join(",")
        )
    };
    let cases: &[(&[&str], &[&str])] = &[
        (&[APP, "apps", CLUSTER], &["apps", APP]),
        (&["apps", APP, "batch"], &["apps", "batch"]),
        (&[APP, "apps"], &["apps"]),
        (&["apps", APP], &["apps"]),
        (&[APP], &[]),
        (&[APP, "pinniped.dev", "apps"], &["apps"]),
        (
            &["apps", APP, "login.pinniped.dev", "batch", CLUSTER],
            &["apps", "batch", APP],
        ),
    ];
    for (upstream, seen) in cases {
        let got = bytes(Direction::ToApp, &list(upstream)).unwrap();
        assert_eq!(got, list(seen), "from {upstream:?}");
        serde_json::from_str::<Json>(&got).unwrap();
    }
}

#[test]
fn status_details_name_is_renamed_only_for_resources_whose_names_carry_a_group() {
    let status = |name: &str, group: &str, kind: &str| {
        json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
               "reason": "NotFound", "code": 404,
               "details": {"name": name, "group": group, "kind": kind}})
    };
    // CRD and APIService names carry the group.
    both_ways(
        status(
            &format!("foos.{APP}"),
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        ),
        status(
            &format!("foos.{CLUSTER}"),
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        ),
    );
    both_ways(
        status(
            &format!("v1alpha1.{APP}"),
            "apiregistration.k8s.io",
            "apiservices",
        ),
        status(
            &format!("v1alpha1.{CLUSTER}"),
            "apiregistration.k8s.io",
            "apiservices",
        ),
    );
    // A ConfigMap's name that happens to end in a mapped group is just a name.
    let cm = status(&format!("x.{CLUSTER}"), "", "configmaps");
    assert_eq!(to(Direction::ToApp, cm.clone()), cm);
}

/// Nesting deeper than [`MAX_DEPTH`](crate::rewrite::raw::MAX_DEPTH) is
/// refused before any walk: the walk recurses per level, and a body nested
/// 100,000 deep would otherwise overflow the worker thread's stack (an
/// abort, not an error).
#[test]
fn json_nested_beyond_the_depth_limit_is_an_error_not_a_stack_overflow() {
    let (m, c) = (map(), Catalog::new(&[]));
    let deep = |n: usize| {
        format!(
            r#"{{"apiVersion":"{APP}/v1alpha1","kind":"Foo","spec":{}{{"apiVersion":"{APP}/v1"}}{}}}"#,
            "[".repeat(n),
            "]".repeat(n)
        )
    };
    for dir in [Direction::ToCluster, Direction::ToApp] {
        let rw = JsonRewriter::new(&m, &c, dir);
        let err = rw.rewrite_bytes(deep(100_000).as_bytes()).unwrap_err();
        assert!(err.to_string().contains("nested deeper than"), "{err}");
    }
    // Just inside the limit (the object and the innermost one are two
    // levels): renamed at every depth by the reference-key heuristic.
    let rw = JsonRewriter::new(&m, &c, Direction::ToCluster);
    let n = crate::rewrite::raw::MAX_DEPTH - 2;
    let out = rw.rewrite_bytes(deep(n).as_bytes()).unwrap().unwrap();
    assert_eq!(
        String::from_utf8(out).unwrap(),
        deep(n).replace(APP, CLUSTER)
    );
}

/// Past [`WHOLE_TAPE_MAX`](crate::rewrite::raw::WHOLE_TAPE_MAX) the walk
/// reads level by level; the renamed bytes are the same either way.
#[test]
fn a_body_over_the_whole_tape_size_is_renamed_the_same() {
    let (m, c) = (map(), Catalog::new(&[]));
    let filler = format!(
        "[{}0]",
        "0,".repeat(crate::rewrite::raw::WHOLE_TAPE_MAX / 2)
    );
    let body = format!(
        r#"{{"apiVersion":"{APP}/v1alpha1","kind":"Foo","metadata":{{"ownerReferences":[{{"apiVersion":"{APP}/v1alpha1","kind":"Foo","name":"a","uid":"u"}}]}},"spec":{{"filler":{filler},"ref":{{"apiVersion":"{APP}/v1"}}}}}}"#
    );
    assert!(body.len() > crate::rewrite::raw::WHOLE_TAPE_MAX);
    let rw = JsonRewriter::new(&m, &c, Direction::ToCluster);
    let out = String::from_utf8(rw.rewrite_bytes(body.as_bytes()).unwrap().unwrap()).unwrap();
    assert_eq!(out, body.replace(APP, CLUSTER));
}

const LAST_APPLIED: &str = "kubectl.kubernetes.io/last-applied-configuration";

/// What kubectl 1.31–1.37 writes in the annotation on `kubectl apply` of
/// the e2e Foo: the applied manifest as compact JSON, keys sorted, a newline.
fn applied_foo(group: &str) -> String {
    format!(
        "{{\"apiVersion\":\"{group}/v1alpha1\",\"kind\":\"Foo\",\"metadata\":{{\"annotations\":{{}},\"name\":\"alpha\",\"namespace\":\"orig\"}},\"spec\":{{\"deploymentName\":\"alpha-deploy\",\"replicas\":1}}}}\n"
    )
}

/// The captured Foo (testdata/kube-1.24/orig/027-get-foo-json) in `group`,
/// carrying `annotations`.
fn captured_foo_with(group: &str, annotations: Json) -> Json {
    let captured =
        include_str!("../../../../testdata/kube-1.24/orig/027-get-foo-json/response.body");
    let mut v: Json = serde_json::from_str(&captured.replace(APP, group)).unwrap();
    v["metadata"]["annotations"] = annotations;
    v
}

/// kube-apiserver reads the annotation when server-side apply takes over
/// the fields client-side apply set: it must name the cluster's group
/// there, and the app's group when the app reads it.
#[test]
fn last_applied_configuration_is_renamed_as_the_object_it_is() {
    let with = |g: &str| captured_foo_with(g, json!({LAST_APPLIED: applied_foo(g)}));
    both_ways(with(APP), with(CLUSTER));
    // Only the group changed inside: every other byte of kubectl's text stays.
    let out = to(Direction::ToCluster, with(APP));
    assert_eq!(
        out["metadata"]["annotations"][LAST_APPLIED]
            .as_str()
            .unwrap(),
        applied_foo(CLUSTER)
    );
    // kapp's copy of the object as deployed is the same kind of place.
    let kapp = |g: &str| captured_foo_with(g, json!({"kapp.k14s.io/original": applied_foo(g)}));
    both_ways(kapp(APP), kapp(CLUSTER));
    // An object of another kind: its own places (owner references) apply.
    let cm = |g: &str| {
        let applied = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "alpha-cm",
            "ownerReferences": [{"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo", "name": "alpha", "uid": "u"}]}});
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "alpha-cm",
            "annotations": {LAST_APPLIED: applied.to_string()}}})
    };
    both_ways(cm(APP), cm(CLUSTER));
    // In a list, a watch event and a merge patch (what kubectl apply sends).
    let list = |g: &str| json!({"apiVersion": format!("{g}/v1alpha1"), "kind": "FooList", "metadata": {}, "items": [with(g)]});
    both_ways(list(APP), list(CLUSTER));
    let event = |g: &str| json!({"type": "MODIFIED", "object": with(g)});
    both_ways(event(APP), event(CLUSTER));
    let patch = |g: &str| json!({"metadata": {"annotations": {LAST_APPLIED: applied_foo(g)}}, "spec": {"replicas": 2}});
    let (m, c) = (map(), Catalog::new(&[]));
    let rw = JsonRewriter::new(&m, &c, Direction::ToCluster);
    let mut p = patch(APP);
    assert!(rw
        .rewrite_value(&mut p, Some((&format!("{APP}/v1alpha1"), "Foo")), None)
        .unwrap());
    assert_eq!(p, patch(CLUSTER));
}

/// A value that is not JSON is not an object to rename: left as it came
/// (the rest of the object still renamed) and counted.
#[test]
fn last_applied_configuration_that_is_not_json_is_left_and_counted() {
    let text = format!("{{\"apiVersion\":\"{APP}/v1alpha1\",\"kind\":");
    let before = crate::rewrite::tally::object_annotations_not_json();
    let out = to(
        Direction::ToCluster,
        captured_foo_with(APP, json!({LAST_APPLIED: text})),
    );
    assert_eq!(out["metadata"]["annotations"][LAST_APPLIED], json!(text));
    assert_eq!(out["apiVersion"], json!(format!("{CLUSTER}/v1alpha1")));
    assert!(crate::rewrite::tally::object_annotations_not_json() > before);
    // A mapped name deeper inside that can't be renamed is refused, as in
    // the object itself (fail closed).
    let label = "x".repeat(60);
    let long = format!("{label}.{label}.{label}.{label}.io");
    let m = GroupMap::new(vec![rule("a.io", &long, false, true)]).unwrap();
    let held = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "foosxxxx.a.io"}})
    .to_string();
    let obj = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"annotations": {LAST_APPLIED: held}}});
    let c = Catalog::new(&[]);
    let rw = JsonRewriter::new(&m, &c, Direction::ToCluster);
    assert!(rw.rewrite_bytes(obj.to_string().as_bytes()).is_err());
}

/// The same annotation in YAML (a server-side apply body, `kubectl get -o
/// yaml` piped back) and set by a JSON Patch.
#[test]
fn last_applied_configuration_in_yaml_and_json_patch() {
    let (m, c) = (map(), Catalog::new(&[]));
    let rw = JsonRewriter::new(&m, &c, Direction::ToCluster);
    let yaml = |g: &str| {
        format!(
            "apiVersion: {g}/v1alpha1\nkind: Foo\nmetadata:\n  name: alpha\n  annotations:\n    # kept\n    {LAST_APPLIED}: |\n      {}\nspec:\n  replicas: 1\n",
            applied_foo(g).trim_end()
        )
    };
    let out = crate::rewrite::yaml::rewrite(&rw, yaml(APP).as_bytes(), None, None)
        .unwrap()
        .unwrap();
    let out: Json = serde_saphyr::from_str(std::str::from_utf8(&out).unwrap()).unwrap();
    let want: Json = serde_saphyr::from_str(&yaml(CLUSTER)).unwrap();
    assert_eq!(out, want);

    let patch = |g: &str| {
        json!([{"op": "add", "path": "/metadata/annotations/kubectl.kubernetes.io~1last-applied-configuration",
                "value": applied_foo(g)}])
        .to_string()
    };
    let out = super::json_patch::rewrite(
        &rw,
        patch(APP).as_bytes(),
        &format!("{APP}/v1alpha1"),
        "Foo",
    )
    .unwrap()
    .unwrap();
    assert_eq!(
        serde_json::from_slice::<Json>(&out).unwrap(),
        serde_json::from_str::<Json>(&patch(CLUSTER)).unwrap()
    );
}
