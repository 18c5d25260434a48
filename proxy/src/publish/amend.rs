//! One published request's edits, kept in its context by the publisher's
//! hook (`publisher.rs`): a body on its way to the central cluster is put
//! in the target namespace, labelled with its source and bound to the
//! object read (its `uid`); what comes back is put back in the remote
//! namespace it came from.

use bytes::Bytes;
use serde_json::{json, Value as Json};

use super::source::{self, Source, SOURCE_CLUSTER, SOURCE_NAMESPACE};
use crate::hooks::json_doc;
use crate::kube::{MediaType, PatchKind};
use crate::status::Failure;

/// What the publisher learned of one request on its way in.
#[derive(Clone)]
pub(crate) struct Published {
    /// This cluster's id.
    pub cluster: String,
    /// The remote namespace addressed and its central namespace (`None`:
    /// a request across namespaces, or of a cluster-scoped kind).
    pub namespaces: Option<(String, String)>,
    /// The uid of the object read before a write: the write applies to
    /// that object or fails.
    pub uid: Option<String>,
    /// A DELETE: a body-less one gets DeleteOptions carrying the uid.
    pub delete: bool,
    /// The name a create asked for (to explain an `AlreadyExists`).
    pub created: Option<String>,
    /// Read-only federation: central namespace → the remote namespace its
    /// objects are shown in (they carry no source of this cluster's).
    pub shown_in: Option<Vec<(String, String)>>,
}

impl Published {
    fn source(&self) -> Option<Source> {
        self.namespaces.as_ref().map(|(remote, _)| Source {
            namespace: remote.clone(),
            cluster: self.cluster.clone(),
        })
    }

    /// An object (or a merge, strategic-merge or apply patch) for the
    /// central cluster.
    fn object_to_central(&mut self, doc: &mut Json) {
        let (Some(source), Some((_, target))) = (self.source(), &self.namespaces) else {
            return;
        };
        if !source.label(doc) {
            return;
        }
        let meta = &mut doc["metadata"];
        if meta.get("namespace").is_some_and(|n| !n.is_null()) {
            meta["namespace"] = target.clone().into();
        }
        if let Some(uid) = &self.uid {
            meta["uid"] = uid.clone().into();
        }
        if let Some(name) = meta.get("name").and_then(Json::as_str) {
            self.created = Some(name.to_owned());
        }
    }

    /// JSON Patch operations that keep the labels (and bind the uid) after
    /// the caller's own.
    fn json_patch_to_central(&self, ops: &mut Json) {
        let (Some(source), Some(list)) = (self.source(), ops.as_array_mut()) else {
            return;
        };
        let escape = |k: &str| k.replace('~', "~0").replace('/', "~1");
        for (k, v) in [
            (SOURCE_NAMESPACE, &source.namespace),
            (SOURCE_CLUSTER, &source.cluster),
        ] {
            list.push(
                json!({"op": "add", "path": format!("/metadata/labels/{}", escape(k)), "value": v}),
            );
        }
        if let Some(uid) = &self.uid {
            list.push(json!({"op": "add", "path": "/metadata/uid", "value": uid}));
        }
    }

    /// A central document (object, list, Table, watch event, Status) in the
    /// remote namespaces: whether it changed.
    pub(crate) fn to_remote(&self, doc: &mut Json) -> bool {
        if doc.get("kind").and_then(Json::as_str) == Some("Status") {
            return self.status_to_remote(doc);
        }
        if let Some(items) = doc.get_mut("items").and_then(Json::as_array_mut) {
            return items
                .iter_mut()
                .fold(false, |c, i| self.object_to_remote(i) | c);
        }
        if let Some(rows) = doc.get_mut("rows").and_then(Json::as_array_mut) {
            return rows
                .iter_mut()
                .fold(false, |c, r| self.object_to_remote(&mut r["object"]) | c);
        }
        if doc.get("type").is_some() && doc.get("object").is_some() {
            // A watch event: its object, a Table (kubectl's watches) or a Status.
            return self.to_remote(&mut doc["object"]);
        }
        self.object_to_remote(doc)
    }

    /// One object: its remote namespace is its source label's.
    fn object_to_remote(&self, obj: &mut Json) -> bool {
        let remote = match &self.shown_in {
            Some(shown) => {
                let ns = obj["metadata"]["namespace"].as_str().unwrap_or_default();
                shown.iter().find(|(t, _)| t == ns).map(|(_, r)| r.clone())
            }
            None => source::remote_namespace(obj).map(str::to_owned),
        };
        let Some(remote) = remote else {
            return false;
        };
        match obj["metadata"].get_mut("namespace") {
            Some(ns) if ns.as_str() != Some(remote.as_str()) => {
                *ns = remote.into();
                true
            }
            _ => false,
        }
    }

