//! The protobuf registration amendment on objects written by hand from
//! Kubernetes' field numbers (`test_wire`, independent of regroup's
//! descriptors), with the values of the registrations kube-apiserver 1.29
//! accepted (`testdata/kube-1.29/webhooks/orig/072`), and on the CRD
//! kube-apiserver 1.24 sent in protobuf (`testdata/kube-1.24/renamed/037`).

use crate::rewrite::protobuf::test_wire::{cat, envelope, ld, vi, MAGIC};
use base64::Engine as _;
use prost_reflect::{DynamicMessage, Value};
use regroup_config::schema::{ReachAt, Registration};
use serde_json::json;

use super::super::Fronted;
use super::*;
use crate::rewrite::protobuf::descriptor_pool;

const REGROUP_PEM: &[u8] = b"-----BEGIN CERTIFICATE-----\nREGROUP\n-----END CERTIFICATE-----\n";
const HOOK: &str = "mutate-v1.foo.regroup-fixtures.example.org";

fn b64(raw: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(raw)
}

fn fixture_json(case: &str) -> Json {
    let p = format!(
        "{}/../testdata/kube-1.29/webhooks/orig/{case}/request.body",
        env!("CARGO_MANIFEST_DIR")
    );
    serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap()
}

fn registration(app_url: &str) -> WebhookRegistration {
    WebhookRegistration {
        reach_at: ReachAt {
            url: Some("https://127.0.0.1:9444".into()),
            service: None,
        },
        ca_bundle: b64(REGROUP_PEM),
        fronted: vec![Fronted::new(
            "/mutate-foo".into(),
            Registration {
                url: Some(app_url.into()),
                service: None,
                configuration: None,
                webhook: None,
            },
            None,
        )],
    }
}

/// The fields of the captured webhook regroup's descriptor does not
/// declare, as Go writes them: sideEffects 6, timeoutSeconds 7,
/// admissionReviewVersions 8, matchPolicy 9.
fn undeclared() -> Vec<u8> {
    cat(&[ld(6, "None"), vi(7, 10), ld(8, "v1"), ld(9, "Equivalent")])
}

/// The captured MutatingWebhookConfiguration (072) in protobuf, with a
/// `clientConfig` {2 caBundle, 3 url} as the app wrote it.
fn mwc_072(annotations: &[(&str, &str)], cc: Vec<u8>) -> Vec<u8> {
    let written = fixture_json("072-create-mutatingwebhookconfiguration-v1");
    let hook = &written["webhooks"][0];
    let rule = &hook["rules"][0];
    let s = |v: &Json| v.as_str().unwrap().to_owned();
    let entry = |n: u32, k: &str, v: &str| ld(n, cat(&[ld(1, k), ld(2, v)]));
    let mut meta = vec![ld(1, s(&written["metadata"]["name"]))];
    meta.push(entry(11, "regroup-fixtures/world", "orig"));
    for (k, v) in annotations {
        meta.push(entry(12, k, v));
    }
    let rule = cat(&[
        ld(1, "CREATE"),
        ld(1, "UPDATE"),
        ld(1, "DELETE"),
        ld(
            2,
            cat(&[
                ld(1, s(&rule["apiGroups"][0])),
                ld(2, "v1alpha1"),
                ld(3, "foos"),
                ld(4, "Namespaced"),
            ]),
        ),
    ]);
    let webhook = cat(&[
        ld(1, HOOK),
        ld(2, cc),
        ld(3, rule),
        ld(4, "Fail"),
        undeclared(),
    ]);
    envelope(
        "admissionregistration.k8s.io/v1",
        "MutatingWebhookConfiguration",
        &cat(&[ld(1, cat(&meta)), ld(2, webhook)]),
    )
}

/// The app's own clientConfig of 072: its caBundle (raw PEM) and url.
fn app_client_config() -> (Vec<u8>, String, Vec<u8>) {
    let written = fixture_json("072-create-mutatingwebhookconfiguration-v1");
    let cc = &written["webhooks"][0]["clientConfig"];
    let pem = base64::engine::general_purpose::STANDARD
        .decode(cc["caBundle"].as_str().unwrap())
        .unwrap();
    let url = cc["url"].as_str().unwrap().to_owned();
    let bytes = cat(&[ld(2, &pem), ld(3, &url)]);
    (pem, url, bytes)
}

