//! The request body, renamed towards the upstream by the engine. Bodies
//! that carry no group stream on untouched; encodings regroup can't rename
//! are refused (the client falls back to JSON).

use bytes::Bytes;
use http::header::{self, HeaderMap, HeaderValue};
use http::Method;
use hyper::body::Incoming;

use super::{gzip, Exchange, Forward};
use crate::kube::{MediaType, Wire};
use crate::rewrite::{Context, RewriteError};
use crate::serve::body::{collect, full, pass, CollectError};
use crate::serve::status::Failure;
use crate::serve::trust;
use crate::upstream::Body;

fn carries_body(m: &Method) -> bool {
    matches!(
        *m,
        Method::POST | Method::PUT | Method::PATCH | Method::DELETE
    )
}

/// Renames a request body; `headers` (those forwarded) get its new length.
pub(crate) async fn rename(
    fwd: &Forward,
    x: &Exchange,
    headers: &mut HeaderMap,
    body: Incoming,
) -> Result<Body, Failure> {
    if !(x.info.is_api && carries_body(&x.method)) {
        return Ok(pass(body));
    }
    let media = MediaType::of(headers);
    let wire = media.request_wire();
    match wire {
        Wire::Opaque => return Ok(pass(body)),
        Wire::Unrenamable => {
            return Err(Failure::unsupported(
                "regroup can't rename this encoding (CBOR); send JSON, YAML or protobuf",
            ))
        }
        _ => {}
    }
    let bytes = read(fwd, body).await?;
    let mut bytes = renamed(fwd, x, headers, media, bytes)?;
    if let Some(r) = &fwd.registration {
        bytes = trust::hooks::registration_request_body(r, &x.info, media, bytes)?;
    }
    headers.insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    Ok(full(bytes))
}

/// A whole request body renamed by the engine (inflated first when gzip;
/// `headers` lose their `Content-Encoding` then) and amended by the front
/// trust. The webhook registration is the caller's to apply: a patch of
/// one may need the current object (`registration_patch`).
pub(crate) fn renamed(
    fwd: &Forward,
    x: &Exchange,
    headers: &mut HeaderMap,
    media: MediaType,
    mut bytes: Bytes,
) -> Result<Bytes, Failure> {
    let wire = media.request_wire();
    match headers.get(header::CONTENT_ENCODING).map(|v| v.as_bytes()) {
        None => {}
        Some(e) if e.eq_ignore_ascii_case(b"identity") => {}
        Some(e) if e.eq_ignore_ascii_case(b"gzip") => {
            // Renamed bytes go upstream uncompressed, so inflated they are
            // within `maxRequestBodyBytes` too.
            let limit = fwd.limits.inflated.min(fwd.limits.request);
            bytes = gzip::inflate(&bytes, limit).map_err(gzip::InflateError::of_request)?;
            headers.remove(header::CONTENT_ENCODING);
        }
        Some(_) => return Err(Failure::unsupported(
            "regroup can't rename a body in this Content-Encoding; send it uncompressed or gzip",
        )),
    }
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
    let mut bytes = out.map(Bytes::from).unwrap_or(bytes);
    if let Some(t) = &fwd.trust {
        bytes = trust::hooks::request_body(t, &x.info, x.engine.map(), media, bytes)?;
    }
    Ok(bytes)
}

/// A whole request body, within `limits.maxRequestBodyBytes`: refused
/// from its `Content-Length` before any of it is read, else as soon as the
/// bytes that arrive pass the limit.
pub(crate) async fn read(fwd: &Forward, body: Incoming) -> Result<Bytes, Failure> {
    let limit = fwd.limits.request;
    let too_large = || {
        Failure::too_large(format!(
            "request body larger than {limit} bytes (limits.maxRequestBodyBytes)"
        ))
    };
    if http_body::Body::size_hint(&body).lower() > limit as u64 {
        return Err(too_large());
    }
    collect(body, limit).await.map_err(|e| match e {
        CollectError::TooLarge(_) => too_large(),
        CollectError::Io(m) => Failure::bad_request(m),
    })
}
