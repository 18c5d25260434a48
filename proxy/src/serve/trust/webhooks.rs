//! How the cluster comes to call the app's webhooks through regroup, with
//! no change to the app (docs/front.md, "Webhooks"), done in the sidecar
//! path as the APIService `caBundle` amendment is:
//!
//! - When the app writes a Validating/MutatingWebhookConfiguration or a
//!   CRD (create, update, merge or strategic-merge patch, JSON), each
//!   `clientConfig` the configuration says is fronted is pointed at
//!   regroup's webhook listener (its `reachAt` URL or Service, with the
//!   webhook's path) with regroup's serving CA in `caBundle`; what the app
//!   wrote is kept in the annotation [`APP_CLIENT_CONFIGS_ANNOTATION`] (a
//!   JSON object: webhook name, or `conversion` for a CRD, to the app's
//!   `clientConfig`).
//! - When the app reads them back (get, list, watch), each `clientConfig`
//!   kept there is put back and the annotation removed: the app sees what
//!   it wrote, so a controller that manages its own registration and
//!   certificates never fights regroup.

use base64::Engine as _;
use regroup_config::schema::{ReachAt, Registration, ServiceRef};
use serde_json::{Map, Value as Json};

use crate::kube::RequestInfo;

/// Where the app's own `clientConfig`s are kept on the cluster's object.
pub const APP_CLIENT_CONFIGS_ANNOTATION: &str = "regroup.dev/app-client-configs";

/// The key of a CRD's conversion webhook in the annotation.
const CONVERSION: &str = "conversion";

/// One fronted webhook: which registration is it, and at what path of the
/// listener regroup serves it.
#[derive(Clone, Debug)]
pub struct Fronted {
    /// The path of the webhook listener.
    pub path: String,
    /// Which `clientConfig` written by the app is this one.
    pub registration: Registration,
}

/// What the sidecar does to the app's webhook registrations.
#[derive(Clone, Debug)]
pub struct WebhookRegistration {
    /// Where the cluster reaches regroup's webhook listener.
    pub reach_at: ReachAt,
    /// base64 of the PEM CA that signed the listener's certificate.
    pub ca_bundle: String,
    /// The fronted webhooks.
    pub fronted: Vec<Fronted>,
}

/// The kinds of the resources a request addresses, when registrations.
fn kind_of(info: &RequestInfo) -> Option<&'static str> {
    match (info.group.as_str(), info.resource.as_deref()?) {
        ("admissionregistration.k8s.io", "validatingwebhookconfigurations") => {
            Some("ValidatingWebhookConfiguration")
        }
        ("admissionregistration.k8s.io", "mutatingwebhookconfigurations") => {
            Some("MutatingWebhookConfiguration")
        }
        ("apiextensions.k8s.io", "customresourcedefinitions") => Some("CustomResourceDefinition"),
        _ => None,
    }
}

/// True when the request is about webhook registrations.
pub(crate) fn relevant(info: &RequestInfo) -> bool {
    kind_of(info).is_some() && info.subresource.is_none()
}

fn is_configuration(kind: &str) -> bool {
    kind == "ValidatingWebhookConfiguration" || kind == "MutatingWebhookConfiguration"
}

impl WebhookRegistration {
    /// The `clientConfig` that sends the cluster to regroup for `path`.
    fn client_config(&self, path: &str) -> Json {
        let mut cc = Map::new();
        match (&self.reach_at.url, &self.reach_at.service) {
            (Some(url), _) => {
                cc.insert(
                    "url".into(),
                    Json::String(format!("{}{path}", url.trim_end_matches('/'))),
                );
            }
            (None, Some(s)) => {
                let mut svc = Map::new();
                svc.insert("namespace".into(), Json::String(s.namespace.clone()));
                svc.insert("name".into(), Json::String(s.name.clone()));
                svc.insert("path".into(), Json::String(path.to_owned()));
                svc.insert("port".into(), Json::from(s.port.unwrap_or(443)));
                cc.insert("service".into(), Json::Object(svc));
            }
            (None, None) => {}
        }
        cc.insert("caBundle".into(), Json::String(self.ca_bundle.clone()));
        Json::Object(cc)
    }

    /// The fronted webhook this `clientConfig` (of webhook `webhook` in
    /// configuration `configuration`, or of a CRD) is, if any.
    fn fronted_for(
        &self,
        cc: &Json,
        configuration: Option<&str>,
        webhook: Option<&str>,
    ) -> Option<&Fronted> {
        // A partial clientConfig (a patch of its caBundle alone) can't be
        // kept whole for the app to read back: left as written.
        if cc.get("url").is_none() && cc.get("service").is_none() {
            return None;
        }
        self.fronted.iter().find(|f| {
            let r = &f.registration;
            if let Some(url) = &r.url {
                return cc["url"].as_str() == Some(url.as_str());
            }
            if let Some(s) = &r.service {
                return service_matches(s, &cc["service"]);
            }
            match (&r.configuration, configuration) {
                (Some(c), Some(name)) if c == name => {
                    r.webhook.as_deref().is_none_or(|w| Some(w) == webhook)
                }
                _ => false,
            }
        })
    }

