//! OpenAPI v2 in protobuf (`GET /openapi/v2` with `Accept:
//! application/com.github.proto-openapi.spec.v2@v1.0+protobuf`): gnostic's
//! `openapi.v2.Document`, renamed by splicing bytes.
//!
//! The same places and the same semantics as the JSON rewriter
//! ([`super::openapi`]): path names (`Document.paths.path[].name`,
//! `/apis/{group}/...`), definition names (`Document.definitions
//! .additional_properties[].name`, reverse-DNS), every `$ref` (`Schema._ref`,
//! `PathItem._ref`, `JsonReference._ref`) naming `…/NAME`, and the YAML of
//! `x-kubernetes-group-version-kind` vendor extensions (`NamedAny{name,
//! value: Any{yaml}}`: its `group:` values). Paths of shadowed groups and
//! definitions named for the other side's groups are dropped, as in discovery.
//!
//! # How
//!
//! The wire format is read along a fixed table of gnostic's field numbers
//! (`action`; the messages are declared in `core/proto/openapiv2.proto`,
//! against which the tests check the table). All occurrences of every mapped
//! name of both directions, forward and reverse-DNS, are found in one scan
//! first; a length-delimited field is only descended into when its bytes hold
//! one, and input holding none is not parsed at all (`Ok(None)`). A renamed
//! string or a dropped entry changes only its own bytes and the length prefix
//! of every message above it (re-encoded in shortest form); all other bytes
//! (unknown fields, field order, varint spellings) are copied as they came.
//!
//! # Errors
//!
//! Malformed wire data on a walked path (truncated fields, a length beyond the
//! bytes left, invalid wire types or a walked field with the wrong one,
//! invalid UTF-8 in a walked string, nesting deeper than [`MAX_DEPTH`]) is a
//! [`RewriteError::Protobuf`]: never a panic, and no length read from the
//! input is used before it is checked against the bytes that remain.
//!
//! # Not renamed
//!
//! As in JSON, operation ids and tags (camel-cased groups) are left alone.
//! Unlike JSON, a `$ref` or GVK inside a free-form value (`default`,
//! `example`, `enum`, other vendor extensions: YAML in `Any`) is not looked
//! at, nor are the `headers`/`examples` of responses and the security
//! definitions, which never name a group.

use regroup_config::{Direction, GroupMap};

use super::error::RewriteError;
use super::names::NameIndex;
use super::protobuf::wire::{put_varint, Field, Fields, LEN};

/// How deeply messages may nest before the input is refused (schemas nest
/// through properties, items and allOf; Kubernetes' go a few levels deep).
pub const MAX_DEPTH: usize = 100;

/// The vendor extension that carries group-version-kinds.
const GVK_EXTENSION: &str = super::catalog::openapi::GVK;

fn malformed(e: impl std::fmt::Display) -> RewriteError {
    RewriteError::Protobuf(format!("OpenAPI v2: {e}"))
}

mod schema;

use schema::{action, Action, Kind};

/// The field of `buf[pos..end]` that starts at `pos` (`pos < end`), read
/// by the protobuf codec's wire reader.
fn next_field(buf: &[u8], pos: usize, end: usize) -> Result<Field, RewriteError> {
    Fields::new(buf, pos, end)
        .next()
        .unwrap_or_else(|| Err(malformed("no field where one was expected")))
}

/// The last length-delimited field `number` of `buf[start..end]`.
fn last_string(
    buf: &[u8],
    start: usize,
    end: usize,
    number: u32,
) -> Result<Option<&str>, RewriteError> {
    let mut pos = start;
    let mut found = None;
    while pos < end {
        let f = next_field(buf, pos, end)?;
        pos = f.end;
        if f.number == number {
            if f.wire != LEN {
                return Err(wrong_wire(&f));
            }
            found = Some(utf8(&buf[f.value_start..f.end])?);
        }
    }
    Ok(found)
}

fn utf8(b: &[u8]) -> Result<&str, RewriteError> {
    std::str::from_utf8(b).map_err(|e| malformed(format!("string is not UTF-8: {e}")))
}

