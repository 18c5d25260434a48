//! JSON Patches of the app's own APIService in sidecar mode with a front:
//! regroup applies them to the app's view of the object (app names, the
//! app's own caBundle) and writes the result with the resourceVersion it
//! read, so the cluster keeps regroup's serving CA in `spec.caBundle` and
//! the app's bundle in the annotation. The fake upstream keeps one renamed
//! APIService and one that is not renamed, and records every request.

use crate::common;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioExecutor;
use regroup::hooks::front_trust::{FrontTrust, APP_CA_BUNDLE_ANNOTATION};
use serde_json::{json, Value as Json};

/// regroup's front serving CA, as it goes into `spec.caBundle`.
const SERVING_CA: &str = "UkVHUk9VUA==";
/// The bundle the app wrote, kept in the annotation.
const APP_CA: &str = "T0xE";
/// The bundle the app rotates to.
const NEW_CA: &str = "TkVX";

const PREFIX: &str = "/apis/apiregistration.k8s.io/v1/apiservices/";
const CLUSTER_NAME: &str = "v1alpha1.wardle.team1.example.com";
const APP_PATH: &str = "/apis/apiregistration.k8s.io/v1/apiservices/v1alpha1.wardle.example.com";
const METRICS: &str = "v1beta1.metrics.k8s.io";

/// One request the upstream saw.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    query: Option<String>,
    content_type: Option<String>,
    authorization: Option<String>,
    body: Bytes,
}

/// The fake kube-apiserver's APIServices, in the cluster's names.
#[derive(Default)]
struct Store {
    objects: HashMap<String, Json>,
    version: u64,
    /// The next PUTs to lose a race to another writer (409).
    conflicts: usize,
    seen: Vec<Seen>,
}

impl Store {
    fn object(&self, name: &str) -> &Json {
        &self.objects[name]
    }

    fn methods(&self) -> Vec<Method> {
        self.seen.iter().map(|s| s.method.clone()).collect()
    }
}

fn status(code: u16, reason: &str, message: String, name: &str) -> Json {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": message, "reason": reason,
        "details": {"name": name, "group": "apiregistration.k8s.io", "kind": "apiservices"},
        "code": code})
}

/// kube-apiserver's answers to GET, PUT and PATCH of one APIService: PUT
/// is conditional on `metadata.resourceVersion`.
fn serve(store: &mut Store, seen: Seen) -> (StatusCode, Json) {
    store.seen.push(seen.clone());
    let name = seen
        .path
        .strip_prefix(PREFIX)
        .unwrap_or_default()
        .to_owned();
    let not_found = || {
        let message = format!("apiservices.apiregistration.k8s.io \"{name}\" not found");
        (
            StatusCode::NOT_FOUND,
            status(404, "NotFound", message, &name),
        )
    };
    let conflict = |name: &str| {
        let message = format!("Operation cannot be fulfilled on apiservices.apiregistration.k8s.io \"{name}\": the object has been modified; please apply your changes to the latest version and try again");
        (StatusCode::CONFLICT, status(409, "Conflict", message, name))
    };
    if !store.objects.contains_key(&name) {
        return not_found();
    }
    match seen.method {
        Method::GET | Method::PATCH => (StatusCode::OK, store.objects[&name].clone()),
        Method::PUT => {
            let mut new: Json = serde_json::from_slice(&seen.body).unwrap();
            if store.conflicts > 0 {
                // Another writer got there first.
                store.conflicts -= 1;
                store.version += 1;
                let current = store.objects.get_mut(&name).unwrap();
                current["metadata"]["labels"] = json!({"touched-by": "another-writer"});
                current["metadata"]["resourceVersion"] = json!(store.version.to_string());
                return conflict(&name);
            }
            if new["metadata"]["resourceVersion"]
                != store.objects[&name]["metadata"]["resourceVersion"]
            {
                return conflict(&name);
            }
            store.version += 1;
            new["metadata"]["resourceVersion"] = json!(store.version.to_string());
            store.objects.insert(name, new.clone());
            (StatusCode::OK, new)
        }
        _ => (StatusCode::METHOD_NOT_ALLOWED, json!({})),
    }
}

