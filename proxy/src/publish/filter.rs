//! Discovery and OpenAPI cut down to the published groups (docs/publish.md,
//! "Discovery and OpenAPI"): the central apiserver's `/apis`, `/openapi/v2`
//! and `/openapi/v3` index keep only what the published groups need, and
//! the `Accept` header sent for them asks for JSON, the only form cut here.
//! Pure functions over bytes, no I/O; an unexpected document is an error,
//! never passed through uncut.

use serde_json::{Map, Value};
use std::borrow::Cow;
use std::collections::HashSet;

type Object = Map<String, Value>;

/// Why a central document can't be cut (it is then refused, never passed
/// through uncut). Never quotes the document.
#[derive(Debug, thiserror::Error)]
pub(crate) enum FilterError {
    /// `/apis` of another kind.
    #[error("not an APIGroupList or APIGroupDiscoveryList v2/v2beta1")]
    NotAGroupList,
    /// `/openapi/v2` of another version.
    #[error("not a Swagger 2.0 document")]
    NotSwagger2,
    /// No `paths` member.
    #[error("no `paths`")]
    NoPaths,
    /// JSON, but not an object.
    #[error("not a JSON object")]
    NotAnObject,
    /// Not JSON (the position only: no part of the body).
    #[error("not JSON (line {line}, column {column})")]
    NotJson {
        /// The line of the error.
        line: usize,
        /// Its column.
        column: usize,
    },
    /// The cut document can't be written.
    #[error("cannot write the document")]
    Write,
    /// A member that must be an object is not.
    #[error("`{0}` is not an object")]
    NotAnObjectMember(String),
    /// The groups member is not a list.
    #[error("the groups are not a list")]
    GroupsNotAList,
    /// A group without a name.
    #[error("a group has no name")]
    UnnamedGroup,
    /// A path of the v3 index list that is not a string.
    #[error("a path is not a string")]
    PathNotAString,
}

