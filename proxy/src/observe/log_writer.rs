//! Where `serve` writes its log: standard error, with the lines of each
//! runtime worker gathered while it has work and written when it runs out
//! of work ([`flush`], on tokio's `on_thread_park`).
//!
//! Every request logs one line. Written at once, that is one write(2) per
//! request, a fifth of the system calls a proxied GET makes (strace under
//! load: two `recvfrom`, two `writev`, one `write`). A busy worker serves
//! several requests between two parks, so their lines now leave in one
//! write; an idle worker parks right after the request it served, so a
//! line waits only for the rest of that poll. A worker that never parks
//! writes whenever `FLUSH_AT` bytes are pending. Written at once, as
//! before: warnings and errors (an operator sees them without delay, and
//! they come after the lines their thread gathered before them), every
//! line once shutdown has begun ([`write_through`]), and the lines of
//! threads that never park (the main thread under a multi-thread runtime,
//! the blocking pool, tests). A current-thread runtime's thread gathers
//! as a worker does, and [`finish`] writes what is left when it ends.
//! Lines are whole in the output: each write holds whole lines and goes
//! through standard error's lock. Lines of different workers may appear
//! out of their timestamps' order, by at most what a worker serves
//! between two parks.

use std::cell::RefCell;
use std::io::{self, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use tracing::{Level, Metadata};
use tracing_subscriber::fmt::MakeWriter;

/// Pending bytes at which a worker writes without waiting to park: bounds
/// both the delay under sustained load and what a crash can lose.
const FLUSH_AT: usize = 8 * 1024;

/// Set once shutdown begins: from then on every line is written at once,
/// so the last lines keep their order.
static WRITE_THROUGH: AtomicBool = AtomicBool::new(false);

/// Writes every line at once from now on (shutdown has begun).
pub fn write_through() {
    WRITE_THROUGH.store(true, Ordering::Relaxed);
}

thread_local! {
    /// This thread's pending lines; `None` until the thread first parks
    /// (only runtime workers park).
    static PENDING: RefCell<Option<Vec<u8>>> = const { RefCell::new(None) };
}

/// Writes this thread's pending lines, and makes it gather from now on:
/// the runtime's `on_thread_park` and `on_thread_stop`.
pub fn flush() {
    PENDING.with(|p| {
        let Ok(mut p) = p.try_borrow_mut() else {
            return;
        };
        match p.as_mut() {
            Some(pending) => write_out(pending),
            None => *p = Some(Vec::with_capacity(FLUSH_AT)),
        }
    })
}

/// Writes this thread's pending lines and writes at once from now on: the
/// end of the current-thread runtime, whose thread is not one of tokio's
/// (no `on_thread_stop`).
pub fn finish() {
    PENDING.with(|p| {
        if let Ok(mut p) = p.try_borrow_mut() {
            if let Some(mut pending) = p.take() {
                write_out(&mut pending);
            }
        }
    })
}

/// Writes and empties `pending`. A log that can't be written is not an
/// error anyone can act on from here (as with the stock writer).
fn write_out(pending: &mut Vec<u8>) {
    if !pending.is_empty() {
        let _ = write_all(pending);
        pending.clear();
    }
}

#[cfg(not(test))]
fn write_all(bytes: &[u8]) -> io::Result<()> {
    io::stderr().write_all(bytes)
}

#[cfg(test)]
thread_local! {
    /// What this thread wrote, in tests instead of standard error.
    static WRITTEN: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

#[cfg(test)]
fn write_all(bytes: &[u8]) -> io::Result<()> {
    WRITTEN.with(|w| w.borrow_mut().extend_from_slice(bytes));
    Ok(())
}

/// The `tracing` writer: gathers on a worker, writes elsewhere.
#[derive(Clone, Copy, Debug, Default)]
pub struct Stderr;

impl<'a> MakeWriter<'a> for Stderr {
    type Writer = Line;

    fn make_writer(&'a self) -> Line {
        Line { gather: true }
    }

    fn make_writer_for(&'a self, meta: &Metadata<'_>) -> Line {
        Line {
            gather: *meta.level() > Level::WARN,
        }
    }
}

/// One event's bytes (the formatter writes each line with one call).
pub struct Line {
    /// False: written at once, after this thread's pending lines.
    gather: bool,
}

impl Line {
    /// An `info` line's writer: gathered on a worker (as [`Stderr`] makes
    /// one for an `info` event).
    pub fn info() -> Line {
        Line { gather: true }
    }
}

impl Write for Line {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let gather = self.gather && !WRITE_THROUGH.load(Ordering::Relaxed);
        let gathered = PENDING.with(|p| {
            let Ok(mut p) = p.try_borrow_mut() else {
                return false;
            };
            let Some(pending) = p.as_mut() else {
                return false;
            };
            if !gather {
                // What this thread gathered first comes first.
                write_out(pending);
                return false;
            }
            pending.extend_from_slice(buf);
            if pending.len() >= FLUSH_AT {
                write_out(pending);
            }
            true
        });
        if !gathered {
            write_all(buf)?;
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pending() -> Option<Vec<u8>> {
        PENDING.with(|p| p.borrow().clone())
    }

    fn written() -> Vec<u8> {
        WRITTEN.with(|w| w.borrow().clone())
    }

    fn gathering() -> Line {
        Line { gather: true }
    }

    #[test]
    fn a_thread_writes_at_once_until_it_parks_then_gathers_until_the_next_park() {
        std::thread::spawn(|| {
            gathering().write_all(b"before any park\n").unwrap();
            assert_eq!(pending(), None);
            assert_eq!(
                written(),
                b"before any park\n",
                "not a worker yet: written at once"
            );
            flush();
            gathering().write_all(b"one\n").unwrap();
            gathering().write_all(b"two\n").unwrap();
            assert_eq!(pending().as_deref(), Some(&b"one\ntwo\n"[..]));
            assert_eq!(written(), b"before any park\n", "gathered, not written");
            flush();
            assert_eq!(pending().as_deref(), Some(&b""[..]));
            assert_eq!(
                written(),
                b"before any park\none\ntwo\n",
                "written on park, whole"
            );
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_worker_that_never_parks_writes_once_flush_at_is_pending() {
        std::thread::spawn(|| {
            flush();
            let line = [b'x'; 1000];
            for _ in 0..FLUSH_AT / line.len() - 1 {
                gathering().write_all(&line).unwrap();
            }
            assert_eq!(
                pending().map(|p| p.len()),
                Some(FLUSH_AT - 1000 - FLUSH_AT % 1000)
            );
            gathering().write_all(&line).unwrap();
            assert_eq!(pending().map(|p| p.len()), Some(8000));
            gathering().write_all(&line).unwrap();
            assert_eq!(pending().map(|p| p.len()), Some(0));
            assert_eq!(written().len(), 9000, "written once full");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn finishing_writes_what_was_gathered_and_gathers_no_more() {
        std::thread::spawn(|| {
            flush();
            gathering().write_all(b"last\n").unwrap();
            assert_eq!(written(), b"");
            finish();
            assert_eq!(written(), b"last\n");
            assert_eq!(pending(), None);
            gathering().write_all(b"after\n").unwrap();
            assert_eq!(written(), b"last\nafter\n", "written at once");
        })
        .join()
        .unwrap();
    }

    #[test]
    fn a_warning_is_written_at_once_after_what_its_thread_gathered() {
        std::thread::spawn(|| {
            flush();
            gathering().write_all(b"info\n").unwrap();
            Line { gather: false }.write_all(b"warn\n").unwrap();
            assert_eq!(written(), b"info\nwarn\n");
            assert_eq!(pending().as_deref(), Some(&b""[..]));
        })
        .join()
        .unwrap();
    }
}
