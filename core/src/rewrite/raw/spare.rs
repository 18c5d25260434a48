//! The buffers of a finished walk, kept for the next walk on the same
//! thread: a renamed body's walk would otherwise allocate and free its
//! tape, its two lists, its edits and their texts, the places found in
//! an object and the pre-check's occurrences each time (a list renames
//! item by item, so each item's walk did).
//!
//! Only buffers of an ordinary object's size are kept, so a thread holds
//! a few kilobytes at most after a large body. A walk is made and
//! dropped within one call on one thread (never across an `.await`), so
//! a thread's buffers are never shared.

use std::cell::RefCell;
use std::rc::Rc;

use super::tape::Tape;
use super::{Edit, Raw};

/// The most tape entries (20 bytes each) and edits a kept
/// buffer may hold room for: a 2 KiB Deployment needs ~130 entries and
/// the reader reserves a sixteenth of the body's bytes, so bodies up to
/// ~64 KiB reuse the kept tape, which holds at most ~150 KB a thread (the
/// runtime's workers: one a core).
const KEEP_ENTRIES: usize = 4096;
const KEEP_EDITS: usize = 256;
/// The most bytes of edit texts kept: 256 edits of a long group name.
const KEEP_TEXTS: usize = 16 << 10;

struct Spare {
    tape: Option<Rc<Tape>>,
    edits: Vec<Edit>,
    texts: String,
    /// Held without a lifetime: always empty when kept (see [`found`]).
    found: Vec<(usize, Raw<'static>)>,
    occurrences: Vec<(usize, usize)>,
}

thread_local! {
    static SPARE: RefCell<Spare> = const {
        RefCell::new(Spare {
            tape: None,
            edits: Vec::new(),
            texts: String::new(),
            found: Vec::new(),
            occurrences: Vec::new(),
        })
    };
}

/// A tape to read into: the thread's kept one, else a new empty one.
pub(super) fn tape() -> Rc<Tape> {
    SPARE
        .with_borrow_mut(|s| s.tape.take())
        .unwrap_or_else(|| Rc::new(Tape::with_capacity(0)))
}

/// Keeps `tape` for the next walk when nothing else holds it and it is
/// not large.
pub(super) fn keep_tape(mut tape: Rc<Tape>) {
    let small = Rc::get_mut(&mut tape).is_some_and(|t| t.entries.capacity() <= KEEP_ENTRIES);
    if small {
        SPARE.with_borrow_mut(|s| s.tape = Some(tape));
    }
}

/// An empty list of edits, with room for a few.
pub(super) fn edits() -> Vec<Edit> {
    let kept = SPARE.with_borrow_mut(|s| std::mem::take(&mut s.edits));
    if kept.capacity() == 0 {
        Vec::with_capacity(8)
    } else {
        kept
    }
}

/// An empty buffer for the edits' texts.
pub(super) fn texts() -> String {
    SPARE.with_borrow_mut(|s| std::mem::take(&mut s.texts))
}

/// An empty list for the places found in an object, with room for a few.
pub(super) fn found<'i>() -> Vec<(usize, Raw<'i>)> {
    let kept = SPARE.with_borrow_mut(|s| std::mem::take(&mut s.found));
    if kept.capacity() == 0 {
        return Vec::with_capacity(8);
    }
    // An empty list holds no value of any input: only its buffer is
    // reused. The collect from the list's own iterator into one of the
    // same layout (`Raw` is a slice whatever its lifetime) keeps the
    // buffer; were it not kept, the list would only start empty.
    kept.into_iter().map(|_| unreachable!()).collect()
}

/// Keeps a finished walk's edits, their texts and its list of places.
pub(super) fn keep_edits(
    mut edits: Vec<Edit>,
    mut texts: String,
    mut found: Vec<(usize, Raw<'_>)>,
) {
    SPARE.with_borrow_mut(|s| {
        if edits.capacity() <= KEEP_EDITS {
            edits.clear();
            s.edits = edits;
        }
        if texts.capacity() <= KEEP_TEXTS {
            texts.clear();
            s.texts = texts;
        }
        if found.capacity() <= KEEP_EDITS {
            found.clear();
            s.found = found.into_iter().map(|_| unreachable!()).collect();
        }
    });
}

/// An empty list for the pre-check's occurrences of names.
pub(crate) fn occurrences() -> Vec<(usize, usize)> {
    SPARE.with_borrow_mut(|s| std::mem::take(&mut s.occurrences))
}

pub(super) fn keep_occurrences(mut found: Vec<(usize, usize)>) {
    if found.capacity() <= KEEP_EDITS {
        found.clear();
        SPARE.with_borrow_mut(|s| s.occurrences = found);
    }
}
