//! Equality of two short byte strings (member names, the catalog's keys)
//! without a call to `memcmp`: slices' `==` calls it for any length not
//! known at compile time, ~20 instructions of call and set-up for names
//! of 4 to 16 bytes. Lengths are compared first, as `==` does.

/// `a == b`, with the bytes of names up to 16 long read as two
/// overlapping words each.
#[inline(always)]
pub(crate) fn same_bytes(a: &[u8], b: &[u8]) -> bool {
    let n = a.len();
    if n != b.len() {
        return false;
    }
    // Two words of `w` bytes, the first at 0 and the second ending at
    // `n`: together they cover every byte when `w <= n <= 2w`.
    fn words<const W: usize>(s: &[u8]) -> (u64, u64) {
        let word = |at: usize| {
            let mut buf = [0u8; 8];
            buf[..W].copy_from_slice(&s[at..at + W]);
            u64::from_ne_bytes(buf)
        };
        (word(0), word(s.len() - W))
    }
    match n {
        0 => true,
        1..=3 => a[0] == b[0] && a[n / 2] == b[n / 2] && a[n - 1] == b[n - 1],
        4..=7 => words::<4>(a) == words::<4>(b),
        8..=16 => words::<8>(a) == words::<8>(b),
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::same_bytes;
    use proptest::prelude::*;

    #[test]
    fn every_length_and_every_differing_byte() {
        for n in 0..40usize {
            let a: Vec<u8> = (0..n as u8).map(|i| b'a' + i % 26).collect();
            assert!(same_bytes(&a, &a.clone()), "{n}");
            for i in 0..n {
                let mut b = a.clone();
                b[i] ^= 0x20;
                assert!(!same_bytes(&a, &b), "{n} {i}");
            }
            assert!(!same_bytes(&a, &a[..n.saturating_sub(1)]) || n == 0);
        }
    }

    proptest! {
        #[test]
        fn is_slice_equality(a in proptest::collection::vec(any::<u8>(), 0..24),
                             b in proptest::collection::vec(any::<u8>(), 0..24),
                             same in any::<bool>()) {
            let b = if same { a.clone() } else { b };
            prop_assert_eq!(same_bytes(&a, &b), a == b);
        }
    }
}
