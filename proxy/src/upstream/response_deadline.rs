//! The wait for the upstream's response headers
//! (`limits.upstreamResponseHeaderTimeout`), bounded by one coarse timer
//! per upstream instead of a tokio timer per request.
//!
//! A tokio `timeout` registers a timer in the runtime's wheel at its first
//! poll and removes it when dropped, under the wheel's lock: measured at
//! ~2.8k instructions a request, for a limit that almost never fires. Here
//! a request waiting for its headers takes a slot in a small table (an
//! uncontended lock, an insert, its waker) and gives it back when the
//! headers come; one task per upstream advances a tick counter every
//! [`Deadlines::period`] and wakes the waits whose tick has come. A wait
//! lasts at least the limit and at most one period more: a tenth of the
//! limit, at most a second (what docs/config.md promises).

use std::future::Future;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::task::{Poll, Waker};
use std::time::Duration;

use slab::Slab;

/// The coarse timer of one upstream's response-header waits.
pub(super) struct Deadlines {
    shared: Arc<Shared>,
    /// The limit, as configured.
    timeout: Duration,
    /// Ticks a wait lasts at least (the limit rounded up to whole periods).
    ticks: u64,
}

struct Shared {
    /// Periods elapsed since the sweeper started.
    tick: AtomicU64,
    period: Duration,
    table: Mutex<Table>,
}

#[derive(Default)]
struct Table {
    waits: Slab<Wait>,
    /// The task advancing the ticks; started by the first wait (inside the
    /// runtime), started again if its runtime went away.
    sweeper: Option<tokio::task::JoinHandle<()>>,
}

struct Wait {
    /// The tick at which it has waited long enough.
    due: u64,
    waker: Waker,
    fired: bool,
}

/// The wait for the response headers outlasted the limit.
#[derive(Debug)]
pub(super) struct Elapsed;

impl Deadlines {
    /// Waits of at most `timeout` (and one period).
    pub(super) fn new(timeout: Duration) -> Deadlines {
        let period = Deadlines::period(timeout);
        let ticks = timeout.as_nanos().div_ceil(period.as_nanos().max(1)) as u64;
        Deadlines {
            shared: Arc::new(Shared {
                tick: AtomicU64::new(0),
                period,
                table: Mutex::new(Table::default()),
            }),
            timeout,
            ticks,
        }
    }

    /// How often the waits are checked: a tenth of the limit, within 5 ms
    /// and 1 s.
    fn period(timeout: Duration) -> Duration {
        (timeout / 10).clamp(Duration::from_millis(5), Duration::from_secs(1))
    }

    /// The limit, as configured.
    pub(super) fn timeout(&self) -> Duration {
        self.timeout
    }

    /// `f`'s output, or [`Elapsed`] once the limit has passed. A future of
    /// its own, not an `async fn`: `f` (hyper's send, kilobytes) is moved
    /// once into it, where each `async` layer copied it again.
    pub(super) fn bound<F: Future>(&self, f: F) -> Bound<'_, F> {
        Bound {
            f,
            deadlines: self,
            slot: Slot {
                shared: &self.shared,
                key: None,
            },
        }
    }
}

pin_project_lite::pin_project! {
    /// [`Deadlines::bound`]'s future.
    pub(super) struct Bound<'a, F> {
        #[pin]
        f: F,
        deadlines: &'a Deadlines,
        slot: Slot<'a>,
    }
}

impl<F: Future> Future for Bound<'_, F> {
    type Output = Result<F::Output, Elapsed>;

    fn poll(self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(v) = this.f.poll(cx) {
            return Poll::Ready(Ok(v));
        }
        let d = *this.deadlines;
        let mut table = d.shared.lock();
        match this.slot.key {
            None => {
                // The tick now may be up to one period old: one more makes
                // the wait at least the limit.
                let due = d.shared.tick.load(Ordering::Relaxed) + d.ticks + 1;
                this.slot.key = Some(table.waits.insert(Wait {
                    due,
                    waker: cx.waker().clone(),
                    fired: false,
                }));
                if table.sweeper.as_ref().is_none_or(|h| h.is_finished()) {
                    table.sweeper = Some(tokio::spawn(sweep(Arc::downgrade(&d.shared))));
                }
                Poll::Pending
            }
            Some(k) => {
                let w = &mut table.waits[k];
                if w.fired {
                    return Poll::Ready(Err(Elapsed));
                }
                if !w.waker.will_wake(cx.waker()) {
                    w.waker = cx.waker().clone();
                }
                Poll::Pending
            }
        }
    }
}

impl Shared {
    fn lock(&self) -> std::sync::MutexGuard<'_, Table> {
        self.table.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A wait's place in the table, given back however the wait ends (the
/// headers came, the limit passed, the request was dropped).
struct Slot<'a> {
    shared: &'a Shared,
    key: Option<usize>,
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        if let Some(k) = self.key {
            self.shared.lock().waits.remove(k);
        }
    }
}

/// Advances the ticks every period and wakes the waits that are due, until
/// the upstream is dropped.
async fn sweep(shared: Weak<Shared>) {
    let Some(period) = shared.upgrade().map(|s| s.period) else {
        return;
    };
    let mut every = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    // Never two ticks closer than a period: a wait never ends early.
    every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        every.tick().await;
        let Some(s) = shared.upgrade() else {
            return;
        };
        let now = s.tick.fetch_add(1, Ordering::Relaxed) + 1;
        let mut table = s.lock();
        for (_, w) in table.waits.iter_mut() {
            if !w.fired && w.due <= now {
                w.fired = true;
                w.waker.wake_by_ref();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Instant;

    #[tokio::test]
    async fn a_wait_that_never_ends_fires_after_the_limit_and_not_before() {
        let d = Deadlines::new(Duration::from_millis(300));
        let started = Instant::now();
        let r = d.bound(std::future::pending::<()>()).await;
        let took = started.elapsed();
        assert!(r.is_err());
        assert!(took >= Duration::from_millis(300), "fired after {took:?}");
        assert_eq!(d.shared.lock().waits.len(), 0, "its slot is given back");
    }

    #[tokio::test]
    async fn an_answer_in_time_is_returned_and_its_slot_given_back() {
        let d = Deadlines::new(Duration::from_secs(60));
        let r = d
            .bound(async {
                tokio::task::yield_now().await;
                7
            })
            .await;
        assert_eq!(r.unwrap(), 7);
        assert_eq!(d.shared.lock().waits.len(), 0);
        // Ready at once: no slot taken at all.
        assert_eq!(d.bound(async { 8 }).await.unwrap(), 8);
    }

    #[tokio::test]
    async fn a_dropped_wait_gives_its_slot_back() {
        let d = Deadlines::new(Duration::from_secs(60));
        let wait = d.bound(std::future::pending::<()>());
        let _ = tokio::time::timeout(Duration::from_millis(20), wait).await;
        assert_eq!(d.shared.lock().waits.len(), 0);
    }

    #[test]
    fn the_period_is_a_tenth_of_the_limit_within_5ms_and_1s() {
        assert_eq!(
            Deadlines::period(Duration::from_secs(2)),
            Duration::from_millis(200)
        );
        assert_eq!(
            Deadlines::period(Duration::from_secs(60)),
            Duration::from_secs(1)
        );
        assert_eq!(
            Deadlines::period(Duration::from_millis(10)),
            Duration::from_millis(5)
        );
        assert_eq!(Deadlines::new(Duration::from_secs(60)).ticks, 60);
    }
}
