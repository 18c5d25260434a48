//! JSON lists renamed item by item as they stream: memory is bounded by the
//! largest item. A failure mid-stream aborts the body (the client sees a
//! broken response, never unrenamed bytes).

use std::sync::Arc;

use bytes::Bytes;
use http::header;
use http::response::Parts;
use http::Response;
use http_body_util::BodyExt;
use regroup_config::Direction;

use super::exchange::{Exchange, Forward};
use crate::body::budget::{self, Held};
use crate::body::{Body, BoxError};
use crate::rewrite::list_stream::ListStream;
use crate::rewrite::Engine;
use crate::upstream::ResponseBody;

struct State {
    engine: Arc<Engine>,
    dir: Direction,
    body: ResponseBody,
    list: Option<ListStream>,
    /// The item being read and the output being sent, from the budget.
    held: Held,
}

fn aborted(e: impl Into<BoxError>) -> Result<http_body::Frame<Bytes>, BoxError> {
    Err(e.into())
}

/// The list response, its body renamed as it streams.
pub(crate) fn stream(
    fwd: &Forward,
    x: &Exchange,
    mut parts: Parts,
    body: ResponseBody,
    held: Held,
) -> Response<Body> {
    parts.headers.remove(header::CONTENT_LENGTH);
    let addressed = x.kind().map(|k| (x.info.group.to_string(), k));
    let st = State {
        engine: x.engine.clone(),
        dir: fwd.dir.flip(),
        body,
        // An item is one object.
        list: Some(ListStream::new(addressed, fwd.limits.object)),
        held,
    };
    let s = futures_util::stream::unfold(st, |mut st| async move {
        loop {
            let list = st.list.as_mut()?;
            match st.body.frame().await {
                Some(Ok(f)) => {
                    let Ok(data) = f.into_data() else { continue };
                    // What was sent is given back; the item being read, the
                    // chunk and its renamed copy are taken.
                    let need = list.held() + 2 * data.len();
                    if let Err(r) = st.held.set(need, &mut budget::budget().deadline()).await {
                        let f = r.failure("a list item", true);
                        tracing::error!(
                            "the API server's list can't be renamed, aborting the response: {}",
                            f.message
                        );
                        st.list = None;
                        return Some((aborted(f.message), st));
                    }
                    match st.engine.list_feed(st.dir, list, &data) {
                        Ok(out) if out.is_empty() => continue,
                        Ok(out) => return Some((Ok(http_body::Frame::data(Bytes::from(out))), st)),
                        Err(e) => {
                            tracing::error!("the API server's list can't be renamed, aborting the response: {e}");
                            st.list = None;
                            return Some((aborted(e), st));
                        }
                    }
                }
                Some(Err(e)) => {
                    st.list = None;
                    return Some((aborted(e), st));
                }
                None => {
                    let list = st.list.take()?;
                    return match st.engine.list_finish(st.dir, list) {
                        Ok(out) => Some((Ok(http_body::Frame::data(Bytes::from(out))), st)),
                        Err(e) => {
                            tracing::error!("the API server's list can't be renamed, aborting the response: {e}");
                            Some((aborted(e), st))
                        }
                    };
                }
            }
        }
    });
    Response::from_parts(parts, http_body_util::StreamBody::new(s).boxed())
}
