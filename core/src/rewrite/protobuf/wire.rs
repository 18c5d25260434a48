//! The protobuf wire format, read without copying: fields as byte ranges of
//! the input. Every length is checked against what remains before it is
//! used, so a hostile length prefix can't make anything read out of bounds
//! or allocate.

use super::malformed;
use crate::rewrite::error::RewriteError;

/// The four bytes before every enveloped object.
pub const MAGIC: &[u8] = b"k8s\0";

/// Wire type of a varint field.
pub(super) const VARINT: u8 = 0;
/// Wire type of a 64-bit field.
pub(super) const I64: u8 = 1;
/// Wire type of a length-delimited field (strings, bytes, messages).
pub(crate) const LEN: u8 = 2;
/// Wire type of a 32-bit field.
pub(super) const I32: u8 = 5;

/// The largest field number protobuf allows.
const MAX_FIELD: u64 = (1 << 29) - 1;

/// One field of a message, as positions in the input (absolute offsets).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Field {
    /// The field number.
    pub number: u32,
    /// The wire type.
    pub wire: u8,
    /// Where the tag starts.
    pub start: usize,
    /// For length-delimited fields, where the length varint starts (else
    /// the value's start).
    pub len_start: usize,
    /// Where the value (after the length, for length-delimited fields)
    /// starts.
    pub value_start: usize,
    /// Where the field ends.
    pub end: usize,
}

/// Reads a varint at `pos`, not past `end`: the value and the position after.
pub(crate) fn read_varint(
    buf: &[u8],
    mut pos: usize,
    end: usize,
) -> Result<(u64, usize), RewriteError> {
    let mut value: u64 = 0;
    for i in 0..10 {
        let Some(&b) = buf.get(pos).filter(|_| pos < end) else {
            return Err(malformed("truncated varint"));
        };
        pos += 1;
        if i == 9 && b > 1 {
            return Err(malformed("varint overflows 64 bits"));
        }
        value |= u64::from(b & 0x7f) << (7 * i);
        if b < 0x80 {
            return Ok((value, pos));
        }
    }
    Err(malformed("varint longer than 10 bytes"))
}

/// A varint at `pos` of a buffer that may end before it does: `Ok(None)`
/// when more bytes are needed, else as [`read_varint`].
fn partial_varint(buf: &[u8], pos: usize) -> Result<Option<(u64, usize)>, RewriteError> {
    let rest = buf.get(pos..).unwrap_or_default();
    if rest.len() < 10 && rest.iter().all(|b| b & 0x80 != 0) {
        return Ok(None);
    }
    read_varint(buf, pos, buf.len()).map(Some)
}

/// Where a field starting at `pos` of a buffer still being filled ends, once
/// its tag and length are in: `Ok(None)` while they are not. The end may lie
/// beyond the bytes there so far; it is checked against nothing else.
pub(super) fn field_end(buf: &[u8], pos: usize) -> Result<Option<Field>, RewriteError> {
    let Some((key, after_key)) = partial_varint(buf, pos)? else {
        return Ok(None);
    };
    let number = key >> 3;
    let wire = (key & 7) as u8;
    if number == 0 || number > MAX_FIELD {
        return Err(malformed(format!("invalid field number {number}")));
    }
    let number = number as u32;
    let (value_start, end) = match wire {
        VARINT => match partial_varint(buf, after_key)? {
            Some((_, after)) => (after_key, after as u64),
            None => return Ok(None),
        },
        I64 => (after_key, after_key as u64 + 8),
        I32 => (after_key, after_key as u64 + 4),
        LEN => match partial_varint(buf, after_key)? {
            Some((len, value_start)) => (value_start, (value_start as u64).saturating_add(len)),
            None => return Ok(None),
        },
        3 | 4 => {
            return Err(malformed(format!(
                "field {number}: groups (wire types 3 and 4) are not used by Kubernetes"
            )))
        }
        w => return Err(malformed(format!("field {number}: invalid wire type {w}"))),
    };
    let end = usize::try_from(end)
        .map_err(|_| malformed(format!("field {number}: length beyond any body")))?;
    Ok(Some(Field {
        number,
        wire,
        start: pos,
        len_start: after_key,
        value_start,
        end,
    }))
}

/// Appends the shortest encoding of `v`.
pub(crate) fn put_varint(mut v: u64, out: &mut Vec<u8>) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

/// The fields of the message in `buf[start..end]`, in order.
pub(crate) struct Fields<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
    failed: bool,
}

impl<'a> Fields<'a> {
    /// Iterates the fields in `buf[start..end]` (`end <= buf.len()`).
    pub(crate) fn new(buf: &'a [u8], start: usize, end: usize) -> Self {
        debug_assert!(start <= end && end <= buf.len());
        Fields {
            buf,
            pos: start,
            end,
            failed: false,
        }
    }

    fn next_field(&mut self) -> Result<Field, RewriteError> {
        let start = self.pos;
        let (key, pos) = read_varint(self.buf, self.pos, self.end)?;
        let number = key >> 3;
        let wire = (key & 7) as u8;
        if number == 0 || number > MAX_FIELD {
            return Err(malformed(format!("invalid field number {number}")));
        }
        let number = number as u32;
        let remaining = self.end - pos;
        let (len_start, value_start, end) = match wire {
            VARINT => {
                let (_, after) = read_varint(self.buf, pos, self.end)?;
                (pos, pos, after)
            }
            I64 | I32 => {
                let n = if wire == I64 { 8 } else { 4 };
                if remaining < n {
                    return Err(malformed(format!(
                        "field {number}: truncated fixed-size value"
                    )));
                }
                (pos, pos, pos + n)
            }
            LEN => {
                let (len, value_start) = read_varint(self.buf, pos, self.end)?;
                let available = (self.end - value_start) as u64;
                if len > available {
                    return Err(malformed(format!(
                        "field {number}: length {len} exceeds the {available} bytes left"
                    )));
                }
                (pos, value_start, value_start + len as usize)
            }
            3 | 4 => {
                return Err(malformed(format!(
                    "field {number}: groups (wire types 3 and 4) are not used by Kubernetes"
                )))
            }
            w => return Err(malformed(format!("field {number}: invalid wire type {w}"))),
        };
        self.pos = end;
        Ok(Field {
            number,
            wire,
            start,
            len_start,
            value_start,
            end,
        })
    }
}

