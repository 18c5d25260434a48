//! Metadata keys in JSON (the `metadata:` rules): label maps, selector
//! requirements, and the managed fields that record who owns each key.

use std::borrow::Cow;

use regroup_config::field_path::Step;
use regroup_config::metadata::key_problem;
use regroup_config::{Form, MetadataMap};

use super::{JsonRewriter, TypeOf};
use crate::rewrite::catalog::{is_metadata_slot, Slot};
use crate::rewrite::error::RewriteError;
use crate::rewrite::raw::{member, quote, string, Raw, Walk};

/// A renamed key Kubernetes would refuse: an error naming it.
pub(crate) fn checked_key(from: &str, to: String) -> Result<String, RewriteError> {
    match key_problem(&to) {
        Some(why) => Err(RewriteError::Key {
            from: from.to_owned(),
            to,
            why,
        }),
        None => Ok(to),
    }
}

impl JsonRewriter<'_> {
    fn meta(&self) -> Option<&MetadataMap> {
        self.map.metadata()
    }

    /// Renames the member name of `v`'s member to `to`.
    fn rename_member<'i>(
        &self,
        w: &mut Walk<'i>,
        v: Raw<'i>,
        to: &str,
    ) -> Result<(), RewriteError> {
        let start = w
            .member_start(v)
            .ok_or_else(|| super::malformed("a member name not found before its value"))?;
        let end = w.string_end(start);
        w.replace_range(start, end, &quote(to));
        Ok(())
    }

    /// A map of labels ([`Slot::Labels`]).
    pub(super) fn labels<'i>(&self, w: &mut Walk<'i>, raw: Raw<'i>) -> Result<(), RewriteError> {
        let Some(meta) = self.meta() else {
            return Ok(());
        };
        let Some(ms) = w.members(raw)? else {
            return Ok(());
        };
        for (key, v) in ms.iter() {
            if let Some(value) = string(v)? {
                if let Some(mapped) = meta.map_value(&key.0, &value, self.dir) {
                    w.replace_quoted(v, None, &mapped);
                }
            }
            if let Some(mapped) = meta.map_key(&key.0, self.dir) {
                let mapped = checked_key(&key.0, mapped)?;
                self.rename_member(w, v, &mapped)?;
            }
        }
        Ok(())
    }

    /// The member names of a map whose keys are metadata keys (annotations).
    pub(super) fn metadata_keys<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
    ) -> Result<(), RewriteError> {
        let Some(meta) = self.meta() else {
            return Ok(());
        };
        let Some(ms) = w.members(raw)? else {
            return Ok(());
        };
        for (key, v) in ms.iter() {
            if let Some(mapped) = meta.map_key(&key.0, self.dir) {
                let mapped = checked_key(&key.0, mapped)?;
                self.rename_member(w, v, &mapped)?;
            }
        }
        Ok(())
    }

    /// A selector requirement ([`Slot::LabelRequirement`]).
    pub(super) fn label_requirement<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        key: &str,
        values: &str,
    ) -> Result<(), RewriteError> {
        let Some(meta) = self.meta() else {
            return Ok(());
        };
        let Some(ms) = w.members(raw)? else {
            return Ok(());
        };
        let Some(k) = member(&ms, key) else {
            return Ok(());
        };
        let Some(name) = string(k)? else {
            return Ok(());
        };
        if let Some(vs) = member(&ms, values) {
            if let Some(es) = w.elements(vs)? {
                for e in es.iter() {
                    if let Some(v) = string(e)? {
                        if let Some(mapped) = meta.map_value(&name, &v, self.dir) {
                            w.replace_quoted(e, None, &mapped);
                        }
                    }
                }
            }
        }
        if let Some(mapped) = meta.map_key(&name, self.dir) {
            w.replace_quoted(k, None, &checked_key(&name, mapped)?);
        }
        Ok(())
    }

    /// A managed-fields entry's `fieldsV1` ([`Slot::FieldsV1`]) of an
    /// object of type `ty`.
    pub(super) fn fields_v1<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        ty: &TypeOf<'_>,
        addressed: Option<(&str, &str)>,
    ) -> Result<(), RewriteError> {
        let (group, kind) = self.app_type(ty, addressed);
        self.fields_v1_of(w, raw, &group, kind)
    }

    fn fields_v1_of<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        group: &str,
        kind: &str,
    ) -> Result<(), RewriteError> {
        for place in self.catalog.places_for(group, kind) {
            if is_metadata_slot(&place.slot) && place.slot != Slot::FieldsV1 {
                self.owned(w, raw, place.path.steps(), place.slot)?;
            }
        }
        Ok(())
    }

    /// A managed-fields entry's `fieldsV1` as JSON text (protobuf's
    /// `FieldsV1.raw`) of an object of `group` (app names) and `kind`.
    /// `Ok(None)`: nothing renamed.
    pub(crate) fn rename_fields_v1(
        &self,
        text: &str,
        group: &str,
        kind: &str,
    ) -> Result<Option<String>, RewriteError> {
        if !self.may_contain(text.as_bytes()) {
            return Ok(None);
        }
        let (mut walk, root) = Walk::parse(text)?;
        self.fields_v1_of(&mut walk, root, group, kind)?;
        Ok(walk.finish())
    }

    /// The field set `raw` (`{"f:metadata": {"f:labels": {...}}}`) followed
    /// along `steps` of a metadata place; at its end, the members that name
    /// keys renamed.
    fn owned<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        steps: &[Step],
        slot: Slot,
    ) -> Result<(), RewriteError> {
        let Some(ms) = w.members(raw)? else {
            return Ok(());
        };
        let meta = self.meta().expect("metadata places exist only with rules");
        match steps {
            // A list of strings (`finalizers[]`): each element owned is a
            // member `v:"<JSON string>"`.
            [Step::Each] if slot == Slot::Value(Form::MetadataKey) => {
                for (key, v) in ms.iter() {
                    let Some(json) = key.0.strip_prefix("v:") else {
                        continue;
                    };
                    let Ok(text) = serde_json::from_str::<String>(json) else {
                        continue;
                    };
                    if let Some(mapped) = meta.map_key(&text, self.dir) {
                        let mapped = checked_key(&text, mapped)?;
                        let member = format!("v:{}", serde_json::Value::String(mapped));
                        self.rename_member(w, v, &member)?;
                    }
                }
                Ok(())
            }
            // A map of keys: each member `f:<key>`.
            [] if matches!(slot, Slot::Labels | Slot::Keys(Form::MetadataKey)) => {
                for (key, v) in ms.iter() {
                    let Some(k) = key.0.strip_prefix("f:") else {
                        continue;
                    };
                    if let Some(mapped) = meta.map_key(k, self.dir) {
                        let mapped = checked_key(k, mapped)?;
                        self.rename_member(w, v, &format!("f:{mapped}"))?;
                    }
                }
                Ok(())
            }
            [] => Ok(()),
            [Step::Key(k), rest @ ..] => {
                let name: Cow<'_, str> = Cow::Owned(format!("f:{k}"));
                for (key, v) in ms.iter() {
                    if key.0 == name {
                        self.owned(w, v, rest, slot)?;
                    }
                }
                Ok(())
            }
            // The elements of a list, each owned as `k:{...}`, `i:<n>` or
            // `v:<value>`.
            [Step::Each, rest @ ..] => {
                for (key, v) in ms.iter() {
                    if ["k:", "i:", "v:"].iter().any(|p| key.0.starts_with(p)) {
                        self.owned(w, v, rest, slot)?;
                    }
                }
                Ok(())
            }
        }
    }

    /// A metadata key, a label selector string or a CEL expression
    /// ([`Form::MetadataKey`], [`Form::LabelSelector`], [`Form::Cel`]):
    /// renamed, or an error naming what Kubernetes would refuse or what
    /// can't be parsed.
    pub(crate) fn metadata_value(
        &self,
        form: Form,
        value: &str,
    ) -> Result<Option<String>, RewriteError> {
        match form {
            Form::MetadataKey => match self.map.map(form, value, self.dir) {
                Some(m) => checked_key(value, m).map(Some),
                None => Ok(None),
            },
            Form::LabelSelector => self
                .map
                .map_label_selector(value, self.dir)
                .map_err(|e| RewriteError::Malformed(e.to_string())),
            Form::Cel => self
                .map
                .map_cel(value, self.dir)
                .map_err(|e| RewriteError::Malformed(format!("CEL naming a mapped group: {e}"))),
            _ => Ok(self.map.map(form, value, self.dir)),
        }
    }

    /// True when the metadata of this object is never renamed (an
    /// exclusion names its kind, and its name and a selector its labels
    /// match when the exclusion has them).
    pub(super) fn excluded<'i>(
        &self,
        w: &mut Walk<'i>,
        raw: Raw<'i>,
        kind: &str,
    ) -> Result<bool, RewriteError> {
        let Some(meta) = self.meta() else {
            return Ok(false);
        };
        let mine: Vec<_> = meta
            .exclusions()
            .iter()
            .filter(|e| e.kind == kind)
            .collect();
        if mine.is_empty() {
            return Ok(false);
        }
        if mine.iter().any(|e| e.is_whole_kind()) {
            return Ok(true);
        }
        let mut name = None;
        let mut labels: Vec<(String, String)> = Vec::new();
        let metadata = w.members(raw)?.and_then(|ms| member(&ms, "metadata"));
        if let Some(m) = metadata {
            if let Some(ms) = w.members(m)? {
                if let Some(n) = member(&ms, "name") {
                    name = string(n)?.map(Cow::into_owned);
                }
                if let Some(l) = member(&ms, "labels") {
                    if let Some(ls) = w.members(l)? {
                        for (k, v) in ls.iter() {
                            if let Some(v) = string(v)? {
                                labels.push((k.0.to_string(), v.into_owned()));
                            }
                        }
                    }
                }
            }
        }
        let label = |k: &str| labels.iter().find(|(x, _)| x == k).map(|(_, v)| v.as_str());
        Ok(mine.iter().any(|e| e.covers(kind, name.as_deref(), label)))
    }
}

#[cfg(test)]
mod tests;
