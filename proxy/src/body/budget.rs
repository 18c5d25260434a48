//! One memory budget for every byte regroup holds to rename: request bodies
//! being collected, whole responses, gzip inflation, list items in flight,
//! watch frames, OpenAPI documents. Each holder takes bytes from it before
//! it holds them and gives them back when done ([`Held`], on drop). When
//! the budget is spent, new work waits up to `limits.memoryBudgetWait` and
//! is then refused (429 with `Retry-After`); a single ask larger than the
//! whole budget is refused at once. Streams with nothing to rename and
//! upgrades never take from it.
//!
//! The size is `limits.memoryBudgetBytes`, else half the cgroup v2
//! `memory.max` regroup runs under, else 64 MiB ([`configure`], at start).
//!
//! Work already admitted finishes: the answer to a write the API server
//! has applied is never refused for memory (a 429 would tell the client
//! the write did not happen). It waits like any other work, then takes
//! what it needs beyond the budget ([`Budget::admitted`]); such overdraft
//! is bounded by the writes in flight, each of which was admitted within
//! the budget, and each answer by `maxObjectBytes`.

use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::OnceLock;
use std::time::Duration;

use tokio::sync::Semaphore;
use tokio::time::Instant;

/// The process's budget.
pub struct Budget {
    sem: Semaphore,
    total: usize,
    wait: Duration,
    /// Bytes held beyond the budget by admitted work.
    overdraft: AtomicUsize,
}

static BUDGET: OnceLock<Budget> = OnceLock::new();

/// Why memory was refused, as `regroup_memory_refusals_total{reason}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reason {
    /// A request body past `limits.maxRequestBodyBytes`.
    RequestTooLarge,
    /// One object (a response, a list item, a watch event, an inflated
    /// answer) past `limits.maxObjectBytes`.
    ObjectTooLarge,
    /// One ask larger than the whole budget.
    OverBudget,
    /// The budget stayed spent for `limits.memoryBudgetWait`.
    Busy,
}

impl Reason {
    /// Every reason, in the metric's order.
    pub const ALL: [Reason; 4] = [
        Reason::RequestTooLarge,
        Reason::ObjectTooLarge,
        Reason::OverBudget,
        Reason::Busy,
    ];

    /// The metric label.
    pub fn label(self) -> &'static str {
        match self {
            Reason::RequestTooLarge => "request_too_large",
            Reason::ObjectTooLarge => "object_too_large",
            Reason::OverBudget => "over_budget",
            Reason::Busy => "busy",
        }
    }
}

static REFUSALS: [AtomicU64; 4] = [
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
    AtomicU64::new(0),
];

/// Counts a refusal and logs it (what, never a body or a header's value).
pub fn refused(reason: Reason, what: &str, bytes: usize) {
    REFUSALS[reason as usize].fetch_add(1, Ordering::Relaxed);
    let b = budget();
    tracing::warn!(
        reason = reason.label(),
        bytes,
        budget = b.total,
        in_use = b.in_use(),
        "memory: refused {what}"
    );
}

/// Refusals so far, by reason (`Reason::ALL`'s order).
pub fn refusals() -> [(Reason, u64); 4] {
    Reason::ALL.map(|r| (r, REFUSALS[r as usize].load(Ordering::Relaxed)))
}

/// Sets the process's budget from `limits:` (the first call wins; before
/// it, [`budget`] is the default). Returns its size.
pub fn configure(l: &regroup_config::Limits) -> usize {
    let total = l
        .memory_budget_bytes
        .unwrap_or_else(|| default_size(cgroup_memory_max()));
    budget_init(total, l.memory_budget_wait).total
}

fn budget_init(total: usize, wait: Duration) -> &'static Budget {
    BUDGET.get_or_init(|| Budget::new(total, wait))
}

