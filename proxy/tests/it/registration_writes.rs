//! The app's webhook registrations written through the sidecar when
//! regroup fronts its webhooks: the captured MutatingWebhookConfiguration
//! and conversion-webhook CRD of kube-apiserver 1.29
//! (`testdata/kube-1.29/webhooks/orig/072` and `110`), created through
//! regroup (JSON, protobuf), then patched as controllers patch them (JSON
//! Patch, strategic-merge, merge, server-side apply in YAML). The cluster must
//! keep regroup's `clientConfig` and CA; the app must read back what it
//! wrote. The fake upstream stores objects by path, applies patches
//! (strategic merge of `webhooks` by name), honours a patch's or an
//! update's `metadata.resourceVersion` as a precondition, and records
//! every request.

use crate::common;
use regroup::rewrite::protobuf::test_wire;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioExecutor;
use regroup::hooks::registrations::{Fronted, WebhookRegistration, APP_CLIENT_CONFIGS_ANNOTATION};
use regroup_config::schema::{ReachAt, Registration};
use serde_json::{json, Value as Json};

const REGROUP_CA: &str = "UkVHUk9VUA==";
const NEW_CA: &str = "TkVX";
const HOOK: &str = "mutate-v1.foo.regroup-fixtures.example.org";
const APP_URL: &str = "https://127.0.0.1:18443/mutate/orig/v1";
const REGROUP_URL: &str = "https://127.0.0.1:9444/mutate-foo";
const MWCS: &str = "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations";
const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    content_type: Option<String>,
    accept: Option<String>,
    body: Bytes,
}

#[derive(Default)]
struct Store {
    objects: HashMap<String, Json>,
    /// Objects written in protobuf, as written, by the path they were
    /// created under.
    protobuf: HashMap<String, Bytes>,
    version: u64,
    /// The next writes to lose a race to another writer (409).
    conflicts: usize,
    seen: Vec<Seen>,
}

impl Store {
    fn methods(&self) -> Vec<Method> {
        self.seen.iter().map(|s| s.method.clone()).collect()
    }
}

fn fixture(case: &str) -> Json {
    let p = format!(
        "{}/../testdata/kube-1.29/webhooks/orig/{case}/request.body",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

/// kube-apiserver's strategic merge, for what these objects use:
/// `webhooks` merge by `name`, other lists are replaced, maps merge.
fn strategic_merge(doc: &mut Json, patch: &Json) {
    let (Some(d), Some(p)) = (doc.as_object_mut(), patch.as_object()) else {
        *doc = patch.clone();
        return;
    };
    for (k, v) in p {
        match (k.as_str(), v) {
            (_, Json::Null) => {
                d.remove(k);
            }
            ("webhooks", Json::Array(items)) => {
                let list = d.entry(k).or_insert(json!([]));
                for item in items {
                    let at = list
                        .as_array()
                        .unwrap()
                        .iter()
                        .position(|h| h["name"] == item["name"]);
                    match at {
                        Some(i) => strategic_merge(&mut list[i], item),
                        None => list.as_array_mut().unwrap().push(item.clone()),
                    }
                }
            }
            (_, Json::Object(_)) => strategic_merge(d.entry(k).or_insert(json!({})), v),
            _ => {
                d.insert(k.clone(), v.clone());
            }
        }
    }
}

fn conflict() -> (StatusCode, Json) {
    (
        StatusCode::CONFLICT,
        json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "reason": "Conflict",
            "message": "the object has been modified; please apply your changes to the latest version and try again",
            "code": 409}),
    )
}

