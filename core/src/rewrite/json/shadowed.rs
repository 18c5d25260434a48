//! Discovery entries of a shadowed group, dropped: in the app's view a
//! cluster group that already has an app name does not exist.

use crate::rewrite::raw::Raw;
use regroup_config::field_path::{FieldPath, Step};

use super::JsonRewriter;
use crate::rewrite::error::RewriteError;
use crate::rewrite::raw::{member, string, Walk};

impl JsonRewriter<'_> {
    /// Drops the entries of a discovery array whose group is shadowed, as
    /// edits that delete them with their separating commas.
    pub(super) fn drop_shadowed<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        sub: &str,
    ) -> Result<(), RewriteError> {
        let Some(entries) = w.elements(raw)? else {
            return Ok(());
        };
        let path = FieldPath::parse(sub).expect("catalog sub-paths are valid");
        let mut keep = Vec::with_capacity(entries.len());
        for e in entries.iter() {
            let mut v: Raw<'i> = e;
            let mut found = true;
            for step in path.steps() {
                let next = match step {
                    Step::Key(k) => match w.members(v)? {
                        Some(ms) => member(&ms, k),
                        None => None,
                    },
                    Step::Each => None,
                };
                match next {
                    Some(n) => v = n,
                    None => {
                        found = false;
                        break;
                    }
                }
            }
            let shadowed = found && string(v)?.is_some_and(|g| self.map.is_shadowed(&g, self.dir));
            keep.push(!shadowed);
        }
        self.delete(w, raw, &entries, &keep);
        Ok(())
    }
}
