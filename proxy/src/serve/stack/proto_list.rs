//! Protobuf lists renamed item by item as they arrive (the input is never
//! held whole), answered once complete: the envelope's length prefix comes
//! before the items and changes with them (`rewrite/protobuf/list_stream.rs`).
//! Nothing is sent before the end, so a failure is a `Status`.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::response::Parts;
use http::Response;
use http_body_util::{BodyExt, StreamBody};
use hyper::body::Incoming;

use super::{Exchange, Forward, BODY_LIMIT};
use crate::body::budget::{self, Held};
use crate::body::holding;
use crate::body::{Body, BoxError};
use crate::rewrite::protobuf::list_stream::ListStream;
use crate::rewrite::RewriteError;
use crate::serve::status::Failure;

fn bad(e: RewriteError) -> Failure {
    Failure::bad_gateway(format!("the API server's response can't be renamed: {e}"))
}

/// The list response, its items renamed as they arrive.
pub(crate) async fn rename(
    fwd: &Forward,
    x: &Exchange,
    mut parts: Parts,
    mut body: Incoming,
    mut held: Held,
) -> Result<Response<Body>, Failure> {
    let rw = x.engine.proto(fwd.dir.flip());
    let mut list = ListStream::new(x.kind().map(|k| (x.info.group.as_str(), k)), BODY_LIMIT);
    let b = budget::budget();
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| Failure::bad_gateway(format!("reading the API server's response: {e}")))?;
        if let Ok(data) = frame.into_data() {
            // The list held whole (its renamed items until the end, and
            // the chunk being read) is taken from the memory budget.
            held.set(list.held() + data.len(), b.deadline())
                .await
                .map_err(|r| r.failure("the API server's protobuf list", true))?;
            list.feed(rw, &data).map_err(bad)?;
        }
    }
    held.set(list.held(), b.deadline())
        .await
        .map_err(|r| r.failure("the API server's protobuf list", true))?;
    let chunks = list.finish(rw).map_err(bad)?;
    let len: usize = chunks.iter().map(Bytes::len).sum();
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(len));
    let frames = chunks
        .into_iter()
        .map(|c| Ok::<_, BoxError>(http_body::Frame::data(c)));
    held.shrink(len);
    let body = holding(
        StreamBody::new(futures_util::stream::iter(frames)).boxed(),
        held,
    );
    Ok(Response::from_parts(parts, body))
}
