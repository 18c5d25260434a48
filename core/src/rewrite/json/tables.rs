//! Table name cells and hidden objects ([`Slot::TableRows`],
//! [`Slot::DropHidden`]): `kubectl get crd` shows the app's names, and the
//! cluster's own CRD or APIService of a shadowed group shows nowhere.

use std::borrow::Cow;

use crate::rewrite::raw::Raw;
use regroup_config::field_path::{FieldPath, Step};
use regroup_config::Form;

use super::{item_hint, malformed, type_of, JsonRewriter, RewriteError, TypeOf};
use crate::rewrite::catalog::Slot;
use crate::rewrite::raw::{member, string, Elements, Members, Walk};

impl JsonRewriter<'_> {
    /// True when `doc`, one object or one watch event
    /// (`{"type":..,"object":..}`), is **hidden** from the app (always
    /// false for a rewriter toward the cluster):
    /// an object whose name carries a shadowed group (the cluster's CRD
    /// `foos.samplecontroller.k8s.io` or APIService
    /// `v1alpha1.samplecontroller.k8s.io` while `samplecontroller.k8s.io` is
    /// renamed; see [`Slot::DropHidden`]), or a Table whose rows all name
    /// one. The watch path drops such an event instead of renaming it;
    /// lists and Tables drop hidden entries themselves when renamed.
    /// Metadata-only objects (`PartialObjectMetadata`) need
    /// [`hides_addressed`](Self::hides_addressed).
    pub fn hides(&self, doc: &[u8]) -> Result<bool, RewriteError> {
        self.hides_with(doc, None)
    }

    /// [`hides`](Self::hides) for a response to a request that addressed
    /// objects of `group`/`kind` (app names), as for
    /// [`Context::addressed`](crate::rewrite::codec::Context::addressed).
    pub fn hides_addressed(
        &self,
        doc: &[u8],
        group: &str,
        kind: &str,
    ) -> Result<bool, RewriteError> {
        self.hides_with(doc, Some((group, kind)))
    }

    fn hides_with(
        &self,
        doc: &[u8],
        addressed: Option<(&str, &str)>,
    ) -> Result<bool, RewriteError> {
        let force = self.names_involved(doc, None, addressed);
        if !force && !self.may_contain(doc) {
            return Ok(false);
        }
        let text = std::str::from_utf8(doc).map_err(malformed)?;
        let (mut w, root) = Walk::parse(text)?;
        w.force = force;
        let Some(ms) = w.members(root)? else {
            return Ok(false);
        };
        let mut target = root;
        if type_of(&ms, None)?.kind == "WatchEvent" {
            // Only an object event can be hidden: a BOOKMARK (a watch-list's
            // `k8s.io/initial-events-end` among them) or an ERROR's Status
            // always reaches the client.
            let ty = member(&ms, "type")
                .map(|t| ms.string(t))
                .transpose()?
                .flatten();
            if !ty.as_deref().is_some_and(is_object_event) {
                return Ok(false);
            }
            match member(&ms, "object") {
                Some(o) => target = o,
                None => return Ok(false),
            }
        }
        let Some(tms) = w.members(target)? else {
            return Ok(false);
        };
        let ty = type_of(&tms, None)?;
        let (group, kind) = self.app_type(&ty, addressed);
        if let Some(place) = self
            .catalog
            .places_for(&group, kind)
            .find_map(|p| match p.slot {
                Slot::TableRows {
                    columns,
                    cells,
                    object,
                } => Some((p, [columns, cells, object])),
                _ => None,
            })
        {
            // A Table: hidden when it has rows and every one is.
            let (place, [columns, cells, object]) = place;
            let [Step::Key(rows_key)] = place.path.steps() else {
                return Ok(false);
            };
            let Some(rows) = member(&tms, rows_key) else {
                return Ok(false);
            };
            let Some(rows) = w.elements(rows)? else {
                return Ok(false);
            };
            let column = match member(&tms, columns) {
                Some(defs) => self.name_column(&mut w, defs)?,
                None => Some(0),
            };
            let mut all = !rows.is_empty();
            for row in rows.iter() {
                all &= self.table_row(&mut w, row, column, cells, object, addressed)?;
            }
            return Ok(all);
        }
        self.hidden(&mut w, target, None, addressed)
    }

    /// True when a name in `form` (`plural.group` / `version.group`, or a
    /// kind listed in `names:`) is hidden in the app's view (see
    /// [`Slot::DropHidden`]). Only toward the app: what the app sends (and
    /// what `render` writes) is never thinned out.
    fn name_hidden(&self, form: Form, name: &str) -> bool {
        self.map.hides_name(form, name, self.dir)
    }

    /// True when the object `raw` (of type `hint` when it carries none) is
    /// hidden in this direction (see [`Slot::DropHidden`]).
    fn hidden<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        hint: Option<&TypeOf<'_>>,
        addressed: Option<(&str, &str)>,
    ) -> Result<bool, RewriteError> {
        if !self.may(w, raw) {
            return Ok(false);
        }
        let Some(ms) = w.members(raw)? else {
            return Ok(false);
        };
        let ty = type_of(&ms, hint)?;
        let (group, kind) = self.app_type(&ty, addressed);
        let Some(form) = self.catalog.name_form(&group, kind) else {
            return Ok(false);
        };
        Ok(object_name(w, &ms)?.is_some_and(|n| self.name_hidden(form, &n)))
    }

    /// A list's items without the hidden ones.
    pub(super) fn drop_hidden<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        ty: &TypeOf<'_>,
        addressed: Option<(&str, &str)>,
    ) -> Result<(), RewriteError> {
        let Some(items) = w.elements(raw)? else {
            return Ok(());
        };
        let hint = item_hint(ty);
        if let Some(h) = &hint {
            // A typed list of a kind whose names carry no group: nothing
            // in it can be hidden.
            let (group, kind) = self.app_type(h, addressed);
            if self.catalog.name_form(&group, kind).is_none() {
                return Ok(());
            }
        }
        let mut keep = Vec::with_capacity(items.len());
        for item in items.iter() {
            keep.push(!self.hidden(w, item, hint.as_ref(), addressed)?);
        }
        self.delete(w, raw, &items, &keep);
        Ok(())
    }

    /// Deletes the entries of `raw` (whose elements are `entries`) whose
    /// `keep` is false.
    pub(super) fn delete<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        entries: &Elements<'i>,
        keep: &[bool],
    ) {
        if keep.iter().all(|k| *k) {
            return;
        }
        let spans: Vec<(usize, usize)> = entries
            .iter()
            .map(|e| {
                let s = w.offset(e);
                (s, s + e.get().len())
            })
            .collect();
        w.delete_entries(raw, &spans, keep);
    }

    /// A Table's rows (at `path` in `table`): their name cells renamed,
    /// rows naming hidden objects dropped ([`Slot::TableRows`]).
    pub(super) fn table_rows<'i>(
        &self,
        w: &mut Walk<'i>,
        table: Raw<'i>,
        path: &FieldPath,
        [columns, cells, object]: [&str; 3],
        addressed: Option<(&str, &str)>,
    ) -> Result<(), RewriteError> {
        let Some(ms) = w.members(table)? else {
            return Ok(());
        };
        let [Step::Key(rows_key)] = path.steps() else {
            return Ok(());
        };
        let Some(rows_raw) = member(&ms, rows_key) else {
            return Ok(());
        };
        if !self.may(w, rows_raw) {
            return Ok(());
        }
        let Some(rows) = w.elements(rows_raw)? else {
            return Ok(());
        };
        let column = match member(&ms, columns) {
            Some(defs) => self.name_column(w, defs)?,
            None => Some(0),
        };
        // Columns whose cells name an object as `Kind/NAME` (a binding's
        // `Role`), as the catalog lists them for the addressed kind.
        let mut kind_name_columns = Vec::new();
        if let (Some(defs), Some((group, kind))) = (member(&ms, columns), addressed) {
            for cell in self.catalog.table_cells(group, kind) {
                if let Some(i) = self.column_named(w, defs, cell.column)? {
                    kind_name_columns.push((i, cell.names_of));
                }
            }
        }
        let mut keep = Vec::with_capacity(rows.len());
        for row in rows.iter() {
            keep.push(!self.table_row(w, row, column, cells, object, addressed)?);
            for &(c, names_of) in &kind_name_columns {
                self.kind_name_cell(w, row, cells, c, names_of)?;
            }
        }
        self.delete(w, rows_raw, &rows, &keep);
        Ok(())
    }

    /// The index of the column definition named `name`.
    fn column_named<'i>(
        &self,
        w: &mut Walk<'i>,
        defs: Raw<'i>,
        name: &str,
    ) -> Result<Option<usize>, RewriteError> {
        let Some(defs) = w.elements(defs)? else {
            return Ok(None);
        };
        for (i, d) in defs.iter().enumerate() {
            if let Some(ms) = w.members(d)? {
                if let Some(n) = member(&ms, "name") {
                    if string(n)?.as_deref() == Some(name) {
                        return Ok(Some(i));
                    }
                }
            }
        }
        Ok(None)
    }

    /// A row's `Kind/NAME` cell ([`crate::rewrite::catalog::TableCell`]),
    /// its NAME renamed as a `metadata.name` of that kind (of group
    /// `names_of`) is.
    fn kind_name_cell<'i>(
        &self,
        w: &mut Walk<'i>,
        row: Raw<'i>,
        cells: &str,
        column: usize,
        names_of: &str,
    ) -> Result<(), RewriteError> {
        let Some(ms) = w.members(row)? else {
            return Ok(());
        };
        let cell = match member(&ms, cells) {
            Some(cs) => w.elements(cs)?.and_then(|cs| cs.get(column)),
            None => None,
        };
        let Some(cell) = cell else {
            return Ok(());
        };
        let Some(text) = string(cell)? else {
            return Ok(());
        };
        let Some((kind, name)) = text.split_once('/') else {
            return Ok(());
        };
        let Some(form) = self.catalog.name_form(names_of, kind) else {
            return Ok(());
        };
        if let Some(mapped) = self.map.map(form, name, self.dir) {
            let json =
                serde_json::to_string(&format!("{kind}/{mapped}")).expect("strings serialize");
            w.replace(cell, &json);
        }
        Ok(())
    }

    /// The index of the column naming each row's object ([`name_column`]);
    /// the first column when there are no definitions (`null`).
    fn name_column<'i>(
        &self,
        w: &mut Walk<'i>,
        defs: Raw<'i>,
    ) -> Result<Option<usize>, RewriteError> {
        let Some(defs) = w.elements(defs)? else {
            return Ok((defs.get() == "null").then_some(0));
        };
        let mut texts = Vec::with_capacity(defs.len());
        for d in defs.iter() {
            let text = |ms: &Members<'i>, k: &str| -> Result<_, RewriteError> {
                Ok(match member(ms, k) {
                    Some(v) => string(v)?.map(Cow::into_owned),
                    None => None,
                })
            };
            texts.push(match w.members(d)? {
                Some(ms) => (text(&ms, "format")?, text(&ms, "name")?),
                None => (None, None),
            });
        }
        Ok(name_column(
            texts.iter().map(|(f, n)| (f.as_deref(), n.as_deref())),
        ))
    }

    /// Renames one Table row's name cell; returns whether the row names a
    /// hidden object (and must be dropped).
    fn table_row<'i>(
        &self,
        w: &mut Walk<'i>,
        row: Raw<'i>,
        column: Option<usize>,
        cells: &str,
        object: &str,
        addressed: Option<(&str, &str)>,
    ) -> Result<bool, RewriteError> {
        if !self.may(w, row) {
            return Ok(false);
        }
        let Some(ms) = w.members(row)? else {
            return Ok(false);
        };
        let obj = match member(&ms, object) {
            Some(o) => w.members(o)?,
            None => None,
        };
        let ty = match &obj {
            Some(oms) => type_of(oms, None)?,
            None => TypeOf::default(),
        };
        let (group, kind) = match addressed {
            Some(a) if ty.kind.is_empty() => (Cow::Borrowed(a.0), a.1),
            _ => self.app_type(&ty, addressed),
        };
        let Some(form) = self.catalog.name_form(&group, kind) else {
            return Ok(false);
        };
        let obj_name = match &obj {
            Some(oms) => object_name(w, oms)?,
            None => None,
        };
        let cell = match (column, member(&ms, cells)) {
            (Some(c), Some(cs)) => w.elements(cs)?.and_then(|cs| cs.get(c)),
            _ => None,
        };
        let cell_text = match cell {
            Some(c) => string(c)?.map(Cow::into_owned),
            None => None,
        };
        let name = obj_name.as_deref().or(cell_text.as_deref());
        if name.is_some_and(|n| self.name_hidden(form, n)) {
            return Ok(true);
        }
        if let (Some(cell), Some(text)) = (cell, &cell_text) {
            if obj_name.as_ref().is_none_or(|n| n == text) {
                self.value(w, cell, form)?;
            }
        }
        Ok(false)
    }
}