    /// A Status's message names the remote namespace, not the central one;
    /// but a refusal of regroup's own central credential is said as such,
    /// with the central names (it is about the central cluster's RBAC, not
    /// the caller's).
    fn status_to_remote(&self, status: &mut Json) -> bool {
        let m = status
            .get("message")
            .and_then(Json::as_str)
            .unwrap_or_default();
        // An authorization refusal (not an admission one, also `Forbidden`).
        let rbac = m.contains("is forbidden: User \"") && m.contains(" cannot ");
        if status.get("reason").and_then(Json::as_str) == Some("Forbidden") && rbac {
            status["message"] = format!(
                "the central cluster refused regroup's own credential (its rights there: `regroup publish-manifests` prints them): {m}"
            )
            .into();
            return true;
        }
        let Some((remote, target)) = &self.namespaces else {
            return false;
        };
        let Some(m) = status.get("message").and_then(Json::as_str) else {
            return false;
        };
        let (from, to) = (
            format!("namespace {target:?}"),
            format!("namespace {remote:?}"),
        );
        if remote == target || !m.contains(&from) {
            return false;
        }
        status["message"] = m.replace(&from, &to).into();
        true
    }
}

impl Published {
    /// A request body on its way to the central cluster (the publisher's
    /// request phase).
    pub(crate) fn body_for_central(
        &mut self,
        media: MediaType,
        bytes: Bytes,
    ) -> Result<Bytes, Failure> {
        if bytes.is_empty() {
            return Ok(match (&self.uid, self.delete) {
                (Some(uid), true) => serde_json::to_vec(&json!({
                    "apiVersion": "v1", "kind": "DeleteOptions", "preconditions": {"uid": uid}
                }))
                .expect("values serialize")
                .into(),
                _ => bytes,
            });
        }
        let mut doc = match media {
            MediaType::Patch(PatchKind::Json) => {
                let mut ops: Json = serde_json::from_slice(&bytes)
                    .map_err(|_| Failure::bad_request("a JSON Patch that is not JSON"))?;
                self.json_patch_to_central(&mut ops);
                return Ok(serde_json::to_vec(&ops).expect("values serialize").into());
            }
            MediaType::Protobuf | MediaType::Cbor | MediaType::CborSeq => {
                return Err(Failure::unsupported(
                    "published objects are written in JSON or YAML (custom resources have no protobuf or CBOR form here)",
                ));
            }
            _ => match json_doc(media, &bytes).map_err(|e| Failure::bad_request(e.to_string()))? {
                Some(d) => d,
                None => return Ok(bytes),
            },
        };
        // DeleteOptions: bound to the object read, as a precondition.
        if doc.get("kind").and_then(Json::as_str) == Some("DeleteOptions") {
            if let Some(uid) = &self.uid {
                doc["preconditions"]["uid"] = uid.clone().into();
            }
        } else {
            self.object_to_central(&mut doc);
        }
        // JSON is YAML: an apply patch or a YAML object goes on as JSON.
        Ok(serde_json::to_vec(&doc).expect("values serialize").into())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn published(uid: Option<&str>) -> Published {
        Published {
            cluster: "c1".into(),
            namespaces: Some(("foo".into(), "bar".into())),
            uid: uid.map(str::to_owned),
            delete: false,
            created: None,
            shown_in: None,
        }
    }

    fn body(p: &mut Published, media: MediaType, doc: &str) -> Json {
        let out = p
            .body_for_central(media, Bytes::from(doc.to_owned()))
            .unwrap();
        serde_json::from_slice(&out).unwrap()
    }

    #[test]
    fn a_create_goes_to_the_target_namespace_with_its_source() {
        let mut p = published(None);
        let out = body(
            &mut p,
            MediaType::Json,
            r#"{"apiVersion":"database.acmeco.org/v1alpha1","kind":"Thing","metadata":{"name":"sqldb","namespace":"foo","labels":{"app":"wp"}}}"#,
        );
        assert_eq!(out["metadata"]["namespace"], "bar");
        assert_eq!(out["metadata"]["labels"]["app"], "wp");
        assert_eq!(out["metadata"]["labels"][SOURCE_NAMESPACE], "foo");
        assert_eq!(out["metadata"]["labels"][SOURCE_CLUSTER], "c1");
        assert!(out["metadata"].get("uid").is_none());
        assert_eq!(p.created.as_deref(), Some("sqldb"));
    }

    #[test]
    fn a_yaml_apply_goes_on_as_json_bound_to_the_object_read() {
        let mut p = published(Some("u-1"));
        let out = body(
            &mut p,
            MediaType::Patch(PatchKind::ApplyYaml),
            "apiVersion: database.acmeco.org/v1alpha1\nkind: Thing\nmetadata:\n  name: sqldb\n  namespace: foo\nspec:\n  storageGB: 20\n",
        );
        assert_eq!(out["metadata"]["namespace"], "bar");
        assert_eq!(out["metadata"]["uid"], "u-1");
        assert_eq!(out["spec"]["storageGB"], 20);
    }

    #[test]
    fn a_json_patch_keeps_the_labels_and_the_uid() {
        let mut p = published(Some("u-1"));
        let out = body(
            &mut p,
            MediaType::Patch(PatchKind::Json),
            r#"[{"op":"replace","path":"/metadata/labels","value":{}}]"#,
        );
        let ops = out.as_array().unwrap();
        assert_eq!(ops.len(), 4);
        assert_eq!(
            ops[1]["path"],
            "/metadata/labels/regroup.dev~1source-namespace"
        );
        assert_eq!(ops[3]["path"], "/metadata/uid");
    }

    #[test]
    fn a_delete_is_bound_to_the_uid_read() {
        let mut p = published(Some("u-1"));
        let out = body(
            &mut p,
            MediaType::Json,
            r#"{"kind":"DeleteOptions","apiVersion":"v1","propagationPolicy":"Background"}"#,
        );
        assert_eq!(out["preconditions"]["uid"], "u-1");
        assert!(out.get("metadata").is_none());
    }

    #[test]
    fn protobuf_writes_are_refused_not_passed() {
        let mut p = published(None);
        let e = p
            .body_for_central(MediaType::Protobuf, Bytes::from_static(b"k8s\0"))
            .unwrap_err();
        assert_eq!(e.code, http::StatusCode::UNSUPPORTED_MEDIA_TYPE);
    }

    #[test]
    fn lists_tables_events_and_statuses_come_back_in_remote_namespaces() {
        let p = published(None);
        let obj = |ns: &str, src: &str| json!({"metadata": {"name": "x", "namespace": ns, "labels": {SOURCE_NAMESPACE: src, SOURCE_CLUSTER: "c1"}}});
        let mut list =
            json!({"kind": "ThingList", "items": [obj("bar", "foo"), obj("bar", "baz")]});
        assert!(p.to_remote(&mut list));
        assert_eq!(list["items"][0]["metadata"]["namespace"], "foo");
        assert_eq!(list["items"][1]["metadata"]["namespace"], "baz");
        let mut table =
            json!({"kind": "Table", "rows": [{"cells": [], "object": obj("bar", "foo")}]});
        assert!(p.to_remote(&mut table));
        assert_eq!(table["rows"][0]["object"]["metadata"]["namespace"], "foo");
        let mut event = json!({"type": "MODIFIED", "object": obj("bar", "foo")});
        assert!(p.to_remote(&mut event));
        assert_eq!(event["object"]["metadata"]["namespace"], "foo");
        let mut table_event = json!({"type": "ADDED", "object": {"kind": "Table", "rows": [{"object": obj("bar", "foo")}]}});
        assert!(p.to_remote(&mut table_event));
        assert_eq!(
            table_event["object"]["rows"][0]["object"]["metadata"]["namespace"],
            "foo"
        );
        let mut status = json!({"kind": "Status", "message": "things \"x\" is forbidden: User \"u\" cannot get resource \"things\" in the namespace \"bar\""});
        assert!(p.to_remote(&mut status));
        assert!(status["message"]
            .as_str()
            .unwrap()
            .ends_with("in the namespace \"foo\""));
        let mut admission = json!({"kind": "Status", "reason": "Forbidden", "message": "admission webhook \"v.example.com\" denied the request in the namespace \"bar\""});
        assert!(p.to_remote(&mut admission));
        assert_eq!(
            admission["message"],
            "admission webhook \"v.example.com\" denied the request in the namespace \"foo\""
        );
        let mut unlabelled = json!({"metadata": {"name": "x", "namespace": "bar"}});
        assert!(!p.to_remote(&mut unlabelled));
    }
}
