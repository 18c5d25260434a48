//! Unit tests: hand-built wire bytes (exact layouts: unknown fields, field
//! order, length encodings), every catalog place's translation, and
//! malformed input.

use prost::Message;
use prost_reflect::{DynamicMessage, Value};
use regroup_config::field_path::FieldPath;
use regroup_config::{CustomField, Direction, Form, GroupMap, MapRule, Rule};

use super::plan::{build, translate_path, Act, Node, Target};
use super::test_wire::{cat, envelope, ld, varint, vi};
use super::types::{descriptor_pool, known_kinds};
use super::{ProtoRewriter, WatchStream, MAGIC};
use crate::rewrite::catalog::{Catalog, Selector, Slot};
use crate::rewrite::error::RewriteError;

const APP: &str = "samplecontroller.k8s.io";
const CLUSTER: &str = "samplecontroller.team1.example.com";

fn map() -> GroupMap {
    let exact = |from: &str, to: &str| MapRule {
        rule: Rule::Exact {
            from: from.into(),
            to: to.into(),
        },
        reference_keys: true,
    };
    GroupMap::new(vec![
        exact(APP, CLUSTER),
        exact("wardle.example.com", "wardle.team1.example.com"),
    ])
    .unwrap()
}

// Wire-format builders: super::test_wire.

fn owner_ref(api_version: &str) -> Vec<u8> {
    cat(&[
        ld(1, "Foo"),
        ld(3, "alpha"),
        ld(4, "uid-1"),
        ld(5, api_version),
        vi(6, 1),
    ])
}

fn metadata(name: &str, owners: &[&str]) -> Vec<u8> {
    let mut parts = vec![ld(1, name), ld(3, "ns")];
    // A label whose key merely contains a group: never renamed.
    parts.push(ld(
        11,
        cat(&[ld(1, format!("{CLUSTER}/owner")), ld(2, "alpha")]),
    ));
    for o in owners {
        parts.push(ld(13, owner_ref(o)));
    }
    cat(&parts)
}

fn decode(name: &str, bytes: &[u8]) -> DynamicMessage {
    let md = descriptor_pool().get_message_by_name(name).unwrap();
    DynamicMessage::decode(md, bytes).unwrap()
}

fn unwrap_envelope(bytes: &[u8]) -> (String, Vec<u8>) {
    let u = decode(
        "k8s.io.apimachinery.pkg.runtime.Unknown",
        bytes.strip_prefix(MAGIC).unwrap(),
    );
    let tm = u.get_field_by_name("typeMeta").unwrap();
    let av = tm
        .as_message()
        .unwrap()
        .get_field_by_name("apiVersion")
        .unwrap()
        .as_str()
        .unwrap()
        .to_owned();
    let raw = u
        .get_field_by_name("raw")
        .unwrap()
        .as_bytes()
        .unwrap()
        .to_vec();
    (av, raw)
}

fn strings_at(m: &DynamicMessage, path: &[&str]) -> Vec<String> {
    let Some((first, rest)) = path.split_first() else {
        return vec![];
    };
    let v = m.get_field_by_name(first).unwrap().into_owned();
    let mut out = Vec::new();
    let mut visit = |v: &Value| match v {
        Value::String(s) if rest.is_empty() => out.push(s.clone()),
        Value::Message(inner) => out.extend(strings_at(inner, rest)),
        _ => {}
    };
    match &v {
        Value::List(l) => l.iter().for_each(&mut visit),
        other => visit(other),
    }
    out
}

fn rewriters<'a>(
    map: &'a GroupMap,
    catalog: &'a Catalog,
) -> (ProtoRewriter<'a>, ProtoRewriter<'a>) {
    (
        ProtoRewriter::new(map, catalog, Direction::ToApp),
        ProtoRewriter::new(map, catalog, Direction::ToCluster),
    )
}

/// Renames for the app, checks the round trip back, returns the result.
fn for_app(input: &[u8]) -> Vec<u8> {
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, to_cluster) = rewriters(&map, &catalog);
    let out = to_app.rewrite_bytes(input).unwrap().expect("renamed");
    let back = to_cluster
        .rewrite_bytes(&out)
        .unwrap()
        .expect("renamed back");
    assert_eq!(back, input, "round trip");
    out
}

#[test]
fn rewriter_is_shareable_across_threads() {
    fn check<T: Send + Sync>() {}
    check::<ProtoRewriter<'static>>();
}

#[test]
fn bytes_without_a_mapped_name_are_not_parsed() {
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, _) = rewriters(&map, &catalog);
    // Not protobuf at all, but nothing to rename: forwarded as is.
    let garbage = b"\xff\xff\xff\xff not protobuf, apps/v1";
    assert_eq!(to_app.rewrite_bytes(garbage), Ok(None));
    assert_eq!(to_app.rewrite_watch_frame(garbage), Ok(None));
    assert!(!to_app.may_contain_name(garbage));
    assert!(to_app.may_contain_name(CLUSTER.as_bytes()));
    assert!(to_app.may_contain_name(APP.as_bytes()));
}

