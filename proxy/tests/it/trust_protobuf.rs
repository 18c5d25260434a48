//! The front-trust hooks in Kubernetes protobuf, through a real listener:
//! a sidecar with a front trust in front of a fake kube-apiserver that
//! speaks only protobuf, as client-go does for built-in types (Pinniped's
//! kubeclient). The app reads and watches the authentication ConfigMap and
//! gets, creates, updates and lists its APIService; the fake upstream
//! records what reached it.

use crate::common;
use crate::protobuf_support;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use base64::Engine as _;
use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioExecutor;
use prost::Message as _;
use prost_reflect::{DynamicMessage, MapKey, Value};
use protobuf_support::{decode_envelope, frames, md, UNKNOWN, WATCH_EVENT};
use regroup::hooks::front_trust::{FrontTrust, APP_CA_BUNDLE_ANNOTATION};
use regroup::rewrite::protobuf::MAGIC;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// regroup's front serving CA (raw PEM, as protobuf carries it).
const SERVING_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----\nSERVING\n-----END CERTIFICATE-----\n";
/// The app's bundle, and the one it rotates to.
const APP_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----\nAPP\n-----END CERTIFICATE-----\n";
const NEW_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----\nNEW\n-----END CERTIFICATE-----\n";
const CLUSTER_CA: &str = "-----BEGIN CERTIFICATE-----\nCLUSTER\n-----END CERTIFICATE-----\n";
const REGROUP_CLIENT_CA: &str = "-----BEGIN CERTIFICATE-----\nREGROUP\n-----END CERTIFICATE-----\n";

const APISERVICES: &str = "/apis/apiregistration.k8s.io/v1/apiservices";
const CLUSTER_NAME: &str = "v1alpha1.wardle.team1.example.com";
const APP_NAME: &str = "v1alpha1.wardle.example.com";
const METRICS: &str = "v1beta1.metrics.k8s.io";
/// An APIService whose stored bytes are not valid protobuf.
const BROKEN: &str = "v1.broken.example.com";
const AUTH_CM: &str =
    "/api/v1/namespaces/kube-system/configmaps/extension-apiserver-authentication";

