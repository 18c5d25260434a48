//! A response body renamed whole (objects, Status errors, discovery, YAML,
//! protobuf), gzip inflated first.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::Response;

use super::{gzip, Answer, Exchange, Forward, BODY_LIMIT};
use crate::kube::MediaType;
use crate::rewrite::{yaml, Context, RewriteError};
use crate::serve::body::{collect, full};
use crate::serve::status::Failure;
use crate::serve::trust::hooks;
use crate::upstream::Body;

/// Renames a whole response body.
pub(crate) async fn rename(
    fwd: &Forward,
    x: &Exchange,
    answer: Answer,
) -> Result<Response<Body>, Failure> {
    let (mut parts, media, trust) = (answer.parts, answer.media, answer.trust);
    let registration = answer.registration;
    let mut bytes = collect(answer.body, BODY_LIMIT)
        .await
        .map_err(|e| Failure::bad_gateway(format!("reading the API server's response: {e}")))?;
    if answer.gzip {
        bytes =
            gzip::inflate(&bytes, fwd.limits.inflated).map_err(gzip::InflateError::of_upstream)?;
        parts.headers.remove(header::CONTENT_ENCODING);
    }
    let bad = |e: RewriteError| {
        Failure::bad_gateway(format!("the API server's response can't be renamed: {e}"))
    };
    let dir = fwd.dir.flip();
    let addressed = x.kind().map(|k| (x.info.group.as_str(), k));
    let out = match media {
        MediaType::Yaml => yaml::rewrite(x.engine.json(dir), &bytes, None, addressed),
        _ => x.engine.body(
            dir,
            media.response_wire(),
            Context {
                hint: None,
                addressed,
            },
            &bytes,
        ),
    }
    .map_err(bad)?;
    let out = match trust.as_deref() {
        Some(t) => hooks::response_body(
            t,
            media,
            parts.status.is_success(),
            out.as_deref().unwrap_or(&bytes),
        )
        .map_err(bad)?
        .or(out),
        None => out,
    };
    let out = match registration.as_deref() {
        Some(r) => hooks::registration_response(
            r,
            media,
            parts.status.is_success(),
            out.as_deref().unwrap_or(&bytes),
        )
        .map_err(bad)?
        .or(out),
        None => out,
    };
    let bytes = out.map(Bytes::from).unwrap_or(bytes);
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(bytes.len()));
    Ok(Response::from_parts(parts, full(bytes)))
}