#[test]
fn object_api_version_and_owner_references_are_renamed() {
    let cm = cat(&[
        ld(
            1,
            metadata("cm", &[&format!("{CLUSTER}/v1alpha1"), "apps/v1"]),
        ),
        ld(2, cat(&[ld(1, "k"), ld(2, CLUSTER)])),
    ]);
    let input = envelope("v1", "ConfigMap", &cm);
    let out = for_app(&input);
    let (av, raw) = unwrap_envelope(&out);
    assert_eq!(av, "v1");
    let obj = decode("k8s.io.api.core.v1.ConfigMap", &raw);
    assert_eq!(
        strings_at(&obj, &["metadata", "ownerReferences", "apiVersion"]),
        [format!("{APP}/v1alpha1"), "apps/v1".into()]
    );
    // Label keys and data values are not group references.
    let labels = obj.get_field_by_name("metadata").unwrap();
    let labels = labels
        .as_message()
        .unwrap()
        .get_field_by_name("labels")
        .unwrap();
    let key = labels.as_map().unwrap().keys().next().unwrap().clone();
    assert_eq!(key.as_str(), Some(format!("{CLUSTER}/owner").as_str()));
    let data = obj.get_field_by_name("data").unwrap();
    assert_eq!(
        data.as_map().unwrap().values().next().unwrap().as_str(),
        Some(CLUSTER)
    );

    // The envelope's apiVersion of a custom kind: renamed, object walked
    // per convention.
    let foo = envelope(
        &format!("{CLUSTER}/v1alpha1"),
        "Foo",
        &cat(&[ld(1, metadata("alpha", &[])), ld(2, "spec bytes")]),
    );
    let out = for_app(&foo);
    assert_eq!(unwrap_envelope(&out).0, format!("{APP}/v1alpha1"));
}

#[test]
fn unknown_fields_order_and_encodings_are_kept() {
    // Fields out of order, unknown fields (varint, fixed64, fixed32,
    // length-delimited) at every level, a non-minimal length prefix on a
    // field whose length doesn't change.
    let owner = cat(&[
        vi(99, 7),
        ld(5, format!("{CLUSTER}/v1alpha1")),
        ld(1, "Foo"),
        vec![0x81, 0x06, 1, 2, 3, 4, 5, 6, 7, 8], // field 96, fixed64
    ]);
    let mut padded_name = vec![0x0a, 0x82, 0x00]; // field 1, length 2 in 2 bytes
    padded_name.extend_from_slice(b"cm");
    let meta = cat(&[
        ld(13, &owner),
        padded_name.clone(),
        ld(200, "unknown"),
        vec![0xad, 0x06, 9, 9, 9, 9],
    ]);
    let obj = cat(&[
        vi(4, 1),
        ld(1, &meta),
        ld(2, cat(&[ld(1, "k"), ld(2, "v")])),
    ]);
    let input = envelope("v1", "ConfigMap", &obj);
    let out = for_app(&input);
    let want_owner = cat(&[
        vi(99, 7),
        ld(5, format!("{APP}/v1alpha1")),
        ld(1, "Foo"),
        vec![0x81, 0x06, 1, 2, 3, 4, 5, 6, 7, 8],
    ]);
    let want_meta = cat(&[
        ld(13, &want_owner),
        padded_name,
        ld(200, "unknown"),
        vec![0xad, 0x06, 9, 9, 9, 9],
    ]);
    let want = envelope(
        "v1",
        "ConfigMap",
        &cat(&[
            vi(4, 1),
            ld(1, &want_meta),
            ld(2, cat(&[ld(1, "k"), ld(2, "v")])),
        ]),
    );
    assert_eq!(out, want);
}

#[test]
fn length_prefixes_grow_and_shrink_across_varint_widths() {
    // A ConfigMap whose metadata is 127 bytes for the app (1-byte length)
    // and more for the cluster (2-byte length), and a list around it.
    let app_owner = format!("{APP}/v1");
    let name = (1..200)
        .map(|n| "x".repeat(n))
        .find(|n| metadata(n, &[&app_owner]).len() == 127)
        .unwrap();
    let app_meta = metadata(&name, &[&app_owner]);
    let cluster_meta = metadata(&name, &[&format!("{CLUSTER}/v1")]);
    assert!(cluster_meta.len() > 127);
    let list = |meta: &[u8]| cat(&[ld(1, ""), ld(2, ld(1, meta)), ld(2, ld(1, meta))]);
    let input = envelope("v1", "ConfigMapList", &list(&cluster_meta));
    let out = for_app(&input);
    assert_eq!(out, envelope("v1", "ConfigMapList", &list(&app_meta)));
}

