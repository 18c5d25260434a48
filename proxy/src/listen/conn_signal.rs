//! What wakes a connection's loop besides its own I/O: the watchdog's
//! expiries and shutdown (`connection.rs`, `drive`). A count and an
//! `AtomicWaker`: the loop reads two atomics when it is polled, where a
//! `Notify` and a shutdown `watch` receiver each took a lock on every poll
//! of the connection, several a request (~1k instructions).

use std::sync::atomic::{AtomicU32, Ordering};
use std::task::Waker;

use futures_util::task::AtomicWaker;

/// A connection's wake-ups from outside (see the module).
#[derive(Debug, Default)]
pub struct ConnSignal {
    /// Sweeps that found the connection past a limit.
    expired: AtomicU32,
    waker: AtomicWaker,
}

impl ConnSignal {
    /// The watchdog found the connection past a limit.
    pub fn expire(&self) {
        self.expired.fetch_add(1, Ordering::AcqRel);
        self.waker.wake();
    }

    /// Wakes the loop to look again (shutdown began).
    pub fn wake(&self) {
        self.waker.wake();
    }

    /// How many times [`expire`](Self::expire) was called.
    pub fn expirations(&self) -> u32 {
        self.expired.load(Ordering::Acquire)
    }

    /// The loop's waker, registered before it reads what woke it.
    pub fn register(&self, w: &Waker) {
        self.waker.register(w);
    }
}
