//! How an app that is itself an aggregated API server comes to trust
//! regroup's front, with no change to the app (docs/front.md), done in the
//! sidecar path:
//!
//! - In what the app reads of `kube-system/extension-apiserver-authentication`,
//!   regroup's client CA is appended to `requestheader-client-ca-file` and
//!   its client certificate's CN to `requestheader-allowed-names` (when that
//!   list restricts names), so the app accepts regroup as a front proxy.
//! - When the app writes its APIService, the cluster stores regroup's front
//!   serving CA in `spec.caBundle` (the aggregator must trust regroup, which
//!   it calls), and the bundle the app wrote is kept in an annotation; when
//!   the app reads its APIService back it sees its own bundle, so its own
//!   CA-rotation controller never fights regroup.
//!
//! Both in JSON (here) and in Kubernetes protobuf (`proto.rs`, the encoding
//! client-go uses for built-in types), with one policy: the functions below
//! decide what is amended and into what; each encoding only finds the
//! objects and reads and writes the values. `amend.rs` makes it an `Amend` (the
//! pipeline's one extension point, `hooks/`) and holds the one place
//! that decides which requests the trust looks at. The JSON Patch of the
//! app's own APIService is served by the pipeline's patch step
//! (`pipeline/patch.rs`).

mod amend;
mod proto;

use base64::Engine as _;
use regroup_config::{Direction, GroupMap};
use serde_json::{Map, Value as Json};

/// Where the app's own `spec.caBundle` is kept on the cluster's APIService.
pub const APP_CA_BUNDLE_ANNOTATION: &str = "regroup.dev/app-ca-bundle";

/// What regroup's front needs the app and the cluster to trust.
#[derive(Clone, Debug)]
pub struct FrontTrust {
    /// PEM of the CA that signed regroup's client certificate to the app.
    pub client_ca_pem: String,
    /// The CN of that client certificate.
    pub client_cn: String,
    /// base64 of the PEM CA that signed regroup's front serving certificate.
    pub serving_ca_bundle: String,
}

// The policy, over plain values, shared by the JSON documents below and the
// protobuf objects of `proto.rs`: which objects are amended, and
// into what.

/// The name of the ConfigMap kube-apiserver publishes its request-header
/// configuration in.
pub(crate) const AUTHENTICATION_CONFIGMAP: &str = "extension-apiserver-authentication";

/// True for `kube-system/extension-apiserver-authentication`.
pub(crate) fn is_authentication_configmap_at(namespace: Option<&str>, name: Option<&str>) -> bool {
    namespace == Some("kube-system") && name == Some(AUTHENTICATION_CONFIGMAP)
}

/// True for an `apiVersion` of APIServices (any version of the group).
pub(crate) fn is_apiservice_version(api_version: &str) -> bool {
    api_version.starts_with("apiregistration.k8s.io/")
}

/// True when an APIService written by the app (already in the cluster's
/// names) is of a renamed group, read from `spec.group` or else from its
/// `version.group` name: regroup's front serves it, so its bundle is
/// regroup's.
pub(crate) fn is_renamed_apiservice(
    map: &GroupMap,
    spec_group: Option<&str>,
    name: Option<&str>,
) -> bool {
    let group = spec_group.or_else(|| name.and_then(|n| n.split_once('.').map(|(_, g)| g)));
    group.is_some_and(|g| map.rule_for(g, Direction::ToApp).is_some())
}

/// The annotation value that keeps the app's bundle, given as raw bytes
/// (protobuf): base64, as JSON writes `[]byte`, so JSON and protobuf
/// readers agree on it.
pub(crate) fn annotation_for_bundle(raw: &[u8]) -> String {
    base64::engine::general_purpose::STANDARD.encode(raw)
}

/// The raw bytes of a bundle kept in the annotation (base64, as JSON
/// writes it; Go's decoder skips line breaks, so does this one). `None`
/// when it is not base64.
pub(crate) fn bundle_from_annotation(value: &str) -> Option<Vec<u8>> {
    let engine = &base64::engine::general_purpose::STANDARD;
    engine.decode(value).ok().or_else(|| {
        let compact: String = value
            .chars()
            .filter(|c| !matches!(c, '\r' | '\n'))
            .collect();
        engine.decode(compact).ok()
    })
}