#[test]
fn webhook_rules_reach_the_inline_rule() {
    // ValidatingWebhook.rules[] is RuleWithOperations, whose `rule` (2) is
    // inline in JSON: rules[].apiGroups[] is rules[].rule.apiGroups[].
    let rule = cat(&[
        ld(1, CLUSTER),
        ld(1, "apps"),
        ld(2, "v1alpha1"),
        ld(3, "foos"),
    ]);
    let rwo = cat(&[ld(1, "CREATE"), ld(2, &rule)]);
    let webhook = cat(&[ld(1, "w.example.com"), ld(3, &rwo), ld(4, "Ignore")]);
    let vwc = cat(&[ld(1, metadata("w", &[])), ld(2, &webhook)]);
    let out = for_app(&envelope(
        "admissionregistration.k8s.io/v1",
        "ValidatingWebhookConfiguration",
        &vwc,
    ));
    let obj = decode(
        "k8s.io.api.admissionregistration.v1.ValidatingWebhookConfiguration",
        &unwrap_envelope(&out).1,
    );
    let groups = strings_at(&obj, &["Webhooks", "rules", "rule", "apiGroups"]);
    assert_eq!(groups, [APP, "apps"]);

    // ValidatingAdmissionPolicy: resourceRules[] inline twice, paramKind.
    let named = cat(&[ld(1, "x"), ld(2, &rwo)]);
    let spec = cat(&[
        ld(
            1,
            cat(&[ld(1, format!("{CLUSTER}/v1alpha1")), ld(2, "Foo")]),
        ),
        ld(2, cat(&[ld(3, &named), ld(4, &named)])),
    ]);
    for v in ["v1", "v1beta1", "v1alpha1"] {
        let vap = cat(&[ld(1, metadata("p", &[])), ld(2, &spec)]);
        let out = for_app(&envelope(
            &format!("admissionregistration.k8s.io/{v}"),
            "ValidatingAdmissionPolicy",
            &vap,
        ));
        let obj = decode(
            &format!("k8s.io.api.admissionregistration.{v}.ValidatingAdmissionPolicy"),
            &unwrap_envelope(&out).1,
        );
        assert_eq!(
            strings_at(&obj, &["spec", "paramKind", "apiVersion"]),
            [format!("{APP}/v1alpha1")]
        );
        for rules in ["resourceRules", "excludeResourceRules"] {
            assert_eq!(
                strings_at(
                    &obj,
                    &[
                        "spec",
                        "matchConstraints",
                        rules,
                        "ruleWithOperations",
                        "rule",
                        "apiGroups"
                    ]
                ),
                [APP, "apps"],
                "{v} {rules}"
            );
        }
    }
}

#[test]
fn hpa_v1_metrics_annotation_json_is_spliced() {
    let json = format!(
        r#"[{{"type":"Object","object":{{"target":{{"kind":"Foo","name":"beta","apiVersion":"{CLUSTER}/v1alpha1"}},"metricName":"m","targetValue":"10"}}}}]"#
    );
    let annotations = ld(
        12,
        cat(&[
            ld(1, "autoscaling.alpha.kubernetes.io/metrics"),
            ld(2, &json),
        ]),
    );
    let other = ld(
        12,
        cat(&[
            ld(1, "note"),
            ld(2, format!(r#"{{"apiVersion":"{CLUSTER}/v1"}}"#)),
        ]),
    );
    let meta = cat(&[ld(1, "hpa"), annotations, other.clone()]);
    let spec = ld(
        1,
        cat(&[
            ld(1, "Foo"),
            ld(2, "alpha"),
            ld(3, format!("{CLUSTER}/v1alpha1")),
        ]),
    );
    let hpa = cat(&[ld(1, &meta), ld(2, cat(&[spec, vi(2, 1), vi(3, 5)]))]);
    let out = for_app(&envelope("autoscaling/v1", "HorizontalPodAutoscaler", &hpa));
    let obj = decode(
        "k8s.io.api.autoscaling.v1.HorizontalPodAutoscaler",
        &unwrap_envelope(&out).1,
    );
    assert_eq!(
        strings_at(&obj, &["spec", "scaleTargetRef", "apiVersion"]),
        [format!("{APP}/v1alpha1")]
    );
    let raw = unwrap_envelope(&out).1;
    let want_json = json.replace(CLUSTER, APP);
    assert!(raw
        .windows(want_json.len())
        .any(|w| w == want_json.as_bytes()));
    // Other annotations are user data.
    assert!(raw.windows(other.len()).any(|w| w == other.as_slice()));

    // An annotation that must hold JSON and doesn't is an error.
    let bad = ld(
        12,
        cat(&[
            ld(1, "autoscaling.alpha.kubernetes.io/metrics"),
            ld(2, format!("not json {CLUSTER}")),
        ]),
    );
    let hpa = cat(&[ld(1, cat(&[ld(1, "hpa"), bad]))]);
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, _) = rewriters(&map, &catalog);
    assert!(matches!(
        to_app.rewrite_bytes(&envelope("autoscaling/v1", "HorizontalPodAutoscaler", &hpa)),
        Err(RewriteError::EmbeddedJson(..))
    ));
}

#[test]
fn watch_events_embed_enveloped_or_json_objects() {
    let cm = envelope(
        "v1",
        "ConfigMap",
        &ld(1, metadata("cm", &[&format!("{CLUSTER}/v1")])),
    );
    let frame = cat(&[ld(1, "ADDED"), ld(2, ld(1, &cm))]);
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, to_cluster) = rewriters(&map, &catalog);
    let out = to_app.rewrite_watch_frame(&frame).unwrap().unwrap();
    let want_cm = envelope(
        "v1",
        "ConfigMap",
        &ld(1, metadata("cm", &[&format!("{APP}/v1")])),
    );
    assert_eq!(out, cat(&[ld(1, "ADDED"), ld(2, ld(1, &want_cm))]));
    assert_eq!(
        to_cluster.rewrite_watch_frame(&out).unwrap().unwrap(),
        frame
    );

    // JSON in a RawExtension goes to the JSON engine.
    let json =
        format!(r#"{{"apiVersion":"{CLUSTER}/v1alpha1","kind":"Foo","metadata":{{"name":"a"}}}}"#);
    let frame = cat(&[ld(1, "ADDED"), ld(2, ld(1, &json))]);
    let out = to_app.rewrite_watch_frame(&frame).unwrap().unwrap();
    let want = json.replace(CLUSTER, APP);
    assert_eq!(out, cat(&[ld(1, "ADDED"), ld(2, ld(1, &want))]));

    // Neither: refused, not forwarded unrenamed.
    let frame = cat(&[ld(1, "ADDED"), ld(2, ld(1, format!("?{CLUSTER}")))]);
    assert!(matches!(
        to_app.rewrite_watch_frame(&frame),
        Err(RewriteError::Protobuf(_))
    ));
}

#[test]
fn metadata_only_objects_use_the_addressed_kind() {
    // A PartialObjectMetadataList of APIServices: names are version.group.
    let item = |name: &str| ld(2, ld(1, cat(&[ld(1, name)])));
    let list = cat(&[
        ld(1, ""),
        item("v1alpha1.wardle.team1.example.com"),
        item("v1.apps"),
    ]);
    let input = envelope("meta.k8s.io/v1", "PartialObjectMetadataList", &list);
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, to_cluster) = rewriters(&map, &catalog);
    // Without knowing the kind, a name is just a name.
    assert_eq!(to_app.rewrite_bytes(&input), Ok(None));
    let out = to_app
        .rewrite_bytes_addressed(&input, "apiregistration.k8s.io", "APIService")
        .unwrap()
        .unwrap();
    let want = envelope(
        "meta.k8s.io/v1",
        "PartialObjectMetadataList",
        &cat(&[
            ld(1, ""),
            item("v1alpha1.wardle.example.com"),
            item("v1.apps"),
        ]),
    );
    assert_eq!(out, want);
    assert_eq!(
        to_cluster
            .rewrite_bytes_addressed(&out, "apiregistration.k8s.io", "APIService")
            .unwrap()
            .unwrap(),
        input
    );
    // meta/v1beta1's list has its items at field 1.
    let v1beta1 = cat(&[
        ld(1, ld(1, ld(1, "v1alpha1.wardle.team1.example.com"))),
        ld(2, ""),
    ]);
    let out = to_app
        .rewrite_bytes_addressed(
            &envelope("meta.k8s.io/v1beta1", "PartialObjectMetadataList", &v1beta1),
            "apiregistration.k8s.io",
            "APIService",
        )
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        envelope(
            "meta.k8s.io/v1beta1",
            "PartialObjectMetadataList",
            &cat(&[
                ld(1, ld(1, ld(1, "v1alpha1.wardle.example.com"))),
                ld(2, "")
            ])
        )
    );
}

