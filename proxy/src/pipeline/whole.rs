//! A response body renamed whole (objects, Status errors, discovery, YAML,
//! protobuf), gzip inflated first.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::Response;

use super::exchange::{Answer, Exchange, Forward, BODY_LIMIT};
use super::gzip;
use crate::body::budget::{self, Reason};
use crate::body::Body;
use crate::body::{collect_held, full_held, HeldCollectError};
use crate::hooks::Ctx;
use crate::rewrite::{Context, RewriteError};
use crate::status::Failure;

/// Renames a whole response body.
pub(crate) async fn rename_whole(
    fwd: &Forward,
    x: &Exchange,
    ctx: &Ctx,
    answer: Answer,
) -> Result<Response<Body>, Failure> {
    let (mut parts, media) = (answer.parts, answer.media);
    // One object within `maxObjectBytes`; a list that can't be streamed
    // (gzip, or one an amendment looks at)
    // within the old whole-body limit. Both within the memory budget.
    let limit = if x.info.name.is_some() {
        fwd.limits.object
    } else {
        BODY_LIMIT
    };
    let b = budget::budget();
    let mut held = crate::body::budget::for_response(&x.method);
    // The body, and (when not gzip) its renamed copy.
    let factor = if answer.gzip { 1 } else { 2 };
    let got = collect_held(answer.body, limit, factor, &mut held, &mut b.deadline()).await;
    let mut bytes = got.map_err(|e| match e {
        HeldCollectError::TooLarge(n) => {
            budget::refused(Reason::ObjectTooLarge, "an answer", n);
            Failure::bad_gateway(format!(
                "the API server's response is larger than {n} bytes (limits.maxObjectBytes)"
            ))
        }
        HeldCollectError::Budget(r) => r.failure("the API server's response", true),
        HeldCollectError::Io(e) => {
            Failure::bad_gateway(format!("reading the API server's response: {e}"))
        }
    })?;
    if answer.gzip {
        let limit = fwd.limits.inflated.min(limit);
        let plain = gzip::inflate_held(&bytes, limit, &mut held)
            .await
            .map_err(gzip::InflateError::of_upstream)?;
        // The compressed bytes go; the renamed copy comes.
        held.set(plain.len() * 2, &mut b.deadline())
            .await
            .map_err(|r| r.failure("renaming the API server's response", true))?;
        bytes = plain;
        parts.headers.remove(header::CONTENT_ENCODING);
    }
    let bad = |e: RewriteError| {
        Failure::bad_gateway(format!("the API server's response can't be renamed: {e}"))
    };
    let dir = fwd.dir.flip();
    let addressed = x.kind().map(|k| (x.info.group.as_str(), k));
    let cx = Context {
        hint: None,
        addressed,
    };
    let out = x
        .engine
        .body(dir, media.response_wire(), cx, &bytes)
        .map_err(bad)?;
    let mut out = x
        .hooks
        .response_body(ctx, media, parts.status.is_success(), &bytes, out)
        .map_err(bad)?;
    if dir == regroup_config::Direction::ToApp && x.is_discovery_root() && parts.status.is_success()
    {
        // The copy's own groups first, so that a name without a group
        // resolves to them (core `rewrite::discovery_order`).
        let renamed = out.as_deref().unwrap_or(&bytes);
        let map = x.engine.map();
        let ordered = match media.response_wire() {
            crate::kube::Wire::Json => crate::rewrite::discovery_order::json(map, renamed),
            crate::kube::Wire::Protobuf => crate::rewrite::discovery_order::protobuf(map, renamed),
            _ => Ok(None),
        };
        out = ordered.map_err(bad)?.or(out);
        if media.response_wire() == crate::kube::Wire::Json {
            let current = out.as_deref().unwrap_or(&bytes);
            let stripped =
                crate::rewrite::discovery_order::strip_other_copies_short_forms(map, current);
            out = stripped.map_err(bad)?.or(out);
        }
    }
    let bytes = out.map(Bytes::from).unwrap_or(bytes);
    // What is sent is held until it is.
    held.shrink(bytes.len());
    // Most answers keep their bytes, and so their length: not set again.
    let len = bytes.len();
    let mut given = parts.headers.get_all(header::CONTENT_LENGTH).iter();
    let same = given
        .next()
        .is_some_and(|v| v.as_bytes() == itoa::Buffer::new().format(len).as_bytes())
        && given.next().is_none();
    if !same && len > 0 {
        // hyper writes a body's known length itself when no header says
        // it (HTTP/1.1 straight into its buffer, h2 as a header): no
        // `HeaderValue` to allocate here (~0.2k instructions a renamed
        // body), none for hyper to parse again.
        parts.headers.remove(header::CONTENT_LENGTH);
    } else if !same {
        parts
            .headers
            .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    }
    Ok(Response::from_parts(parts, full_held(bytes, held)))
}
