//! Shutdown: stop accepting, drain in-flight requests, end watches cleanly,
//! within a grace period; and what the listeners share to get there.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use regroup_config::Limits;
use tokio::sync::{watch, Semaphore};

use crate::observe::metrics::Metrics;

/// Shared by every listener of one process.
#[derive(Debug)]
pub struct Lifecycle {
    tx: watch::Sender<bool>,
    shutting_down: Arc<AtomicBool>,
    /// Each listener's connection slots: all free again = drained.
    slots: Mutex<Vec<(Arc<Semaphore>, u32)>>,
}

impl Lifecycle {
    /// A running process.
    pub fn new() -> Arc<Lifecycle> {
        Arc::new(Lifecycle {
            tx: watch::channel(false).0,
            shutting_down: Arc::new(AtomicBool::new(false)),
            slots: Mutex::new(Vec::new()),
        })
    }

    /// Fires (becomes true) when shutdown begins.
    pub fn subscribe(&self) -> watch::Receiver<bool> {
        self.tx.subscribe()
    }

    /// True once shutdown began (for `/readyz`).
    pub fn flag(&self) -> Arc<AtomicBool> {
        self.shutting_down.clone()
    }

    /// A listener's connection slots, `n` in all.
    pub fn register(&self, slots: Arc<Semaphore>, n: u32) {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((slots, n));
    }

    /// Stops accepting; connections close once their requests are done
    /// (HTTP/2: GOAWAY), watches end at their next event boundary.
    pub fn begin_shutdown(&self) {
        self.shutting_down.store(true, Ordering::SeqCst);
        self.tx.send_replace(true);
    }

    /// Connections still open.
    pub fn open_connections(&self) -> usize {
        self.slots
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .iter()
            .map(|(s, n)| (*n as usize).saturating_sub(s.available_permits()))
            .sum()
    }

    /// Resolves when every registered listener's connections are closed.
    pub async fn drained(&self) {
        let slots: Vec<(Arc<Semaphore>, u32)> =
            self.slots.lock().unwrap_or_else(|p| p.into_inner()).clone();
        for (s, n) in slots {
            let _ = s.acquire_many(n).await;
        }
    }
}

/// What every accept loop and connection needs.
#[derive(Debug, Clone)]
pub struct Serving {
    /// Sizes and timeouts.
    pub limits: Arc<Limits>,
    /// Shutdown.
    pub lifecycle: Arc<Lifecycle>,
    /// Where the listeners count connections, requests and refusals.
    pub metrics: Arc<Metrics>,
}

impl Serving {
    /// With these limits.
    pub fn new(limits: Limits, lifecycle: Arc<Lifecycle>) -> Serving {
        Serving {
            limits: Arc::new(limits),
            lifecycle,
            metrics: Arc::new(Metrics::new()),
        }
    }

    /// Counting into `metrics` (the process's, shared with the stacks).
    pub fn with_metrics(self, metrics: Arc<Metrics>) -> Serving {
        Serving { metrics, ..self }
    }
}

impl Default for Serving {
    /// The default limits, a lifecycle that never shuts down.
    fn default() -> Self {
        Serving::new(Limits::default(), Lifecycle::new())
    }
}

/// Resolves once shutdown began (never, if the sender is gone first).
pub async fn fired(rx: &mut watch::Receiver<bool>) {
    if rx.wait_for(|v| *v).await.is_err() {
        std::future::pending::<()>().await;
    }
}