#[test]
fn discovery_drops_shadowed_groups_for_the_app() {
    let group = |name: &str| {
        let gv = format!("{name}/v1");
        ld(
            1,
            cat(&[
                ld(1, name),
                ld(2, cat(&[ld(1, &gv), ld(2, "v1")])),
                ld(3, cat(&[ld(1, &gv), ld(2, "v1")])),
            ]),
        )
    };
    let list = cat(&[group("apps"), group(APP), group(CLUSTER)]);
    let input = envelope("v1", "APIGroupList", &list);
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, _) = rewriters(&map, &catalog);
    let out = to_app.rewrite_bytes(&input).unwrap().unwrap();
    // The cluster's own `samplecontroller.k8s.io` is hidden; the renamed
    // group takes its name.
    assert_eq!(
        out,
        envelope("v1", "APIGroupList", &cat(&[group("apps"), group(APP)]))
    );
}

#[test]
fn unknown_kinds_follow_the_convention_leniently() {
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, _) = rewriters(&map, &catalog);
    let owner = format!("{CLUSTER}/v1alpha1");
    // A Deployment (no message of its own): metadata at field 1.
    let deploy = cat(&[ld(1, metadata("d", &[&owner])), ld(2, "spec")]);
    let out = to_app
        .rewrite_bytes(&envelope("apps/v1", "Deployment", &deploy))
        .unwrap()
        .unwrap();
    let want = cat(&[
        ld(1, metadata("d", &[&format!("{APP}/v1alpha1")])),
        ld(2, "spec"),
    ]);
    assert_eq!(out, envelope("apps/v1", "Deployment", &want));
    // Its list: items at 2.
    let list = cat(&[ld(1, ""), ld(2, &deploy), ld(2, &deploy)]);
    let out = to_app
        .rewrite_bytes(&envelope("apps/v1", "DeploymentList", &list))
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        envelope(
            "apps/v1",
            "DeploymentList",
            &cat(&[ld(1, ""), ld(2, &want), ld(2, &want)])
        )
    );
    // A kind whose field 1 is something else: left as it came.
    let odd = cat(&[ld(1, format!("\x0e{CLUSTER}")), vi(2, 3)]);
    assert_eq!(
        to_app.rewrite_bytes(&envelope("odd.io/v1", "Odd", &odd)),
        Ok(None)
    );
}

