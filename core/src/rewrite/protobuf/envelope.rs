//! The envelope of every Kubernetes protobuf body: the magic `k8s\0`, then a
//! `runtime.Unknown` {1 typeMeta {1 apiVersion, 2 kind}, 2 raw, 3
//! contentEncoding, 4 contentType}. The type names the message `raw` holds.

use std::sync::Arc;

use super::plan::Plan;
use super::types;
use super::walker::Walk;
use super::wire::{wrong_wire, Field, Fields, LEN, MAGIC};
use super::{malformed, ProtoRewriter};
use crate::rewrite::error::RewriteError;
use regroup_config::Direction;

/// How deep embedded objects may nest (a watch event's object is one level).
pub(crate) const MAX_DEPTH: usize = 8;

/// The only content type the walker reads (empty means the same).
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

fn text<'i>(buf: &'i [u8], f: &Field, what: &str) -> Result<&'i str, RewriteError> {
    if f.wire != LEN {
        return Err(wrong_wire(f));
    }
    std::str::from_utf8(&buf[f.value_start..f.end])
        .map_err(|_| malformed(format!("the envelope's {what} is not UTF-8")))
}

/// Refuses what the codecs don't read: an encoded envelope, or a content
/// type other than protobuf.
pub(super) fn check_encoding(encoding: &str, content_type: &str) -> Result<(), RewriteError> {
    if !encoding.is_empty() {
        return Err(malformed(format!(
            "unsupported envelope contentEncoding `{encoding}`"
        )));
    }
    if !content_type.is_empty() && content_type != PROTOBUF {
        return Err(malformed(format!(
            "unsupported envelope contentType `{content_type}`"
        )));
    }
    Ok(())
}

/// An envelope's type, read from its `runtime.Unknown` (without the magic):
/// the last value of each member wins, as in Go. For readers that look at
/// objects rather than splice the envelope (the front-trust hooks).
#[derive(Debug, Default)]
pub struct Head<'a> {
    pub api_version: &'a str,
    pub kind: &'a str,
}

impl<'a> Head<'a> {
    /// The `runtime.Unknown` of an enveloped `body` and its head (see
    /// `unwrap`).
    pub fn open(body: &'a [u8], depth: usize) -> Result<(&'a [u8], Head<'a>), RewriteError> {
        let unknown = unwrap(body, depth)?;
        Ok((unknown, Head::read(unknown)?))
    }

    /// Reads the head of `unknown`, refusing encodings the codecs don't read.
    pub(crate) fn read(unknown: &'a [u8]) -> Result<Head<'a>, RewriteError> {
        let mut head = Head::default();
        let (mut encoding, mut content_type) = ("", "");
        for f in Fields::new(unknown, 0, unknown.len()) {
            let f = f?;
            match f.number {
                1 if f.wire == LEN => {
                    for g in Fields::new(unknown, f.value_start, f.end) {
                        let g = g?;
                        match g.number {
                            1 => head.api_version = text(unknown, &g, "apiVersion")?,
                            2 => head.kind = text(unknown, &g, "kind")?,
                            _ => {}
                        }
                    }
                }
                3 => encoding = text(unknown, &f, "contentEncoding")?,
                4 => content_type = text(unknown, &f, "contentType")?,
                1 => return Err(wrong_wire(&f)),
                _ => {}
            }
        }
        check_encoding(encoding, content_type)?;
        Ok(head)
    }
}

/// The `runtime.Unknown` of an enveloped `body` (after `k8s\0`); refused
/// when the magic is missing or the object is nested `depth` >=
/// `MAX_DEPTH` envelopes deep.
/// What amends one envelope's bytes, found at a nesting depth.
pub type EnvelopeEdit<'e> =
    &'e mut dyn FnMut(&[u8], usize) -> Result<Option<Vec<u8>>, RewriteError>;

/// A protobuf `WatchEvent` {1 type, 2 object: `RawExtension` {1 raw}}
/// with its enveloped object passed through `envelope` (the object's
/// bytes, `depth + 1`); an enveloped frame is itself an envelope, passed
/// at `depth`. JSON in a `RawExtension` (not what a protobuf watch sends)
/// is left as it is.
pub fn event_object(
    event: &[u8],
    depth: usize,
    envelope: EnvelopeEdit<'_>,
) -> Result<Option<Vec<u8>>, RewriteError> {
    if event.starts_with(MAGIC) {
        return envelope(event, depth);
    }
    super::wire::splice_field(event, 2, &mut |object| {
        super::wire::splice_field(object, 1, &mut |raw| {
            if raw.starts_with(MAGIC) {
                envelope(raw, depth + 1)
            } else {
                Ok(None)
            }
        })
    })
}

pub(crate) fn unwrap(body: &[u8], depth: usize) -> Result<&[u8], RewriteError> {
    let Some(unknown) = body.strip_prefix(MAGIC) else {
        return Err(malformed("missing the k8s\\0 envelope magic"));
    };
    if depth >= MAX_DEPTH {
        return Err(malformed(format!(
            "embedded objects nested more than {MAX_DEPTH} deep"
        )));
    }
    Ok(unknown)
}

impl ProtoRewriter<'_> {
    /// The enveloped object in `input[start..end]` (magic included).
    pub(super) fn envelope(
        &self,
        w: &mut Walk<'_>,
        start: usize,
        end: usize,
    ) -> Result<isize, RewriteError> {
        unwrap(&w.input[start..end], w.depth)?;
        w.depth += 1;
        let d = self.unknown(w, start + MAGIC.len(), end);
        w.depth -= 1;
        d
    }