fn wrong_wire(f: &Field) -> RewriteError {
    malformed(format!(
        "field {} has wire type {}, expected a length-delimited value",
        f.number, f.wire
    ))
}

/// Renames groups in OpenAPI v2 protobuf documents, in one direction.
pub struct OpenApiProtoRewriter<'a> {
    map: &'a GroupMap,
    dir: Direction,
    /// Names of both sides, forward and reverse-DNS.
    index: NameIndex,
}

/// One rewrite: the input and where mapped names occur in it.
struct Pass<'b> {
    buf: &'b [u8],
    /// (start, end) of every occurrence, sorted by start.
    hits: Vec<(usize, usize)>,
}

impl Pass<'_> {
    /// Whether an occurrence lies wholly within `start..end`.
    fn hit(&self, start: usize, end: usize) -> bool {
        let i = self.hits.partition_point(|h| h.0 < start);
        self.hits[i..]
            .iter()
            .take_while(|h| h.0 < end)
            .any(|h| h.1 <= end)
    }
}

/// What became of a field's value.
enum Outcome {
    Same,
    Dropped,
    Changed(Vec<u8>),
}

impl<'a> OpenApiProtoRewriter<'a> {
    /// A rewriter for `dir`.
    pub fn new(map: &'a GroupMap, dir: Direction) -> Self {
        Self::with_index(map, dir, NameIndex::new(map))
    }

    /// [`new`](Self::new) sharing the configuration's name index.
    pub fn with_index(map: &'a GroupMap, dir: Direction, index: NameIndex) -> Self {
        OpenApiProtoRewriter { map, dir, index }
    }

    /// Renames an `openapi.v2.Document`. `Ok(None)`: nothing to rename.
    pub fn rewrite_bytes(&self, input: &[u8]) -> Result<Option<Vec<u8>>, RewriteError> {
        if !self.index.dns().is_match(input) {
            return Ok(None);
        }
        let hits = self.index.dns().find_all(input);
        let pass = Pass { buf: input, hits };
        self.walk(&pass, Kind::Document, 0, input.len(), 0)
    }

    /// Walks the message `kind` in `buf[start..end]`: its new bytes, or
    /// `None` when nothing in it changed.
    fn walk(
        &self,
        p: &Pass<'_>,
        kind: Kind,
        start: usize,
        end: usize,
        depth: usize,
    ) -> Result<Option<Vec<u8>>, RewriteError> {
        if depth > MAX_DEPTH {
            return Err(malformed(format!("nested deeper than {MAX_DEPTH}")));
        }
        let buf = p.buf;
        if kind == Kind::NamedAny && last_string(buf, start, end, 1)? != Some(GVK_EXTENSION) {
            return Ok(None);
        }
        let mut out: Option<Vec<u8>> = None;
        let mut copied = start;
        let mut pos = start;
        while pos < end {
            let f = next_field(buf, pos, end)?;
            pos = f.end;
            let act = action(kind, f.number);
            if act == Action::Copy {
                continue;
            }
            if f.wire != LEN {
                return Err(wrong_wire(&f));
            }
            if !p.hit(f.value_start, f.end) {
                continue;
            }
            let outcome = self.field(p, act, &f, depth)?;
            let o = match outcome {
                Outcome::Same => continue,
                _ => out.get_or_insert_with(|| Vec::with_capacity(end - start + 64)),
            };
            o.extend_from_slice(&buf[copied..f.start]);
            if let Outcome::Changed(value) = outcome {
                o.extend_from_slice(&buf[f.start..f.len_start]);
                put_varint(value.len() as u64, o);
                o.extend_from_slice(&value);
            }
            copied = f.end;
        }
        Ok(out.map(|mut o| {
            o.extend_from_slice(&buf[copied..end]);
            o
        }))
    }

