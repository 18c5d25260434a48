//! The connection timeouts (`limits.headerReadTimeout`, `idleTimeout`) on
//! one coarse timer per listener instead of a timer per request: a task
//! sweeps the listener's connections every [`Watchdog::period`] and wakes
//! those past a limit. Hyper's own header timer boxes a sleep for every
//! request head it reads; here a request only stores a clock reading (an
//! atomic, see `coarse_clock`) when its response ends.
//!
//! The rules, per connection (`expiry`):
//! - no request yet, `headerReadTimeout` after it opened (a caller that
//!   sends nothing, or only part of a head, is a slowloris);
//! - HTTP/1.1 with no request in flight for `headerReadTimeout`: the next
//!   request head is late (the clock runs from the end of the last response,
//!   as hyper's header timer did), or for `idleTimeout` if that is shorter;
//! - HTTP/2 with no request in flight for `idleTimeout`;
//! - HTTP/1.1 with a request in flight whose client closed the connection
//!   (`peer_gone`: hyper does not read it then): dropped at once.
//!
//! A limit is never enforced early: the clock lags real time by at most a
//! period, so a connection counts as expired only once it is past the limit
//! plus a period, and it is woken at most a period after that. With the
//! period an eighth of the shortest limit, at most a second, a limit holds
//! to within two periods (2 s of the default 32 s). Woken once, the
//! connection closes gracefully (HTTP/2: GOAWAY); still there at a later
//! sweep, it is dropped.

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use regroup_config::Limits;

use super::coarse_clock::tick;
use super::in_flight::ConnState;
use super::lifecycle::{fired, Lifecycle};

/// Why a connection is asked to close.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Expiry {
    /// No request within `headerReadTimeout` of opening.
    NoRequest = 1,
    /// HTTP/1.1: the next request head not read within `headerReadTimeout`.
    HeaderRead = 2,
    /// No request in flight for `idleTimeout`.
    Idle = 3,
    /// HTTP/1.1: the client closed the connection while a request was in
    /// flight (`peer_gone`): dropped, with the request.
    PeerGone = 4,
}

impl Expiry {
    /// For the log line.
    pub fn describe(code: u8) -> &'static str {
        match code {
            1 => "closing a connection with no request (limits.headerReadTimeout)",
            2 => "closing a connection whose request head is late (limits.headerReadTimeout)",
            4 => "the client closed its connection with a request in flight",
            _ => "closing an idle connection (limits.idleTimeout)",
        }
    }
}

/// The limits as the sweep reads them, in ms.
#[derive(Debug, Clone, Copy)]
struct Rules {
    header_read: u64,
    idle: u64,
    period: u64,
}

/// Whether `c` is past a limit at `now` (coarse ms), and which.
fn expiry(c: &ConnState, now: u64, r: Rules) -> Option<Expiry> {
    let past = |since: u64, limit: u64| since > limit.saturating_add(r.period);
    if c.never_used() && past(now.saturating_sub(c.opened), r.header_read) {
        return Some(Expiry::NoRequest);
    }
    let idle = c.idle_ms(now);
    if !c.http2 && r.header_read <= r.idle && past(idle, r.header_read) {
        return Some(Expiry::HeaderRead);
    }
    past(idle, r.idle).then_some(Expiry::Idle)
}

/// Whether `c`'s client closed it while a request is in flight (HTTP/1.1:
/// one `poll(2)`, only for a connection with a request in flight).
fn peer_gone(c: &ConnState) -> Option<Expiry> {
    let fd = c.peer_fd?;
    (c.in_flight.load(Ordering::SeqCst) > 0 && super::peer_gone::closed(fd))
        .then_some(Expiry::PeerGone)
}

/// One listener's connections, swept on a coarse timer.
#[derive(Debug)]
pub struct Watchdog {
    conns: Mutex<Vec<Arc<ConnState>>>,
    rules: Rules,
}

