//! The streams regroup has open on one h2 connection, counted by regroup
//! itself: hyper's h2 client does not say how many streams a connection
//! carries, and queues a request beyond the server's
//! `SETTINGS_MAX_CONCURRENT_STREAMS` without a word (it waits until a
//! stream ends, which for a watch can take many minutes). The pool reads
//! the count to open another connection first, as client-go's transport
//! does.
//!
//! A stream is counted from when the pool takes it for a request until
//! the response body ends or is dropped, or the send fails, or the
//! request is dropped before its response headers.
//!
//! Every connection's count is listed (weakly) for the metrics, which sum
//! them at a scrape: the gauge costs a request nothing.

use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Frame, SizeHint};
use hyper::body::Incoming;

/// One h2 connection's streams: how many regroup has open, and how many
/// the server allows (its `SETTINGS_MAX_CONCURRENT_STREAMS` as hyper last
/// knew it: read by the pool once the server's SETTINGS are applied, then
/// kept current by the task that drives the connection).
#[derive(Debug)]
pub(super) struct Streams {
    open: AtomicUsize,
    peer_max: AtomicUsize,
}

impl Streams {
    /// `peer_max`: the server's limit as known; 0, no room for any request
    /// but the first, until the server's SETTINGS are read
    /// (`server_settings.rs`).
    pub(super) fn new(peer_max: usize) -> Arc<Streams> {
        Arc::new(Streams {
            open: AtomicUsize::new(0),
            peer_max: AtomicUsize::new(peer_max),
        })
    }

    /// Streams open now.
    pub(super) fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }

    /// Records the server's limit (the connection's driver, after a poll).
    pub(super) fn set_peer_max(&self, n: usize) {
        if self.peer_max.load(Ordering::Relaxed) != n {
            self.peer_max.store(n, Ordering::Relaxed);
        }
    }

    /// Whether fewer than `limit` streams (and fewer than the server's
    /// limit) are open.
    pub(super) fn has_room(&self, limit: usize) -> bool {
        self.open.load(Ordering::Relaxed) < limit.min(self.peer_max.load(Ordering::Relaxed))
    }

    /// The first stream of a connection opened for it: counted whatever
    /// the limits (before the server's SETTINGS arrive hyper may know no
    /// limit yet, and the request goes on this connection anyway).
    pub(super) fn take_first(self: &Arc<Self>) -> StreamGuard {
        self.open.fetch_add(1, Ordering::Relaxed);
        StreamGuard(self.clone())
    }

    /// A stream for one request when [`Streams::has_room`]. Called under
    /// the pool's lock, so two takers never both see the last free stream;
    /// releases only make room.
    pub(super) fn take(self: &Arc<Self>, limit: usize) -> Option<StreamGuard> {
        if !self.has_room(limit) {
            return None;
        }
        self.open.fetch_add(1, Ordering::Relaxed);
        Some(StreamGuard(self.clone()))
    }
}

/// One counted stream; released when dropped.
#[derive(Debug)]
pub(super) struct StreamGuard(Arc<Streams>);

impl Drop for StreamGuard {
    fn drop(&mut self) {
        self.0.open.fetch_sub(1, Ordering::Relaxed);
    }
}

/// The body of an upstream response: hyper's, with the h2 stream it holds
/// counted until it ends or is dropped (no count on HTTP/1.1).
#[derive(Debug)]
pub struct ResponseBody {
    inner: Incoming,
    stream: Option<StreamGuard>,
}

impl ResponseBody {
    pub(super) fn new(inner: Incoming, stream: Option<StreamGuard>) -> ResponseBody {
        ResponseBody { inner, stream }
    }

    /// hyper's body, the stream (if any) released: for a protocol upgrade,
    /// which hyper hands over only from its own response type (upgrades go
    /// over HTTP/1.1, never counted).
    pub fn into_incoming(self) -> Incoming {
        self.inner
    }
}

impl http_body::Body for ResponseBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        let polled = Pin::new(&mut self.inner).poll_frame(cx);
        // The end or an error ends the stream: released now, not when the
        // caller gets round to dropping the body.
        if matches!(polled, Poll::Ready(None) | Poll::Ready(Some(Err(_)))) {
            self.stream = None;
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stream_is_taken_below_both_limits_and_released_when_dropped() {
        let s = Streams::new(2);
        let a = s.take(10).expect("first");
        let b = s.take(10).expect("second");
        assert!(s.take(10).is_none(), "the server's limit, 2");
        assert_eq!(s.open(), 2);
        drop(a);
        assert_eq!(s.open(), 1);
        let c = s.take(1);
        assert!(c.is_none(), "regroup's limit, 1");
        s.set_peer_max(100);
        drop(b);
        let c = s.take(1).expect("room again");
        assert!(s.take(1).is_none());
        drop(c);
        assert_eq!(s.open(), 0);
    }

    #[test]
    fn a_connections_first_stream_is_counted_before_any_limit_is_known() {
        let tallies = crate::upstream::Tallies::default();
        let s = Streams::new(0);
        tallies.streams_opened(&s);
        let first = s.take_first();
        assert_eq!(s.open(), 1);
        assert!(s.take(100).is_none(), "no room under a limit of 0");
        assert_eq!(tallies.open_h2_streams(), 1);
        drop(first);
        assert_eq!(s.open(), 0);
        assert_eq!(tallies.open_h2_streams(), 0);
        drop(s);
        assert_eq!(tallies.open_h2_streams(), 0, "a connection gone is dropped");
    }
}
