//! Names of cluster-scoped objects renamed per copy (`names:`), in every
//! codec and both directions, on kube-apiserver 1.24's captured bytes.
//!
//! The captures (`testdata/kube-1.24`, copied from the shared fixtures)
//! hold one ClusterRole per world, named `foo-viewer-orig` and
//! `foo-viewer-renamed`: read with `names: {suffix: -renamed}`, the renamed
//! world's is this copy's `foo-viewer`, and the orig world's belongs to
//! somebody else, so the app must never see it. Bodies no capture holds
//! (a ClusterRoleBinding's `roleRef`, an owner reference, a watch event)
//! are built with Kubernetes' JSON names.

use crate::common;
use common::names_engine as engine;
use regroup::kube::Wire;
use regroup::rewrite::protobuf::test_wire as wire;
use regroup::rewrite::{Context, Engine};
use regroup_config::Direction::{ToApp, ToCluster};
use serde_json::{json, Value as Json};

const APP_GROUP: &str = "samplecontroller.k8s.io";
const CLUSTER_GROUP: &str = "samplecontroller.team1.example.com";

/// This copy's names end in `-renamed`, as the captures' renamed world's.
fn suffixed() -> Engine {
    engine("  suffix: -renamed\n  kinds: [ClusterRole, ClusterRoleBinding, ValidatingWebhookConfiguration]\n")
}

fn prefixed() -> Engine {
    engine("  prefix: team1-\n  kinds: [ClusterRole, ClusterRoleBinding, ValidatingAdmissionPolicy, ValidatingAdmissionPolicyBinding]\n  keep: [shared-reader]\n")
}

fn capture(world: &str, case: &str, file: &str) -> Vec<u8> {
    let p = format!(
        "{}/../testdata/kube-1.24/{world}/{case}/{file}",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&p).unwrap_or_else(|e| panic!("{p}: {e}"))
}

fn body(e: &Engine, dir: regroup_config::Direction, wire: Wire, cx: Context, b: &[u8]) -> Vec<u8> {
    e.body(dir, wire, cx, b)
        .unwrap()
        .unwrap_or_else(|| b.to_vec())
}

const CLUSTERROLE: Context<'static> = Context {
    hint: None,
    addressed: Some(("rbac.authorization.k8s.io", "ClusterRole")),
};

/// The cluster's bytes with this copy's names taken off, as the app must
/// see them.
fn app_view(cluster: &[u8]) -> Vec<u8> {
    String::from_utf8(cluster.to_vec())
        .unwrap()
        .replace("foo-viewer-renamed", "foo-viewer")
        .replace(CLUSTER_GROUP, APP_GROUP)
        .into_bytes()
}

#[test]
fn a_json_clusterrole_list_table_and_metadata_answer_reach_the_app_under_the_apps_name() {
    let e = suffixed();
    for case in [
        "085-get-clusterrole-json",
        "161-list-clusterrole-json",
        "087-get-clusterrole-table",
        "163-list-clusterrole-table",
        "088-get-clusterrole-pom",
        "164-list-clusterrole-poml",
    ] {
        let cluster = capture("renamed", case, "response.body");
        let app = body(&e, ToApp, Wire::Json, CLUSTERROLE, &cluster);
        assert_eq!(
            String::from_utf8_lossy(&app),
            String::from_utf8_lossy(&app_view(&cluster)),
            "{case}"
        );
        // And what the app sends back is the cluster's again.
        if !case.contains("table") && !case.contains("pom") {
            let back = body(&e, ToCluster, Wire::Json, Context::default(), &app);
            assert_eq!(back, cluster, "{case} back to the cluster");
        }
    }
}