    fn unknown(&self, w: &mut Walk<'_>, start: usize, end: usize) -> Result<isize, RewriteError> {
        let u = UnknownFields::read(w.input, start, end)?;
        let (plan, mut d) = self.envelope_type(w, &u)?;
        if let Some(raw) = u.raw {
            if w.has_match(raw.value_start, raw.end) {
                d += self.length_delimited(w, &raw, |w| {
                    self.object(w, raw.value_start, raw.end, &plan)
                })?;
            }
        }
        Ok(d)
    }

    /// The plan for the message in an envelope's `raw`, from its type
    /// (read from `u`); renames the type's `apiVersion` where it is a
    /// place. Returns the plan and the change in length.
    pub(super) fn envelope_type(
        &self,
        w: &mut Walk<'_>,
        u: &UnknownFields<'_>,
    ) -> Result<(Arc<Plan>, isize), RewriteError> {
        let type_metas = &u.type_metas;
        // The type: the last value of each member wins, across occurrences.
        let (mut api_version, mut kind) = ("", "");
        let mut api_version_fields = Vec::new();
        for tm in type_metas {
            for f in Fields::new(w.input, tm.value_start, tm.end) {
                let f = f?;
                match f.number {
                    1 => {
                        api_version = text(w.input, &f, "apiVersion")?;
                        api_version_fields.push((*tm, f));
                    }
                    2 => kind = text(w.input, &f, "kind")?,
                    _ => {}
                }
            }
        }
        check_encoding(u.encoding, u.content_type)?;
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let app_group = match self.dir {
            Direction::ToApp => self.map.map_group(group, Direction::ToApp),
            Direction::ToCluster => None,
        };
        let app_group = app_group.as_deref().unwrap_or(group);
        let (message, fallback) = types::resolve(app_group, version, kind);
        let addressed = w.addressed.clone();
        let addressed = addressed.as_ref().map(|(g, k)| (g.as_str(), k.as_str()));
        let plan = self.plan(&message, app_group, kind, addressed, fallback);

        let mut d = 0;
        if let Some(form) = plan.api_version {
            for tm in type_metas {
                if !w.has_match(tm.value_start, tm.end) {
                    continue;
                }
                let fields: Vec<Field> = api_version_fields
                    .iter()
                    .filter(|(t, _)| t == tm)
                    .map(|(_, f)| *f)
                    .collect();
                d += self.length_delimited(w, tm, |w| {
                    let mut d = 0;
                    for f in &fields {
                        d += self.string_field(w, f, form)?;
                    }
                    Ok(d)
                })?;
            }
        }
        Ok((plan, d))
    }
}

/// The members of one `runtime.Unknown` (without the magic), as fields of
/// the input: every `typeMeta`, the last `raw` (the last one wins, as in
/// Go), and the encoding.
pub(super) struct UnknownFields<'i> {
    pub type_metas: Vec<Field>,
    pub raw: Option<Field>,
    pub encoding: &'i str,
    pub content_type: &'i str,
}

impl<'i> UnknownFields<'i> {
    /// Reads the `runtime.Unknown` in `input[start..end]`.
    pub(super) fn read(input: &'i [u8], start: usize, end: usize) -> Result<Self, RewriteError> {
        let mut u = UnknownFields {
            type_metas: Vec::new(),
            raw: None,
            encoding: "",
            content_type: "",
        };
        for f in Fields::new(input, start, end) {
            let f = f?;
            match f.number {
                1 if f.wire == LEN => u.type_metas.push(f),
                2 if f.wire == LEN => u.raw = Some(f),
                3 => u.encoding = text(input, &f, "contentEncoding")?,
                4 => u.content_type = text(input, &f, "contentType")?,
                1 | 2 => return Err(wrong_wire(&f)),
                _ => {}
            }
        }
        Ok(u)
    }
}
