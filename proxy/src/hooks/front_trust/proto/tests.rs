//! The protobuf trust hooks on the bytes kube-apiserver 1.24 sent
//! (`testdata/kube-1.24/renamed`) and on objects encoded with regroup's
//! descriptors.

use base64::Engine as _;
use prost_reflect::prost::Message as _;
use prost_reflect::{DynamicMessage, MapKey, ReflectMessage as _, Value};
use serde_json::json;

use super::*;
use crate::hooks::front_trust::tests::map;
use crate::rewrite::protobuf::descriptor_pool;

/// The PEM of regroup's front serving CA (raw, as protobuf carries it).
const SERVING_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----\nSERVING\n-----END CERTIFICATE-----\n";
/// The app's own bundle.
const APP_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----\nAPP\n-----END CERTIFICATE-----\n";
const CLUSTER_CA: &str = "-----BEGIN CERTIFICATE-----\nCLUSTER\n-----END CERTIFICATE-----\n";

fn b64(raw: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(raw)
}

fn trust() -> FrontTrust {
    FrontTrust {
        client_ca_pem: "-----BEGIN CERTIFICATE-----\nREGROUP\n-----END CERTIFICATE-----\n".into(),
        client_cn: "regroup-front-proxy".into(),
        serving_ca_bundle: b64(SERVING_PEM),
    }
}