fn is_authentication_configmap(o: &Json) -> bool {
    o["kind"] == "ConfigMap"
        && is_authentication_configmap_at(
            o["metadata"]["namespace"].as_str(),
            o["metadata"]["name"].as_str(),
        )
}

fn is_apiservice(o: &Json) -> bool {
    o["kind"] == "APIService" && o["apiVersion"].as_str().is_some_and(is_apiservice_version)
}

/// Calls `f` on every object of a document: itself, list items, a watch
/// event's object.
pub(crate) fn each_object(doc: &mut Json, f: &mut dyn FnMut(&mut Json) -> bool) -> bool {
    if doc.get("type").is_some() && doc.get("object").is_some() && doc.get("kind").is_none() {
        return each_object(&mut doc["object"], f);
    }
    let mut changed = false;
    if doc.get("items").is_some_and(Json::is_array) {
        let list_kind = doc_kind_without_list(doc);
        if let Some(items) = doc.get_mut("items").and_then(Json::as_array_mut) {
            for item in items {
                // Typed lists omit their items' kind.
                if item.get("kind").is_none() {
                    if let (Some(k), Some(m)) = (&list_kind, item.as_object_mut()) {
                        m.insert("kind".into(), Json::String(k.0.clone()));
                        m.insert("apiVersion".into(), Json::String(k.1.clone()));
                        changed |= f(item);
                        let m = item.as_object_mut().expect("still an object");
                        m.remove("kind");
                        m.remove("apiVersion");
                        continue;
                    }
                }
                changed |= f(item);
            }
        }
        return changed;
    }
    f(doc)
}

fn doc_kind_without_list(doc: &Json) -> Option<(String, String)> {
    let kind = doc["kind"].as_str()?.strip_suffix("List")?;
    Some((kind.to_owned(), doc["apiVersion"].as_str()?.to_owned()))
}

impl FrontTrust {
    /// Responses to the app: the authentication ConfigMap amended, the
    /// app's own APIService bundle shown back. Returns whether it changed.
    pub fn to_app(&self, doc: &mut Json) -> bool {
        each_object(doc, &mut |o| {
            if is_authentication_configmap(o) {
                self.amend_authentication(o)
            } else if is_apiservice(o) {
                restore_app_bundle(o)
            } else if o["kind"] == "PartialObjectMetadata" {
                // Requests reach here for APIServices and the ConfigMap only
                // (`amend::relevant`): a metadata-only APIService.
                hide_app_bundle_annotation(o).is_some()
            } else {
                false
            }
        })
    }

    /// Requests from the app (already renamed for the cluster): an
    /// APIService of a renamed group gets regroup's serving CA, and the
    /// app's bundle is kept aside. `patched` is the (cluster) name of the
    /// APIService a partial body (a merge patch) is for: such a body names
    /// neither its kind nor, often, its group.
    pub fn to_cluster(&self, doc: &mut Json, map: &GroupMap, patched: Option<&str>) -> bool {
        let mut f = |o: &mut Json| -> bool {
            let ours = patched.is_some() || is_apiservice(o);
            let renamed = is_renamed_apiservice(
                map,
                o["spec"]["group"].as_str(),
                o["metadata"]["name"].as_str().or(patched),
            );
            ours && renamed && self.substitute_bundle(o)
        };
        each_object(doc, &mut f)
    }

    fn amend_authentication(&self, cm: &mut Json) -> bool {
        let Some(data) = cm.get_mut("data").and_then(Json::as_object_mut) else {
            return false;
        };
        let mut changed = false;
        for (key, value) in data.iter_mut() {
            if let Json::String(v) = value {
                if let Some(new) = self.amended_authentication_entry(key, v) {
                    *v = new;
                    changed = true;
                }
            }
        }
        changed
    }

    /// The new value of one `data` entry of the authentication ConfigMap,
    /// if regroup amends it: its client CA appended to
    /// `requestheader-client-ca-file`, its CN to a restricting
    /// `requestheader-allowed-names`.
    pub(crate) fn amended_authentication_entry(&self, key: &str, value: &str) -> Option<String> {
        match key {
            "requestheader-client-ca-file" => self.amended_client_ca(value),
            "requestheader-allowed-names" => self.amended_allowed_names(value),
            _ => None,
        }
    }

