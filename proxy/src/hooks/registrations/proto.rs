//! The webhook registration amendment ([`WebhookRegistration`]) on
//! Kubernetes protobuf (`application/vnd.kubernetes.protobuf`), the
//! encoding client-go's typed clients may use for admissionregistration
//! and apiextensions: Validating/MutatingWebhookConfigurations and CRDs
//! (`v1`) written by the app (create, update; patches are never protobuf)
//! and read back by it, alone, in typed lists and in watch events.
//!
//! Only those objects are decoded, each into a [`DynamicMessage`] of its
//! descriptor (`core/proto/`; fields regroup does not declare are kept as
//! unknown fields). Their `clientConfig`s and the annotation are read into
//! a small JSON view, amended by the same policy as JSON bodies, and the
//! `clientConfig`s and the annotation that changed are written back; the
//! object's new bytes are spliced into what holds it with the length
//! prefixes above recomputed. Every other byte, and any body in which
//! nothing changes, stays as it came. `caBundle` is raw bytes in protobuf
//! and base64 in the JSON view (and in the annotation), as in JSON.

use base64::Engine as _;
use prost_reflect::prost::Message as _;
use prost_reflect::{DynamicMessage, MapKey, MessageDescriptor, ReflectMessage as _, Value};
use serde_json::{Map, Value as Json};

use super::{WebhookRegistration, APP_CLIENT_CONFIGS_ANNOTATION};
use crate::hooks::front_trust::bundle_from_annotation;
use crate::kube::RequestInfo;
use crate::rewrite::protobuf::envelope::{event_object, Head};
use crate::rewrite::protobuf::wire::splice_field as splice;
use crate::rewrite::protobuf::{message_for, MAGIC};
use crate::rewrite::RewriteError;

fn malformed(e: impl std::fmt::Display) -> RewriteError {
    RewriteError::Protobuf(e.to_string())
}

impl WebhookRegistration {
    /// [`to_cluster`](Self::to_cluster) for a protobuf request body (an
    /// enveloped object, already renamed for the cluster). `Ok(None)`:
    /// nothing changes.
    pub fn proto_to_cluster(
        &self,
        body: &[u8],
        info: &RequestInfo,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        if body.is_empty() {
            return Ok(None);
        }
        Walk {
            r: self,
            to_cluster: Some(info),
        }
        .envelope(body, 0)
    }

    /// [`to_app`](Self::to_app) for a protobuf response: an enveloped
    /// object, a typed list or an enveloped watch event.
    pub fn proto_to_app(&self, body: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        if body.is_empty() {
            return Ok(None);
        }
        Walk {
            r: self,
            to_cluster: None,
        }
        .envelope(body, 0)
    }

    /// [`to_app`](Self::to_app) for one frame of a protobuf watch (a raw
    /// `WatchEvent` without its length).
    pub fn proto_watch_event_to_app(&self, event: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        Walk {
            r: self,
            to_cluster: None,
        }
        .event(event, 0)
    }
}

/// What an enveloped object is, among those amended.
#[derive(Clone, Copy, Debug)]
enum Kind {
    /// A registration: its group and kind.
    Object(&'static str, &'static str),
    /// A typed list of them (items at 2).
    List(&'static str, &'static str),
    WatchEvent,
}

const ADMISSION: &str = "admissionregistration.k8s.io";
const EXTENSIONS: &str = "apiextensions.k8s.io";

fn registration_kind(api_version: &str, kind: &str) -> Option<(&'static str, &'static str)> {
    match (api_version, kind) {
        ("admissionregistration.k8s.io/v1", "ValidatingWebhookConfiguration") => {
            Some((ADMISSION, "ValidatingWebhookConfiguration"))
        }
        ("admissionregistration.k8s.io/v1", "MutatingWebhookConfiguration") => {
            Some((ADMISSION, "MutatingWebhookConfiguration"))
        }
        ("apiextensions.k8s.io/v1", "CustomResourceDefinition") => {
            Some((EXTENSIONS, "CustomResourceDefinition"))
        }
        _ => None,
    }
}

/// One pass: towards the cluster (with the request) or the app.
struct Walk<'a> {
    r: &'a WebhookRegistration,
    to_cluster: Option<&'a RequestInfo>,
}

