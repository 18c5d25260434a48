//! Where manifests hold CEL that regroup leaves: a string literal that is
//! exactly a mapped group, `group/version` or metadata key is renamed
//! (`Form::Cel`, through CEL's own parser), but a name inside a longer
//! literal (`'foo.example.io/'`, `'x.foo.example.io'` built by
//! concatenation) or outside any literal keeps the name it was written
//! with while every field around it is renamed. `regroup render` and
//! `regroup check -f` report each such expression so its author can
//! write it in the cluster's names (or both).

use regroup_config::Settings;
use serde_json::Value as Json;

/// The members holding CEL in admission policies and webhook
/// configurations (`validations[].expression`, `messageExpression`,
/// `auditAnnotations[].valueExpression`, `matchConditions[].expression`,
/// `variables[].expression`, the mutations' `applyConfiguration.expression`
/// and `jsonPatch.expression`).
const ADMISSION_CEL_KEYS: &[&str] = &["expression", "messageExpression", "valueExpression"];
/// The members holding CEL in a CRD's `x-kubernetes-validations` entries.
const CRD_CEL_KEYS: &[&str] = &["rule", "messageExpression"];
const CRD_VALIDATIONS: &str = "x-kubernetes-validations";

/// One warning per CEL expression in `doc` that mentions a mapped group,
/// either side's name, as `KIND NAME: PATH names GROUP`.
pub fn warnings(doc: &Json, settings: &Settings) -> Vec<String> {
    let kind = doc["kind"].as_str().unwrap_or_default();
    let group = doc["apiVersion"]
        .as_str()
        .and_then(|v| v.split_once('/'))
        .map_or("", |(g, _)| g);
    let mut found = Vec::new();
    match (group, kind) {
        ("admissionregistration.k8s.io", _) => {
            for root in ["spec", "webhooks"] {
                if let Some(v) = doc.get(root) {
                    admission(v, root.to_owned(), &mut found);
                }
            }
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            if let Some(v) = doc.get("spec") {
                crd(v, "spec".to_owned(), false, &mut found);
            }
        }
        _ => {}
    }
    let name = doc["metadata"]["name"].as_str().unwrap_or_default();
    found
        .into_iter()
        .filter_map(|(path, expr)| {
            let hit = *settings.map.cel_mentions(expr).first()?;
            Some(format!(
                "{kind} {name}: {path} names {hit}, which regroup does not rename inside CEL (only a string literal that is exactly a name)"
            ))
        })
        .collect()
}

fn child(path: &str, key: &str) -> String {
    format!("{path}.{key}")
}

/// Every string at an admission CEL key under `v`.
fn admission<'a>(v: &'a Json, path: String, out: &mut Vec<(String, &'a str)>) {
    match v {
        Json::Object(m) => {
            for (k, v) in m {
                match v {
                    Json::String(s) if ADMISSION_CEL_KEYS.contains(&k.as_str()) => {
                        out.push((child(&path, k), s))
                    }
                    _ => admission(v, child(&path, k), out),
                }
            }
        }
        Json::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                admission(v, format!("{path}[{i}]"), out);
            }
        }
        _ => {}
    }
}

/// Every CEL string of `x-kubernetes-validations` entries under `v`
/// (`rules` is true inside such a list).
fn crd<'a>(v: &'a Json, path: String, rules: bool, out: &mut Vec<(String, &'a str)>) {
    match v {
        Json::Object(m) => {
            for (k, v) in m {
                match v {
                    Json::String(s) if rules && CRD_CEL_KEYS.contains(&k.as_str()) => {
                        out.push((child(&path, k), s))
                    }
                    _ => crd(v, child(&path, k), k == CRD_VALIDATIONS, out),
                }
            }
        }
        Json::Array(a) => {
            for (i, v) in a.iter().enumerate() {
                // The entries of a validations list are its rules.
                if let Some(m) = v.as_object().filter(|_| rules) {
                    for (k, s) in m {
                        if let (true, Some(s)) = (CRD_CEL_KEYS.contains(&k.as_str()), s.as_str()) {
                            out.push((format!("{path}[{i}].{k}"), s));
                        }
                    }
                    continue;
                }
                crd(v, format!("{path}[{i}]"), false, out);
            }
        }
        _ => {}
    }
}
