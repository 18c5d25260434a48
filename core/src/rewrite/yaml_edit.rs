//! YAML renamed in place: the document is read twice, once into JSON (which
//! the JSON codec renames, telling which strings change) and once as parser
//! events with byte spans (telling where each scalar is). Only the scalars
//! whose value changed are rewritten, in their own quoting style; every
//! other byte (comments, quoting, flow style, numbers like `0644`, `y`/`n`)
//! stays as it was.

use granit_parser::{Event, Parser, ScalarStyle};
use serde_json::Value as Json;

use super::error::RewriteError;

/// One step of a path into a document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Seg {
    Key(String),
    Index(usize),
}

/// A scalar of the text: its path, byte range and style.
struct Scalar {
    path: Vec<Seg>,
    start: usize,
    end: usize,
    style: ScalarStyle,
}

/// A document of the text: its byte range and scalars.
pub(crate) struct Document {
    pub start: usize,
    pub end: usize,
    scalars: Vec<Scalar>,
    /// The mapping keys that are scalars, each with the path of the value
    /// it names (a label key: `metadata.labels.KEY`).
    keys: Vec<Scalar>,
}

/// One string a rename changed: a value, or a mapping key (a metadata
/// rule's label or annotation key), by the path of its value in the
/// original document.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Change {
    pub path: Vec<Seg>,
    pub new: String,
    pub key: bool,
}

fn malformed(e: impl std::fmt::Display) -> RewriteError {
    RewriteError::Malformed(format!("not valid YAML: {e}"))
}

/// Where a collection being read is: the next key or index.
enum Frame {
    Map { key: Option<String> },
    Seq { next: usize },
}

/// The documents of `text`, with every scalar value's path and span.
pub(crate) fn documents(text: &str) -> Result<Vec<Document>, RewriteError> {
    let byte = |m: granit_parser::Marker| -> usize {
        m.byte_offset().unwrap_or_else(|| {
            text.char_indices()
                .nth(m.index())
                .map_or(text.len(), |(b, _)| b)
        })
    };
    let mut docs = Vec::new();
    let mut stack: Vec<Frame> = Vec::new();
    let mut path: Vec<Seg> = Vec::new();
    let mut current: Option<Document> = None;
    for ev in Parser::new_from_str(text) {
        let (ev, span) = ev.map_err(malformed)?;
        // The path of a node starting here, and what it does to its parent.
        let enter = |stack: &mut Vec<Frame>, path: &mut Vec<Seg>| -> Option<bool> {
            match stack.last_mut() {
                None => Some(false),
                Some(Frame::Seq { next }) => {
                    path.push(Seg::Index(*next));
                    *next += 1;
                    Some(true)
                }
                Some(Frame::Map { key: Some(k) }) => {
                    path.push(Seg::Key(std::mem::take(k)));
                    if let Some(Frame::Map { key }) = stack.last_mut() {
                        *key = None;
                    }
                    Some(true)
                }
                // A key: not a value node.
                Some(Frame::Map { key: None }) => None,
            }
        };
        match ev {
            Event::DocumentStart(..) => {
                current = Some(Document {
                    start: byte(span.start),
                    end: text.len(),
                    scalars: Vec::new(),
                    keys: Vec::new(),
                });
            }
            Event::DocumentEnd => {
                if let Some(mut d) = current.take() {
                    d.end = byte(span.end).max(d.start);
                    docs.push(d);
                }
                stack.clear();
                path.clear();
            }
            Event::Scalar(value, style, ..) => match enter(&mut stack, &mut path) {
                None => {
                    if let Some(d) = current.as_mut() {
                        let mut at = path.clone();
                        at.push(Seg::Key(value.to_string()));
                        d.keys.push(Scalar {
                            path: at,
                            start: byte(span.start),
                            end: byte(span.end),
                            style,
                        });
                    }
                    if let Some(Frame::Map { key }) = stack.last_mut() {
                        *key = Some(value.into_owned());
                    }
                }
                Some(pushed) => {
                    if let Some(d) = current.as_mut() {
                        d.scalars.push(Scalar {
                            path: path.clone(),
                            start: byte(span.start),
                            end: byte(span.end),
                            style,
                        });
                    }
                    if pushed {
                        path.pop();
                    }
                }
            },
            Event::MappingStart(..) | Event::SequenceStart(..) => {
                let is_map = matches!(ev, Event::MappingStart(..));
                match enter(&mut stack, &mut path) {
                    // A collection as a key: not renamed; its scalars are
                    // not values either.
                    None => return Err(malformed("a collection used as a mapping key")),
                    Some(pushed) => {
                        if !pushed {
                            path.clear();
                        }
                    }
                }
                stack.push(if is_map {
                    Frame::Map { key: None }
                } else {
                    Frame::Seq { next: 0 }
                });
            }
            Event::MappingEnd | Event::SequenceEnd => {
                stack.pop();
                if !stack.is_empty() {
                    path.pop();
                }
            }
            Event::Alias(..) => {
                if let Some(pushed) = enter(&mut stack, &mut path) {
                    if pushed {
                        path.pop();
                    }
                } else if let Some(Frame::Map { key }) = stack.last_mut() {
                    *key = Some(String::new());
                }
            }
            _ => {}
        }
    }
    Ok(docs)
}

