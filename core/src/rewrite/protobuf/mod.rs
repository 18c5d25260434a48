//! Applies the [catalog](super::catalog) to Kubernetes protobuf
//! (`application/vnd.kubernetes.protobuf`), splicing bytes.
//!
//! # How
//!
//! A body is the envelope (`k8s\0` + `runtime.Unknown`, [`envelope`]); its
//! `typeMeta` names the object's kind and [`types`] names the message for it.
//! The catalog's places for that kind are translated once, through the
//! descriptors compiled from `core/proto/` (their `json_name`s), into a tree
//! of field numbers ([`plan`]; cached per message and kind). The walker
//! (`walker`) then reads the wire format along that tree only, and only
//! into fields whose bytes contain a mapped name (all occurrences of every
//! mapped name, either side's, are found in one scan of the input first).
//! A renamed string becomes an edit of its byte range, and every length
//! prefix above it is re-encoded (shortest form; a length that doesn't change
//! keeps its bytes, however it was encoded). Every other byte — unknown
//! fields, field order, varint spellings, fields regroup never declared —
//! is copied as it came. Input with no mapped name at all is not parsed.
//!
//! Places ending in a `RawExtension` (a watch event's `object`, `v1 List`
//! items) hold an embedded object: an envelope walked the same way (nesting
//! is bounded), or JSON, handed to the [`JsonRewriter`]. Lists walk each item
//! (field 2 of `XList` by convention; field 1 in meta/v1beta1's
//! `PartialObjectMetadataList`, found through its descriptor) with the item
//! kind's plan (`X`). A shadowed discovery entry, and a typed list's item
//! that is a hidden object (a CRD or APIService whose name carries a
//! shadowed group, `Slot::DropHidden`), is dropped (its field bytes removed)
//! before anything inside it is renamed; [`ProtoRewriter::hides`] tells the
//! same of a watch frame. `v1 List` items are not looked into for that.
//!
//! # Kinds regroup has no message for
//!
//! Kubernetes' generated protobuf puts an object's `ObjectMeta` at field 1
//! (`metadata`), and a list's `ListMeta` at field 1 and its items at field 2.
//! A kind missing from [`types`] is walked with a fallback message that says
//! just that (`regroup.v1.GenericObject`, or `regroup.v1.GenericList` for a
//! kind ending in `List`), so its `metadata.ownerReferences[].apiVersion` and
//! `metadata.managedFields[].apiVersion` (and the envelope's `apiVersion`) are
//! renamed like any object's. Because the convention is only a convention,
//! such an object is walked leniently: if its bytes don't parse along that
//! path, it is left exactly as it came instead of refused.
//!
//! Exceptions to the convention, which therefore have messages of their own
//! in `core/proto/`: `DeleteOptions` (field 1 is `gracePeriodSeconds`),
//! `APIVersions` (field 1 is `versions`), the discovery documents
//! (`APIGroupList`, `APIGroup`, `APIResourceList`: no metadata), `Status`
//! (ListMeta at 1), `WatchEvent` (type at 1), meta/v1beta1's
//! `PartialObjectMetadataList` (items at 1, metadata at 2) and `v1 List`
//! (items are `RawExtension`s).
//!
//! # Not in protobuf
//!
//! Some catalog places have no protobuf form, so nothing here renames them:
//! `Table` (`rows[].object`) is not protobuf-serializable (kube-apiserver
//! answers 406), custom resources are served in protobuf only as
//! `PartialObjectMetadata(List)`, `AdmissionReview` is JSON-only, and
//! aggregated discovery (`apidiscovery.k8s.io`) is not in `core/proto/`
//! (its protobuf ranges are removed from `Accept`, so it never comes).
//!
//! Two catalog slots have protobuf forms of their own: `Slot::Keys` (the
//! keys of a map field's entries, a ResourceQuota's `count/<resource>.<group>`)
//! and `Slot::Requirement` (a selector requirement whose `values` are renamed
//! in the form its `key` calls for, read first wherever it is on the wire).
//! The reference-key heuristic (any `apiGroup`/`apiVersion` member) is a JSON
//! rule for custom resources; in protobuf only catalog places are renamed.
//!
//! # Errors
//!
//! Malformed wire data on a walked path (truncated fields, a length beyond
//! the bytes left, invalid wire types or a known field with the wrong one,
//! groups, nesting deeper than `envelope::MAX_DEPTH`) is a
//! [`RewriteError::Protobuf`]: never a panic, and no length read from the
//! input is used before it is checked against the bytes that remain.
//! A list body is renamed item by item as it arrives ([`list_stream`]), but
//! sent only once it is complete: the envelope's `raw` length comes before
//! the items and changes with them. The watch stream is rewritten frame by
//! frame ([`WatchStream`]).

