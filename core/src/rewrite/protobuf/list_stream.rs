//! A protobuf list renamed item by item as it arrives.
//!
//! A body is `k8s\0` + `runtime.Unknown` {1 typeMeta, 2 raw, 3
//! contentEncoding, 4 contentType}; a list is the message in `raw`, its
//! `ListMeta` and each item a top-level field of it. The walk renames each
//! top-level field of a message on its own (nothing in one field depends on
//! another), so each is renamed as soon as its bytes are in and its input
//! is released.
//!
//! The output can't be sent as it is made: `raw`'s length prefix comes
//! before the items, and renaming changes their lengths (a name grows or
//! shrinks, a hidden item is dropped). A bytes field can't be split either
//! (a repeated `raw` replaces, it doesn't append). The apiserver's own
//! streaming encoder can write the length first only because it sizes every
//! item it holds before writing any. So the renamed items are written to a
//! [`Spool`] (in memory up to a small look-ahead, then an anonymous spill
//! file) as each is renamed, and the envelope's head with the new length
//! goes out when the list ends, then the spool read back in fixed chunks.
//! What memory holds: the look-ahead (or the file's write buffer) and the
//! item being read, where the whole path holds the input collected, a
//! contiguous copy of it, and the renamed copy. Nothing is sent before the
//! end, so a failure is still a `Status`. The other ways to write the length
//! first, and why not them, are in `docs/performance.md`.
//!
//! A kind regroup has no message for is walked leniently: when any part of
//! the list doesn't follow the convention, the whole list is left as it
//! came. For those, every item as it came is spooled too, until the list
//! ends, to be the output if a later item doesn't parse.
//!
//! Anything but the usual shape (the magic, `typeMeta`, then `raw`) is
//! collected and renamed whole. The output is
//! [`ProtoRewriter::rewrite_bytes_with`]'s, byte for byte. One difference on
//! bad input: the list's own framing is checked even when no mapped name is
//! in it (the whole path forwards a body without a name unparsed), and an
//! envelope that repeats its type or `raw` after the items is refused when
//! anything in it is renamed.

use std::sync::Arc;

use bytes::Bytes;

use super::envelope::{check_encoding, UnknownFields};
use super::plan::Plan;
use super::spool::{Spill, Spool, Spooled};
use super::walker::Walk;
use super::wire::MAGIC;
use super::wire::{field_end, put_varint, wrong_wire, Field, LEN};
use super::{malformed, ProtoRewriter};
use crate::rewrite::error::RewriteError;

fn unreadable_type() -> RewriteError {
    malformed("the envelope's type can't be read")
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before `raw`'s value: the envelope's head.
    Head,
    /// Inside `raw`, this many bytes of it left.
    Items(usize),
    /// After `raw`: the envelope's last fields, kept as they come.
    Tail,
    /// Not streamed: everything collected, renamed whole at the end.
    Whole,
}

/// Renames an enveloped protobuf body (a list, typically) as it arrives.
/// Feed it chunks with the rewriter to use; [`finish`](Self::finish) gives
/// the output.
pub struct ListStream {
    addressed: Option<(String, String)>,
    limit: usize,
    phase: Phase,
    /// Input not consumed yet, from `pos`.
    buf: Vec<u8>,
    pos: usize,
    /// The envelope up to `raw`'s tag, renamed.
    head: Vec<u8>,
    /// `raw`'s tag and length prefix as they came.
    raw_tag: Vec<u8>,
    raw_prefix: Vec<u8>,
    raw_len: usize,
    /// The plan for `raw`'s message, or why there is none (an error only
    /// when something is to be renamed, as in the whole path).
    plan: Result<Arc<Plan>, Option<RewriteError>>,
    /// The change in `raw`'s length so far.
    delta: isize,
    /// A mapped name was seen anywhere in the body; in `raw`.
    any_match: bool,
    raw_match: bool,
    /// An error in a field without a name: an error only if a name is
    /// somewhere in `raw` (the whole path walks nothing without one).
    unnamed_error: Option<RewriteError>,
    /// A lenient walk failed: the list is left as it came.
    reverted: bool,
    /// The list may hold names `names:` renames (its envelope names a
    /// listed kind, or the request addressed one): every item is walked,
    /// as the whole path's forced walk does.
    force: bool,
    /// The renamed items.
    out: Spool,
    /// The items as they came, while a lenient walk may still fail.
    orig: Option<Spool>,
    spill: Spill,
}

