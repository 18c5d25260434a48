//! Streaming a JSON response through the rewriter item by item, so memory
//! is bounded by the largest single item, not by the response.
//!
//! A small incremental scanner (depth, strings, escapes; no parsing) finds
//! the top-level `items` (or Table `rows`) array. The head before it is
//! renamed as the object with an empty array; each element is renamed on
//! its own, as the only element of an object of the same kind (catalog
//! paths start at the root, so this is the same rename; a Table row is
//! wrapped after the head's column definitions reduced to where the name
//! column is, so its name cell is found as in the whole body); separators
//! and the tail pass byte for byte, except that an element the rewriter
//! drops (a hidden object, `Slot::DropHidden`/`Slot::TableRows`) takes its
//! separating comma with it. Parsing proper stays serde_json's, inside the
//! rewriter. A body without such an array is buffered (up to a limit) and
//! renamed whole at the end.

use bytes::BytesMut;
use serde::Deserialize;

use super::error::RewriteError;
use super::json::{name_column, JsonRewriter};
use split::State;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Before the array: collecting the head.
    Head,
    /// Inside the array, between elements.
    Between,
    /// Inside an element.
    Element,
    /// After the array: the tail, passed on at the end.
    Tail,
    /// Not streamable: everything buffered, renamed whole at the end.
    Whole,
}

#[derive(Deserialize, Default)]
struct TypeMeta {
    #[serde(default, rename = "apiVersion")]
    api_version: String,
    #[serde(default)]
    kind: String,
    /// A Table's column definitions (before its rows, as Kubernetes writes
    /// them): where the name cell is.
    #[serde(default, rename = "columnDefinitions")]
    columns: Option<Vec<Column>>,
}

#[derive(Deserialize, Default)]
struct Column {
    #[serde(default)]
    format: Option<String>,
    #[serde(default)]
    name: Option<String>,
}

/// Kinds whose array can't be renamed element by element (entries may be
/// dropped as shadowed): renamed whole.
const WHOLE_KINDS: &[&str] = &["APIGroupList", "APIGroupDiscoveryList"];

/// Renames a JSON response as it streams. Feed it chunks with the rewriter
/// to use; it returns the output that is final so far.
pub struct ListStream {
    addressed: Option<(String, &'static str)>,
    limit: usize,
    phase: Phase,
    buf: BytesMut,
    scanned: usize,
    depth: usize,
    in_string: bool,
    escaped: bool,
    string_start: usize,
    expect_key: bool,
    last_key: Option<String>,
    member: &'static str,
    type_meta: TypeMeta,
    /// What each element is wrapped in to be renamed alone: the array's
    /// member, after a Table's column definitions reduced to where the name
    /// column is.
    open: String,
    /// Separators seen since the last element, held back: an element the
    /// rewriter drops (a hidden object) takes its comma with it.
    sep: Vec<u8>,
    /// Whether an element was emitted yet.
    kept_any: bool,
}

impl ListStream {
    /// A stream; `addressed` as for [`Context::addressed`](crate::rewrite::codec::Context::addressed);
    /// `limit` bounds what is ever buffered (one element, or a whole
    /// non-list body).
    pub fn new(addressed: Option<(String, &'static str)>, limit: usize) -> Self {
        ListStream {
            addressed,
            limit,
            phase: Phase::Head,
            buf: BytesMut::new(),
            scanned: 0,
            depth: 0,
            in_string: false,
            escaped: false,
            string_start: 0,
            expect_key: false,
            last_key: None,
            member: "items",
            type_meta: TypeMeta::default(),
            open: String::new(),
            sep: Vec::new(),
            kept_any: false,
        }
    }

    /// Bytes held now (the element being read, held-back separators).
    pub fn held(&self) -> usize {
        self.buf.len() + self.sep.len()
    }

    /// Feeds bytes; returns the output that is final so far.
    pub fn feed(&mut self, rw: &JsonRewriter<'_>, data: &[u8]) -> Result<Vec<u8>, RewriteError> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        while self.scanned < self.buf.len() {
            if self.phase == Phase::Element {
                let Some(end) = self.element_end() else {
                    break;
                };
                let elem = self.buf.split_to(end);
                self.scanned = 0;
                let renamed = self.element(rw, &elem)?;
                if let Element::Dropped = renamed {
                    // With the comma before it.
                    self.sep.clear();
                } else {
                    if !self.kept_any {
                        // Elements before it were dropped: no comma.
                        self.sep.retain(|c| *c != b',');
                    }
                    out.append(&mut self.sep);
                    match renamed {
                        Element::Renamed(r, kept) => out.extend_from_slice(&r[kept]),
                        _ => out.extend_from_slice(&elem),
                    }
                    self.kept_any = true;
                }
                self.phase = Phase::Between;
                continue;
            }
            let b = self.buf[self.scanned];
            let at = self.scanned;
            self.scanned += 1;
            match self.phase {
                Phase::Whole | Phase::Tail => {
                    self.scanned = self.buf.len();
                }
                Phase::Head => self.head_byte(rw, b, at, &mut out)?,
                Phase::Between => {
                    if b == b']' || b == b',' || b.is_ascii_whitespace() {
                        let bytes = self.buf.split_to(at + 1);
                        self.scanned = 0;
                        if b == b']' {
                            out.append(&mut self.sep);
                            out.extend_from_slice(&bytes);
                            self.phase = Phase::Tail;
                        } else {
                            self.sep.extend_from_slice(&bytes);
                        }
                    } else {
                        self.phase = Phase::Element;
                        self.depth = 0;
                        self.in_string = false;
                        self.escaped = false;
                        self.scanned = at;
                    }
                }
                // Scanned above, a run at a time.
                Phase::Element => {}
            }
        }
        if self.buf.len() > self.limit {
            return Err(RewriteError::Malformed(format!(
                "a single item (or a non-list body) is larger than {} bytes",
                self.limit
            )));
        }
        Ok(out)
    }

