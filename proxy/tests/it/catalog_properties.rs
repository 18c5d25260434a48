//! Every catalog row, in JSON (protobuf: `protobuf_properties.rs`, and
//! `new_places.rs` for the rows whose slots are map keys or requirements): an object of the row's kind carrying a group
//! at the row's place (in the row's form), renamed to the cluster and back,
//! is the same object, byte for byte; a mapped group leaves no byte of the
//! side it came from (no app name reaches the cluster, no cluster name the
//! app); an unmapped group is left exactly as it was.

use crate::common::EngineJson;
use proptest::prelude::*;
use regroup::rewrite::catalog::{Place, Selector, Slot};
use regroup::rewrite::Catalog;
use regroup_config::field_path::Step;
use regroup_config::{Direction, Form, GroupMap, MapRule, Rule};
use serde_json::{json, Value as Json};

fn map() -> GroupMap {
    let rule = |rule| MapRule {
        rule,
        reference_keys: true,
    };
    GroupMap::new(vec![
        rule(Rule::Exact {
            from: "samplecontroller.k8s.io".into(),
            to: "samplecontroller.team1.example.com".into(),
        }),
        rule(Rule::Suffix {
            from: "pinniped.dev".into(),
            to: "pinniped.team1.example.com".into(),
        }),
    ])
    .unwrap()
}

/// The app's side of every rule (what must not reach the cluster) and the
/// cluster's (what must not reach the app).
const APP_NEEDLES: &[&str] = &["samplecontroller.k8s.io", "pinniped.dev"];
const CLUSTER_NEEDLES: &[&str] = &[
    "samplecontroller.team1.example.com",
    "pinniped.team1.example.com",
];

/// A group as the app names it: mapped (exactly, or under a suffix) or not.
fn app_group() -> impl Strategy<Value = (String, bool)> {
    prop_oneof![
        Just(("samplecontroller.k8s.io".to_owned(), true)),
        Just(("pinniped.dev".to_owned(), true)),
        "[a-z][a-z0-9]{0,8}(\\.[a-z][a-z0-9]{0,6}){0,2}"
            .prop_map(|p| (format!("{p}.pinniped.dev"), true)),
        "[a-z][a-z0-9]{0,8}".prop_map(|p| (format!("{p}.example.org"), false)),
    ]
}

fn value(form: Form, g: &str) -> Json {
    Json::from(match form {
        Form::Group => g.to_owned(),
        Form::ApiVersion => format!("{g}/v1alpha1"),
        Form::QualifiedName => format!("foos.{g}"),
        Form::Text => format!("foos.{g} \"alpha\" not found; see foos.{g}."),
        Form::FieldSelector => {
            format!("involvedObject.apiVersion={g}/v1alpha1,involvedObject.name=x")
        }
        Form::GroupKinds => format!("ConfigMap,Foo.{g},Deployment.apps"),
        Form::ObjectCount => format!("count/foos.{g}"),
        Form::Cel => format!("request.resource.group == '{g}' && x != 'y'"),
        Form::Literal => g.to_owned(),
        Form::ResourceName => format!("issuers.{g}/ns.ca"),
        other => panic!("no JSON catalog place has form {other:?}"),
    })
}

/// Puts `leaf` at `steps` under `root` (one element per `[]`).
fn put(root: &mut Json, steps: &[Step], leaf: Json) {
    match steps.split_first() {
        None => *root = leaf,
        Some((Step::Key(k), rest)) => {
            if !root.is_object() {
                *root = json!({});
            }
            let child = root
                .as_object_mut()
                .unwrap()
                .entry(k.clone())
                .or_insert(Json::Null);
            put(child, rest, leaf);
        }
        Some((Step::Each, rest)) => {
            if !root.is_array() {
                *root = json!([]);
            }
            let a = root.as_array_mut().unwrap();
            if a.is_empty() {
                a.push(Json::Null);
            }
            put(&mut a[0], rest, leaf);
        }
    }
}

fn api_version(group: &str) -> String {
    if group.is_empty() {
        "v1".into()
    } else {
        format!("{group}/v1")
    }
}