    /// One length-delimited field that holds a mapped name.
    fn field(
        &self,
        p: &Pass<'_>,
        act: Action,
        f: &Field,
        depth: usize,
    ) -> Result<Outcome, RewriteError> {
        let (s, e) = (f.value_start, f.end);
        let renamed = |new: Option<String>| match new {
            Some(n) => Outcome::Changed(n.into_bytes()),
            None => Outcome::Same,
        };
        Ok(match act {
            Action::Copy => Outcome::Same,
            Action::Message(k) => match self.walk(p, k, s, e, depth + 1)? {
                Some(v) => Outcome::Changed(v),
                None => Outcome::Same,
            },
            Action::Entry(k) => {
                let name = last_string(p.buf, s, e, 1)?.unwrap_or("");
                let shadowed = match k {
                    Kind::PathEntry => self.path_shadowed(name),
                    _ => self.map.map_reverse_dns(name, self.dir.flip()).is_some(),
                };
                if shadowed {
                    Outcome::Dropped
                } else {
                    match self.walk(p, k, s, e, depth + 1)? {
                        Some(v) => Outcome::Changed(v),
                        None => Outcome::Same,
                    }
                }
            }
            Action::Ref => renamed(self.map_ref(utf8(&p.buf[s..e])?)),
            Action::PathName => renamed(self.map.map_api_path(utf8(&p.buf[s..e])?, self.dir)),
            Action::DefinitionName => {
                renamed(self.map.map_reverse_dns(utf8(&p.buf[s..e])?, self.dir))
            }
            Action::GvkYaml => renamed(self.gvk_yaml(utf8(&p.buf[s..e])?)),
        })
    }

    fn path_shadowed(&self, path: &str) -> bool {
        super::openapi::group_of_path(path).is_some_and(|g| self.map.is_shadowed(g, self.dir))
    }

    /// `#/definitions/NAME`.
    fn map_ref(&self, r: &str) -> Option<String> {
        let (prefix, name) = r.rsplit_once('/')?;
        let m = self.map.map_reverse_dns(name, self.dir)?;
        Some(format!("{prefix}/{m}"))
    }

    /// Renames the `group:` values of a GVK extension's YAML (a mapping, or
    /// a list of them: `- group: g` / `  group: g`, plain or quoted); every
    /// other byte is kept.
    fn gvk_yaml(&self, yaml: &str) -> Option<String> {
        let mut out = String::with_capacity(yaml.len() + 32);
        let mut changed = false;
        for line in yaml.split_inclusive('\n') {
            match self.gvk_line(line) {
                Some(l) => {
                    out.push_str(&l);
                    changed = true;
                }
                None => out.push_str(line),
            }
        }
        changed.then_some(out)
    }

    fn gvk_line(&self, line: &str) -> Option<String> {
        let body = line.trim_end_matches(['\n', '\r']);
        let mut rest = body.trim_start_matches(' ');
        if let Some(r) = rest.strip_prefix('-') {
            rest = r.trim_start_matches(' ');
        }
        let after_key = rest.strip_prefix("group:")?;
        let value = after_key.trim_matches([' ', '\t']);
        if value.is_empty() {
            return None;
        }
        let value_start = body.len() - rest.len()
            + "group:".len()
            + (after_key.len() - after_key.trim_start_matches([' ', '\t']).len());
        let value_end = value_start + value.len();
        let (quote, group) = match value.as_bytes()[0] {
            q @ (b'"' | b'\'') if value.len() >= 2 && value.ends_with(q as char) => {
                (Some(q as char), &value[1..value.len() - 1])
            }
            _ => (None, value),
        };
        if group.contains(['\\', '\'', '"', '#']) {
            return None;
        }
        let new = self.map.map_group(group, self.dir)?;
        let mut l = String::with_capacity(line.len() + new.len());
        l.push_str(&line[..value_start]);
        if let Some(q) = quote {
            l.push(q);
            l.push_str(&new);
            l.push(q);
        } else {
            l.push_str(&new);
        }
        l.push_str(&line[value_end..]);
        Some(l)
    }
}

#[cfg(test)]
mod tests;
