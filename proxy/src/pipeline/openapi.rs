//! OpenAPI documents (v2 and v3, JSON, and v2 in gnostic protobuf), renamed
//! whole. Some servers label JSON documents `text/plain`, so the first byte
//! decides; 1.24 serves the gnostic protobuf as `application/octet-stream`.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::response::Parts;
use http::Response;

use super::etag;
use super::exchange::{Exchange, Forward, BODY_LIMIT};
use crate::body::budget::{self, Reason};
use crate::body::Body;
use crate::body::{collect_held, full_held, HeldCollectError};
use crate::status::Failure;
use crate::upstream::ResponseBody;

/// True for the OpenAPI endpoints.
pub(crate) fn is_openapi(path: &str) -> bool {
    path == "/openapi/v2" || path == "/openapi/v3" || path.starts_with("/openapi/v3/")
}

/// Renames a successful OpenAPI response.
pub(crate) async fn rename_document(
    fwd: &Forward,
    x: &Exchange,
    mut parts: Parts,
    body: ResponseBody,
) -> Result<Response<Body>, Failure> {
    let v2 = x.caller_path() == "/openapi/v2";
    let protobuf = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("protobuf"));
    if protobuf && !v2 {
        // Never passed through unrenamed.
        return Err(super::errors::unrenamable_answer());
    }
    // The document and its renamed copy, from the memory budget.
    let b = budget::budget();
    let mut held = b.empty();
    let got = collect_held(body, BODY_LIMIT, 2, &mut held, &mut b.deadline()).await;
    let bytes = got.map_err(|e| match e {
        HeldCollectError::TooLarge(n) => {
            budget::refused(Reason::ObjectTooLarge, "an OpenAPI document", n);
            Failure::bad_gateway(format!("the API server's OpenAPI is larger than {n} bytes"))
        }
        HeldCollectError::Budget(r) => r.failure("the API server's OpenAPI", true),
        HeldCollectError::Io(e) => {
            Failure::bad_gateway(format!("reading the API server's OpenAPI: {e}"))
        }
    })?;
    let json = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if !json && !v2 {
        held.shrink(bytes.len());
        return Ok(Response::from_parts(parts, full_held(bytes, held)));
    }
    let out = x
        .engine
        .openapi(fwd.dir.flip(), !json, &bytes)
        .map_err(|e| {
            Failure::bad_gateway(format!("the API server's OpenAPI can't be renamed: {e}"))
        })?;
    etag::tag(&x.engine, &mut parts.headers);
    let bytes = out.map(Bytes::from).unwrap_or(bytes);
    held.shrink(bytes.len());
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    Ok(Response::from_parts(parts, full_held(bytes, held)))
}