#[test]
fn status_group_and_message_are_renamed() {
    let status = cat(&[
        ld(1, ""),
        ld(2, "Failure"),
        ld(
            3,
            format!(
                r#"foos.{CLUSTER} "alpha" is forbidden: cannot delete resource "foos" in API group "{CLUSTER}""#
            ),
        ),
        ld(4, "Forbidden"),
        ld(
            5,
            cat(&[
                ld(1, "alpha"),
                ld(2, CLUSTER),
                ld(3, "foos"),
                ld(4, cat(&[ld(1, "r"), ld(2, format!("bad {CLUSTER}"))])),
            ]),
        ),
        vi(6, 403),
    ]);
    let out = for_app(&envelope("v1", "Status", &status));
    let obj = decode(
        "k8s.io.apimachinery.pkg.apis.meta.v1.Status",
        &unwrap_envelope(&out).1,
    );
    assert_eq!(strings_at(&obj, &["details", "group"]), [APP]);
    assert_eq!(
        strings_at(&obj, &["message"]),
        [format!(
            r#"foos.{APP} "alpha" is forbidden: cannot delete resource "foos" in API group "{APP}""#
        )]
    );
    assert_eq!(
        strings_at(&obj, &["details", "causes", "message"]),
        [format!("bad {APP}")]
    );
}

const STATUS: &str = "k8s.io.apimachinery.pkg.apis.meta.v1.Status";

fn new_message(name: &str) -> DynamicMessage {
    DynamicMessage::new(descriptor_pool().get_message_by_name(name).unwrap())
}

/// The NotFound Status the apiserver answers for `resource.group "name"`.
fn not_found(name: &str, group: &str, resource: &str) -> DynamicMessage {
    let mut details = new_message("k8s.io.apimachinery.pkg.apis.meta.v1.StatusDetails");
    details.set_field_by_name("name", Value::String(name.into()));
    details.set_field_by_name("group", Value::String(group.into()));
    details.set_field_by_name("kind", Value::String(resource.into()));
    let mut status = new_message(STATUS);
    status.set_field_by_name(
        "metadata",
        Value::Message(new_message("k8s.io.apimachinery.pkg.apis.meta.v1.ListMeta")),
    );
    status.set_field_by_name("status", Value::String("Failure".into()));
    let message = format!(r#"{resource}.{group} "{name}" not found"#);
    status.set_field_by_name("message", Value::String(message));
    status.set_field_by_name("reason", Value::String("NotFound".into()));
    status.set_field_by_name("details", Value::Message(details));
    status.set_field_by_name("code", Value::I32(404));
    status
}

fn enveloped_status(status: &DynamicMessage) -> Vec<u8> {
    envelope("v1", "Status", &status.encode_to_vec())
}

fn decoded_status(bytes: &[u8]) -> DynamicMessage {
    decode(STATUS, &unwrap_envelope(bytes).1)
}

#[test]
fn status_details_name_is_renamed_only_for_resources_whose_names_carry_a_group() {
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, to_cluster) = rewriters(&map, &catalog);
    // CRD and APIService names carry the group.
    for (first, group, resource) in [
        ("foos", "apiextensions.k8s.io", "customresourcedefinitions"),
        ("v1alpha1", "apiregistration.k8s.io", "apiservices"),
    ] {
        let app = not_found(&format!("{first}.{APP}"), group, resource);
        let cluster = not_found(&format!("{first}.{CLUSTER}"), group, resource);
        let out = to_app
            .rewrite_bytes(&enveloped_status(&cluster))
            .unwrap()
            .expect("renamed");
        assert_eq!(decoded_status(&out), app, "{resource} for the app");
        let out = to_cluster
            .rewrite_bytes(&enveloped_status(&app))
            .unwrap()
            .expect("renamed");
        assert_eq!(decoded_status(&out), cluster, "{resource} for the cluster");
        assert_eq!(out, enveloped_status(&cluster), "{resource} bytes");
    }
    // A ConfigMap's name that happens to end in a mapped group is just a
    // name (without a message, which would be renamed as text).
    for (side, rw) in [(CLUSTER, &to_app), (APP, &to_cluster)] {
        let mut cm = not_found(&format!("x.{side}"), "", "configmaps");
        cm.clear_field_by_name("message");
        assert_eq!(rw.rewrite_bytes(&enveloped_status(&cm)), Ok(None));
    }
}

#[test]
fn status_details_are_read_whatever_their_order_on_the_wire() {
    // Kind and group after an unknown field, before the name; an earlier
    // group that the last one overrides (protobuf: the last wins).
    let status = |name: &str| {
        let details = cat(&[
            ld(2, "apps"),
            vi(99, 1),
            ld(3, "customresourcedefinitions"),
            ld(2, "apiextensions.k8s.io"),
            ld(1, name),
        ]);
        envelope("v1", "Status", &cat(&[ld(5, details), vi(6, 404)]))
    };
    let input = status(&format!("foos.{CLUSTER}"));
    let out = for_app(&input);
    assert_eq!(out, status(&format!("foos.{APP}")));
    // The last group wins the other way round too: not a CRD after all.
    let details = cat(&[
        ld(2, "apiextensions.k8s.io"),
        ld(3, "customresourcedefinitions"),
        ld(1, format!("foos.{CLUSTER}")),
        ld(2, "apps"),
    ]);
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, _) = rewriters(&map, &catalog);
    assert_eq!(
        to_app.rewrite_bytes(&envelope("v1", "Status", &ld(5, details))),
        Ok(None)
    );
}