/// `GET /apis`: a legacy `APIGroupList` (kind APIGroupList, `groups[].name`) or an aggregated
/// `APIGroupDiscoveryList` (apidiscovery.k8s.io v2 or v2beta1, `items[].metadata.name`), JSON.
/// Only the kept groups remain; everything else in the document keeps its bytes' meaning (order, fields).
pub(crate) fn discovery_root(
    body: &[u8],
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<u8>, FilterError> {
    let mut doc = parse_object(body)?;
    let (member, name): (&str, fn(&Value) -> Option<&str>) =
        match doc.get("kind").and_then(Value::as_str) {
            Some("APIGroupList") => ("groups", legacy_group_name),
            Some("APIGroupDiscoveryList") if is_aggregated_version(&doc) => {
                ("items", aggregated_group_name)
            }
            _ => return Err(FilterError::NotAGroupList),
        };
    if let Some(groups) = doc.get_mut(member) {
        retain_groups(groups, keep, name)?;
    }
    serialize(&doc, body)
}

/// `GET /openapi/v2` (Swagger 2.0 JSON): only `paths` under `/apis/{kept group}/` remain, and only the
/// `definitions` those paths reference, transitively (follow every "$ref": "#/definitions/X" found anywhere
/// inside kept paths and inside kept definitions). Other top-level members (info, swagger, securityDefinitions,
/// security, parameters ...) are kept; top-level `parameters` entries stay as they are.
pub(crate) fn openapi_v2(body: &[u8], keep: &dyn Fn(&str) -> bool) -> Result<Vec<u8>, FilterError> {
    let mut doc = parse_object(body)?;
    if doc.get("swagger").and_then(Value::as_str) != Some("2.0") {
        return Err(FilterError::NotSwagger2);
    }
    let paths = object_member(&mut doc, "paths")?.ok_or(FilterError::NoPaths)?;
    paths.retain(|path, _| published(path, keep));
    // Taken out (its slot left empty, so the order of members stays) while
    // the rest of the document is searched for references: the kept paths,
    // and also the top-level members kept whole (`parameters`, `responses`),
    // so that every reference left in the output resolves.
    let Some(slot) = object_member(&mut doc, "definitions")? else {
        return serialize(&doc, body);
    };
    let mut definitions = std::mem::take(slot);
    let needed = referenced_definitions(&doc, &definitions);
    definitions.retain(|name, _| needed.contains(name));
    if let Some(Value::Object(slot)) = doc.get_mut("definitions") {
        *slot = definitions;
    }
    serialize(&doc, body)
}

/// `GET /openapi/v3` (the index: {"paths": {"apis/g/v": {"serverRelativeURL": ...}, "api/v1": ..., ".well-known/...": ...}}):
/// only `apis/{kept group}/...` entries remain.
pub(crate) fn openapi_v3_index(
    body: &[u8],
    keep: &dyn Fn(&str) -> bool,
) -> Result<Vec<u8>, FilterError> {
    let mut doc = parse_object(body)?;
    if let Some(paths) = object_member(&mut doc, "paths")? {
        paths.retain(|path, _| published(path, keep));
    } else if let Some(Value::Array(paths)) = doc.get_mut("Paths") {
        // kube-apiserver 1.24's alpha index: a list of the same paths.
        retain_path_list(paths, keep)?;
    } else {
        return Err(FilterError::NoPaths);
    }
    serialize(&doc, body)
}

/// The group of an API path: `/apis/g/v/...` or `apis/g/v` (no leading slash, as in the v3 index) -> Some("g");
/// `/api/...` -> Some("") (the core group); anything else None.
///
/// The group's own document, `/apis/g` (or `/apis/g/`), is the group's too; `/apis` itself is no group's.
pub(crate) fn path_group(path: &str) -> Option<&str> {
    let path = path.strip_prefix('/').unwrap_or(path);
    if let Some(rest) = path.strip_prefix("apis/") {
        let group = rest.split('/').next().unwrap_or_default();
        return (!group.is_empty()).then_some(group);
    }
    (path == "api" || path.starts_with("api/")).then_some("")
}

/// An Accept header for a discovery or OpenAPI request made JSON-only: drop media ranges that are protobuf
/// (`application/vnd.kubernetes.protobuf`, `application/com.github.proto-openapi.spec.v2...`, `application/cbor`,
/// `application/vnd.kubernetes.cbor`...), keep the JSON ones with their parameters (`g=`, `v=`, `as=` of aggregated
/// discovery) in order; when nothing remains, `application/json`.
///
/// Only `application/json` ranges are kept: `*/*` and YAML are dropped too,
/// since whatever is not JSON cannot be cut and must not reach the client.
pub(crate) fn json_only_accept(accept: &str) -> String {
    let json: Vec<&str> = accept
        .split(',')
        .map(str::trim)
        .filter(|range| is_json_range(range))
        .collect();
    if json.is_empty() {
        "application/json".to_owned()
    } else {
        json.join(",")
    }
}

fn is_json_range(range: &str) -> bool {
    let essence = range.split(';').next().unwrap_or_default().trim();
    essence.eq_ignore_ascii_case("application/json")
}

fn parse_object(body: &[u8]) -> Result<Object, FilterError> {
    match serde_json::from_slice(body) {
        Ok(Value::Object(doc)) => Ok(doc),
        Ok(_) => Err(FilterError::NotAnObject),
        // The position only: no part of the body in a message.
        Err(e) => Err(FilterError::NotJson {
            line: e.line(),
            column: e.column(),
        }),
    }
}

/// The document as JSON (members in their original order: `preserve_order`),
/// ended by a newline when the original was, as Go's encoder ends it.
fn serialize(doc: &Object, original: &[u8]) -> Result<Vec<u8>, FilterError> {
    let mut out = serde_json::to_vec(doc).map_err(|_| FilterError::Write)?;
    if original.ends_with(b"\n") {
        out.push(b'\n');
    }
    Ok(out)
}

/// A member that must be an object when present.
fn object_member<'a>(
    doc: &'a mut Object,
    key: &str,
) -> Result<Option<&'a mut Object>, FilterError> {
    match doc.get_mut(key) {
        None => Ok(None),
        Some(Value::Object(member)) => Ok(Some(member)),
        Some(_) => Err(FilterError::NotAnObjectMember(key.to_owned())),
    }
}