#[test]
fn another_copys_clusterrole_is_hidden_from_lists_tables_and_watches() {
    let e = suffixed();
    // The orig world's `foo-viewer-orig` is not this copy's.
    let list = capture("orig", "161-list-clusterrole-json", "response.body");
    let app: Json =
        serde_json::from_slice(&body(&e, ToApp, Wire::Json, CLUSTERROLE, &list)).unwrap();
    assert_eq!(app["items"], json!([]), "{app}");
    for case in ["163-list-clusterrole-table", "087-get-clusterrole-table"] {
        let table = capture("orig", case, "response.body");
        let app: Json =
            serde_json::from_slice(&body(&e, ToApp, Wire::Json, CLUSTERROLE, &table)).unwrap();
        assert_eq!(app["rows"], json!([]), "{case}: {app}");
    }
    let poml = capture("orig", "164-list-clusterrole-poml", "response.body");
    let app: Json =
        serde_json::from_slice(&body(&e, ToApp, Wire::Json, CLUSTERROLE, &poml)).unwrap();
    assert_eq!(app["items"], json!([]));

    let object = capture("orig", "085-get-clusterrole-json", "response.body");
    let event = format!(
        r#"{{"type":"ADDED","object":{}}}"#,
        String::from_utf8(object).unwrap()
    );
    let framing = regroup::rewrite::framing::Framing::Lines;
    assert!(e
        .hides_event(ToApp, framing, CLUSTERROLE, event.as_bytes())
        .unwrap());
    let ours = capture("renamed", "085-get-clusterrole-json", "response.body");
    let event = format!(
        r#"{{"type":"ADDED","object":{}}}"#,
        String::from_utf8(ours).unwrap()
    );
    assert!(!e
        .hides_event(ToApp, framing, CLUSTERROLE, event.as_bytes())
        .unwrap());
    let renamed = e
        .watch_event(ToApp, framing, CLUSTERROLE, event.as_bytes())
        .unwrap()
        .unwrap();
    assert_eq!(renamed, app_view(event.as_bytes()));
}

#[test]
fn protobuf_clusterroles_are_renamed_and_another_copys_hidden() {
    let e = suffixed();
    let pb = Wire::Protobuf;
    for case in [
        "086-get-clusterrole-protobuf",
        "162-list-clusterrole-protobuf",
        "089-get-clusterrole-pom-protobuf",
        "165-list-clusterrole-poml-protobuf",
    ] {
        let cluster = capture("renamed", case, "response.body");
        let app = body(&e, ToApp, pb, CLUSTERROLE, &cluster);
        let text = String::from_utf8_lossy(&app);
        assert!(text.contains("foo-viewer"), "{case}: {text:?}");
        assert!(!text.contains("foo-viewer-renamed"), "{case}");
        // Only the name and the group changed: their lengths, and the
        // length prefixes above them.
        let back = body(&e, ToCluster, pb, CLUSTERROLE, &app);
        assert_eq!(back, cluster, "{case}: back to the cluster byte for byte");
    }
    let other = capture("orig", "162-list-clusterrole-protobuf", "response.body");
    let app = body(&e, ToApp, pb, CLUSTERROLE, &other);
    assert!(
        !String::from_utf8_lossy(&app).contains("foo-viewer"),
        "another copy's ClusterRole dropped from the protobuf list"
    );
    assert!(app.len() < other.len());
}

/// A ClusterRoleBinding in protobuf (field numbers of Kubernetes'
/// `rbac/v1/generated.proto`: metadata 1 {name 1, ownerReferences 13
/// {apiVersion 5, kind 1, name 3}}, roleRef 3 {apiGroup 1, kind 2, name 3}).
fn binding_pb(name: &str, owner: &str, role: &str) -> Vec<u8> {
    use wire::{cat, envelope, ld};
    let owner_ref = cat(&[
        ld(5, "rbac.authorization.k8s.io/v1"),
        ld(1, "ClusterRole"),
        ld(3, owner),
    ]);
    let meta = cat(&[ld(1, name), ld(13, owner_ref)]);
    let role_ref = cat(&[
        ld(1, "rbac.authorization.k8s.io"),
        ld(2, "ClusterRole"),
        ld(3, role),
    ]);
    envelope(
        "rbac.authorization.k8s.io/v1",
        "ClusterRoleBinding",
        &cat(&[ld(1, meta), ld(3, role_ref)]),
    )
}