    /// Ends the stream; returns the rest of the output.
    pub fn finish(mut self, rw: &JsonRewriter<'_>) -> Result<Vec<u8>, RewriteError> {
        let rest = std::mem::take(&mut self.buf);
        match self.phase {
            Phase::Tail => {
                // Members after the array, renamed in an object of the
                // list's kind whose array is (now) empty.
                let open = format!("{{\"{}\":[]", self.member);
                let mut doc = open.clone().into_bytes();
                doc.extend_from_slice(&rest);
                let hint = (
                    self.type_meta.api_version.as_str(),
                    self.type_meta.kind.as_str(),
                );
                let addressed = self.addressed.as_ref().map(|(g, k)| (g.as_str(), *k));
                Ok(match rw.rewrite_bytes_with(&doc, Some(hint), addressed)? {
                    Some(r) => r[open.len()..].to_vec(),
                    None => rest.to_vec(),
                })
            }
            Phase::Whole | Phase::Head => {
                let addressed = self.addressed.as_ref().map(|(g, k)| (g.as_str(), *k));
                Ok(rw
                    .rewrite_bytes_with(&rest, None, addressed)?
                    .unwrap_or_else(|| rest.to_vec()))
            }
            Phase::Between | Phase::Element => Err(RewriteError::Malformed(
                "the list ended inside its items".into(),
            )),
        }
    }

    /// Scans one byte of the head; at `"items": [` (or `"rows": [`) at the
    /// top level, renames and emits the head.
    fn head_byte(
        &mut self,
        rw: &JsonRewriter<'_>,
        b: u8,
        at: usize,
        out: &mut Vec<u8>,
    ) -> Result<(), RewriteError> {
        if self.in_string {
            if self.string_ends(b) && self.depth == 1 && self.expect_key {
                let raw = &self.buf[self.string_start..=at];
                self.last_key = serde_json::from_slice::<String>(raw).ok();
                self.expect_key = false;
            }
            return Ok(());
        }
        match b {
            b'"' => {
                self.in_string = true;
                self.string_start = at;
                if self.depth == 1 && !self.expect_key {
                    // A string value: the key it belonged to is done.
                    self.last_key = None;
                }
            }
            b'[' if self.depth == 1
                && matches!(self.last_key.as_deref(), Some("items") | Some("rows")) =>
            {
                let mut doc = self.buf[..=at].to_vec();
                doc.extend_from_slice(b"]}");
                self.type_meta = serde_json::from_slice(&doc).unwrap_or_default();
                // Without its type first (Kubernetes always writes it first),
                // elements can't be renamed alone.
                if self.type_meta.kind.is_empty()
                    || WHOLE_KINDS.contains(&self.type_meta.kind.as_str())
                {
                    self.phase = Phase::Whole;
                    return Ok(());
                }
                self.member = if self.last_key.as_deref() == Some("rows") {
                    "rows"
                } else {
                    "items"
                };
                self.open = match (&self.type_meta.columns, self.member) {
                    (Some(cols), "rows") => {
                        // What each row is renamed by: the column naming
                        // its object, and a binding's `Role` column.
                        let mut defs: Vec<&str> = Vec::new();
                        let columns = cols
                            .iter()
                            .map(|c| (c.format.as_deref(), c.name.as_deref()));
                        let role = cols.iter().position(|c| c.name.as_deref() == Some("Role"));
                        let name = name_column(columns);
                        let len = [name, role].iter().flatten().max().map_or(0, |m| m + 1);
                        defs.resize(len, "{}");
                        if let Some(i) = role {
                            defs[i] = r#"{"name":"Role"}"#;
                        }
                        if let Some(i) = name {
                            defs[i] = r#"{"format":"name"}"#;
                        }
                        format!("{{\"columnDefinitions\":[{}],\"rows\":[", defs.join(","))
                    }
                    _ => format!("{{\"{}\":[", self.member),
                };
                let addressed = self.addressed.as_ref().map(|(g, k)| (g.as_str(), *k));
                let mut head = rw.rewrite_bytes_with(&doc, None, addressed)?.unwrap_or(doc);
                head.truncate(head.len() - 2);
                out.extend_from_slice(&head);
                let _ = self.buf.split_to(at + 1);
                self.scanned = 0;
                self.depth = 0;
                self.phase = Phase::Between;
            }
            b'{' | b'[' => {
                if self.depth == 0 && b == b'[' {
                    self.phase = Phase::Whole;
                    return Ok(());
                }
                self.depth += 1;
                if self.depth == 1 {
                    self.expect_key = true;
                } else if self.depth == 2 {
                    self.last_key = None;
                }
            }
            b'}' | b']' => self.depth = self.depth.saturating_sub(1),
            b',' if self.depth == 1 => {
                self.expect_key = true;
                self.last_key = None;
            }
            _ if b.is_ascii_whitespace() || b == b':' || b == b',' => {}
            _ if self.depth == 0 => self.phase = Phase::Whole,
            _ => {}
        }
        Ok(())
    }

