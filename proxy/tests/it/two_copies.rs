//! Two copies of one operator, each behind its own regroup, with configs
//! that say nothing about `names:`: both register a webhook
//! configuration and a ClusterRole under the same fixed names, as Kopf
//! registers `auto.kopf.dev`. The cluster (a fake upstream that stores
//! cluster-scoped objects by name, 409 on a second create, replaces on
//! PUT, merges on a merge patch) must keep both copies' objects; each copy
//! reads, patches and lists only its own, under the name it wrote. The
//! same with `names: {kinds: []}` (the opt-out) shows what the default
//! prevents: the second copy's write lands on the first copy's object.

use crate::common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioExecutor;
use serde_json::{json, Value as Json};

const VWCS: &str = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations";
const CLUSTERROLES: &str = "/apis/rbac.authorization.k8s.io/v1/clusterroles";

/// The cluster's objects, by collection path and name.
type Store = Arc<Mutex<BTreeMap<(String, String), Json>>>;

fn status(code: StatusCode, reason: &str, message: String) -> (StatusCode, String, Bytes) {
    let body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "reason": reason, "message": message, "code": code.as_u16(),
    });
    (
        code,
        "application/json".into(),
        Bytes::from(body.to_string()),
    )
}

fn ok(code: StatusCode, doc: &Json) -> (StatusCode, String, Bytes) {
    (
        code,
        "application/json".into(),
        Bytes::from(doc.to_string()),
    )
}

fn merge(doc: &mut Json, patch: &Json) {
    match (doc.as_object_mut(), patch.as_object()) {
        (Some(d), Some(p)) => {
            for (k, v) in p {
                if v.is_null() {
                    d.remove(k);
                } else {
                    merge(d.entry(k.clone()).or_insert(Json::Null), v);
                }
            }
        }
        _ => *doc = patch.clone(),
    }
}

/// kube-apiserver, for cluster-scoped objects of the two collections.
async fn cluster(store: Store) -> String {
    common::fake_upstream(move |r| {
        let mut objects = store.lock().unwrap();
        let (collection, name) = match [VWCS, CLUSTERROLES]
            .iter()
            .find(|c| r.path.starts_with(**c))
        {
            Some(c) => (
                c.to_string(),
                r.path[c.len()..].trim_start_matches('/').to_owned(),
            ),
            None => return status(StatusCode::NOT_FOUND, "NotFound", r.path),
        };
        let body: Option<Json> = serde_json::from_slice(&r.body).ok();
        match (r.method, name.is_empty()) {
            (Method::POST, true) => {
                let doc = body.unwrap();
                let name = doc["metadata"]["name"].as_str().unwrap().to_owned();
                if objects.contains_key(&(collection.clone(), name.clone())) {
                    return status(
                        StatusCode::CONFLICT,
                        "AlreadyExists",
                        format!("\"{name}\" already exists"),
                    );
                }
                objects.insert((collection, name), doc.clone());
                ok(StatusCode::CREATED, &doc)
            }
            (Method::PUT, false) => {
                let doc = body.unwrap();
                objects.insert((collection, name), doc.clone());
                ok(StatusCode::OK, &doc)
            }
            (Method::PATCH, false) => match objects.get_mut(&(collection, name.clone())) {
                Some(doc) => {
                    merge(doc, &body.unwrap());
                    ok(StatusCode::OK, doc)
                }
                None => status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    format!("\"{name}\" not found"),
                ),
            },
            (Method::GET, false) => match objects.get(&(collection, name.clone())) {
                Some(doc) => ok(StatusCode::OK, doc),
                None => status(
                    StatusCode::NOT_FOUND,
                    "NotFound",
                    format!("\"{name}\" not found"),
                ),
            },
            (Method::GET, true) => {
                let kind = if collection == VWCS {
                    "ValidatingWebhookConfigurationList"
                } else {
                    "ClusterRoleList"
                };
                let group = collection.split('/').nth(2).unwrap();
                let items: Vec<&Json> = objects
                    .iter()
                    .filter(|((c, _), _)| *c == collection)
                    .map(|(_, v)| v)
                    .collect();
                ok(
                    StatusCode::OK,
                    &json!({"kind": kind, "apiVersion": format!("{group}/v1"),
                            "metadata": {"resourceVersion": "1"}, "items": items}),
                )
            }
            (m, _) => status(
                StatusCode::METHOD_NOT_ALLOWED,
                "MethodNotAllowed",
                m.to_string(),
            ),
        }
    })
    .await
}

