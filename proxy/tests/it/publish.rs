//! Publish mode through the real `regroup` binary and real TLS: the remote
//! cluster's aggregator (a caller with a front-proxy certificate) reaches a
//! central cluster's group. Both clusters are fakes that record what they
//! got: the remote one answers access reviews (bob is denied) and
//! Namespaces, the central one holds `sqldb` (this source's), `theirs`
//! (another namespace's) and `central-own` (no source at all).

use crate::common::{fake_upstream, Received};
use crate::regroup_binary::{free_port, wait_for_port, KillOnDrop};
use crate::tls_support;

use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use regroup::net::tls;
use serde_json::{json, Value as Json};

const GV: &str = "/apis/database.acmeco.org/v1alpha1";
const CLUSTER: &str = "uid-of-kube-system";

fn json_answer(code: StatusCode, doc: Json) -> (StatusCode, String, Bytes) {
    (
        code,
        "application/json".into(),
        Bytes::from(doc.to_string()),
    )
}

fn requirement(name: &str, ns_label: Option<&str>, uid: &str) -> Json {
    let mut o = json!({"apiVersion": "database.acmeco.org/v1alpha1", "kind": "MySQLInstanceRequirement",
        "metadata": {"name": name, "namespace": "bar", "uid": uid}, "spec": {"version": "5.7"}});
    if let Some(ns) = ns_label {
        o["metadata"]["labels"] =
            json!({"regroup.dev/source-namespace": ns, "regroup.dev/source-cluster": CLUSTER});
    }
    o
}

/// The remote cluster: access reviews (everyone but bob), Namespaces, no
/// connection Secrets.
fn remote(r: Received) -> (StatusCode, String, Bytes) {
    match (r.method.as_str(), r.path.as_str()) {
        ("POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews") => {
            let mut sar: Json = serde_json::from_slice(&r.body).unwrap();
            let allowed = sar["spec"]["user"] != "bob";
            sar["status"] = json!({"allowed": allowed});
            json_answer(StatusCode::CREATED, sar)
        }
        ("GET", "/api/v1/namespaces/kube-system") => json_answer(
            StatusCode::OK,
            json!({"metadata": {"name": "kube-system", "uid": CLUSTER}}),
        ),
        ("GET", "/api/v1/namespaces/foo") => {
            json_answer(StatusCode::OK, json!({"metadata": {"name": "foo"}}))
        }
        ("GET", "/api/v1/namespaces") => json_answer(
            StatusCode::OK,
            json!({"kind": "NamespaceList", "items": [{"metadata": {"name": "foo"}}]}),
        ),
        ("GET", "/api/v1/secrets") => {
            json_answer(StatusCode::OK, json!({"kind": "SecretList", "items": []}))
        }
        _ => json_answer(
            StatusCode::NOT_FOUND,
            json!({"kind": "Status", "code": 404}),
        ),
    }
}

