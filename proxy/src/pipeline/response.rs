//! The upstream's answer renamed back towards the caller: headers first,
//! then the body by its form (OpenAPI, watch, list, whole).

use http::header::{self, HeaderMap};
use http::{Method, Response};

use super::exchange::{Answer, Exchange, Forward};
use super::{errors, etag, list, openapi, proto_list, response_headers, watch, whole};
use crate::body::budget;
use crate::body::pass;
use crate::body::Body;
use crate::hooks::SentCtx;
use crate::kube::{media, MediaType, Wire};
use crate::status::Failure;
use crate::upstream::ResponseBody;

/// Renames a response.
pub(crate) async fn towards_caller(
    fwd: &Forward,
    x: &Exchange,
    ctx: &mut SentCtx,
    resp: Response<ResponseBody>,
) -> Result<Response<Body>, Failure> {
    let (mut parts, body) = resp.into_parts();
    let seen = Seen::of(&parts.headers);
    let media = seen.media;
    if seen.hop_by_hop != 0 {
        response_headers::strip_hop_by_hop(&mut parts.headers, seen.hop_by_hop);
    }
    if seen.renamed {
        response_headers::rename_back(fwd, &x.engine, &mut parts.headers);
    }
    let success = parts.status.is_success();
    let openapi = openapi::is_openapi(x.caller_path());
    if openapi && success {
        return openapi::rename_document(fwd, x, parts, body).await;
    }
    if (openapi || x.info.is_api) && (parts.status.is_redirection()) {
        // A 304 revalidates, a 301 moves to the current OpenAPI hash: the
        // ETag the client caches must be the one regroup gave it.
        etag::tag(&x.engine, &mut parts.headers);
        return Ok(Response::from_parts(parts, pass(body)));
    }
    if !x.info.is_api {
        return Ok(Response::from_parts(parts, pass(body)));
    }
    match media.response_wire() {
        Wire::Unrenamable => return Err(errors::unrenamable_answer()),
        _ if seen.unrenamable => return Err(errors::unrenamable_answer()),
        Wire::Opaque => return Ok(Response::from_parts(parts, pass(body))),
        _ => {}
    }
    if seen.etag {
        etag::tag(&x.engine, &mut parts.headers);
    }
    let gzip = seen.gzip;
    let answer = Answer {
        parts,
        body,
        media,
        gzip,
    };
    // Every body renamed below is held, at least a chunk at a time: new
    // work waits for the memory budget here (then 429), before any
    // response header is sent.
    let mut held = budget::for_response(&x.method);
    held.grow(ADMISSION, &mut budget::budget().deadline())
        .await
        .map_err(|r| r.failure("a response to rename", true))?;
    if x.info.watch && success {
        return watch::rename_events(fwd, x, ctx.share(), answer, held);
    }
    // `/apis` is read whole: the copy's groups are put first in it
    // (`whole::rename_whole`).
    let list = !gzip
        && !x.is_discovery_root()
        && x.info.name.is_none()
        && success
        && x.method == Method::GET
        && x.hooks.is_empty();
    if list && media == MediaType::Json {
        // Memory bounded by one item, not by the list.
        return Ok(list::stream(fwd, x, answer.parts, answer.body, held));
    }
    if list && media == MediaType::Protobuf {
        // The input never held whole; the output sent once complete.
        return proto_list::rename_list(fwd, x, answer.parts, answer.body, held).await;
    }
    // Takes what it needs itself.
    drop(held);
    whole::rename_whole(fwd, x, ctx, answer).await
}

/// What a response to rename takes from the memory budget to start: one
/// read's worth (hyper reads at most this much at a time).
const ADMISSION: usize = 64 << 10;

/// What the response step reads of the upstream's headers, found in one
/// pass over them: each `get` or `remove` hashes its name, and most
/// answers carry none of the headers regroup edits.
#[derive(Debug, PartialEq)]
struct Seen {
    /// What the (first) `Content-Type` means.
    media: MediaType,
    /// A `Content-Type` regroup can't rename (CBOR, ...).
    unrenamable: bool,
    /// The first `Content-Encoding` is gzip.
    gzip: bool,
    /// The hop-by-hop headers to remove (bit `i`: `HOP_BY_HOP[i]`).
    hop_by_hop: u8,
    /// A `Warning` or `Location` (names groups: renamed).
    renamed: bool,
    /// An `ETag` (tagged).
    etag: bool,
}

