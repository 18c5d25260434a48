//! The front-trust hooks ([`FrontTrust`]) on Kubernetes protobuf
//! (`application/vnd.kubernetes.protobuf`), for what an aggregated server
//! built on client-go reads and writes in protobuf: the authentication
//! ConfigMap and APIServices, alone, in typed lists, in `v1 List`s (whose
//! items may be JSON) and in watch events; and metadata-only reads
//! (`PartialObjectMetadata(List)`, v1 and v1beta1) of APIServices, from
//! which regroup's annotation is removed.
//!
//! Only the objects regroup amends are decoded, each into a
//! [`DynamicMessage`] of its descriptor (`core/proto/`, fields regroup
//! does not declare kept as unknown fields), edited there and encoded again;
//! the object's new bytes are spliced into what holds it (the envelope's
//! `raw`, a list's `items`, a watch event's `object.raw`) with the length
//! prefixes above recomputed. Every other byte, and any body in which
//! nothing changes, stays exactly as it came. What to change is decided by
//! the policy functions of [`crate::hooks::front_trust`], shared with JSON.
//!
//! In protobuf `spec.caBundle` is raw bytes where JSON has base64; the
//! annotation keeping the app's bundle is base64 in both, so JSON and
//! protobuf readers agree on it.

use prost_reflect::prost::Message as _;
use prost_reflect::{DynamicMessage, MapKey, Value};
use regroup_config::GroupMap;
use serde_json::Value as Json;

use crate::hooks::front_trust::{
    annotation_for_bundle, bundle_from_annotation, is_apiservice_version,
    is_authentication_configmap_at, is_renamed_apiservice, FrontTrust, APP_CA_BUNDLE_ANNOTATION,
    AUTHENTICATION_CONFIGMAP,
};
use crate::rewrite::protobuf::envelope::{event_object, Head};
use crate::rewrite::protobuf::wire::splice_field as splice;
use crate::rewrite::protobuf::{message_for, MAGIC};
use crate::rewrite::RewriteError;

/// APIServices of any version are read with v1's message: v1beta1 (served
/// until Kubernetes 1.22) has the same fields under the same numbers.
const APIREGISTRATION: &str = "apiregistration.k8s.io";

fn malformed(e: impl std::fmt::Display) -> RewriteError {
    RewriteError::Protobuf(e.to_string())
}

impl FrontTrust {
    /// [`to_app`](Self::to_app) for a protobuf response: one enveloped
    /// object (`k8s\0` + `runtime.Unknown`), a list, or an enveloped watch
    /// event. `Ok(None)`: nothing to change, forward `body` as is.
    pub fn proto_to_app(&self, body: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        Hooks {
            trust: self,
            map: None,
        }
        .body(body)
    }

    /// [`to_app`](Self::to_app) for one frame of a protobuf watch: a raw
    /// `WatchEvent` (without its 4-byte length) whose `object.raw` is an
    /// enveloped object.
    pub fn proto_watch_event_to_app(&self, event: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        Hooks {
            trust: self,
            map: None,
        }
        .event(event, 0)
    }

    /// [`to_cluster`](Self::to_cluster) for a protobuf request body
    /// (already renamed for the cluster): an APIService of a renamed group
    /// gets regroup's serving CA, the app's bundle kept in the annotation.
    pub fn proto_to_cluster(
        &self,
        body: &[u8],
        map: &GroupMap,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        Hooks {
            trust: self,
            map: Some(map),
        }
        .body(body)
    }
}

/// What an enveloped object is, among those the hooks look at.
#[derive(Clone, Copy, Debug)]
enum Kind {
    ConfigMap,
    ConfigMapList,
    ApiService,
    ApiServiceList,
    WatchEvent,
    /// `meta/v1.List`: items are `RawExtension`s (field 2 {1 raw}).
    List,
    /// A metadata-only object; requests reach the trust hooks only for
    /// the authentication ConfigMap and APIServices (`amend::relevant`),
    /// so this is one of those.
    PartialObjectMetadata,
    /// A list of them, its items at this field (meta/v1: 2, v1beta1: 1).
    PartialObjectMetadataList(u32),
}

/// One pass of the hooks: towards the app (`map` is `None`) or towards the
/// cluster.
struct Hooks<'a> {
    trust: &'a FrontTrust,
    map: Option<&'a GroupMap>,
}

