//! What a chart puts into a namespace every copy shares (`kube-system`):
//! cert-manager's leader-election Role and RoleBindings and the Leases its
//! Role names. `render` and `inject` give them the copy's mark, the
//! references follow (RoleBinding `roleRef`, Role `resourceNames`), the
//! cluster's own objects there keep their names, every other byte stays;
//! `inject` writes the names into the sidecar's configuration, whose
//! regroup then gives the Lease the app takes at run time the same mark.
//! The manifest is our own, in the shape of cert-manager's chart.

use crate::upstream_support::{send, sidecar_for, Answer};
use http::{Request, StatusCode};
use http_body_util::Full;
use regroup::cmd::inject::{inject_with_warnings, Options};
use serde_json::Value as Json;

const CONFIG: &str = "rules:\n  - from: cert-manager.io\n    to: cert-manager.team-a.example.com\nnames:\n  prefix: team-a-\n";

const CHART: &str = r#"# Source: cert-manager/templates/rbac.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cert-manager:leaderelection
  namespace: kube-system
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    resourceNames: ["cert-manager-controller"]   # the Lease it takes
    verbs: ["get", "update", "patch"]
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: cert-manager:leaderelection
  namespace: kube-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: cert-manager:leaderelection
subjects:
  - kind: ServiceAccount
    name: cert-manager
    namespace: cert-manager
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: cert-manager-webhook:webhook-authentication-reader
  namespace: kube-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: extension-apiserver-authentication-reader
subjects:
  - kind: ServiceAccount
    name: cert-manager-webhook
    namespace: cert-manager
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cert-manager-webhook:dynamic-serving
  namespace: cert-manager
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    resourceNames: ['cert-manager-webhook-ca']
    verbs: ["get", "list", "watch", "update"]
"#;

/// The chart as copy A's cluster must hold it: only the marked names
/// changed, every other byte (comments, quoting, flow style) as written.
const RENDERED: &str = r#"# Source: cert-manager/templates/rbac.yaml
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: team-a-cert-manager:leaderelection
  namespace: kube-system
rules:
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    resourceNames: ["team-a-cert-manager-controller"]   # the Lease it takes
    verbs: ["get", "update", "patch"]
  - apiGroups: ["coordination.k8s.io"]
    resources: ["leases"]
    verbs: ["create"]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: team-a-cert-manager:leaderelection
  namespace: kube-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: team-a-cert-manager:leaderelection
subjects:
  - kind: ServiceAccount
    name: cert-manager
    namespace: cert-manager
---
apiVersion: rbac.authorization.k8s.io/v1
kind: RoleBinding
metadata:
  name: team-a-cert-manager-webhook:webhook-authentication-reader
  namespace: kube-system
roleRef:
  apiGroup: rbac.authorization.k8s.io
  kind: Role
  name: extension-apiserver-authentication-reader
subjects:
  - kind: ServiceAccount
    name: cert-manager-webhook
    namespace: cert-manager
---
apiVersion: rbac.authorization.k8s.io/v1
kind: Role
metadata:
  name: cert-manager-webhook:dynamic-serving
  namespace: cert-manager
rules:
  - apiGroups: [""]
    resources: ["secrets"]
    resourceNames: ['cert-manager-webhook-ca']
    verbs: ["get", "list", "watch", "update"]
"#;

fn settings() -> regroup_config::Settings {
    regroup_config::load(CONFIG).unwrap()
}

