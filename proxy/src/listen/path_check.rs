//! Paths regroup refuses before routing: the path it routes and renames
//! must be the path every later hop sees.
//!
//! A path with a dot segment (`..`, `.`, also percent-encoded: `%2e%2e`,
//! `.%2E`), an empty segment (`//apis/...`, `/api//v1`, a trailing `//`)
//! or an encoded slash (`%2F`) can be read as another path by a hop that
//! normalizes it (a load balancer, an aggregator, a later Go `ServeMux`,
//! which cleans paths and redirects), while regroup would have routed and
//! renamed it as written: `/api/v1/../../apis/<app group>/...` would reach
//! the cluster's group of that name unrenamed, i.e. another copy's objects.
//! kube-apiserver itself never needs them (client-go and kubectl never
//! send them), so regroup answers 400 rather than normalize. One trailing
//! slash (`/apis/`) is an empty last segment and allowed, as `/` is.

use std::borrow::Cow;

use percent_encoding::percent_decode;

/// Why a path is refused, for the Status message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathProblem {
    /// Not an origin-form path (`*`, empty).
    NotAbsolute,
    /// A `.` or `..` segment, possibly percent-encoded.
    DotSegment,
    /// `//` somewhere (an empty segment other than a single trailing one).
    EmptySegment,
    /// `%2F`: a slash inside a segment.
    EncodedSlash,
}

impl PathProblem {
    /// The Status message.
    pub fn message(self) -> &'static str {
        match self {
            PathProblem::NotAbsolute => "the request path must start with /",
            PathProblem::DotSegment => {
                "the request path has a `.` or `..` segment (possibly percent-encoded); \
                 send the normalized path"
            }
            PathProblem::EmptySegment => "the request path has an empty segment (`//`)",
            PathProblem::EncodedSlash => "the request path has an encoded slash (`%2F`)",
        }
    }

    /// The metrics reason.
    pub fn reason(self) -> &'static str {
        match self {
            PathProblem::NotAbsolute => "path_not_absolute",
            PathProblem::DotSegment => "path_dot_segment",
            PathProblem::EmptySegment => "path_empty_segment",
            PathProblem::EncodedSlash => "path_encoded_slash",
        }
    }
}

/// Checks a raw (still percent-encoded) request path, without its query.
pub fn check_path(path: &str) -> Result<(), PathProblem> {
    let Some(rest) = path.strip_prefix('/') else {
        return Err(PathProblem::NotAbsolute);
    };
    if plainly_fine(rest.as_bytes()) {
        return Ok(());
    }
    check_pieces(rest)
}

/// The pieces of a path after its first slash, judged one by one.
fn check_pieces(rest: &str) -> Result<(), PathProblem> {
    // Bytes: every character that matters here is ASCII. The pieces are
    // cut as the path's other readers cut them (`kube::path::split`), and
    // the path is searched for an escape once: most have none. (A single
    // byte loop over the path, judging each segment at its slash, was
    // measured slower: docs/performance.md, "Request handling".)
    let any_escape = rest.as_bytes().contains(&b'%');
    let mut segments = crate::kube::path::split(rest).map(str::as_bytes).peekable();
    while let Some(seg) = segments.next() {
        if seg.is_empty() {
            if segments.peek().is_none() {
                continue; // `/` or one trailing slash
            }
            return Err(PathProblem::EmptySegment);
        }
        let escaped = any_escape && seg.contains(&b'%');
        if escaped
            && seg
                .windows(3)
                .any(|w| w[0] == b'%' && w[1] == b'2' && w[2].eq_ignore_ascii_case(&b'f'))
        {
            return Err(PathProblem::EncodedSlash);
        }
        // Only a segment of at most `%2e%2e`'s length can decode to a dot
        // segment; it is decoded only when it holds an escape.
        if seg.len() <= 6 {
            let dots = |s: &[u8]| s == b"." || s == b"..";
            if dots(seg) || (escaped && dots(&Cow::<[u8]>::from(percent_decode(seg)))) {
                return Err(PathProblem::DotSegment);
            }
        }
    }
    Ok(())
}

