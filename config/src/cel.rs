//! CEL expressions (a CRD's `x-kubernetes-validations` rules, admission
//! policies' and webhooks' expressions): the string literals that are
//! exactly a mapped name, renamed; every other byte kept.
//!
//! The expression is parsed by CEL's own grammar (the `cel` crate's
//! parser), which records where each literal token starts and stops. Only
//! those bytes are replaced, by a literal of the same quoting written
//! anew: an expression is never edited by searching its text, so
//! `'foo.example.io' + x`, a comment or an identifier that merely spells a
//! name is never touched. A literal that is not exactly a name
//! (`'foo.example.io/'`, `'x.' + group`) is left, and `regroup render` /
//! `regroup check -f` warn about it (`mentions`).

use cel::common::ast::{EntryExpr, Expr, IdedExpr, LiteralValue};
use cel::parser::Parser;

/// One string literal of an expression: its token's byte range in the
/// source (quotes and any `r` prefix included) and its value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Literal {
    /// First byte of the token.
    pub start: usize,
    /// One past its last byte.
    pub end: usize,
    /// The string it denotes (escapes decoded).
    pub value: String,
}

/// Why an expression's string literals can't be found. The expression
/// itself is never quoted: it is the user's data and must not reach a log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum CelError {
    /// CEL's parser refused it; only where (the parser's message quotes
    /// the expression).
    #[error("not a CEL expression (parse error at line {line}, column {column})")]
    Parse {
        /// The line of the parser's first error.
        line: isize,
        /// Its column.
        column: isize,
    },
    /// The parser placed a literal past the expression's end or inside a
    /// character.
    #[error("a string literal at {0} is outside the expression")]
    Outside(usize),
    /// The parser placed a literal where the bytes are no string token.
    #[error("the parser placed a string literal at {start}..{end}, where there is none")]
    NoLiteral {
        /// First byte.
        start: usize,
        /// One past the last.
        end: usize,
    },
}

/// Every string literal of `src`, in source order. An error says why
/// `src` is not CEL.
pub fn string_literals(src: &str) -> Result<Vec<Literal>, CelError> {
    let (expr, info) = Parser::new().parse_with_source_info(src).map_err(|e| {
        let (line, column) = e.errors.first().map_or((0, 0), |e| e.pos);
        CelError::Parse { line, column }
    })?;
    let mut found = Vec::new();
    walk(&expr, &mut |id, value| {
        if let Some((start, stop)) = info.offset_for(id) {
            found.push((start as usize, stop as usize, value.to_owned()));
        }
    });
    // Offsets are of bytes, the last one included (ANTLR's token stop).
    let mut out: Vec<Literal> = Vec::new();
    for (s, stop, value) in found {
        let e = stop + 1;
        if e > src.len() || !src.is_char_boundary(s) || !src.is_char_boundary(e) {
            return Err(CelError::Outside(s));
        }
        if split_token(&src[s..e]).is_none() {
            return Err(CelError::NoLiteral { start: s, end: e });
        }
        // Macros (`has`, `all`, `exists`) may copy a literal: once each.
        if !out.iter().any(|l| l.start == s) {
            out.push(Literal {
                start: s,
                end: e,
                value,
            });
        }
    }
    out.sort_by_key(|l| l.start);
    Ok(out)
}

/// Calls `f` with the id and value of every string literal under `e`.
fn walk(e: &IdedExpr, f: &mut impl FnMut(u64, &str)) {
    match &e.expr {
        Expr::Literal(LiteralValue::String(s)) => f(e.id, s.inner()),
        Expr::Literal(_) | Expr::Ident(_) | Expr::Unspecified => {}
        Expr::Call(c) => {
            if let Some(t) = &c.target {
                walk(t, f);
            }
            for a in &c.args {
                walk(a, f);
            }
        }
        Expr::Comprehension(c) => {
            for x in [
                &c.iter_range,
                &c.accu_init,
                &c.loop_cond,
                &c.loop_step,
                &c.result,
            ] {
                walk(x, f);
            }
        }
        Expr::List(l) => l.elements.iter().for_each(|x| walk(x, f)),
        Expr::Select(s) => walk(&s.operand, f),
        Expr::Map(m) => m.entries.iter().for_each(|x| entry(x, f)),
        Expr::Struct(s) => s.entries.iter().for_each(|x| entry(x, f)),
    }
}