#[test]
fn render_marks_what_the_chart_puts_into_kube_system_and_nothing_else() {
    let s = settings();
    let (r, shared) = regroup::render::Renderer::for_manifests(
        &s,
        regroup_config::Direction::ToCluster,
        &[CHART],
    )
    .unwrap();
    assert_eq!(r.render(CHART).unwrap(), RENDERED);
    assert_eq!(
        shared.shared.found,
        [
            "Role kube-system/cert-manager:leaderelection",
            "Lease kube-system/cert-manager-controller (named in Role cert-manager:leaderelection)",
            "RoleBinding kube-system/cert-manager:leaderelection",
            "RoleBinding kube-system/cert-manager-webhook:webhook-authentication-reader",
        ]
    );
    // Rendered again: nothing changes (the marked names are the copy's).
    let (again, found) = regroup::render::Renderer::for_manifests(
        &s,
        regroup_config::Direction::ToCluster,
        &[RENDERED],
    )
    .unwrap();
    assert_eq!(again.render(RENDERED).unwrap(), RENDERED);
    // The marked names are still found, by their app names: injecting the
    // output again keeps them in the sidecar's configuration.
    let (_, first) = regroup::render::Renderer::for_manifests(
        &s,
        regroup_config::Direction::ToCluster,
        &[CHART],
    )
    .unwrap();
    assert_eq!(found.shared.names, first.shared.names);
    assert!(
        found
            .shared
            .found
            .iter()
            .all(|l| l.ends_with("(marked already)")),
        "{:?}",
        found.shared.found
    );
}

#[test]
fn injecting_the_output_again_keeps_the_shared_names_in_the_sidecar() {
    let (out, _, first) = injected();
    let opts = Options {
        tls_secret: Some("s".into()),
        ..Options::default()
    };
    let (again, _) = inject_with_warnings(&out, CONFIG, &settings(), &opts).unwrap();
    assert_eq!(again, out);
    let docs: Vec<Json> = serde_saphyr::from_multiple(&again).unwrap();
    let cm = docs.iter().find(|d| d["kind"] == "ConfigMap").unwrap();
    assert_eq!(cm["data"]["config.yaml"].as_str().unwrap(), first);
}

#[test]
fn shared_namespaces_can_be_named_or_turned_off() {
    let off = regroup_config::load(&format!("{CONFIG}  sharedNamespaces: []\n")).unwrap();
    let (r, shared) = regroup::render::Renderer::for_manifests(
        &off,
        regroup_config::Direction::ToCluster,
        &[CHART],
    )
    .unwrap();
    assert!(shared.shared.found.is_empty());
    assert_eq!(r.render(CHART).unwrap(), CHART);
    let other =
        regroup_config::load(&format!("{CONFIG}  sharedNamespaces: [cert-manager]\n")).unwrap();
    let (_, derived) = regroup::render::Renderer::for_manifests(
        &other,
        regroup_config::Direction::ToCluster,
        &[CHART],
    )
    .unwrap();
    assert_eq!(
        derived.shared.found,
        ["Role cert-manager/cert-manager-webhook:dynamic-serving"]
    );
}

/// The sidecar configuration `inject` wrote for `CHART` (with a Deployment
/// to wrap).
fn injected() -> (String, Vec<String>, String) {
    let deploy = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: cert-manager, namespace: cert-manager}\nspec:\n  selector: {matchLabels: {app: cm}}\n  template:\n    metadata: {labels: {app: cm}}\n    spec:\n      containers: [{name: controller, image: cm:1}]\n";
    let input = format!("{CHART}---\n{deploy}");
    let opts = Options {
        tls_secret: Some("s".into()),
        ..Options::default()
    };
    let (out, warnings) = inject_with_warnings(&input, CONFIG, &settings(), &opts).unwrap();
    let docs: Vec<Json> = serde_saphyr::from_multiple(&out).unwrap();
    let cm = docs
        .iter()
        .find(|d| d["kind"] == "ConfigMap")
        .expect("the sidecar's ConfigMap");
    let config = cm["data"]["config.yaml"].as_str().unwrap().to_owned();
    (out, warnings, config)
}

#[test]
fn inject_says_what_it_renamed_and_hands_the_names_to_the_sidecar() {
    let (out, warnings, config) = injected();
    assert!(
        out.contains("name: team-a-cert-manager:leaderelection"),
        "{out}"
    );
    assert!(
        warnings
            .iter()
            .any(|w| w.contains("Lease kube-system/cert-manager-controller")),
        "{warnings:?}"
    );
    let s = regroup_config::load(&config).unwrap();
    let n = s.map.object_names().unwrap();
    assert_eq!(
        n.fixed_to_cluster("cert-manager-controller").as_deref(),
        Some("team-a-cert-manager-controller")
    );
}