async fn upstream(store: Arc<Mutex<Store>>) -> String {
    common::fake_upstream(move |r| {
        let seen = Seen {
            content_type: r.header("content-type"),
            authorization: r.header("authorization"),
            method: r.method,
            path: r.path,
            query: r.query,
            body: r.body,
        };
        let (code, answer) = serve(&mut store.lock().unwrap(), seen);
        (
            code,
            "application/json".into(),
            Bytes::from(answer.to_string()),
        )
    })
    .await
}

/// The renamed APIService as the cluster stores it after the app created
/// it through regroup with bundle [`APP_CA`].
fn stored_apiservice() -> Json {
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": CLUSTER_NAME, "resourceVersion": "1",
            "annotations": {APP_CA_BUNDLE_ANNOTATION: APP_CA}},
        "spec": {"group": "wardle.team1.example.com", "version": "v1alpha1",
            "caBundle": SERVING_CA, "groupPriorityMinimum": 1000, "versionPriority": 15,
            "service": {"name": "api", "namespace": "wardle", "port": 443}}})
}

fn metrics_apiservice() -> Json {
    json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": METRICS, "resourceVersion": "1"},
        "spec": {"group": "metrics.k8s.io", "version": "v1beta1", "caBundle": "T1RIRVI=",
            "groupPriorityMinimum": 100, "versionPriority": 100}})
}

/// A sidecar with a front trust in front of a fake upstream holding both
/// APIServices. Returns the store and regroup's URL.
async fn setup() -> (Arc<Mutex<Store>>, String) {
    let mut store = Store {
        version: 1,
        ..Store::default()
    };
    store
        .objects
        .insert(CLUSTER_NAME.into(), stored_apiservice());
    store.objects.insert(METRICS.into(), metrics_apiservice());
    let store = Arc::new(Mutex::new(store));
    let server = upstream(store.clone()).await;
    let trust = FrontTrust {
        client_ca_pem: "-----BEGIN CERTIFICATE-----\nREGROUP\n-----END CERTIFICATE-----\n".into(),
        client_cn: "regroup-front-proxy".into(),
        serving_ca_bundle: SERVING_CA.into(),
    };
    let addr = common::sidecar(server, Some(trust)).await;
    (store, format!("http://{addr}"))
}

/// PATCHes `path_and_query` with a JSON Patch as the app would, with its
/// own token.
async fn json_patch(base: &str, path_and_query: &str, body: &str) -> (StatusCode, Json) {
    patch(base, path_and_query, "application/json-patch+json", body).await
}

/// PATCHes `path_and_query` with a patch of this content type.
async fn patch(base: &str, path_and_query: &str, ctype: &str, body: &str) -> (StatusCode, Json) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let req = Request::patch(format!("{base}{path_and_query}"))
        .header("content-type", ctype)
        .header("accept", "application/json")
        .header("authorization", "Bearer app-token")
        .body(Full::new(Bytes::from(body.to_owned())))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let code = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let doc = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body)));
    (code, doc)
}

/// What the app must see of its APIService: its names, its bundle, no
/// annotation of regroup's.
fn assert_app_view(doc: &Json, bundle: &str) {
    assert_eq!(
        doc["metadata"]["name"], "v1alpha1.wardle.example.com",
        "{doc}"
    );
    assert_eq!(doc["spec"]["group"], "wardle.example.com", "{doc}");
    assert_eq!(doc["spec"]["caBundle"], bundle, "{doc}");
    assert!(doc["metadata"].get("annotations").is_none(), "{doc}");
}

/// What the cluster must hold: regroup's CA for the aggregator, the app's
/// bundle aside.
fn assert_cluster_form(doc: &Json, app_bundle: &str) {
    assert_eq!(doc["metadata"]["name"], CLUSTER_NAME, "{doc}");
    assert_eq!(doc["spec"]["group"], "wardle.team1.example.com", "{doc}");
    assert_eq!(doc["spec"]["caBundle"], SERVING_CA, "{doc}");
    assert_eq!(
        doc["metadata"]["annotations"][APP_CA_BUNDLE_ANNOTATION], app_bundle,
        "{doc}"
    );
}