    fn amended_client_ca(&self, bundle: &str) -> Option<String> {
        if bundle.contains(self.client_ca_pem.trim()) {
            return None;
        }
        let mut bundle = bundle.to_owned();
        if !bundle.ends_with('\n') {
            bundle.push('\n');
        }
        bundle.push_str(&self.client_ca_pem);
        Some(bundle)
    }

    fn amended_allowed_names(&self, names: &str) -> Option<String> {
        // A JSON list in a string; empty means any name is allowed.
        let mut list = serde_json::from_str::<Vec<String>>(names).ok()?;
        if list.is_empty() || list.contains(&self.client_cn) {
            return None;
        }
        list.push(self.client_cn.clone());
        Some(serde_json::to_string(&list).expect("strings serialize"))
    }

    /// True when `app_bundle` (base64, as JSON writes it) already is
    /// regroup's serving CA: nothing to substitute.
    pub(crate) fn is_serving_bundle(&self, app_bundle: &str) -> bool {
        app_bundle == self.serving_ca_bundle
    }

    fn substitute_bundle(&self, o: &mut Json) -> bool {
        let Some(spec) = o.get_mut("spec").and_then(Json::as_object_mut) else {
            return false;
        };
        let Some(app_bundle) = spec.get("caBundle").cloned() else {
            return false;
        };
        if app_bundle
            .as_str()
            .is_some_and(|b| self.is_serving_bundle(b))
        {
            return false;
        }
        spec.insert(
            "caBundle".into(),
            Json::String(self.serving_ca_bundle.clone()),
        );
        set_annotation(o, APP_CA_BUNDLE_ANNOTATION, app_bundle);
        true
    }
}

/// Removes regroup's annotation (and `annotations` left empty); returns
/// the app's bundle it kept.
/// Sets `metadata.annotations[key]` of object `o`, making the maps it
/// lacks (an annotation regroup keeps what the app wrote in).
pub(crate) fn set_annotation(o: &mut Json, key: &str, value: Json) {
    let Some(o) = o.as_object_mut() else {
        return;
    };
    let meta = o
        .entry("metadata")
        .or_insert_with(|| Json::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        let ann = meta
            .entry("annotations")
            .or_insert_with(|| Json::Object(Map::new()));
        if let Some(ann) = ann.as_object_mut() {
            ann.insert(key.into(), value);
        }
    }
}

fn hide_app_bundle_annotation(o: &mut Json) -> Option<Json> {
    let app_bundle = o["metadata"]["annotations"]
        .as_object_mut()
        .and_then(|a| a.remove(APP_CA_BUNDLE_ANNOTATION))?;
    if o["metadata"]["annotations"]
        .as_object()
        .is_some_and(Map::is_empty)
    {
        if let Some(m) = o["metadata"].as_object_mut() {
            m.remove("annotations");
        }
    }
    Some(app_bundle)
}