/// The object in an envelope, decoded with regroup's message.
fn open(body: &[u8], name: &str) -> DynamicMessage {
    let pool = descriptor_pool();
    let u = DynamicMessage::decode(
        pool.get_message_by_name("k8s.io.apimachinery.pkg.runtime.Unknown")
            .unwrap(),
        body.strip_prefix(MAGIC).unwrap(),
    )
    .unwrap();
    let raw = u
        .get_field_by_name("raw")
        .unwrap()
        .as_bytes()
        .unwrap()
        .clone();
    DynamicMessage::decode(pool.get_message_by_name(name).unwrap(), raw.as_ref()).unwrap()
}

const MWC: &str = "k8s.io.api.admissionregistration.v1.MutatingWebhookConfiguration";

fn create_info() -> RequestInfo {
    RequestInfo::parse(
        "/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations",
        None,
    )
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[test]
fn a_protobuf_registration_points_at_regroup_and_the_app_reads_back_what_it_wrote() {
    let (pem, url, cc) = app_client_config();
    let written = mwc_072(&[], cc);
    let r = registration(&url);
    let stored = r
        .proto_to_cluster(&written, &create_info())
        .unwrap()
        .expect("a fronted webhook is amended");
    let obj = open(&stored, MWC);
    let o = view(&obj);
    assert_eq!(
        o["webhooks"][0]["clientConfig"],
        json!({"url": "https://127.0.0.1:9444/mutate-foo", "caBundle": b64(REGROUP_PEM)})
    );
    let kept: Json = serde_json::from_str(
        o["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(kept, json!({HOOK: {"url": url, "caBundle": b64(&pem)}}));
    // The fields regroup does not declare went through as Go wrote them,
    // and so did the rules (renamed already, as the engine left them).
    assert!(contains(&stored, &undeclared()));
    assert!(contains(&stored, b"samplecontroller.k8s.io"));
    // Nothing more to do on the stored form.
    assert!(r
        .proto_to_cluster(&stored, &create_info())
        .unwrap()
        .is_none());
    // The app reads back the object it wrote: the same bytes here (its
    // fields come in the order regroup's encoder writes them).
    let read = r.proto_to_app(&stored).unwrap().expect("restored");
    assert_eq!(open(&read, MWC), open(&written, MWC));
    assert_eq!(read, written);
}

#[test]
fn lists_and_watch_events_in_protobuf_are_restored_too() {
    let (_, url, cc) = app_client_config();
    let r = registration(&url);
    let written = mwc_072(&[], cc);
    let stored = r
        .proto_to_cluster(&written, &create_info())
        .unwrap()
        .unwrap();
    let raw = |b: &[u8]| {
        let u = DynamicMessage::decode(
            descriptor_pool()
                .get_message_by_name("k8s.io.apimachinery.pkg.runtime.Unknown")
                .unwrap(),
            b.strip_prefix(MAGIC).unwrap(),
        )
        .unwrap();
        u.get_field_by_name("raw")
            .unwrap()
            .as_bytes()
            .unwrap()
            .to_vec()
    };
    let list = |item: &[u8]| {
        envelope(
            "admissionregistration.k8s.io/v1",
            "MutatingWebhookConfigurationList",
            &cat(&[ld(1, vi(2, 5).as_slice()), ld(2, raw(item))]),
        )
    };
    let read = r.proto_to_app(&list(&stored)).unwrap().expect("restored");
    assert_eq!(read, list(&written));
    // A watch event {1 type, 2 object {1 raw}}, unenveloped as a frame.
    let event = |obj: &[u8]| cat(&[ld(1, "MODIFIED"), ld(2, ld(1, obj))]);
    let read = r
        .proto_watch_event_to_app(&event(&stored))
        .unwrap()
        .expect("restored");
    assert_eq!(read, event(&written));
}

#[test]
fn protobuf_bodies_regroup_does_not_amend_are_left_as_they_came() {
    let (_, _, cc) = app_client_config();
    let written = mwc_072(&[], cc);
    // A webhook regroup does not front.
    let other = registration("https://127.0.0.1:18443/other");
    assert!(other
        .proto_to_cluster(&written, &create_info())
        .unwrap()
        .is_none());
    // Read by the app with no annotation of regroup's.
    assert!(other.proto_to_app(&written).unwrap().is_none());
    // Another kind entirely.
    let cm = envelope("v1", "ConfigMap", &ld(1, ld(1, "x")));
    assert!(other
        .proto_to_cluster(&cm, &create_info())
        .unwrap()
        .is_none());
    assert!(other.proto_to_app(&cm).unwrap().is_none());
    // An envelope that is not one is an error, not a pass-through.
    assert!(other
        .proto_to_cluster(b"not protobuf", &create_info())
        .is_err());
}

/// The 1.24 CRD (renamed, as regroup sends the app's CRD on) with a
/// conversion webhook `clientConfig` {1 service, 2 caBundle}.
fn crd_with_conversion() -> (Vec<u8>, DynamicMessage) {
    let p = format!(
        "{}/../testdata/kube-1.24/renamed/037-get-crd-protobuf/response.body",
        env!("CARGO_MANIFEST_DIR")
    );
    let captured = std::fs::read(p).unwrap();
    let crd = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition";
    let mut m = open(&captured, crd);
    let service = cat(&[
        ld(1, "team1"),
        ld(2, "foo-conversion"),
        ld(3, "/convert"),
        vi(4, 8443),
    ]);
    let conversion = cat(&[
        ld(1, "Webhook"),
        ld(
            2,
            cat(&[
                ld(2, cat(&[ld(1, service), ld(2, b"APP-PEM")])),
                ld(3, "v1"),
            ]),
        ),
    ]);
    let conv_desc = descriptor_pool()
        .get_message_by_name(
            "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceConversion",
        )
        .unwrap();
    let conv = DynamicMessage::decode(conv_desc, conversion.as_slice()).unwrap();
    if let Some(Value::Message(spec)) = m.get_field_by_name_mut("spec") {
        spec.set_field_by_name("conversion", Value::Message(conv));
    }
    let raw = m.encode_to_vec();
    (
        envelope("apiextensions.k8s.io/v1", "CustomResourceDefinition", &raw),
        m,
    )
}

#[test]
fn a_crds_conversion_webhook_in_protobuf() {
    let (written, original) = crd_with_conversion();
    let mut r = registration("unused");
    r.fronted[0].path = "/convert-foos".into();
    r.fronted[0].registration = Registration {
        url: None,
        service: Some(regroup_config::schema::ServiceRef {
            namespace: "team1".into(),
            name: "foo-conversion".into(),
            port: None,
            path: Some("/convert".into()),
        }),
        configuration: None,
        webhook: None,
    };
    let info = RequestInfo::parse(
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
        None,
    );
    let stored = r
        .proto_to_cluster(&written, &info)
        .unwrap()
        .expect("amended");
    let crd = "k8s.io.apiextensions_apiserver.pkg.apis.apiextensions.v1.CustomResourceDefinition";
    let v = view(&open(&stored, crd));
    assert_eq!(
        v["spec"]["conversion"]["webhook"]["clientConfig"],
        json!({"url": "https://127.0.0.1:9444/convert-foos", "caBundle": b64(REGROUP_PEM)})
    );
    let kept: Json = serde_json::from_str(
        v["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION]
            .as_str()
            .unwrap(),
    )
    .unwrap();
    assert_eq!(
        kept,
        json!({"conversion": {"service": {"namespace": "team1", "name": "foo-conversion",
            "path": "/convert", "port": 8443}, "caBundle": b64(b"APP-PEM")}})
    );
    // The app reads back the CRD it wrote, every captured field included
    // (versions, names, status: unknown to regroup's descriptor).
    let read = r.proto_to_app(&stored).unwrap().expect("restored");
    assert_eq!(open(&read, crd), original);
}