impl Seen {
    fn of(h: &HeaderMap) -> Seen {
        let mut content_type = None;
        let mut encoding = None;
        let (mut hop_by_hop, mut renamed, mut etag) = (0, false, false);
        for (name, value) in h {
            if name == header::CONTENT_TYPE {
                content_type.get_or_insert(value);
            } else if name == header::CONTENT_ENCODING {
                encoding.get_or_insert(value);
            } else if name == header::WARNING || name == header::LOCATION {
                renamed = true;
            } else if name == header::ETAG {
                etag = true;
            } else if let Some(i) = super::headers::hop_by_hop_index(name.as_str()) {
                hop_by_hop |= 1 << i;
            }
        }
        // The type, and the value as text when it had to be read. The API
        // server's JSON answers say exactly `application/json`: one
        // compare, not a check of the value's characters and a read of
        // its name.
        let (media, text) = match content_type {
            Some(v) if v.as_bytes() == b"application/json" => (MediaType::Json, None),
            None => (MediaType::Unspecified, None),
            Some(v) => match v.to_str() {
                Ok(s) => (MediaType::parse(Some(s)), Some(s)),
                Err(_) => (MediaType::Other, None),
            },
        };
        // Only these can be a type regroup can't rename (JSON, YAML never).
        let maybe = matches!(
            media,
            MediaType::Cbor | MediaType::CborSeq | MediaType::Protobuf | MediaType::Other
        );
        Seen {
            media,
            unrenamable: maybe && text.is_some_and(media::unrenamable),
            gzip: encoding.is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip")),
            hop_by_hop,
            renamed,
            etag,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn seen(pairs: &[(&'static str, &'static str)]) -> Seen {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.append(*k, HeaderValue::from_static(v));
        }
        Seen::of(&h)
    }

    #[test]
    fn a_plain_json_answer_needs_no_header_edit() {
        let s = seen(&[
            ("content-type", "application/json"),
            ("content-length", "921"),
            ("date", "x"),
            ("audit-id", "y"),
        ]);
        assert_eq!(
            s,
            Seen {
                media: MediaType::Json,
                unrenamable: false,
                gzip: false,
                hop_by_hop: 0,
                renamed: false,
                etag: false,
            }
        );
    }

    #[test]
    fn json_is_told_by_its_exact_name_and_by_reading_the_value() {
        for ct in [
            "application/json",
            "Application/JSON",
            "application/json; charset=utf-8",
            " application/json",
        ] {
            assert_eq!(seen(&[("content-type", ct)]).media, MediaType::Json, "{ct}");
        }
        let yaml = seen(&[
            ("content-type", "application/yaml"),
            ("content-type", "application/json"),
        ]);
        assert_eq!(
            yaml.media,
            MediaType::Yaml,
            "the first Content-Type decides"
        );
    }

    #[test]
    fn each_header_the_step_edits_is_seen() {
        let s = seen(&[
            ("connection", "keep-alive"),
            ("warning", "299 - \"x\""),
            ("etag", "\"1\""),
            ("content-encoding", "GZIP"),
            ("content-encoding", "br"),
        ]);
        assert_eq!(s.media, MediaType::Unspecified);
        assert!(s.hop_by_hop == 1 && s.renamed && s.etag && s.gzip);
        assert!(seen(&[("location", "/apis/x")]).renamed);
        assert_eq!(seen(&[("transfer-encoding", "chunked")]).hop_by_hop, 1 << 5);
        // The first Content-Encoding decides, as a lookup by name did.
        assert!(!seen(&[("content-encoding", "br"), ("content-encoding", "gzip")]).gzip);
    }

    #[test]
    fn unrenamable_types_are_found_as_before() {
        for (ct, refused) in [
            ("application/json", false),
            ("application/json;as=Table;v=v1;g=meta.k8s.io", false),
            ("application/yaml", false),
            ("application/cbor", true),
            ("application/cbor-seq", true),
            ("application/com.github.proto-openapi.spec.v3@v1.0+protobuf", true),
            ("application/vnd.kubernetes.protobuf", false),
            (
                "application/vnd.kubernetes.protobuf;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList",
                true,
            ),
            ("text/plain", false),
        ] {
            let s = seen(&[("content-type", ct)]);
            assert_eq!(s.unrenamable, refused, "{ct}");
            assert_eq!(s.unrenamable, media::unrenamable(ct), "{ct}");
            // The first Content-Type decides.
            let two = seen(&[("content-type", ct), ("content-type", "application/cbor")]);
            assert_eq!(two.unrenamable, refused, "{ct}");
        }
    }
}
