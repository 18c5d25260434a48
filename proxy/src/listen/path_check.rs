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
/// after a slash, the path's first included). The rest (an escape, a
/// piece starting with a dot) is judged piece by piece.
fn plainly_fine(rest: &[u8]) -> bool {
    #[cfg(target_arch = "x86_64")]
    return wide::plainly_fine(rest);
    #[cfg(not(target_arch = "x86_64"))]
    return plainly_fine_words(rest);
}

/// [`plainly_fine`] eight bytes a step in a plain `u64`, as
/// `kube::path::split` finds slashes: cutting the path costs a search per
/// piece, a byte loop ~14 instructions a byte. Where SSE2 is not there
/// (it is on every x86_64), and the reference the wide pass is tested
/// against.
#[cfg_attr(target_arch = "x86_64", allow(dead_code))]
fn plainly_fine_words(rest: &[u8]) -> bool {
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

/// [`plainly_fine`] sixteen bytes a step with SSE2, part of every x86_64
/// (no detection at run time): a bit a byte for each of `/`, `%` and `.`.
/// A Kubernetes path of 40–80 bytes is three to five steps, where the
/// words took five to ten, each with more arithmetic (−0.2k instructions
/// a request, docs/performance.md "Session 33").
#[cfg(target_arch = "x86_64")]
mod wide {
    use std::arch::x86_64::*;

    pub(super) fn plainly_fine(rest: &[u8]) -> bool {
        let n = rest.len();
        if n < 16 {
            // Padded with zero bytes, none of the three.
            let mut block = [0u8; 16];
            block[..n].copy_from_slice(rest);
            return fine(&block, 1, 0);
        }
        // A slash before the first byte: the path's own.
        let mut after = 1;
        let mut at = 0;
        while at + 16 <= n {
            let (ok, slash) = judge(&rest[at..at + 16], after);
            if !ok {
                return false;
            }
            after = slash >> 15;
            at += 16;
        }
        if at == n {
            return true;
        }
        // The last bytes in a block ending at the end, overlapping what was
        // judged: only the bits of bytes not judged yet count.
        let start = n - 16;
        let after = u32::from(rest[start - 1] == b'/');
        fine(&rest[start..], after, at - start)
    }

    fn fine(block: &[u8], after: u32, skip: usize) -> bool {
        let (_, slash) = judge(block, after);
        masks(block, after, slash) >> skip == 0
    }

    /// Whether the 16 bytes of `block` hold nothing refused, and their
    /// slashes; `after`: the byte before them was a slash.
    #[inline(always)]
    fn judge(block: &[u8], after: u32) -> (bool, u32) {
        let slash = bits(block, b'/');
        (masks(block, after, slash) == 0, slash)
    }

    /// A bit for each byte of `block` that is an escape, or a slash or a
    /// dot right after a slash.
    #[inline(always)]
    fn masks(block: &[u8], after: u32, slash: u32) -> u32 {
        let after_slash = (slash << 1) | after;
        bits(block, b'%') | (after_slash & (slash | bits(block, b'.')))
    }

    /// A bit for each byte of the 16 of `block` that equals `c`.
    #[inline(always)]
    fn bits(block: &[u8], c: u8) -> u32 {
        assert!(block.len() >= 16);
        // SAFETY: SSE2 is part of x86_64; 16 bytes are there to read
        // (asserted, and the callers' blocks are 16 long, so the check
        // folds away).
        unsafe {
            let v = _mm_loadu_si128(block.as_ptr().cast());
            _mm_movemask_epi8(_mm_cmpeq_epi8(v, _mm_set1_epi8(c as i8))) as u32
        }
    }
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
        fn the_quick_pass_is_its_byte_by_byte_definition(path in "[/a.%]{0,70}") {
            let b = path.as_bytes();
            let refused = b.first().is_some_and(|&c| c == b'/' || c == b'.')
                || b.contains(&b'%')
                || b.windows(2).any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'));
            proptest::prop_assert_eq!(plainly_fine(b), !refused);
            proptest::prop_assert_eq!(plainly_fine_words(b), !refused);
        }

        #[test]
        fn the_quick_pass_sees_one_refused_byte_anywhere(
            len in 0usize..70,
            at in 0usize..70,
            bad in proptest::sample::select(vec!["%", "/.", "//"]),
        ) {
            // A plain path of `len` bytes with one refused sequence put at
            // `at`: every block boundary and the overlapping last block.
            let mut p: Vec<u8> = (0..len).map(|i| if i % 5 == 4 { b'/' } else { b'a' }).collect();
            let at = at.min(p.len());
            p.splice(at..at, bad.bytes());
            let refused = p.first().is_some_and(|&c| c == b'/' || c == b'.')
                || p.contains(&b'%')
                || p.windows(2).any(|w| w[0] == b'/' && (w[1] == b'/' || w[1] == b'.'));
            proptest::prop_assert_eq!(plainly_fine(&p), !refused);
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