impl Iterator for Fields<'_> {
    type Item = Result<Field, RewriteError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.failed || self.pos >= self.end {
            return None;
        }
        let f = self.next_field();
        self.failed = f.is_err();
        Some(f)
    }
}

/// Checks that `buf[start..end]` is a well-formed sequence of fields.
#[cfg(test)]
pub(super) fn validate(buf: &[u8], start: usize, end: usize) -> Result<(), RewriteError> {
    for f in Fields::new(buf, start, end) {
        f?;
    }
    Ok(())
}

/// The value bytes of the last occurrence of length-delimited field
/// `number` in `buf[start..end]` (protobuf: the last one wins).
pub(super) fn last_len_field(
    buf: &[u8],
    start: usize,
    end: usize,
    number: u32,
) -> Result<Option<Field>, RewriteError> {
    let mut found = None;
    for f in Fields::new(buf, start, end) {
        let f = f?;
        if f.number == number {
            if f.wire != LEN {
                return Err(wrong_wire(&f));
            }
            found = Some(f);
        }
    }
    Ok(found)
}

/// The error for a field whose wire type is not the one its type has.
/// What to put in place of a field's value (`None`: keep it).
pub type Edit<'e> = &'e mut dyn FnMut(&[u8]) -> Result<Option<Vec<u8>>, RewriteError>;

/// `msg` with the value of every length-delimited field `number` replaced
/// by what `edit` returns for it (kept where it returns `None`), the
/// field's length prefix re-encoded in shortest form. `Ok(None)`: nothing
/// replaced. Every other byte is copied as it came.
pub fn splice_field(
    msg: &[u8],
    number: u32,
    edit: Edit<'_>,
) -> Result<Option<Vec<u8>>, RewriteError> {
    let mut out: Option<Vec<u8>> = None;
    let mut copied = 0;
    for f in Fields::new(msg, 0, msg.len()) {
        let f = f?;
        if f.number != number {
            continue;
        }
        if f.wire != LEN {
            return Err(wrong_wire(&f));
        }
        let Some(new) = edit(&msg[f.value_start..f.end])? else {
            continue;
        };
        let o = out.get_or_insert_with(|| Vec::with_capacity(msg.len() + new.len()));
        o.extend_from_slice(&msg[copied..f.len_start]);
        put_varint(new.len() as u64, o);
        o.extend_from_slice(&new);
        copied = f.end;
    }
    Ok(out.map(|mut o| {
        o.extend_from_slice(&msg[copied..]);
        o
    }))
}

pub(crate) fn wrong_wire(f: &Field) -> RewriteError {
    malformed(format!(
        "field {} has wire type {}, expected a length-delimited value",
        f.number, f.wire
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn varints_round_trip_and_reject_overflow() {
        for v in [
            0u64,
            1,
            127,
            128,
            300,
            16_383,
            16_384,
            u32::MAX as u64,
            u64::MAX,
        ] {
            let mut b = Vec::new();
            put_varint(v, &mut b);
            assert_eq!(read_varint(&b, 0, b.len()).unwrap(), (v, b.len()));
        }
        assert!(read_varint(&[0x80; 11], 0, 11).is_err());
        assert!(read_varint(
            &[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x02],
            0,
            10
        )
        .is_err());
        assert!(read_varint(&[0x80], 0, 1).is_err());
        assert!(read_varint(&[0x01], 0, 0).is_err());
    }

    #[test]
    fn fields_report_positions() {
        // field 1 varint 150, field 2 "hi", field 3 fixed32.
        let b = [0x08, 0x96, 0x01, 0x12, 0x02, b'h', b'i', 0x1d, 1, 2, 3, 4];
        let fs: Vec<Field> = Fields::new(&b, 0, b.len()).map(Result::unwrap).collect();
        assert_eq!(fs.len(), 3);
        assert_eq!(
            (
                fs[1].number,
                fs[1].wire,
                fs[1].len_start,
                fs[1].value_start,
                fs[1].end
            ),
            (2, LEN, 4, 5, 7)
        );
        assert_eq!(fs[2].end, 12);
    }

    #[test]
    fn hostile_lengths_are_refused_before_use() {
        // field 1, length 2^62: far beyond the input.
        let mut b = vec![0x0a];
        put_varint(1 << 62, &mut b);
        assert!(validate(&b, 0, b.len()).is_err());
        // A sub-range can't be escaped: the length is checked against `end`.
        let b = [0x0a, 0x03, b'a', b'b', b'c'];
        assert!(validate(&b, 0, 4).is_err());
        assert!(validate(&b, 0, 5).is_ok());
    }

    #[test]
    fn invalid_keys_are_refused() {
        assert!(validate(&[0x00, 0x01], 0, 2).is_err()); // field 0
        assert!(validate(&[0x0b], 0, 1).is_err()); // start group
        assert!(validate(&[0x0e], 0, 1).is_err()); // wire type 6
        assert!(validate(&[0x09, 1, 2], 0, 3).is_err()); // truncated fixed64
    }
}