impl Hooks<'_> {
    fn body(&self, body: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        if body.is_empty() {
            return Ok(None);
        }
        self.envelope(body, 0)
    }

    /// The kinds each direction changes.
    fn kind(&self, api_version: &str, kind: &str) -> Option<Kind> {
        let to_app = self.map.is_none();
        match kind {
            "APIService" if is_apiservice_version(api_version) => Some(Kind::ApiService),
            "APIServiceList" if to_app && is_apiservice_version(api_version) => {
                Some(Kind::ApiServiceList)
            }
            "ConfigMap" if to_app && api_version == "v1" => Some(Kind::ConfigMap),
            "ConfigMapList" if to_app && api_version == "v1" => Some(Kind::ConfigMapList),
            // Every group version registers WatchEvent.
            "WatchEvent" if to_app => Some(Kind::WatchEvent),
            "List" if matches!(api_version, "v1" | "meta.k8s.io/v1") => Some(Kind::List),
            "PartialObjectMetadata"
                if to_app && matches!(api_version, "meta.k8s.io/v1" | "meta.k8s.io/v1beta1") =>
            {
                Some(Kind::PartialObjectMetadata)
            }
            "PartialObjectMetadataList" if to_app && api_version == "meta.k8s.io/v1" => {
                Some(Kind::PartialObjectMetadataList(2))
            }
            "PartialObjectMetadataList" if to_app && api_version == "meta.k8s.io/v1beta1" => {
                Some(Kind::PartialObjectMetadataList(1))
            }
            _ => None,
        }
    }

    /// An enveloped object: `k8s\0`, then `runtime.Unknown` {1 typeMeta {1
    /// apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType}.
    fn envelope(&self, body: &[u8], depth: usize) -> Result<Option<Vec<u8>>, RewriteError> {
        let (unknown, head) = Head::open(body, depth)?;
        let Some(kind) = self.kind(head.api_version, head.kind) else {
            return Ok(None);
        };
        let out = splice(unknown, 2, &mut |raw| self.object(kind, raw, depth))?;
        Ok(out.map(|u| [MAGIC, &u].concat()))
    }

    /// The `raw` of an envelope of `kind`.
    fn object(
        &self,
        kind: Kind,
        raw: &[u8],
        depth: usize,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        match kind {
            Kind::ConfigMap => self.configmap(raw),
            Kind::ConfigMapList => splice(raw, 2, &mut |item| self.configmap(item)),
            Kind::ApiService => self.apiservice(raw),
            Kind::ApiServiceList => splice(raw, 2, &mut |item| self.apiservice(item)),
            Kind::WatchEvent => self.event(raw, depth + 1),
            Kind::List => splice(raw, 2, &mut |item| {
                splice(item, 1, &mut |inner| self.embedded(inner, depth + 1))
            }),
            Kind::PartialObjectMetadata => self.partial_metadata(raw),
            Kind::PartialObjectMetadataList(items) => {
                splice(raw, items, &mut |item| self.partial_metadata(item))
            }
        }
    }

    /// The `raw` of a `v1 List` item: an enveloped object, or JSON (which
    /// the JSON policy amends).
    fn embedded(&self, raw: &[u8], depth: usize) -> Result<Option<Vec<u8>>, RewriteError> {
        if raw.is_empty() {
            return Ok(None);
        }
        if raw.starts_with(MAGIC) {
            return self.envelope(raw, depth);
        }
        let mut doc: Json = serde_json::from_slice(raw)
            .map_err(|_| malformed("a List item is neither an enveloped object nor JSON"))?;
        let changed = match self.map {
            None => self.trust.to_app(&mut doc),
            Some(map) => self.trust.to_cluster(&mut doc, map, None),
        };
        Ok(changed.then(|| serde_json::to_vec(&doc).expect("values serialize")))
    }

    /// A metadata-only object (of an APIService, see `Kind`): regroup's
    /// annotation removed, as from the whole object; there is no
    /// `spec.caBundle` to give back.
    fn partial_metadata(&self, raw: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        if !contains(raw, APP_CA_BUNDLE_ANNOTATION.as_bytes()) {
            return Ok(None);
        }
        let mut pom = decode("meta.k8s.io", "v1", "PartialObjectMetadata", raw)?;
        let mut removed = false;
        if let Some(Value::Message(meta)) = pom.get_field_by_name_mut("metadata") {
            if let Some(Value::Map(a)) = meta.get_field_by_name_mut("annotations") {
                removed = a.remove(&annotation_key()).is_some();
            }
        }
        Ok(removed.then(|| pom.encode_to_vec()))
    }

    /// A `WatchEvent` {1 type, 2 object: `RawExtension` {1 raw}}, its object
    /// enveloped. (An enveloped frame is read as an envelope.)
    fn event(&self, event: &[u8], depth: usize) -> Result<Option<Vec<u8>>, RewriteError> {
        event_object(event, depth, &mut |bytes, depth| {
            self.envelope(bytes, depth)
        })
    }

    /// A `v1` ConfigMap: the authentication ConfigMap amended.
    fn configmap(&self, raw: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        if self.map.is_some() || !contains(raw, AUTHENTICATION_CONFIGMAP.as_bytes()) {
            return Ok(None);
        }
        let mut cm = decode("", "v1", "ConfigMap", raw)?;
        let (namespace, name) = (meta_str(&cm, "namespace"), meta_str(&cm, "name"));
        if !is_authentication_configmap_at(namespace.as_deref(), name.as_deref())
            || !cm.has_field_by_name("data")
        {
            return Ok(None);
        }
        let mut changed = false;
        if let Some(Value::Map(data)) = cm.get_field_by_name_mut("data") {
            for (key, value) in data.iter_mut() {
                if let (MapKey::String(key), Value::String(value)) = (key, value) {
                    if let Some(new) = self.trust.amended_authentication_entry(key, value) {
                        *value = new;
                        changed = true;
                    }
                }
            }
        }
        Ok(changed.then(|| cm.encode_to_vec()))
    }

    fn apiservice(&self, raw: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        match self.map {
            None => self.restore_app_bundle(raw),
            Some(map) => self.substitute_bundle(raw, map),
        }
    }

    /// Towards the app: the bundle kept in the annotation back in
    /// `spec.caBundle`, the annotation removed.
    fn restore_app_bundle(&self, raw: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        if !contains(raw, APP_CA_BUNDLE_ANNOTATION.as_bytes()) {
            return Ok(None);
        }
        let mut svc = decode(APIREGISTRATION, "v1", "APIService", raw)?;
        if !svc.has_field_by_name("metadata") {
            return Ok(None);
        }
        let kept = match svc.get_field_by_name("metadata").as_deref() {
            Some(Value::Message(meta)) => match meta.get_field_by_name("annotations").as_deref() {
                Some(Value::Map(a)) => a.get(&annotation_key()).cloned(),
                _ => None,
            },
            _ => None,
        };
        let Some(Value::String(kept)) = kept else {
            return Ok(None);
        };
        let Some(bundle) = bundle_from_annotation(&kept) else {
            // Shown as stored: the app sees regroup's CA and writes its own
            // bundle again, which puts a valid one in the annotation.
            tracing::warn!(
                annotation = APP_CA_BUNDLE_ANNOTATION,
                "an APIService's kept bundle is not base64; shown to the app as stored"
            );
            return Ok(None);
        };
        if let Some(Value::Message(meta)) = svc.get_field_by_name_mut("metadata") {
            if let Some(Value::Map(a)) = meta.get_field_by_name_mut("annotations") {
                a.remove(&annotation_key());
            }
        }
        if svc.has_field_by_name("spec") {
            if let Some(Value::Message(spec)) = svc.get_field_by_name_mut("spec") {
                spec.set_field_by_name("caBundle", Value::Bytes(bundle.into()));
            }
        }
        Ok(Some(svc.encode_to_vec()))
    }

    /// Towards the cluster: an APIService of a renamed group gets regroup's
    /// serving CA, the app's bundle kept in the annotation.
    fn substitute_bundle(
        &self,
        raw: &[u8],
        map: &GroupMap,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        let mut svc = decode(APIREGISTRATION, "v1", "APIService", raw)?;
        if !svc.has_field_by_name("spec") {
            return Ok(None);
        }
        let (group, app_bundle) = match svc.get_field_by_name("spec").as_deref() {
            Some(Value::Message(spec)) if spec.has_field_by_name("caBundle") => {
                let group = spec
                    .has_field_by_name("group")
                    .then(|| spec.get_field_by_name("group"))
                    .flatten()
                    .and_then(|v| v.as_str().map(str::to_owned));
                let bundle = spec
                    .get_field_by_name("caBundle")
                    .and_then(|v| v.as_bytes().cloned())
                    .unwrap_or_default();
                (group, bundle)
            }
            _ => return Ok(None),
        };
        let name = meta_str(&svc, "name");
        if !is_renamed_apiservice(map, group.as_deref(), name.as_deref()) {
            return Ok(None);
        }
        let kept = annotation_for_bundle(&app_bundle);
        if self.trust.is_serving_bundle(&kept) {
            return Ok(None);
        }
        let serving = bundle_from_annotation(&self.trust.serving_ca_bundle)
            .ok_or_else(|| malformed("regroup's serving CA bundle is not base64"))?;
        if let Some(Value::Message(spec)) = svc.get_field_by_name_mut("spec") {
            spec.set_field_by_name("caBundle", Value::Bytes(serving.into()));
        }
        if let Some(Value::Message(meta)) = svc.get_field_by_name_mut("metadata") {
            if let Some(Value::Map(a)) = meta.get_field_by_name_mut("annotations") {
                a.insert(annotation_key(), Value::String(kept));
            }
        }
        Ok(Some(svc.encode_to_vec()))
    }
}

fn annotation_key() -> MapKey {
    MapKey::String(APP_CA_BUNDLE_ANNOTATION.to_owned())
}

/// `raw` as the message regroup has for `group`/`version`/`kind`.
fn decode(
    group: &str,
    version: &str,
    kind: &str,
    raw: &[u8],
) -> Result<DynamicMessage, RewriteError> {
    let desc = message_for(group, version, kind)
        .ok_or_else(|| malformed(format!("no protobuf message for {kind}")))?;
    DynamicMessage::decode(desc, raw).map_err(|e| malformed(format!("{kind}: {e}")))
}

/// A string member of `metadata`, when set.
fn meta_str(m: &DynamicMessage, field: &str) -> Option<String> {
    let meta = m.get_field_by_name("metadata")?;
    let meta = meta.as_message()?;
    if !meta.has_field_by_name(field) {
        return None;
    }
    meta.get_field_by_name(field)?.as_str().map(str::to_owned)
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

#[cfg(test)]
mod tests;