#[test]
fn name_of_acts_only_in_status_and_access_review_plans() {
    // Every other kind's walk is as it was: no act reads sibling fields.
    // A Status names its object in `details`, an access review in
    // `spec.resourceAttributes`.
    fn name_ofs(node: &Node) -> usize {
        let own = match &node.act {
            Some(Act::NameOf { .. }) => 1,
            Some(Act::Items(plan)) => name_ofs(&plan.root),
            _ => 0,
        };
        let below = node.fields.iter().map(|(_, n)| n);
        own + below
            .chain(node.entries.iter().map(|(_, n)| n))
            .map(name_ofs)
            .sum::<usize>()
    }
    let catalog = Catalog::new(&[]);
    for (g, v, k, m) in known_kinds() {
        let target = Target {
            message: &m,
            group: g,
            kind: &k,
            addressed: None,
            lenient: false,
            metadata: None,
            bare: false,
        };
        let plan = build(&catalog, &target);
        let want = usize::from(
            k == "Status"
                || [
                    "SubjectAccessReview",
                    "LocalSubjectAccessReview",
                    "SelfSubjectAccessReview",
                ]
                .contains(&k.as_str()),
        );
        assert_eq!(name_ofs(&plan.root), want, "{g}/{v} {k}");
    }
}

#[test]
fn names_too_long_for_kubernetes_are_refused() {
    // A valid group whose CRD name (`plural.group`) would pass 253.
    let label = "x".repeat(63);
    let long = format!("{label}.{label}.{label}.{}.io", "y".repeat(40));
    let map = GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: "short.io".into(),
            to: long,
        },
        reference_keys: true,
    }])
    .unwrap();
    let catalog = Catalog::new(&[]);
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToCluster);
    let crd = cat(&[
        ld(1, metadata("averyveryverylongpluralname.short.io", &[])),
        ld(2, ld(1, "short.io")),
    ]);
    assert!(matches!(
        rw.rewrite_bytes(&envelope(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinition",
            &crd
        )),
        Err(RewriteError::TooLong { .. })
    ));
}

#[test]
fn custom_fields_of_the_config_apply_to_protobuf_too() {
    // A config `fields` entry for a built-in kind reaches protobuf through
    // the same catalog.
    let custom = CustomField {
        group: String::new(),
        kind: "Event".into(),
        path: FieldPath::parse("reason").unwrap(),
        form: Form::Group,
    };
    let map = map();
    let catalog = Catalog::new(&[custom]);
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let ev = cat(&[ld(1, metadata("e", &[])), ld(3, CLUSTER), ld(4, CLUSTER)]);
    let out = rw
        .rewrite_bytes(&envelope("v1", "Event", &ev))
        .unwrap()
        .unwrap();
    assert_eq!(
        out,
        envelope(
            "v1",
            "Event",
            &cat(&[ld(1, metadata("e", &[])), ld(3, APP), ld(4, CLUSTER)])
        )
    );
}

#[test]
fn a_config_field_at_a_status_name_is_renamed_once() {
    // The config's place at `details.name` has the field; the catalog's
    // `details` place doesn't edit the same bytes again.
    let custom = CustomField {
        group: String::new(),
        kind: "Status".into(),
        path: FieldPath::parse("details.name").unwrap(),
        form: Form::QualifiedName,
    };
    let map = map();
    let catalog = Catalog::new(&[custom]);
    let rw = ProtoRewriter::new(&map, &catalog, Direction::ToApp);
    let crd = |name: &str| {
        enveloped_status(&not_found(
            name,
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        ))
    };
    let out = rw
        .rewrite_bytes(&crd(&format!("foos.{CLUSTER}")))
        .unwrap()
        .unwrap();
    assert_eq!(out, crd(&format!("foos.{APP}")));
}

/// Every built-in catalog place reaches a field in at least one message of
/// its kinds, except the forms the apiserver doesn't serve in protobuf.
#[test]
fn every_catalog_place_reaches_a_protobuf_field() {
    const NOT_IN_PROTOBUF: &[(&str, &str)] = &[
        ("Table", "Table is not protobuf-serializable"),
        ("AdmissionReview", "webhook reviews are JSON"),
        ("ConversionReview", "webhook reviews are JSON"),
        (
            "APIGroupDiscovery",
            "aggregated discovery is not in core/proto",
        ),
        (
            "APIGroupDiscoveryList",
            "aggregated discovery is not in core/proto",
        ),
    ];
    // Places whose fields core/proto leaves out (see its README): clients
    // read CRDs as JSON, and the mutations' CEL is renamed in JSON only.
    const PATHS_NOT_IN_PROTOBUF: &[&str] = &[
        "spec.versions[].schema.openAPIV3Schema",
        "spec.mutations[].applyConfiguration.expression",
        "spec.mutations[].jsonPatch.expression",
    ];
    let catalog = Catalog::new(&[]);
    let kinds = known_kinds();
    let generic = [
        descriptor_pool()
            .get_message_by_name("regroup.v1.GenericObject")
            .unwrap(),
        descriptor_pool()
            .get_message_by_name("regroup.v1.GenericList")
            .unwrap(),
    ];
    let mut missing = Vec::new();
    let mut reached = 0;
    for place in catalog.places() {
        let (groups, place_kinds): (Vec<&str>, Vec<&str>) = match &place.selector {
            Selector::Kinds { groups, kinds } => (
                groups.iter().map(String::as_str).collect(),
                kinds.iter().map(String::as_str).collect(),
            ),
            Selector::AnyObject | Selector::AnyList => (vec![], vec![]),
        };
        let candidates: Vec<_> = if place_kinds.is_empty() {
            generic.to_vec()
        } else {
            kinds
                .iter()
                .filter(|(g, _, k, _)| groups.contains(g) && place_kinds.contains(&k.as_str()))
                .map(|(_, _, _, m)| m.clone())
                .collect()
        };
        let root_api_version = place.path.to_string() == "apiVersion";
        let ok = root_api_version
            || candidates
                .iter()
                .any(|m| translate_path(m, &place.path).is_some());
        let excused = place_kinds
            .iter()
            .any(|k| NOT_IN_PROTOBUF.iter().any(|(x, _)| x == k))
            || PATHS_NOT_IN_PROTOBUF.contains(&place.path.to_string().as_str());
        if ok {
            reached += 1;
        } else if !excused {
            missing.push(format!("{:?} {}", place_kinds, place.path));
        }
    }
    assert!(
        missing.is_empty(),
        "places with no protobuf field:\n{}",
        missing.join("\n")
    );
    assert!(reached >= 45, "{reached}");
    // Slots land on fields of the right type (exercised by the walker):
    // `items` of every list kind.
    for (g, v, k, m) in &kinds {
        // Discovery documents end in `List` without being lists.
        if k.ends_with("List") && !["APIGroupList", "APIResourceList"].contains(&k.as_str()) {
            let items = FieldPath::parse("items").unwrap();
            assert!(translate_path(m, &items).is_some(), "{g}/{v} {k}");
        }
    }
    // Slot kinds all appear.
    let slots: Vec<_> = catalog.places().iter().map(|p| p.slot).collect();
    assert!(slots.contains(&Slot::Items) && slots.contains(&Slot::Object));
}

