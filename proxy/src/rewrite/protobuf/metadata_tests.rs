//! Metadata keys in protobuf: the captured Deployment
//! (testdata/kube-1.24/orig/042) given an operator's own label, finalizer,
//! annotation, selector and managed field by Kubernetes' field numbers
//! (through the descriptors), renamed both ways.

use prost::Message;
use prost_reflect::{DynamicMessage, MapKey, Value};
use regroup_config::{Direction, GroupMap};

use super::types::descriptor_pool;
use super::{ProtoRewriter, MAGIC};
use crate::rewrite::Catalog;

const CONFIG: &str = "
rules:
  - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
names: {kinds: []}   # metadata alone (names are on by default)
metadata:
  prefixes:
    - {from: kopf.zalando.org, to: kopf.team1.example.com}
  values:
    - {key: controller, from: alpha, to: alpha-team1}
  exclude:
    - {kind: ConfigMap, name: kept}
";

fn settings() -> (GroupMap, Catalog) {
    let s = regroup_config::load(CONFIG).unwrap();
    let c = Catalog::for_map(&s.fields, &s.map);
    (s.map, c)
}

fn message(name: &str) -> prost_reflect::MessageDescriptor {
    descriptor_pool().get_message_by_name(name).unwrap()
}

fn field(m: &DynamicMessage, name: &str) -> DynamicMessage {
    m.get_field_by_name(name)
        .unwrap_or_else(|| panic!("no field {name}"))
        .as_message()
        .unwrap_or_else(|| panic!("{name} is not a message"))
        .clone()
}

fn labels(p: &str, v: &str) -> Value {
    let mut m = std::collections::HashMap::new();
    m.insert(
        MapKey::String(format!("{p}/app")),
        Value::String("nginx".into()),
    );
    m.insert(MapKey::String("controller".into()), Value::String(v.into()));
    Value::Map(m)
}

/// The envelope around a message of `api_version`/`kind`.
fn envelope(api_version: &str, kind: &str, raw: Vec<u8>) -> Vec<u8> {
    let mut u = DynamicMessage::new(message("k8s.io.apimachinery.pkg.runtime.Unknown"));
    let mut tm = DynamicMessage::new(message("k8s.io.apimachinery.pkg.runtime.TypeMeta"));
    tm.set_field_by_name("apiVersion", Value::String(api_version.into()));
    tm.set_field_by_name("kind", Value::String(kind.into()));
    u.set_field_by_name("typeMeta", Value::Message(tm));
    u.set_field_by_name("raw", Value::Bytes(raw.into()));
    [MAGIC, &u.encode_to_vec()].concat()
}

fn unwrap(bytes: &[u8], name: &str) -> DynamicMessage {
    let u = DynamicMessage::decode(
        message("k8s.io.apimachinery.pkg.runtime.Unknown"),
        bytes.strip_prefix(MAGIC).unwrap(),
    )
    .unwrap();
    let raw = u
        .get_field_by_name("raw")
        .unwrap()
        .as_bytes()
        .unwrap()
        .clone();
    DynamicMessage::decode(message(name), raw.as_ref()).unwrap()
}