/// True when no piece of `rest` can be refused: no escape, no piece
/// starting with a dot, no empty piece before the last (no `/` or `.`
/// after a slash, the path's first included). Eight bytes a step in a
/// plain `u64`, as `kube::path::split` finds slashes: cutting the path
/// costs a search per piece, a byte loop ~14 instructions a byte. The rest
/// (an escape, a piece starting with a dot) is judged piece by piece.
fn plainly_fine(rest: &[u8]) -> bool {
    use crate::kube::path::{bytes_equal, word_at};
    // A slash before the first byte: the path's own.
    let mut carry = 0x80;
    let mut at = 0;
    while at < rest.len() {
        let w = word_at(rest, at);
        let slash = bytes_equal(w, b'/');
        // The byte after each, little-endian: one byte higher.
        let after_slash = (slash << 8) | carry;
        if bytes_equal(w, b'%') | (after_slash & (slash | bytes_equal(w, b'.'))) != 0 {
            return false;
        }
        carry = slash >> 56;
        at += 8;
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    proptest::proptest! {
        #[test]
        fn the_quick_pass_never_accepts_what_the_pieces_refuse(path in "/[/a.%2eEfF]{0,30}") {
            if plainly_fine(&path.as_bytes()[1..]) {
                proptest::prop_assert_eq!(check_pieces(&path[1..]), Ok(()));
            }
        }

        #[test]
        fn the_quick_pass_is_its_byte_by_byte_definition(path in "[/a.%]{0,30}") {
            let b = path.as_bytes();
            let refused = b.first().is_some_and(|&c| c == b'/' || c == b'.')
                || b.contains(&b'%')
                || b.windows(2).any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'));
            proptest::prop_assert_eq!(plainly_fine(b), !refused);
        }
    }

    #[test]
    fn dot_segments_plain_or_encoded_are_refused() {
        for p in [
            "/api/v1/../../apis/samplecontroller.k8s.io/v1alpha1/foos",
            "/api/v1/%2e%2e/%2E%2E/apis/samplecontroller.k8s.io/v1alpha1/foos",
            "/api/v1/.%2e/apis/x",
            "/api/v1/%2e./apis/x",
            "/apis/./samplecontroller.k8s.io",
            "/apis/%2e/x",
            "/..",
            "/apis/x/..",
        ] {
            assert_eq!(check_path(p), Err(PathProblem::DotSegment), "{p}");
        }
    }

    #[test]
    fn empty_segments_are_refused_but_one_trailing_slash_is_not() {
        for p in [
            "//apis/samplecontroller.k8s.io/v1alpha1",
            "/api//v1",
            "/apis//",
            "//",
        ] {
            assert_eq!(check_path(p), Err(PathProblem::EmptySegment), "{p}");
        }
        for p in ["/", "/apis/", "/api/v1/namespaces/"] {
            assert_eq!(check_path(p), Ok(()), "{p}");
        }
    }

    #[test]
    fn encoded_slashes_are_refused() {
        for p in [
            "/apis/samplecontroller.k8s.io%2Fv1alpha1/foos",
            "/api/v1/a%2fb",
        ] {
            assert_eq!(check_path(p), Err(PathProblem::EncodedSlash), "{p}");
        }
    }

    #[test]
    fn ordinary_kubernetes_paths_pass() {
        for p in [
            "/api/v1/namespaces/default/pods",
            "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/e2e/foos/alpha",
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/foos.samplecontroller.k8s.io",
            "/openapi/v3/apis/samplecontroller.k8s.io/v1alpha1",
            "/api/v1/namespaces/default/pods/a.b..c/log",
            "/api/v1/namespaces/default/configmaps/...x",
            "/api/v1/namespaces/default/configmaps/%2e%2e%2e",
            "/api/v1/namespaces/default/configmaps/name%20with%20space",
            "/healthz",
            "/version",
        ] {
            assert_eq!(check_path(p), Ok(()), "{p}");
        }
        assert!(plainly_fine(
            b"apis/samplecontroller.k8s.io/v1alpha1/namespaces/e2e/foos/alpha"
        ));
        assert_eq!(check_path("*"), Err(PathProblem::NotAbsolute));
        assert_eq!(check_path(""), Err(PathProblem::NotAbsolute));
    }
}