#[tokio::test]
async fn replacing_the_bundle_keeps_regroups_ca_in_the_cluster() {
    let (store, base) = setup().await;
    let (code, doc) = json_patch(
        &base,
        &format!("{APP_PATH}?fieldManager=rotator&pretty=true"),
        &format!(r#"[{{"op":"replace","path":"/spec/caBundle","value":"{NEW_CA}"}}]"#),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{doc}");
    assert_app_view(&doc, NEW_CA);

    let store = store.lock().unwrap();
    assert_cluster_form(store.object(CLUSTER_NAME), NEW_CA);
    assert_eq!(
        store.object(CLUSTER_NAME)["metadata"]["resourceVersion"],
        "2"
    );
    assert_eq!(store.methods(), [Method::GET, Method::PUT]);
    let (get, put) = (&store.seen[0], &store.seen[1]);
    assert_eq!(get.path, format!("{PREFIX}{CLUSTER_NAME}"));
    assert_eq!(put.path, format!("{PREFIX}{CLUSTER_NAME}"));
    assert_eq!(put.query.as_deref(), Some("fieldManager=rotator"));
    assert_eq!(put.content_type.as_deref(), Some("application/json"));
    // The app's own credentials, both times.
    for s in [get, put] {
        assert_eq!(s.authorization.as_deref(), Some("Bearer app-token"));
    }
    // Conditional on the version read.
    let written: Json = serde_json::from_slice(&put.body).unwrap();
    assert_eq!(written["metadata"]["resourceVersion"], "1");
}

#[tokio::test]
async fn a_test_of_the_apps_own_bundle_passes() {
    let (store, base) = setup().await;
    let patch = format!(
        r#"[{{"op":"test","path":"/spec/caBundle","value":"{APP_CA}"}},
            {{"op":"replace","path":"/spec/caBundle","value":"{NEW_CA}"}}]"#
    );
    let (code, doc) = json_patch(&base, APP_PATH, &patch).await;
    assert_eq!(code, StatusCode::OK, "{doc}");
    assert_app_view(&doc, NEW_CA);
    let store = store.lock().unwrap();
    assert_cluster_form(store.object(CLUSTER_NAME), NEW_CA);
    // No query on the PATCH: none on the update.
    assert_eq!(store.seen[1].query, None);
}

#[tokio::test]
async fn a_failed_test_is_422_and_writes_nothing() {
    let (store, base) = setup().await;
    // The cluster's value, which the app never sees: the test must fail.
    let patch = format!(
        r#"[{{"op":"test","path":"/spec/caBundle","value":"{SERVING_CA}"}},
            {{"op":"replace","path":"/spec/caBundle","value":"{NEW_CA}"}}]"#
    );
    let (code, doc) = json_patch(&base, APP_PATH, &patch).await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{doc}");
    assert_eq!(doc["kind"], "Status");
    assert_eq!(doc["reason"], "Invalid");
    assert_eq!(doc["code"], 422);
    let store = store.lock().unwrap();
    assert_eq!(store.methods(), [Method::GET], "no write");
    assert_eq!(*store.object(CLUSTER_NAME), stored_apiservice());
}