/// The captured Deployment with the operator's keys in prefix `p`, the
/// `controller` label's value `v`, its owner in group `g`.
fn deployment(p: &str, v: &str, g: &str) -> Vec<u8> {
    let captured = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/kube-1.24/orig/042-get-deployment-protobuf/response.body"
    ))
    .unwrap();
    let mut d = unwrap(&captured, "k8s.io.api.apps.v1.Deployment");
    let mut meta = field(&d, "metadata");
    meta.set_field_by_name("labels", labels(p, v));
    meta.set_field_by_name(
        "finalizers",
        Value::List(vec![Value::String(format!("{p}/KopfFinalizerMarker"))]),
    );
    let mut ann = std::collections::HashMap::new();
    ann.insert(
        MapKey::String(format!("{p}/last-handled-configuration")),
        Value::String("{}".into()),
    );
    meta.set_field_by_name("annotations", Value::Map(ann));
    let Value::List(mut owners) = meta
        .get_field_by_name("ownerReferences")
        .unwrap()
        .into_owned()
    else {
        panic!("the capture has owner references");
    };
    for o in &mut owners {
        if let Value::Message(o) = o {
            o.set_field_by_name("apiVersion", Value::String(format!("{g}/v1alpha1")));
        }
    }
    meta.set_field_by_name("ownerReferences", Value::List(owners));
    let Value::List(mut managed) = meta
        .get_field_by_name("managedFields")
        .unwrap()
        .into_owned()
    else {
        panic!("the capture has managed fields");
    };
    let fields = format!(
        r#"{{"f:metadata":{{"f:finalizers":{{".":{{}},"v:\"{p}/KopfFinalizerMarker\"":{{}}}},"f:labels":{{".":{{}},"f:{p}/app":{{}},"f:controller":{{}}}}}},"f:spec":{{"f:selector":{{}},"f:template":{{"f:metadata":{{"f:labels":{{"f:{p}/app":{{}}}}}}}}}}}}"#
    );
    if let Some(Value::Message(entry)) = managed.first_mut() {
        let mut f = DynamicMessage::new(message("k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1"));
        f.set_field_by_name("Raw", Value::Bytes(fields.into_bytes().into()));
        entry.set_field_by_name("fieldsV1", Value::Message(f));
    }
    meta.set_field_by_name("managedFields", Value::List(managed));
    d.set_field_by_name("metadata", Value::Message(meta));
    let mut spec = field(&d, "spec");
    let mut selector = field(&spec, "selector");
    selector.set_field_by_name("matchLabels", labels(p, v));
    spec.set_field_by_name("selector", Value::Message(selector));
    let mut template = field(&spec, "template");
    let mut tmeta = field(&template, "metadata");
    tmeta.set_field_by_name("labels", labels(p, v));
    template.set_field_by_name("metadata", Value::Message(tmeta));
    spec.set_field_by_name("template", Value::Message(template));
    d.set_field_by_name("spec", Value::Message(spec));
    envelope("apps/v1", "Deployment", d.encode_to_vec())
}

fn rename(dir: Direction, input: &[u8]) -> Vec<u8> {
    let (m, c) = settings();
    ProtoRewriter::new(&m, &c, dir)
        .rewrite_bytes(input)
        .unwrap()
        .unwrap_or_else(|| input.to_vec())
}

#[test]
fn a_deployments_keys_selectors_templates_and_managed_fields() {
    let name = "k8s.io.api.apps.v1.Deployment";
    let app = deployment("kopf.zalando.org", "alpha", "samplecontroller.k8s.io");
    let cluster = deployment(
        "kopf.team1.example.com",
        "alpha-team1",
        "samplecontroller.team1.example.com",
    );
    // prost-reflect writes maps in no fixed order: compared decoded.
    assert_eq!(
        unwrap(&rename(Direction::ToCluster, &app), name),
        unwrap(&cluster, name)
    );
    assert_eq!(
        unwrap(&rename(Direction::ToApp, &cluster), name),
        unwrap(&app, name)
    );
    // Renamed back exactly: every other byte as it came.
    assert_eq!(
        rename(Direction::ToApp, &rename(Direction::ToCluster, &app)),
        app
    );
}

#[test]
fn excluded_objects_keep_their_metadata_in_protobuf() {
    let cm = |name: &str| {
        let mut c = DynamicMessage::new(message("k8s.io.api.core.v1.ConfigMap"));
        let mut meta =
            DynamicMessage::new(message("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        meta.set_field_by_name("name", Value::String(name.into()));
        meta.set_field_by_name("labels", labels("kopf.zalando.org", "beta"));
        c.set_field_by_name("metadata", Value::Message(meta));
        envelope("v1", "ConfigMap", c.encode_to_vec())
    };
    let kept = cm("kept");
    assert_eq!(rename(Direction::ToCluster, &kept), kept);
    let other = rename(Direction::ToCluster, &cm("other"));
    assert!(other
        .windows(b"kopf.team1.example.com/app".len())
        .any(|w| w == b"kopf.team1.example.com/app"));
}