fn fixture(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../testdata/kube-1.24/renamed/{name}/response.body",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn fixture_request(name: &str) -> Vec<u8> {
    let path = format!(
        "{}/../testdata/kube-1.24/renamed/{name}/request.body",
        env!("CARGO_MANIFEST_DIR")
    );
    std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

fn message(name: &str) -> DynamicMessage {
    DynamicMessage::new(descriptor_pool().get_message_by_name(name).unwrap())
}

/// `k8s\0` + runtime.Unknown, as kube-apiserver writes it (empty
/// contentEncoding and contentType included).
fn envelope(api_version: &str, kind: &str, raw: &[u8]) -> Vec<u8> {
    let mut tm = message("k8s.io.apimachinery.pkg.runtime.TypeMeta");
    tm.set_field_by_name("apiVersion", Value::String(api_version.into()));
    tm.set_field_by_name("kind", Value::String(kind.into()));
    let mut u = message("k8s.io.apimachinery.pkg.runtime.Unknown");
    u.set_field_by_name("typeMeta", Value::Message(tm));
    u.set_field_by_name("raw", Value::Bytes(raw.to_vec().into()));
    u.set_field_by_name("contentEncoding", Value::String(String::new()));
    u.set_field_by_name("contentType", Value::String(String::new()));
    [MAGIC, &u.encode_to_vec()].concat()
}

/// The object in an envelope, decoded with its message; and the envelope's
/// type.
fn open(body: &[u8]) -> (String, String, DynamicMessage) {
    let u = DynamicMessage::decode(
        descriptor_pool()
            .get_message_by_name("k8s.io.apimachinery.pkg.runtime.Unknown")
            .unwrap(),
        body.strip_prefix(MAGIC).unwrap(),
    )
    .unwrap();
    let tm = u.get_field_by_name("typeMeta").unwrap();
    let tm = tm.as_message().unwrap();
    let av = tm
        .get_field_by_name("apiVersion")
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let kind = tm
        .get_field_by_name("kind")
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let (group, version) = av.split_once('/').unwrap_or(("", &av));
    let desc = message_for(group, version, &kind).unwrap();
    let raw = u
        .get_field_by_name("raw")
        .unwrap()
        .as_bytes()
        .unwrap()
        .clone();
    (av, kind, DynamicMessage::decode(desc, raw).unwrap())
}

/// `m` as it encodes (set-but-empty maps and lists dropped), to compare.
fn canon(m: &DynamicMessage) -> DynamicMessage {
    DynamicMessage::decode(m.descriptor(), m.encode_to_vec().as_slice()).unwrap()
}

/// `m.metadata`.
fn meta(m: &DynamicMessage) -> DynamicMessage {
    m.get_field_by_name("metadata")
        .unwrap()
        .as_message()
        .unwrap()
        .clone()
}

fn spec(m: &DynamicMessage) -> DynamicMessage {
    m.get_field_by_name("spec")
        .unwrap()
        .as_message()
        .unwrap()
        .clone()
}

fn ca_bundle(m: &DynamicMessage) -> Vec<u8> {
    spec(m)
        .get_field_by_name("caBundle")
        .unwrap()
        .as_bytes()
        .unwrap()
        .to_vec()
}

fn annotation(m: &DynamicMessage) -> Option<String> {
    let meta = meta(m);
    let ann = meta.get_field_by_name("annotations").unwrap();
    ann.as_map()
        .unwrap()
        .get(&MapKey::String(APP_CA_BUNDLE_ANNOTATION.into()))
        .map(|v| v.as_str().unwrap().to_owned())
}

fn string_map(m: &DynamicMessage, field: &str) -> std::collections::BTreeMap<String, String> {
    m.get_field_by_name(field)
        .unwrap()
        .as_map()
        .unwrap()
        .iter()
        .map(|(k, v)| {
            let MapKey::String(k) = k else { panic!() };
            (k.clone(), v.as_str().unwrap().to_owned())
        })
        .collect()
}

fn set_string_map(m: &mut DynamicMessage, field: &str, entries: &[(&str, &str)]) {
    let map = entries
        .iter()
        .map(|(k, v)| (MapKey::String((*k).into()), Value::String((*v).into())))
        .collect();
    m.set_field_by_name(field, Value::Map(map));
}

/// The captured APIService (cluster names) as the app writes it: `bundle`
/// in `spec.caBundle`, the request body of a create.
fn app_written_apiservice(bundle: &[u8]) -> (DynamicMessage, Vec<u8>) {
    let (_, _, mut svc) = open(&fixture("096-get-apiservice-protobuf"));
    if let Some(Value::Message(spec)) = svc.get_field_by_name_mut("spec") {
        spec.set_field_by_name("caBundle", Value::Bytes(bundle.to_vec().into()));
    }
    let body = envelope(
        "apiregistration.k8s.io/v1",
        "APIService",
        &svc.encode_to_vec(),
    );
    (svc, body)
}

/// The authentication ConfigMap, built on the captured ConfigMap `alpha-cm`
/// (so its metadata is real: labels, ownerReferences, managedFields).
fn authentication_configmap(allowed_names: &str) -> DynamicMessage {
    let (_, _, mut cm) = open(&fixture("047-get-configmap-protobuf"));
    if let Some(Value::Message(meta)) = cm.get_field_by_name_mut("metadata") {
        meta.set_field_by_name("name", Value::String(AUTHENTICATION_CONFIGMAP.into()));
        meta.set_field_by_name("namespace", Value::String("kube-system".into()));
    }
    set_string_map(
        &mut cm,
        "data",
        &[
            ("requestheader-client-ca-file", CLUSTER_CA),
            ("requestheader-allowed-names", allowed_names),
            ("requestheader-username-headers", "[\"X-Remote-User\"]"),
            ("client-ca-file", CLUSTER_CA),
        ],
    );
    cm
}

#[test]
fn captured_bodies_without_anything_to_amend_are_left_byte_for_byte() {
    let t = trust();
    let dir = format!(
        "{}/../testdata/kube-1.24/renamed",
        env!("CARGO_MANIFEST_DIR")
    );
    let mut seen = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let case = entry.unwrap().path();
        let exchange: serde_json::Value =
            serde_json::from_slice(&std::fs::read(case.join("exchange.json")).unwrap()).unwrap();
        let ct = exchange["response_headers"]["Content-Type"]
            .as_str()
            .unwrap_or_default();
        let body = std::fs::read(case.join("response.body")).unwrap_or_default();
        if ct == "application/vnd.kubernetes.protobuf" {
            assert_eq!(t.proto_to_app(&body).unwrap(), None, "{case:?}");
            seen += 1;
        } else if ct == "application/vnd.kubernetes.protobuf;stream=watch" {
            let mut rest = &body[..];
            while rest.len() >= 4 {
                let n = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
                assert_eq!(
                    t.proto_watch_event_to_app(&rest[4..4 + n]).unwrap(),
                    None,
                    "{case:?}"
                );
                rest = &rest[4 + n..];
                seen += 1;
            }
        }
        if exchange["request_headers"]["Content-Type"] == "application/vnd.kubernetes.protobuf" {
            let req = std::fs::read(case.join("request.body")).unwrap();
            assert_eq!(t.proto_to_cluster(&req, &map()).unwrap(), None, "{case:?}");
        }
    }
    assert!(seen > 50, "only {seen} protobuf bodies found");
    // Including those the hooks decode: APIServices without the annotation.
    for name in [
        "096-get-apiservice-protobuf",
        "172-list-apiservice-protobuf",
    ] {
        assert_eq!(t.proto_to_app(&fixture(name)).unwrap(), None);
    }
}

