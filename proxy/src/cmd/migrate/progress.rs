//! The progress line of a long run, on stderr (the plan and the per-object
//! lines are on stdout, so a log of stdout stays plain): on a terminal one
//! line rewritten in place after each object; otherwise a plain line every
//! [`PLAIN_EVERY`] objects and at the last. Short runs (up to
//! [`PLAIN_EVERY`] objects) show none: the per-object lines say it all.

use std::collections::BTreeMap;
use std::io::{IsTerminal as _, Write as _};

/// Objects between two plain progress lines; runs longer than this get a
/// progress line at all.
pub const PLAIN_EVERY: usize = 10;

/// Where and how the progress line is shown.
pub struct Progress {
    total: usize,
    terminal: bool,
    shown: bool,
}

impl Progress {
    /// For a run of `total` objects, on this process's stderr.
    pub fn on_stderr(total: usize) -> Progress {
        Progress {
            total,
            terminal: std::io::stderr().is_terminal(),
            shown: false,
        }
    }

    /// Erases the line shown in place (before a line is printed on stdout,
    /// which may be the same terminal).
    pub fn clear(&mut self) {
        if self.terminal && self.shown {
            eprint!("\r\x1b[2K");
            self.shown = false;
        }
    }

    /// After `done` objects, with these outcomes so far.
    pub fn show(&mut self, done: usize, counts: &BTreeMap<&'static str, usize>) {
        if self.total <= PLAIN_EVERY {
            return;
        }
        let text = line(done, self.total, counts);
        if self.terminal {
            eprint!("{text}");
            let _ = std::io::stderr().flush();
            self.shown = true;
        } else if plain_due(done, self.total) {
            eprintln!("{text}");
        }
    }

    /// Ends the line shown in place.
    pub fn finish(&mut self) {
        self.clear();
    }
}

/// `progress: 12/300 objects, 10 moved, 1 blocked, 1 failed`.
pub fn line(done: usize, total: usize, counts: &BTreeMap<&'static str, usize>) -> String {
    let mut out = format!("progress: {done}/{total} objects");
    for word in ["moved", "blocked", "failed"] {
        out.push_str(&format!(
            ", {} {word}",
            counts.get(word).copied().unwrap_or(0)
        ));
    }
    out
}

/// True when a plain (not in place) progress line is due after `done` of
/// `total` objects.
pub fn plain_due(done: usize, total: usize) -> bool {
    total > PLAIN_EVERY && (done % PLAIN_EVERY == 0 || done == total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_line_counts_every_outcome() {
        let mut counts = BTreeMap::new();
        counts.insert("moved", 10);
        counts.insert("failed", 1);
        assert_eq!(
            line(11, 300, &counts),
            "progress: 11/300 objects, 10 moved, 0 blocked, 1 failed"
        );
    }

    #[test]
    fn plain_lines_every_ten_objects_and_at_the_end_of_long_runs() {
        let due: Vec<usize> = (1..=25).filter(|&d| plain_due(d, 25)).collect();
        assert_eq!(due, [10, 20, 25]);
        assert!((1..=10).all(|d| !plain_due(d, 10)), "a short run has none");
    }
}
