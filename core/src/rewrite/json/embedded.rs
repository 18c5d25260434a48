//! JSON held in a string (an apiserver-written annotation such as
//! autoscaling/v1's metrics annotations, in JSON and in protobuf alike): the
//! catalog's inner path renamed inside it by splicing, so every other byte
//! of the inner text stays as it was; and a whole object held as JSON
//! (kubectl's last-applied configuration), renamed as the object it is.

use crate::rewrite::raw::Raw;
use regroup_config::field_path::FieldPath;
use regroup_config::Form;

use super::{JsonRewriter, TypeOf};
use crate::rewrite::catalog::Slot;
use crate::rewrite::error::RewriteError;
use crate::rewrite::raw::{string, Walk};
use crate::rewrite::tally;

impl JsonRewriter<'_> {
    /// The JSON `text` with the value at `path` (in each element when it is
    /// an array) renamed as `form`. `Ok(None)`: nothing renamed.
    pub(crate) fn rename_embedded(
        &self,
        text: &str,
        path: &FieldPath,
        form: Form,
    ) -> Result<Option<String>, RewriteError> {
        let (mut walk, doc) = Walk::parse(text).map_err(|e| match e {
            RewriteError::Malformed(why) => RewriteError::EmbeddedJson(path.to_string(), why),
            other => other,
        })?;
        let slot = Slot::Value(form);
        let ty = TypeOf::default();
        match walk.elements(doc)? {
            Some(es) => {
                for e in es.iter() {
                    self.place(&mut walk, e, path.steps(), slot, &ty, None)?;
                }
            }
            None => self.place(&mut walk, doc, path.steps(), slot, &ty, None)?,
        }
        Ok(walk.finish())
    }

    /// The JSON `text` of a whole object (an annotation holding one,
    /// [`Slot::JsonObject`]) renamed as that object. Text that is not JSON
    /// is left as it is and counted (`tally`): it is not an object to
    /// rename, and refusing the object that carries it would refuse
    /// writes of a value some tool put there.
    pub(crate) fn rename_object_text(&self, text: &str) -> Result<Option<String>, RewriteError> {
        let bytes = text.as_bytes();
        let force = self.names_involved(bytes, None, None);
        if !force && !self.may_contain(bytes) {
            return Ok(None);
        }
        let Ok((mut walk, root)) = Walk::parse(text) else {
            tally::object_annotation_not_json();
            return Ok(None);
        };
        walk.force = force;
        self.object(&mut walk, root, None, None)?;
        Ok(walk.finish())
    }

    /// A string member holding a whole object as JSON: renamed, re-quoted.
    pub(super) fn json_object<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
    ) -> Result<(), RewriteError> {
        let Some(text) = string(raw)? else {
            return Ok(());
        };
        if let Some(new_text) = self.rename_object_text(&text)? {
            w.replace_quoted(raw, None, &new_text);
        }
        Ok(())
    }

    /// A string member holding JSON: renamed inside, at `inner`, re-quoted.
    pub(super) fn json_string<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        inner: &str,
        form: Form,
    ) -> Result<(), RewriteError> {
        let Some(text) = string(raw)? else {
            return Ok(());
        };
        let path = FieldPath::parse(inner).expect("catalog sub-paths are valid");
        if let Some(new_text) = self.rename_embedded(&text, &path, form)? {
            w.replace_quoted(raw, None, &new_text);
        }
        Ok(())
    }
}