/// A renamed body: the envelope's head with `raw`'s new length, the
/// renamed items, the envelope's tail.
pub struct Output {
    /// Its length in bytes.
    pub len: u64,
    pub head: Bytes,
    pub items: Spooled,
    pub tail: Bytes,
}

impl Output {
    fn whole(b: Bytes) -> Output {
        Output {
            len: b.len() as u64,
            head: b,
            items: Spooled::Memory(Vec::new()),
            tail: Bytes::new(),
        }
    }

    /// Everything, in memory (tests, the fuzz harness).
    pub fn into_chunks(self) -> Result<Vec<Bytes>, RewriteError> {
        let mut chunks = vec![self.head];
        chunks.extend(self.items.into_chunks()?);
        chunks.push(self.tail);
        chunks.retain(|c| !c.is_empty());
        Ok(chunks)
    }
}

impl ListStream {
    /// A stream held in memory; `addressed` as for
    /// [`ProtoRewriter::rewrite_bytes_addressed`]; `limit` bounds the
    /// renamed items, and the item being read (or a body renamed whole).
    pub fn new(addressed: Option<(&str, &str)>, limit: usize) -> Self {
        Self::with_spill(addressed, limit, Spill::memory(limit))
    }

    /// A stream whose renamed items go where `spill` says; `limit` bounds
    /// the item being read (or a body renamed whole).
    pub fn with_spill(addressed: Option<(&str, &str)>, limit: usize, spill: Spill) -> Self {
        ListStream {
            addressed: addressed.map(|(g, k)| (g.to_owned(), k.to_owned())),
            limit,
            phase: Phase::Head,
            buf: Vec::new(),
            pos: 0,
            head: Vec::new(),
            raw_tag: Vec::new(),
            raw_prefix: Vec::new(),
            raw_len: 0,
            plan: Err(None),
            delta: 0,
            any_match: false,
            raw_match: false,
            unnamed_error: None,
            reverted: false,
            force: false,
            out: Spool::new(spill.clone()),
            orig: None,
            spill,
        }
    }

    fn addressed(&self) -> Option<(&str, &str)> {
        self.addressed
            .as_ref()
            .map(|(g, k)| (g.as_str(), k.as_str()))
    }

    fn too_large(&self) -> RewriteError {
        RewriteError::Malformed(format!(
            "an item of a protobuf list (or a body renamed whole) is larger than {} bytes",
            self.limit
        ))
    }

    /// Whether the body is being renamed item by item (false while its head
    /// is read, and for a body collected to be renamed whole).
    pub fn is_streamed(&self) -> bool {
        matches!(self.phase, Phase::Items(_) | Phase::Tail)
    }

    /// Bytes held in memory now: the renamed items not spilled (and the
    /// originals kept to put back), the head, the item being read.
    pub fn held(&self) -> usize {
        self.out.held()
            + self.orig.as_ref().map_or(0, Spool::held)
            + self.head.len()
            + self.buf.capacity()
    }

    /// Whether the renamed items went to a spill file.
    pub fn spilled(&self) -> bool {
        self.out.spilled()
    }

    /// Feeds bytes as they arrive.
    pub fn feed(&mut self, rw: &ProtoRewriter<'_>, data: &[u8]) -> Result<(), RewriteError> {
        if self.pos > 0 {
            self.buf.drain(..self.pos);
            self.pos = 0;
        }
        self.buf.extend_from_slice(data);
        if self.phase == Phase::Head {
            self.head_phase(rw)?;
        }
        if let Phase::Items(_) = self.phase {
            self.items(rw)?;
        }
        if self.buf.len() - self.pos > self.limit {
            return Err(self.too_large());
        }
        Ok(())
    }

