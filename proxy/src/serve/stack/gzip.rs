//! gzip bodies from the upstream, inflated within a limit: a body that
//! would inflate past it (a gzip bomb) is refused, never inflated.

use std::io::Read;

use bytes::Bytes;

use crate::serve::status::Failure;

/// Inflates `bytes`, refusing more than `limit` inflated bytes.
pub(crate) fn inflate(bytes: &[u8], limit: usize) -> Result<Bytes, Failure> {
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(4).min(limit));
    flate2::read::GzDecoder::new(bytes)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| Failure::bad_gateway(format!("the API server's gzip body is corrupt: {e}")))?;
    if out.len() > limit {
        return Err(Failure::bad_gateway(format!(
            "the API server's gzip body inflates past {limit} bytes"
        )));
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    #[test]
    fn inflates_within_the_limit() {
        assert_eq!(&inflate(&gzip(b"{}"), 2).unwrap()[..], b"{}");
    }

    #[test]
    fn a_bomb_is_refused_at_the_limit() {
        let bomb = gzip(&vec![0u8; 1 << 20]);
        assert!(bomb.len() < 8 << 10);
        let f = inflate(&bomb, 64 << 10).unwrap_err();
        assert_eq!(f.code, http::StatusCode::BAD_GATEWAY);
        assert!(f.message.contains("inflates past"), "{}", f.message);
    }

    #[test]
    fn corrupt_gzip_is_a_bad_gateway() {
        assert_eq!(
            inflate(b"not gzip", 10).unwrap_err().code,
            http::StatusCode::BAD_GATEWAY
        );
    }
}
