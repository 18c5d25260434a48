//! How the cluster comes to call the app's webhooks through regroup, with
//! no change to the app (docs/front.md, "Webhooks"), done in the sidecar
//! path as the APIService `caBundle` amendment is:
//!
//! - When the app writes a Validating/MutatingWebhookConfiguration or a
//!   CRD (create or update in JSON, YAML or protobuf (`proto.rs`); a
//!   patch, `pipeline/patch.rs`, through [`WebhookRegistration::amend_patch`]), each
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

mod amend;
mod proto;

use base64::Engine as _;
use regroup_config::schema::{ReachAt, Registration, ServiceRef};
use regroup_config::ObjectNames;
use serde_json::{Map, Value as Json};

use crate::hooks::PatchRefused;
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
    /// The cluster's name of `registration.configuration`, when `names:`
    /// renames webhook configurations: a body already renamed names that.
    pub configuration_on_cluster: Option<String>,
}

impl Fronted {
    /// The fronted webhook at `path`, registered as `registration` says,
    /// its configuration name renamed as `names` would.
    pub fn new(path: String, registration: Registration, names: Option<&ObjectNames>) -> Fronted {
        const ADMREG: &str = "admissionregistration.k8s.io";
        let configuration_on_cluster = names
            .filter(|n| {
                n.covers_kind(ADMREG, "ValidatingWebhookConfiguration")
                    || n.covers_kind(ADMREG, "MutatingWebhookConfiguration")
            })
            .zip(registration.configuration.as_deref())
            .and_then(|(n, c)| n.to_cluster(c));
        Fronted {
            path,
            registration,
            configuration_on_cluster,
        }
    }
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
                (Some(c), Some(name))
                    if c == name || f.configuration_on_cluster.as_deref() == Some(name) =>
                {
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
        crate::hooks::front_trust::set_annotation(
            doc,
            APP_CLIENT_CONFIGS_ANNOTATION,
            Json::String(text),
        );
        true
    }

    /// A response document for the app (an object, a list, a watch
    /// event): the app's own `clientConfig`s put back. Returns whether it
    /// changed.
    pub fn to_app(&self, doc: &mut Json) -> bool {
        crate::hooks::front_trust::each_object(doc, &mut |o| self.restore(o))
    }

    /// True when a stored `clientConfig` sends the cluster to regroup: an
    /// entry kept for a webhook whose `clientConfig` is no longer regroup's
    /// (a patch that pointed it elsewhere) is stale and not shown.
    fn is_ours(&self, cc: &Json) -> bool {
        match (&self.reach_at.url, &self.reach_at.service) {
            (Some(url), _) => cc["url"]
                .as_str()
                .is_some_and(|u| u.starts_with(url.trim_end_matches('/'))),
            (None, Some(s)) => {
                cc["service"]["namespace"].as_str() == Some(&s.namespace)
                    && cc["service"]["name"].as_str() == Some(&s.name)
            }
            (None, None) => false,
        }
    }

    /// Puts back what the app wrote, from the annotation.
    fn restore(&self, o: &mut Json) -> bool {
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
        for (key, at) in client_configs_mut(o) {
            if let Some(app) = kept.get(&key) {
                if self.is_ours(at) {
                    *at = app.clone();
                }
            }
        }
        true
    }