    /// Reads the envelope up to `raw`'s value; decides whether to stream.
    fn head_phase(&mut self, rw: &ProtoRewriter<'_>) -> Result<(), RewriteError> {
        let n = self.buf.len().min(MAGIC.len());
        if self.buf[..n] != MAGIC[..n] {
            self.phase = Phase::Whole;
            return Ok(());
        }
        if n < MAGIC.len() {
            return Ok(());
        }
        let mut at = MAGIC.len();
        let raw = loop {
            let f = match field_end(&self.buf, at) {
                Ok(Some(f)) => f,
                Ok(None) => return Ok(()),
                // The whole path says what is wrong, if anything is.
                Err(_) => {
                    self.phase = Phase::Whole;
                    return Ok(());
                }
            };
            if f.number == 2 {
                if f.wire != LEN {
                    self.phase = Phase::Whole;
                    return Ok(());
                }
                break f;
            }
            if f.end > self.buf.len() {
                return Ok(());
            }
            at = f.end;
        };
        let head = &self.buf[..raw.start];
        let matches = rw.find(head);
        self.force = rw.names_involved(head, self.addressed());
        let head_match = !matches.is_empty() || self.force;
        let mut w = Walk::new(head, matches, self.addressed());
        w.depth = 1;
        w.force = self.force;
        let typed = UnknownFields::read(head, MAGIC.len(), head.len())
            .and_then(|u| rw.envelope_type(&mut w, &u));
        match typed {
            Ok((plan, _)) => {
                if plan.lenient {
                    self.orig = Some(Spool::new(self.spill.clone()));
                }
                self.plan = Ok(plan);
                self.head = w.finish().unwrap_or_else(|| head.to_vec());
            }
            Err(e) if head_match => return Err(e),
            Err(e) => {
                self.plan = Err(Some(e));
                self.head = head.to_vec();
            }
        }
        self.any_match = head_match;
        self.raw_tag = self.buf[raw.start..raw.len_start].to_vec();
        self.raw_prefix = self.buf[raw.len_start..raw.value_start].to_vec();
        self.raw_len = raw.end - raw.value_start;
        self.pos = raw.value_start;
        self.phase = Phase::Items(self.raw_len);
        Ok(())
    }

    /// Renames every top-level field of `raw`'s message that is complete.
    fn items(&mut self, rw: &ProtoRewriter<'_>) -> Result<(), RewriteError> {
        while let Phase::Items(left) = self.phase {
            if left == 0 {
                self.phase = Phase::Tail;
                break;
            }
            let Some(f) = field_end(&self.buf, self.pos)? else {
                if self.buf.len() - self.pos >= left {
                    return Err(malformed("a truncated field at the end of the list"));
                }
                return Ok(());
            };
            let len = f.end - f.start;
            if len > left {
                return Err(malformed(format!(
                    "field {}: length exceeds the {left} bytes left of the list",
                    f.number
                )));
            }
            if len > self.limit {
                return Err(self.too_large());
            }
            if f.end > self.buf.len() {
                return Ok(());
            }
            self.item(rw, &f)?;
            self.pos = f.end;
            self.phase = Phase::Items(left - len);
        }
        Ok(())
    }

