//! The listeners' coarse clock: milliseconds advanced by the watchdogs'
//! sweeps, read by a connection with one atomic load (no clock call on the
//! request path).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::Instant;

static START: OnceLock<Instant> = OnceLock::new();
static NOW_MS: AtomicU64 = AtomicU64::new(0);

/// Milliseconds since the first watchdog started, as its last sweep read
/// them (every sweep of every listener advances it).
pub fn now_ms() -> u64 {
    NOW_MS.load(Ordering::Relaxed)
}

/// Reads the system clock into [`now_ms`]'s and returns it.
pub fn tick() -> u64 {
    let now = START.get_or_init(Instant::now).elapsed().as_millis() as u64;
    NOW_MS.fetch_max(now, Ordering::Relaxed);
    now_ms()
}