impl Walk<'_> {
    fn kind(&self, api_version: &str, kind: &str) -> Option<Kind> {
        if let Some((g, k)) = registration_kind(api_version, kind) {
            return Some(Kind::Object(g, k));
        }
        if self.to_cluster.is_some() {
            return None;
        }
        if kind == "WatchEvent" {
            return Some(Kind::WatchEvent);
        }
        let (g, k) = registration_kind(api_version, kind.strip_suffix("List")?)?;
        Some(Kind::List(g, k))
    }

    /// `k8s\0` + `runtime.Unknown` {1 typeMeta, 2 raw, ...}.
    fn envelope(&self, body: &[u8], depth: usize) -> Result<Option<Vec<u8>>, RewriteError> {
        let (unknown, head) = Head::open(body, depth)?;
        let Some(kind) = self.kind(head.api_version, head.kind) else {
            return Ok(None);
        };
        let out = splice(unknown, 2, &mut |raw| match kind {
            Kind::Object(g, k) => self.object(g, k, raw),
            Kind::List(g, k) => splice(raw, 2, &mut |item| self.object(g, k, item)),
            Kind::WatchEvent => self.event(raw, depth + 1),
        })?;
        Ok(out.map(|u| [MAGIC, &u].concat()))
    }

    /// A `WatchEvent` {1 type, 2 object: `RawExtension` {1 raw}}.
    fn event(&self, event: &[u8], depth: usize) -> Result<Option<Vec<u8>>, RewriteError> {
        event_object(event, depth, &mut |bytes, depth| {
            self.envelope(bytes, depth)
        })
    }

    /// One registration's bytes, amended.
    fn object(&self, group: &str, kind: &str, raw: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        // The app's view changes only where regroup's annotation is.
        if self.to_cluster.is_none() && !contains(raw, APP_CLIENT_CONFIGS_ANNOTATION.as_bytes()) {
            return Ok(None);
        }
        let desc = message_for(group, "v1", kind)
            .ok_or_else(|| malformed(format!("no protobuf message for {kind}")))?;
        let mut msg =
            DynamicMessage::decode(desc, raw).map_err(|e| malformed(format!("{kind}: {e}")))?;
        let before = view(&msg);
        let mut after = before.clone();
        let changed = match self.to_cluster {
            Some(info) => self.r.to_cluster(&mut after, info),
            None => self.r.to_app(&mut after),
        };
        if !changed || after == before {
            return Ok(None);
        }
        write_back(&mut msg, &before, &after)?;
        Ok(Some(msg.encode_to_vec()))
    }
}

/// The JSON view of a registration: `metadata.name`, regroup's annotation,
/// and each `clientConfig` where JSON has it.
fn view(msg: &DynamicMessage) -> Json {
    let mut meta = Map::new();
    if let Some(name) = meta_str(msg, "name") {
        meta.insert("name".into(), Json::String(name));
    }
    if let Some(kept) = annotation(msg) {
        let mut a = Map::new();
        a.insert(APP_CLIENT_CONFIGS_ANNOTATION.into(), Json::String(kept));
        meta.insert("annotations".into(), Json::Object(a));
    }
    let mut doc = Map::new();
    doc.insert("metadata".into(), Json::Object(meta));
    if msg.descriptor().get_field_by_name("Webhooks").is_some() {
        let hooks = list(msg, "Webhooks")
            .iter()
            .map(|h| {
                let mut o = Map::new();
                if let Some(name) = string(h, "name") {
                    o.insert("name".into(), Json::String(name));
                }
                if let Some(cc) = message(h, "clientConfig") {
                    o.insert("clientConfig".into(), client_config_json(&cc));
                }
                Json::Object(o)
            })
            .collect();
        doc.insert("webhooks".into(), Json::Array(hooks));
    } else if let Some(cc) = message(msg, "spec")
        .and_then(|s| message(&s, "conversion"))
        .and_then(|c| message(&c, "webhook"))
        .and_then(|w| message(&w, "clientConfig"))
    {
        let cc = client_config_json(&cc);
        doc.insert(
            "spec".into(),
            serde_json::json!({"conversion": {"webhook": {"clientConfig": cc}}}),
        );
    }
    Json::Object(doc)
}