fn serve(store: &mut Store, seen: Seen) -> (StatusCode, Json) {
    store.seen.push(seen.clone());
    let body: Json = serde_json::from_slice(&seen.body).unwrap_or(Json::Null);
    if seen.method == Method::POST {
        let name = body["metadata"]["name"].as_str().unwrap().to_owned();
        let mut obj = body;
        store.version += 1;
        obj["metadata"]["resourceVersion"] = json!(store.version.to_string());
        store
            .objects
            .insert(format!("{}/{name}", seen.path), obj.clone());
        return (StatusCode::CREATED, obj);
    }
    let exists = store.objects.contains_key(&seen.path);
    if !exists && seen.method != Method::PATCH {
        return (
            StatusCode::NOT_FOUND,
            json!({"kind": "Status", "code": 404}),
        );
    }
    let current = store.objects.get(&seen.path).cloned().unwrap_or(json!({}));
    let new = match seen.method {
        Method::GET => return (StatusCode::OK, current),
        Method::PUT => body.clone(),
        Method::PATCH => {
            let ctype = seen.content_type.clone().unwrap_or_default();
            let mut new = current.clone();
            match ctype.as_str() {
                "application/merge-patch+json" => json_patch::merge(&mut new, &body),
                "application/strategic-merge-patch+json" | "application/apply-patch+yaml" => {
                    strategic_merge(&mut new, &body)
                }
                "application/json-patch+json" => {
                    let ops: json_patch::Patch = serde_json::from_value(body.clone()).unwrap();
                    json_patch::patch(&mut new, &ops).unwrap();
                }
                other => panic!("unexpected patch type {other}"),
            }
            new
        }
        _ => return (StatusCode::METHOD_NOT_ALLOWED, json!({})),
    };
    if store.conflicts > 0 {
        store.conflicts -= 1;
        store.version += 1;
        let c = store.objects.get_mut(&seen.path).unwrap();
        c["metadata"]["labels"] = json!({"touched-by": "another-writer"});
        c["metadata"]["resourceVersion"] = json!(store.version.to_string());
        return conflict();
    }
    let asked = body["metadata"]["resourceVersion"].as_str();
    if exists && asked.is_some_and(|v| Some(v) != current["metadata"]["resourceVersion"].as_str()) {
        return conflict();
    }
    let mut new = new;
    store.version += 1;
    new["metadata"]["resourceVersion"] = json!(store.version.to_string());
    store.objects.insert(seen.path.clone(), new.clone());
    (StatusCode::OK, new)
}

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

/// Protobuf writes are kept as written and read back as they were (this
/// fake does not decode them); JSON is [`serve`]d.
fn answer(store: &mut Store, seen: Seen) -> (StatusCode, &'static str, Bytes) {
    if seen.content_type.as_deref() == Some(PROTOBUF) && seen.method == Method::POST {
        store.seen.push(seen.clone());
        store.protobuf.insert(seen.path.clone(), seen.body.clone());
        return (StatusCode::CREATED, PROTOBUF, seen.body);
    }
    if seen.accept.as_deref() == Some(PROTOBUF) && seen.method == Method::GET {
        store.seen.push(seen.clone());
        let (dir, _) = seen.path.rsplit_once('/').unwrap();
        return match store.protobuf.get(dir) {
            Some(b) => (StatusCode::OK, PROTOBUF, b.clone()),
            None => (StatusCode::NOT_FOUND, "application/json", Bytes::from("{}")),
        };
    }
    let (code, doc) = serve(store, seen);
    (code, "application/json", Bytes::from(doc.to_string()))
}

async fn upstream(store: Arc<Mutex<Store>>) -> String {
    common::fake_upstream(move |r| {
        let seen = Seen {
            content_type: r.header("content-type"),
            accept: r.header("accept"),
            method: r.method,
            path: r.path,
            body: r.body,
        };
        let (code, ctype, body) = answer(&mut store.lock().unwrap(), seen);
        (code, ctype.to_owned(), body)
    })
    .await
}

fn registration() -> WebhookRegistration {
    let by_url = |url: &str, path: &str| {
        Fronted::new(
            path.into(),
            Registration {
                url: Some(url.into()),
                service: None,
                configuration: None,
                webhook: None,
            },
            None,
        )
    };
    WebhookRegistration {
        reach_at: ReachAt {
            url: Some("https://127.0.0.1:9444".into()),
            service: None,
        },
        ca_bundle: REGROUP_CA.into(),
        fronted: vec![
            by_url(APP_URL, "/mutate-foo"),
            by_url("https://127.0.0.1:18443/convert/orig", "/convert-bars"),
        ],
    }
}

async fn setup() -> (Arc<Mutex<Store>>, String) {
    let store = Arc::new(Mutex::new(Store::default()));
    let server = upstream(store.clone()).await;
    let addr = common::sidecar_with(server, None, Some(registration())).await;
    (store, format!("http://{addr}"))
}

async fn call(
    base: &str,
    method: Method,
    path: &str,
    ctype: &str,
    body: &str,
) -> (StatusCode, Json) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let req = Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
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