#[test]
fn the_app_sees_regroups_ca_and_name_in_the_authentication_configmap() {
    let t = trust();
    let cm = authentication_configmap("[\"front-proxy-client\"]");
    let body = envelope("v1", "ConfigMap", &cm.encode_to_vec());
    let out = t.proto_to_app(&body).unwrap().expect("amended");
    let (av, kind, got) = open(&out);
    assert_eq!((av.as_str(), kind.as_str()), ("v1", "ConfigMap"));
    let data = string_map(&got, "data");
    let ca = &data["requestheader-client-ca-file"];
    assert!(ca.starts_with(CLUSTER_CA), "{ca}");
    assert!(ca.ends_with(&t.client_ca_pem), "{ca}");
    assert_eq!(
        data["requestheader-allowed-names"],
        "[\"front-proxy-client\",\"regroup-front-proxy\"]"
    );
    // The rest as it was: other entries, metadata (managedFields, owner).
    assert_eq!(data["client-ca-file"], CLUSTER_CA);
    assert_eq!(
        data["requestheader-username-headers"],
        "[\"X-Remote-User\"]"
    );
    assert_eq!(canon(&meta(&got)), canon(&meta(&cm)));
    // The same amendment as JSON's.
    let mut as_json = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": AUTHENTICATION_CONFIGMAP, "namespace": "kube-system"},
        "data": string_map(&cm, "data")});
    assert!(t.to_app(&mut as_json));
    assert_eq!(
        serde_json::to_value(&data).unwrap(),
        as_json["data"],
        "protobuf and JSON amend alike"
    );
    // Idempotent.
    assert_eq!(t.proto_to_app(&out).unwrap(), None);
    // Any name allowed: the list stays empty, the CA is still appended.
    let any = authentication_configmap("[]");
    let out = t
        .proto_to_app(&envelope("v1", "ConfigMap", &any.encode_to_vec()))
        .unwrap()
        .expect("CA appended");
    let data = string_map(&open(&out).2, "data");
    assert_eq!(data["requestheader-allowed-names"], "[]");
    assert!(data["requestheader-client-ca-file"].contains("REGROUP"));
}

#[test]
fn only_the_authentication_configmap_is_amended() {
    let t = trust();
    // The same name in another namespace, and another name in kube-system.
    for (ns, name) in [
        ("renamed", AUTHENTICATION_CONFIGMAP),
        ("kube-system", "extension-apiserver-authentication-copy"),
    ] {
        let mut cm = authentication_configmap("[\"a\"]");
        if let Some(Value::Message(meta)) = cm.get_field_by_name_mut("metadata") {
            meta.set_field_by_name("name", Value::String(name.into()));
            meta.set_field_by_name("namespace", Value::String(ns.into()));
        }
        let body = envelope("v1", "ConfigMap", &cm.encode_to_vec());
        assert_eq!(t.proto_to_app(&body).unwrap(), None, "{ns}/{name}");
    }
    // Requests (the app writing ConfigMaps) are never amended.
    let cm = authentication_configmap("[\"a\"]");
    let body = envelope("v1", "ConfigMap", &cm.encode_to_vec());
    assert_eq!(t.proto_to_cluster(&body, &map()).unwrap(), None);
}