pub mod envelope;
pub mod list_stream;
pub mod plan;
pub mod spool;
pub mod stream;
pub mod types;
mod walker;
pub mod wire;

use std::collections::HashMap;
use std::sync::{Arc, RwLock};

use prost_reflect::MessageDescriptor;
use regroup_config::{Direction, GroupMap};

use super::catalog::Catalog;
use super::error::RewriteError;
use super::json::JsonRewriter;
use super::names::NameIndex;
use plan::{Plan, Target};
use walker::Walk;

pub use plan::{translate_path, ProtoStep};
pub use stream::WatchStream;
pub use types::{descriptor_pool, known_kinds, message_for};
pub use wire::MAGIC;

fn malformed(e: impl std::fmt::Display) -> RewriteError {
    RewriteError::Protobuf(e.to_string())
}

/// Cached plans: (message, group, kind, addressed group and kind).
type PlanKey = (String, String, String, Option<(String, String)>);

/// How many plans are cached at most (they are per kind, so the set is
/// small; the bound only guards against unbounded growth).
const PLAN_CACHE: usize = 4096;

/// Renames groups in Kubernetes protobuf bodies and watch frames, in one
/// direction.
pub struct ProtoRewriter<'a> {
    map: &'a GroupMap,
    catalog: &'a Catalog,
    dir: Direction,
    /// Every mapped name of both directions (shadowing looks for the other
    /// side's names), shared by the configuration's codecs.
    index: NameIndex,
    /// For JSON embedded in protobuf (`RawExtension`s holding JSON, strings
    /// holding JSON).
    json: JsonRewriter<'a>,
    plans: RwLock<HashMap<PlanKey, Arc<Plan>>>,
}

impl<'a> ProtoRewriter<'a> {
    /// A rewriter for `dir`.
    pub fn new(map: &'a GroupMap, catalog: &'a Catalog, dir: Direction) -> Self {
        Self::with_index(map, catalog, dir, NameIndex::new(map))
    }

    /// [`new`](Self::new) sharing the configuration's name index.
    pub fn with_index(
        map: &'a GroupMap,
        catalog: &'a Catalog,
        dir: Direction,
        index: NameIndex,
    ) -> Self {
        ProtoRewriter {
            map,
            catalog,
            dir,
            json: JsonRewriter::with_index(map, catalog, dir, index.clone()),
            index,
            plans: RwLock::new(HashMap::new()),
        }
    }

    /// The direction this rewriter renames in.
    pub fn direction(&self) -> Direction {
        self.dir
    }

    /// True when `bytes` contain a mapped name of either side. When false,
    /// they can be forwarded untouched without parsing.
    pub fn may_contain_name(&self, bytes: &[u8]) -> bool {
        self.index.names().is_match(bytes)
    }

    /// Renames every catalogued place in `input`, one enveloped object
    /// (`k8s\0` + `runtime.Unknown`) of any kind, lists, Status and discovery
    /// documents included. `Ok(None)`: nothing to rename; forward `input` as
    /// is.
    pub fn rewrite_bytes(&self, input: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        self.enveloped(input, None)
    }

    /// [`rewrite_bytes`](Self::rewrite_bytes) for a response to a request
    /// that addressed objects of `group`/`kind` (app names): metadata-only
    /// forms (`PartialObjectMetadata`, also in lists and watch events) lose
    /// their kind, but their name may still carry a group (`version.group`
    /// of an APIService). See [`Catalog::kind_for_resource`].
    pub fn rewrite_bytes_addressed(
        &self,
        input: &[u8],
        group: &str,
        kind: &str,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        self.enveloped(input, Some((group, kind)))
    }

    /// Renames one watch frame: a raw `meta.k8s.io/v1` `WatchEvent` (without
    /// the 4-byte length prefix), whose `object.raw` is an enveloped object.
    pub fn rewrite_watch_frame(&self, frame: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        self.frame(frame, None)
    }