fn b64(raw: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// One request the upstream saw.
#[derive(Clone, Debug)]
struct Seen {
    method: Method,
    path: String,
    content_type: Option<String>,
    body: Bytes,
}

/// The fake kube-apiserver: APIServices (enveloped protobuf, cluster
/// names) by name, and what it was asked.
#[derive(Default)]
struct Store {
    apiservices: BTreeMap<String, Vec<u8>>,
    seen: Vec<Seen>,
}

fn message(name: &str) -> DynamicMessage {
    DynamicMessage::new(md(name))
}

fn string(s: &str) -> Value {
    Value::String(s.to_owned())
}

fn string_map(entries: &[(&str, &str)]) -> Value {
    Value::Map(
        entries
            .iter()
            .map(|(k, v)| (MapKey::String((*k).into()), string(v)))
            .collect(),
    )
}

fn envelope(api_version: &str, kind: &str, object: &DynamicMessage) -> Vec<u8> {
    let mut tm = message("k8s.io.apimachinery.pkg.runtime.TypeMeta");
    tm.set_field_by_name("apiVersion", string(api_version));
    tm.set_field_by_name("kind", string(kind));
    let mut u = message(UNKNOWN);
    u.set_field_by_name("typeMeta", Value::Message(tm));
    u.set_field_by_name("raw", Value::Bytes(object.encode_to_vec().into()));
    u.set_field_by_name("contentEncoding", string(""));
    u.set_field_by_name("contentType", string(""));
    [MAGIC, &u.encode_to_vec()].concat()
}

fn object_meta(name: &str, namespace: &str, annotations: &[(&str, &str)]) -> DynamicMessage {
    let mut m = message("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    m.set_field_by_name("name", string(name));
    m.set_field_by_name("namespace", string(namespace));
    m.set_field_by_name("resourceVersion", string("7"));
    if !annotations.is_empty() {
        m.set_field_by_name("annotations", string_map(annotations));
    }
    m
}

fn configmap(name: &str, data: &[(&str, &str)]) -> DynamicMessage {
    let mut cm = message("k8s.io.api.core.v1.ConfigMap");
    cm.set_field_by_name(
        "metadata",
        Value::Message(object_meta(name, "kube-system", &[])),
    );
    cm.set_field_by_name("data", string_map(data));
    cm
}

fn authentication_configmap() -> DynamicMessage {
    configmap(
        "extension-apiserver-authentication",
        &[
            ("client-ca-file", CLUSTER_CA),
            ("requestheader-client-ca-file", CLUSTER_CA),
            ("requestheader-allowed-names", "[\"front-proxy-client\"]"),
            ("requestheader-username-headers", "[\"X-Remote-User\"]"),
        ],
    )
}

fn apiservice(
    name: &str,
    group: &str,
    bundle: &[u8],
    annotations: &[(&str, &str)],
) -> DynamicMessage {
    let mut spec = message("k8s.io.kube_aggregator.pkg.apis.apiregistration.v1.APIServiceSpec");
    spec.set_field_by_name("group", string(group));
    spec.set_field_by_name("version", string(name.split('.').next().unwrap()));
    spec.set_field_by_name("caBundle", Value::Bytes(bundle.to_vec().into()));
    spec.set_field_by_name("groupPriorityMinimum", Value::I32(1000));
    spec.set_field_by_name("versionPriority", Value::I32(15));
    let mut svc = message("k8s.io.kube_aggregator.pkg.apis.apiregistration.v1.APIService");
    svc.set_field_by_name(
        "metadata",
        Value::Message(object_meta(name, "", annotations)),
    );
    svc.set_field_by_name("spec", Value::Message(spec));
    svc
}

fn apiservice_body(svc: &DynamicMessage) -> Vec<u8> {
    envelope("apiregistration.k8s.io/v1", "APIService", svc)
}

fn watch_frame(kind: &str, object: &[u8]) -> Vec<u8> {
    let mut raw = message("k8s.io.apimachinery.pkg.runtime.RawExtension");
    raw.set_field_by_name("raw", Value::Bytes(object.to_vec().into()));
    let mut ev = message(WATCH_EVENT);
    ev.set_field_by_name("type", string(kind));
    ev.set_field_by_name("object", Value::Message(raw));
    let ev = ev.encode_to_vec();
    [&(ev.len() as u32).to_be_bytes()[..], &ev].concat()
}

/// The upstream's watch of kube-system ConfigMaps: the authentication
/// ConfigMap, another one, a bookmark.
fn configmap_watch() -> Vec<u8> {
    let other = configmap("coredns", &[("Corefile", ".:53 {}")]);
    [
        watch_frame(
            "ADDED",
            &envelope("v1", "ConfigMap", &authentication_configmap()),
        ),
        watch_frame("ADDED", &envelope("v1", "ConfigMap", &other)),
        watch_frame(
            "BOOKMARK",
            &envelope("v1", "ConfigMap", &configmap("", &[])),
        ),
    ]
    .concat()
}

/// The enveloped object's name (cluster names).
fn name_of(body: &[u8]) -> String {
    let (_, _, _, obj) = decode_envelope(body);
    let meta = obj.get_field_by_name("metadata").unwrap();
    let meta = meta.as_message().unwrap();
    meta.get_field_by_name("name")
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned()
}

/// kube-apiserver's answers, in protobuf only.
fn serve(
    store: &mut Store,
    seen: Seen,
    query: Option<&str>,
) -> (StatusCode, &'static str, Vec<u8>) {
    store.seen.push(seen.clone());
    let watch = query.is_some_and(|q| q.contains("watch=1"));
    match (&seen.method, seen.path.as_str()) {
        (&Method::GET, AUTH_CM) => (
            StatusCode::OK,
            PROTOBUF,
            envelope("v1", "ConfigMap", &authentication_configmap()),
        ),
        (&Method::GET, "/api/v1/namespaces/kube-system/configmaps") if watch => {
            (StatusCode::OK, WATCH, configmap_watch())
        }
        (&Method::GET, APISERVICES) => {
            let mut list =
                message("k8s.io.kube_aggregator.pkg.apis.apiregistration.v1.APIServiceList");
            let items = store
                .apiservices
                .iter()
                .filter(|(name, _)| *name != BROKEN)
                .map(|(_, b)| Value::Message(decode_envelope(b).3))
                .collect();
            list.set_field_by_name("items", Value::List(items));
            let body = envelope("apiregistration.k8s.io/v1", "APIServiceList", &list);
            (StatusCode::OK, PROTOBUF, body)
        }
        (&Method::POST, APISERVICES) => {
            let name = name_of(&seen.body);
            store.apiservices.insert(name, seen.body.to_vec());
            (StatusCode::CREATED, PROTOBUF, seen.body.to_vec())
        }
        (m, p) if p.starts_with(APISERVICES) => {
            let name = p[APISERVICES.len() + 1..].to_owned();
            match *m {
                Method::GET => match store.apiservices.get(&name) {
                    Some(b) => (StatusCode::OK, PROTOBUF, b.clone()),
                    None => (StatusCode::NOT_FOUND, PROTOBUF, Vec::new()),
                },
                Method::PUT => {
                    store.apiservices.insert(name, seen.body.to_vec());
                    (StatusCode::OK, PROTOBUF, seen.body.to_vec())
                }
                _ => (StatusCode::METHOD_NOT_ALLOWED, PROTOBUF, Vec::new()),
            }
        }
        _ => (StatusCode::NOT_FOUND, PROTOBUF, Vec::new()),
    }
}

async fn upstream(store: Arc<Mutex<Store>>) -> String {
    common::fake_upstream(move |r| {
        let seen = Seen {
            content_type: r.header("content-type"),
            method: r.method,
            path: r.path,
            body: r.body,
        };
        let (code, ct, answer) = serve(&mut store.lock().unwrap(), seen, r.query.as_deref());
        (code, ct.to_owned(), Bytes::from(answer))
    })
    .await
}

/// A sidecar with a front trust in front of the fake upstream, which holds
/// a renamed APIService written through regroup earlier (bundle
/// [`APP_PEM`]), another app's APIService and a broken one.
async fn setup() -> (Arc<Mutex<Store>>, String) {
    let mut store = Store::default();
    let kept = b64(APP_PEM);
    let ours = apiservice(
        CLUSTER_NAME,
        "wardle.team1.example.com",
        SERVING_PEM,
        &[(APP_CA_BUNDLE_ANNOTATION, &kept)],
    );
    store
        .apiservices
        .insert(CLUSTER_NAME.into(), apiservice_body(&ours));
    let metrics = apiservice(METRICS, "metrics.k8s.io", b"OTHER", &[]);
    store
        .apiservices
        .insert(METRICS.into(), apiservice_body(&metrics));
    let mut broken = APP_CA_BUNDLE_ANNOTATION.as_bytes().to_vec();
    broken.extend_from_slice(&[0xff; 8]);
    let mut u = DynamicMessage::decode(md(UNKNOWN), &apiservice_body(&metrics)[4..]).unwrap();
    u.set_field_by_name("raw", Value::Bytes(broken.into()));
    store
        .apiservices
        .insert(BROKEN.into(), [MAGIC, &u.encode_to_vec()].concat());
    let store = Arc::new(Mutex::new(store));
    let server = upstream(store.clone()).await;
    let trust = FrontTrust {
        client_ca_pem: REGROUP_CLIENT_CA.into(),
        client_cn: "regroup-front-proxy".into(),
        serving_ca_bundle: b64(SERVING_PEM),
    };
    let addr = common::sidecar(server, Some(trust)).await;
    (store, format!("http://{addr}"))
}

/// A request as client-go sends it for a built-in type: protobuf both ways.
async fn call(
    base: &str,
    method: Method,
    path: &str,
    body: Vec<u8>,
) -> (StatusCode, String, Bytes) {
    let client = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
        .build_http::<Full<Bytes>>();
    let mut req = Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("accept", format!("{PROTOBUF}, application/json"))
        .header("authorization", "Bearer app-token");
    if !body.is_empty() {
        req = req.header("content-type", PROTOBUF);
    }
    let resp = client
        .request(req.body(Full::new(Bytes::from(body))).unwrap())
        .await
        .unwrap();
    let code = resp.status();
    let ct = resp
        .headers()
        .get("content-type")
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    if let Some(len) = resp.headers().get("content-length") {
        let len: usize = len.to_str().unwrap().parse().unwrap();
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert_eq!(len, body.len(), "Content-Length matches the amended body");
        return (code, ct, body);
    }
    (
        code,
        ct,
        resp.into_body().collect().await.unwrap().to_bytes(),
    )
}

fn data(cm: &DynamicMessage) -> BTreeMap<String, String> {
    cm.get_field_by_name("data")
        .unwrap()
        .as_map()
        .unwrap()
        .iter()
        .map(|(k, v)| match k {
            MapKey::String(k) => (k.clone(), v.as_str().unwrap().to_owned()),
            _ => panic!("string keys"),
        })
        .collect()
}

/// (name, spec.group, spec.caBundle, annotations) of an APIService.
fn view(svc: &DynamicMessage) -> (String, String, Vec<u8>, BTreeMap<String, String>) {
    let meta = svc.get_field_by_name("metadata").unwrap();
    let meta = meta.as_message().unwrap();
    let spec = svc.get_field_by_name("spec").unwrap();
    let spec = spec.as_message().unwrap();
    let annotations = meta
        .get_field_by_name("annotations")
        .unwrap()
        .as_map()
        .unwrap()
        .iter()
        .map(|(k, v)| match k {
            MapKey::String(k) => (k.clone(), v.as_str().unwrap().to_owned()),
            _ => panic!("string keys"),
        })
        .collect();
    (
        meta.get_field_by_name("name")
            .unwrap()
            .as_str()
            .unwrap()
            .into(),
        spec.get_field_by_name("group")
            .unwrap()
            .as_str()
            .unwrap()
            .into(),
        spec.get_field_by_name("caBundle")
            .unwrap()
            .as_bytes()
            .unwrap()
            .to_vec(),
        annotations,
    )
}

/// What the app must see of its APIService: its names, its bundle, no
/// annotation of regroup's.
fn assert_app_view(svc: &DynamicMessage, bundle: &[u8]) {
    let (name, group, ca, annotations) = view(svc);
    assert_eq!(name, APP_NAME);
    assert_eq!(group, "wardle.example.com");
    assert_eq!(ca, bundle);
    assert!(annotations.is_empty(), "{annotations:?}");
}

/// What the cluster must hold: regroup's CA for the aggregator, the app's
/// bundle aside (base64, as JSON writes it).
fn assert_cluster_form(body: &[u8], app_bundle: &[u8]) {
    let (av, kind, _, svc) = decode_envelope(body);
    assert_eq!(
        (av.as_str(), kind.as_str()),
        ("apiregistration.k8s.io/v1", "APIService")
    );
    let (name, group, ca, annotations) = view(&svc);
    assert_eq!(name, CLUSTER_NAME);
    assert_eq!(group, "wardle.team1.example.com");
    assert_eq!(ca, SERVING_PEM);
    assert_eq!(annotations[APP_CA_BUNDLE_ANNOTATION], b64(app_bundle));
}

#[tokio::test]
async fn the_app_reads_the_authentication_configmap_amended_in_protobuf() {
    let (_, base) = setup().await;
    let (code, ct, body) = call(&base, Method::GET, AUTH_CM, Vec::new()).await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(ct, PROTOBUF);
    let (_, kind, _, cm) = decode_envelope(&body);
    assert_eq!(kind, "ConfigMap");
    let data = data(&cm);
    assert_eq!(
        data["requestheader-client-ca-file"],
        format!("{CLUSTER_CA}{REGROUP_CLIENT_CA}")
    );
    assert_eq!(
        data["requestheader-allowed-names"],
        "[\"front-proxy-client\",\"regroup-front-proxy\"]"
    );
    // The cluster's own client CA is not regroup's business.
    assert_eq!(data["client-ca-file"], CLUSTER_CA);
    assert_eq!(
        data["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
}

#[tokio::test]
async fn the_app_watches_the_authentication_configmap_amended_in_protobuf() {
    let (_, base) = setup().await;
    let (code, ct, body) = call(
        &base,
        Method::GET,
        "/api/v1/namespaces/kube-system/configmaps?watch=1&fieldSelector=metadata.name%3Dextension-apiserver-authentication",
        Vec::new(),
    )
    .await;
    assert_eq!(code, StatusCode::OK);
    assert_eq!(ct, WATCH);
    let got = frames(&body);
    let sent = configmap_watch();
    let sent = frames(&sent);
    assert_eq!(got.len(), 3);
    let ev = DynamicMessage::decode(md(WATCH_EVENT), got[0]).unwrap();
    let raw = ev.get_field_by_name("object").unwrap();
    let raw = raw.as_message().unwrap().get_field_by_name("raw").unwrap();
    let (_, _, _, cm) = decode_envelope(raw.as_bytes().unwrap());
    let data = data(&cm);
    assert!(data["requestheader-client-ca-file"].ends_with(REGROUP_CLIENT_CA));
    assert!(data["requestheader-allowed-names"].contains("regroup-front-proxy"));
    // The other ConfigMap and the bookmark, byte for byte.
    assert_eq!(got[1], sent[1]);
    assert_eq!(got[2], sent[2]);
}

#[tokio::test]
async fn the_app_creates_updates_and_reads_its_apiservice_in_protobuf() {
    let (store, base) = setup().await;
    store.lock().unwrap().apiservices.remove(CLUSTER_NAME);

    // Create: the cluster gets regroup's CA, the app sees its own.
    let created = apiservice(APP_NAME, "wardle.example.com", APP_PEM, &[]);
    let (code, ct, body) = call(&base, Method::POST, APISERVICES, apiservice_body(&created)).await;
    assert_eq!(
        code,
        StatusCode::CREATED,
        "{}",
        String::from_utf8_lossy(&body)
    );
    assert_eq!(ct, PROTOBUF);
    assert_app_view(&decode_envelope(&body).3, APP_PEM);
    {
        let s = store.lock().unwrap();
        let post = s.seen.last().unwrap();
        assert_eq!(
            (post.method.clone(), post.path.as_str()),
            (Method::POST, APISERVICES)
        );
        assert_eq!(post.content_type.as_deref(), Some(PROTOBUF));
        assert_cluster_form(&post.body, APP_PEM);
    }

    // Get, by the app's name.
    let path = format!("{APISERVICES}/{APP_NAME}");
    let (code, _, body) = call(&base, Method::GET, &path, Vec::new()).await;
    assert_eq!(code, StatusCode::OK);
    let read = decode_envelope(&body).3;
    assert_app_view(&read, APP_PEM);
    assert_eq!(
        store.lock().unwrap().seen.last().unwrap().path,
        format!("{APISERVICES}/{CLUSTER_NAME}")
    );

    // Update what it read with a rotated bundle.
    let mut rotated = read.clone();
    if let Some(Value::Message(spec)) = rotated.get_field_by_name_mut("spec") {
        spec.set_field_by_name("caBundle", Value::Bytes(NEW_PEM.to_vec().into()));
    }
    let (code, _, body) = call(&base, Method::PUT, &path, apiservice_body(&rotated)).await;
    assert_eq!(code, StatusCode::OK, "{}", String::from_utf8_lossy(&body));
    assert_app_view(&decode_envelope(&body).3, NEW_PEM);
    {
        let s = store.lock().unwrap();
        let put = s.seen.last().unwrap();
        assert_eq!(put.method, Method::PUT);
        assert_cluster_form(&put.body, NEW_PEM);
    }

    // List: the app's APIService shows its bundle, the other is untouched.
    let (code, _, body) = call(&base, Method::GET, APISERVICES, Vec::new()).await;
    assert_eq!(code, StatusCode::OK);
    let (_, kind, _, list) = decode_envelope(&body);
    assert_eq!(kind, "APIServiceList");
    let items = list.get_field_by_name("items").unwrap();
    let items: Vec<_> = items
        .as_list()
        .unwrap()
        .iter()
        .map(|i| i.as_message().unwrap().clone())
        .collect();
    assert_eq!(items.len(), 2);
    let ours = items.iter().find(|i| view(i).0 == APP_NAME).unwrap();
    assert_app_view(ours, NEW_PEM);
    let metrics = items.iter().find(|i| view(i).0 == METRICS).unwrap();
    assert_eq!(view(metrics).2, b"OTHER");
    let metrics_bytes = decode_envelope(&store.lock().unwrap().apiservices[METRICS])
        .3
        .encode_to_vec();
    assert!(
        body.windows(metrics_bytes.len())
            .any(|w| w == metrics_bytes),
        "the other item is spliced through as it came"
    );
}

#[tokio::test]
async fn other_apiservices_are_written_and_read_as_they_are() {
    let (store, base) = setup().await;
    let metrics = apiservice(METRICS, "metrics.k8s.io", b"METRICS-CA", &[]);
    let sent = apiservice_body(&metrics);
    let (code, _, body) = call(&base, Method::POST, APISERVICES, sent.clone()).await;
    assert_eq!(code, StatusCode::CREATED);
    assert_eq!(store.lock().unwrap().seen.last().unwrap().body, sent);
    assert_eq!(body, sent);
    let path = format!("{APISERVICES}/{METRICS}");
    let (_, _, body) = call(&base, Method::GET, &path, Vec::new()).await;
    assert_eq!(body, sent);
}

#[tokio::test]
async fn undecodable_protobuf_is_400_from_the_app_and_502_from_the_cluster() {
    let (store, base) = setup().await;
    // An APIService whose object bytes are not an APIService (no mapped
    // name in them, so only the trust hook reads them).
    let mut u = DynamicMessage::decode(
        md(UNKNOWN),
        &apiservice_body(&apiservice(METRICS, "metrics.k8s.io", b"X", &[]))[4..],
    )
    .unwrap();
    u.set_field_by_name("raw", Value::Bytes(vec![0x12, 0x7f, 0x0a].into()));
    let body = [MAGIC, &u.encode_to_vec()].concat();
    let before = store.lock().unwrap().seen.len();
    let (code, ct, answer) = call(&base, Method::POST, APISERVICES, body).await;
    assert_eq!(code, StatusCode::BAD_REQUEST);
    assert!(ct.starts_with("application/json"), "{ct}");
    let status: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(status["code"], 400);
    assert_eq!(store.lock().unwrap().seen.len(), before, "nothing written");

    let (code, _, answer) = call(
        &base,
        Method::GET,
        &format!("{APISERVICES}/{BROKEN}"),
        Vec::new(),
    )
    .await;
    assert_eq!(code, StatusCode::BAD_GATEWAY);
    let status: serde_json::Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(status["code"], 502);
}