    /// A merge, strategic-merge or apply patch of a registration (already
    /// in the cluster's names), given the `current` object in the cluster:
    /// each `clientConfig` it writes is pointed at regroup when fronted, and
    /// the annotation becomes the current one with this patch's changes, so
    /// the webhooks the patch leaves alone keep theirs. A `clientConfig`
    /// without `url` or `service` (a new `caBundle` alone) of a webhook
    /// regroup fronts keeps regroup's CA in the cluster and the app's new
    /// bundle in the annotation. Returns whether the patch changed, or why
    /// it can't be mapped.
    pub fn amend_patch(
        &self,
        patch: &mut Json,
        info: &RequestInfo,
        current: &Json,
    ) -> Result<bool, PatchRefused> {
        let Some(kind) = kind_of(info) else {
            return Ok(false);
        };
        let name = info.name.clone();
        let mut kept = current["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION]
            .as_str()
            .and_then(|t| serde_json::from_str::<Map<String, Json>>(t).ok())
            .unwrap_or_default();
        let before = kept.clone();
        let mut changed = false;
        for (key, at) in client_configs_mut(patch) {
            let Some(cc) = at.as_object() else {
                continue;
            };
            let whole = cc.contains_key("url") || cc.contains_key("service");
            if whole {
                let webhook = is_configuration(kind).then_some(key.as_str());
                match self.fronted_for(at, name.as_deref(), webhook) {
                    Some(f) => {
                        let ours = self.client_config(&f.path);
                        kept.insert(key, std::mem::replace(at, ours));
                        changed = true;
                    }
                    // Pointed elsewhere: the cluster stores the app's.
                    None => {
                        kept.remove(&key);
                    }
                }
                continue;
            }
            let Some(app) = kept.get_mut(&key).and_then(Json::as_object_mut) else {
                // Not a webhook regroup fronts: as written.
                continue;
            };
            if let Some(other) = cc.keys().find(|k| *k != "caBundle") {
                return Err(PatchRefused::PartialClientConfig {
                    webhook: key,
                    field: other.clone(),
                });
            }
            match &cc["caBundle"] {
                Json::Null => app.remove("caBundle"),
                b => app.insert("caBundle".into(), b.clone()),
            };
            *at = serde_json::json!({"caBundle": self.ca_bundle});
            changed = true;
        }
        // Written whenever a fronted clientConfig is: an apply patch that
        // left it out would give up (and so remove) the annotation.
        if changed || kept != before {
            let text = serde_json::to_string(&kept).expect("values serialize");
            crate::hooks::front_trust::set_annotation(
                patch,
                APP_CLIENT_CONFIGS_ANNOTATION,
                Json::String(text),
            );
            changed = true;
        }
        Ok(changed)
    }
}

/// Every `clientConfig` of an object or a patch of one, with its key in
/// the annotation: a configuration's webhooks by name, a CRD's conversion
/// webhook (`apiextensions.k8s.io/v1`; v1beta1 had `webhookClientConfig`).
pub(crate) fn client_configs_mut(o: &mut Json) -> Vec<(String, &mut Json)> {
    if o.get("webhooks").is_some_and(Json::is_array) {
        let hooks = o["webhooks"].as_array_mut().expect("an array");
        return hooks
            .iter_mut()
            .filter_map(|h| {
                let name = h["name"].as_str().unwrap_or_default().to_owned();
                h.get_mut("clientConfig").map(|cc| (name, cc))
            })
            .collect();
    }
    let Some(conv) = o
        .get_mut("spec")
        .and_then(|s| s.get_mut("conversion"))
        .and_then(Json::as_object_mut)
    else {
        return Vec::new();
    };
    let at = if conv.get("webhook").is_some_and(Json::is_object) {
        conv.get_mut("webhook")
            .and_then(|w| w.get_mut("clientConfig"))
    } else {
        conv.get_mut("webhookClientConfig")
    };
    at.map(|cc| vec![(CONVERSION.to_owned(), cc)])
        .unwrap_or_default()
}

fn service_matches(want: &ServiceRef, got: &Json) -> bool {
    got["namespace"].as_str() == Some(&want.namespace)
        && got["name"].as_str() == Some(&want.name)
        && want
            .path
            .as_deref()
            .is_none_or(|p| got["path"].as_str() == Some(p))
}

/// base64 of a PEM CA, as `caBundle` holds it in JSON.
pub fn ca_bundle(pem: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(pem)
}

#[cfg(test)]
mod tests;