#[tokio::test]
async fn the_sidecar_gives_the_lease_the_app_takes_the_mark_its_role_names() {
    let (_, _, config) = injected();
    let lease = r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"team-a-cert-manager-controller","namespace":"kube-system","resourceVersion":"7"},"spec":{"holderIdentity":"pod-1"}}"#;
    let (url, seen) = sidecar_for(&config, Answer::ok("application/json", lease)).await;
    let body = r#"{"apiVersion":"coordination.k8s.io/v1","kind":"Lease","metadata":{"name":"cert-manager-controller","namespace":"kube-system"},"spec":{"holderIdentity":"pod-1"}}"#;
    let (status, _, answer) = send(
        Request::post(format!(
            "{url}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases"
        ))
        .header("content-type", "application/json")
        .body(Full::new(body.into()))
        .unwrap(),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let sent: Json = serde_json::from_slice(&seen.lock().unwrap().body).unwrap();
    assert_eq!(sent["metadata"]["name"], "team-a-cert-manager-controller");
    let answer: Json = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["metadata"]["name"], "cert-manager-controller");
    // A GET by the app's name goes to the copy's Lease.
    let (_, _, _) = send(
        Request::get(format!(
            "{url}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/cert-manager-controller"
        ))
        .body(Full::default())
        .unwrap(),
    )
    .await;
    assert_eq!(
        seen.lock().unwrap().path_and_query,
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/team-a-cert-manager-controller"
    );
    // A GET by the cluster's name of it is another name, which no object
    // has: the app never reaches its Lease under a second name.
    let (_, _, _) = send(
        Request::get(format!(
            "{url}/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/team-a-cert-manager-controller"
        ))
        .body(Full::default())
        .unwrap(),
    )
    .await;
    assert_eq!(
        seen.lock().unwrap().path_and_query,
        "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/team-a-team-a-cert-manager-controller"
    );
}

/// `kubectl auth can-i update leases/cert-manager-controller` through the
/// copy asks about the copy's own Lease; a ClusterRole by its name too.
#[test]
fn an_access_review_asks_about_the_copys_own_object() {
    let text =
        format!("{CONFIG}  namespaced: {{kinds: [Lease], names: [cert-manager-controller]}}\n");
    let s = regroup_config::load(&text).unwrap();
    let e = regroup::rewrite::Engine::new(
        s.map.clone(),
        regroup::rewrite::Catalog::for_map(&s.fields, &s.map),
    );
    for (resource, group, name, want) in [
        (
            "leases",
            "coordination.k8s.io",
            "cert-manager-controller",
            "team-a-cert-manager-controller",
        ),
        (
            "clusterroles",
            "rbac.authorization.k8s.io",
            "cert-manager-edit",
            "team-a-cert-manager-edit",
        ),
        (
            "leases",
            "coordination.k8s.io",
            "another-lease",
            "another-lease",
        ),
        (
            "customresourcedefinitions",
            "apiextensions.k8s.io",
            "certificates.cert-manager.io",
            "certificates.cert-manager.team-a.example.com",
        ),
    ] {
        let sar = format!(
            r#"{{"kind":"SelfSubjectAccessReview","apiVersion":"authorization.k8s.io/v1","spec":{{"resourceAttributes":{{"namespace":"kube-system","verb":"update","group":"{group}","resource":"{resource}","name":"{name}"}}}}}}"#
        );
        let out = e
            .body(
                regroup_config::Direction::ToCluster,
                regroup::kube::Wire::Json,
                regroup::rewrite::Context::default(),
                sar.as_bytes(),
            )
            .unwrap()
            .unwrap_or_else(|| sar.clone().into_bytes());
        let v: Json = serde_json::from_slice(&out).unwrap();
        assert_eq!(v["spec"]["resourceAttributes"]["name"], want, "{resource}");
        // And back: the answer names the app's object.
        let back = e
            .body(
                regroup_config::Direction::ToApp,
                regroup::kube::Wire::Json,
                regroup::rewrite::Context::default(),
                &out,
            )
            .unwrap()
            .unwrap_or(out);
        assert_eq!(back, sar.as_bytes(), "{resource} back");
    }
}
