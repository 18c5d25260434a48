//! The tokio runtime `regroup serve` runs on: a worker per CPU the process
//! may use (its affinity and its cgroup's CPU quota, as Rust's
//! `available_parallelism` counts them), and on one CPU a current-thread
//! runtime.
//!
//! With one worker the two kinds run tasks the same way (one thread polls
//! every task and drives the I/O and the timers), but the multi-thread one
//! still pays for the parts that let workers share: the shared injection
//! queue, the worker's park through a mutex and a condition variable, waking
//! the driver across threads. A sidecar limited to one CPU or less takes
//! the current-thread runtime (docs/performance.md, "The runtime on one
//! CPU, session 30").

use std::num::NonZeroUsize;

use tokio::runtime::{Builder, Runtime};

/// What tokio's multi-thread runtime reads to override its worker count.
const WORKERS_ENV: &str = "TOKIO_WORKER_THREADS";

/// Which runtime `serve` runs on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flavor {
    /// One thread: a single CPU.
    CurrentThread,
    /// This many workers.
    MultiThread(usize),
}

impl Flavor {
    /// The runtime for `workers` threads.
    pub fn for_workers(workers: usize) -> Flavor {
        if workers <= 1 {
            Flavor::CurrentThread
        } else {
            Flavor::MultiThread(workers)
        }
    }

    /// The runtime for this process: `TOKIO_WORKER_THREADS` when it is a
    /// positive number (as tokio reads it), else the CPUs it may use.
    pub fn of_process() -> Flavor {
        let from_env = std::env::var(WORKERS_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<NonZeroUsize>().ok());
        let workers = from_env
            .or_else(|| std::thread::available_parallelism().ok())
            .map_or(1, NonZeroUsize::get);
        Flavor::for_workers(workers)
    }

    /// A builder of this runtime, the drivers (I/O, time) enabled.
    pub fn builder(self) -> Builder {
        let mut b = match self {
            Flavor::CurrentThread => Builder::new_current_thread(),
            Flavor::MultiThread(n) => {
                let mut b = Builder::new_multi_thread();
                b.worker_threads(n);
                b
            }
        };
        b.enable_all();
        b
    }

    /// The runtime's kind, for the start-up log.
    pub fn kind(self) -> &'static str {
        match self {
            Flavor::CurrentThread => "current-thread",
            Flavor::MultiThread(_) => "multi-thread",
        }
    }

    /// The number of threads that poll tasks.
    pub fn workers(self) -> usize {
        match self {
            Flavor::CurrentThread => 1,
            Flavor::MultiThread(n) => n,
        }
    }
}

/// The serve runtime: log lines written out whenever a thread parks or
/// stops, so they leave the process while it is idle.
pub fn build(flavor: Flavor) -> std::io::Result<Runtime> {
    flavor
        .builder()
        .on_thread_park(crate::observe::log_writer::flush)
        .on_thread_stop(crate::observe::log_writer::flush)
        .build()
}

/// The stack of the current-thread runtime's thread: the main thread's
/// usual size, as the future it runs was on the main thread's stack.
const RUNTIME_STACK: usize = 8 << 20;

/// Runs `fut` to its end on `runtime`. The current-thread runtime runs on
/// a thread of its own, not the main one: glibc serves the main thread
/// from its main heap, whose layout moved each request's allocation cost
/// by up to ~1.3k instructions from one run to the next (a worker's heap,
/// as the multi-thread runtime's are, does not). An error: that thread
/// could not be started.
pub fn block_on<F>(runtime: &Runtime, flavor: Flavor, fut: F) -> std::io::Result<F::Output>
where
    F: std::future::Future + Send,
    F::Output: Send,
{
    if let Flavor::MultiThread(_) = flavor {
        return Ok(runtime.block_on(fut));
    }
    std::thread::scope(|s| {
        let run = std::thread::Builder::new()
            .name("regroup-runtime".into())
            .stack_size(RUNTIME_STACK)
            .spawn_scoped(s, || {
                let out = runtime.block_on(fut);
                // This thread gathered its lines as a worker does.
                crate::observe::log_writer::finish();
                out
            })?;
        match run.join() {
            Ok(out) => Ok(out),
            Err(panic) => std::panic::resume_unwind(panic),
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_cpu_takes_the_current_thread_runtime_and_more_take_a_worker_each() {
        assert_eq!(Flavor::for_workers(0), Flavor::CurrentThread);
        assert_eq!(Flavor::for_workers(1), Flavor::CurrentThread);
        assert_eq!(Flavor::for_workers(2), Flavor::MultiThread(2));
        assert_eq!(Flavor::for_workers(16).workers(), 16);
    }

    #[test]
    fn both_runtimes_run_spawned_tasks_timers_and_blocking_work() {
        for flavor in [Flavor::CurrentThread, Flavor::MultiThread(2)] {
            let rt = build(flavor).expect("runtime");
            let got = rt.block_on(async {
                let t = tokio::spawn(async {
                    tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    tokio::task::spawn_blocking(|| 40 + 2)
                        .await
                        .expect("blocking")
                });
                t.await.expect("task")
            });
            assert_eq!(got, 42, "{flavor:?}");
        }
    }

    #[test]
    fn the_current_thread_runtime_runs_on_a_thread_of_its_own() {
        let rt = build(Flavor::CurrentThread).expect("runtime");
        let main = std::thread::current().id();
        let (on, name) = block_on(&rt, Flavor::CurrentThread, async {
            let t = std::thread::current();
            (t.id(), t.name().map(str::to_owned))
        })
        .expect("a thread");
        assert_ne!(on, main);
        assert_eq!(name.as_deref(), Some("regroup-runtime"));
    }

    #[test]
    fn a_panic_on_the_runtime_thread_reaches_the_caller() {
        let rt = build(Flavor::CurrentThread).expect("runtime");
        let caught = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            block_on(&rt, Flavor::CurrentThread, async { panic!("boom") })
        }));
        assert!(caught.is_err());
    }
}