#[test]
fn in_a_configmap_list_only_the_authentication_item_changes() {
    let t = trust();
    // The captured list (alpha-cm, beta-cm), the authentication ConfigMap
    // appended as a third item.
    let captured = fixture("127-list-configmap-protobuf");
    let (_, kind, mut list) = open(&captured);
    assert_eq!(kind, "ConfigMapList");
    let cm = authentication_configmap("[\"front-proxy-client\"]");
    let Some(Value::List(items)) = list.get_field_by_name_mut("items") else {
        panic!("items")
    };
    let others: Vec<Vec<u8>> = items
        .iter()
        .map(|i| i.as_message().unwrap().encode_to_vec())
        .collect();
    assert!(!others.is_empty());
    items.push(Value::Message(cm));
    let body = envelope("v1", "ConfigMapList", &list.encode_to_vec());
    let out = t.proto_to_app(&body).unwrap().expect("amended");
    let (_, _, got) = open(&out);
    let items = got.get_field_by_name("items").unwrap();
    let items = items.as_list().unwrap();
    let data = string_map(items.last().unwrap().as_message().unwrap(), "data");
    assert!(data["requestheader-allowed-names"].contains("regroup-front-proxy"));
    // The other items' bytes are spliced through as they were.
    for other in &others {
        assert!(out.windows(other.len()).any(|w| w == other.as_slice()));
    }
    // The list's metadata too.
    assert_eq!(
        got.get_field_by_name("metadata"),
        list.get_field_by_name("metadata")
    );
}

#[test]
fn the_cluster_stores_regroups_serving_ca_and_the_app_reads_back_its_own() {
    let t = trust();
    let (app_view, body) = app_written_apiservice(APP_PEM);
    // Create / update: regroup's CA for the aggregator, the app's aside.
    let stored = t
        .proto_to_cluster(&body, &map())
        .unwrap()
        .expect("substituted");
    let (av, kind, cluster) = open(&stored);
    assert_eq!(
        (av.as_str(), kind.as_str()),
        ("apiregistration.k8s.io/v1", "APIService")
    );
    assert_eq!(ca_bundle(&cluster), SERVING_PEM);
    assert_eq!(annotation(&cluster).as_deref(), Some(b64(APP_PEM).as_str()));
    // Written again as it is stored (an update of what was read): no change.
    assert_eq!(t.proto_to_cluster(&stored, &map()).unwrap(), None);
    // Read back (get): the app's bundle, no annotation, everything else
    // (status, service: fields regroup doesn't declare) as it was.
    let read = t.proto_to_app(&stored).unwrap().expect("restored");
    let (_, _, seen) = open(&read);
    assert_eq!(canon(&seen), canon(&app_view));
    assert_eq!(ca_bundle(&seen), APP_PEM);
    assert!(meta(&seen)
        .get_field_by_name("annotations")
        .unwrap()
        .as_map()
        .unwrap()
        .is_empty());
    assert!(
        seen.unknown_fields().count() > 0,
        "status is kept as an unknown field"
    );
    // Other annotations stay.
    let mut annotated = cluster.clone();
    if let Some(Value::Message(m)) = annotated.get_field_by_name_mut("metadata") {
        if let Some(Value::Map(a)) = m.get_field_by_name_mut("annotations") {
            a.insert(MapKey::String("keep".into()), Value::String("me".into()));
        }
    }
    let body = envelope(
        "apiregistration.k8s.io/v1",
        "APIService",
        &annotated.encode_to_vec(),
    );
    let (_, _, seen) = open(&t.proto_to_app(&body).unwrap().unwrap());
    assert_eq!(string_map(&meta(&seen), "annotations").len(), 1);
    assert_eq!(ca_bundle(&seen), APP_PEM);
}

