//! Bodies: whole, collected with a limit, and rewritten frame by frame as
//! they stream; and the memory budget every byte held to rename is taken
//! from (`budget`). Below both `serve/` and `upstream/`, which send and
//! receive them.

pub mod budget;
pub mod spill_files;

use bytes::Bytes;
use futures_util::stream;
use http_body::Frame;
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, Limited, StreamBody};
use hyper::body::Incoming;

use crate::rewrite::framing::Framer;
pub use crate::rewrite::framing::Framing;
use crate::rewrite::RewriteError;
use budget::{Held, Reason, Refusal};

/// Errors of bodies flowing through regroup.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// A body of either side.
pub type Body = BoxBody<Bytes, BoxError>;

/// A body received from either side: hyper's own (a request's), or an
/// upstream response's (`upstream::ResponseBody`, its h2 stream counted
/// until it ends).
pub trait Received:
    http_body::Body<Data = Bytes, Error = hyper::Error> + Send + Sync + Unpin + 'static
{
}

impl<B> Received for B where
    B: http_body::Body<Data = Bytes, Error = hyper::Error> + Send + Sync + Unpin + 'static
{
}

/// A body of these bytes.
pub fn full(b: impl Into<Bytes>) -> Body {
    Full::new(b.into()).map_err(|never| match never {}).boxed()
}

/// An incoming body passed on as it streams; one that has ended already
/// (a GET's, most requests') as [`empty`], which allocates nothing.
pub fn pass(b: impl Received) -> Body {
    if b.is_end_stream() {
        return empty();
    }
    b.map_err(|e| Box::new(e) as BoxError).boxed()
}

/// No body: boxed without an allocation (the box holds nothing).
pub fn empty() -> Body {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed()
}

/// Why a body could not be collected.
#[derive(Debug, thiserror::Error)]
pub enum CollectError {
    /// Larger than the limit.
    #[error("body larger than {0} bytes")]
    TooLarge(usize),
    /// The connection failed mid-body.
    #[error("reading body: {0}")]
    Io(String),
}

/// Reads a whole body, refusing more than `limit` bytes.
pub async fn collect<B>(b: B, limit: usize) -> Result<Bytes, CollectError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    match Limited::new(b, limit).collect().await {
        Ok(c) => Ok(c.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => Err(CollectError::TooLarge(limit)),
        Err(e) => Err(CollectError::Io(e.to_string())),
    }
}

/// `body`, holding `held` until it is dropped (sent or abandoned); its
/// size hint is the body's (a retry keeps a body of known length).
pub fn holding(body: Body, held: Held) -> Body {
    Holding { body, _held: held }.boxed()
}

struct Holding {
    body: Body,
    _held: Held,
}

impl http_body::Body for Holding {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        std::pin::Pin::new(&mut self.body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        self.body.size_hint()
    }
}

/// `bytes` as the whole body, holding `held` until it is dropped: one
/// box, where [`full`] inside [`holding`] is two (an allocation less for
/// every renamed body).
pub fn full_held(bytes: impl Into<Bytes>, held: Held) -> Body {
    let bytes = bytes.into();
    FullHeld {
        data: (!bytes.is_empty()).then_some(bytes),
        _held: held,
    }
    .boxed()
}

/// [`Full`]'s one frame, with the budget it holds.
struct FullHeld {
    data: Option<Bytes>,
    _held: Held,
}

impl http_body::Body for FullHeld {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        std::task::Poll::Ready(self.data.take().map(|d| Ok(Frame::data(d))))
    }

    fn is_end_stream(&self) -> bool {
        self.data.is_none()
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.data.as_ref().map_or(0, |d| d.len() as u64))
    }
}

/// Why a body could not be collected within the budget.
#[derive(Debug)]
pub enum HeldCollectError {
    /// Larger than the limit (known from `Content-Length` or as it came).
    TooLarge(usize),
    /// The memory budget refused it.
    Budget(Refusal),
    /// The connection failed mid-body.
    Io(String),
}