/// The central cluster, recording every request.
fn central(seen: Arc<Mutex<Vec<Received>>>) -> impl Fn(Received) -> (StatusCode, String, Bytes) {
    move |r: Received| {
        let path = r.path.clone();
        let method = r.method.clone();
        let body = r.body.clone();
        let query = r.query.clone().unwrap_or_default();
        seen.lock().unwrap().push(r);
        let objects = format!("{GV}/namespaces/bar/mysqlinstancerequirements");
        match (method.as_str(), path.as_str()) {
            ("GET", "/apis") => json_answer(
                StatusCode::OK,
                json!({"kind": "APIGroupList", "apiVersion": "v1", "groups": [
                    {"name": "apps", "versions": [{"groupVersion": "apps/v1", "version": "v1"}]},
                    {"name": "database.acmeco.org", "versions": [{"groupVersion": "database.acmeco.org/v1alpha1", "version": "v1alpha1"}]}]}),
            ),
            ("GET", GV) => json_answer(
                StatusCode::OK,
                json!({"kind": "APIResourceList", "groupVersion": "database.acmeco.org/v1alpha1", "resources": [
                    {"name": "mysqlinstancerequirements", "namespaced": true, "kind": "MySQLInstanceRequirement", "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"]},
                    {"name": "mysqlinstancerequirements/status", "namespaced": true, "kind": "MySQLInstanceRequirement", "verbs": ["get", "update", "patch"]}]}),
            ),
            ("GET", p) if p == objects && query.contains("watch") => (
                StatusCode::OK,
                "application/json".into(),
                Bytes::from(format!(
                    "{}\n",
                    json!({"type": "MODIFIED", "object": requirement("sqldb", Some("foo"), "u-ours")})
                )),
            ),
            ("GET", p) if p == objects => json_answer(
                StatusCode::OK,
                json!({"kind": "MySQLInstanceRequirementList", "apiVersion": "database.acmeco.org/v1alpha1",
                    "metadata": {"resourceVersion": "7"}, "items": [requirement("sqldb", Some("foo"), "u-ours")]}),
            ),
            ("POST", p) if p == objects => {
                let o: Json = serde_json::from_slice(&body).unwrap();
                if o["metadata"]["name"] == "theirs" {
                    return json_answer(
                        StatusCode::CONFLICT,
                        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure",
                        "reason": "AlreadyExists", "code": 409,
                        "message": "mysqlinstancerequirements.database.acmeco.org \"theirs\" already exists"}),
                    );
                }
                json_answer(StatusCode::CREATED, o)
            }
            (_, p) if p.starts_with(&objects) => {
                let name = p.rsplit('/').next().unwrap();
                let held = match name {
                    "sqldb" => requirement("sqldb", Some("foo"), "u-ours"),
                    "theirs" => requirement("theirs", Some("other"), "u-theirs"),
                    "central-own" => requirement("central-own", None, "u-central"),
                    _ => {
                        return json_answer(
                            StatusCode::NOT_FOUND,
                            json!({"kind": "Status", "apiVersion": "v1",
                            "status": "Failure", "reason": "NotFound", "code": 404,
                            "message": format!("mysqlinstancerequirements.database.acmeco.org \"{name}\" not found")}),
                        )
                    }
                };
                match method.as_str() {
                    "GET" => json_answer(StatusCode::OK, held),
                    "PUT" | "PATCH" => {
                        let mut o: Json = serde_json::from_slice(&body).unwrap_or(held);
                        o["metadata"]["namespace"] = "bar".into();
                        json_answer(StatusCode::OK, o)
                    }
                    _ => json_answer(
                        StatusCode::OK,
                        json!({"kind": "Status", "status": "Success"}),
                    ),
                }
            }
            _ => json_answer(
                StatusCode::NOT_FOUND,
                json!({"kind": "Status", "code": 404}),
            ),
        }
    }
}

