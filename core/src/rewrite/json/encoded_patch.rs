//! A JSON Patch carried as base64 inside a JSON document (an admission
//! webhook's `response.patch`, see
//! [`Slot::Base64JsonPatch`](crate::rewrite::catalog::Slot::Base64JsonPatch)): decoded,
//! renamed by the JSON Patch codec as a patch of the reviewed kind, encoded
//! again. A patch with nothing to rename keeps its bytes.

use crate::rewrite::raw::Raw;
use base64::Engine as _;
use regroup_config::Direction;

use super::{json_patch, JsonRewriter};
use crate::rewrite::error::RewriteError;
use crate::rewrite::raw::{string, Walk};

impl JsonRewriter<'_> {
    /// Renames the base64 JSON Patch at `raw`, a patch of an object of the
    /// `addressed` group and kind (app names); without it, of an object of
    /// no known kind (only the places every object has apply).
    pub(super) fn base64_json_patch<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        addressed: Option<(&str, &str)>,
    ) -> Result<(), RewriteError> {
        let Some(text) = string(raw)? else {
            return Ok(());
        };
        let patch = decode(&text)
            .ok_or_else(|| RewriteError::Malformed("a JSON Patch that is not base64".into()))?;
        let (group, kind) = addressed.unwrap_or_default();
        // The patch speaks the input's names; `addressed` is the app's.
        let group = match self.dir {
            Direction::ToApp => self
                .map
                .map_group(group, Direction::ToCluster)
                .unwrap_or_else(|| group.to_owned()),
            Direction::ToCluster => group.to_owned(),
        };
        // Only the group selects places; the version is a stand-in.
        let api_version = if group.is_empty() {
            "v1".to_owned()
        } else {
            format!("{group}/v1")
        };
        if let Some(renamed) = json_patch::rewrite(self, &patch, &api_version, kind)? {
            let encoded = base64::engine::general_purpose::STANDARD.encode(renamed);
            w.replace_quoted(raw, None, &encoded);
        }
        Ok(())
    }
}

/// base64 as Go's `encoding/json` reads a `[]byte` (standard alphabet,
/// padded; line breaks skipped).
fn decode(text: &str) -> Option<Vec<u8>> {
    let engine = &base64::engine::general_purpose::STANDARD;
    engine.decode(text).ok().or_else(|| {
        let compact: String = text.chars().filter(|c| !matches!(c, '\r' | '\n')).collect();
        engine.decode(compact).ok()
    })
}
