//! OpenAPI v2 protobuf: the real capture renamed for the app reads like the
//! original world, agrees with the JSON rewriter, and malformed input is
//! refused without panicking.

use std::collections::BTreeSet;

use prost_reflect::{DynamicMessage, MessageDescriptor, ReflectMessage, Value};

use super::*;
use crate::rewrite::openapi::OpenApiRewriter;
use crate::rewrite::protobuf::descriptor_pool;
use regroup_config::{MapRule, Rule};

const APP: &str = "samplecontroller.k8s.io";
const CLUSTER: &str = "samplecontroller.team1.example.com";

fn map() -> GroupMap {
    GroupMap::new(vec![MapRule {
        rule: Rule::Exact {
            from: APP.into(),
            to: CLUSTER.into(),
        },
        reference_keys: true,
    }])
    .unwrap()
}

fn capture(path: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/../testdata/kube-1.24/{path}/response.body",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn proto_capture() -> Vec<u8> {
    capture("common/013-openapi-v2-protobuf")
}

fn message(name: &str) -> MessageDescriptor {
    descriptor_pool()
        .get_message_by_name(&format!("openapi.v2.{name}"))
        .unwrap_or_else(|| panic!("openapi.v2.{name} in proto/openapiv2.proto"))
}

fn decode(bytes: &[u8]) -> DynamicMessage {
    DynamicMessage::decode(message("Document"), bytes).expect("decodes as openapi.v2.Document")
}

fn child(m: &DynamicMessage, name: &str) -> DynamicMessage {
    match m.get_field_by_name(name).unwrap().as_ref() {
        Value::Message(c) => c.clone(),
        v => panic!("{name}: {v:?}"),
    }
}

fn list(m: &DynamicMessage, name: &str) -> Vec<DynamicMessage> {
    match m.get_field_by_name(name).unwrap().as_ref() {
        Value::List(l) => l
            .iter()
            .map(|v| v.as_message().expect("a message").clone())
            .collect(),
        v => panic!("{name}: {v:?}"),
    }
}

fn string(m: &DynamicMessage, name: &str) -> String {
    m.get_field_by_name(name)
        .unwrap()
        .as_str()
        .expect("a string")
        .to_owned()
}

/// (name, value) of `Document.paths.path` and of
/// `Document.definitions.additional_properties`.
/// `(name, value)` entries of a named map.
type Entries = Vec<(String, DynamicMessage)>;

fn entries(doc: &DynamicMessage) -> (Entries, Entries) {
    let named = |l: Vec<DynamicMessage>| {
        l.into_iter()
            .map(|e| (string(&e, "name"), child(&e, "value")))
            .collect::<Vec<_>>()
    };
    (
        named(list(&child(doc, "paths"), "path")),
        named(list(&child(doc, "definitions"), "additional_properties")),
    )
}

fn find<'m>(es: &'m [(String, DynamicMessage)], name: &str) -> &'m DynamicMessage {
    &es.iter()
        .find(|(n, _)| n == name)
        .unwrap_or_else(|| panic!("{name}"))
        .1
}

