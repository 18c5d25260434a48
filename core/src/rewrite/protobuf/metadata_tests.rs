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
    - {kind: ConfigMap, selector: 'controller in (gamma), !skip'}
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

#[test]
fn objects_a_selector_excludes_keep_their_metadata_in_protobuf() {
    let secret = |controller: &str| {
        let mut c = DynamicMessage::new(message("k8s.io.api.core.v1.ConfigMap"));
        let mut meta =
            DynamicMessage::new(message("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        meta.set_field_by_name("name", Value::String("s".into()));
        meta.set_field_by_name("labels", labels("kopf.zalando.org", controller));
        c.set_field_by_name("metadata", Value::Message(meta));
        envelope("v1", "ConfigMap", c.encode_to_vec())
    };
    let renamed = |b: &[u8]| {
        b.windows(b"kopf.team1.example.com/app".len())
            .any(|w| w == b"kopf.team1.example.com/app")
    };
    // `controller=gamma` is matched: kept, both ways.
    let kept = secret("gamma");
    assert_eq!(rename(Direction::ToCluster, &kept), kept);
    assert_eq!(rename(Direction::ToApp, &kept), kept);
    // `controller=alpha` is not: renamed, and back.
    let app = secret("alpha");
    let there = rename(Direction::ToCluster, &app);
    assert!(renamed(&there));
    assert_eq!(rename(Direction::ToApp, &there), app);
}

/// A LabelSelector with the operator's label in `matchLabels` and in a
/// `matchExpressions` requirement.
fn selector(p: &str, v: &str) -> Value {
    let mut s = DynamicMessage::new(message(
        "k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelector",
    ));
    s.set_field_by_name("matchLabels", labels(p, v));
    let mut r = DynamicMessage::new(message(
        "k8s.io.apimachinery.pkg.apis.meta.v1.LabelSelectorRequirement",
    ));
    r.set_field_by_name("key", Value::String(format!("{p}/app")));
    r.set_field_by_name("operator", Value::String("In".into()));
    r.set_field_by_name("values", Value::List(vec![Value::String("nginx".into())]));
    s.set_field_by_name("matchExpressions", Value::List(vec![Value::Message(r)]));
    Value::Message(s)
}

/// A pod whose topology spread constraint and pod anti-affinity term (both
/// reached through the new PodSpec fields 33 and 18) select the
/// operator's label and name it in `matchLabelKeys`.
fn pod(p: &str, v: &str) -> Vec<u8> {
    let keys = Value::List(vec![Value::String(format!("{p}/app"))]);
    let mut spread = DynamicMessage::new(message("k8s.io.api.core.v1.TopologySpreadConstraint"));
    spread.set_field_by_name("labelSelector", selector(p, v));
    spread.set_field_by_name("matchLabelKeys", keys.clone());
    let mut term = DynamicMessage::new(message("k8s.io.api.core.v1.PodAffinityTerm"));
    term.set_field_by_name("labelSelector", selector(p, v));
    term.set_field_by_name("namespaceSelector", selector(p, v));
    term.set_field_by_name("matchLabelKeys", keys.clone());
    term.set_field_by_name("mismatchLabelKeys", keys);
    let mut weighted = DynamicMessage::new(message("k8s.io.api.core.v1.WeightedPodAffinityTerm"));
    weighted.set_field_by_name("podAffinityTerm", Value::Message(term.clone()));
    let mut anti = DynamicMessage::new(message("k8s.io.api.core.v1.PodAntiAffinity"));
    anti.set_field_by_name(
        "requiredDuringSchedulingIgnoredDuringExecution",
        Value::List(vec![Value::Message(term)]),
    );
    anti.set_field_by_name(
        "preferredDuringSchedulingIgnoredDuringExecution",
        Value::List(vec![Value::Message(weighted)]),
    );
    let mut affinity = DynamicMessage::new(message("k8s.io.api.core.v1.Affinity"));
    affinity.set_field_by_name("podAntiAffinity", Value::Message(anti));
    let mut spec = DynamicMessage::new(message("k8s.io.api.core.v1.PodSpec"));
    spec.set_field_by_name("affinity", Value::Message(affinity));
    spec.set_field_by_name(
        "topologySpreadConstraints",
        Value::List(vec![Value::Message(spread)]),
    );
    let mut meta = DynamicMessage::new(message("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
    meta.set_field_by_name("name", Value::String("p".into()));
    meta.set_field_by_name("labels", labels(p, v));
    let mut pod = DynamicMessage::new(message("k8s.io.api.core.v1.Pod"));
    pod.set_field_by_name("metadata", Value::Message(meta));
    pod.set_field_by_name("spec", Value::Message(spec));
    envelope("v1", "Pod", pod.encode_to_vec())
}

/// A Service whose map selector (ServiceSpec 2) has the operator's label.
fn service(p: &str, v: &str) -> Vec<u8> {
    let mut spec = DynamicMessage::new(message("k8s.io.api.core.v1.ServiceSpec"));
    spec.set_field_by_name("selector", labels(p, v));
    let mut svc = DynamicMessage::new(message("k8s.io.api.core.v1.Service"));
    svc.set_field_by_name("spec", Value::Message(spec));
    envelope("v1", "Service", svc.encode_to_vec())
}

#[test]
fn a_pods_spread_and_affinity_terms_and_a_services_selector_both_ways() {
    for (name, make) in [
        ("k8s.io.api.core.v1.Pod", pod as fn(&str, &str) -> Vec<u8>),
        ("k8s.io.api.core.v1.Service", service),
    ] {
        let app = make("kopf.zalando.org", "alpha");
        let cluster = make("kopf.team1.example.com", "alpha-team1");
        assert_eq!(
            unwrap(&rename(Direction::ToCluster, &app), name),
            unwrap(&cluster, name),
            "{name}"
        );
        assert_eq!(
            unwrap(&rename(Direction::ToApp, &cluster), name),
            unwrap(&app, name),
            "{name}"
        );
    }
}

/// Every metadata place of a built-in kind reaches a field of its message
/// (the proto subset has every field on the way), except the strategic
/// merge patch directives, which are JSON only.
#[test]
fn every_metadata_place_reaches_a_protobuf_field() {
    use super::known_kinds;
    use super::plan::translate_path;
    use crate::rewrite::catalog::{is_metadata_slot, Selector};
    let (_, catalog) = settings();
    let kinds = known_kinds();
    let mut missing = Vec::new();
    let mut reached = 0;
    for place in catalog.places() {
        let Selector::Kinds { groups, kinds: ks } = &place.selector else {
            continue;
        };
        if !is_metadata_slot(&place.slot) {
            continue;
        }
        let path = place.path.to_string();
        if path.contains('$') {
            continue;
        }
        for (g, k) in groups.iter().flat_map(|g| ks.iter().map(move |k| (g, k))) {
            let messages: Vec<_> = kinds
                .iter()
                .filter(|(kg, _, kk, _)| kg == g && kk == k)
                .collect();
            if messages.is_empty() {
                // Kinds with no message of their own (none for metadata).
                missing.push(format!("{g}/{k}: no message"));
                continue;
            }
            for (_, v, _, m) in messages {
                if translate_path(m, &place.path).is_none() {
                    missing.push(format!("{g}/{v} {k} {path}"));
                } else {
                    reached += 1;
                }
            }
        }
    }
    assert!(missing.is_empty(), "unreached:\n{}", missing.join("\n"));
    assert!(reached > 100, "only {reached}");
}

/// CEL in protobuf: a ValidatingAdmissionPolicy's expressions built by
/// Kubernetes' field numbers (through the descriptors); a literal that is
/// exactly the group, an apiVersion or a metadata key is renamed, both
/// ways, and a longer one is left.
#[test]
fn admission_policy_cel_literals_in_protobuf() {
    let vap = |g: &str, k: &str| {
        let expr = |text: String| {
            let mut v =
                DynamicMessage::new(message("k8s.io.api.admissionregistration.v1.Validation"));
            v.set_field_by_name("expression", Value::String(text));
            Value::Message(v)
        };
        let mut spec = DynamicMessage::new(message(
            "k8s.io.api.admissionregistration.v1.ValidatingAdmissionPolicySpec",
        ));
        spec.set_field_by_name(
            "validations",
            Value::List(vec![
                expr(format!("request.resource.group == '{g}'")),
                expr(format!("object.apiVersion == \"{g}/v1alpha1\"")),
                expr(format!("'{k}/x' in object.metadata.labels")),
                expr("object.apiVersion.startsWith('samplecontroller.k8s.io/')".into()),
            ]),
        );
        let mut p = DynamicMessage::new(message(
            "k8s.io.api.admissionregistration.v1.ValidatingAdmissionPolicy",
        ));
        let mut meta =
            DynamicMessage::new(message("k8s.io.apimachinery.pkg.apis.meta.v1.ObjectMeta"));
        meta.set_field_by_name("name", Value::String("p".into()));
        p.set_field_by_name("metadata", Value::Message(meta));
        p.set_field_by_name("spec", Value::Message(spec));
        envelope(
            "admissionregistration.k8s.io/v1",
            "ValidatingAdmissionPolicy",
            p.encode_to_vec(),
        )
    };
    let app = vap("samplecontroller.k8s.io", "kopf.zalando.org");
    let cluster = vap(
        "samplecontroller.team1.example.com",
        "kopf.team1.example.com",
    );
    assert_eq!(rename(Direction::ToCluster, &app), cluster);
    assert_eq!(rename(Direction::ToApp, &cluster), app);
}