#[test]
fn apiservices_regroup_does_not_front_are_written_as_they_are() {
    let t = trust();
    // Another group (not renamed).
    let (mut svc, _) = app_written_apiservice(APP_PEM);
    if let Some(Value::Message(s)) = svc.get_field_by_name_mut("spec") {
        s.set_field_by_name("group", Value::String("metrics.k8s.io".into()));
    }
    if let Some(Value::Message(m)) = svc.get_field_by_name_mut("metadata") {
        m.set_field_by_name("name", Value::String("v1beta1.metrics.k8s.io".into()));
    }
    let body = envelope(
        "apiregistration.k8s.io/v1",
        "APIService",
        &svc.encode_to_vec(),
    );
    assert_eq!(t.proto_to_cluster(&body, &map()).unwrap(), None);
    // No caBundle (insecureSkipTLSVerify).
    let (mut svc, _) = app_written_apiservice(APP_PEM);
    if let Some(Value::Message(s)) = svc.get_field_by_name_mut("spec") {
        s.clear_field_by_name("caBundle");
    }
    let body = envelope(
        "apiregistration.k8s.io/v1",
        "APIService",
        &svc.encode_to_vec(),
    );
    assert_eq!(t.proto_to_cluster(&body, &map()).unwrap(), None);
    // The serving CA already (written back as read by someone else).
    let (_, body) = app_written_apiservice(SERVING_PEM);
    assert_eq!(t.proto_to_cluster(&body, &map()).unwrap(), None);
}

#[test]
fn json_and_protobuf_agree_on_the_annotation() {
    let t = trust();
    // Written in protobuf, read in JSON: the JSON reader gets the app's
    // base64 bundle back.
    let (_, body) = app_written_apiservice(APP_PEM);
    let (_, _, cluster) = open(&t.proto_to_cluster(&body, &map()).unwrap().unwrap());
    let kept = annotation(&cluster).unwrap();
    let mut as_json = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.wardle.team1.example.com",
            "annotations": {APP_CA_BUNDLE_ANNOTATION: kept}},
        "spec": {"group": "wardle.team1.example.com", "caBundle": t.serving_ca_bundle}});
    assert!(t.to_app(&mut as_json));
    assert_eq!(as_json["spec"]["caBundle"], b64(APP_PEM));
    // Written in JSON, read in protobuf: the protobuf reader gets the raw
    // bundle back.
    let mut written = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.wardle.team1.example.com"},
        "spec": {"group": "wardle.team1.example.com", "caBundle": b64(APP_PEM)}});
    assert!(t.to_cluster(&mut written, &map(), None));
    let json_kept = written["metadata"]["annotations"][APP_CA_BUNDLE_ANNOTATION]
        .as_str()
        .unwrap();
    assert_eq!(json_kept, kept, "both encodings keep the same value");
    let mut stored = cluster.clone();
    if let Some(Value::Message(m)) = stored.get_field_by_name_mut("metadata") {
        if let Some(Value::Map(a)) = m.get_field_by_name_mut("annotations") {
            a.insert(
                MapKey::String(APP_CA_BUNDLE_ANNOTATION.into()),
                Value::String(json_kept.into()),
            );
        }
    }
    let body = envelope(
        "apiregistration.k8s.io/v1",
        "APIService",
        &stored.encode_to_vec(),
    );
    let (_, _, seen) = open(&t.proto_to_app(&body).unwrap().unwrap());
    assert_eq!(ca_bundle(&seen), APP_PEM);
    // A JSON writer's base64 with line breaks (Go reads it) too.
    let wrapped = format!("{}\n{}", &kept[..8], &kept[8..]);
    assert_eq!(bundle_from_annotation(&wrapped).unwrap(), APP_PEM);
}

#[test]
fn a_kept_bundle_that_is_not_base64_is_shown_as_stored() {
    let t = trust();
    let (_, body) = app_written_apiservice(APP_PEM);
    let (_, _, mut cluster) = open(&t.proto_to_cluster(&body, &map()).unwrap().unwrap());
    if let Some(Value::Message(m)) = cluster.get_field_by_name_mut("metadata") {
        set_string_map(
            m,
            "annotations",
            &[(APP_CA_BUNDLE_ANNOTATION, "not base64!")],
        );
    }
    let body = envelope(
        "apiregistration.k8s.io/v1",
        "APIService",
        &cluster.encode_to_vec(),
    );
    assert_eq!(t.proto_to_app(&body).unwrap(), None);
}