    /// [`rewrite_watch_frame`](Self::rewrite_watch_frame) for a watch on
    /// objects of `group`/`kind`, as for
    /// [`rewrite_bytes_addressed`](Self::rewrite_bytes_addressed).
    pub fn rewrite_watch_frame_addressed(
        &self,
        frame: &[u8],
        group: &str,
        kind: &str,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        self.frame(frame, Some((group, kind)))
    }

    /// A whole protobuf watch body (length-prefixed frames), renamed frame by
    /// frame with each frame boundary kept. `Ok(None)`: nothing renamed.
    pub fn rewrite_watch_stream(
        &self,
        body: &[u8],
        addressed: Option<(&str, &str)>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        if !self.may_contain_name(body) && !self.names_involved(body, addressed) {
            return Ok(None);
        }
        let mut s = WatchStream::new(addressed, body.len());
        let out = s.feed(self, body)?;
        s.finish()?;
        Ok((out != body).then_some(out))
    }

    /// True when `frame`, one watch frame (a raw `WatchEvent` without its
    /// 4-byte length prefix, as for
    /// [`rewrite_watch_frame`](Self::rewrite_watch_frame)) or one enveloped
    /// object, holds an object that is **hidden** from the app (always false
    /// for a rewriter toward the cluster): a
    /// CRD or APIService whose name carries a shadowed group (see
    /// [`JsonRewriter::hides`]). The watch path drops such a frame instead of
    /// renaming it; typed protobuf lists drop hidden items themselves when
    /// renamed. Metadata-only objects need
    /// [`hides_addressed`](Self::hides_addressed).
    pub fn hides(&self, frame: &[u8]) -> Result<bool, RewriteError> {
        self.hides_with(frame, None)
    }

    /// [`hides`](Self::hides) for a watch on objects of `group`/`kind` (app
    /// names), as for [`rewrite_bytes_addressed`](Self::rewrite_bytes_addressed).
    pub fn hides_addressed(
        &self,
        frame: &[u8],
        group: &str,
        kind: &str,
    ) -> Result<bool, RewriteError> {
        self.hides_with(frame, Some((group, kind)))
    }

    fn hides_with(
        &self,
        frame: &[u8],
        addressed: Option<(&str, &str)>,
    ) -> Result<bool, RewriteError> {
        use wire::last_len_field;
        if self.dir != Direction::ToApp
            || !(self.may_contain_name(frame) || self.names_involved(frame, addressed))
        {
            return Ok(false);
        }
        let object = if frame.starts_with(MAGIC) {
            frame
        } else {
            // WatchEvent {1 type, 2 object: RawExtension {1 raw}}. Only an
            // object event can be hidden: a BOOKMARK or an ERROR never is.
            let ty = last_len_field(frame, 0, frame.len(), 1)?
                .map(|t| &frame[t.value_start..t.end])
                .and_then(|t| std::str::from_utf8(t).ok());
            if !ty.is_some_and(crate::rewrite::json::is_object_event) {
                return Ok(false);
            }
            let Some(o) = last_len_field(frame, 0, frame.len(), 2)? else {
                return Ok(false);
            };
            let Some(raw) = last_len_field(frame, o.value_start, o.end, 1)? else {
                return Ok(false);
            };
            &frame[raw.value_start..raw.end]
        };
        let Some(unknown) = object.strip_prefix(MAGIC) else {
            // JSON in a RawExtension.
            return match addressed {
                Some((g, k)) => self.json.hides_addressed(object, g, k),
                None => self.json.hides(object),
            };
        };
        let text = |f: Option<wire::Field>| -> &str {
            f.and_then(|f| std::str::from_utf8(&unknown[f.value_start..f.end]).ok())
                .unwrap_or("")
        };
        let (mut api_version, mut kind) = ("", "");
        if let Some(tm) = last_len_field(unknown, 0, unknown.len(), 1)? {
            api_version = text(last_len_field(unknown, tm.value_start, tm.end, 1)?);
            kind = text(last_len_field(unknown, tm.value_start, tm.end, 2)?);
        }
        let group = crate::kube::group_of(api_version);
        let app_group = match self.dir {
            Direction::ToApp => self.map.map_group(group, Direction::ToApp),
            Direction::ToCluster => None,
        };
        let (group, kind) = match addressed {
            Some(a) if kind == "PartialObjectMetadata" => a,
            _ => (app_group.as_deref().unwrap_or(group), kind),
        };
        let Some(form) = self.catalog.name_form(group, kind) else {
            return Ok(false);
        };
        // The object's `metadata` (1) `name` (1), by convention.
        let Some(raw) = last_len_field(unknown, 0, unknown.len(), 2)? else {
            return Ok(false);
        };
        let Some(meta) = last_len_field(unknown, raw.value_start, raw.end, 1)? else {
            return Ok(false);
        };
        // An object without a name is no object of the app's or another
        // copy's: never hidden (as in JSON).
        let Some(name) = last_len_field(unknown, meta.value_start, meta.end, 1)? else {
            return Ok(false);
        };
        let name = text(Some(name));
        Ok(self.map.hides_name(form, name, self.dir))
    }