/// One copy's regroup, from a config file's text as `regroup serve` loads
/// it, in front of `server`. Returns its base URL.
async fn copy(config: &str, server: &str) -> String {
    let settings = regroup_config::load(config).unwrap_or_else(|e| panic!("{e}"));
    let settings: &'static regroup_config::Settings = Box::leak(Box::new(settings));
    let catalog: &'static regroup::rewrite::Catalog = Box::leak(Box::new(
        regroup::rewrite::Catalog::for_map(&settings.fields, &settings.map),
    ));
    let up = regroup::upstream::Upstream::new(
        &regroup::upstream::Resolved {
            server: server.to_owned(),
            ..Default::default()
        },
        false,
    )
    .unwrap();
    let proxy = regroup::pipeline::proxy::Proxy::sidecar(
        regroup::pipeline::live::Live::new(regroup::rewrite::Engine::new(
            settings.map.clone(),
            catalog.clone(),
        )),
        std::sync::Arc::new(up),
        true,
    );
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    tokio::spawn(common::serve_plain(l, Arc::new(proxy)));
    format!("http://{addr}")
}

fn rules(team: &str) -> String {
    format!("rules:\n  - from: kopf.dev\n    to: kopf.{team}.example.com\n")
}

async fn call(
    base: &str,
    method: Method,
    path: &str,
    ctype: &str,
    body: Json,
) -> (StatusCode, Json) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let body = if body.is_null() {
        Bytes::new()
    } else {
        Bytes::from(body.to_string())
    };
    let req = Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("content-type", ctype)
        .header("accept", "application/json")
        .header("authorization", "Bearer app-token")
        .body(Full::new(body))
        .unwrap();
    let resp = client.request(req).await.unwrap();
    let code = resp.status();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    let doc = serde_json::from_slice(&body)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&body)));
    (code, doc)
}

/// Kopf's registration as copy `team`'s operator writes it.
fn kopf_webhooks(team: &str) -> Json {
    json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "auto.kopf.dev"},
        "webhooks": [{
            "name": "validate.kopf.dev",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"url": format!("https://{team}.example.net/validate")},
            "rules": [{"apiGroups": ["kopf.dev"], "apiVersions": ["v1"],
                       "operations": ["CREATE"], "resources": ["kopfexamples"]}],
        }],
    })
}

fn cluster_role() -> Json {
    json!({
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "kopfexample-editor"},
        "rules": [{"apiGroups": ["kopf.dev"], "resources": ["kopfexamples"], "verbs": ["*"]}],
    })
}

fn url_of(doc: &Json) -> &str {
    doc["webhooks"][0]["clientConfig"]["url"].as_str().unwrap()
}