fn kubeconfig(server: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\nclusters: [{{name: c, cluster: {{server: '{server}'}}}}]\n\
         contexts: [{{name: c, context: {{cluster: c, user: u}}}}]\nusers: [{{name: u, user: {{token: central-token}}}}]\n"
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_central_clusters_group_is_served_remotely_by_namespace_and_source() {
    let dir = std::env::temp_dir().join(format!("regroup-publish-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let aggregator =
        tls::generate_for("front-proxy-ca", &["front-proxy-client".into()], true).unwrap();
    std::fs::write(
        dir.join("front-proxy-ca.crt"),
        aggregator.ca_pem.as_deref().unwrap(),
    )
    .unwrap();
    let serving = tls::generate().unwrap();
    std::fs::write(dir.join("front.crt"), &serving.cert_pem).unwrap();
    std::fs::write(dir.join("front.key"), &serving.key_pem).unwrap();
    std::fs::write(dir.join("front-ca.crt"), serving.ca_pem.as_deref().unwrap()).unwrap();

    let seen = Arc::new(Mutex::new(Vec::new()));
    let central_url = fake_upstream(central(seen.clone())).await;
    let remote_url = fake_upstream(remote).await;
    std::fs::write(dir.join("central.kubeconfig"), kubeconfig(&central_url)).unwrap();
    std::fs::write(dir.join("remote.kubeconfig"), kubeconfig(&remote_url)).unwrap();
    let (front_port, sidecar_port) = (free_port(), free_port());
    std::fs::write(
        dir.join("config.yaml"),
        format!(
            "upstream: {{kubeconfig: {d}/remote.kubeconfig}}\n\
             listeners: {{http: 127.0.0.1:{sidecar_port}}}\n\
             front:\n  listen: 127.0.0.1:{front_port}\n  certFile: {d}/front.crt\n  keyFile: {d}/front.key\n  caFile: {d}/front-ca.crt\n\
             \x20 requestHeader: {{fromCluster: false, clientCaFile: {d}/front-proxy-ca.crt}}\n\
             publish:\n  central: {{kubeconfig: {d}/central.kubeconfig}}\n  groups: [database.acmeco.org]\n  targetNamespace: bar\n\
             \x20 connectionSecrets: {{fields: []}}\n",
            d = dir.display()
        ),
    )
    .unwrap();
    let _regroup = KillOnDrop(
        Command::new(env!("CARGO_BIN_EXE_regroup"))
            .args(["serve", "-c"])
            .arg(dir.join("config.yaml"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_for_port(front_port, "regroup's front").await;
    let ca = serving.ca_pem.clone().unwrap();
    let c = tls_support::https_client(&ca, Some(&aggregator));
    let base = format!("https://127.0.0.1:{front_port}");
    let call = |method: Method, path: &str, user: &str, ctype: Option<&str>, body: &str| {
        let mut b = Request::builder()
            .method(method)
            .uri(format!("{base}{path}"))
            .header("x-remote-user", user)
            .header("x-remote-group", "system:authenticated");
        if let Some(t) = ctype {
            b = b.header("content-type", t);
        }
        let req = b.body(Full::new(Bytes::from(body.to_owned()))).unwrap();
        let c = c.clone();
        async move {
            let resp = c.request(req).await.unwrap();
            let status = resp.status();
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            (
                status,
                serde_json::from_slice::<Json>(&body).unwrap_or(Json::Null),
            )
        }
    };
    let last = |seen: &Arc<Mutex<Vec<Received>>>| {
        let s = seen.lock().unwrap();
        let r = s.last().unwrap();
        (
            r.method.clone(),
            r.path.clone(),
            r.query.clone().unwrap_or_default(),
            r.body.clone(),
            r.header("authorization"),
        )
    };
    let remote_objects = format!("{GV}/namespaces/foo/mysqlinstancerequirements");

    // A create lands in the target namespace with its source; it reads back remote.
    let created = r#"{"apiVersion":"database.acmeco.org/v1alpha1","kind":"MySQLInstanceRequirement","metadata":{"name":"fresh","namespace":"foo"},"spec":{"version":"5.7"}}"#;
    let (status, back) = call(
        Method::POST,
        &remote_objects,
        "alice",
        Some("application/json"),
        created,
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{back}");
    assert_eq!(back["metadata"]["namespace"], "foo");
    let (method, path, _, body, auth) = last(&seen);
    assert_eq!(
        (method.as_str(), path.as_str()),
        (
            "POST",
            "/apis/database.acmeco.org/v1alpha1/namespaces/bar/mysqlinstancerequirements"
        )
    );
    let sent: Json = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent["metadata"]["namespace"], "bar");
    assert_eq!(
        sent["metadata"]["labels"]["regroup.dev/source-namespace"],
        "foo"
    );
    assert_eq!(
        sent["metadata"]["labels"]["regroup.dev/source-cluster"],
        CLUSTER
    );
    assert_eq!(
        auth.as_deref(),
        Some("Bearer central-token"),
        "the central credential, never the caller's"
    );

    // A list is narrowed to this source by the central cluster itself.
    let (status, list) = call(
        Method::GET,
        &format!("{remote_objects}?labelSelector=app%3Dwp"),
        "alice",
        None,
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(list["items"][0]["metadata"]["namespace"], "foo");
    let (_, _, query, _, _) = last(&seen);
    let selector: String = form_urlencoded::parse(query.as_bytes())
        .find(|(k, _)| k == "labelSelector")
        .map(|(_, v)| v.into_owned())
        .unwrap();
    assert_eq!(
        selector,
        format!("app=wp,regroup.dev/source-namespace=foo,regroup.dev/source-cluster={CLUSTER}")
    );

    // A watch: events in the remote namespace.
    let (status, event) = call(
        Method::GET,
        &format!("{remote_objects}?watch=1"),
        "alice",
        None,
        "",
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(event["object"]["metadata"]["namespace"], "foo");

    // An update of this source's object is bound to the uid read.
    let update = r#"{"apiVersion":"database.acmeco.org/v1alpha1","kind":"MySQLInstanceRequirement","metadata":{"name":"sqldb","namespace":"foo"},"spec":{"version":"8.0"}}"#;
    let (status, back) = call(
        Method::PUT,
        &format!("{remote_objects}/sqldb"),
        "alice",
        Some("application/json"),
        update,
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{back}");
    let (_, _, _, body, _) = last(&seen);
    let sent: Json = serde_json::from_slice(&body).unwrap();
    assert_eq!(sent["metadata"]["uid"], "u-ours");
    assert_eq!(back["metadata"]["namespace"], "foo");

    // Another source's name: not found to read, a conflict to write, never touched.
    for (name, _) in [
        ("theirs", "other namespace"),
        ("central-own", "made centrally"),
    ] {
        let n = seen.lock().unwrap().len();
        let (status, st) = call(
            Method::GET,
            &format!("{remote_objects}/{name}"),
            "alice",
            None,
            "",
        )
        .await;
        assert_eq!(status, StatusCode::NOT_FOUND, "{st}");
        assert!(
            st["message"]
                .as_str()
                .unwrap()
                .contains("held in the central cluster by another"),
            "{st}"
        );
        let (status, st) = call(
            Method::DELETE,
            &format!("{remote_objects}/{name}"),
            "alice",
            None,
            "",
        )
        .await;
        assert_eq!(status, StatusCode::CONFLICT, "{st}");
        assert_eq!(st["reason"], "Conflict");
        let after: Vec<Method> = seen.lock().unwrap()[n..]
            .iter()
            .map(|r| r.method.clone())
            .collect();
        assert!(
            after.iter().all(|m| m == Method::GET),
            "only reads reached the central cluster: {after:?}"
        );
    }

    // A create whose name another source holds: AlreadyExists, said plainly.
    let theirs = created.replace("fresh", "theirs");
    let (status, st) = call(
        Method::POST,
        &remote_objects,
        "alice",
        Some("application/json"),
        &theirs,
    )
    .await;
    assert_eq!(status, StatusCode::CONFLICT);
    assert_eq!(st["reason"], "AlreadyExists");
    assert!(
        st["message"]
            .as_str()
            .unwrap()
            .contains("held by another namespace or cluster"),
        "{st}"
    );

    // The remote cluster's RBAC decides: bob reaches nothing centrally.
    let n = seen.lock().unwrap().len();
    let (status, st) = call(Method::GET, &remote_objects, "bob", None, "").await;
    assert_eq!(status, StatusCode::FORBIDDEN);
    assert_eq!(
        st["message"],
        "mysqlinstancerequirements.database.acmeco.org is forbidden: User \"bob\" cannot list resource \"mysqlinstancerequirements\" in API group \"database.acmeco.org\" in the namespace \"foo\""
    );
    assert_eq!(seen.lock().unwrap().len(), n);

    // Discovery shows the published group only; other groups are not served.
    let (status, apis) = call(Method::GET, "/apis", "alice", None, "").await;
    assert_eq!(status, StatusCode::OK);
    let groups: Vec<&str> = apis["groups"]
        .as_array()
        .unwrap()
        .iter()
        .map(|g| g["name"].as_str().unwrap())
        .collect();
    assert_eq!(groups, ["database.acmeco.org"]);
    let (status, _) = call(
        Method::GET,
        "/apis/apps/v1/namespaces/foo/deployments",
        "alice",
        None,
        "",
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A caller without a front-proxy certificate gets nothing.
    let anonymous = tls_support::https_client(&ca, None);
    let resp = anonymous
        .request(
            Request::get(format!("{base}{remote_objects}"))
                .header("x-remote-user", "alice")
                .body(Full::default())
                .unwrap(),
        )
        .await
        .unwrap();
    assert_eq!(resp.status(), StatusCode::UNAUTHORIZED);
}
