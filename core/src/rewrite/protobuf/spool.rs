//! Where a protobuf list's renamed items wait for the list to end: in
//! memory while they are few, then in a spill file.
//!
//! The envelope's `raw` length prefix comes before the items and changes
//! with them, so nothing of a renamed list can be sent before its last
//! item is renamed (`list_stream.rs`). Up to [`Spill::keep`] bytes are kept
//! in memory (a small list never touches the disk); past it, everything is
//! written to a file that [`Spill::files`] opens and read back in fixed
//! chunks when the list is complete. The file is bounded by [`Spill::max`].
//!
//! The core opens no file itself: the proxy hands in [`SpillFiles`] (an
//! unlinked temporary file in the configured directory, nothing to clean
//! up whatever happens to the process).
//!
//! Writes are plain blocking writes through a fixed buffer: they land in
//! the page cache, as a socket write would land in its buffer.

use std::fmt;
use std::io::{BufWriter, Read, Seek, SeekFrom, Write};
use std::sync::Arc;

use bytes::Bytes;

use crate::rewrite::error::RewriteError;

/// The size of the chunks held in memory, written and read back.
pub const CHUNK: usize = 256 << 10;

/// A spill file: written from its start, then read back from it.
pub trait SpillFile: Read + Write + Seek + Send + Sync {}

impl<T: Read + Write + Seek + Send + Sync> SpillFile for T {}

/// What opens a list's spill file (the proxy's: an unlinked temporary file).
pub trait SpillFiles: fmt::Debug + Send + Sync {
    /// A new, empty file; the error says where it could not be made.
    fn open(&self) -> std::io::Result<Box<dyn SpillFile>>;
}

/// Where and how much a list may spill.
#[derive(Clone, Debug)]
pub struct Spill {
    /// Bytes kept in memory before spilling.
    pub keep: usize,
    /// Bytes a list may hold in all (memory and file).
    pub max: u64,
    /// What opens the file past `keep` (`None`: past `keep` is refused).
    pub files: Option<Arc<dyn SpillFiles>>,
}

impl Spill {
    /// Everything in memory, up to `max` bytes.
    pub fn memory(max: usize) -> Spill {
        Spill {
            keep: max,
            max: max as u64,
            files: None,
        }
    }

    /// Up to `keep` bytes in memory, then a file from `files` up to `max`.
    pub fn disk(keep: usize, max: u64, files: Arc<dyn SpillFiles>) -> Spill {
        Spill {
            keep: keep.min(usize::try_from(max).unwrap_or(usize::MAX)),
            max,
            files: Some(files),
        }
    }
}

/// The output written so far.
pub struct Spool {
    spill: Spill,
    chunks: Vec<Bytes>,
    cur: Vec<u8>,
    /// Bytes in `chunks` and `cur`.
    mem: usize,
    file: Option<BufWriter<Box<dyn SpillFile>>>,
    len: u64,
}

/// A complete output, to read back.
pub enum Spooled {
    Memory(Vec<Bytes>),
    File(Box<dyn SpillFile>),
}

fn storage(what: impl std::fmt::Display) -> RewriteError {
    RewriteError::Storage(what.to_string())
}

impl Spool {
    pub fn new(spill: Spill) -> Spool {
        Spool {
            spill,
            chunks: Vec::new(),
            cur: Vec::new(),
            mem: 0,
            file: None,
            len: 0,
        }
    }

    /// Bytes written.
    pub fn written(&self) -> u64 {
        self.len
    }

    /// Bytes in memory (the file's buffer once spilled).
    pub fn held(&self) -> usize {
        match &self.file {
            Some(f) => f.capacity(),
            None => self.mem + (self.cur.capacity() - self.cur.len()),
        }
    }

    /// Whether it went to a file.
    pub fn spilled(&self) -> bool {
        self.file.is_some()
    }