/// Both copies register `auto.kopf.dev` and `kopfexample-editor`; then
/// each patches its registration as Kopf does on every start.
async fn both_register(a: &str, b: &str) {
    let json = "application/json";
    for (base, team) in [(a, "team-a"), (b, "team-b")] {
        let (code, doc) = call(base, Method::POST, VWCS, json, kopf_webhooks(team)).await;
        assert!(
            code == StatusCode::CREATED || code == StatusCode::CONFLICT,
            "{team}: {code} {doc}"
        );
        let (code, doc) = call(
            base,
            Method::PATCH,
            &format!("{VWCS}/auto.kopf.dev"),
            "application/merge-patch+json",
            json!({"webhooks": kopf_webhooks(team)["webhooks"]}),
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{team}: {doc}");
        assert_eq!(doc["metadata"]["name"], "auto.kopf.dev", "{team}: {doc}");
        let (code, doc) = call(base, Method::POST, CLUSTERROLES, json, cluster_role()).await;
        assert!(
            code == StatusCode::CREATED || code == StatusCode::CONFLICT,
            "{team}: {code} {doc}"
        );
    }
}

#[tokio::test]
async fn two_copies_without_names_config_never_overwrite_each_others_registrations() {
    let store = Store::default();
    let server = cluster(store.clone()).await;
    let a = copy(&rules("team-a"), &server).await;
    let b = copy(&rules("team-b"), &server).await;
    both_register(&a, &b).await;

    // The cluster holds one of each per copy, under distinct names.
    let names: Vec<(String, String)> = store.lock().unwrap().keys().cloned().collect();
    assert_eq!(names.len(), 4, "{names:?}");
    let hooks: Vec<&str> = names
        .iter()
        .filter(|(c, _)| c == VWCS)
        .map(|(_, n)| n.as_str())
        .collect();
    assert_eq!(hooks.len(), 2, "{names:?}");
    assert!(hooks[0].starts_with("team-a-") && hooks[0].ends_with("-auto.kopf.dev"));
    assert!(hooks[1].starts_with("team-b-") && hooks[1].ends_with("-auto.kopf.dev"));
    for (i, team) in ["team-a", "team-b"].iter().enumerate() {
        let stored = store.lock().unwrap()[&(VWCS.to_owned(), hooks[i].to_owned())].clone();
        assert_eq!(
            url_of(&stored),
            format!("https://{team}.example.net/validate")
        );
        // ... with the copy's cluster group in its rules.
        assert_eq!(
            stored["webhooks"][0]["rules"][0]["apiGroups"][0],
            format!("kopf.{team}.example.com")
        );
    }

    // Each copy reads back its own, under the name it wrote, and lists
    // only its own.
    for (base, team) in [(&a, "team-a"), (&b, "team-b")] {
        let (code, doc) = call(
            base,
            Method::GET,
            &format!("{VWCS}/auto.kopf.dev"),
            "",
            Json::Null,
        )
        .await;
        assert_eq!(code, StatusCode::OK, "{doc}");
        assert_eq!(doc["metadata"]["name"], "auto.kopf.dev");
        assert_eq!(url_of(&doc), format!("https://{team}.example.net/validate"));
        assert_eq!(doc["webhooks"][0]["rules"][0]["apiGroups"][0], "kopf.dev");
        for collection in [VWCS, CLUSTERROLES] {
            let (code, list) = call(base, Method::GET, collection, "", Json::Null).await;
            assert_eq!(code, StatusCode::OK, "{list}");
            let items = list["items"].as_array().unwrap();
            assert_eq!(items.len(), 1, "{team} {collection}: {list}");
        }
        let (_, roles) = call(base, Method::GET, CLUSTERROLES, "", Json::Null).await;
        assert_eq!(roles["items"][0]["metadata"]["name"], "kopfexample-editor");
    }
}

#[tokio::test]
async fn with_names_turned_off_the_second_copy_overwrites_the_first() {
    let store = Store::default();
    let server = cluster(store.clone()).await;
    let off = "names:\n  kinds: []\n";
    let a = copy(&format!("{}{off}", rules("team-a")), &server).await;
    let b = copy(&format!("{}{off}", rules("team-b")), &server).await;
    both_register(&a, &b).await;
    let names: Vec<(String, String)> = store.lock().unwrap().keys().cloned().collect();
    assert_eq!(names.len(), 2, "{names:?}");
    // Copy A now reads copy B's registration: what the default prevents.
    let (_, doc) = call(
        &a,
        Method::GET,
        &format!("{VWCS}/auto.kopf.dev"),
        "",
        Json::Null,
    )
    .await;
    assert_eq!(url_of(&doc), "https://team-b.example.net/validate");
}
