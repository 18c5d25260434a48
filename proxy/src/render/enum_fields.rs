//! Fields whose CRD schema says they hold a group: a string property
//! whose `enum` lists a group the rules rename (cert-manager-style
//! `issuerRef.group` with `enum: [cert-manager.io, ...]`). The CRD's enum
//! is renamed (it is a group in a schema); the objects' values under it
//! must be too, or the apiserver refuses them (`Unsupported value:
//! "cert-manager.io": supported values: "cert-manager.team-b.example.com"`).
//! `render`, `inject` and `check -f` find them in the manifests' CRDs and
//! add them to `fields:` (form `group`); `inject` hands them to the
//! sidecar.

use regroup_config::{Direction, GroupMap};
use serde_json::Value as Json;

/// A field found: the kind's app group, kind and path.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EnumField {
    pub group: String,
    pub kind: String,
    pub path: String,
}

/// The fields of `docs`' CRDs (in the app's names, as manifests are
/// written) whose `enum` lists a group `map` renames.
pub fn find(docs: &[Json], map: &GroupMap) -> Vec<EnumField> {
    let mut out = Vec::new();
    for doc in super::each_object(docs) {
        if doc.get("kind").and_then(Json::as_str) != Some("CustomResourceDefinition") {
            continue;
        }
        let (Some(group), Some(kind)) = (
            doc.pointer("/spec/group").and_then(Json::as_str),
            doc.pointer("/spec/names/kind").and_then(Json::as_str),
        ) else {
            continue;
        };
        if map.map_group(group, Direction::ToCluster).is_none() {
            continue;
        }
        for v in doc
            .pointer("/spec/versions")
            .and_then(Json::as_array)
            .into_iter()
            .flatten()
        {
            if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
                walk(schema, "", map, &mut |path| {
                    let f = EnumField {
                        group: group.to_owned(),
                        kind: kind.to_owned(),
                        path,
                    };
                    if !out.contains(&f) {
                        out.push(f);
                    }
                });
            }
        }
    }
    out
}

fn walk(schema: &Json, at: &str, map: &GroupMap, found: &mut impl FnMut(String)) {
    let names_group = schema
        .get("enum")
        .and_then(Json::as_array)
        .is_some_and(|e| {
            e.iter()
                .filter_map(Json::as_str)
                .any(|v| map.map_group(v, Direction::ToCluster).is_some())
        });
    if names_group && !at.is_empty() {
        found(at.to_owned());
    }
    if let Some(props) = schema.get("properties").and_then(Json::as_object) {
        for (k, s) in props {
            let p = if at.is_empty() {
                k.clone()
            } else {
                format!("{at}.{k}")
            };
            walk(s, &p, map, found);
        }
    }
    if let Some(items) = schema.get("items") {
        walk(items, &format!("{at}[]"), map, found);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_property_whose_enum_lists_a_renamed_group_is_found() {
        let map = regroup_config::load(
            "rules:\n  - {from: cert-manager.io, to: cert-manager.team-b.example.com}\n",
        )
        .unwrap()
        .map;
        let crd = json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "spec": {"group": "cert-manager.io", "names": {"kind": "Certificate"},
              "versions": [{"name": "v1", "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                "spec": {"type": "object", "properties": {
                  "issuerRef": {"type": "object", "properties": {
                    "group": {"type": "string", "enum": ["cert-manager.io", "example.com"]},
                    "kind": {"type": "string", "enum": ["Issuer", "ClusterIssuer"]}}},
                  "solvers": {"type": "array", "items": {"type": "object", "properties": {
                    "ref": {"type": "string", "enum": ["cert-manager.io"]}}}}}}}}}}]}});
        let other = json!({"kind": "CustomResourceDefinition", "spec": {"group": "other.io",
            "names": {"kind": "X"}, "versions": [{"schema": {"openAPIV3Schema": {"properties": {
              "g": {"enum": ["cert-manager.io"]}}}}}]}});
        let got = find(&[crd, other], &map);
        let paths: Vec<&str> = got.iter().map(|f| f.path.as_str()).collect();
        assert_eq!(paths, ["spec.issuerRef.group", "spec.solvers[].ref"]);
        assert!(got
            .iter()
            .all(|f| f.group == "cert-manager.io" && f.kind == "Certificate"));
    }
}