    fn room(&mut self, n: usize) -> Result<(), RewriteError> {
        let total = self.len + n as u64;
        if total > self.spill.max {
            return Err(if self.spill.files.is_some() {
                storage(format!(
                    "a renamed protobuf list is larger than regroup may hold of one \
                     ({} bytes, limits.maxSpillBytes)",
                    self.spill.max
                ))
            } else {
                RewriteError::Malformed(format!(
                    "a protobuf list (renamed so far, with the item being read) is larger than {} bytes",
                    self.spill.max
                ))
            });
        }
        if self.file.is_none() && self.spill.files.is_some() && self.mem + n > self.spill.keep {
            self.open_file()?;
        }
        self.len = total;
        Ok(())
    }

    fn open_file(&mut self) -> Result<(), RewriteError> {
        let Some(files) = &self.spill.files else {
            return Ok(());
        };
        let f = files
            .open()
            .map_err(|e| storage(format!("creating a spill file for a protobuf list: {e}")))?;
        let mut w = BufWriter::with_capacity(CHUNK, f);
        self.flush_cur();
        for c in std::mem::take(&mut self.chunks) {
            w.write_all(&c).map_err(write_error)?;
        }
        self.mem = 0;
        self.cur = Vec::new();
        self.file = Some(w);
        Ok(())
    }

    fn flush_cur(&mut self) {
        if !self.cur.is_empty() {
            self.chunks.push(Bytes::from(std::mem::take(&mut self.cur)));
        }
    }

    /// Appends `b`.
    pub fn put(&mut self, b: &[u8]) -> Result<(), RewriteError> {
        self.room(b.len())?;
        if let Some(w) = &mut self.file {
            return w.write_all(b).map_err(write_error);
        }
        self.mem += b.len();
        if self.cur.len() + b.len() > CHUNK {
            self.flush_cur();
        }
        if b.len() >= CHUNK {
            self.chunks.push(Bytes::copy_from_slice(b));
            return Ok(());
        }
        if self.cur.capacity() == 0 {
            self.cur.reserve_exact(CHUNK);
        }
        self.cur.extend_from_slice(b);
        Ok(())
    }

    /// Appends `v`, kept as it is when large.
    pub fn put_owned(&mut self, v: Vec<u8>) -> Result<(), RewriteError> {
        if v.len() < CHUNK || self.spill.files.is_some() {
            return self.put(&v);
        }
        self.room(v.len())?;
        self.mem += v.len();
        self.flush_cur();
        self.chunks.push(Bytes::from(v));
        Ok(())
    }

    /// The output, to read back.
    pub fn finish(mut self) -> Result<Spooled, RewriteError> {
        match self.file.take() {
            None => {
                self.flush_cur();
                Ok(Spooled::Memory(self.chunks))
            }
            Some(w) => {
                let mut f = w.into_inner().map_err(|e| write_error(e.into_error()))?;
                f.seek(SeekFrom::Start(0)).map_err(write_error)?;
                Ok(Spooled::File(f))
            }
        }
    }
}

fn write_error(e: std::io::Error) -> RewriteError {
    storage(format!("writing a protobuf list's spill file: {e}"))
}

impl Spooled {
    /// Everything, in memory (tests, the fuzz harness).
    pub fn into_chunks(self) -> Result<Vec<Bytes>, RewriteError> {
        match self {
            Spooled::Memory(c) => Ok(c),
            Spooled::File(mut f) => {
                let mut out = Vec::new();
                while let Some(c) = read_chunk(&mut f)? {
                    out.push(c);
                }
                Ok(out)
            }
        }
    }
}

/// The next chunk of a spill file, `None` at its end.
pub fn read_chunk(f: &mut dyn Read) -> Result<Option<Bytes>, RewriteError> {
    let mut buf = vec![0; CHUNK];
    let mut n = 0;
    while n < CHUNK {
        match f.read(&mut buf[n..]) {
            Ok(0) => break,
            Ok(k) => n += k,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => {
                return Err(storage(format!(
                    "reading a protobuf list's spill file: {e}"
                )))
            }
        }
    }
    if n == 0 {
        return Ok(None);
    }
    buf.truncate(n);
    Ok(Some(Bytes::from(buf)))
}
