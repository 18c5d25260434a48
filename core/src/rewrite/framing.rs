//! The one framer of streamed bodies: newline-delimited JSON (watch events)
//! and 4-byte big-endian length-prefixed frames (protobuf watch events).
//! Frames come out whole, whatever the HTTP chunking, and memory is bounded
//! by the largest frame. Used by the proxy's watch streams, regroup's own
//! watches and the protobuf watch codec alike.

use bytes::{Bytes, BytesMut};

/// How a stream is cut into frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// Newline-delimited JSON (watch events).
    Lines,
    /// 4-byte big-endian length, then that many bytes (protobuf watch).
    LengthPrefixed,
}

impl Framing {
    /// The content of a whole frame: without its `\n` or its length prefix.
    pub fn content(self, frame: &[u8]) -> &[u8] {
        match self {
            Framing::Lines => frame.strip_suffix(b"\n").unwrap_or(frame),
            Framing::LengthPrefixed => frame.get(4..).unwrap_or_default(),
        }
    }

    /// `content` framed again: a `\n` or a new length prefix added.
    pub fn frame(self, content: &[u8]) -> Result<Vec<u8>, FrameError> {
        let mut out = Vec::with_capacity(content.len() + 4);
        match self {
            Framing::Lines => {
                out.extend_from_slice(content);
                out.push(b'\n');
            }
            Framing::LengthPrefixed => {
                let n = u32::try_from(content.len()).map_err(|_| FrameError::TooLarge {
                    bytes: content.len(),
                    limit: u32::MAX as usize,
                })?;
                out.extend_from_slice(&n.to_be_bytes());
                out.extend_from_slice(content);
            }
        }
        Ok(out)
    }
}

/// Why a stream can't be framed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum FrameError {
    /// A frame (declared or buffered) longer than the limit.
    #[error("stream frame of {bytes} bytes exceeds the {limit} byte limit")]
    TooLarge {
        /// The frame's declared or buffered size.
        bytes: usize,
        /// The limit.
        limit: usize,
    },
    /// The stream ended inside a frame.
    #[error("stream ended inside a frame ({0} bytes left over)")]
    Truncated(usize),
}

/// Cuts bytes, fed as they arrive, into whole frames.
#[derive(Debug)]
pub struct Framer {
    framing: Framing,
    limit: usize,
    buf: BytesMut,
}

impl Framer {
    /// A framer whose frames may be at most `limit` bytes.
    pub fn new(framing: Framing, limit: usize) -> Framer {
        Framer {
            framing,
            limit,
            buf: BytesMut::new(),
        }
    }

    /// The framing.
    pub fn framing(&self) -> Framing {
        self.framing
    }

    /// Adds bytes that arrived.
    pub fn push(&mut self, data: &[u8]) {
        self.buf.extend_from_slice(data);
    }

    /// The next whole frame, with its delimiter or prefix, if one is
    /// complete. A frame over the limit is an error as soon as it is known:
    /// a declared length at once, a line when that many bytes have no `\n`.
    pub fn next_frame(&mut self) -> Result<Option<Bytes>, FrameError> {
        let limit = self.limit;
        match self.framing {
            Framing::Lines => match self.buf.iter().position(|&c| c == b'\n') {
                Some(at) if at > limit => Err(FrameError::TooLarge { bytes: at, limit }),
                Some(at) => Ok(Some(self.buf.split_to(at + 1).freeze())),
                None if self.buf.len() > limit => Err(FrameError::TooLarge {
                    bytes: self.buf.len(),
                    limit,
                }),
                None => Ok(None),
            },
            Framing::LengthPrefixed => {
                let Some(head) = self.buf.get(..4) else {
                    return Ok(None);
                };
                let len = u32::from_be_bytes(head.try_into().expect("four bytes")) as usize;
                if len > limit {
                    return Err(FrameError::TooLarge { bytes: len, limit });
                }
                if self.buf.len() < 4 + len {
                    return Ok(None);
                }
                Ok(Some(self.buf.split_to(4 + len).freeze()))
            }
        }
    }

    /// Bytes buffered that are not yet a whole frame.
    pub fn pending(&self) -> usize {
        self.buf.len()
    }

    /// Ends the stream: an error if it stopped inside a frame.
    pub fn finish(&self) -> Result<(), FrameError> {
        match self.buf.len() {
            0 => Ok(()),
            n => Err(FrameError::Truncated(n)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frames(
        framing: Framing,
        chunks: &[&[u8]],
        limit: usize,
    ) -> Result<Vec<Vec<u8>>, FrameError> {
        let mut f = Framer::new(framing, limit);
        let mut out = Vec::new();
        for c in chunks {
            f.push(c);
            while let Some(frame) = f.next_frame()? {
                out.push(frame.to_vec());
            }
        }
        f.finish()?;
        Ok(out)
    }

    #[test]
    fn lines_come_out_whole_whatever_the_chunking() {
        let got = frames(
            Framing::Lines,
            &[b"{\"a\"", b":1}\n{\"b\":2}\n{", b"}\n"],
            64,
        )
        .unwrap();
        assert_eq!(
            got,
            vec![
                b"{\"a\":1}\n".to_vec(),
                b"{\"b\":2}\n".to_vec(),
                b"{}\n".to_vec()
            ]
        );
        assert_eq!(Framing::Lines.content(&got[0]), b"{\"a\":1}");
    }

    #[test]
    fn length_prefixed_frames_come_out_whole_and_reframe() {
        let a = Framing::LengthPrefixed.frame(b"abc").unwrap();
        let b = Framing::LengthPrefixed.frame(b"").unwrap();
        let stream: Vec<u8> = [a.clone(), b.clone()].concat();
        let got = frames(
            Framing::LengthPrefixed,
            &[&stream[..2], &stream[2..5], &stream[5..]],
            8,
        )
        .unwrap();
        assert_eq!(got, vec![a.clone(), b]);
        assert_eq!(Framing::LengthPrefixed.content(&a), b"abc");
    }

    #[test]
    fn a_frame_over_the_limit_is_refused_as_soon_as_known() {
        let mut f = Framer::new(Framing::LengthPrefixed, 8);
        f.push(&100u32.to_be_bytes());
        assert_eq!(
            f.next_frame(),
            Err(FrameError::TooLarge {
                bytes: 100,
                limit: 8
            })
        );
        let mut f = Framer::new(Framing::Lines, 4);
        f.push(b"123456");
        assert!(matches!(f.next_frame(), Err(FrameError::TooLarge { .. })));
    }

    #[test]
    fn a_stream_ending_inside_a_frame_is_truncated() {
        assert_eq!(
            frames(Framing::Lines, &[b"{}\n{"], 8),
            Err(FrameError::Truncated(1))
        );
        assert_eq!(
            frames(Framing::LengthPrefixed, &[&[0, 0, 0, 2, 1]], 8),
            Err(FrameError::Truncated(5))
        );
    }
}
