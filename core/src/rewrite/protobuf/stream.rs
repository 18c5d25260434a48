//! The protobuf watch stream (`application/vnd.kubernetes.protobuf;stream=watch`):
//! frames of a 4-byte big-endian length and that many bytes, each a raw
//! `WatchEvent`. Frames are rewritten one by one as they complete, whatever
//! the HTTP chunking; each output frame gets its new length. Memory is
//! bounded by the largest frame (and a frame longer than the limit is refused
//! as soon as its length is read).

use super::{malformed, ProtoRewriter};
use crate::rewrite::error::RewriteError;
use crate::rewrite::framing::{Framer, Framing};

/// Splits a watch stream into frames and renames each.
#[derive(Debug)]
pub struct WatchStream {
    addressed: Option<(String, String)>,
    framer: Framer,
}

impl WatchStream {
    /// A stream whose frames may be at most `limit` bytes; `addressed` as
    /// for [`ProtoRewriter::rewrite_bytes_addressed`].
    pub fn new(addressed: Option<(&str, &str)>, limit: usize) -> Self {
        WatchStream {
            addressed: addressed.map(|(g, k)| (g.to_owned(), k.to_owned())),
            framer: Framer::new(Framing::LengthPrefixed, limit),
        }
    }

    /// Feeds bytes as they arrive; returns the frames completed by them,
    /// renamed and re-framed (possibly nothing yet).
    pub fn feed(&mut self, rw: &ProtoRewriter<'_>, data: &[u8]) -> Result<Vec<u8>, RewriteError> {
        self.framer.push(data);
        let mut out = Vec::new();
        while let Some(frame) = self.framer.next_frame().map_err(malformed)? {
            let addressed = self
                .addressed
                .as_ref()
                .map(|(g, k)| (g.as_str(), k.as_str()));
            match rw.frame(Framing::LengthPrefixed.content(&frame), addressed)? {
                Some(new) => out.extend(Framing::LengthPrefixed.frame(&new).map_err(malformed)?),
                None => out.extend_from_slice(&frame),
            }
        }
        Ok(out)
    }

    /// Ends the stream: an error if it stopped inside a frame.
    pub fn finish(self) -> Result<(), RewriteError> {
        self.framer.finish().map_err(malformed)
    }
}