#[test]
fn apiservice_lists_show_the_app_its_bundle_item_by_item() {
    let t = trust();
    let captured = fixture("172-list-apiservice-protobuf");
    let (_, kind, mut list) = open(&captured);
    assert_eq!(kind, "APIServiceList");
    let (_, body) = app_written_apiservice(APP_PEM);
    let (_, _, cluster) = open(&t.proto_to_cluster(&body, &map()).unwrap().unwrap());
    let Some(Value::List(items)) = list.get_field_by_name_mut("items") else {
        panic!("items")
    };
    let other = items[0].as_message().unwrap().encode_to_vec();
    items.push(Value::Message(cluster));
    let body = envelope(
        "apiregistration.k8s.io/v1",
        "APIServiceList",
        &list.encode_to_vec(),
    );
    let out = t.proto_to_app(&body).unwrap().expect("restored");
    let (_, _, got) = open(&out);
    let items = got.get_field_by_name("items").unwrap();
    let items = items.as_list().unwrap();
    assert_eq!(items.len(), 2);
    assert_eq!(ca_bundle(items[1].as_message().unwrap()), APP_PEM);
    assert!(out.windows(other.len()).any(|w| w == other.as_slice()));
}

/// A protobuf watch frame's event (without the length prefix).
fn watch_event(kind: &str, object: &[u8]) -> Vec<u8> {
    let mut raw = message("k8s.io.apimachinery.pkg.runtime.RawExtension");
    raw.set_field_by_name("raw", Value::Bytes(object.to_vec().into()));
    let mut ev = message("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent");
    ev.set_field_by_name("type", Value::String(kind.into()));
    ev.set_field_by_name("object", Value::Message(raw));
    ev.encode_to_vec()
}

fn event_object(event: &[u8]) -> (String, Vec<u8>) {
    let ev = DynamicMessage::decode(
        descriptor_pool()
            .get_message_by_name("k8s.io.apimachinery.pkg.apis.meta.v1.WatchEvent")
            .unwrap(),
        event,
    )
    .unwrap();
    let ty = ev
        .get_field_by_name("type")
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let obj = ev.get_field_by_name("object").unwrap();
    let raw = obj.as_message().unwrap().get_field_by_name("raw").unwrap();
    (ty, raw.as_bytes().unwrap().to_vec())
}

#[test]
fn watch_events_are_amended_too() {
    let t = trust();
    // The ConfigMap (the app's watch of kube-system configmaps).
    let cm = authentication_configmap("[\"front-proxy-client\"]");
    let ev = watch_event(
        "MODIFIED",
        &envelope("v1", "ConfigMap", &cm.encode_to_vec()),
    );
    let out = t.proto_watch_event_to_app(&ev).unwrap().expect("amended");
    let (ty, object) = event_object(&out);
    assert_eq!(ty, "MODIFIED");
    let data = string_map(&open(&object).2, "data");
    assert!(data["requestheader-allowed-names"].contains("regroup-front-proxy"));
    // An APIService.
    let (_, body) = app_written_apiservice(APP_PEM);
    let stored = t.proto_to_cluster(&body, &map()).unwrap().unwrap();
    let out = t
        .proto_watch_event_to_app(&watch_event("ADDED", &stored))
        .unwrap()
        .expect("restored");
    assert_eq!(ca_bundle(&open(&event_object(&out).1).2), APP_PEM);
    // An enveloped WatchEvent is read through its envelope.
    let enveloped = envelope(
        "meta.k8s.io/v1",
        "WatchEvent",
        &watch_event("ADDED", &stored),
    );
    let out = t.proto_watch_event_to_app(&enveloped).unwrap().unwrap();
    let (_, _, ev) = open(&out);
    let raw = ev.get_field_by_name("object").unwrap();
    let raw = raw.as_message().unwrap().get_field_by_name("raw").unwrap();
    assert_eq!(ca_bundle(&open(raw.as_bytes().unwrap()).2), APP_PEM);
    // Bookmarks and other objects stay byte for byte.
    let other = watch_event("BOOKMARK", &fixture("047-get-configmap-protobuf"));
    assert_eq!(t.proto_watch_event_to_app(&other).unwrap(), None);
}