#[test]
fn every_known_kind_decodes_as_its_message() {
    // Each table entry names a message with ObjectMeta (or ListMeta) where
    // Kubernetes has it, checked on an encoded DynamicMessage.
    for (g, v, k, m) in known_kinds() {
        let mut msg = DynamicMessage::new(m.clone());
        if let Some(f) = m.get_field_by_name("metadata") {
            assert!(
                f.number() == 1 || (k == "PartialObjectMetadataList" && v == "v1beta1"),
                "{g}/{v} {k}: metadata is field {}",
                f.number()
            );
            msg.set_field(
                &f,
                Value::Message(DynamicMessage::new(f.kind().as_message().unwrap().clone())),
            );
        }
        let bytes = msg.encode_to_vec();
        assert!(DynamicMessage::decode(m, bytes.as_slice()).is_ok());
    }
}

// Malformed input: errors, never panics, never reads or allocates from an
// unchecked length.

fn errors(input: &[u8]) -> RewriteError {
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, _) = rewriters(&map, &catalog);
    match to_app.rewrite_bytes(input) {
        Err(e) => e,
        Ok(r) => panic!("accepted: {r:?}"),
    }
}

#[test]
fn malformed_envelopes_are_errors() {
    let cm = ld(1, metadata("cm", &[&format!("{CLUSTER}/v1")]));
    // No magic.
    assert!(matches!(errors(&cm), RewriteError::Protobuf(_)));
    // Truncated anywhere: an error or (before the name) nothing to do.
    let whole = envelope("v1", "ConfigMap", &cm);
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, _) = rewriters(&map, &catalog);
    // (The last 4 bytes are the empty contentEncoding and contentType:
    // without them the envelope is whole.)
    for n in 0..whole.len() - 4 {
        let r = to_app.rewrite_bytes(&whole[..n]);
        assert!(r.is_err() || r == Ok(None), "prefix {n}: {r:?}");
    }
    // A hostile length: 2^62 bytes of raw.
    let mut hostile = MAGIC.to_vec();
    hostile.extend(ld(1, cat(&[ld(1, "v1"), ld(2, "ConfigMap")])));
    hostile.push(0x12);
    hostile.extend(varint(1 << 62));
    hostile.extend_from_slice(CLUSTER.as_bytes());
    assert!(matches!(errors(&hostile), RewriteError::Protobuf(m) if m.contains("exceeds")));
    // A place with the wrong wire type (ownerReferences as a varint).
    let meta = cat(&[ld(1, "cm"), vi(13, 5), ld(2, CLUSTER)]);
    assert!(matches!(
        errors(&envelope("v1", "ConfigMap", &ld(1, meta))),
        RewriteError::Protobuf(_)
    ));
    // Groups.
    let meta = cat(&[ld(1, CLUSTER), vec![0x6b]]);
    assert!(matches!(
        errors(&envelope("v1", "ConfigMap", &ld(1, meta))),
        RewriteError::Protobuf(_)
    ));
    // An unsupported encoding of raw.
    let mut gz = MAGIC.to_vec();
    gz.extend(cat(&[
        ld(1, cat(&[ld(1, "v1"), ld(2, "ConfigMap")])),
        ld(2, &cm),
        ld(3, "gzip"),
    ]));
    assert!(matches!(errors(&gz), RewriteError::Protobuf(m) if m.contains("contentEncoding")));
}

#[test]
fn malformed_status_details_are_errors() {
    // A group or resource that isn't length-delimited, wherever it comes.
    let name = ld(1, format!("foos.{CLUSTER}"));
    let crd = ld(3, "customresourcedefinitions");
    for details in [
        cat(&[name.clone(), vi(2, 7), crd.clone()]),
        cat(&[vi(3, 7), ld(2, "apiextensions.k8s.io"), name.clone()]),
    ] {
        let status = envelope("v1", "Status", &ld(5, details));
        assert!(matches!(errors(&status), RewriteError::Protobuf(_)));
    }
    // A name that isn't, once the details say it carries a group.
    let details = cat(&[ld(2, "apiextensions.k8s.io"), crd, vi(1, 7), name]);
    let status = envelope("v1", "Status", &ld(5, details));
    assert!(matches!(errors(&status), RewriteError::Protobuf(_)));
}