fn entry(e: &cel::common::ast::IdedEntryExpr, f: &mut impl FnMut(u64, &str)) {
    match &e.expr {
        EntryExpr::StructField(s) => walk(&s.value, f),
        EntryExpr::MapEntry(m) => {
            walk(&m.key, f);
            walk(&m.value, f);
        }
    }
}

/// A string literal token's prefix (`r`, `R` or nothing) and delimiter
/// (`'`, `"`, `'''`, `"""`), or `None` when `tok` is not one.
fn split_token(tok: &str) -> Option<(&str, &str)> {
    let raw = tok.starts_with(['r', 'R']);
    let prefix = if raw { &tok[..1] } else { "" };
    let body = &tok[prefix.len()..];
    for delim in ["'''", "\"\"\"", "'", "\""] {
        if body.len() >= 2 * delim.len() && body.starts_with(delim) && body.ends_with(delim) {
            return Some((prefix, delim));
        }
    }
    None
}

/// `value` as a literal quoted like `tok` (same delimiter; raw when `tok`
/// was raw and `value` needs no escape).
fn requote(tok: &str, value: &str) -> String {
    let (prefix, delim) = split_token(tok).unwrap_or(("", "'"));
    let plain = !value.contains(['\\', '\n', '\r']) && !value.contains(&delim[..1]);
    if plain {
        return format!("{prefix}{delim}{value}{delim}");
    }
    let mut out = String::with_capacity(value.len() + 8);
    for c in value.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            c if delim.starts_with(c) => {
                out.push('\\');
                out.push(c);
            }
            c => out.push(c),
        }
    }
    format!("{delim}{out}{delim}")
}

