//! Where a protobuf list spills past what memory keeps: an anonymous
//! temporary file, created unlinked (`O_TMPFILE` where the filesystem has
//! it), so nothing is left behind whatever ends the process. The core's
//! list splicer (`rewrite::protobuf::spool`) opens no file itself: it is
//! handed this.

use std::path::Path;
use std::sync::Arc;

use crate::rewrite::protobuf::spool::{Spill, SpillFile, SpillFiles};

/// Spill files in a directory (`None`: the system's temporary directory).
#[derive(Debug)]
pub struct TempFiles {
    dir: Option<Arc<Path>>,
}

impl SpillFiles for TempFiles {
    fn open(&self) -> std::io::Result<Box<dyn SpillFile>> {
        let f = match &self.dir {
            Some(d) => tempfile::tempfile_in(d)?,
            None => tempfile::tempfile()?,
        };
        Ok(Box::new(f))
    }
}

/// Up to `keep` bytes of a list in memory, then a temporary file in `dir`
/// up to `max` bytes.
pub fn to_disk(keep: usize, max: u64, dir: Option<&Path>) -> Spill {
    let files = TempFiles {
        dir: dir.map(Arc::from),
    };
    Spill::disk(keep, max, Arc::new(files))
}
