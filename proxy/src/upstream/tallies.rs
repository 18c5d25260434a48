//! What one upstream counts for the metrics, read at each scrape: its
//! connections by protocol, the streams open on its h2 connections, the h2
//! connections closed for an unanswered ping, and regroup's credential
//! obtained and failed by source. Each `Upstream` has its own; `regroup
//! serve` hands every upstream's to the metrics (`Metrics::count_upstream`),
//! which sum them.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use super::streams::Streams;

/// One upstream's tallies.
#[derive(Debug, Default)]
pub struct Tallies {
    /// HTTP/1.1 connections open.
    pub(super) open_h1: AtomicU64,
    /// h2 connections open.
    pub(super) open_h2: AtomicU64,
    /// h2 connections closed because a ping went unanswered.
    ping_closes: AtomicU64,
    /// Every h2 connection's streams; entries of connections gone (and
    /// their last stream ended) are dropped at a scrape.
    streams: Mutex<Vec<Weak<Streams>>>,
    /// By source: credentials obtained (exec plugin run, file read) and
    /// failures to obtain one.
    credentials: Mutex<Vec<(&'static str, u64, u64)>>,
}

impl Tallies {
    /// Connections open now: (HTTP/1.1, h2).
    pub fn open_connections(&self) -> (u64, u64) {
        (
            self.open_h1.load(Ordering::Relaxed),
            self.open_h2.load(Ordering::Relaxed),
        )
    }

    /// h2 connections closed because a ping went unanswered, since start.
    pub fn unanswered_ping_closes(&self) -> u64 {
        self.ping_closes.load(Ordering::Relaxed)
    }

    /// Streams open now on the h2 connections.
    pub fn open_h2_streams(&self) -> usize {
        let mut all = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        let mut open = 0;
        all.retain(|s| match s.upgrade() {
            Some(s) => {
                open += s.open();
                true
            }
            None => false,
        });
        open
    }

    /// By source: credentials obtained and failures to obtain one, since
    /// start.
    pub fn credentials(&self) -> Vec<(&'static str, u64, u64)> {
        self.credentials
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(super) fn ping_closed(&self) {
        self.ping_closes.fetch_add(1, Ordering::Relaxed);
    }

    /// A new h2 connection's streams, counted until it is gone.
    pub(super) fn streams_opened(&self, s: &Arc<Streams>) {
        let mut all = self.streams.lock().unwrap_or_else(|p| p.into_inner());
        // Connections come and go without scrapes (none configured): the
        // list is pruned here too, so it never outgrows the live ones much.
        if all.len() >= 64 && all.len().is_power_of_two() {
            all.retain(|w| w.strong_count() > 0);
        }
        all.push(Arc::downgrade(s));
    }

    /// A credential obtained from `source`, or a failure to.
    pub(super) fn credential(&self, source: &'static str, obtained: bool) {
        let mut t = self.credentials.lock().unwrap_or_else(|p| p.into_inner());
        let i = match t.iter().position(|(s, _, _)| *s == source) {
            Some(i) => i,
            None => {
                t.push((source, 0, 0));
                t.len() - 1
            }
        };
        if obtained {
            t[i].1 += 1;
        } else {
            t[i].2 += 1;
        }
    }
}

/// One open connection in its upstream's tally, from its handshake until
/// its driver ends.
pub(super) struct Counted(Arc<Tallies>, bool);

impl Counted {
    /// A connection opened: h2 (`true`) or HTTP/1.1.
    pub(super) fn new(tallies: &Arc<Tallies>, h2: bool) -> Counted {
        tallies.gauge(h2).fetch_add(1, Ordering::Relaxed);
        Counted(tallies.clone(), h2)
    }
}

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.gauge(self.1).fetch_sub(1, Ordering::Relaxed);
    }
}

impl Tallies {
    fn gauge(&self, h2: bool) -> &AtomicU64 {
        if h2 {
            &self.open_h2
        } else {
            &self.open_h1
        }
    }
}
