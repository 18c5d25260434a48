//! OpenAPI documents (v2 and v3, JSON, and v2 in gnostic protobuf), renamed
//! whole. Some servers label JSON documents `text/plain`, so the first byte
//! decides; 1.24 serves the gnostic protobuf as `application/octet-stream`.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::response::Parts;
use http::Response;
use hyper::body::Incoming;

use super::{etag, Exchange, Forward, BODY_LIMIT};
use crate::serve::body::{collect, full};
use crate::serve::status::Failure;
use crate::upstream::Body;

/// True for the OpenAPI endpoints.
pub(crate) fn is_openapi(path: &str) -> bool {
    path == "/openapi/v2" || path == "/openapi/v3" || path.starts_with("/openapi/v3/")
}

/// Renames a successful OpenAPI response.
pub(crate) async fn rename(
    fwd: &Forward,
    x: &Exchange,
    mut parts: Parts,
    body: Incoming,
) -> Result<Response<Body>, Failure> {
    let v2 = x.caller_path == "/openapi/v2";
    let protobuf = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.to_ascii_lowercase().contains("protobuf"));
    if protobuf && !v2 {
        // Never passed through unrenamed.
        return Err(super::errors::unrenamable_answer());
    }
    let bytes = collect(body, BODY_LIMIT)
        .await
        .map_err(|e| Failure::bad_gateway(format!("reading the API server's OpenAPI: {e}")))?;
    let json = bytes.iter().find(|b| !b.is_ascii_whitespace()) == Some(&b'{');
    if !json && !v2 {
        return Ok(Response::from_parts(parts, full(bytes)));
    }
    let out = x
        .engine
        .openapi(fwd.dir.flip(), !json, &bytes)
        .map_err(|e| {
            Failure::bad_gateway(format!("the API server's OpenAPI can't be renamed: {e}"))
        })?;
    etag::tag(&x.engine, &mut parts.headers);
    let bytes = out.map(Bytes::from).unwrap_or(bytes);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    Ok(Response::from_parts(parts, full(bytes)))
}