#[test]
fn bodies_that_are_not_kubernetes_protobuf_are_errors_never_panics() {
    let t = trust();
    let (_, body) = app_written_apiservice(APP_PEM);
    // Missing magic, truncated at every length, garbage raw.
    assert!(t
        .proto_to_cluster(b"{\"kind\":\"APIService\"}", &map())
        .is_err());
    for n in 1..body.len() {
        let _ = t.proto_to_cluster(&body[..n], &map());
        let _ = t.proto_to_app(&body[..n]);
        let _ = t.proto_watch_event_to_app(&body[..n]);
    }
    assert!(t.proto_to_cluster(&body[..body.len() - 1], &map()).is_err());
    let garbage = envelope(
        "apiregistration.k8s.io/v1",
        "APIService",
        &[0x12, 0x05, 0x0a],
    );
    assert!(t.proto_to_cluster(&garbage, &map()).is_err());
    let mut hostile = APP_CA_BUNDLE_ANNOTATION.as_bytes().to_vec();
    hostile.extend_from_slice(&[0xff; 16]);
    let garbage = envelope("apiregistration.k8s.io/v1", "APIService", &hostile);
    assert!(t.proto_to_app(&garbage).is_err());
    // An unsupported envelope encoding on an object regroup must read.
    let mut u = message("k8s.io.apimachinery.pkg.runtime.Unknown");
    let mut tm = message("k8s.io.apimachinery.pkg.runtime.TypeMeta");
    tm.set_field_by_name(
        "apiVersion",
        Value::String("apiregistration.k8s.io/v1".into()),
    );
    tm.set_field_by_name("kind", Value::String("APIService".into()));
    u.set_field_by_name("typeMeta", Value::Message(tm));
    u.set_field_by_name("contentEncoding", Value::String("gzip".into()));
    let gz = [MAGIC, &u.encode_to_vec()].concat();
    assert!(t.proto_to_cluster(&gz, &map()).is_err());
    // Nesting is bounded.
    let mut deep = envelope("v1", "ConfigMap", &[]);
    for _ in 0..10 {
        deep = envelope("meta.k8s.io/v1", "WatchEvent", &watch_event("ADDED", &deep));
    }
    assert!(t.proto_to_app(&deep).is_err());
    // No body (a DELETE without options) is nothing to change.
    assert_eq!(t.proto_to_cluster(&[], &map()).unwrap(), None);
    // The captured protobuf requests other than APIServices pass.
    let cm = fixture_request("212-create-configmap-protobuf");
    assert_eq!(t.proto_to_cluster(&cm, &map()).unwrap(), None);
}

/// A `v1 List` (`meta/v1.List`: items are `RawExtension`s holding
/// enveloped objects, or JSON).
fn v1_list(items: &[Vec<u8>]) -> Vec<u8> {
    let mut list = message("k8s.io.apimachinery.pkg.apis.meta.v1.List");
    let items = items
        .iter()
        .map(|raw| {
            let mut r = message("k8s.io.apimachinery.pkg.runtime.RawExtension");
            r.set_field_by_name("raw", Value::Bytes(raw.clone().into()));
            Value::Message(r)
        })
        .collect();
    list.set_field_by_name("items", Value::List(items));
    envelope("v1", "List", &list.encode_to_vec())
}

fn v1_list_items(body: &[u8]) -> Vec<Vec<u8>> {
    let (_, kind, list) = open(body);
    assert_eq!(kind, "List");
    let items = list.get_field_by_name("items").unwrap();
    items
        .as_list()
        .unwrap()
        .iter()
        .map(|r| {
            let raw = r.as_message().unwrap().get_field_by_name("raw").unwrap();
            raw.as_bytes().unwrap().to_vec()
        })
        .collect()
}