/// The serve path streams protobuf lists item by item: with `names:` it
/// must rename and hide exactly as the whole-body path does, whatever the
/// chunking.
#[test]
fn a_streamed_protobuf_clusterrole_list_is_the_whole_paths() {
    use regroup::rewrite::protobuf::list_stream::rewrite_in_chunks;
    let e = suffixed();
    for world in ["renamed", "orig"] {
        let cluster = capture(world, "162-list-clusterrole-protobuf", "response.body");
        let whole = body(&e, ToApp, Wire::Protobuf, CLUSTERROLE, &cluster);
        assert_ne!(whole, cluster, "{world}: renamed or thinned");
        for chunk in [1, 7, 64, 1 << 20] {
            let streamed =
                rewrite_in_chunks(e.proto(ToApp), &cluster, CLUSTERROLE.addressed, chunk).unwrap();
            assert_eq!(streamed, whole, "{world} in chunks of {chunk}");
        }
    }
    // Items that name no group at all: only `names:` makes them walked.
    let e = prefixed();
    let item = |name: &str| {
        use wire::{cat, ld};
        let meta = ld(1, name);
        let role_ref = cat(&[
            ld(1, "rbac.authorization.k8s.io"),
            ld(2, "ClusterRole"),
            ld(3, "view"),
        ]);
        ld(2, cat(&[ld(1, meta), ld(3, role_ref)]))
    };
    let list = |items: &[&str]| {
        let raw: Vec<u8> = items.iter().flat_map(|n| item(n)).collect();
        wire::envelope(
            "rbac.authorization.k8s.io/v1",
            "ClusterRoleBindingList",
            &raw,
        )
    };
    let cluster = list(&["team1-a", "team2-b", "c", "team1-d"]);
    let app = list(&["a", "d"]);
    let addressed = Some(("rbac.authorization.k8s.io", "ClusterRoleBinding"));
    for chunk in [1, 5, 1 << 20] {
        let streamed = rewrite_in_chunks(e.proto(ToApp), &cluster, addressed, chunk).unwrap();
        assert_eq!(streamed, app, "in chunks of {chunk}");
    }
}

#[test]
fn a_protobuf_binding_names_the_copys_clusterrole() {
    let e = prefixed();
    let app = binding_pb("foo-viewers", "foo-viewer", "foo-viewer");
    let cluster = binding_pb("team1-foo-viewers", "team1-foo-viewer", "team1-foo-viewer");
    let cx = Context::default();
    assert_eq!(body(&e, ToCluster, Wire::Protobuf, cx, &app), cluster);
    assert_eq!(body(&e, ToApp, Wire::Protobuf, cx, &cluster), app);
    let kept = binding_pb("foo-viewers", "view", "system:auth-delegator");
    let out = body(&e, ToCluster, Wire::Protobuf, cx, &kept);
    assert_eq!(
        out,
        binding_pb("team1-foo-viewers", "view", "system:auth-delegator")
    );
}

#[test]
fn a_create_goes_to_the_cluster_under_the_copys_name() {
    let e = suffixed();
    // The app writes the renamed world's ClusterRole as `foo-viewer`.
    let cluster = capture("renamed", "016-create-clusterrole", "request.body");
    let app = app_view(&cluster);
    let hint = Context {
        hint: Some(("rbac.authorization.k8s.io/v1", "ClusterRole")),
        addressed: None,
    };
    assert_eq!(body(&e, ToCluster, Wire::Json, hint, &app), cluster);
    // The webhook configuration likewise (its group renamed as always).
    let cluster = capture(
        "renamed",
        "017-create-validatingwebhookconfiguration",
        "request.body",
    );
    let app = String::from_utf8(cluster.clone())
        .unwrap()
        .replace("\"foo-renamed\"", "\"foo\"")
        .replace(CLUSTER_GROUP, APP_GROUP);
    assert_eq!(
        body(
            &e,
            ToCluster,
            Wire::Json,
            Context::default(),
            app.as_bytes()
        ),
        cluster
    );
}

#[test]
fn role_refs_owner_references_and_policy_bindings_follow_the_names() {
    let e = prefixed();
    let app = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": "foo-viewers", "ownerReferences": [
            {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
             "name": "foo-viewer", "uid": "u1"},
            {"apiVersion": "v1", "kind": "ConfigMap", "name": "foo-viewer", "uid": "u2"}
        ]},
        "subjects": [{"kind": "ServiceAccount", "name": "foo", "namespace": "team1"}],
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "foo-viewer"}
    });
    let mut cluster = app.clone();
    cluster["metadata"]["name"] = json!("team1-foo-viewers");
    cluster["metadata"]["ownerReferences"][0]["name"] = json!("team1-foo-viewer");
    cluster["roleRef"]["name"] = json!("team1-foo-viewer");
    both_ways(&e, &app, &cluster);

    // The cluster's own roles are bound as they are.
    for kept in ["view", "system:auth-delegator", "shared-reader"] {
        let mut app = app.clone();
        app["roleRef"]["name"] = json!(kept);
        let out: Json = serde_json::from_slice(&body(
            &e,
            ToCluster,
            Wire::Json,
            Context::default(),
            &serde_json::to_vec(&app).unwrap(),
        ))
        .unwrap();
        assert_eq!(out["roleRef"]["name"], json!(kept));
    }

    // A RoleBinding to a namespaced Role names no cluster-scoped object.
    let rb = json!({
        "apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
        "metadata": {"name": "foo-editor", "namespace": "team1"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "foo-editor"}
    });
    both_ways(&e, &rb, &rb);
    let mut to_cluster_role = rb.clone();
    to_cluster_role["roleRef"]["kind"] = json!("ClusterRole");
    let mut expected = to_cluster_role.clone();
    expected["roleRef"]["name"] = json!("team1-foo-editor");
    both_ways(&e, &to_cluster_role, &expected);

    let binding = json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": "foo-policy"},
        "spec": {"policyName": "foo-policy", "validationActions": ["Deny"]}
    });
    let mut expected = binding.clone();
    expected["metadata"]["name"] = json!("team1-foo-policy");
    expected["spec"]["policyName"] = json!("team1-foo-policy");
    both_ways(&e, &binding, &expected);
}