    /// True when `input` (answering a request for `addressed`) may hold a
    /// name of a kind listed in `names:`: its envelope, or a reference in
    /// it, names such a kind, or the request addressed one. Such names are
    /// any string, so no byte search finds them: the walk is then forced.
    pub(super) fn names_involved(&self, input: &[u8], addressed: Option<(&str, &str)>) -> bool {
        let Some(names) = self.map.object_names() else {
            return false;
        };
        addressed.is_some_and(|(g, k)| names.involves_kind(g, k))
            || self.index.names_involved(input)
    }

    /// Where mapped names occur in `input`.
    fn find(&self, input: &[u8]) -> Vec<(usize, usize)> {
        self.index.names().find_all(input)
    }

    /// [`rewrite_bytes`](Self::rewrite_bytes), or
    /// [`rewrite_bytes_addressed`](Self::rewrite_bytes_addressed) when the
    /// request addressed a kind.
    pub fn rewrite_bytes_with(
        &self,
        input: &[u8],
        addressed: Option<(&str, &str)>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        self.enveloped(input, addressed)
    }

    /// [`rewrite_watch_frame`](Self::rewrite_watch_frame), or its
    /// `_addressed` form when the watch addressed a kind.
    pub fn rewrite_watch_frame_with(
        &self,
        frame: &[u8],
        addressed: Option<(&str, &str)>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        self.frame(frame, addressed)
    }

    fn enveloped(
        &self,
        input: &[u8],
        addressed: Option<(&str, &str)>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        let matches = self.find(input);
        let force = self.names_involved(input, addressed);
        if matches.is_empty() && !force {
            return Ok(None);
        }
        let mut w = Walk::new(input, matches, addressed);
        w.force = force;
        self.envelope(&mut w, 0, input.len())?;
        Ok(w.finish())
    }

    fn frame(
        &self,
        frame: &[u8],
        addressed: Option<(&str, &str)>,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        if frame.starts_with(MAGIC) {
            return self.enveloped(frame, addressed);
        }
        let matches = self.find(frame);
        let force = self.names_involved(frame, addressed);
        if matches.is_empty() && !force {
            return Ok(None);
        }
        let plan = self.plan(
            &types::message(types::WATCH_EVENT),
            "meta.k8s.io",
            "WatchEvent",
            addressed,
            false,
        );
        let mut w = Walk::new(frame, matches, addressed);
        w.force = force;
        self.object(&mut w, 0, frame.len(), &plan)?;
        Ok(w.finish())
    }

    /// The plan for objects of `group`/`kind` (app names) as `message`.
    fn plan(
        &self,
        message: &MessageDescriptor,
        group: &str,
        kind: &str,
        addressed: Option<(&str, &str)>,
        lenient: bool,
    ) -> Arc<Plan> {
        let key: PlanKey = (
            message.full_name().to_owned(),
            group.to_owned(),
            kind.to_owned(),
            addressed.map(|(g, k)| (g.to_owned(), k.to_owned())),
        );
        if let Some(p) = self
            .plans
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .get(&key)
        {
            return p.clone();
        }
        let plan = Arc::new(plan::build(
            self.catalog,
            &Target {
                message,
                group,
                kind,
                addressed,
                lenient,
                metadata: self.map.metadata(),
                bare: false,
            },
        ));
        let mut plans = self.plans.write().unwrap_or_else(|e| e.into_inner());
        if plans.len() < PLAN_CACHE {
            plans.insert(key, plan.clone());
        }
        plan
    }
}

#[cfg(test)]
mod metadata_tests;
#[cfg(any(test, feature = "test-support"))]
pub mod test_wire;
#[cfg(test)]
mod tests;