/// Reads a whole body, refusing more than `limit` bytes (from its
/// `Content-Length` before reading any of it), and taking `factor` bytes
/// from the budget per byte read (2: the bytes and their renamed copy)
/// before holding them; `held` keeps them.
pub async fn collect_held<B>(
    b: B,
    limit: usize,
    factor: usize,
    held: &mut Held,
    deadline: &mut budget::Deadline,
) -> Result<Bytes, HeldCollectError>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: Into<BoxError>,
{
    let mut b = std::pin::pin!(b);
    let hint = b.size_hint();
    if hint.lower() > limit as u64 {
        return Err(HeldCollectError::TooLarge(limit));
    }
    if let Some(n) = hint.exact() {
        // Known length: taken whole before any of it is read.
        if let Err(r) = held.grow(n as usize * factor, deadline).await {
            if r == Refusal::Busy {
                drain(b.as_mut(), limit).await;
            }
            return Err(HeldCollectError::Budget(r));
        }
    }
    let taken = held.bytes();
    // A body that comes in one frame (most answers) is that frame: no
    // copy. A second frame starts the copy, allocated once for a body of
    // known length, never doubled past what was taken.
    let mut first: Option<Bytes> = None;
    let mut out = bytes::BytesMut::new();
    while let Some(f) = b.frame().await {
        let f = f.map_err(|e| HeldCollectError::Io(e.into().to_string()))?;
        let Ok(data) = f.into_data() else { continue };
        let len = first.as_ref().map_or(out.len(), Bytes::len);
        if len + data.len() > limit {
            return Err(HeldCollectError::TooLarge(limit));
        }
        let need = (len + data.len()) * factor;
        if need > taken {
            if let Err(r) = held.set(need, deadline).await {
                if r == Refusal::Busy {
                    drop((first, out));
                    drain(b.as_mut(), limit).await;
                }
                return Err(HeldCollectError::Budget(r));
            }
        }
        if first.is_none() && out.is_empty() {
            first = Some(data);
            continue;
        }
        if let Some(f) = first.take() {
            let known = hint.exact().unwrap_or(0) as usize;
            out.reserve(known.max(f.len() + data.len()));
            out.extend_from_slice(&f);
        }
        out.extend_from_slice(&data);
    }
    Ok(first.unwrap_or_else(|| out.freeze()))
}

/// Reads and drops the rest of a body refused while busy (within the
/// limit, so at most that much is read, a chunk at a time, none of it
/// held; for at most 5 s), so the client reads the answer on a connection
/// that is not reset under its request.
async fn drain<B>(mut b: std::pin::Pin<&mut B>, limit: usize)
where
    B: http_body::Body<Data = Bytes>,
{
    let mut read = 0;
    let all = async {
        while let Some(Ok(f)) = b.frame().await {
            if let Ok(d) = f.into_data() {
                read += d.len();
                if read > limit {
                    break;
                }
            }
        }
    };
    let _ = tokio::time::timeout(std::time::Duration::from_secs(5), all).await;
}

/// The largest single watch event or frame regroup buffers when not told
/// (`limits.maxObjectBytes` for watches).
pub const MAX_FRAME: usize = 64 << 20;

struct FrameState<B, F> {
    body: B,
    framer: Framer,
    rewrite: F,
    upstream_done: bool,
    failed: bool,
    /// What the frame being read (and its renamed copy) takes.
    held: Held,
    limit: usize,
}

/// What became of one frame's content.
#[derive(Debug, PartialEq, Eq)]
pub enum Rewritten {
    /// Unchanged: the frame is sent as it came.
    Same,
    /// This content, framed again.
    New(Vec<u8>),
    /// Nothing is sent for this frame.
    Dropped,
}