/// The objects that exercise `place` with group `g` (app names): one per
/// kind the row selects.
fn objects(place: &Place, g: &str) -> Vec<Json> {
    let crd = |g: &str| {
        json!({"kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1",
               "metadata": {"name": format!("foos.{g}")}, "spec": {"group": g}})
    };
    let kinds: Vec<(String, String)> = match (&place.selector, place.slot) {
        (_, Slot::DropHidden) => vec![(
            "apiextensions.k8s.io".into(),
            "CustomResourceDefinitionList".into(),
        )],
        (Selector::AnyObject, _) => vec![("".into(), "ConfigMap".into())],
        (Selector::AnyList, _) => vec![("".into(), "ConfigMapList".into())],
        (Selector::Kinds { groups, kinds }, _) => kinds
            .iter()
            .map(|k| (groups[0].clone(), k.clone()))
            .collect(),
    };
    kinds
        .into_iter()
        .map(|(group, kind)| {
            let mut o = json!({"apiVersion": api_version(&group), "kind": kind});
            // Exhaustive: a new kind of slot needs its object here.
            let leaf = match place.slot {
                Slot::Value(form) => value(form, g),
                Slot::Object => json!({"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo",
                    "metadata": {"name": "x",
                        "ownerReferences": [{"apiVersion": format!("{g}/v1")}]}}),
                Slot::Items => json!([{"metadata": {"name": "x",
                    "ownerReferences": [{"apiVersion": format!("{g}/v1")}]}}]),
                Slot::JsonString(inner, form) => {
                    let mut e = json!({});
                    put(
                        &mut e,
                        regroup_config::field_path::FieldPath::parse(inner)
                            .unwrap()
                            .steps(),
                        value(form, g),
                    );
                    Json::from(serde_json::to_string(&json!([e])).unwrap())
                }
                // Added only with `metadata:` rules or `names.shortNamePrefix`,
                // which these properties don't configure
                // (core/src/rewrite/json/metadata/tests.rs, tests/it/short_names.rs).
                Slot::Labels
                | Slot::LabelRequirement { .. }
                | Slot::FieldsV1
                | Slot::ShortForm { .. } => {
                    unreachable!("not a built-in place")
                }
                Slot::JsonObject => Json::from(
                    json!({"apiVersion": format!("{g}/v1alpha1"), "kind": "Foo",
                        "metadata": {"name": "x",
                            "ownerReferences": [{"apiVersion": format!("{g}/v1")}]}})
                    .to_string(),
                ),
                Slot::DropShadowed(sub) => {
                    let mut e = json!({});
                    put(
                        &mut e,
                        regroup_config::field_path::FieldPath::parse(sub)
                            .unwrap()
                            .steps(),
                        value(Form::Group, g),
                    );
                    json!([e])
                }
                Slot::NameOf {
                    group,
                    resource,
                    name,
                } => json!({group: "apiextensions.k8s.io",
                    resource: "customresourcedefinitions", name: format!("foos.{g}")}),
                // A reference to a CRD: its name carries the group.
                Slot::NamedRef(m) => {
                    let api = match m.api_form {
                        regroup_config::Form::ApiVersion => "apiextensions.k8s.io/v1",
                        _ => "apiextensions.k8s.io",
                    };
                    let mut r = json!({});
                    for (path, v) in [
                        (m.api, json!(api)),
                        (m.kind, json!("CustomResourceDefinition")),
                        (m.name, json!(format!("foos.{g}"))),
                    ] {
                        let path = regroup_config::field_path::FieldPath::parse(path).unwrap();
                        put(&mut r, path.steps(), v);
                    }
                    r
                }
                // A schema pinning the group in an `enum`, a `default`
                // and a CEL rule, one level down.
                Slot::JsonSchema => json!({"type": "object", "properties": {"group": {
                    "type": "string", "enum": [g, "apps"], "default": g,
                    "x-kubernetes-validations": [{"rule": format!("self == '{g}'")}]}}}),
                Slot::Keys(form) => {
                    let key = value(form, g);
                    json!({key.as_str().unwrap(): "10", "pods": "5"})
                }
                Slot::Requirement { key, values } => json!({
                    key: "involvedObject.apiVersion", "operator": "In",
                    values: [format!("{g}/v1alpha1"), "v1"]}),
                Slot::Base64JsonPatch => {
                    use base64::Engine as _;
                    let ops = json!([{"op": "add",
                        "path": "/metadata/ownerReferences/0/apiVersion",
                        "value": format!("{g}/v1")}]);
                    Json::from(
                        base64::engine::general_purpose::STANDARD
                            .encode(serde_json::to_vec(&ops).unwrap()),
                    )
                }
                Slot::DropHidden => {
                    let mut item = crd(g);
                    let m = item.as_object_mut().unwrap();
                    m.remove("kind");
                    m.remove("apiVersion");
                    json!([item])
                }
                Slot::TableRows {
                    columns,
                    cells,
                    object,
                } => {
                    o[columns] = json!([{"name": "Name", "format": "name"},
                                        {"name": "Age", "format": ""}]);
                    json!([{cells: [format!("foos.{g}"), "1s"], object: crd(g)}])
                }
            };
            put(&mut o, place.path.steps(), leaf);
            o
        })
        .collect()
}

fn contains_any(bytes: &[u8], needles: &[&str]) -> bool {
    needles
        .iter()
        .any(|n| bytes.windows(n.len()).any(|w| w == n.as_bytes()))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn every_catalog_row_round_trips_and_leaves_no_name_of_the_other_side(
        (g, mapped) in app_group()
    ) {
        let map = map();
        let catalog = Catalog::new(&[]);
        let to_cluster = EngineJson::new(&map, &catalog, Direction::ToCluster);
        let to_app = EngineJson::new(&map, &catalog, Direction::ToApp);
        let mut rows = 0;
        for place in catalog.places() {
            for o in objects(place, &g) {
                let app = serde_json::to_vec(&o).unwrap();
                let cluster = to_cluster.rewrite_bytes(&app).unwrap();
                let what = format!("{} {:?}: {}", place.path, place.slot, String::from_utf8_lossy(&app));
                if !mapped {
                    prop_assert!(cluster.is_none(), "unmapped renamed: {}", what);
                    continue;
                }
                let cluster = cluster.unwrap_or_else(|| panic!("nothing renamed: {what}"));
                prop_assert!(
                    !contains_any(&cluster, APP_NEEDLES),
                    "an app name reaches the cluster: {}", String::from_utf8_lossy(&cluster)
                );
                let back = to_app.rewrite_bytes(&cluster).unwrap().expect("renamed back");
                prop_assert!(
                    !contains_any(&back, CLUSTER_NEEDLES),
                    "a cluster name reaches the app: {}", String::from_utf8_lossy(&back)
                );
                prop_assert_eq!(
                    String::from_utf8_lossy(&back),
                    String::from_utf8_lossy(&app),
                    "{}", what
                );
                rows += 1;
            }
        }
        if mapped {
            prop_assert!(rows >= catalog.places().len(), "only {} objects", rows);
        }
    }
}
