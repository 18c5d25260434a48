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

/// Where a stream's frame boundaries are, without holding its bytes: the
/// state of one frame in progress. The [`Framer`] finds its frames with it,
/// and a stream passed through untouched (a draining watch, ended between
/// two events) reads [`Boundary::at_boundary`] from it.
#[derive(Debug, Clone)]
pub struct Boundary {
    framing: Framing,
    state: State,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// Between two frames (or before the first).
    Between,
    /// Inside a line: its `\n` not yet seen.
    InLine,
    /// Reading a length prefix: `have` of its four bytes so far.
    Prefix { bytes: [u8; 4], have: usize },
    /// Inside a length-prefixed frame of `len` bytes, `remaining` to come.
    Content { len: usize, remaining: usize },
}

impl Boundary {
    /// A stream that has not started: at a boundary.
    pub fn new(framing: Framing) -> Boundary {
        Boundary {
            framing,
            state: State::Between,
        }
    }

    /// True between two frames: every frame begun has ended.
    pub fn at_boundary(&self) -> bool {
        self.state == State::Between
    }

    /// The content length a length prefix declared for the frame in
    /// progress, once the prefix is whole.
    pub fn declared(&self) -> Option<usize> {
        match self.state {
            State::Content { len, .. } => Some(len),
            _ => None,
        }
    }

    /// Reads `data` up to the end of the frame in progress: how many bytes
    /// it took (all of them if the frame goes on past them). The frame has
    /// ended when [`at_boundary`](Self::at_boundary) is true afterwards.
    pub fn advance(&mut self, data: &[u8]) -> usize {
        match self.framing {
            Framing::Lines => match memchr::memchr(b'\n', data) {
                Some(at) => {
                    self.state = State::Between;
                    at + 1
                }
                None => {
                    if !data.is_empty() {
                        self.state = State::InLine;
                    }
                    data.len()
                }
            },
            Framing::LengthPrefixed => {
                let mut used = 0;
                while used < data.len() {
                    match &mut self.state {
                        State::Between | State::InLine => {
                            self.state = State::Prefix {
                                bytes: [0; 4],
                                have: 0,
                            };
                        }
                        State::Prefix { bytes, have } => {
                            bytes[*have] = data[used];
                            *have += 1;
                            used += 1;
                            if *have == 4 {
                                let len = u32::from_be_bytes(*bytes) as usize;
                                if len == 0 {
                                    self.state = State::Between;
                                    return used;
                                }
                                self.state = State::Content {
                                    len,
                                    remaining: len,
                                };
                            }
                        }
                        State::Content { remaining, .. } => {
                            let n = (*remaining).min(data.len() - used);
                            *remaining -= n;
                            used += n;
                            if *remaining == 0 {
                                self.state = State::Between;
                                return used;
                            }
                        }
                    }
                }
                used
            }
        }
    }

    /// Reads all of `data`, however many frames it ends.
    pub fn feed(&mut self, data: &[u8]) {
        match self.framing {
            // Only the last byte says whether a line is open.
            Framing::Lines => {
                if let Some(&last) = data.last() {
                    self.state = if last == b'\n' {
                        State::Between
                    } else {
                        State::InLine
                    };
                }
            }
            Framing::LengthPrefixed => {
                let mut d = data;
                while !d.is_empty() {
                    let n = self.advance(d);
                    d = &d[n..];
                }
            }
        }
    }
}

/// Cuts bytes, fed as they arrive, into whole frames.
#[derive(Debug)]
pub struct Framer {
    limit: usize,
    buf: BytesMut,
    /// Where the frame in progress stands, and how many bytes of `buf` it
    /// has read: each byte is looked at once, however the chunks fall.
    boundary: Boundary,
    read: usize,
}

impl Framer {
    /// A framer whose frames may be at most `limit` bytes.
    pub fn new(framing: Framing, limit: usize) -> Framer {
        Framer {
            limit,
            buf: BytesMut::new(),
            boundary: Boundary::new(framing),
            read: 0,
        }
    }

    /// The framing.
    pub fn framing(&self) -> Framing {
        self.boundary.framing
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
        self.read += self.boundary.advance(&self.buf[self.read..]);
        let ended = self.boundary.at_boundary() && self.read > 0;
        match self.boundary.framing {
            Framing::Lines if ended && self.read - 1 > limit => Err(FrameError::TooLarge {
                bytes: self.read - 1,
                limit,
            }),
            Framing::Lines if !ended && self.read > limit => Err(FrameError::TooLarge {
                bytes: self.read,
                limit,
            }),
            Framing::LengthPrefixed => {
                // A whole frame's length is what it took past its prefix.
                let len = match ended {
                    true => Some(self.read - 4),
                    false => self.boundary.declared(),
                };
                match len {
                    Some(len) if len > limit => Err(FrameError::TooLarge { bytes: len, limit }),
                    _ => Ok(ended.then(|| self.take_frame())),
                }
            }
            Framing::Lines => Ok(ended.then(|| self.take_frame())),
        }
    }

    fn take_frame(&mut self) -> Bytes {
        let n = std::mem::take(&mut self.read);
        self.buf.split_to(n).freeze()
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
    fn event_boundaries_are_tracked() {
        let mut l = Boundary::new(Framing::Lines);
        assert!(l.at_boundary());
        l.feed(b"{\"type\":\"ADDED\"");
        assert!(!l.at_boundary());
        l.feed(b"}\n");
        assert!(l.at_boundary());

        let mut p = Boundary::new(Framing::LengthPrefixed);
        assert!(p.at_boundary());
        p.feed(&[0, 0]);
        assert!(!p.at_boundary());
        p.feed(&[0, 3, b'a']);
        assert!(!p.at_boundary());
        assert_eq!(p.declared(), Some(3));
        p.feed(&[b'b', b'c', 0, 0, 0, 1, b'x']);
        assert!(p.at_boundary());
        p.feed(&[0, 0, 0, 0]);
        assert!(p.at_boundary(), "an empty frame ends with its prefix");
    }

    #[test]
    fn advance_stops_at_the_end_of_the_frame() {
        let mut l = Boundary::new(Framing::Lines);
        assert_eq!(l.advance(b"ab\ncd\n"), 3);
        assert!(l.at_boundary());
        assert_eq!(l.advance(b"cd"), 2);
        assert!(!l.at_boundary());

        let mut p = Boundary::new(Framing::LengthPrefixed);
        assert_eq!(p.advance(&[0, 0, 0, 1, b'x', 0, 0]), 5);
        assert!(p.at_boundary());
        assert_eq!(p.advance(&[0, 0]), 2);
        assert!(!p.at_boundary());
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
        let mut f = Framer::new(Framing::LengthPrefixed, 2);
        f.push(&[0, 0, 0, 3, 1, 2, 3]);
        assert_eq!(
            f.next_frame(),
            Err(FrameError::TooLarge { bytes: 3, limit: 2 }),
            "a frame over the limit is refused even when it arrived whole"
        );
        let mut f = Framer::new(Framing::Lines, 4);
        f.push(b"123456\n");
        assert!(matches!(f.next_frame(), Err(FrameError::TooLarge { .. })));
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