/// Rewrites a stream frame by frame as frames arrive, never waiting for the
/// end: each complete frame's content (without its `\n` or length prefix)
/// is given to `rewrite`, and what it returns is framed again and sent on
/// its own (or nothing, for a dropped frame). A frame that can't be rewritten ends the stream with
/// `on_error`'s last frame (a watch ERROR event), so the client re-lists
/// instead of seeing unrenamed bytes. Dropping the returned body drops the
/// upstream body, closing it.
///
/// Each frame is at most `limit` bytes, and its bytes (twice: the frame
/// and its renamed copy) are taken from the memory budget as they arrive
/// (`held`, given back as each frame is sent); a budget that stays spent
/// ends the stream (a JSON watch with a 429 `ERROR` event: the client
/// watches again).
pub fn rewrite_frames<B, F, E>(
    body: B,
    framing: Framing,
    limit: usize,
    held: Held,
    rewrite: F,
    on_error: E,
) -> Body
where
    B: Received,
    F: Fn(&[u8]) -> Result<Rewritten, RewriteError> + Send + Sync + 'static,
    E: Fn(&RewriteError) -> Bytes + Send + Sync + 'static,
{
    let state = FrameState {
        body,
        framer: Framer::new(framing, limit),
        rewrite,
        upstream_done: false,
        failed: false,
        held,
        limit,
    };
    let on_error = std::sync::Arc::new(on_error);
    let s = stream::unfold(state, move |mut st| {
        let on_error = on_error.clone();
        async move {
            if st.failed {
                return None;
            }
            loop {
                let frame = match st.framer.next_frame() {
                    Ok(f) => f,
                    Err(e) => {
                        // A hostile or broken length prefix (or an endless
                        // line): never buffer without bound.
                        if let crate::rewrite::framing::FrameError::TooLarge { bytes, .. } = &e {
                            budget::refused(Reason::ObjectTooLarge, "a watch event", *bytes);
                        }
                        tracing::error!("upstream stream: {e}; closing the stream");
                        return None;
                    }
                };
                if let Some(f) = frame {
                    let framing = st.framer.framing();
                    return match (st.rewrite)(framing.content(&f)) {
                        Ok(Rewritten::Dropped) => continue,
                        Ok(Rewritten::Same) => Some((Ok(Frame::data(f)), st)),
                        Ok(Rewritten::New(out)) => match framing.frame(&out) {
                            Ok(out) => Some((Ok(Frame::data(Bytes::from(out))), st)),
                            Err(e) => {
                                tracing::error!("upstream stream: {e}; closing the stream");
                                None
                            }
                        },
                        Err(e) => {
                            tracing::error!(
                                "upstream stream frame can't be renamed, closing the stream: {e}"
                            );
                            st.failed = true;
                            let last = on_error(&e);
                            if last.is_empty() {
                                return None;
                            }
                            Some((Ok(Frame::data(last)), st))
                        }
                    };
                }
                if st.upstream_done {
                    if st.framer.pending() > 0 {
                        tracing::warn!(
                            bytes = st.framer.pending(),
                            "upstream stream ended mid-frame; dropping the partial frame"
                        );
                    }
                    return None;
                }
                // Frames already sent are no longer held.
                st.held.shrink(st.framer.pending() * 2);
                match st.body.frame().await {
                    Some(Ok(f)) => {
                        if let Ok(data) = f.into_data() {
                            let need = (st.framer.pending() + data.len()) * 2;
                            let mut deadline = budget::budget().deadline();
                            if let Err(r) = st.held.set(need, &mut deadline).await {
                                let what = "a watch event";
                                let f = r.failure(what, true);
                                tracing::error!(
                                    "upstream stream: {}; closing the stream",
                                    f.message
                                );
                                st.failed = true;
                                let last = f.watch_error_event(framing);
                                if last.is_empty() {
                                    return None;
                                }
                                return Some((Ok(Frame::data(last)), st));
                            }
                            st.framer.push(&data);
                        }
                    }
                    Some(Err(e)) => {
                        tracing::warn!("upstream stream ended with an error: {e}");
                        st.upstream_done = true;
                        // Drop a partial frame: never forward half an event.
                        st.framer = Framer::new(framing, st.limit);
                    }
                    None => st.upstream_done = true,
                }
            }
        }
    });
    StreamBody::new(s).boxed()
}

/// Newline-delimited JSON read line by line, as regroup's own watches need
/// (not forwarded anywhere): each line without its `\n`.
pub struct Lines<B = Incoming> {
    body: B,
    framer: Framer,
}

impl<B: Received> Lines<B> {
    /// Reads `body`, refusing lines longer than `limit` bytes.
    pub fn new(body: B, limit: usize) -> Lines<B> {
        Lines {
            body,
            framer: Framer::new(Framing::Lines, limit),
        }
    }

    /// The next whole line; `None` at the end of the body (a partial last
    /// line is dropped: never half an event).
    pub async fn next(&mut self) -> Result<Option<Bytes>, LinesError> {
        loop {
            if let Some(line) = self.framer.next_frame()? {
                return Ok(Some(line.slice(..line.len() - 1)));
            }
            match self.body.frame().await {
                Some(Ok(f)) => {
                    if let Ok(data) = f.into_data() {
                        self.framer.push(&data);
                    }
                }
                Some(Err(e)) => return Err(LinesError::Read(e)),
                None => return Ok(None),
            }
        }
    }
}