#[test]
fn nested_envelopes_are_bounded() {
    // A watch event whose object is a v1 List whose item is a List ...
    let mut inner = envelope(
        "v1",
        "ConfigMap",
        &ld(1, metadata("cm", &[&format!("{CLUSTER}/v1")])),
    );
    for _ in 0..50 {
        inner = envelope("v1", "List", &cat(&[ld(1, ""), ld(2, ld(1, &inner))]));
    }
    assert!(matches!(errors(&inner), RewriteError::Protobuf(m) if m.contains("nested")));
    // A few levels are fine.
    let mut inner = envelope(
        "v1",
        "ConfigMap",
        &ld(1, metadata("cm", &[&format!("{CLUSTER}/v1")])),
    );
    for _ in 0..3 {
        inner = envelope("v1", "List", &cat(&[ld(1, ""), ld(2, ld(1, &inner))]));
    }
    for_app(&inner);
}

#[test]
fn corrupted_captures_never_panic() {
    // Every single-byte corruption of a real capture: an error or a result,
    // never a panic.
    let body = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/kube-1.24/renamed/099-get-apiservice-pom-protobuf/response.body"
    ))
    .unwrap();
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, _) = rewriters(&map, &catalog);
    for i in 0..body.len() {
        for b in [0x00, 0x7f, 0x80, 0xff, body[i] ^ 0x08] {
            let mut bad = body.clone();
            bad[i] = b;
            let _ = to_app.rewrite_bytes_addressed(&bad, "apiregistration.k8s.io", "APIService");
            let _ = to_app.rewrite_watch_frame(&bad[4..]);
        }
    }
}

#[test]
fn watch_stream_framing_errors() {
    let (map, catalog) = (map(), Catalog::new(&[]));
    let (to_app, _) = rewriters(&map, &catalog);
    // A frame longer than the limit is refused as soon as its length is read.
    let mut s = WatchStream::new(None, 1024);
    assert!(s.feed(&to_app, &[0xff, 0xff, 0xff, 0xff]).is_err());
    // A stream that ends inside a frame.
    let mut s = WatchStream::new(None, 1024);
    assert_eq!(
        s.feed(&to_app, &[0, 0, 0, 9, 1, 2]).unwrap(),
        Vec::<u8>::new()
    );
    assert!(s.finish().is_err());
    // A frame that isn't a WatchEvent.
    let frame = cat(&[vi(2, 1), ld(1, CLUSTER)]);
    let mut body = (frame.len() as u32).to_be_bytes().to_vec();
    body.extend(&frame);
    let mut s = WatchStream::new(None, 1024);
    assert!(s.feed(&to_app, &body).is_err());
}

/// kubectl's last-applied configuration in a protobuf object's annotations
/// (a captured Deployment, testdata/kube-1.24/renamed/042): the JSON inside
/// renamed as the object it is, both ways, every other byte kept.
#[test]
fn last_applied_configuration_in_protobuf_annotations_is_renamed() {
    const KEY: &str = "kubectl.kubernetes.io/last-applied-configuration";
    let captured = std::fs::read(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/kube-1.24/renamed/042-get-deployment-protobuf/response.body"
    ))
    .unwrap();
    let (_, raw) = unwrap_envelope(&captured);
    let applied = |g: &str| {
        format!(
            "{{\"apiVersion\":\"apps/v1\",\"kind\":\"Deployment\",\"metadata\":{{\"annotations\":{{}},\"name\":\"d\",\"ownerReferences\":[{{\"apiVersion\":\"{g}/v1alpha1\",\"kind\":\"Foo\",\"name\":\"alpha\",\"uid\":\"u\"}}]}}}}\n"
        )
    };
    // The captured owner reference (a Foo) and one annotation, in `g`.
    let deployment = |g: &str, annotation: String| {
        let mut d = decode("k8s.io.api.apps.v1.Deployment", &raw);
        let mut meta = d
            .get_field_by_name("metadata")
            .unwrap()
            .as_message()
            .unwrap()
            .clone();
        let mut ann = std::collections::HashMap::new();
        ann.insert(
            prost_reflect::MapKey::String(KEY.into()),
            Value::String(annotation),
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
        d.set_field_by_name("metadata", Value::Message(meta));
        envelope("apps/v1", "Deployment", &d.encode_to_vec())
    };
    // prost-reflect encodes maps in no fixed order: compared decoded.
    let same = |a: &[u8], b: &[u8]| {
        let d = |x: &[u8]| decode("k8s.io.api.apps.v1.Deployment", &unwrap_envelope(x).1);
        assert_eq!(d(a), d(b));
    };
    same(
        &for_app(&deployment(CLUSTER, applied(CLUSTER))),
        &deployment(APP, applied(APP)),
    );
    // Not JSON: left as it is, the object otherwise renamed.
    let bad = format!("not json {CLUSTER}");
    same(
        &for_app(&deployment(CLUSTER, bad.clone())),
        &deployment(APP, bad),
    );
}
