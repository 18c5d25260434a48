//! The protobuf watch stream (`application/vnd.kubernetes.protobuf;stream=watch`):
//! frames of a 4-byte big-endian length and that many bytes, each a raw
//! `WatchEvent`. Frames are rewritten one by one as they complete, whatever
//! the HTTP chunking; each output frame gets its new length. Memory is
//! bounded by the largest frame (and a frame longer than the limit is refused
//! as soon as its length is read).

use bytes::{Buf, BytesMut};

use super::{malformed, ProtoRewriter};
use crate::rewrite::json::RewriteError;

/// Splits a watch stream into frames and renames each.
#[derive(Debug)]
pub struct WatchStream {
    addressed: Option<(String, String)>,
    limit: usize,
    buf: BytesMut,
}

impl WatchStream {
    /// A stream whose frames may be at most `limit` bytes; `addressed` as
    /// for [`ProtoRewriter::rewrite_bytes_addressed`].
    pub fn new(addressed: Option<(&str, &str)>, limit: usize) -> Self {
        WatchStream {
            addressed: addressed.map(|(g, k)| (g.to_owned(), k.to_owned())),
            limit,
            buf: BytesMut::new(),
        }
    }

    /// Feeds bytes as they arrive; returns the frames completed by them,
    /// renamed and re-framed (possibly nothing yet).
    pub fn feed(&mut self, rw: &ProtoRewriter<'_>, data: &[u8]) -> Result<Vec<u8>, RewriteError> {
        self.buf.extend_from_slice(data);
        let mut out = Vec::new();
        while let Some(head) = self.buf.get(..4) {
            let len = u32::from_be_bytes(head.try_into().expect("four bytes")) as usize;
            if len > self.limit {
                return Err(malformed(format!(
                    "watch frame of {len} bytes exceeds the {} byte limit",
                    self.limit
                )));
            }
            if self.buf.len() < 4 + len {
                break;
            }
            self.buf.advance(4);
            let frame = self.buf.split_to(len);
            let addressed = self
                .addressed
                .as_ref()
                .map(|(g, k)| (g.as_str(), k.as_str()));
            match rw.frame(&frame, addressed)? {
                Some(new) => {
                    let n = u32::try_from(new.len())
                        .map_err(|_| malformed("renamed watch frame exceeds 4 GiB"))?;
                    out.extend_from_slice(&n.to_be_bytes());
                    out.extend_from_slice(&new);
                }
                None => {
                    out.extend_from_slice(&(len as u32).to_be_bytes());
                    out.extend_from_slice(&frame);
                }
            }
        }
        Ok(out)
    }

    /// Ends the stream: an error if it stopped inside a frame.
    pub fn finish(self) -> Result<(), RewriteError> {
        if self.buf.is_empty() {
            Ok(())
        } else {
            Err(malformed(format!(
                "watch stream ended inside a frame ({} bytes left over)",
                self.buf.len()
            )))
        }
    }
}