    /// One byte inside a JSON string: true when it is the closing quote.
    fn string_ends(&mut self, b: u8) -> bool {
        if self.escaped {
            self.escaped = false;
        } else if b == b'\\' {
            self.escaped = true;
        } else if b == b'"' {
            self.in_string = false;
            return true;
        }
        false
    }

    /// Scans the element being read from `scanned` on: one past its last
    /// byte (a scalar ends before its delimiter, which is scanned again
    /// between elements), or `None` when the buffer ends first (the
    /// state is kept for the next chunk). See `split.rs`.
    fn element_end(&mut self) -> Option<usize> {
        let mut state = State {
            depth: self.depth,
            in_string: self.in_string,
            escaped: self.escaped,
        };
        let end = split::element_end(&self.buf, &mut self.scanned, &mut state);
        (self.depth, self.in_string, self.escaped) = (state.depth, state.in_string, state.escaped);
        end
    }

    /// Renames one element as the only element of an object of its kind.
    fn element(&self, rw: &JsonRewriter<'_>, elem: &[u8]) -> Result<Element, RewriteError> {
        let hint = (
            self.type_meta.api_version.as_str(),
            self.type_meta.kind.as_str(),
        );
        let addressed = self.addressed.as_ref().map(|(g, k)| (g.as_str(), *k));
        // The header names the list's kind; an item may name none.
        if !rw.may_contain(elem)
            && !rw.names_involved(elem, Some(hint), addressed)
            && !rw.names_involved(self.open.as_bytes(), None, None)
        {
            return Ok(Element::Same);
        }
        let open = &self.open;
        let mut doc = Vec::with_capacity(open.len() + elem.len() + 2);
        doc.extend_from_slice(open.as_bytes());
        doc.extend_from_slice(elem);
        doc.extend_from_slice(b"]}");
        Ok(match rw.rewrite_bytes_with(&doc, Some(hint), addressed)? {
            // The only element deleted: `[]`.
            Some(r) if r.len() == open.len() + 2 => Element::Dropped,
            // Sliced where it is copied out, not moved here.
            Some(r) => match r.len().checked_sub(2).filter(|end| *end >= open.len()) {
                Some(end) => Element::Renamed(r, open.len()..end),
                None => {
                    return Err(RewriteError::Malformed(
                        "a renamed item lost the object it was renamed in".into(),
                    ))
                }
            },
            None => Element::Same,
        })
    }
}

/// What became of one element.
enum Element {
    /// Unchanged: its bytes pass as they came.
    Same,
    /// Renamed: these bytes, of which the range is the element (the rest
    /// the object it was renamed in).
    Renamed(Vec<u8>, std::ops::Range<usize>),
    /// Dropped (a hidden object), with its separating comma.
    Dropped,
}

/// The whole input through a [`ListStream`] in chunks of `chunk` bytes (for
/// tests and benchmarks).
pub fn rewrite_in_chunks(
    rw: &JsonRewriter<'_>,
    input: &[u8],
    chunk: usize,
) -> Result<Vec<u8>, RewriteError> {
    let mut s = ListStream::new(None, usize::MAX);
    let mut out = Vec::with_capacity(input.len());
    for c in input.chunks(chunk.max(1)) {
        out.extend(s.feed(rw, c)?);
    }
    out.extend(s.finish(rw)?);
    Ok(out)
}

mod split;
#[cfg(test)]
mod tests;