fn both_ways(e: &Engine, app: &Json, cluster: &Json) {
    let bytes = serde_json::to_vec(app).unwrap();
    let out = body(e, ToCluster, Wire::Json, Context::default(), &bytes);
    assert_eq!(
        serde_json::from_slice::<Json>(&out).unwrap(),
        *cluster,
        "to the cluster"
    );
    assert_eq!(
        body(e, ToApp, Wire::Json, Context::default(), &out),
        bytes,
        "back to the app, byte for byte"
    );
}

#[test]
fn generate_name_takes_a_prefix_and_is_refused_with_a_suffix() {
    let app = br#"{"apiVersion":"rbac.authorization.k8s.io/v1","kind":"ClusterRole","metadata":{"generateName":"foo-"},"rules":[]}"#;
    let out = body(&prefixed(), ToCluster, Wire::Json, Context::default(), app);
    let out: Json = serde_json::from_slice(&out).unwrap();
    assert_eq!(out["metadata"]["generateName"], json!("team1-foo-"));
    let err = suffixed()
        .body(ToCluster, Wire::Json, Context::default(), app)
        .unwrap_err();
    assert!(err.to_string().contains("generateName"), "{err}");
}

#[test]
fn a_not_found_status_names_the_apps_object() {
    let e = prefixed();
    let cluster = br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"clusterroles.rbac.authorization.k8s.io \"team1-foo\" not found","reason":"NotFound","details":{"name":"team1-foo","group":"rbac.authorization.k8s.io","kind":"clusterroles"},"code":404}"#;
    let app: Json =
        serde_json::from_slice(&body(&e, ToApp, Wire::Json, CLUSTERROLE, cluster)).unwrap();
    assert_eq!(app["details"]["name"], json!("foo"));
    // The message kubectl prints names it too; another copy's name stays.
    assert_eq!(
        app["message"],
        json!("clusterroles.rbac.authorization.k8s.io \"foo\" not found")
    );
    let other = String::from_utf8(cluster.to_vec())
        .unwrap()
        .replace("team1-foo", "team2-foo");
    let app: Json =
        serde_json::from_slice(&body(&e, ToApp, Wire::Json, CLUSTERROLE, other.as_bytes()))
            .unwrap();
    assert_eq!(
        app["message"],
        json!("clusterroles.rbac.authorization.k8s.io \"team2-foo\" not found")
    );
}

#[test]
fn without_names_nothing_but_groups_changes() {
    let e = engine("  prefix: team1-\n  kinds: [ClusterRoleBinding]\n");
    // ClusterRoles are not listed: their names and references stay.
    let cluster = capture("renamed", "161-list-clusterrole-json", "response.body");
    let app = body(&e, ToApp, Wire::Json, CLUSTERROLE, &cluster);
    assert_eq!(
        app,
        String::from_utf8(cluster)
            .unwrap()
            .replace(CLUSTER_GROUP, APP_GROUP)
            .into_bytes()
    );
}