#[tokio::test]
async fn a_conflict_is_retried_on_the_new_version() {
    let (store, base) = setup().await;
    store.lock().unwrap().conflicts = 1;
    let (code, doc) = json_patch(
        &base,
        APP_PATH,
        &format!(r#"[{{"op":"replace","path":"/spec/caBundle","value":"{NEW_CA}"}}]"#),
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{doc}");
    assert_app_view(&doc, NEW_CA);
    let store = store.lock().unwrap();
    assert_eq!(
        store.methods(),
        [Method::GET, Method::PUT, Method::GET, Method::PUT]
    );
    let stored = store.object(CLUSTER_NAME);
    assert_cluster_form(stored, NEW_CA);
    // The other writer's change survives: the patch was applied to it.
    assert_eq!(stored["metadata"]["labels"]["touched-by"], "another-writer");
    let second: Json = serde_json::from_slice(&store.seen[3].body).unwrap();
    assert_eq!(second["metadata"]["resourceVersion"], "2");
}

#[tokio::test]
async fn conflicts_that_do_not_end_are_returned() {
    let (store, base) = setup().await;
    store.lock().unwrap().conflicts = 100;
    let (code, doc) = json_patch(
        &base,
        APP_PATH,
        &format!(r#"[{{"op":"replace","path":"/spec/caBundle","value":"{NEW_CA}"}}]"#),
    )
    .await;
    assert_eq!(code, StatusCode::CONFLICT, "{doc}");
    assert_eq!(doc["reason"], "Conflict");
    let store = store.lock().unwrap();
    let puts = store
        .methods()
        .iter()
        .filter(|m| **m == Method::PUT)
        .count();
    assert!((2..=10).contains(&puts), "{puts} attempts");
}

#[tokio::test]
async fn a_missing_apiservice_is_the_upstreams_404_renamed() {
    let (store, base) = setup().await;
    let (code, doc) = json_patch(
        &base,
        "/apis/apiregistration.k8s.io/v1/apiservices/v1beta9.wardle.example.com",
        r#"[{"op":"replace","path":"/spec/caBundle","value":"TkVX"}]"#,
    )
    .await;
    assert_eq!(code, StatusCode::NOT_FOUND, "{doc}");
    assert_eq!(doc["reason"], "NotFound");
    assert_eq!(
        doc["message"],
        "apiservices.apiregistration.k8s.io \"v1beta9.wardle.example.com\" not found"
    );
    let store = store.lock().unwrap();
    assert_eq!(store.methods(), [Method::GET]);
    assert_eq!(
        store.seen[0].path,
        format!("{PREFIX}v1beta9.wardle.team1.example.com")
    );
}

#[tokio::test]
async fn a_malformed_patch_is_400_and_reaches_nobody() {
    let (store, base) = setup().await;
    let (code, doc) = json_patch(&base, APP_PATH, r#"{"op":"replace"}"#).await;
    assert_eq!(code, StatusCode::BAD_REQUEST, "{doc}");
    assert_eq!(doc["reason"], "BadRequest");
    assert!(store.lock().unwrap().seen.is_empty());
}

#[tokio::test]
async fn json_patches_of_apiservices_not_renamed_are_forwarded_as_written() {
    let (store, base) = setup().await;
    let body = "[ {\"op\": \"replace\", \"path\": \"/spec/caBundle\", \"value\": \"TkVX\"} ]";
    let (code, _) = json_patch(&base, &format!("{PREFIX}{METRICS}?fieldManager=x"), body).await;
    assert_eq!(code, StatusCode::OK);
    let store = store.lock().unwrap();
    assert_eq!(store.methods(), [Method::PATCH]);
    let seen = &store.seen[0];
    assert_eq!(seen.body, Bytes::from(body), "byte for byte");
    assert_eq!(
        seen.content_type.as_deref(),
        Some("application/json-patch+json")
    );
    assert_eq!(seen.query.as_deref(), Some("fieldManager=x"));
}

#[tokio::test]
async fn merge_patches_get_the_serving_ca_only_for_the_apps_own_apiservice() {
    let (store, base) = setup().await;
    let body = r#"{"spec":{"caBundle":"TkVX"}}"#;
    let ctype = "application/merge-patch+json";
    // The app's own APIService (its name in the app's group).
    let (code, _) = patch(&base, APP_PATH, ctype, body).await;
    assert_eq!(code, StatusCode::OK);
    // Another APIService this app may patch (metrics.k8s.io is not renamed).
    let (code, _) = patch(&base, &format!("{PREFIX}{METRICS}"), ctype, body).await;
    assert_eq!(code, StatusCode::OK);
    let store = store.lock().unwrap();
    assert_eq!(store.methods(), [Method::PATCH, Method::PATCH]);
    let ours: Json = serde_json::from_slice(&store.seen[0].body).unwrap();
    assert_eq!(ours["spec"]["caBundle"], SERVING_CA);
    assert_eq!(
        ours["metadata"]["annotations"][APP_CA_BUNDLE_ANNOTATION],
        "TkVX"
    );
    assert_eq!(store.seen[1].body, Bytes::from(body), "byte for byte");
}