/// Writes into `msg` the `clientConfig`s and the annotation that differ
/// between the views.
fn write_back(msg: &mut DynamicMessage, before: &Json, after: &Json) -> Result<(), RewriteError> {
    if let Some(hooks) = after["webhooks"].as_array() {
        if let Some(Value::List(items)) = msg.get_field_by_name_mut("Webhooks") {
            for (i, (item, hook)) in items.iter_mut().zip(hooks).enumerate() {
                let cc = &hook["clientConfig"];
                if *cc == before["webhooks"][i]["clientConfig"] || !cc.is_object() {
                    continue;
                }
                if let Value::Message(h) = item {
                    set_client_config(h, cc)?;
                }
            }
        }
    } else {
        let cc = &after["spec"]["conversion"]["webhook"]["clientConfig"];
        if cc.is_object() && *cc != before["spec"]["conversion"]["webhook"]["clientConfig"] {
            let at = ["spec", "conversion", "webhook"]
                .iter()
                .try_fold(&mut *msg, |m, f| match m.get_field_by_name_mut(f) {
                    Some(Value::Message(inner)) => Some(inner),
                    _ => None,
                });
            if let Some(webhook) = at {
                set_client_config(webhook, cc)?;
            }
        }
    }
    let kept = after["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION].as_str();
    if kept != before["metadata"]["annotations"][APP_CLIENT_CONFIGS_ANNOTATION].as_str() {
        if let Some(Value::Message(meta)) = msg.get_field_by_name_mut("metadata") {
            if let Some(Value::Map(a)) = meta.get_field_by_name_mut("annotations") {
                let key = MapKey::String(APP_CLIENT_CONFIGS_ANNOTATION.to_owned());
                match kept {
                    Some(k) => a.insert(key, Value::String(k.to_owned())),
                    None => a.remove(&key),
                };
            }
        }
    }
    Ok(())
}

/// A `WebhookClientConfig` {1 service, 2 caBundle (bytes), 3 url} as JSON.
fn client_config_json(cc: &DynamicMessage) -> Json {
    let mut o = Map::new();
    if let Some(url) = string(cc, "url") {
        o.insert("url".into(), Json::String(url));
    }
    if let Some(svc) = message(cc, "service") {
        let mut s = Map::new();
        for f in ["namespace", "name", "path"] {
            if let Some(v) = string(&svc, f) {
                s.insert(f.into(), Json::String(v));
            }
        }
        if svc.has_field_by_name("port") {
            if let Some(p) = svc.get_field_by_name("port").and_then(|v| v.as_i32()) {
                s.insert("port".into(), Json::from(p));
            }
        }
        o.insert("service".into(), Json::Object(s));
    }
    if cc.has_field_by_name("caBundle") {
        if let Some(b) = cc
            .get_field_by_name("caBundle")
            .and_then(|v| v.as_bytes().cloned())
        {
            let text = base64::engine::general_purpose::STANDARD.encode(b);
            o.insert("caBundle".into(), Json::String(text));
        }
    }
    Json::Object(o)
}

/// Sets `holder.clientConfig` to the JSON `cc`.
fn set_client_config(holder: &mut DynamicMessage, cc: &Json) -> Result<(), RewriteError> {
    let desc = holder
        .descriptor()
        .get_field_by_name("clientConfig")
        .and_then(|f| f.kind().as_message().cloned())
        .ok_or_else(|| malformed("no clientConfig in the descriptor"))?;
    holder.set_field_by_name(
        "clientConfig",
        Value::Message(client_config_message(desc, cc)?),
    );
    Ok(())
}

fn client_config_message(
    desc: MessageDescriptor,
    cc: &Json,
) -> Result<DynamicMessage, RewriteError> {
    let mut m = DynamicMessage::new(desc.clone());
    if let Some(url) = cc["url"].as_str() {
        m.set_field_by_name("url", Value::String(url.to_owned()));
    }
    if let Some(s) = cc["service"].as_object() {
        let sdesc = desc
            .get_field_by_name("service")
            .and_then(|f| f.kind().as_message().cloned())
            .ok_or_else(|| malformed("no service in the descriptor"))?;
        let mut svc = DynamicMessage::new(sdesc);
        for f in ["namespace", "name", "path"] {
            if let Some(v) = s.get(f).and_then(Json::as_str) {
                svc.set_field_by_name(f, Value::String(v.to_owned()));
            }
        }
        if let Some(p) = s.get("port").and_then(Json::as_i64) {
            let p = i32::try_from(p).map_err(|_| malformed("a service port out of range"))?;
            svc.set_field_by_name("port", Value::I32(p));
        }
        m.set_field_by_name("service", Value::Message(svc));
    }
    if let Some(b) = cc["caBundle"].as_str() {
        let raw =
            bundle_from_annotation(b).ok_or_else(|| malformed("a caBundle that is not base64"))?;
        m.set_field_by_name("caBundle", Value::Bytes(raw.into()));
    }
    Ok(m)
}

fn message(m: &DynamicMessage, field: &str) -> Option<DynamicMessage> {
    if !m.has_field_by_name(field) {
        return None;
    }
    m.get_field_by_name(field)?.as_message().cloned()
}

fn string(m: &DynamicMessage, field: &str) -> Option<String> {
    if !m.has_field_by_name(field) {
        return None;
    }
    m.get_field_by_name(field)?.as_str().map(str::to_owned)
}

fn list(m: &DynamicMessage, field: &str) -> Vec<DynamicMessage> {
    m.get_field_by_name(field)
        .and_then(|v| {
            v.as_list()
                .map(|l| l.iter().filter_map(|i| i.as_message().cloned()).collect())
        })
        .unwrap_or_default()
}

fn meta_str(m: &DynamicMessage, field: &str) -> Option<String> {
    string(&message(m, "metadata")?, field)
}

fn annotation(m: &DynamicMessage) -> Option<String> {
    let meta = message(m, "metadata")?;
    let a = meta.get_field_by_name("annotations")?;
    let v = a
        .as_map()?
        .get(&MapKey::String(APP_CLIENT_CONFIGS_ANNOTATION.to_owned()))?;
    v.as_str().map(str::to_owned)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests;