/// Why [`Lines`] stopped before the body's end.
#[derive(Debug, thiserror::Error)]
pub enum LinesError {
    /// A line longer than the limit.
    #[error(transparent)]
    Frame(#[from] crate::rewrite::framing::FrameError),
    /// The body could not be read.
    #[error(transparent)]
    Read(hyper::Error),
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body::Body as _;

    /// A body of these frames, of unknown length.
    fn frames(parts: &[&'static [u8]]) -> impl http_body::Body<Data = Bytes, Error = BoxError> {
        let items: Vec<Result<Frame<Bytes>, BoxError>> = parts
            .iter()
            .map(|p| Ok(Frame::data(Bytes::from_static(p))))
            .collect();
        StreamBody::new(stream::iter(items))
    }

    #[tokio::test]
    async fn a_whole_body_holding_its_bytes_is_one_frame_then_gives_them_back() {
        let b = budget::Budget::for_test(100);
        let mut held = b.empty();
        held.grow(40, &mut b.deadline()).await.unwrap();
        let frame = Bytes::from_static(b"{\"kind\":\"Foo\"}");
        let body = full_held(frame.clone(), held);
        assert_eq!(body.size_hint().exact(), Some(frame.len() as u64));
        assert!(!body.is_end_stream());
        assert_eq!(b.in_use(), 40);
        let got = body.collect().await.unwrap().to_bytes();
        assert_eq!(got, frame);
        assert_eq!(
            got.as_ptr(),
            frame.as_ptr(),
            "the bytes themselves, not a copy"
        );
        assert_eq!(b.in_use(), 0, "given back when the body is dropped");

        let none = full_held(Bytes::new(), b.empty());
        assert!(none.is_end_stream());
        assert_eq!(none.size_hint().exact(), Some(0));
        assert!(none.collect().await.unwrap().to_bytes().is_empty());
    }

    #[tokio::test]
    async fn an_ended_body_passes_as_an_empty_one_and_any_other_as_it_streams() {
        let ended =
            pass(Full::new(Bytes::new()).map_err(|never| -> hyper::Error { match never {} }));
        assert!(ended.is_end_stream());
        assert_eq!(ended.size_hint().exact(), Some(0));
        let data = Bytes::from_static(b"abc");
        let streaming =
            pass(Full::new(data.clone()).map_err(|never| -> hyper::Error { match never {} }));
        assert!(!streaming.is_end_stream());
        assert_eq!(streaming.collect().await.unwrap().to_bytes(), data);
    }

    #[tokio::test]
    async fn a_body_of_one_frame_is_that_frame_uncopied() {
        let b = budget::budget();
        let mut held = b.empty();
        let frame = Bytes::from_static(b"{\"kind\":\"Foo\"}");
        let got = collect_held(
            Full::new(frame.clone()),
            100,
            2,
            &mut held,
            &mut b.deadline(),
        )
        .await
        .unwrap();
        assert_eq!(got, frame);
        assert_eq!(got.as_ptr(), frame.as_ptr(), "the frame itself, not a copy");
        assert_eq!(held.bytes(), 2 * frame.len());
    }

    #[tokio::test]
    async fn frames_are_joined_in_order_and_held_twice() {
        let b = budget::budget();
        let mut held = b.empty();
        let got = collect_held(
            frames(&[b"ab", b"", b"cde", b"f"]),
            100,
            2,
            &mut held,
            &mut b.deadline(),
        )
        .await
        .unwrap();
        assert_eq!(&got[..], b"abcdef");
        assert_eq!(held.bytes(), 12);
    }

    #[tokio::test]
    async fn a_body_past_the_limit_is_refused_whether_in_one_frame_or_more() {
        let b = budget::budget();
        let mut held = b.empty();
        let one = collect_held(frames(&[b"abcdef"]), 5, 1, &mut held, &mut b.deadline()).await;
        assert!(matches!(one, Err(HeldCollectError::TooLarge(5))));
        let mut held = b.empty();
        let two = collect_held(
            frames(&[b"abc", b"def"]),
            5,
            1,
            &mut held,
            &mut b.deadline(),
        )
        .await;
        assert!(matches!(two, Err(HeldCollectError::TooLarge(5))));
    }
}
