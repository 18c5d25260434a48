//! Where the request pipeline calls the front trust: request bodies on the
//! way to the cluster, responses and watch events on the way to the app.
//! [`relevant`] is the one place that decides which requests it looks at.

use bytes::Bytes;

use super::webhooks::WebhookRegistration;
use super::FrontTrust;
use crate::kube::{MediaType, PatchKind, RequestInfo};
use crate::rewrite::framing::Framing;
use crate::rewrite::RewriteError;
use crate::serve::status::Failure;
use regroup_config::{Direction, Form, GroupMap};
use serde_json::Value as Json;

/// Requests whose objects the trust amends: the authentication ConfigMap
/// (in `kube-system`) and APIServices.
pub(crate) fn relevant(info: &RequestInfo) -> bool {
    match (info.group.as_str(), info.resource.as_deref()) {
        ("", Some("configmaps")) => info.namespace.as_deref() == Some("kube-system"),
        ("apiregistration.k8s.io", Some("apiservices")) => true,
        _ => false,
    }
}

/// A request body (already renamed to the cluster's names) amended so the
/// cluster trusts regroup's front. JSON Patches never get here (`patch.rs`
/// serves those of the app's APIService; others have no object to amend).
pub(crate) fn request_body(
    trust: &FrontTrust,
    info: &RequestInfo,
    map: &GroupMap,
    media: MediaType,
    bytes: Bytes,
) -> Result<Bytes, Failure> {
    if !relevant(info) || media == MediaType::Patch(PatchKind::Json) {
        return Ok(bytes);
    }
    if media == MediaType::Protobuf {
        return Ok(trust
            .proto_to_cluster(&bytes, map)
            .map_err(|e| Failure::bad_request(format!("the request body can't be read: {e}")))?
            .map(Bytes::from)
            .unwrap_or(bytes));
    }
    // A merge or apply patch names its APIService in the URL only.
    let patched = media
        .is_partial()
        .then_some(info.name.as_deref())
        .flatten()
        .map(|n| {
            map.map(Form::QualifiedName, n, Direction::ToCluster)
                .unwrap_or_else(|| n.to_owned())
        });
    let Ok(mut v) = serde_json::from_slice::<Json>(&bytes) else {
        return Ok(bytes);
    };
    if !trust.to_cluster(&mut v, map, patched.as_deref()) {
        return Ok(bytes);
    }
    Ok(Bytes::from(
        serde_json::to_vec(&v).expect("values serialize"),
    ))
}

/// A request body (already in the cluster's names) whose fronted webhook
/// registrations are pointed at regroup: a whole object (create, update)
/// in JSON, YAML or protobuf. Patches of a named object are served by
/// `stack/registration_patch.rs`, which reads the current object first.
pub(crate) fn registration_request_body(
    r: &WebhookRegistration,
    info: &RequestInfo,
    media: MediaType,
    bytes: Bytes,
) -> Result<Bytes, Failure> {
    if !super::webhooks::relevant(info) {
        return Ok(bytes);
    }
    let unreadable =
        |e: String| Failure::bad_request(format!("the request body can't be read: {e}"));
    if media == MediaType::Protobuf {
        return Ok(r
            .proto_to_cluster(&bytes, info)
            .map_err(|e| unreadable(e.to_string()))?
            .map(Bytes::from)
            .unwrap_or(bytes));
    }
    let Some(mut v) = registration_doc(media, &bytes).map_err(unreadable)? else {
        return Ok(bytes);
    };
    if !r.to_cluster(&mut v, info) {
        return Ok(bytes);
    }
    // JSON is YAML too: a YAML body goes on as JSON.
    Ok(Bytes::from(
        serde_json::to_vec(&v).expect("values serialize"),
    ))
}

/// A registration body as a JSON value: JSON (objects, merge and
/// strategic-merge patches) or YAML (objects, server-side apply). `None`
/// for other encodings (a JSON Patch is a list of operations).
pub(crate) fn registration_doc(media: MediaType, bytes: &[u8]) -> Result<Option<Json>, String> {
    match media {
        MediaType::Json
        | MediaType::Unspecified
        | MediaType::Patch(PatchKind::Merge)
        | MediaType::Patch(PatchKind::StrategicMerge) => serde_json::from_slice(bytes)
            .map(Some)
            .map_err(|e| format!("not JSON: {e}")),
        MediaType::Yaml | MediaType::Patch(PatchKind::ApplyYaml) => {
            let text =
                std::str::from_utf8(bytes).map_err(|_| "YAML that is not UTF-8".to_owned())?;
            serde_saphyr::from_str(text)
                .map(Some)
                .map_err(|_| "not valid YAML".to_owned())
        }
        _ => Ok(None),
    }
}

/// A whole response body for the app (already renamed) with its own
/// webhook registrations put back. `Ok(None)`: nothing changes.
pub(crate) fn registration_response(
    r: &WebhookRegistration,
    media: MediaType,
    success: bool,
    body: &[u8],
) -> Result<Option<Vec<u8>>, RewriteError> {
    match media {
        MediaType::Json => Ok(registration_json(r, body)),
        // Errors are Status objects, whatever the body.
        MediaType::Protobuf if success => r.proto_to_app(body),
        _ => Ok(None),
    }
}

/// One watch event's content for the app (already renamed) with its own
/// webhook registrations put back.
pub(crate) fn registration_watch_event(
    r: &WebhookRegistration,
    framing: Framing,
    event: &[u8],
) -> Result<Option<Vec<u8>>, RewriteError> {
    match framing {
        Framing::Lines => Ok(registration_json(r, event)),
        Framing::LengthPrefixed => r.proto_watch_event_to_app(event),
    }
}

/// A JSON document for the app with its own webhook registrations put
/// back; `None` when nothing changes.
pub(crate) fn registration_json(r: &WebhookRegistration, doc: &[u8]) -> Option<Vec<u8>> {
    let mut v: Json = serde_json::from_slice(doc).ok()?;
    r.to_app(&mut v)
        .then(|| serde_json::to_vec(&v).expect("values serialize"))
}

/// A JSON document for the app, amended; `None` when nothing changes.
pub(crate) fn response_json(trust: &FrontTrust, doc: &[u8]) -> Option<Vec<u8>> {
    let mut v: Json = serde_json::from_slice(doc).ok()?;
    trust
        .to_app(&mut v)
        .then(|| serde_json::to_vec(&v).expect("values serialize"))
}

/// A whole response body for the app (already renamed), amended.
/// `Ok(None)`: nothing changes.
pub(crate) fn response_body(
    trust: &FrontTrust,
    media: MediaType,
    success: bool,
    body: &[u8],
) -> Result<Option<Vec<u8>>, RewriteError> {
    match media {
        MediaType::Json => Ok(response_json(trust, body)),
        // Errors are Status objects, whatever the body.
        MediaType::Protobuf if success => trust.proto_to_app(body),
        _ => Ok(None),
    }
}

/// One watch event's content for the app (already renamed), amended.
pub(crate) fn watch_event(
    trust: &FrontTrust,
    framing: Framing,
    event: &[u8],
) -> Result<Option<Vec<u8>>, RewriteError> {
    match framing {
        Framing::Lines => Ok(response_json(trust, event)),
        Framing::LengthPrefixed => trust.proto_watch_event_to_app(event),
    }
}