/// The strings that differ between `before` and `after` (same shape), by
/// path; `None` when the shape changed (an entry dropped or added). A
/// mapping key renamed in place (the JSON codec splices, so a renamed key
/// keeps its position) is a change of that key.
pub(crate) fn changed_strings(before: &Json, after: &Json) -> Option<Vec<Change>> {
    fn walk(b: &Json, a: &Json, path: &mut Vec<Seg>, out: &mut Vec<Change>) -> bool {
        match (b, a) {
            (Json::String(x), Json::String(y)) => {
                if x != y {
                    out.push(Change {
                        path: path.clone(),
                        new: y.clone(),
                        key: false,
                    });
                }
                true
            }
            (Json::Array(x), Json::Array(y)) if x.len() == y.len() => {
                x.iter().zip(y).enumerate().all(|(i, (b, a))| {
                    path.push(Seg::Index(i));
                    let ok = walk(b, a, path, out);
                    path.pop();
                    ok
                })
            }
            (Json::Object(x), Json::Object(y)) if x.len() == y.len() => {
                x.iter().zip(y).all(|((k, b), (ka, a))| {
                    path.push(Seg::Key(k.clone()));
                    if k != ka {
                        // Renamed in place, unless the key also exists
                        // elsewhere in the map (then entries moved).
                        if y.contains_key(k) || x.contains_key(ka) {
                            path.pop();
                            return false;
                        }
                        out.push(Change {
                            path: path.clone(),
                            new: ka.clone(),
                            key: true,
                        });
                    }
                    let ok = walk(b, a, path, out);
                    path.pop();
                    ok
                })
            }
            (x, y) => x == y,
        }
    }
    let mut out = Vec::new();
    walk(before, after, &mut Vec::new(), &mut out).then_some(out)
}

/// Plain scalars YAML 1.1 (and so many Kubernetes tools) reads as booleans
/// or null.
const YAML_KEYWORDS: &[&str] = &["y", "n", "yes", "no", "on", "off", "true", "false", "null"];

/// `value` written as a scalar of `style`, or `None` when that style can't
/// hold it as it is (the caller then writes the document anew).
fn scalar_text(value: &str, style: ScalarStyle) -> Option<String> {
    // `:` followed by a space (impossible here: no space is allowed) or
    // ending the scalar would start a mapping; inside is plain text
    // (`team1-cert-manager:leaderelection`).
    let plain_safe = !value.is_empty()
        && value.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'.' | b'/' | b'-' | b'_' | b':')
        })
        && !value.ends_with(':')
        // A letter first: never a number (`1e3`, `0x1F`, `.inf`).
        && value.bytes().next().is_some_and(|b| b.is_ascii_alphabetic())
        // Nor a YAML 1.1 or 1.2 keyword (a group has a dot, a renamed
        // object name rarely is one, but `names:` could make `y` of `y`).
        && !YAML_KEYWORDS.iter().any(|k| k.eq_ignore_ascii_case(value));
    match style {
        ScalarStyle::Plain if plain_safe => Some(value.to_owned()),
        ScalarStyle::SingleQuoted => Some(format!("'{}'", value.replace('\'', "''"))),
        // A JSON string is a valid YAML double-quoted scalar.
        ScalarStyle::DoubleQuoted => Some(serde_json::to_string(value).expect("strings serialize")),
        _ => None,
    }
}

/// The edits that put `changes` into document `doc` of `text`, as
/// (start, end, replacement); `None` when one can't be made in place.
pub(crate) fn edits(doc: &Document, changes: &[Change]) -> Option<Vec<(usize, usize, String)>> {
    changes
        .iter()
        .map(|c| {
            let among = if c.key { &doc.keys } else { &doc.scalars };
            let s = among.iter().find(|s| s.path == c.path)?;
            Some((s.start, s.end, scalar_text(&c.new, s.style)?))
        })
        .collect()
}

