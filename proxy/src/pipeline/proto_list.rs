//! Protobuf lists renamed item by item as they arrive, answered once
//! complete: the envelope's length prefix comes before the items and
//! changes with them (`rewrite/protobuf/list_stream.rs`). The renamed items
//! wait in memory up to a small look-ahead, then in an anonymous spill file
//! (`rewrite/protobuf/spool.rs`), so memory follows the largest item, not
//! the list. Nothing is sent before the end, so a failure is a `Status`.

use bytes::Bytes;
use http::header::{self, HeaderValue};
use http::response::Parts;
use http::Response;
use http_body_util::{BodyExt, StreamBody};

use super::exchange::{Exchange, Forward};
use crate::body::budget::{self, Held};
use crate::body::holding;
use crate::body::{Body, BoxError};
use crate::rewrite::protobuf::list_stream::{ListStream, Output};
use crate::rewrite::protobuf::spool::{read_chunk, SpillFile, Spooled, CHUNK};
use crate::rewrite::RewriteError;
use crate::status::Failure;
use crate::upstream::ResponseBody;

fn bad(e: RewriteError) -> Failure {
    match e {
        RewriteError::Storage(m) => {
            tracing::error!("the API server's protobuf list can't be renamed: {m}");
            Failure::insufficient_storage(format!(
                "the API server's response can't be renamed: {m}"
            ))
        }
        e => Failure::bad_gateway(format!("the API server's response can't be renamed: {e}")),
    }
}

/// The list response, its items renamed as they arrive.
pub(crate) async fn rename_list(
    fwd: &Forward,
    x: &Exchange,
    mut parts: Parts,
    mut body: ResponseBody,
    mut held: Held,
) -> Result<Response<Body>, Failure> {
    let dir = fwd.dir.flip();
    // An item is one object; the list is what `spill` allows.
    let mut list = ListStream::with_spill(
        x.kind().map(|k| (x.info.group.as_str(), k)),
        fwd.limits.object,
        fwd.limits.spill.clone(),
    );
    let b = budget::budget();
    while let Some(frame) = body.frame().await {
        let frame = frame
            .map_err(|e| Failure::bad_gateway(format!("reading the API server's response: {e}")))?;
        if let Ok(data) = frame.into_data() {
            // What the list holds in memory (the look-ahead or the spill
            // file's buffer, the item being read) and the chunk.
            held.set(list.held() + data.len(), &mut b.deadline())
                .await
                .map_err(|r| r.failure("the API server's protobuf list", true))?;
            x.engine
                .proto_list_feed(dir, &mut list, &data)
                .map_err(bad)?;
        }
    }
    held.set(list.held(), &mut b.deadline())
        .await
        .map_err(|r| r.failure("the API server's protobuf list", true))?;
    let out = x.engine.proto_list_finish(dir, list).map_err(bad)?;
    parts
        .headers
        .insert(header::CONTENT_LENGTH, HeaderValue::from(out.len));
    let in_memory = match &out.items {
        Spooled::Memory(c) => c.iter().map(Bytes::len).sum::<usize>(),
        // One chunk read back at a time.
        Spooled::File(_) => CHUNK,
    };
    held.shrink(out.head.len() + out.tail.len() + in_memory);
    Ok(Response::from_parts(parts, holding(send(out), held)))
}

/// What is left to send of an [`Output`].
enum Sending {
    Head(Output),
    Memory(std::vec::IntoIter<Bytes>, Bytes),
    File(Box<dyn SpillFile>, Bytes),
    Done,
}

fn send(out: Output) -> Body {
    let s = futures_util::stream::unfold(Sending::Head(out), |st| async move {
        let (chunk, next) = match st {
            Sending::Head(out) => {
                let next = match out.items {
                    Spooled::Memory(c) => Sending::Memory(c.into_iter(), out.tail),
                    Spooled::File(f) => Sending::File(f, out.tail),
                };
                (out.head, next)
            }
            Sending::Memory(mut it, tail) => match it.next() {
                Some(c) => (c, Sending::Memory(it, tail)),
                None => (tail, Sending::Done),
            },
            Sending::File(mut f, tail) => {
                // A read from the page cache, off the async threads.
                let read = tokio::task::spawn_blocking(move || {
                    let c = read_chunk(&mut f);
                    (f, c)
                })
                .await;
                match read {
                    Ok((f, Ok(Some(c)))) => (c, Sending::File(f, tail)),
                    Ok((_, Ok(None))) => (tail, Sending::Done),
                    Ok((_, Err(e))) => {
                        tracing::error!("sending a renamed protobuf list, aborting: {e}");
                        return Some((
                            Err::<http_body::Frame<Bytes>, BoxError>(e.into()),
                            Sending::Done,
                        ));
                    }
                    Err(e) => return Some((Err(e.into()), Sending::Done)),
                }
            }
            Sending::Done => return None,
        };
        Some((Ok(http_body::Frame::data(chunk)), next))
    });
    StreamBody::new(s).boxed()
}