#[test]
fn urls_and_field_selectors_name_the_cluster_object() {
    let e = prefixed();
    let map = e.map();
    let path = "/apis/rbac.authorization.k8s.io/v1/clusterroles/foo-viewer";
    assert_eq!(
        regroup::url_rename::rewrite_path(path, map, ToCluster).as_deref(),
        Some("/apis/rbac.authorization.k8s.io/v1/clusterroles/team1-foo-viewer")
    );
    assert_eq!(
        regroup::url_rename::rewrite_path(
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/view",
            map,
            ToCluster
        ),
        None
    );
    // Namespaced Roles keep their names.
    assert_eq!(
        regroup::url_rename::rewrite_path(
            "/apis/rbac.authorization.k8s.io/v1/namespaces/a/roles/foo",
            map,
            ToCluster
        ),
        None
    );
    let info = regroup::url_rename::RequestInfo::parse(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        None,
    );
    assert_eq!(
        regroup::url_rename::rewrite_query_for(
            "fieldSelector=metadata.name%3Dfoo-viewer&watch=1",
            &info,
            map,
            ToCluster
        )
        .as_deref(),
        Some("fieldSelector=metadata.name%3Dteam1-foo-viewer&watch=1")
    );
}

#[test]
fn an_admission_review_names_the_reviewed_object_as_the_app_knows_it() {
    let e = prefixed();
    let review = |kind: Json, name: &str| {
        json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "request": {"uid": "u", "kind": kind, "name": name, "operation": "DELETE"}})
    };
    let role =
        json!({"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "ClusterRole"});
    let crd = json!({"group": "apiextensions.k8s.io", "version": "v1", "kind": "CustomResourceDefinition"});
    for (kind, cluster, app) in [
        (&role, "team1-foo-viewer", "foo-viewer"),
        (
            &crd,
            "foos.samplecontroller.team1.example.com",
            "foos.samplecontroller.k8s.io",
        ),
        // A namespaced Role's name is its own.
        (
            &json!({"group": "rbac.authorization.k8s.io", "version": "v1", "kind": "Role"}),
            "team1-x",
            "team1-x",
        ),
    ] {
        let bytes = serde_json::to_vec(&review(kind.clone(), cluster)).unwrap();
        let out: Json =
            serde_json::from_slice(&body(&e, ToApp, Wire::Json, Context::default(), &bytes))
                .unwrap();
        assert_eq!(out, review(kind.clone(), app), "{cluster}");
    }
}

/// `kubectl get clusterrolebindings` (a Table): the `Role` column names
/// the bound ClusterRole by the app's name, as the `roleRef` does; a kept
/// role (`view`) stays.
#[test]
fn a_binding_tables_role_column_names_the_apps_role() {
    let e = prefixed();
    let table = json!({
        "kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": {},
        "columnDefinitions": [
            {"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
            {"name": "Role", "type": "string", "format": "", "description": "", "priority": 0},
            {"name": "Age", "type": "string", "format": "", "description": "", "priority": 0}
        ],
        "rows": [
            {"cells": ["team1-foo-viewer-binding", "ClusterRole/team1-foo-viewer", "1m"],
             "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": {"name": "team1-foo-viewer-binding"}}},
            {"cells": ["team1-viewers", "ClusterRole/view", "1m"],
             "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                        "metadata": {"name": "team1-viewers"}}}
        ]
    });
    let cx = Context {
        hint: None,
        addressed: Some(("rbac.authorization.k8s.io", "ClusterRoleBinding")),
    };
    let bytes = serde_json::to_vec(&table).unwrap();
    let app: Json = serde_json::from_slice(&body(&e, ToApp, Wire::Json, cx, &bytes)).unwrap();
    assert_eq!(
        app["rows"][0]["cells"],
        json!(["foo-viewer-binding", "ClusterRole/foo-viewer", "1m"])
    );
    assert_eq!(
        app["rows"][1]["cells"],
        json!(["viewers", "ClusterRole/view", "1m"])
    );
    // The serve path streams a Table row by row: the same, whatever the
    // chunking.
    for chunk in [1, 7, 64, bytes.len()] {
        let mut s = regroup::rewrite::list_stream::ListStream::new(
            Some((
                "rbac.authorization.k8s.io".to_string(),
                "ClusterRoleBinding",
            )),
            1 << 20,
        );
        let mut out = Vec::new();
        for c in bytes.chunks(chunk) {
            out.extend(e.list_feed(ToApp, &mut s, c).unwrap());
        }
        out.extend(e.list_finish(ToApp, s).unwrap());
        let streamed: Json = serde_json::from_slice(&out).unwrap();
        assert_eq!(streamed["rows"], app["rows"], "chunks of {chunk}");
    }
}