impl Watchdog {
    /// Starts sweeping (on the current tokio runtime) until the watchdog
    /// and every connection it watches are gone; wakes every connection
    /// when `lifecycle`'s shutdown begins (each then reads its flag).
    pub fn start(limits: &Limits, lifecycle: &Lifecycle) -> Arc<Watchdog> {
        let w = Arc::new(Watchdog::new(limits));
        tick();
        let weak: Weak<Watchdog> = Arc::downgrade(&w);
        let period = w.period();
        let mut shutdown = lifecycle.subscribe();
        tokio::spawn(async move {
            let mut interval = tokio::time::interval(period);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut stopping = false;
            loop {
                tokio::select! {
                    _ = interval.tick() => {
                        let Some(w) = weak.upgrade() else { return };
                        w.sweep(tick());
                    }
                    _ = fired(&mut shutdown), if !stopping => {
                        let Some(w) = weak.upgrade() else { return };
                        w.wake_all();
                        stopping = true;
                    }
                }
            }
        });
        w
    }

    /// Wakes every connection (shutdown began). One watched after this
    /// reads the flag at its first poll: the flag was set before.
    fn wake_all(&self) {
        let conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        for c in conns.iter() {
            c.signal.wake();
        }
    }

    fn new(limits: &Limits) -> Watchdog {
        let ms = |d: Duration| d.as_millis().min(u64::MAX as u128) as u64;
        let (header_read, idle) = (ms(limits.header_read_timeout), ms(limits.idle_timeout));
        Watchdog {
            conns: Mutex::new(Vec::new()),
            rules: Rules {
                header_read,
                idle,
                period: (header_read.min(idle) / 8).clamp(20, 1000),
            },
        }
    }

    /// How often it sweeps.
    pub fn period(&self) -> Duration {
        Duration::from_millis(self.rules.period)
    }

    /// Watches `c` until the connection drops its last handle on it.
    pub fn watch(&self, c: Arc<ConnState>) {
        self.conns.lock().unwrap_or_else(|p| p.into_inner()).push(c);
    }

