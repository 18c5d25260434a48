//! The one log line per request, under one target (`regroup::request`):
//! the listener, the method and the Kubernetes verb, the path with names
//! left out, the status, whole microseconds. A watch's line is written
//! when the watch ends, with its duration, the events sent and how it
//! ended; every other request's when its response headers are ready.

use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::Method;
use http_body::{Frame, SizeHint};

use crate::body::{Body, BoxError};

/// Writes a request's line now.
pub fn request_line(
    listener: &str,
    method: &Method,
    verb: &str,
    path: &dyn std::fmt::Display,
    status: u16,
    took: Duration,
) {
    // Fields are evaluated only when the line is logged.
    tracing::info!(
        target: "regroup::request",
        listener,
        %method,
        verb,
        %path,
        status,
        us = micros(took),
        "request"
    );
}

fn micros(d: Duration) -> u64 {
    u64::try_from(d.as_micros()).unwrap_or(u64::MAX)
}

/// Set once the process shuts down: a watch dropped after that was ended
/// by the drain, not by its client.
static SHUTTING_DOWN: AtomicBool = AtomicBool::new(false);

/// Marks the process as shutting down (`serve/run`, as the drain begins).
pub fn shutting_down() {
    SHUTTING_DOWN.store(true, Ordering::SeqCst);
}

/// What a watch's line says besides its events and duration.
pub struct WatchLine {
    pub listener: &'static str,
    pub method: Method,
    pub verb: &'static str,
    /// The path template (names left out), formatted once.
    pub path: String,
    pub status: u16,
    pub started: Instant,
}

/// `body` (a watch's event stream), logging its request line when it is
/// dropped: at its end, or when the client leaves, or at shutdown.
pub fn logged_at_end(body: Body, line: WatchLine) -> Body {
    http_body_util::BodyExt::boxed(Logged {
        body,
        line,
        events: 0,
        end: None,
    })
}

struct Logged {
    body: Body,
    line: WatchLine,
    /// Data frames sent: a renamed watch sends one event per frame.
    events: u64,
    /// Set when the stream ended on its own (`upstream`) or failed
    /// (`error`); unset when dropped before (`client` or `shutdown`).
    end: Option<&'static str>,
}

impl http_body::Body for Logged {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let r = Pin::new(&mut self.body).poll_frame(cx);
        match &r {
            Poll::Ready(Some(Ok(f))) if f.is_data() => self.events += 1,
            Poll::Ready(Some(Err(_))) => self.end = Some("error"),
            Poll::Ready(None) => {
                self.end.get_or_insert("upstream");
            }
            _ => {}
        }
        r
    }

    fn is_end_stream(&self) -> bool {
        self.body.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.body.size_hint()
    }
}

impl Drop for Logged {
    fn drop(&mut self) {
        let end = self.end.unwrap_or(if SHUTTING_DOWN.load(Ordering::SeqCst) {
            "shutdown"
        } else {
            "client"
        });
        let l = &self.line;
        tracing::info!(
            target: "regroup::request",
            listener = l.listener,
            method = %l.method,
            verb = l.verb,
            path = %l.path,
            status = l.status,
            us = micros(l.started.elapsed()),
            events = self.events,
            end,
            "request"
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http_body_util::BodyExt;

    fn line() -> WatchLine {
        WatchLine {
            listener: "sidecar",
            method: Method::GET,
            verb: "watch",
            path: "/api/v1/namespaces/{namespace}/configmaps".into(),
            status: 200,
            started: Instant::now(),
        }
    }

    #[tokio::test]
    async fn events_are_counted_and_the_end_is_named() {
        let frames = futures_util::stream::iter(
            ["a\n", "b\n", "c\n"].map(|s| Ok::<_, BoxError>(Frame::data(Bytes::from(s)))),
        );
        let body = http_body_util::StreamBody::new(frames).boxed();
        let mut logged = Logged {
            body,
            line: line(),
            events: 0,
            end: None,
        };
        while let Some(f) = logged.frame().await {
            f.unwrap();
        }
        assert_eq!((logged.events, logged.end), (3, Some("upstream")));

        let pending = http_body_util::StreamBody::new(futures_util::stream::pending::<
            Result<Frame<Bytes>, BoxError>,
        >())
        .boxed();
        let cut = Logged {
            body: pending,
            line: line(),
            events: 0,
            end: None,
        };
        assert_eq!(cut.end, None, "dropped before its end: client or shutdown");
    }
}