    /// A request body from the app (already in the cluster's names), for a
    /// request on `info`: fronted `clientConfig`s pointed at regroup, the
    /// app's kept in the annotation. Whole objects and merge patches alike
    /// (a patch names its kind in the URL only). Returns whether it changed.
    pub fn to_cluster(&self, doc: &mut Json, info: &RequestInfo) -> bool {
        let Some(kind) = kind_of(info) else {
            return false;
        };
        let name = doc["metadata"]["name"]
            .as_str()
            .or(info.name.as_deref())
            .map(str::to_owned);
        let mut kept = Map::new();
        if is_configuration(kind) {
            let Some(hooks) = doc.get_mut("webhooks").and_then(Json::as_array_mut) else {
                return false;
            };
            for h in hooks {
                let hook_name = h["name"].as_str().map(str::to_owned);
                let Some(cc) = h.get("clientConfig") else {
                    continue;
                };
                let Some(f) = self.fronted_for(cc, name.as_deref(), hook_name.as_deref()) else {
                    continue;
                };
                let ours = self.client_config(&f.path);
                if *cc == ours {
                    continue;
                }
                let app = std::mem::replace(&mut h["clientConfig"], ours);
                kept.insert(hook_name.unwrap_or_default(), app);
            }
        } else {
            // apiextensions.k8s.io/v1; v1beta1 had `webhookClientConfig`.
            let conv = &mut doc["spec"]["conversion"];
            let at = if conv["webhook"]["clientConfig"].is_object() {
                &mut conv["webhook"]["clientConfig"]
            } else if conv["webhookClientConfig"].is_object() {
                &mut conv["webhookClientConfig"]
            } else {
                return false;
            };
            let Some(f) = self.fronted_for(at, None, None) else {
                return false;
            };
            let ours = self.client_config(&f.path);
            if *at == ours {
                return false;
            }
            kept.insert(CONVERSION.into(), std::mem::replace(at, ours));
        }
        if kept.is_empty() {
            return false;
        }
        let text = serde_json::to_string(&kept).expect("values serialize");
        super::set_annotation(doc, APP_CLIENT_CONFIGS_ANNOTATION, Json::String(text));
        true
    }

    /// A response document for the app (an object, a list, a watch
    /// event): the app's own `clientConfig`s put back. Returns whether it
    /// changed.
    pub fn to_app(&self, doc: &mut Json) -> bool {
        super::each_object(doc, &mut restore)
    }
}

fn service_matches(want: &ServiceRef, got: &Json) -> bool {
    got["namespace"].as_str() == Some(&want.namespace)
        && got["name"].as_str() == Some(&want.name)
        && want
            .path
            .as_deref()
            .is_none_or(|p| got["path"].as_str() == Some(p))
}

/// Puts back what the app wrote, from the annotation.
fn restore(o: &mut Json) -> bool {
    let Some(text) = o["metadata"]["annotations"]
        .as_object_mut()
        .and_then(|a| a.remove(APP_CLIENT_CONFIGS_ANNOTATION))
    else {
        return false;
    };
    if o["metadata"]["annotations"]
        .as_object()
        .is_some_and(Map::is_empty)
    {
        if let Some(m) = o["metadata"].as_object_mut() {
            m.remove("annotations");
        }
    }
    // Not ours to read (edited by hand): shown without it.
    let Some(kept) = text
        .as_str()
        .and_then(|t| serde_json::from_str::<Map<String, Json>>(t).ok())
    else {
        return true;
    };
    if let Some(hooks) = o.get_mut("webhooks").and_then(Json::as_array_mut) {
        for h in hooks {
            let name = h["name"].as_str().unwrap_or_default().to_owned();
            if let Some(app) = kept.get(&name) {
                h["clientConfig"] = app.clone();
            }
        }
    } else if let Some(app) = kept.get(CONVERSION) {
        let conv = &mut o["spec"]["conversion"];
        if conv["webhook"].is_object() {
            conv["webhook"]["clientConfig"] = app.clone();
        } else if conv["webhookClientConfig"].is_object() {
            conv["webhookClientConfig"] = app.clone();
        }
    }
    true
}

/// base64 of a PEM CA, as `caBundle` holds it in JSON.
pub fn ca_bundle(pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(pem)
}

#[cfg(test)]
mod tests;
