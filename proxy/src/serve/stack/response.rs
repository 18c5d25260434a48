//! The upstream's answer renamed back towards the caller: headers first,
//! then the body by its form (OpenAPI, watch, list, whole).

use http::header::{self, HeaderMap};
use http::{Method, Response};

use super::{
    errors, etag, headers, list, openapi, proto_list, watch, whole, Answer, Exchange, Forward,
};
use crate::body::budget;
use crate::body::pass;
use crate::body::Body;
use crate::kube::{media, MediaType, Wire};
use crate::serve::amend::looking_at;
use crate::serve::status::Failure;
use crate::upstream::ResponseBody;

/// Renames a response.
pub(crate) async fn rename(
    fwd: &Forward,
    x: &Exchange,
    resp: Response<ResponseBody>,
) -> Result<Response<Body>, Failure> {
    let (mut parts, body) = resp.into_parts();
    // `Content-Type` looked up once: what it means, and whether regroup
    // can't rename it (neither changes below).
    let content_type = parts.headers.get(header::CONTENT_TYPE).map(|v| v.to_str());
    let media = match content_type {
        None => MediaType::Unspecified,
        Some(Ok(s)) => MediaType::parse(Some(s)),
        Some(Err(_)) => MediaType::Other,
    };
    let unrenamable = matches!(content_type, Some(Ok(s)) if media::unrenamable(s));
    headers::strip_hop_by_hop(&mut parts.headers);
    headers::response(fwd, &x.engine, &mut parts.headers);
    let success = parts.status.is_success();
    let openapi = openapi::is_openapi(x.caller_path());
    if openapi && success {
        return openapi::rename(fwd, x, parts, body).await;
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
        _ if unrenamable => return Err(errors::unrenamable_answer()),
        Wire::Opaque => return Ok(Response::from_parts(parts, pass(body))),
        _ => {}
    }
    etag::tag(&x.engine, &mut parts.headers);
    let amendments = looking_at(&fwd.amendments, &x.info);
    let gzip = is_gzip(&parts.headers);
    let answer = Answer {
        parts,
        body,
        media,
        gzip,
        amendments,
    };
    // Every body renamed below is held, at least a chunk at a time: new
    // work waits for the memory budget here (then 429), before any
    // response header is sent.
    let mut held = budget::for_response(&x.method);
    held.grow(ADMISSION, budget::budget().deadline())
        .await
        .map_err(|r| r.failure("a response to rename", true))?;
    if x.info.watch && success {
        return watch::rename(fwd, x, answer, held);
    }
    let list = !gzip
        && x.info.name.is_none()
        && success
        && x.method == Method::GET
        && answer.amendments.is_empty();
    if list && media == MediaType::Json {
        // Memory bounded by one item, not by the list.
        return Ok(list::stream(fwd, x, answer.parts, answer.body, held));
    }
    if list && media == MediaType::Protobuf {
        // The input never held whole; the output sent once complete.
        return proto_list::rename(fwd, x, answer.parts, answer.body, held).await;
    }
    // Takes what it needs itself.
    drop(held);
    whole::rename(fwd, x, answer).await
}

/// What a response to rename takes from the memory budget to start: one
/// read's worth (hyper reads at most this much at a time).
const ADMISSION: usize = 64 << 10;

fn is_gzip(h: &HeaderMap) -> bool {
    h.get(header::CONTENT_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"gzip"))
}
