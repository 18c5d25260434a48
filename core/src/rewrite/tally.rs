//! Process-wide tallies of what the codecs met and left as it came, for
//! `/metrics` to report (the engine does no I/O of its own).

use std::sync::atomic::{AtomicU64, Ordering};

/// Annotations catalogued as holding a whole object as JSON
/// ([`super::catalog::Slot::JsonObject`]) whose value could name a mapped
/// group but is not JSON: forwarded unchanged.
static OBJECT_ANNOTATIONS_NOT_JSON: AtomicU64 = AtomicU64::new(0);

/// Counts one object annotation left as it came.
pub(crate) fn object_annotation_not_json() {
    OBJECT_ANNOTATIONS_NOT_JSON.fetch_add(1, Ordering::Relaxed);
    tracing::warn!("an annotation that holds an object is not JSON: left as it is");
}

/// How many object annotations were left as they came since start.
pub fn object_annotations_not_json() -> u64 {
    OBJECT_ANNOTATIONS_NOT_JSON.load(Ordering::Relaxed)
}