#[test]
fn v1_lists_are_amended_item_by_item_both_ways() {
    let t = trust();
    let (_, written) = app_written_apiservice(APP_PEM);
    let stored = t.proto_to_cluster(&written, &map()).unwrap().unwrap();
    let cm = envelope(
        "v1",
        "ConfigMap",
        &authentication_configmap("[\"front-proxy-client\"]").encode_to_vec(),
    );
    let other = fixture("047-get-configmap-protobuf");
    // The same APIService as JSON in a RawExtension.
    let json_stored = serde_json::to_vec(&json!({
        "apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
        "metadata": {"name": "v1alpha1.wardle.team1.example.com",
                     "annotations": {APP_CA_BUNDLE_ANNOTATION: b64(APP_PEM)}},
        "spec": {"group": "wardle.team1.example.com", "caBundle": b64(SERVING_PEM)}}))
    .unwrap();
    // To the app.
    let body = v1_list(&[stored.clone(), cm, other.clone(), json_stored]);
    let items = v1_list_items(&t.proto_to_app(&body).unwrap().expect("amended"));
    assert_eq!(ca_bundle(&open(&items[0]).2), APP_PEM);
    assert!(annotation(&open(&items[0]).2).is_none());
    let data = string_map(&open(&items[1]).2, "data");
    assert!(data["requestheader-allowed-names"].contains("regroup-front-proxy"));
    assert_eq!(
        items[2], other,
        "an item with nothing to amend keeps its bytes"
    );
    let seen: serde_json::Value = serde_json::from_slice(&items[3]).unwrap();
    assert_eq!(seen["spec"]["caBundle"], b64(APP_PEM));
    assert!(seen["metadata"].get("annotations").is_none());
    // To the cluster: the app's bundle aside, regroup's in its place.
    let out = t
        .proto_to_cluster(&v1_list(&[written]), &map())
        .unwrap()
        .expect("substituted");
    let items = v1_list_items(&out);
    assert_eq!(ca_bundle(&open(&items[0]).2), SERVING_PEM);
    assert_eq!(
        annotation(&open(&items[0]).2).as_deref(),
        Some(b64(APP_PEM).as_str())
    );
    // Nothing to amend: byte for byte.
    assert_eq!(t.proto_to_app(&v1_list(&[other])).unwrap(), None);
}

/// Metadata-only reads of APIServices (`PartialObjectMetadata(List)`, a
/// metadata informer) show the app no `regroup.dev/app-ca-bundle`: the app
/// never wrote it. Other annotations stay.
#[test]
fn metadata_only_apiservices_hide_regroups_annotation() {
    let t = trust();
    let (_, written) = app_written_apiservice(APP_PEM);
    let stored = t.proto_to_cluster(&written, &map()).unwrap().unwrap();
    let mut stored_meta = meta(&open(&stored).2);
    if let Some(Value::Map(a)) = stored_meta.get_field_by_name_mut("annotations") {
        a.insert(MapKey::String("keep".into()), Value::String("me".into()));
    }
    let mut pom = message("k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata");
    pom.set_field_by_name("metadata", Value::Message(stored_meta));
    let check = |m: &DynamicMessage| {
        let a = string_map(&meta(m), "annotations");
        assert!(!a.contains_key(APP_CA_BUNDLE_ANNOTATION), "{a:?}");
        assert_eq!(a.get("keep").map(String::as_str), Some("me"));
    };
    for version in ["v1", "v1beta1"] {
        let av = format!("meta.k8s.io/{version}");
        let body = envelope(&av, "PartialObjectMetadata", &pom.encode_to_vec());
        check(&open(&t.proto_to_app(&body).unwrap().expect("amended")).2);
        // In a watch.
        let out = t
            .proto_watch_event_to_app(&watch_event("ADDED", &body))
            .unwrap()
            .expect("amended");
        check(&open(&event_object(&out).1).2);
    }
    // Lists: v1 puts items at 2, v1beta1 at 1.
    for (version, name) in [
        (
            "v1",
            "k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadataList",
        ),
        (
            "v1beta1",
            "k8s.io.apimachinery.pkg.apis.meta.v1beta1.PartialObjectMetadataList",
        ),
    ] {
        let mut list = message(name);
        list.set_field_by_name("items", Value::List(vec![Value::Message(pom.clone())]));
        let body = envelope(
            &format!("meta.k8s.io/{version}"),
            "PartialObjectMetadataList",
            &list.encode_to_vec(),
        );
        let (_, _, got) = open(&t.proto_to_app(&body).unwrap().expect("amended"));
        let items = got.get_field_by_name("items").unwrap();
        check(items.as_list().unwrap()[0].as_message().unwrap());
    }
    // Metadata without the annotation: byte for byte.
    let plain = envelope(
        "meta.k8s.io/v1",
        "PartialObjectMetadata",
        &message("k8s.io.apimachinery.pkg.apis.meta.v1.PartialObjectMetadata").encode_to_vec(),
    );
    assert_eq!(t.proto_to_app(&plain).unwrap(), None);
}