/// The process's budget.
pub fn budget() -> &'static Budget {
    let l = regroup_config::Limits::default();
    budget_init(
        regroup_config::limits::DEFAULT_MEMORY_BUDGET_BYTES,
        l.memory_budget_wait,
    )
}

/// What holds a response's bytes: the answer to a write is work already
/// admitted (the API server applied it), never refused for memory; a read
/// is new work that may wait and get a 429 before anything is sent.
pub fn for_response(method: &http::Method) -> Held {
    let b = budget();
    if method.is_safe() {
        b.empty()
    } else {
        b.admitted()
    }
}

/// The budget's size without `memoryBudgetBytes`: half the cgroup's
/// `memory.max` (the other half for regroup itself, its connections and
/// the renaming's own working memory), else the fixed default.
pub fn default_size(cgroup_max: Option<u64>) -> usize {
    use regroup_config::limits::{
        DEFAULT_MEMORY_BUDGET_BYTES, MAX_MEMORY_BUDGET_BYTES, MIN_MEMORY_BUDGET_BYTES,
    };
    match cgroup_max {
        Some(m) => usize::try_from(m / 2)
            .unwrap_or(usize::MAX)
            .clamp(MIN_MEMORY_BUDGET_BYTES, MAX_MEMORY_BUDGET_BYTES),
        None => DEFAULT_MEMORY_BUDGET_BYTES,
    }
}

/// cgroup v2's `memory.max` for this process (`max`: none).
pub fn cgroup_memory_max() -> Option<u64> {
    let s = std::fs::read_to_string("/sys/fs/cgroup/memory.max").ok()?;
    parse_memory_max(&s)
}

fn parse_memory_max(s: &str) -> Option<u64> {
    s.trim().parse().ok()
}

impl Budget {
    fn new(total: usize, wait: Duration) -> Budget {
        let total = total.min(regroup_config::limits::MAX_MEMORY_BUDGET_BYTES);
        Budget {
            sem: Semaphore::new(total),
            total,
            wait,
            overdraft: AtomicUsize::new(0),
        }
    }

    /// A budget of its own for a test, so that what it holds can be
    /// read while other tests use the process's.
    #[cfg(test)]
    pub(crate) fn for_test(total: usize) -> &'static Budget {
        Box::leak(Box::new(Budget::new(total, Duration::from_millis(10))))
    }

    /// Its size in bytes.
    pub fn total(&self) -> usize {
        self.total
    }

    /// Bytes held now (overdraft included).
    pub fn in_use(&self) -> usize {
        self.total - self.sem.available_permits() + self.overdraft.load(Ordering::Relaxed)
    }

    /// Nothing held yet; take with [`Held::grow`].
    pub fn empty(&'static self) -> Held {
        Held {
            budget: self,
            bytes: 0,
            over: 0,
            admitted: false,
        }
    }

    /// Nothing held yet, for work already admitted (the answer to a write
    /// the API server applied): a [`Held::grow`] that waited in vain takes
    /// its bytes beyond the budget instead of refusing them.
    pub fn admitted(&'static self) -> Held {
        Held {
            admitted: true,
            ..self.empty()
        }
    }

    /// When work starting now stops waiting: the budget's wait from the
    /// first time it has to (the clock is read only then: most asks are
    /// granted at once, and a clock read is ~40 instructions a request).
    pub fn deadline(&self) -> Deadline {
        Deadline {
            at: None,
            wait: self.wait,
        }
    }
}

/// When a holder stops waiting for the budget: fixed the first time it
/// waits, and kept for its later asks (one wait for one body, however
/// many times it grows).
#[derive(Clone, Copy, Debug)]
pub struct Deadline {
    at: Option<Instant>,
    wait: Duration,
}

impl Deadline {
    /// A deadline at `at`.
    pub fn at(at: Instant) -> Deadline {
        Deadline {
            at: Some(at),
            wait: Duration::ZERO,
        }
    }