fn is_aggregated_version(doc: &Object) -> bool {
    matches!(
        doc.get("apiVersion").and_then(Value::as_str),
        Some("apidiscovery.k8s.io/v2" | "apidiscovery.k8s.io/v2beta1")
    )
}

fn legacy_group_name(group: &Value) -> Option<&str> {
    group.get("name")?.as_str()
}

fn aggregated_group_name(item: &Value) -> Option<&str> {
    item.get("metadata")?.get("name")?.as_str()
}

fn retain_groups(
    groups: &mut Value,
    keep: &dyn Fn(&str) -> bool,
    name: fn(&Value) -> Option<&str>,
) -> Result<(), FilterError> {
    let groups = match groups {
        // Go writes an empty list as `null`.
        Value::Null => return Ok(()),
        Value::Array(groups) => groups,
        _ => return Err(FilterError::GroupsNotAList),
    };
    if groups.iter().any(|group| name(group).is_none()) {
        return Err(FilterError::UnnamedGroup);
    }
    groups.retain(|group| name(group).is_some_and(keep));
    Ok(())
}

fn retain_path_list(
    paths: &mut Vec<Value>,
    keep: &dyn Fn(&str) -> bool,
) -> Result<(), FilterError> {
    if !paths.iter().all(Value::is_string) {
        return Err(FilterError::PathNotAString);
    }
    paths.retain(|path| path.as_str().is_some_and(|path| published(path, keep)));
    Ok(())
}

/// Whether an OpenAPI path is under `/apis/{kept group}`: the core group
/// (`/api`) is not published here, whatever `keep` says of `""`.
fn published(path: &str, keep: &dyn Fn(&str) -> bool) -> bool {
    path_group(path).is_some_and(|group| !group.is_empty() && keep(group))
}

/// The names of the definitions `doc` refers to, directly or through other
/// definitions.
fn referenced_definitions(doc: &Object, definitions: &Object) -> HashSet<String> {
    let mut pending = Vec::new();
    for member in doc.values() {
        references(member, &mut pending);
    }
    let mut needed = HashSet::new();
    while let Some(reference) = pending.pop() {
        let Some(name) = definition_name(reference) else {
            continue;
        };
        if needed.contains(name.as_ref()) {
            continue;
        }
        if let Some(definition) = definitions.get(name.as_ref()) {
            references(definition, &mut pending);
            needed.insert(name.into_owned());
        }
    }
    needed
}

