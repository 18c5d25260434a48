//! A response on its way to the caller, tracked: its request counts as in
//! flight until the body ends (idle connections and draining read it), and
//! a watch ends cleanly between two events once regroup shuts down (the
//! client sees the end of the stream and watches again).

use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::future::BoxFuture;
use http::Response;
use http_body::{Body as HttpBody, Frame, SizeHint};

use crate::body::{Body, BoxError};
use crate::serve::observe::metrics::metrics;

/// One connection's requests in flight and its clock readings, for the
/// [`watchdog`](super::watchdog) that closes it when it has been idle, or
/// without a whole request head, too long.
#[derive(Debug)]
pub struct ConnState {
    pub(crate) in_flight: AtomicUsize,
    pub(crate) requests: AtomicUsize,
    /// When the connection last had no request in flight (or opened), on
    /// the watchdog's coarse clock: a request reads an atomic, not the
    /// system clock.
    pub(crate) idle_since: AtomicU64,
    /// When it opened, on the same clock.
    pub(crate) opened: u64,
    /// HTTP/2: an idle connection waits for `idleTimeout` only (HTTP/1.1's
    /// header clock runs while it waits for the next request head).
    pub(crate) http2: bool,
    /// Why the watchdog asked it to close ([`Expiry`] as a number).
    pub(crate) expiry: AtomicU8,
    /// Woken by the watchdog: once to close gracefully, again to drop the
    /// connection if it has not closed by then.
    pub(crate) expired: tokio::sync::Notify,
}

impl Default for ConnState {
    fn default() -> Self {
        ConnState::new(false)
    }
}

impl ConnState {
    /// A connection opened now, speaking HTTP/2 or HTTP/1.1.
    pub fn new(http2: bool) -> ConnState {
        let now = super::coarse_clock::now_ms();
        ConnState {
            in_flight: AtomicUsize::new(0),
            requests: AtomicUsize::new(0),
            idle_since: AtomicU64::new(now),
            opened: now,
            http2,
            expiry: AtomicU8::new(0),
            expired: tokio::sync::Notify::new(),
        }
    }

    /// True until the connection's first request arrives.
    pub fn never_used(&self) -> bool {
        self.requests.load(Ordering::SeqCst) == 0
    }

    /// How long, in ms of the coarse clock at `now`, the connection has had
    /// no request in flight (zero while one is).
    pub fn idle_ms(&self, now: u64) -> u64 {
        if self.in_flight.load(Ordering::SeqCst) > 0 {
            return 0;
        }
        now.saturating_sub(self.idle_since.load(Ordering::SeqCst))
    }
}

/// A request in flight, until its response body ends or is dropped.
pub(crate) struct InFlight {
    conn: Arc<ConnState>,
}

impl InFlight {
    pub(crate) fn new(conn: Arc<ConnState>) -> InFlight {
        conn.in_flight.fetch_add(1, Ordering::SeqCst);
        conn.requests.fetch_add(1, Ordering::SeqCst);
        metrics().in_flight_add(1);
        InFlight { conn }
    }
}

impl Drop for InFlight {
    fn drop(&mut self) {
        self.conn
            .idle_since
            .store(super::coarse_clock::now_ms(), Ordering::SeqCst);
        self.conn.in_flight.fetch_sub(1, Ordering::SeqCst);
        metrics().in_flight_add(-1);
    }
}

/// Where a watch stream's event boundaries are, so a shutdown ends it
/// between two events, never inside one.
#[derive(Debug)]
pub enum Framing {
    /// Not a watch: never ended early.
    None,
    /// JSON (and YAML-less text) watches: one event per line.
    Lines {
        /// The last byte sent was a newline (or nothing was sent).
        at_boundary: bool,
    },
    /// Protobuf watches: 4-byte big-endian length, then the frame.
    LengthPrefixed {
        /// The length prefix read so far.
        header: [u8; 4],
        /// How many bytes of it.
        have: usize,
        /// Bytes of the current frame still to come.
        remaining: usize,
    },
}

impl Framing {
    fn feed(&mut self, data: &[u8]) {
        match self {
            Framing::None => {}
            Framing::Lines { at_boundary } => {
                if let Some(&b) = data.last() {
                    *at_boundary = b == b'\n';
                }
            }
            Framing::LengthPrefixed {
                header,
                have,
                remaining,
            } => {
                let mut d = data;
                while !d.is_empty() {
                    if *remaining > 0 {
                        let n = (*remaining).min(d.len());
                        *remaining -= n;
                        d = &d[n..];
                    } else {
                        header[*have] = d[0];
                        *have += 1;
                        d = &d[1..];
                        if *have == 4 {
                            *remaining = u32::from_be_bytes(*header) as usize;
                            *have = 0;
                        }
                    }
                }
            }
        }
    }

    fn at_boundary(&self) -> bool {
        match self {
            Framing::None => false,
            Framing::Lines { at_boundary } => *at_boundary,
            Framing::LengthPrefixed {
                have, remaining, ..
            } => *have == 0 && *remaining == 0,
        }
    }
}

/// A response body that keeps its request counted in flight until it ends,
/// and, for a watch, ends cleanly at the next event boundary once regroup
/// shuts down (the client sees the end of the stream and watches again).
pub struct Tracked {
    inner: Body,
    _token: InFlight,
    end: Option<BoxFuture<'static, ()>>,
    ending: bool,
    framing: Framing,
}

impl Tracked {
    pub(crate) fn wrap(
        resp: Response<Body>,
        token: InFlight,
        end: Option<BoxFuture<'static, ()>>,
        framing: Framing,
    ) -> Response<Tracked> {
        resp.map(|inner| Tracked {
            inner,
            _token: token,
            end,
            ending: false,
            framing,
        })
    }
}

impl HttpBody for Tracked {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = &mut *self;
        if !this.ending {
            if let Some(end) = this.end.as_mut() {
                if end.as_mut().poll(cx).is_ready() {
                    this.ending = true;
                    this.end = None;
                    tracing::debug!("shutting down: ending a watch at the next event");
                }
            }
        }
        if this.ending && this.framing.at_boundary() {
            return Poll::Ready(None);
        }
        let r = Pin::new(&mut this.inner).poll_frame(cx);
        if let Poll::Ready(Some(Ok(frame))) = &r {
            if let Some(d) = frame.data_ref() {
                this.framing.feed(d);
            }
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        (self.ending && self.framing.at_boundary()) || self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_boundaries_are_tracked() {
        let mut l = Framing::Lines { at_boundary: true };
        l.feed(b"{\"type\":\"ADDED\"");
        assert!(!l.at_boundary());
        l.feed(b"}\n");
        assert!(l.at_boundary());

        let mut p = Framing::LengthPrefixed {
            header: [0; 4],
            have: 0,
            remaining: 0,
        };
        assert!(p.at_boundary());
        p.feed(&[0, 0]);
        assert!(!p.at_boundary());
        p.feed(&[0, 3, b'a']);
        assert!(!p.at_boundary());
        p.feed(&[b'b', b'c', 0, 0, 0, 1, b'x']);
        assert!(p.at_boundary());
    }
}