    /// One top-level field of `raw`'s message (an item, the `ListMeta`),
    /// renamed as the walk of the whole message would.
    fn item(&mut self, rw: &ProtoRewriter<'_>, f: &Field) -> Result<(), RewriteError> {
        let item = &self.buf[f.start..f.end];
        if self.reverted {
            return self.out.put(item);
        }
        if let Some(o) = &mut self.orig {
            o.put(item)?;
        }
        let matches = rw.find(item);
        let named = !matches.is_empty() || self.force;
        self.any_match |= named;
        self.raw_match |= named;
        if named {
            if let Some(e) = self.unnamed_error.take() {
                return Err(e);
            }
        }
        let plan = match &mut self.plan {
            Ok(p) => p.clone(),
            Err(_) if !named => return self.out.put(item),
            Err(e) => return Err(e.take().unwrap_or_else(unreadable_type)),
        };
        let walked = if named {
            let mut w = Walk::new(item, matches, self.addressed());
            w.depth = 1;
            w.force = self.force;
            rw.message(&mut w, 0, item.len(), &plan.root)
                .map(|d| (d, w.finish()))
        } else if f.wire != LEN && plan.root.child(f.number).is_some() {
            // The one check the whole walk makes of a field without a name
            // (when a name is elsewhere in the list): one it would descend
            // into is length-delimited. Its framing is already checked.
            Err(wrong_wire(f))
        } else {
            Ok((0, None))
        };
        match walked {
            Err(RewriteError::Protobuf(_)) if plan.lenient => {
                // Not the convention: the list as it came, which `orig`
                // holds (this item included).
                self.reverted = true;
                self.delta = 0;
                self.out = self
                    .orig
                    .take()
                    .unwrap_or_else(|| Spool::new(self.spill.clone()));
                Ok(())
            }
            Err(e) if !named => {
                self.unnamed_error.get_or_insert(e);
                self.out.put(item)
            }
            Err(e) => Err(e),
            Ok((d, Some(renamed))) => {
                self.delta += d;
                self.out.put_owned(renamed)
            }
            Ok((_, None)) => self.out.put(item),
        }
    }

    /// Ends the stream: the output.
    pub fn finish(mut self, rw: &ProtoRewriter<'_>) -> Result<Output, RewriteError> {
        let rest = &self.buf[self.pos..];
        match self.phase {
            Phase::Head | Phase::Whole => {
                let out = rw.rewrite_bytes_with(rest, self.addressed())?;
                return Ok(Output::whole(
                    out.map_or_else(|| Bytes::copy_from_slice(rest), Bytes::from),
                ));
            }
            Phase::Items(_) => return Err(malformed("the list ended inside its items")),
            Phase::Tail => {}
        }
        let tail = rest;
        if !rw.find(tail).is_empty() {
            self.any_match = true;
        }
        if self.any_match {
            if let Err(e) = &mut self.plan {
                return Err(e.take().unwrap_or_else(unreadable_type));
            }
            if let Some(e) = self.unnamed_error.take().filter(|_| self.raw_match) {
                return Err(e);
            }
            let u = UnknownFields::read(tail, 0, tail.len())?;
            if !u.type_metas.is_empty() || u.raw.is_some() {
                return Err(malformed(
                    "the envelope repeats its type or its items after the items",
                ));
            }
            check_encoding(u.encoding, u.content_type)?;
        }
        let mut head = std::mem::take(&mut self.head);
        head.extend_from_slice(&self.raw_tag);
        let raw_len = self.raw_len as isize + self.delta;
        if self.delta == 0 {
            head.extend_from_slice(&self.raw_prefix);
        } else {
            put_varint(raw_len as u64, &mut head);
        }
        // What the walk says the items became is what was written.
        if self.out.written() != raw_len as u64 {
            return Err(malformed("the renamed list's length doesn't add up"));
        }
        let tail = Bytes::copy_from_slice(tail);
        drop(self.orig.take());
        let len = head.len() as u64 + self.out.written() + tail.len() as u64;
        Ok(Output {
            len,
            head: Bytes::from(head),
            items: self.out.finish()?,
            tail,
        })
    }
}

/// The whole input through a [`ListStream`] in chunks of `chunk` bytes,
/// concatenated (for tests and benchmarks).
pub fn rewrite_in_chunks(
    rw: &ProtoRewriter<'_>,
    input: &[u8],
    addressed: Option<(&str, &str)>,
    chunk: usize,
) -> Result<Vec<u8>, RewriteError> {
    let mut s = ListStream::new(addressed, usize::MAX);
    for c in input.chunks(chunk.max(1)) {
        s.feed(rw, c)?;
    }
    Ok(s.finish(rw)?.into_chunks()?.concat())
}