/// The app reads back the bundle it wrote; the annotation is regroup's.
fn restore_app_bundle(o: &mut Json) -> bool {
    let Some(app_bundle) = hide_app_bundle_annotation(o) else {
        return false;
    };
    if let Some(spec) = o.get_mut("spec").and_then(Json::as_object_mut) {
        spec.insert("caBundle".into(), app_bundle);
    }
    true
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use regroup_config::{MapRule, Rule};
    use serde_json::json;

    fn trust() -> FrontTrust {
        FrontTrust {
            client_ca_pem: "-----BEGIN CERTIFICATE-----\nREGROUP\n-----END CERTIFICATE-----\n"
                .into(),
            client_cn: "regroup-front".into(),
            serving_ca_bundle: "UkVHUk9VUA==".into(),
        }
    }

    /// wardle.example.com -> wardle.team1.example.com.
    pub(crate) fn map() -> GroupMap {
        GroupMap::new(vec![MapRule {
            rule: Rule::Exact {
                from: "wardle.example.com".into(),
                to: "wardle.team1.example.com".into(),
            },
            reference_keys: true,
        }])
        .unwrap()
    }

    fn configmap(names: &str) -> Json {
        json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "extension-apiserver-authentication", "namespace": "kube-system"},
            "data": {"requestheader-client-ca-file": "-----BEGIN CERTIFICATE-----\nCLUSTER\n-----END CERTIFICATE-----\n",
                     "requestheader-allowed-names": names,
                     "requestheader-username-headers": "[\"X-Remote-User\"]"}})
    }

    #[test]
    fn the_app_sees_regroups_ca_and_name_in_the_authentication_configmap() {
        let mut cm = configmap("[\"front-proxy-client\"]");
        assert!(trust().to_app(&mut cm));
        let ca = cm["data"]["requestheader-client-ca-file"].as_str().unwrap();
        assert!(ca.contains("CLUSTER") && ca.contains("REGROUP"));
        assert_eq!(
            cm["data"]["requestheader-allowed-names"],
            "[\"front-proxy-client\",\"regroup-front\"]"
        );
        // Idempotent, and an empty list (any name) stays empty.
        assert!(!trust().to_app(&mut cm));
        let mut any = configmap("[]");
        trust().to_app(&mut any);
        assert_eq!(any["data"]["requestheader-allowed-names"], "[]");
        // In a typed list and a watch event too.
        let mut list =
            json!({"apiVersion": "v1", "kind": "ConfigMapList", "items": [configmap("[\"a\"]")]});
        list["items"][0].as_object_mut().unwrap().remove("kind");
        list["items"][0]
            .as_object_mut()
            .unwrap()
            .remove("apiVersion");
        assert!(trust().to_app(&mut list));
        assert!(list["items"][0].get("kind").is_none());
        let mut ev = json!({"type": "MODIFIED", "object": configmap("[\"a\"]")});
        assert!(trust().to_app(&mut ev));
    }

    #[test]
    fn the_cluster_stores_regroups_serving_ca_and_the_app_reads_back_its_own() {
        let app_written = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1alpha1.wardle.team1.example.com"},
            "spec": {"group": "wardle.team1.example.com", "version": "v1alpha1", "caBundle": "QVBQ"}});
        let mut stored = app_written.clone();
        assert!(trust().to_cluster(&mut stored, &map(), None));
        assert_eq!(stored["spec"]["caBundle"], "UkVHUk9VUA==");
        assert_eq!(
            stored["metadata"]["annotations"][APP_CA_BUNDLE_ANNOTATION],
            "QVBQ"
        );
        let mut read = stored.clone();
        assert!(trust().to_app(&mut read));
        assert_eq!(read, app_written);
        // Another app's APIService is left alone.
        let mut other = json!({"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
            "metadata": {"name": "v1beta1.metrics.k8s.io"},
            "spec": {"group": "metrics.k8s.io", "caBundle": "T1RIRVI="}});
        assert!(!trust().to_cluster(&mut other, &map(), None));
        // A merge patch of the bundle (the app's rotation controller).
        let mut patch = json!({"spec": {"caBundle": "TkVX"}});
        let ours = Some("v1alpha1.wardle.team1.example.com");
        assert!(trust().to_cluster(&mut patch, &map(), ours));
        assert_eq!(
            patch,
            json!({"spec": {"caBundle": "UkVHUk9VUA=="}, "metadata": {"annotations": {APP_CA_BUNDLE_ANNOTATION: "TkVX"}}})
        );
        // ... and another app's, patched by this app, is left alone.
        let mut patch = json!({"spec": {"caBundle": "TkVX"}});
        assert!(!trust().to_cluster(&mut patch, &map(), Some("v1beta1.metrics.k8s.io")));
        assert_eq!(patch, json!({"spec": {"caBundle": "TkVX"}}));
    }

    #[test]
    fn metadata_only_apiservices_show_the_app_no_regroup_annotation() {
        let item = |ann: Json| {
            json!({"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                   "metadata": {"name": "v1alpha1.wardle.example.com", "annotations": ann}})
        };
        let mut list = json!({"kind": "PartialObjectMetadataList", "apiVersion": "meta.k8s.io/v1",
            "items": [item(json!({APP_CA_BUNDLE_ANNOTATION: "QVBQ", "keep": "me"}))]});
        assert!(trust().to_app(&mut list));
        assert_eq!(list["items"][0], item(json!({"keep": "me"})));
        let mut one = item(json!({APP_CA_BUNDLE_ANNOTATION: "QVBQ"}));
        assert!(trust().to_app(&mut one));
        assert!(one["metadata"].get("annotations").is_none());
        assert!(!trust().to_app(&mut item(json!({"keep": "me"}))));
    }
}
