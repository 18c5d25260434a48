//! gzip bodies from the upstream, inflated within a limit: a body that
//! would inflate past it (a gzip bomb) is refused, never inflated.

use std::io::Read;

use bytes::Bytes;

use crate::serve::status::Failure;

/// Why a gzip body was not inflated.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InflateError {
    #[error("gzip body is corrupt: {0}")]
    Corrupt(String),
    #[error("gzip body inflates past {0} bytes")]
    TooLarge(usize),
}

impl InflateError {
    /// As the answer to a request whose own body it is.
    pub(crate) fn of_request(self) -> Failure {
        match self {
            InflateError::TooLarge(_) => Failure::too_large(format!("the request's {self}")),
            InflateError::Corrupt(_) => Failure::bad_request(format!("the request's {self}")),
        }
    }

    /// As the answer to a request whose upstream answered this body.
    pub(crate) fn of_upstream(self) -> Failure {
        Failure::bad_gateway(format!("the API server's {self}"))
    }
}

/// Inflates `bytes`, refusing more than `limit` inflated bytes.
pub(crate) fn inflate(bytes: &[u8], limit: usize) -> Result<Bytes, InflateError> {
    let mut out = Vec::with_capacity(bytes.len().saturating_mul(4).min(limit));
    flate2::read::GzDecoder::new(bytes)
        .take(limit as u64 + 1)
        .read_to_end(&mut out)
        .map_err(|e| InflateError::Corrupt(e.to_string()))?;
    if out.len() > limit {
        return Err(InflateError::TooLarge(limit));
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
        assert!(matches!(f, InflateError::TooLarge(_)));
        let answer = f.of_upstream();
        assert_eq!(answer.code, http::StatusCode::BAD_GATEWAY);
        assert!(
            answer.message.contains("inflates past"),
            "{}",
            answer.message
        );
        let request = inflate(&bomb, 64 << 10).unwrap_err().of_request();
        assert_eq!(request.code, http::StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[test]
    fn corrupt_gzip_is_a_bad_gateway() {
        let e = inflate(b"not gzip", 10).unwrap_err();
        assert!(matches!(e, InflateError::Corrupt(_)));
        assert_eq!(e.of_request().code, http::StatusCode::BAD_REQUEST);
    }
}
