//! The request body, renamed towards the upstream by the engine and
//! amended by the hooks, or taken whole for the patch a hook serves.
//! Bodies that carry no group stream on untouched; encodings regroup can't
//! rename are refused (the client falls back to JSON).

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::Method;
use hyper::body::Incoming;

use super::exchange::{Exchange, Forward};
use super::gzip;
use crate::body::budget::{self, budget, Held, Reason};
use crate::body::Body;
use crate::body::{collect_held, full_held, pass, HeldCollectError};
use crate::hooks::Ctx;
use crate::kube::{MediaType, Wire};
use crate::rewrite::{Context, RewriteError};
use crate::status::Failure;

fn carries_body(m: &Method) -> bool {
    matches!(
        *m,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// The request body as the next step takes it.
pub(crate) enum Taken {
    /// Renamed and amended, to send.
    Body(Body),
    /// Whole and plain (inflated), held until the patch a hook serves
    /// ends (`patch.rs`).
    Patch(Bytes, Held),
}

/// The request body: renamed and amended for sending, or whole for the
/// patch a hook serves. Bodies that carry no group stream on untouched;
/// `headers` (those forwarded) get the new length.
pub(crate) async fn take(
    fwd: &Forward,
    x: &Exchange,
    ctx: &mut Ctx,
    headers: &mut HeaderMap,
    body: Incoming,
) -> Result<Taken, Failure> {
    let patch = x.hooks.patch_server().is_some();
    let media = MediaType::of(headers);
    if !patch {
        if !(x.info.is_api && carries_body(&x.method)) {
            return Ok(Taken::Body(pass(body)));
        }
        match media.request_wire() {
            Wire::Opaque => return Ok(Taken::Body(pass(body))),
            Wire::Unrenamable => {
                return Err(Failure::unsupported(
                    "regroup can't rename this encoding (CBOR); send JSON, YAML or protobuf",
                ))
            }
            _ => {}
        }
    }
    let (bytes, mut held) = read_plain(fwd, headers, body).await?;
    if patch {
        return Ok(Taken::Patch(bytes, held));
    }
    let bytes = renamed(fwd, x, media, bytes)?;
    let bytes = x.hooks.request_body(ctx, x.engine.map(), media, bytes)?;
    // What is sent is held until it is; the input is given back.
    held.shrink(bytes.len());
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    Ok(Taken::Body(full_held(bytes, held)))
}

/// A whole request body, as [`read_plain`] gave it, renamed by the engine.
/// Amendments are the caller's to apply: a patch may need the current
/// object (`patch`).
pub(crate) fn renamed(
    fwd: &Forward,
    x: &Exchange,
    media: MediaType,
    bytes: Bytes,
) -> Result<Bytes, Failure> {
    let wire = media.request_wire();
    let hint_version = x.info.api_version().unwrap_or_default();
    // A subresource body keeps its own kind's group.
    let (api_version, kind) = match (x.info.subresource.as_deref(), x.kind()) {
        (Some("scale"), _) => ("autoscaling/v1".to_string(), "Scale"),
        (_, k) => (hint_version, k.unwrap_or("")),
    };
    let cx = Context {
        hint: Some((&api_version, kind)),
        addressed: None,
    };
    let out = x
        .engine
        .body(fwd.dir, wire, cx, &bytes)
        .map_err(|e: RewriteError| {
            Failure::bad_request(format!("the request body can't be renamed: {e}"))
        })?;
    Ok(out.map(Bytes::from).unwrap_or(bytes))
}

/// A whole request body, within `limits.maxRequestBodyBytes`: refused
/// from its `Content-Length` before any of it is read, else as soon as the
/// bytes that arrive pass the limit. Twice its bytes (the body and its
/// renamed copy) are taken from the memory budget before they are read
/// (all at once for a known length), held by the returned [`Held`].
async fn read(fwd: &Forward, body: Incoming) -> Result<(Bytes, Held), Failure> {
    let limit = fwd.limits.request;
    let b = budget();
    let mut held = b.empty();
    let got = collect_held(body, limit, 2, &mut held, &mut b.deadline()).await;
    let bytes = got.map_err(|e| match e {
        HeldCollectError::TooLarge(_) => {
            budget::refused(Reason::RequestTooLarge, "a request body", limit);
            Failure::too_large(format!(
                "request body larger than {limit} bytes (limits.maxRequestBodyBytes)"
            ))
        }
        HeldCollectError::Budget(r) => r.failure("the request body", false),
        HeldCollectError::Io(m) => Failure::bad_request(m),
    })?;
    Ok((bytes, held))
}

/// A whole request body as [`read`] collects it, without its
/// `Content-Encoding`: gzip inflated, every inflated byte and the renamed
/// copy's taken from the budget (`headers` lose the header then); any other
/// encoding is refused (415), as nothing in it could be renamed. Renamed
/// bytes go upstream uncompressed, so inflated they are within
/// `maxRequestBodyBytes` too.
async fn read_plain(
    fwd: &Forward,
    headers: &mut HeaderMap,
    body: Incoming,
) -> Result<(Bytes, Held), Failure> {
    let (bytes, mut held) = read(fwd, body).await?;
    match headers.get(header::CONTENT_ENCODING).map(|v| v.as_bytes()) {
        None => Ok((bytes, held)),
        Some(e) if e.eq_ignore_ascii_case(b"identity") => Ok((bytes, held)),
        Some(e) if e.eq_ignore_ascii_case(b"gzip") => {
            let limit = fwd.limits.inflated.min(fwd.limits.request);
            let plain = gzip::inflate_held(&bytes, limit, &mut held)
                .await
                .map_err(gzip::InflateError::of_request)?;
            // The renamed copy of the inflated bytes.
            held.grow(plain.len(), &mut budget().deadline())
                .await
                .map_err(|r| r.failure("renaming the request body", false))?;
            headers.remove(header::CONTENT_ENCODING);
            Ok((plain, held))
        }
        Some(_) => Err(Failure::unsupported(
            "regroup can't rename a body in this Content-Encoding; send it uncompressed or gzip",
        )),
    }
}
