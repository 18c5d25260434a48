//! A CRD's OpenAPI v3 schema ([`Slot::JsonSchema`]): the group strings it
//! pins (`enum`, `default`, CEL rules), at every depth.

use regroup_config::Form;

use super::JsonRewriter;
use crate::rewrite::error::RewriteError;
use crate::rewrite::raw::{Raw, Walk};

#[cfg(doc)]
use crate::rewrite::catalog::Slot;

/// Members whose value is a map of schemas.
const SCHEMA_MAPS: &[&str] = &["properties", "patternProperties", "definitions"];
/// Members whose value is a schema (or, for `items`, a list of them;
/// `additionalProperties` may be a boolean).
const SCHEMAS: &[&str] = &["additionalProperties", "items", "not"];
/// Members whose value is a list of schemas.
const SCHEMA_LISTS: &[&str] = &["allOf", "anyOf", "oneOf"];
/// The members of an `x-kubernetes-validations` entry that hold CEL.
const CEL_MEMBERS: &[&str] = &["rule", "messageExpression"];

impl JsonRewriter<'_> {
    /// One schema and, recursively, every schema under it.
    pub(super) fn json_schema<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
    ) -> Result<(), RewriteError> {
        let Some(ms) = w.members(raw)? else {
            return Ok(());
        };
        for (key, v) in ms.iter() {
            let key = key.0.as_ref();
            match key {
                "enum" => {
                    if let Some(es) = w.elements(v)? {
                        for e in es.iter() {
                            self.value(w, e, Form::Literal)?;
                        }
                    }
                }
                // A string default only: an object default is data of the
                // schema's own shape, not a name.
                "default" => self.value(w, v, Form::Literal)?,
                "x-kubernetes-validations" => {
                    if let Some(es) = w.elements(v)? {
                        for e in es.iter() {
                            let Some(rule) = w.members(e)? else {
                                continue;
                            };
                            for (k, c) in rule.iter() {
                                if CEL_MEMBERS.contains(&k.0.as_ref()) {
                                    self.value(w, c, Form::Cel)?;
                                }
                            }
                        }
                    }
                }
                _ if SCHEMA_MAPS.contains(&key) => {
                    if let Some(props) = w.members(v)? {
                        for (_, s) in props.iter() {
                            self.json_schema(w, s)?;
                        }
                    }
                }
                _ if SCHEMA_LISTS.contains(&key) => {
                    if let Some(es) = w.elements(v)? {
                        for s in es.iter() {
                            self.json_schema(w, s)?;
                        }
                    }
                }
                _ if SCHEMAS.contains(&key) => match w.elements(v)? {
                    Some(es) => {
                        for s in es.iter() {
                            self.json_schema(w, s)?;
                        }
                    }
                    None => self.json_schema(w, v)?,
                },
                _ => {}
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use regroup_config::Direction;

    use crate::rewrite::error::RewriteError;
    use crate::rewrite::json::JsonRewriter;
    use crate::rewrite::Catalog;

    const CONFIG: &str = "
rules:
  - {from: samplecontroller.k8s.io, to: samplecontroller.team1.example.com}
  - {from: configuration.konghq.com, to: configuration.team1.example.com}
names: {kinds: []}
metadata:
  prefixes:
    - {from: kopf.zalando.org, to: kopf.team1.example.com}
";

    fn try_rename(dir: Direction, input: &str) -> Result<String, RewriteError> {
        let s = regroup_config::load(CONFIG).unwrap();
        let c = Catalog::for_map(&s.fields, &s.map);
        let rw = JsonRewriter::new(&s.map, &c, dir);
        Ok(match rw.rewrite_bytes(input.as_bytes())? {
            Some(out) => String::from_utf8(out).unwrap(),
            None => input.to_owned(),
        })
    }

    fn rename(dir: Direction, input: &str) -> String {
        try_rename(dir, input).unwrap()
    }

    fn both_ways(app: &str, cluster: &str) {
        assert_eq!(rename(Direction::ToCluster, app), cluster, "to the cluster");
        assert_eq!(rename(Direction::ToApp, cluster), app, "to the app");
    }

    /// The captured Table of the cluster's CRD, with its object: its real
    /// CEL rules parse and are kept byte for byte; a rule comparing with
    /// the cluster's group (put in by substitution) is renamed, and
    /// nothing else changes.
    #[test]
    fn a_captured_crds_rules_are_parsed_and_only_exact_literals_change() {
        let captured = include_str!(
            "../../../../testdata/kube-1.29/renamed/034-get-crd-table-include-object/response.body"
        );
        let rule = "self.spec.deploymentName != 'forbidden'";
        assert!(captured.contains(rule));
        let plain = rename(Direction::ToApp, captured);
        assert!(plain.contains(rule));
        let pinned = captured.replace(
            rule,
            "self.spec.deploymentName != 'samplecontroller.team1.example.com'",
        );
        assert_eq!(
            rename(Direction::ToApp, &pinned),
            plain.replace(
                rule,
                "self.spec.deploymentName != 'samplecontroller.k8s.io'"
            )
        );
    }

    /// A CRD in the style of Kong's KongPluginBinding: a CEL rule pinning
    /// the group, an `enum` of groups and apiVersions, a `default`, at
    /// several depths (properties, items, additionalProperties, allOf), and
    /// a metadata key compared in CEL. Mentions that are not a whole
    /// literal are left.
    #[test]
    fn schema_enums_defaults_and_cel_literals_both_ways() {
        let crd = |g: &str, k: &str| {
            format!(
                r#"{{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition","metadata":{{"name":"kongpluginbindings.{g}"}},"spec":{{"group":"{g}","names":{{"kind":"KongPluginBinding","plural":"kongpluginbindings"}},"scope":"Namespaced","versions":[{{"name":"v1alpha1","served":true,"storage":true,"schema":{{"openAPIV3Schema":{{"type":"object","properties":{{"spec":{{"type":"object","x-kubernetes-validations":[{{"rule":"self.targetRef.group == '{g}'","messageExpression":"'group must be ' + \"{g}\"","message":"group must be {g}"}},{{"rule":"!has(self.targetRef.apiVersion) || self.targetRef.apiVersion.startsWith('{g}/')"}}],"properties":{{"targetRef":{{"type":"object","properties":{{"group":{{"type":"string","enum":["{g}","","apps"],"default":"{g}"}},"apiVersion":{{"type":"string","enum":["{g}/v1alpha1","v1"]}}}}}},"refs":{{"type":"array","items":{{"type":"object","properties":{{"group":{{"type":"string","default":"{g}"}}}}}}}},"extra":{{"type":"object","additionalProperties":{{"type":"string","enum":["{g}"]}}}},"either":{{"allOf":[{{"type":"string","enum":["{g}"]}}]}},"meta":{{"type":"object","x-kubernetes-validations":[{{"rule":"'{k}/last-handled-configuration' in self.annotations"}}]}}}}}}}}}}}}}}]}}}}"#
            )
        };
        let app = crd("configuration.konghq.com", "kopf.zalando.org");
        let cluster = crd("configuration.team1.example.com", "kopf.team1.example.com")
            // Not a whole literal: left as written.
            .replace(
                "startsWith('configuration.team1.example.com/')",
                "startsWith('configuration.konghq.com/')",
            )
            // Prose, not a schema value: left.
            .replace(
                "\"message\":\"group must be configuration.team1.example.com\"",
                "\"message\":\"group must be configuration.konghq.com\"",
            );
        both_ways(&app, &cluster);
    }

    /// A ValidatingAdmissionPolicy and a webhook's `matchConditions`.
    #[test]
    fn admission_expressions_both_ways() {
        let vap = |g: &str| {
            format!(
                r#"{{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy","metadata":{{"name":"p"}},"spec":{{"matchConditions":[{{"name":"m","expression":"request.resource.group == '{g}'"}}],"variables":[{{"name":"v","expression":"object.apiVersion == '{g}/v1alpha1'"}}],"validations":[{{"expression":"authorizer.group('{g}').resource('foos').check('get').allowed()","messageExpression":"'not ' + '{g}'"}}],"auditAnnotations":[{{"key":"k","valueExpression":"'{g}'"}}]}}}}"#
            )
        };
        both_ways(
            &vap("samplecontroller.k8s.io"),
            &vap("samplecontroller.team1.example.com"),
        );
        let hook = |g: &str| {
            format!(
                r#"{{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingWebhookConfiguration","metadata":{{"name":"h"}},"webhooks":[{{"name":"x","matchConditions":[{{"name":"m","expression":"request.kind.group == \"{g}\""}}]}}]}}"#
            )
        };
        both_ways(
            &hook("samplecontroller.k8s.io"),
            &hook("samplecontroller.team1.example.com"),
        );
    }

    /// An expression naming a mapped group that is not CEL is refused, not
    /// passed through; one naming nothing mapped is not even parsed.
    #[test]
    fn broken_cel_naming_a_group_is_an_error() {
        let vap = |e: &str| {
            format!(
                r#"{{"apiVersion":"admissionregistration.k8s.io/v1","kind":"ValidatingAdmissionPolicy","metadata":{{"name":"p"}},"spec":{{"validations":[{{"expression":"{e}"}}],"matchConstraints":{{"resourceRules":[{{"apiGroups":["samplecontroller.k8s.io"]}}]}}}}}}"#
            )
        };
        let err = try_rename(
            Direction::ToCluster,
            &vap("request.resource.group == 'samplecontroller.k8s.io"),
        )
        .unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains("not a CEL expression"), "{msg}");
        assert!(!msg.contains("request.resource"), "quotes the body: {msg}");
        let fine = vap("a ==");
        assert!(rename(Direction::ToCluster, &fine).contains("\"a ==\""));
    }
}