/// `src` with each string literal `rename` maps replaced by a literal of
/// the new value. `Ok(None)`: no literal renamed.
pub fn rename_literals(
    src: &str,
    rename: impl Fn(&str) -> Option<String>,
) -> Result<Option<String>, CelError> {
    let mut out = String::with_capacity(src.len() + 32);
    let mut at = 0;
    for l in string_literals(src)? {
        if let Some(new) = rename(&l.value) {
            out.push_str(&src[at..l.start]);
            out.push_str(&requote(&src[l.start..l.end], &new));
            at = l.end;
        }
    }
    if at == 0 {
        return Ok(None);
    }
    out.push_str(&src[at..]);
    Ok(Some(out))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn upper(s: &str) -> Option<String> {
        (s == "foo.example.io").then(|| "foo.team-b.example.com".to_owned())
    }

    #[test]
    fn literals_are_found_where_the_parser_puts_them() {
        let src = "self.group == 'foo.example.io' && self.kind in [\"A\", r'B']";
        let ls = string_literals(src).unwrap();
        let texts: Vec<&str> = ls.iter().map(|l| &src[l.start..l.end]).collect();
        assert_eq!(texts, ["'foo.example.io'", "\"A\"", "r'B'"]);
        assert_eq!(ls[0].value, "foo.example.io");
        // Offsets in bytes after a multi-byte character.
        let src = "'é' == x && y == 'foo.example.io'";
        let ls = string_literals(src).unwrap();
        assert_eq!(&src[ls[1].start..ls[1].end], "'foo.example.io'");
    }

    #[test]
    fn only_whole_literals_are_renamed() {
        let cases = [
            (
                "self.group == 'foo.example.io'",
                Some("self.group == 'foo.team-b.example.com'"),
            ),
            (
                "self.group == \"foo.example.io\"",
                Some("self.group == \"foo.team-b.example.com\""),
            ),
            (
                "self.group in [r'foo.example.io', '''foo.example.io''']",
                Some("self.group in [r'foo.team-b.example.com', '''foo.team-b.example.com''']"),
            ),
            (
                "has(self.x) && self.all(g, g == 'foo.example.io')",
                Some("has(self.x) && self.all(g, g == 'foo.team-b.example.com')"),
            ),
            (
                "{'foo.example.io': 1}['foo.example.io'] == 1",
                Some("{'foo.team-b.example.com': 1}['foo.team-b.example.com'] == 1"),
            ),
            // Escapes decoded: the value is the name.
            (
                "x == 'foo\\x2eexample.io'",
                Some("x == 'foo.team-b.example.com'"),
            ),
            // Mentions that are not a whole literal: left.
            ("self.group == 'foo.example.io/v1'", None),
            ("self.group.endsWith('.foo.example.io')", None),
            ("foo.example.io == 1", None),
            ("'foo.' + 'example.io' == x", None),
        ];
        for (src, want) in cases {
            assert_eq!(
                rename_literals(src, upper).unwrap().as_deref(),
                want,
                "{src}"
            );
        }
    }

    #[test]
    fn not_cel_is_an_error() {
        assert!(rename_literals("self.group == 'foo.example.io", upper).is_err());
        assert!(rename_literals("a ==", upper).is_err());
    }

    #[test]
    fn requoting_escapes_what_the_delimiter_needs() {
        assert_eq!(requote("'x'", "a'b"), "'a\\'b'");
        assert_eq!(requote("r\"x\"", "a\\b"), "\"a\\\\b\"");
        assert_eq!(requote("\"\"\"x\"\"\"", "ab"), "\"\"\"ab\"\"\"");
    }
    use proptest::prelude::*;

    fn map() -> crate::GroupMap {
        crate::load("rules:\n  - {from: foo.example.io, to: foo.team-b.example.com}\nmetadata:\n  prefixes:\n    - {from: kopf.zalando.org, to: kopf.team-b.example.com}\n")
            .unwrap()
            .map
    }

    /// A piece of CEL: literals of mapped and unmapped names in each
    /// quoting, identifiers.
    fn piece() -> impl Strategy<Value = String> {
        let name = prop_oneof![
            Just("foo.example.io"),
            Just("foo.example.io/v1"),
            Just("x.foo.example.io"),
            Just("kopf.zalando.org/a"),
            Just("kopf.team-b.example.com/a"),
            Just("foo.example.io/"),
            Just("apps"),
            Just("é"),
        ];
        let quote = prop_oneof![Just("'"), Just("\""), Just("r'"), Just("'''")];
        prop_oneof![
            (name, quote).prop_map(|(n, q)| {
                let close = q.trim_start_matches('r');
                format!("{q}{n}{close}")
            }),
            Just("self.group".to_string()),
            Just("x".to_string()),
        ]
    }

    fn expr() -> impl Strategy<Value = String> {
        let op = prop_oneof![Just(" == "), Just(" + "), Just(" != "), Just(" || ")];
        (piece(), proptest::collection::vec((op, piece()), 0..4)).prop_map(|(first, rest)| {
            let mut s = first;
            for (o, p) in rest {
                s.push_str(o);
                s.push_str(&p);
            }
            s
        })
    }

    proptest! {
        /// What the app writes, renamed to the cluster and back, is what it
        /// wrote. (Groups, as everywhere: the app does not write the
        /// cluster's group, and the app's own group on the cluster's side
        /// is a shadowed one, not renamed. Metadata keys are a bijection.)
        #[test]
        fn cel_round_trips(e in expr()) {
            let m = map();
            let d = crate::Direction::ToCluster;
            let there = m.map_cel(&e, d).unwrap().unwrap_or_else(|| e.clone());
            let back = m.map_cel(&there, d.flip()).unwrap().unwrap_or_else(|| there.clone());
            prop_assert_eq!(&back, &e);
        }

        /// Any text naming a mapped group: renamed or refused, never a panic.
        #[test]
        fn arbitrary_text_never_panics(a in "[ -~]{0,20}", b in "[ -~]{0,20}") {
            let e = format!("{a}'foo.example.io'{b}");
            let _ = map().map_cel(&e, crate::Direction::ToCluster);
        }
    }
}