    /// Forgets closed connections, wakes those past a limit.
    fn sweep(&self, now: u64) {
        let mut conns = self.conns.lock().unwrap_or_else(|p| p.into_inner());
        conns.retain(|c| {
            // Only the list holds it: the connection is gone.
            if Arc::strong_count(c) == 1 {
                return false;
            }
            if let Some(why) = expiry(c, now, self.rules).or_else(|| peer_gone(c)) {
                c.expiry.store(why as u8, Ordering::Relaxed);
                c.signal.expire();
            }
            true
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::listen::coarse_clock::now_ms;
    use crate::listen::in_flight::InFlight;

    const R: Rules = Rules {
        header_read: 32_000,
        idle: 90_000,
        period: 1_000,
    };

    fn conn(http2: bool, opened: u64) -> Arc<ConnState> {
        let c = ConnState::new(http2, Default::default());
        let c = ConnState { opened, ..c };
        c.idle_since.store(opened, Ordering::SeqCst);
        Arc::new(c)
    }

    #[test]
    fn a_connection_without_a_request_expires_after_the_header_limit_never_before() {
        for http2 in [false, true] {
            let c = conn(http2, 5_000);
            assert_eq!(
                expiry(&c, 5_000 + 32_000, R),
                None,
                "at the limit: not early"
            );
            assert_eq!(expiry(&c, 5_000 + 33_000, R), None);
            assert_eq!(
                expiry(&c, 5_000 + 33_001, R),
                Some(Expiry::NoRequest),
                "http2={http2}"
            );
        }
    }

    #[test]
    fn http1_waits_for_its_next_head_for_the_header_limit_http2_for_the_idle_one() {
        let h1 = conn(false, 0);
        h1.requests.store(1, Ordering::SeqCst);
        h1.idle_since.store(10_000, Ordering::SeqCst);
        assert_eq!(expiry(&h1, 10_000 + 33_000, R), None);
        assert_eq!(expiry(&h1, 10_000 + 33_001, R), Some(Expiry::HeaderRead));
        let h2 = conn(true, 0);
        h2.requests.store(1, Ordering::SeqCst);
        h2.idle_since.store(10_000, Ordering::SeqCst);
        assert_eq!(expiry(&h2, 10_000 + 33_001, R), None);
        assert_eq!(expiry(&h2, 10_000 + 91_000, R), None);
        assert_eq!(expiry(&h2, 10_000 + 91_001, R), Some(Expiry::Idle));
    }

    #[test]
    fn a_shorter_idle_limit_wins_for_http1() {
        let r = Rules {
            header_read: 32_000,
            idle: 1_000,
            period: 125,
        };
        let c = conn(false, 0);
        c.requests.store(1, Ordering::SeqCst);
        assert_eq!(expiry(&c, 1_125, r), None);
        assert_eq!(expiry(&c, 1_126, r), Some(Expiry::Idle));
    }

    #[test]
    fn a_request_in_flight_never_expires_its_connection() {
        let c = conn(false, 0);
        let token = InFlight::new(c.clone());
        assert_eq!(expiry(&c, 10_000_000, R), None);
        drop(token);
        // Its end stamped the (coarse) clock: idle from then on.
        assert!(c.idle_ms(now_ms() + 5) <= 5);
    }

    #[test]
    fn the_sweep_wakes_expired_connections_and_forgets_closed_ones() {
        let w = Watchdog::new(&Limits::default());
        let (old, fresh, gone) = (conn(false, 0), conn(false, 0), conn(false, 0));
        fresh.requests.store(1, Ordering::SeqCst);
        fresh.in_flight.store(1, Ordering::SeqCst);
        w.watch(old.clone());
        w.watch(fresh.clone());
        w.watch(gone);
        w.sweep(100_000);
        assert_eq!(
            w.conns.lock().unwrap().len(),
            2,
            "the dropped one forgotten"
        );
        assert_eq!(old.signal.expirations(), 1, "woken");
        assert_eq!(fresh.signal.expirations(), 0);
        assert_eq!(old.expiry.load(Ordering::SeqCst), Expiry::NoRequest as u8);
        assert_eq!(fresh.expiry.load(Ordering::SeqCst), 0);
    }

    #[test]
    fn the_period_is_an_eighth_of_the_shortest_limit_within_20ms_and_1s() {
        let mut l = Limits::default();
        assert_eq!(Watchdog::new(&l).period(), Duration::from_secs(1));
        l.header_read_timeout = Duration::from_secs(2);
        assert_eq!(Watchdog::new(&l).period(), Duration::from_millis(250));
        l.idle_timeout = Duration::from_millis(100);
        assert_eq!(Watchdog::new(&l).period(), Duration::from_millis(20));
    }

    #[tokio::test]
    async fn a_closed_http1_connection_is_dropped_only_with_a_request_in_flight() {
        use std::os::fd::AsRawFd;
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = tokio::net::TcpStream::connect(l.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = l.accept().await.unwrap();
        let w = Watchdog::new(&Limits::default());
        let now = now_ms();
        let c = ConnState::new(false, Default::default()).with_peer_fd(server.as_raw_fd());
        let c = Arc::new(ConnState { opened: now, ..c });
        c.idle_since.store(now, Ordering::SeqCst);
        c.requests.store(1, Ordering::SeqCst);
        w.watch(c.clone());
        drop(client);
        // Closed, but nothing in flight: the idle rules' business.
        tokio::time::sleep(Duration::from_millis(50)).await;
        w.sweep(now);
        assert_eq!(c.signal.expirations(), 0);
        // A request in flight: dropped.
        c.in_flight.store(1, Ordering::SeqCst);
        w.sweep(now);
        assert_eq!(c.signal.expirations(), 1);
        assert_eq!(c.expiry.load(Ordering::SeqCst), Expiry::PeerGone as u8);
    }
}