async fn call_raw(
    base: &str,
    method: Method,
    path: &str,
    ctype: &str,
    accept: &str,
    body: &[u8],
) -> (StatusCode, Bytes) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let req = Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("content-type", ctype)
        .header("accept", accept)
        .header("authorization", "Bearer app-token")
        .body(Full::new(Bytes::copy_from_slice(body)))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let code = resp.status();
    (code, resp.into_body().collect().await.unwrap().to_bytes())
}

/// Creates the captured configuration through regroup; returns the path
/// of the stored object.
async fn create_072(base: &str, store: &Arc<Mutex<Store>>) -> String {
    let written = fixture("072-create-mutatingwebhookconfiguration-v1");
    let (code, doc) = call(
        base,
        Method::POST,
        MWCS,
        "application/json",
        &written.to_string(),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{doc}");
    assert_eq!(
        doc["webhooks"][0]["clientConfig"],
        written["webhooks"][0]["clientConfig"]
    );
    let path = format!("{MWCS}/foo-mutate-orig-v1");
    let s = store.lock().unwrap();
    assert_cluster_form(&s.objects[&path]);
    path
}

fn cluster_hook(doc: &Json) -> &Json {
    &doc["webhooks"][0]["clientConfig"]
}

fn kept(doc: &Json) -> Json {
    serde_json::from_str(
        doc["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION]
            .as_str()
            .unwrap_or_else(|| panic!("no annotation: {doc}")),
    )
    .unwrap()
}

fn assert_cluster_form(doc: &Json) {
    assert_eq!(
        cluster_hook(doc),
        &json!({"url": REGROUP_URL, "caBundle": REGROUP_CA}),
        "{doc}"
    );
    assert_eq!(kept(doc)[HOOK]["url"], APP_URL, "{doc}");
    // Renamed for the cluster as always.
    assert_eq!(
        doc["webhooks"][0]["rules"][0]["apiGroups"][0],
        "samplecontroller.team1.example.com"
    );
}

/// What the app reads: its own clientConfig with `bundle`, no annotation
/// of regroup's, its own names.
fn assert_app_view(doc: &Json, bundle: &str) {
    assert_eq!(cluster_hook(doc)["url"], APP_URL, "{doc}");
    assert_eq!(cluster_hook(doc)["caBundle"], bundle, "{doc}");
    assert!(doc["metadata"]["annotations"]
        .get(APP_CLIENT_CONFIGS_ANNOTATION)
        .is_none());
    assert_eq!(
        doc["webhooks"][0]["rules"][0]["apiGroups"][0],
        "samplecontroller.k8s.io"
    );
}

#[tokio::test]
async fn a_json_patch_of_the_ca_bundle_is_written_as_a_whole_write() {
    let (store, base) = setup().await;
    let path = create_072(&base, &store).await;
    let ops = format!(
        r#"[{{"op":"test","path":"/webhooks/0/clientConfig/url","value":"{APP_URL}"}},
            {{"op":"replace","path":"/webhooks/0/clientConfig/caBundle","value":"{NEW_CA}"}}]"#
    );
    let (code, doc) = call(
        &base,
        Method::PATCH,
        &path,
        "application/json-patch+json",
        &ops,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{doc}");
    assert_app_view(&doc, NEW_CA);
    let s = store.lock().unwrap();
    // Read, then written whole with the version read.
    assert_eq!(s.methods()[1..], [Method::GET, Method::PUT]);
    let stored = &s.objects[&path];
    assert_cluster_form(stored);
    assert_eq!(kept(stored)[HOOK]["caBundle"], NEW_CA);
}

#[tokio::test]
async fn a_json_patch_that_replaces_the_url_with_one_regroup_does_not_front_goes_to_the_cluster() {
    let (store, base) = setup().await;
    let path = create_072(&base, &store).await;
    let ops = r#"[{"op":"replace","path":"/webhooks/0/clientConfig","value":{"url":"https://elsewhere/x","caBundle":"T1RIRVI="}}]"#;
    let (code, doc) = call(
        &base,
        Method::PATCH,
        &path,
        "application/json-patch+json",
        ops,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{doc}");
    assert_eq!(cluster_hook(&doc)["url"], "https://elsewhere/x");
    let s = store.lock().unwrap();
    assert_eq!(
        cluster_hook(&s.objects[&path])["url"],
        "https://elsewhere/x"
    );
    assert!(s.objects[&path]["metadata"].get("annotations").is_none());
}

#[tokio::test]
async fn a_json_patch_elsewhere_is_forwarded_renamed() {
    let (store, base) = setup().await;
    let path = create_072(&base, &store).await;
    let ops = r#"[{"op":"replace","path":"/webhooks/0/rules/0/apiGroups/0","value":"samplecontroller.k8s.io"},
                  {"op":"add","path":"/metadata/labels/x","value":"samplecontroller.k8s.io"}]"#;
    let (code, doc) = call(
        &base,
        Method::PATCH,
        &path,
        "application/json-patch+json",
        ops,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{doc}");
    assert_app_view(
        &doc,
        cluster_hook(&fixture("072-create-mutatingwebhookconfiguration-v1"))["caBundle"]
            .as_str()
            .unwrap(),
    );
    let s = store.lock().unwrap();
    assert_eq!(s.methods()[1..], [Method::PATCH]);
    assert_cluster_form(&s.objects[&path]);
}

#[tokio::test]
async fn a_strategic_merge_patch_of_the_ca_bundle_alone_keeps_regroups_ca_in_the_cluster() {
    let (store, base) = setup().await;
    let path = create_072(&base, &store).await;
    store.lock().unwrap().conflicts = 1;
    let patch =
        format!(r#"{{"webhooks":[{{"name":"{HOOK}","clientConfig":{{"caBundle":"{NEW_CA}"}}}}]}}"#);
    let (code, doc) = call(
        &base,
        Method::PATCH,
        &path,
        "application/strategic-merge-patch+json",
        &patch,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{doc}");
    assert_app_view(&doc, NEW_CA);
    let s = store.lock().unwrap();
    // Read, a patch that lost a race, read again, patched.
    assert_eq!(
        s.methods()[1..],
        [Method::GET, Method::PATCH, Method::GET, Method::PATCH]
    );
    let last: Json = serde_json::from_slice(&s.seen.last().unwrap().body).unwrap();
    // The version the second read saw (the other writer made it 2).
    assert_eq!(last["metadata"]["resourceVersion"], "2", "{last}");
    let stored = &s.objects[&path];
    assert_cluster_form(stored);
    assert_eq!(kept(stored)[HOOK]["caBundle"], NEW_CA);
    assert_eq!(stored["metadata"]["labels"]["touched-by"], "another-writer");
}

#[tokio::test]
async fn a_patch_regroup_cant_map_is_refused_with_why() {
    let (store, base) = setup().await;
    let path = create_072(&base, &store).await;
    let patch = format!(
        r#"{{"webhooks":[{{"name":"{HOOK}","clientConfig":{{"caBundle":"{NEW_CA}","$patch":"replace"}}}}]}}"#
    );
    let (code, doc) = call(
        &base,
        Method::PATCH,
        &path,
        "application/strategic-merge-patch+json",
        &patch,
    )
    .await;
    assert_eq!(code, StatusCode::UNPROCESSABLE_ENTITY, "{doc}");
    assert_eq!(doc["kind"], "Status");
    let message = doc["message"].as_str().unwrap();
    assert!(
        message.contains(HOOK) && message.contains("caBundle"),
        "{message}"
    );
    let s = store.lock().unwrap();
    assert_eq!(s.methods()[1..], [Method::GET], "nothing written");
}

#[tokio::test]
async fn server_side_apply_in_yaml_points_the_webhook_at_regroup() {
    let (store, base) = setup().await;
    // kubectl apply --server-side of the captured configuration, in YAML.
    let written = fixture("072-create-mutatingwebhookconfiguration-v1");
    let yaml = serde_saphyr::to_string(&written).unwrap();
    let path = format!("{MWCS}/foo-mutate-orig-v1?fieldManager=kubectl&force=true");
    let (code, doc) = call(
        &base,
        Method::PATCH,
        &path,
        "application/apply-patch+yaml",
        &yaml,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{doc}");
    assert_app_view(
        &doc,
        written["webhooks"][0]["clientConfig"]["caBundle"]
            .as_str()
            .unwrap(),
    );
    let s = store.lock().unwrap();
    let sent = s.seen.last().unwrap();
    assert_eq!(
        sent.content_type.as_deref(),
        Some("application/apply-patch+yaml")
    );
    // Sent as JSON (which YAML includes), pointed at regroup.
    let sent: Json = serde_json::from_slice(&sent.body).unwrap();
    assert_cluster_form(&sent);
    assert_cluster_form(&s.objects[&format!("{MWCS}/foo-mutate-orig-v1")]);
}

#[tokio::test]
async fn a_merge_patch_of_a_crds_conversion_ca_bundle_alone() {
    let (store, base) = setup().await;
    let written = fixture("110-create-crd-bars-conversion-webhook");
    let (code, doc) = call(
        &base,
        Method::POST,
        CRDS,
        "application/json",
        &written.to_string(),
    )
    .await;
    assert_eq!(code, StatusCode::CREATED, "{doc}");
    let app_path = format!("{CRDS}/bars.samplecontroller.k8s.io");
    let cluster_path = format!("{CRDS}/bars.samplecontroller.team1.example.com");
    let patch = format!(
        r#"{{"spec":{{"conversion":{{"webhook":{{"clientConfig":{{"caBundle":"{NEW_CA}"}}}}}}}}}}"#
    );
    let (code, doc) = call(
        &base,
        Method::PATCH,
        &app_path,
        "application/merge-patch+json",
        &patch,
    )
    .await;
    assert_eq!(code, StatusCode::OK, "{doc}");
    let cc = &doc["spec"]["conversion"]["webhook"]["clientConfig"];
    assert_eq!(cc["url"], "https://127.0.0.1:18443/convert/orig", "{doc}");
    assert_eq!(cc["caBundle"], NEW_CA);
    let s = store.lock().unwrap();
    let stored = &s.objects[&cluster_path];
    assert_eq!(
        stored["spec"]["conversion"]["webhook"]["clientConfig"],
        json!({"url": "https://127.0.0.1:9444/convert-bars", "caBundle": REGROUP_CA})
    );
    assert_eq!(kept(stored)["conversion"]["caBundle"], NEW_CA);
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[tokio::test]
async fn a_protobuf_registration_is_pointed_at_regroup_and_read_back_as_written() {
    use test_wire::{cat, envelope, ld};
    let (store, base) = setup().await;
    // The captured 072 as client-go's typed client writes it in protobuf:
    // metadata {1 name}, webhooks {1 name, 2 clientConfig {2 caBundle,
    // 3 url}, 3 rules {1 operations, 2 rule {1 apiGroups, 2 apiVersions,
    // 3 resources}}, 4 failurePolicy, 6 sideEffects}.
    let written = fixture("072-create-mutatingwebhookconfiguration-v1");
    let ca = written["webhooks"][0]["clientConfig"]["caBundle"]
        .as_str()
        .unwrap();
    let pem = base64::Engine::decode(&base64::engine::general_purpose::STANDARD, ca).unwrap();
    let rule = cat(&[
        ld(1, "CREATE"),
        ld(
            2,
            cat(&[
                ld(1, "samplecontroller.k8s.io"),
                ld(2, "v1alpha1"),
                ld(3, "foos"),
            ]),
        ),
    ]);
    let hook = cat(&[
        ld(1, HOOK),
        ld(2, cat(&[ld(2, &pem), ld(3, APP_URL)])),
        ld(3, rule),
        ld(4, "Fail"),
        ld(6, "None"),
    ]);
    let body = envelope(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        &cat(&[ld(1, ld(1, "foo-mutate-orig-v1")), ld(2, hook)]),
    );
    let (code, created) = call_raw(&base, Method::POST, MWCS, PROTOBUF, PROTOBUF, &body).await;
    assert_eq!(code, StatusCode::CREATED);
    // The cluster got regroup's clientConfig and CA, the group renamed.
    let sent = store.lock().unwrap().protobuf[MWCS].clone();
    assert!(contains(&sent, REGROUP_URL.as_bytes()));
    assert!(
        contains(&sent, b"REGROUP")
            || contains(
                &sent,
                &base64::Engine::decode(&base64::engine::general_purpose::STANDARD, REGROUP_CA)
                    .unwrap()
            )
    );
    assert!(contains(&sent, APP_CLIENT_CONFIGS_ANNOTATION.as_bytes()));
    assert!(contains(&sent, b"samplecontroller.team1.example.com"));
    assert!(
        !contains(&sent, &pem),
        "the app's CA is kept in the annotation, in base64"
    );
    // The app reads back what it wrote, when created and when read.
    let (code, read) = call_raw(
        &base,
        Method::GET,
        &format!("{MWCS}/foo-mutate-orig-v1"),
        PROTOBUF,
        PROTOBUF,
        b"",
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    for got in [&created, &read] {
        assert_eq!(&got[..], &body[..]);
    }
}