/// Every `"$ref": "..."` string inside `value`. A `$ref` member that is not
/// a string is a schema property of that name (JSONSchemaProps has one),
/// searched like any other member.
fn references<'a>(value: &'a Value, found: &mut Vec<&'a str>) {
    let mut stack = vec![value];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(members) => {
                for (key, member) in members {
                    match member {
                        Value::String(reference) if key == "$ref" => found.push(reference),
                        _ => stack.push(member),
                    }
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
}

/// The definition a local reference points into: `#/definitions/X` (or a
/// pointer below X), X being a JSON pointer token (`~1` is `/`, `~0` is `~`).
fn definition_name(reference: &str) -> Option<Cow<'_, str>> {
    let token = reference
        .strip_prefix("#/definitions/")?
        .split('/')
        .next()?;
    Some(if token.contains('~') {
        Cow::Owned(token.replace("~1", "/").replace("~0", "~"))
    } else {
        Cow::Borrowed(token)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fixture(name: &str) -> Vec<u8> {
        let path = format!("{}/../testdata/publish/{name}", env!("CARGO_MANIFEST_DIR"));
        std::fs::read(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    }

    fn json(bytes: &[u8]) -> Value {
        serde_json::from_slice(bytes).expect("the output is JSON")
    }

    fn only<'a>(groups: &'a [&'a str]) -> impl Fn(&str) -> bool + 'a {
        move |group| groups.contains(&group)
    }

    fn keys(object: &Value) -> Vec<&str> {
        object
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect()
    }

    const LEGACY: &str = "discovery-apis-legacy-1.29.json";
    const V2BETA1: &str = "discovery-apis-aggregated-v2beta1-1.29.json";
    const V2: &str = "discovery-apis-aggregated-v2-1.36.json";
    const OPENAPI_V2: &str = "openapi-v2-1.24.json";
    const V3_INDEX: &str = "openapi-v3-index-1.29.json";
    const V3_INDEX_ALPHA: &str = "openapi-v3-index-1.24.json";

    // --- path_group ---

    #[test]
    fn path_group_reads_named_groups_the_core_group_and_nothing_else() {
        let cases = [
            (
                "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos",
                Some("samplecontroller.k8s.io"),
            ),
            ("/apis/apps/v1", Some("apps")),
            (
                "apis/samplecontroller.k8s.io/v1beta1",
                Some("samplecontroller.k8s.io"),
            ),
            ("/apis/apps/", Some("apps")),
            ("apis/apps", Some("apps")),
            ("/api/v1/namespaces/{namespace}/pods", Some("")),
            ("api/v1", Some("")),
            ("/api/", Some("")),
            ("api", Some("")),
            ("/apis", None),
            ("/apis/", None),
            ("apis", None),
            ("/apis//v1", None),
            ("/apiserver/v1", None),
            ("/version/", None),
            (".well-known/openid-configuration", None),
            ("/openapi/v3/apis/apps/v1", None),
            ("", None),
        ];
        for (path, group) in cases {
            assert_eq!(path_group(path), group, "{path}");
        }
    }

    // --- discovery_root ---

    fn discovery_names(doc: &Value) -> Vec<&str> {
        if let Some(groups) = doc["groups"].as_array() {
            return groups.iter().map(|g| g["name"].as_str().unwrap()).collect();
        }
        let items = doc["items"].as_array().unwrap();
        items
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap())
            .collect()
    }

    /// The kept entries are the original ones, untouched, and everything but
    /// the list is as it was.
    fn assert_cut_from(original: &Value, cut: &Value, member: &str) {
        assert_eq!(keys(original), keys(cut));
        for (key, value) in cut.as_object().unwrap() {
            if key != member {
                assert_eq!(value, &original[key], "{key}");
            }
        }
        let entries = original[member].as_array().unwrap();
        for entry in cut[member].as_array().unwrap() {
            assert!(entries.contains(entry));
        }
    }

    #[test]
    fn legacy_discovery_keeps_the_named_groups_in_document_order() {
        let body = fixture(LEGACY);
        let keep = only(&[
            "wardle.team1.example.com",
            "apps",
            "samplecontroller.team1.example.com",
        ]);
        let out = json(&discovery_root(&body, &keep).unwrap());
        assert_eq!(
            discovery_names(&out),
            [
                "apps",
                "samplecontroller.team1.example.com",
                "wardle.team1.example.com"
            ]
        );
        assert_eq!(out["kind"], "APIGroupList");
        assert_eq!(out["apiVersion"], "v1");
        assert_cut_from(&json(&body), &out, "groups");
        assert_eq!(
            out["groups"][1]["preferredVersion"]["groupVersion"],
            "samplecontroller.team1.example.com/v1beta1"
        );
    }

    #[test]
    fn aggregated_v2beta1_discovery_keeps_the_named_groups_in_document_order() {
        let body = fixture(V2BETA1);
        let keep = only(&[
            "samplecontroller.team1.example.com",
            "samplecontroller.k8s.io",
        ]);
        let out = json(&discovery_root(&body, &keep).unwrap());
        assert_eq!(
            discovery_names(&out),
            [
                "samplecontroller.k8s.io",
                "samplecontroller.team1.example.com"
            ]
        );
        assert_eq!(out["apiVersion"], "apidiscovery.k8s.io/v2beta1");
        assert_cut_from(&json(&body), &out, "items");
        let resources = &out["items"][1]["versions"][0]["resources"];
        assert_eq!(resources[0]["resource"], "bars");
        assert_eq!(resources[1]["resource"], "foos");
    }

    #[test]
    fn aggregated_v2_discovery_matches_whole_group_names_only() {
        let body = fixture(V2);
        // `example.com` is another group of the captured cluster, and a
        // suffix of `samplecontroller.team1.example.com`.
        let out = json(&discovery_root(&body, &only(&["example.com"])).unwrap());
        assert_eq!(discovery_names(&out), ["example.com"]);
        assert_eq!(out["apiVersion"], "apidiscovery.k8s.io/v2");
        assert_cut_from(&json(&body), &out, "items");
        let out =
            json(&discovery_root(&body, &only(&["samplecontroller.team1.example.com"])).unwrap());
        assert_eq!(
            discovery_names(&out),
            ["samplecontroller.team1.example.com"]
        );
    }

    #[test]
    fn discovery_keeping_every_group_gives_back_the_same_bytes() {
        for name in [LEGACY, V2BETA1, V2] {
            let body = fixture(name);
            assert!(discovery_root(&body, &|_| true).unwrap() == body, "{name}");
        }
    }

    #[test]
    fn discovery_of_a_group_not_served_keeps_no_group() {
        for (name, member) in [(LEGACY, "groups"), (V2BETA1, "items"), (V2, "items")] {
            let body = fixture(name);
            let out = json(&discovery_root(&body, &only(&["nosuch.example.com"])).unwrap());
            assert_eq!(out[member], Value::Array(vec![]), "{name}");
            assert_cut_from(&json(&body), &out, member);
        }
        let empty = br#"{"kind":"APIGroupList","apiVersion":"v1","groups":null}"#;
        assert_eq!(discovery_root(empty, &|_| true).unwrap(), empty);
    }

    #[test]
    fn discovery_refuses_what_is_not_a_group_list() {
        let truncated = fixture(V2BETA1)[..1000].to_vec();
        let bodies: [&[u8]; 10] = [
            b"",
            b"<html>s3cr3t</html>",
            &truncated,
            br#"["s3cr3t"]"#,
            br#"{"kind":"APIResourceList","apiVersion":"v1","groupVersion":"s3cr3t/v1","resources":[]}"#,
            br#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v3","items":[]}"#,
            br#"{"kind":"APIGroupDiscoveryList","apiVersion":"v1","items":[]}"#,
            br#"{"kind":"APIGroupList","apiVersion":"v1","groups":{"name":"s3cr3t"}}"#,
            br#"{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"apps"},{"versions":[]}]}"#,
            br#"{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[{"metadata":{"name":7}}]}"#,
        ];
        for body in bodies {
            let e = discovery_root(body, &|_| true)
                .expect_err(&String::from_utf8_lossy(body))
                .to_string();
            assert!(!e.contains("s3cr3t") && e.len() < 100, "{e}");
        }
    }

    // --- openapi_v2 ---

    /// Every string `$ref` in `value`, found apart from the code under test.
    fn refs_in(value: &Value, out: &mut Vec<String>) {
        match value {
            Value::Object(members) => {
                for (key, member) in members {
                    match (key.as_str(), member) {
                        ("$ref", Value::String(r)) => out.push(r.clone()),
                        _ => refs_in(member, out),
                    }
                }
            }
            Value::Array(items) => items.iter().for_each(|item| refs_in(item, out)),
            _ => {}
        }
    }

    /// The definitions reachable from `doc`'s paths and other members, read
    /// from the output itself; panics on a reference that does not resolve.
    fn reachable_in_output(doc: &Value) -> HashSet<String> {
        let definitions = doc["definitions"].as_object().unwrap();
        let mut pending = Vec::new();
        for (key, member) in doc.as_object().unwrap() {
            if key != "definitions" {
                refs_in(member, &mut pending);
            }
        }
        let mut seen = HashSet::new();
        while let Some(reference) = pending.pop() {
            let name = reference
                .strip_prefix("#/definitions/")
                .expect("a local definition");
            let definition = definitions
                .get(name)
                .unwrap_or_else(|| panic!("{reference} does not resolve"));
            if seen.insert(name.to_owned()) {
                refs_in(definition, &mut pending);
            }
        }
        seen
    }

    fn assert_closed_and_minimal(doc: &Value) {
        let reachable = reachable_in_output(doc);
        let kept: HashSet<String> = keys(&doc["definitions"])
            .into_iter()
            .map(str::to_owned)
            .collect();
        assert_eq!(reachable, kept);
    }

    #[test]
    fn openapi_v2_keeps_one_crd_group_and_the_definitions_it_references() {
        let body = fixture(OPENAPI_V2);
        let original = json(&body);
        let group = "samplecontroller.team1.example.com";
        let out = json(&openapi_v2(&body, &only(&[group])).unwrap());

        let expected_paths: Vec<&str> = keys(&original["paths"])
            .into_iter()
            .filter(|p| p.starts_with("/apis/samplecontroller.team1.example.com/"))
            .collect();
        assert_eq!(expected_paths.len(), 10);
        assert_eq!(keys(&out["paths"]), expected_paths);
        for (path, item) in out["paths"].as_object().unwrap() {
            assert_eq!(item, &original["paths"][path], "{path}");
        }

        // In the document's order; `_v2` are the apiserver's copies for
        // CRDs, the scale subresource brings autoscaling/v1 Scale's.
        assert_eq!(
            keys(&out["definitions"]),
            [
                "com.example.team1.samplecontroller.v1alpha1.Foo",
                "com.example.team1.samplecontroller.v1alpha1.FooList",
                "com.example.team1.samplecontroller.v1beta1.Foo",
                "com.example.team1.samplecontroller.v1beta1.FooList",
                "io.k8s.api.autoscaling.v1.ScaleSpec",
                "io.k8s.api.autoscaling.v1.ScaleStatus",
                "io.k8s.api.autoscaling.v1.Scale_v2",
                "io.k8s.apimachinery.pkg.apis.meta.v1.DeleteOptions_v2",
                "io.k8s.apimachinery.pkg.apis.meta.v1.FieldsV1",
                "io.k8s.apimachinery.pkg.apis.meta.v1.ListMeta",
                "io.k8s.apimachinery.pkg.apis.meta.v1.ManagedFieldsEntry",
                "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta_v2",
                "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference_v2",
                "io.k8s.apimachinery.pkg.apis.meta.v1.Patch",
                "io.k8s.apimachinery.pkg.apis.meta.v1.Preconditions",
                "io.k8s.apimachinery.pkg.apis.meta.v1.StatusCause",
                "io.k8s.apimachinery.pkg.apis.meta.v1.StatusDetails_v2",
                "io.k8s.apimachinery.pkg.apis.meta.v1.Status_v2",
                "io.k8s.apimachinery.pkg.apis.meta.v1.Time",
            ]
        );
        for (name, definition) in out["definitions"].as_object().unwrap() {
            assert_eq!(definition, &original["definitions"][name], "{name}");
        }
        assert_closed_and_minimal(&out);

        // Everything else as it was, in its place.
        assert_eq!(
            keys(&out),
            [
                "swagger",
                "info",
                "paths",
                "definitions",
                "securityDefinitions",
                "security"
            ]
        );
        for key in ["swagger", "info", "securityDefinitions", "security"] {
            assert_eq!(out[key], original[key], "{key}");
        }
    }

    #[test]
    fn openapi_v2_every_kept_reference_resolves_and_nothing_else_is_kept() {
        let body = fixture(OPENAPI_V2);
        let groups: [&[&str]; 4] = [
            &["samplecontroller.k8s.io"],
            &[
                "samplecontroller.k8s.io",
                "samplecontroller.team1.example.com",
            ],
            &["apps", "autoscaling"],
            &["apiextensions.k8s.io"],
        ];
        for kept in groups {
            let out = json(&openapi_v2(&body, &only(kept)).unwrap());
            assert!(!keys(&out["paths"]).is_empty(), "{kept:?}");
            for path in keys(&out["paths"]) {
                assert!(
                    path_group(path).is_some_and(|g| kept.contains(&g)),
                    "{path}"
                );
            }
            assert_closed_and_minimal(&out);
        }
        // The group's own document, `/apis/apps/`, comes with its versions'.
        let out = json(&openapi_v2(&body, &only(&["apps"])).unwrap());
        assert_eq!(keys(&out["paths"])[0], "/apis/apps/");
        assert!(out["definitions"]["io.k8s.api.apps.v1.Deployment"].is_object());
        assert!(out["definitions"]["io.k8s.api.core.v1.PodSpec"].is_object());
        assert!(out["definitions"].get("io.k8s.api.batch.v1.Job").is_none());
    }

    #[test]
    fn openapi_v2_of_a_group_not_served_keeps_no_path_and_no_definition() {
        let body = fixture(OPENAPI_V2);
        let original = json(&body);
        let out = openapi_v2(&body, &only(&["nosuch.example.com"])).unwrap();
        let out = json(&out);
        assert_eq!(out["paths"], Value::Object(Map::new()));
        assert_eq!(out["definitions"], Value::Object(Map::new()));
        for key in ["swagger", "info", "securityDefinitions", "security"] {
            assert_eq!(out[key], original[key], "{key}");
        }
        // The core group is never published through `/openapi/v2`.
        let out = json(&openapi_v2(&body, &only(&[""])).unwrap());
        assert_eq!(out["paths"], Value::Object(Map::new()));
    }

    #[test]
    fn openapi_v2_follows_references_of_top_level_parameters_and_escaped_names() {
        // The capture has no top-level `parameters`; this document has the
        // places the capture lacks.
        let body = br##"{"swagger":"2.0","parameters":{"body":{"in":"body","name":"body","schema":{"$ref":"#/definitions/p.Body"}}},
            "paths":{"/apis/g.example.com/v1/xs":{"post":{"parameters":[{"$ref":"#/parameters/body"}],
              "responses":{"200":{"schema":{"$ref":"#/definitions/a~1b~0c/properties/x"}}}}},
              "/apis/other.example.com/v1/ys":{"get":{"responses":{"200":{"schema":{"$ref":"#/definitions/other.Y"}}}}}},
            "definitions":{"other.Y":{},"p.Body":{"properties":{"$ref":{"type":"string"}}},"a/b~c":{"properties":{"x":{"$ref":"#/definitions/c.X"}}},"c.X":{}}}"##;
        let out = json(&openapi_v2(body, &only(&["g.example.com"])).unwrap());
        assert_eq!(
            keys(&out),
            ["swagger", "parameters", "paths", "definitions"]
        );
        assert_eq!(out["parameters"], json(body)["parameters"]);
        assert_eq!(keys(&out["paths"]), ["/apis/g.example.com/v1/xs"]);
        assert_eq!(keys(&out["definitions"]), ["p.Body", "a/b~c", "c.X"]);
    }

    #[test]
    fn openapi_v2_without_definitions_is_cut_to_its_paths() {
        let body =
            br#"{"swagger":"2.0","paths":{"/api/v1/pods":{},"/apis/g.example.com/v1/xs":{}}}"#;
        let out = openapi_v2(body, &only(&["g.example.com"])).unwrap();
        assert_eq!(
            out,
            br#"{"swagger":"2.0","paths":{"/apis/g.example.com/v1/xs":{}}}"#
        );
    }

    #[test]
    fn openapi_v2_refuses_what_is_not_swagger_2() {
        let truncated = fixture(OPENAPI_V2)[..4096].to_vec();
        let bodies: [&[u8]; 7] = [
            b"s3cr3t",
            &truncated,
            br#"{"openapi":"3.0.0","paths":{},"components":{"schemas":{"s3cr3t":{}}}}"#,
            br#"{"swagger":"2.0","definitions":{}}"#,
            br#"{"swagger":"2.0","paths":["/apis/s3cr3t/v1"]}"#,
            br#"{"swagger":"2.0","paths":{},"definitions":["s3cr3t"]}"#,
            br#"{"swagger":2,"paths":{}}"#,
        ];
        for body in bodies {
            let e = openapi_v2(body, &|_| true)
                .expect_err(&String::from_utf8_lossy(body))
                .to_string();
            assert!(!e.contains("s3cr3t") && e.len() < 100, "{e}");
        }
    }

    // --- openapi_v3_index ---

    #[test]
    fn openapi_v3_index_keeps_the_kept_groups_entries() {
        let body = fixture(V3_INDEX);
        let original = json(&body);
        let out = json(&openapi_v3_index(&body, &only(&["samplecontroller.k8s.io"])).unwrap());
        assert_eq!(
            keys(&out["paths"]),
            [
                "apis/samplecontroller.k8s.io/v1alpha1",
                "apis/samplecontroller.k8s.io/v1beta1"
            ]
        );
        for (path, entry) in out["paths"].as_object().unwrap() {
            assert_eq!(entry, &original["paths"][path], "{path}");
        }
        let out = json(&openapi_v3_index(&body, &only(&["apps", "autoscaling"])).unwrap());
        assert_eq!(
            keys(&out["paths"]),
            [
                "apis/apps",
                "apis/apps/v1",
                "apis/autoscaling",
                "apis/autoscaling/v1",
                "apis/autoscaling/v2"
            ]
        );
        // `api`, `api/v1`, `apis`, `.well-known/...`, `version` are no
        // published group's.
        let out = openapi_v3_index(&body, &only(&["nosuch.example.com", ""])).unwrap();
        assert_eq!(out, br#"{"paths":{}}"#);
        let all = openapi_v3_index(&body, &|_| true).unwrap();
        assert_eq!(
            keys(&json(&all)["paths"]).len(),
            keys(&original["paths"]).len() - 7
        );
    }

    #[test]
    fn openapi_v3_index_of_kube_1_24_keeps_the_kept_groups_paths() {
        let body = fixture(V3_INDEX_ALPHA);
        let out = openapi_v3_index(&body, &only(&["samplecontroller.team1.example.com"])).unwrap();
        assert_eq!(
            out,
            br#"{"Paths":["apis/samplecontroller.team1.example.com/v1alpha1","apis/samplecontroller.team1.example.com/v1beta1"]}"#
        );
    }

    #[test]
    fn openapi_v3_index_refuses_what_is_not_an_index() {
        let bodies: [&[u8]; 5] = [
            b"{\"paths\":",
            br#"{"openapi":"3.0.0","info":{"title":"s3cr3t"}}"#,
            br#"{"paths":["apis/s3cr3t/v1"]}"#,
            br#"{"Paths":["apis/g/v1",7]}"#,
            br#""s3cr3t""#,
        ];
        for body in bodies {
            let e = openapi_v3_index(body, &|_| true)
                .expect_err(&String::from_utf8_lossy(body))
                .to_string();
            assert!(!e.contains("s3cr3t") && e.len() < 100, "{e}");
        }
    }

    // --- json_only_accept ---

    #[test]
    fn json_only_accept_on_real_clients_headers() {
        let v2 = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
        let v2beta1 = "application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList";
        let cases = [
            // kubectl's aggregated discovery: all JSON, unchanged.
            (format!("{v2},{v2beta1},application/json"), format!("{v2},{v2beta1},application/json")),
            // client-go's peer-less variant keeps its `profile`.
            (
                format!("{v2};profile=nopeer,{v2},{v2beta1},application/json"),
                format!("{v2};profile=nopeer,{v2},{v2beta1},application/json"),
            ),
            // Protobuf first (a client configured for protobuf).
            ("application/vnd.kubernetes.protobuf,application/json".into(), "application/json".into()),
            (
                "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json".into(),
                format!("{v2beta1},application/json"),
            ),
            // OpenAPI in protobuf only: JSON instead.
            ("application/com.github.proto-openapi.spec.v2@v1.0+protobuf".into(), "application/json".into()),
            ("application/com.github.proto-openapi.spec.v3@v1.0+protobuf".into(), "application/json".into()),
            ("application/vnd.kubernetes.protobuf".into(), "application/json".into()),
            ("application/cbor, application/vnd.kubernetes.cbor".into(), "application/json".into()),
            ("application/yaml".into(), "application/json".into()),
            ("application/json, */*".into(), "application/json".into()),
            ("Application/JSON; charset=utf-8".into(), "Application/JSON; charset=utf-8".into()),
            ("".into(), "application/json".into()),
        ];
        for (accept, expected) in cases {
            assert_eq!(json_only_accept(&accept), expected, "{accept}");
        }
    }
}