/// `text` with the edits applied (they never overlap: one per scalar).
pub(crate) fn apply(text: &str, mut edits: Vec<(usize, usize, String)>) -> String {
    edits.sort_by_key(|e| e.0);
    let mut out = String::with_capacity(text.len() + 64);
    let mut at = 0;
    for (start, end, new) in edits {
        out.push_str(&text[at..start]);
        out.push_str(&new);
        at = end;
    }
    out.push_str(&text[at..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scalars_are_found_with_their_paths_and_spans() {
        let text = "a: x\nb:\n  - 'y'\n  - {c: \"z\"}\n---\nd: w # note\n";
        let docs = documents(text).unwrap();
        assert_eq!(docs.len(), 2);
        let spans: Vec<(Vec<Seg>, &str)> = docs
            .iter()
            .flat_map(|d| d.scalars.iter())
            .map(|s| (s.path.clone(), &text[s.start..s.end]))
            .collect();
        let k = |s: &str| Seg::Key(s.into());
        assert_eq!(
            spans,
            vec![
                (vec![k("a")], "x"),
                (vec![k("b"), Seg::Index(0)], "'y'"),
                (vec![k("b"), Seg::Index(1), k("c")], "\"z\""),
                (vec![k("d")], "w"),
            ]
        );
    }

    #[test]
    fn only_changed_strings_are_edited_in_their_style() {
        let text = "kind: Role # keep\nx: 0644\nrules:\n- apiGroups: [\"g.example.io\", 'h.example.io', i.example.io]\n  n: n\n";
        let before: Json = serde_json::json!({"kind":"Role","x":644,"rules":[{"apiGroups":["g.example.io","h.example.io","i.example.io"],"n":"n"}]});
        let mut after = before.clone();
        for (i, g) in ["g.team.io", "h.team.io", "i.team.io"].iter().enumerate() {
            after["rules"][0]["apiGroups"][i] = Json::String((*g).into());
        }
        let changes = changed_strings(&before, &after).unwrap();
        let docs = documents(text).unwrap();
        let e = edits(&docs[0], &changes).unwrap();
        assert_eq!(
            apply(text, e),
            "kind: Role # keep\nx: 0644\nrules:\n- apiGroups: [\"g.team.io\", 'h.team.io', i.team.io]\n  n: n\n"
        );
    }

    #[test]
    fn a_renamed_key_is_edited_in_place_in_its_style() {
        let text = "metadata:\n  labels:\n    # the operator's\n    cert-manager.io/x: 'y'\n    \"cert-manager.io/z\": on\n    app: a\nmode: 0644\n";
        let before: Json = serde_json::json!({"metadata":{"labels":{"cert-manager.io/x":"y","cert-manager.io/z":"on","app":"a"}},"mode":644});
        let after: Json = serde_json::json!({"metadata":{"labels":{"cm.team.io/x":"y","cm.team.io/z":"on","app":"a"}},"mode":644});
        let changes = changed_strings(&before, &after).unwrap();
        assert_eq!(changes.len(), 2);
        let docs = documents(text).unwrap();
        let e = edits(&docs[0], &changes).unwrap();
        assert_eq!(
            apply(text, e),
            "metadata:\n  labels:\n    # the operator's\n    cm.team.io/x: 'y'\n    \"cm.team.io/z\": on\n    app: a\nmode: 0644\n"
        );
        // Entries that moved (a key renamed onto one that exists): written anew.
        let moved: Json = serde_json::json!({"metadata":{"labels":{"app":"y","cert-manager.io/x":"on","cm.team.io/z":"a"}},"mode":644});
        assert!(changed_strings(&before, &moved).is_none());
    }

    #[test]
    fn a_shape_change_or_an_unplain_value_falls_back() {
        let b = serde_json::json!({"a": ["x", "y"]});
        assert!(changed_strings(&b, &serde_json::json!({"a": ["x"]})).is_none());
        assert_eq!(scalar_text("true", ScalarStyle::Plain), None);
        assert_eq!(scalar_text("Off", ScalarStyle::Plain), None);
        assert_eq!(scalar_text("y", ScalarStyle::Plain), None);
        // A renamed object name (`names:`) stays plain.
        assert_eq!(
            scalar_text("team1-foo-viewer", ScalarStyle::Plain).as_deref(),
            Some("team1-foo-viewer")
        );
        assert_eq!(scalar_text("1.2", ScalarStyle::Plain), None);
        assert_eq!(scalar_text("a: b", ScalarStyle::Plain), None);
        assert_eq!(scalar_text("a:", ScalarStyle::Plain), None);
        assert_eq!(
            scalar_text("t1-cert-manager:leaderelection", ScalarStyle::Plain).as_deref(),
            Some("t1-cert-manager:leaderelection")
        );
        assert_eq!(
            scalar_text("it's", ScalarStyle::SingleQuoted).as_deref(),
            Some("'it''s'")
        );
    }
}