/// Of a Table's column definitions (each `(format, name)`), the one naming
/// each row's object: the first whose `format` is `name`, else the first
/// named `Name`.
pub(crate) fn name_column<'a>(
    defs: impl Iterator<Item = (Option<&'a str>, Option<&'a str>)> + Clone,
) -> Option<usize> {
    defs.clone()
        .position(|(format, _)| format == Some("name"))
        .or_else(|| defs.clone().position(|(_, name)| name == Some("Name")))
}

/// An object's `metadata.name`.
fn object_name<'i>(
    w: &mut Walk<'i>,
    ms: &Members<'i>,
) -> Result<Option<Cow<'i, str>>, RewriteError> {
    let Some(meta) = member(ms, "metadata") else {
        return Ok(None);
    };
    let Some(mms) = w.members(meta)? else {
        return Ok(None);
    };
    Ok(match member(&mms, "name") {
        // Borrowed unless it has an escape: read for every item of a
        // list of a kind whose names carry a group.
        Some(n) => mms.string(n)?,
        None => None,
    })
}

#[cfg(test)]
mod tests;

/// A watch event type that carries one of the watched objects (`ADDED`,
/// `MODIFIED`, `DELETED`): the only events that can be hidden.
pub(crate) fn is_object_event(ty: &str) -> bool {
    matches!(ty, "ADDED" | "MODIFIED" | "DELETED")
}