    /// The instant, fixed now if it was not yet.
    fn instant(&mut self) -> Instant {
        *self.at.get_or_insert_with(|| Instant::now() + self.wait)
    }
}

/// Bytes taken from the budget, given back when dropped.
pub struct Held {
    budget: &'static Budget,
    /// Bytes held, `over` of them beyond the budget.
    bytes: usize,
    over: usize,
    admitted: bool,
}

impl std::fmt::Debug for Held {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Held({})", self.bytes)
    }
}

/// The budget refused an ask.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The ask alone is larger than the whole budget.
    OverBudget { asked: usize, total: usize },
    /// The budget stayed spent until the deadline.
    Busy,
}

impl Refusal {
    /// The reason it is counted under.
    pub fn reason(self) -> Reason {
        match self {
            Refusal::OverBudget { .. } => Reason::OverBudget,
            Refusal::Busy => Reason::Busy,
        }
    }
}

impl Held {
    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.bytes
    }

    /// Takes `more` bytes, waiting until `deadline` for them.
    pub async fn grow(&mut self, more: usize, deadline: &mut Deadline) -> Result<(), Refusal> {
        if more == 0 {
            return Ok(());
        }
        let total = self.budget.total;
        let asked = self.bytes.saturating_add(more);
        if asked > total {
            return Err(Refusal::OverBudget { asked, total });
        }
        // `asked <= total <= u32::MAX`.
        let n = more as u32;
        let permit = match self.budget.sem.try_acquire_many(n) {
            Ok(p) => Some(p),
            Err(_) => tokio::time::timeout_at(deadline.instant(), self.budget.sem.acquire_many(n))
                .await
                .ok()
                .and_then(Result::ok),
        };
        match permit {
            Some(p) => p.forget(),
            None if self.admitted => {
                self.budget.overdraft.fetch_add(more, Ordering::Relaxed);
                self.over += more;
            }
            None => return Err(Refusal::Busy),
        }
        self.bytes = asked;
        Ok(())
    }

    /// Holds exactly `to` bytes: grows (waiting until `deadline`) or gives
    /// back the difference.
    pub async fn set(&mut self, to: usize, deadline: &mut Deadline) -> Result<(), Refusal> {
        if to > self.bytes {
            self.grow(to - self.bytes, deadline).await
        } else {
            self.shrink(to);
            Ok(())
        }
    }

    /// Gives back all but `to` bytes (the overdraft first).
    pub fn shrink(&mut self, to: usize) {
        if to < self.bytes {
            let back = self.bytes - to;
            let from_over = back.min(self.over);
            if from_over > 0 {
                self.budget
                    .overdraft
                    .fetch_sub(from_over, Ordering::Relaxed);
                self.over -= from_over;
            }
            if back > from_over {
                self.budget.sem.add_permits(back - from_over);
            }
            self.bytes = to;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.shrink(0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn leak(total: usize, wait_ms: u64) -> &'static Budget {
        Box::leak(Box::new(Budget::new(total, Duration::from_millis(wait_ms))))
    }

    #[tokio::test]
    async fn bytes_are_given_back_on_drop() {
        let b = leak(100, 10);
        let mut h = b.empty();
        h.grow(60, &mut b.deadline()).await.unwrap();
        assert_eq!(b.in_use(), 60);
        h.set(20, &mut b.deadline()).await.unwrap();
        assert_eq!(b.in_use(), 20);
        drop(h);
        assert_eq!(b.in_use(), 0);
    }

    #[tokio::test]
    async fn an_ask_larger_than_the_budget_is_refused_at_once() {
        let b = leak(100, 60_000);
        let mut h = b.empty();
        let started = std::time::Instant::now();
        let e = h.grow(101, &mut b.deadline()).await.unwrap_err();
        assert_eq!(
            e,
            Refusal::OverBudget {
                asked: 101,
                total: 100
            }
        );
        assert!(started.elapsed() < Duration::from_secs(10));
        assert_eq!(b.in_use(), 0);
    }

    #[tokio::test]
    async fn a_deadline_is_fixed_by_the_first_wait_and_kept_for_later_asks() {
        let b = leak(100, 50);
        let mut d = b.deadline();
        let mut h = b.empty();
        h.grow(60, &mut d).await.unwrap();
        assert!(d.at.is_none(), "granted at once: the clock was not read");
        let before = Instant::now();
        let mut other = b.empty();
        assert_eq!(other.grow(60, &mut d).await, Err(Refusal::Busy));
        let fixed = d.at.expect("fixed by the wait");
        assert!(fixed >= before + Duration::from_millis(50));
        assert!(Instant::now() >= fixed);
        // The same holder's next ask waits until the same, passed,
        // instant: not a second wait.
        assert_eq!(other.grow(60, &mut d).await, Err(Refusal::Busy));
        assert_eq!(d.at, Some(fixed));
    }

    #[tokio::test]
    async fn a_spent_budget_waits_then_refuses_and_serves_once_given_back() {
        let b = leak(100, 50);
        let mut first = b.empty();
        first.grow(80, &mut b.deadline()).await.unwrap();
        let mut second = b.empty();
        assert_eq!(second.grow(30, &mut b.deadline()).await, Err(Refusal::Busy));
        assert_eq!(second.bytes(), 0);
        // Given back while the second waits: it gets them.
        let waiter = tokio::spawn(async move {
            let mut h = b.empty();
            h.grow(
                30,
                &mut Deadline::at(Instant::now() + Duration::from_secs(30)),
            )
            .await
            .map(|()| h.bytes())
        });
        tokio::task::yield_now().await;
        drop(first);
        assert_eq!(waiter.await.unwrap(), Ok(30));
        assert_eq!(b.in_use(), 0);
    }

    #[tokio::test]
    async fn admitted_work_waits_then_takes_beyond_the_budget_and_gives_it_back() {
        let b = leak(100, 20);
        let mut first = b.empty();
        first.grow(80, &mut b.deadline()).await.unwrap();
        let mut answer = b.admitted();
        answer.grow(30, &mut b.deadline()).await.unwrap();
        assert_eq!((answer.bytes(), b.in_use()), (30, 110));
        // New work is still refused while the budget is spent.
        assert_eq!(
            b.empty().grow(30, &mut b.deadline()).await,
            Err(Refusal::Busy)
        );
        drop(first);
        // Growing again takes what is free now, within the budget.
        answer.grow(50, &mut b.deadline()).await.unwrap();
        assert_eq!(b.in_use(), 80);
        answer.shrink(10);
        assert_eq!(b.in_use(), 10);
        drop(answer);
        assert_eq!(b.in_use(), 0);
        assert_eq!(b.sem.available_permits(), 100);
    }

    #[test]
    fn the_default_is_half_the_cgroup_limit_or_64_mib() {
        assert_eq!(parse_memory_max("max\n"), None);
        assert_eq!(parse_memory_max("134217728\n"), Some(128 << 20));
        assert_eq!(default_size(Some(128 << 20)), 64 << 20);
        assert_eq!(default_size(None), 64 << 20);
        assert_eq!(default_size(Some(1 << 10)), 1 << 20);
        assert_eq!(default_size(Some(1 << 40)), u32::MAX as usize);
    }

    #[test]
    fn a_busy_refusal_is_a_429_an_oversized_one_413_or_502() {
        let busy = Refusal::Busy.failure("a request body", false);
        assert_eq!(busy.code, http::StatusCode::TOO_MANY_REQUESTS);
        let over = Refusal::OverBudget { asked: 2, total: 1 };
        assert_eq!(
            over.failure("a body", false).code,
            http::StatusCode::PAYLOAD_TOO_LARGE
        );
        assert_eq!(
            over.failure("a body", true).code,
            http::StatusCode::BAD_GATEWAY
        );
    }
}