/// Operation ids and tags embed a camel-cased group; they are not renamed.
fn without_operation_names(m: &mut DynamicMessage) {
    if m.descriptor().full_name() == "openapi.v2.Operation" {
        m.clear_field_by_name("operation_id");
        m.clear_field_by_name("tags");
    }
    for (_, v) in m.fields_mut() {
        match v {
            Value::Message(c) => without_operation_names(c),
            Value::List(l) => {
                for e in l {
                    if let Value::Message(c) = e {
                        without_operation_names(c);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The raw bytes of each `(name, entry)` of paths (field 8 / 2) and
/// definitions (field 9 / 1), read with the module's own wire reader.
fn raw_entries(buf: &[u8]) -> Vec<(String, Vec<u8>)> {
    let fields = |start: usize, end: usize| {
        let mut v = Vec::new();
        let mut pos = start;
        while pos < end {
            let f = next_field(buf, pos, end).unwrap();
            pos = f.end;
            v.push(f);
        }
        v
    };
    let mut out = Vec::new();
    for top in fields(0, buf.len()) {
        let inner = match top.number {
            8 => 2,
            9 => 1,
            _ => continue,
        };
        for e in fields(top.value_start, top.end) {
            if e.number == inner {
                let name = last_string(buf, e.value_start, e.end, 1)
                    .unwrap()
                    .unwrap()
                    .to_owned();
                out.push((name, buf[e.start..e.end].to_vec()));
            }
        }
    }
    out
}

fn to_app(input: &[u8]) -> Vec<u8> {
    let map = map();
    OpenApiProtoRewriter::new(&map, Direction::ToApp)
        .rewrite_bytes(input)
        .unwrap()
        .expect("something renamed")
}

#[test]
fn field_numbers_are_gnostics_as_declared_in_the_proto() {
    // Every field the walker acts on, with its name in proto/openapiv2.proto
    // (whose numbers were taken from gnostic's OpenAPIv2.proto).
    let table: &[(Kind, &str, u32, &str)] = &[
        (Kind::Document, "Document", 2, "info"),
        (Kind::Document, "Document", 8, "paths"),
        (Kind::Document, "Document", 9, "definitions"),
        (Kind::Document, "Document", 10, "parameters"),
        (Kind::Document, "Document", 11, "responses"),
        (Kind::Document, "Document", 16, "vendor_extension"),
        (Kind::Info, "Info", 7, "vendor_extension"),
        (Kind::Paths, "Paths", 1, "vendor_extension"),
        (Kind::Paths, "Paths", 2, "path"),
        (Kind::PathEntry, "NamedPathItem", 1, "name"),
        (Kind::PathEntry, "NamedPathItem", 2, "value"),
        (Kind::PathItem, "PathItem", 1, "_ref"),
        (Kind::PathItem, "PathItem", 2, "get"),
        (Kind::PathItem, "PathItem", 3, "put"),
        (Kind::PathItem, "PathItem", 4, "post"),
        (Kind::PathItem, "PathItem", 5, "delete"),
        (Kind::PathItem, "PathItem", 6, "options"),
        (Kind::PathItem, "PathItem", 7, "head"),
        (Kind::PathItem, "PathItem", 8, "patch"),
        (Kind::PathItem, "PathItem", 9, "parameters"),
        (Kind::PathItem, "PathItem", 10, "vendor_extension"),
        (Kind::Operation, "Operation", 8, "parameters"),
        (Kind::Operation, "Operation", 9, "responses"),
        (Kind::Operation, "Operation", 13, "vendor_extension"),
        (Kind::ParametersItem, "ParametersItem", 1, "parameter"),
        (Kind::ParametersItem, "ParametersItem", 2, "json_reference"),
        (Kind::JsonReference, "JsonReference", 1, "_ref"),
        (Kind::Parameter, "Parameter", 1, "body_parameter"),
        (Kind::Parameter, "Parameter", 2, "non_body_parameter"),
        (Kind::BodyParameter, "BodyParameter", 5, "schema"),
        (Kind::BodyParameter, "BodyParameter", 6, "vendor_extension"),
        (
            Kind::NonBodyParameter,
            "NonBodyParameter",
            1,
            "header_parameter_sub_schema",
        ),
        (
            Kind::NonBodyParameter,
            "NonBodyParameter",
            2,
            "form_data_parameter_sub_schema",
        ),
        (
            Kind::NonBodyParameter,
            "NonBodyParameter",
            3,
            "query_parameter_sub_schema",
        ),
        (
            Kind::NonBodyParameter,
            "NonBodyParameter",
            4,
            "path_parameter_sub_schema",
        ),
        (Kind::SubSchema22, "HeaderParameterSubSchema", 7, "items"),
        (
            Kind::SubSchema22,
            "HeaderParameterSubSchema",
            22,
            "vendor_extension",
        ),
        (Kind::SubSchema22, "PathParameterSubSchema", 7, "items"),
        (
            Kind::SubSchema22,
            "PathParameterSubSchema",
            22,
            "vendor_extension",
        ),
        (Kind::SubSchema23, "QueryParameterSubSchema", 8, "items"),
        (
            Kind::SubSchema23,
            "QueryParameterSubSchema",
            23,
            "vendor_extension",
        ),
        (Kind::SubSchema23, "FormDataParameterSubSchema", 8, "items"),
        (
            Kind::SubSchema23,
            "FormDataParameterSubSchema",
            23,
            "vendor_extension",
        ),
        (Kind::PrimitivesItems, "PrimitivesItems", 3, "items"),
        (
            Kind::PrimitivesItems,
            "PrimitivesItems",
            18,
            "vendor_extension",
        ),
        (Kind::Responses, "Responses", 1, "response_code"),
        (Kind::Responses, "Responses", 2, "vendor_extension"),
        (Kind::NamedResponseValue, "NamedResponseValue", 2, "value"),
        (Kind::ResponseValue, "ResponseValue", 1, "response"),
        (Kind::ResponseValue, "ResponseValue", 2, "json_reference"),
        (Kind::Response, "Response", 2, "schema"),
        (Kind::Response, "Response", 5, "vendor_extension"),
        (Kind::SchemaItem, "SchemaItem", 1, "schema"),
        (Kind::SchemaItem, "SchemaItem", 2, "file_schema"),
        (Kind::FileSchema, "FileSchema", 10, "vendor_extension"),
        (Kind::Definitions, "Definitions", 1, "additional_properties"),
        (Kind::DefinitionEntry, "NamedSchema", 1, "name"),
        (Kind::DefinitionEntry, "NamedSchema", 2, "value"),
        (
            Kind::ParameterDefinitions,
            "ParameterDefinitions",
            1,
            "additional_properties",
        ),
        (Kind::NamedParameter, "NamedParameter", 2, "value"),
        (
            Kind::ResponseDefinitions,
            "ResponseDefinitions",
            1,
            "additional_properties",
        ),
        (Kind::NamedResponse, "NamedResponse", 2, "value"),
        (Kind::Schema, "Schema", 1, "_ref"),
        (Kind::Schema, "Schema", 21, "additional_properties"),
        (Kind::Schema, "Schema", 23, "items"),
        (Kind::Schema, "Schema", 24, "all_of"),
        (Kind::Schema, "Schema", 25, "properties"),
        (Kind::Schema, "Schema", 31, "vendor_extension"),
        (
            Kind::AdditionalPropertiesItem,
            "AdditionalPropertiesItem",
            1,
            "schema",
        ),
        (Kind::ItemsItem, "ItemsItem", 1, "schema"),
        (Kind::Properties, "Properties", 1, "additional_properties"),
        (Kind::NamedSchema, "NamedSchema", 2, "value"),
        (Kind::NamedAny, "NamedAny", 2, "value"),
        (Kind::GvkAny, "Any", 2, "yaml"),
    ];
    for &(kind, msg, number, name) in table {
        let d = message(msg);
        let f = d
            .get_field(number)
            .unwrap_or_else(|| panic!("{msg}.{number}"));
        assert_eq!(f.name(), name, "{msg}.{number}");
        assert_ne!(action(kind, number), Action::Copy, "{kind:?}.{number}");
        // The message a Message/Entry action descends into is the field's.
        if let Action::Message(k) | Action::Entry(k) = action(kind, number) {
            let target = f.kind();
            let target = target.as_message().expect("a message field");
            let walked: Vec<&str> = table.iter().filter(|t| t.0 == k).map(|t| t.1).collect();
            assert!(
                walked.is_empty() || walked.contains(&target.name()),
                "{msg}.{name} is {} but walked as {k:?}",
                target.name()
            );
        }
    }
}

#[test]
fn the_capture_decodes_with_the_subset() {
    let doc = decode(&proto_capture());
    assert_eq!(string(&doc, "swagger"), "2.0");
    let (paths, defs) = entries(&doc);
    assert!(
        paths.len() > 400 && defs.len() > 400,
        "{} {}",
        paths.len(),
        defs.len()
    );
    let foo = find(&defs, "io.k8s.samplecontroller.v1alpha1.Foo");
    let gvk = list(foo, "vendor_extension")
        .into_iter()
        .find(|e| string(e, "name") == GVK_EXTENSION)
        .expect("a GVK extension");
    assert_eq!(
        string(&child(&gvk, "value"), "yaml"),
        "- group: samplecontroller.k8s.io\n  kind: Foo\n  version: v1alpha1\n"
    );
    let list_def = find(&defs, "io.k8s.samplecontroller.v1alpha1.FooList");
    let items = list(&child(list_def, "properties"), "additional_properties")
        .into_iter()
        .find(|p| string(p, "name") == "items")
        .unwrap();
    let item = &list(&child(&child(&items, "value"), "items"), "schema")[0];
    assert_eq!(
        string(item, "_ref"),
        "#/definitions/io.k8s.samplecontroller.v1alpha1.Foo"
    );
}

#[test]
fn capture_renamed_for_the_app_reads_like_the_original_world() {
    let input = proto_capture();
    let out = to_app(&input);
    let before = decode(&input);
    let after = decode(&out);
    let (in_paths, in_defs) = entries(&before);
    let (out_paths, out_defs) = entries(&after);

    let ours = |es: &[(String, DynamicMessage)]| -> Vec<String> {
        let mut v: Vec<String> = es
            .iter()
            .map(|e| e.0.clone())
            .filter(|n| n.contains("samplecontroller"))
            .collect();
        v.sort();
        v
    };
    assert_eq!(ours(&in_defs).len(), 8, "both worlds upstream");
    assert_eq!(
        ours(&out_defs),
        [
            "io.k8s.samplecontroller.v1alpha1.Foo",
            "io.k8s.samplecontroller.v1alpha1.FooList",
            "io.k8s.samplecontroller.v1beta1.Foo",
            "io.k8s.samplecontroller.v1beta1.FooList"
        ]
    );
    for name in ours(&out_defs) {
        let cluster_name = name.replace(
            "io.k8s.samplecontroller",
            "com.example.team1.samplecontroller",
        );
        let want = find(&in_defs, &name);
        // Sanity: the renamed world's definition differed before renaming.
        assert_ne!(find(&in_defs, &cluster_name), want, "{name}");
        assert_eq!(find(&out_defs, &name), want, "{name}");
    }

    let app_prefix = format!("/apis/{APP}/");
    let upstream_paths: Vec<&String> = in_paths
        .iter()
        .map(|p| &p.0)
        .filter(|p| p.starts_with(&app_prefix))
        .collect();
    let out_ours: Vec<&(String, DynamicMessage)> = out_paths
        .iter()
        .filter(|p| p.0.contains("samplecontroller"))
        .collect();
    assert!(!upstream_paths.is_empty());
    assert_eq!(out_ours.len(), upstream_paths.len());
    for (p, item) in out_ours {
        assert!(p.starts_with(&app_prefix), "{p}");
        let mut got = item.clone();
        let mut want = find(&in_paths, p).clone();
        without_operation_names(&mut got);
        without_operation_names(&mut want);
        assert_eq!(got, want, "{p}");
    }

    let has = |hay: &[u8], needle: &str| hay.windows(needle.len()).any(|w| w == needle.as_bytes());
    assert!(has(&input, CLUSTER) && has(&input, "com.example.team1.samplecontroller"));
    assert!(!has(&out, CLUSTER));
    assert!(!has(&out, "com.example.team1.samplecontroller"));

    // Everything else is byte for byte what came, in the same order.
    let others = |b: &[u8]| -> Vec<(String, Vec<u8>)> {
        raw_entries(b)
            .into_iter()
            .filter(|e| !e.0.contains("samplecontroller"))
            .collect()
    };
    let (o_in, o_out) = (others(&input), others(&out));
    assert!(o_in.len() > 500, "{}", o_in.len());
    assert!(o_in == o_out, "other paths and definitions are unchanged");
    // And the top-level fields other than paths and definitions too.
    let top = |b: &[u8]| -> Vec<Vec<u8>> {
        let mut v = Vec::new();
        let mut pos = 0;
        while pos < b.len() {
            let f = next_field(b, pos, b.len()).unwrap();
            pos = f.end;
            if f.number != 8 && f.number != 9 {
                v.push(b[f.start..f.end].to_vec());
            }
        }
        v
    };
    assert_eq!(top(&input), top(&out));
}

#[test]
fn protobuf_and_json_rewrites_name_the_same_paths_and_definitions() {
    let map = map();
    let json_in = capture("common/012-openapi-v2-json");
    let json_out = OpenApiRewriter::new(&map, Direction::ToApp, "-t")
        .rewrite_bytes(&json_in)
        .unwrap()
        .unwrap();
    let json: serde_json::Value = serde_json::from_slice(&json_out).unwrap();
    let keys =
        |k: &str| -> BTreeSet<String> { json[k].as_object().unwrap().keys().cloned().collect() };
    let doc = decode(&to_app(&proto_capture()));
    let (paths, defs) = entries(&doc);
    let names = |es: &[(String, DynamicMessage)]| -> BTreeSet<String> {
        es.iter().map(|e| e.0.clone()).collect()
    };
    assert_eq!(names(&defs), keys("definitions"));
    assert_eq!(names(&paths), keys("paths"));
    // No duplicates either.
    assert_eq!(names(&defs).len(), defs.len());
    assert_eq!(names(&paths).len(), paths.len());
}

#[test]
fn to_cluster_maps_the_apps_world_back() {
    // Rewriting the app's view for the cluster restores the cluster's names
    // and drops the cluster-named upstream entries that were left.
    let map = map();
    let for_app = to_app(&proto_capture());
    let back = OpenApiProtoRewriter::new(&map, Direction::ToCluster)
        .rewrite_bytes(&for_app)
        .unwrap()
        .unwrap();
    let (paths, defs) = entries(&decode(&back));
    assert!(defs
        .iter()
        .any(|d| d.0 == "com.example.team1.samplecontroller.v1alpha1.Foo"));
    assert!(!defs
        .iter()
        .any(|d| d.0.starts_with("io.k8s.samplecontroller")));
    assert!(paths
        .iter()
        .filter(|p| p.0.contains("samplecontroller"))
        .all(|p| p.0.starts_with(&format!("/apis/{CLUSTER}/"))));
}

// ---- synthetic documents ----

fn len_field(number: u32, value: &[u8]) -> Vec<u8> {
    let mut b = Vec::new();
    put_varint(u64::from(number) << 3 | 2, &mut b);
    put_varint(value.len() as u64, &mut b);
    b.extend_from_slice(value);
    b
}

fn named(name: &str, value: &[u8]) -> Vec<u8> {
    [len_field(1, name.as_bytes()), len_field(2, value)].concat()
}

fn gvk_ext(yaml: &str) -> Vec<u8> {
    named(GVK_EXTENSION, &len_field(2, yaml.as_bytes()))
}

fn schema_ref(r: &str) -> Vec<u8> {
    len_field(1, r.as_bytes())
}

fn doc(paths: &[(&str, Vec<u8>)], defs: &[(&str, Vec<u8>)]) -> Vec<u8> {
    let mut b = len_field(1, b"2.0");
    let p: Vec<u8> = paths
        .iter()
        .flat_map(|(n, v)| len_field(2, &named(n, v)))
        .collect();
    b.extend(len_field(8, &p));
    let d: Vec<u8> = defs
        .iter()
        .flat_map(|(n, v)| len_field(1, &named(n, v)))
        .collect();
    b.extend(len_field(9, &d));
    b
}

fn rw(input: &[u8], dir: Direction) -> Result<Option<Vec<u8>>, RewriteError> {
    let map = map();
    OpenApiProtoRewriter::new(&map, dir).rewrite_bytes(input)
}

#[test]
fn nothing_to_rename_is_none() {
    let d = doc(
        &[("/api/v1/pods", vec![])],
        &[("io.k8s.api.core.v1.Pod", schema_ref("#/definitions/x"))],
    );
    assert_eq!(rw(&d, Direction::ToApp).unwrap(), None);
    // A mapped name in a place that is not renamed: parsed, still None.
    let d = doc(
        &[(
            "/api/v1/pods",
            len_field(2, &len_field(3, b"see samplecontroller.team1.example.com")),
        )],
        &[],
    );
    assert_eq!(rw(&d, Direction::ToApp).unwrap(), None);
}

#[test]
fn paths_definitions_refs_and_gvks_are_renamed_and_shadowed_dropped() {
    let op = |gvk: &str| len_field(13, &gvk_ext(gvk)); // Operation.vendor_extension
    let body_param = |r: &str| {
        // ParametersItem{parameter: Parameter{body_parameter: {schema}}}
        len_field(
            8,
            &len_field(1, &len_field(1, &len_field(5, &schema_ref(r)))),
        )
    };
    let get = [
        op("group: samplecontroller.team1.example.com\nkind: Foo\nversion: v1\n"),
        body_param("#/definitions/com.example.team1.samplecontroller.v1.Foo"),
        len_field(5, b"listSamplecontrollerTeam1ExampleComV1Foo"),
    ]
    .concat();
    let foo = [
        // properties: {spec: {$ref}}
        len_field(
            25,
            &len_field(
                1,
                &named(
                    "spec",
                    &schema_ref("#/definitions/com.example.team1.samplecontroller.v1.Spec"),
                ),
            ),
        ),
        len_field(
            31,
            &gvk_ext(
                "- group: \"samplecontroller.team1.example.com\"\n  kind: Foo\n  version: v1\n",
            ),
        ),
        // An unknown field, copied as it came.
        vec![0xf8, 0x07, 0x2a],
    ]
    .concat();
    let d = doc(
        &[
            ("/api/v1/pods", len_field(2, b"untouched")),
            (
                "/apis/samplecontroller.team1.example.com/v1/foos",
                len_field(2, &get),
            ),
            ("/apis/samplecontroller.k8s.io/v1/foos", len_field(2, &get)),
        ],
        &[
            ("com.example.team1.samplecontroller.v1.Foo", foo.clone()),
            ("io.k8s.samplecontroller.v1.Foo", foo.clone()),
            ("io.k8s.api.core.v1.Pod", schema_ref("#/definitions/a.b")),
        ],
    );
    let out = rw(&d, Direction::ToApp).unwrap().unwrap();
    let app = |s: &str| {
        s.replace(CLUSTER, APP).replace(
            "com.example.team1.samplecontroller",
            "io.k8s.samplecontroller",
        )
    };
    let get_app = [
        op(&app(
            "group: samplecontroller.team1.example.com\nkind: Foo\nversion: v1\n",
        )),
        body_param(&app(
            "#/definitions/com.example.team1.samplecontroller.v1.Foo",
        )),
        len_field(5, b"listSamplecontrollerTeam1ExampleComV1Foo"),
    ]
    .concat();
    let foo_app = [
        len_field(
            25,
            &len_field(
                1,
                &named(
                    "spec",
                    &schema_ref("#/definitions/io.k8s.samplecontroller.v1.Spec"),
                ),
            ),
        ),
        len_field(
            31,
            &gvk_ext("- group: \"samplecontroller.k8s.io\"\n  kind: Foo\n  version: v1\n"),
        ),
        vec![0xf8, 0x07, 0x2a],
    ]
    .concat();
    let want = doc(
        &[
            ("/api/v1/pods", len_field(2, b"untouched")),
            (
                "/apis/samplecontroller.k8s.io/v1/foos",
                len_field(2, &get_app),
            ),
        ],
        &[
            ("io.k8s.samplecontroller.v1.Foo", foo_app),
            ("io.k8s.api.core.v1.Pod", schema_ref("#/definitions/a.b")),
        ],
    );
    assert_eq!(out, want);
    // It decodes with the declared messages.
    decode(&out);
}

#[test]
fn gvk_yaml_lines_keep_every_other_byte() {
    let map = map();
    let r = OpenApiProtoRewriter::new(&map, Direction::ToApp);
    assert_eq!(
        r.gvk_yaml("- group: samplecontroller.team1.example.com\r\n  kind: Foo\n")
            .as_deref(),
        Some("- group: samplecontroller.k8s.io\r\n  kind: Foo\n")
    );
    assert_eq!(
        r.gvk_yaml("group:   'samplecontroller.team1.example.com'  \nversion: v1")
            .as_deref(),
        Some("group:   'samplecontroller.k8s.io'  \nversion: v1")
    );
    assert_eq!(r.gvk_yaml("group: \"\"\nkind: Pod\n"), None);
    assert_eq!(
        r.gvk_yaml("kind: samplecontroller.team1.example.com\n"),
        None
    );
    assert_eq!(r.gvk_yaml("group: other.example.com\n"), None);
    assert_eq!(r.gvk_yaml("group:"), None);
}

#[test]
fn truncated_captures_are_refused_without_panicking() {
    let full = proto_capture();
    // The capture's samplecontroller entries (all 8 definitions, 6 paths)
    // and its other top-level fields, as a document small enough to cut at
    // many points in a debug build.
    let mut input = Vec::new();
    let (mut paths, mut defs) = (Vec::new(), Vec::new());
    let mut kept_paths = 0;
    for (name, bytes) in raw_entries(&full) {
        if !name.contains("samplecontroller") {
            continue;
        }
        if name.starts_with('/') {
            if kept_paths < 6 {
                paths.extend(bytes);
                kept_paths += 1;
            }
        } else {
            defs.extend(bytes);
        }
    }
    let mut pos = 0;
    while pos < full.len() {
        let f = next_field(&full, pos, full.len()).unwrap();
        pos = f.end;
        match f.number {
            8 => input.extend(len_field(8, &paths)),
            9 => input.extend(len_field(9, &defs)),
            _ => input.extend(&full[f.start..f.end]),
        }
    }
    assert!(rw(&input, Direction::ToApp).unwrap().is_some());
    // The top-level field boundaries: a cut there leaves a valid document.
    let mut boundaries = BTreeSet::new();
    let mut pos = 0;
    while pos < input.len() {
        let f = next_field(&input, pos, input.len()).unwrap();
        boundaries.insert(f.start);
        pos = f.end;
    }
    let map = map();
    let r = OpenApiProtoRewriter::new(&map, Direction::ToApp);
    let hits = r.index.dns().find_all(&input);
    let first_hit = hits.iter().map(|h| h.1).min().unwrap();
    let mut cuts: Vec<usize> = (0..input.len()).step_by(37).collect();
    // Around every mapped name, where the walker descends.
    for (start, end) in hits {
        cuts.extend(start.saturating_sub(6)..end + 3);
    }
    let mut refused = 0;
    for &cut in &cuts {
        let res = r.rewrite_bytes(&input[..cut]);
        if cut >= first_hit && !boundaries.contains(&cut) {
            assert!(res.is_err(), "cut at {cut}");
            refused += 1;
        }
    }
    assert!(refused > 1000, "{refused} of {}", cuts.len());
    // And a few cuts of the whole capture, after its first mapped name.
    let first = r
        .index
        .dns()
        .find_all(&full)
        .iter()
        .map(|h| h.1)
        .min()
        .unwrap();
    for cut in (1..8).map(|i| first + (full.len() - first) * i / 8) {
        assert!(r.rewrite_bytes(&full[..cut]).is_err(), "cut at {cut}");
    }
}

#[test]
fn hostile_and_malformed_input_is_an_error() {
    let name = "/apis/samplecontroller.team1.example.com/v1";
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("huge length", {
            let mut b = vec![0x42]; // field 8, LEN
            put_varint(1 << 62, &mut b);
            b.extend(name.as_bytes());
            b
        }),
        ("length one past the end", {
            let inner = len_field(2, &named(name, b""));
            let mut b = vec![0x42];
            put_varint(inner.len() as u64 + 1, &mut b);
            b.extend(inner);
            b
        }),
        ("overlong varint", {
            let mut b = vec![0x42];
            b.extend([0xff; 11]);
            b.extend(name.as_bytes());
            b
        }),
        ("paths as a varint", {
            let mut b = vec![0x40, 0x01];
            b.extend(len_field(3, name.as_bytes()));
            b
        }),
        ("group wire type", {
            let mut b = vec![0x43];
            b.extend(len_field(3, name.as_bytes()));
            b
        }),
        ("field number 0", {
            let mut b = vec![0x02, 0x00];
            b.extend(len_field(3, name.as_bytes()));
            b
        }),
        ("name not UTF-8", {
            let mut n = name.as_bytes().to_vec();
            n.push(0xff);
            len_field(
                8,
                &len_field(2, &[len_field(1, &n), len_field(2, b"")].concat()),
            )
        }),
        ("truncated fixed64 in a path item", {
            let item = [len_field(1, name.as_bytes()), vec![0x11, 1, 2, 3]].concat();
            len_field(8, &len_field(2, &item))
        }),
    ];
    for (what, input) in cases {
        assert!(
            matches!(rw(&input, Direction::ToApp), Err(RewriteError::Protobuf(_))),
            "{what}"
        );
    }
}

#[test]
fn deep_nesting_is_refused_not_a_stack_overflow() {
    // Schema.all_of nested far beyond MAX_DEPTH, a $ref at the bottom.
    let mut s = schema_ref("#/definitions/com.example.team1.samplecontroller.v1.Foo");
    for _ in 0..(MAX_DEPTH * 3) {
        s = len_field(24, &s);
    }
    let d = doc(&[], &[("io.k8s.api.core.v1.Pod", s)]);
    assert!(matches!(
        rw(&d, Direction::ToApp),
        Err(RewriteError::Protobuf(_))
    ));
    // Within the limit it is renamed.
    let mut s = schema_ref("#/definitions/com.example.team1.samplecontroller.v1.Foo");
    for _ in 0..(MAX_DEPTH - 10) {
        s = len_field(24, &s);
    }
    let d = doc(&[], &[("io.k8s.api.core.v1.Pod", s)]);
    let out = rw(&d, Direction::ToApp).unwrap().unwrap();
    assert!(out
        .windows(b"io.k8s.samplecontroller.v1.Foo".len())
        .any(|w| w == b"io.k8s.samplecontroller.v1.Foo"));
}

#[test]
fn lengths_are_re_encoded_when_they_cross_a_varint_boundary() {
    // A definition whose length is 127 + growth: its prefix grows to 2 bytes.
    let r = "#/definitions/io.k8s.samplecontroller.v1.Foo";
    let pad = vec![b'x'; 127 - 2 - r.len() - 3];
    let s = [schema_ref(r), len_field(4, &pad)].concat();
    assert!(s.len() <= 127);
    let d = doc(&[], &[("com.example.team1.x.v1.Bar", s)]);
    let out = rw(&d, Direction::ToCluster).unwrap().unwrap();
    let back = decode(&out);
    let (_, defs) = entries(&back);
    assert_eq!(
        string(&defs[0].1, "_ref"),
        "#/definitions/com.example.team1.samplecontroller.v1.Foo"
    );
}

/// `cargo test --release -p regroup --lib openapi_proto::tests::timing -- --ignored --nocapture`
#[test]
#[ignore = "a measurement, run in release mode"]
fn timing_of_the_capture() {
    let input = proto_capture();
    let map = map();
    let r = OpenApiProtoRewriter::new(&map, Direction::ToApp);
    let n = 20;
    let t = std::time::Instant::now();
    for _ in 0..n {
        std::hint::black_box(r.rewrite_bytes(&input).unwrap());
    }
    println!("{} bytes: {:?} per rewrite", input.len(), t.elapsed() / n);
}
