//! gzip bodies from the upstream, inflated within a limit: a body that
//! would inflate past it (a gzip bomb) is refused, never inflated.

use std::io::Read;

use bytes::Bytes;

use crate::body::budget::{self, Held, Reason, Refusal};
use crate::status::Failure;

/// Why a gzip body was not inflated.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InflateError {
    #[error("gzip body is corrupt: {0}")]
    Corrupt(String),
    #[error("gzip body inflates past {0} bytes")]
    TooLarge(usize),
    #[error("gzip body: {0:?}")]
    Budget(Refusal),
}

impl InflateError {
    /// As the answer to a request whose own body it is.
    pub(crate) fn of_request(self) -> Failure {
        match self {
            InflateError::TooLarge(n) => {
                budget::refused(Reason::RequestTooLarge, "an inflated request body", n);
                Failure::too_large(format!("the request's {self}"))
            }
            InflateError::Corrupt(_) => Failure::bad_request(format!("the request's {self}")),
            InflateError::Budget(r) => r.failure("inflating the request body", false),
        }
    }

    /// As the answer to a request whose upstream answered this body.
    pub(crate) fn of_upstream(self) -> Failure {
        match self {
            InflateError::TooLarge(n) => {
                budget::refused(Reason::ObjectTooLarge, "an inflated answer", n);
                Failure::bad_gateway(format!("the API server's {self}"))
            }
            InflateError::Budget(r) => r.failure("inflating the API server's answer", true),
            InflateError::Corrupt(_) => Failure::bad_gateway(format!("the API server's {self}")),
        }
    }
}

/// Inflates `bytes`, refusing more than `limit` inflated bytes, taking
/// every inflated byte (as allocated) from the memory budget as it comes:
/// a bomb stops at `limit` or at the budget, whichever comes first, having
/// held at most that. The one inflater of request and response bodies.
pub(crate) async fn inflate_held(
    bytes: &[u8],
    limit: usize,
    held: &mut Held,
) -> Result<Bytes, InflateError> {
    let mut deadline = budget::budget().deadline();
    let mut d = flate2::read::GzDecoder::new(bytes);
    let mut out: Vec<u8> = Vec::new();
    let mut chunk = vec![0u8; 64 << 10];
    let base = held.bytes();
    loop {
        let n = d
            .read(&mut chunk)
            .map_err(|e| InflateError::Corrupt(e.to_string()))?;
        if n == 0 {
            break;
        }
        if out.len() + n > limit {
            return Err(InflateError::TooLarge(limit));
        }
        if out.capacity() < out.len() + n {
            // Grows as a Vec does (doubling), within the limit.
            let cap = (out.len() + n).max(out.capacity() * 2).min(limit);
            held.set(base + cap, &mut deadline)
                .await
                .map_err(InflateError::Budget)?;
            out.reserve_exact(cap - out.len());
        }
        out.extend_from_slice(&chunk[..n]);
    }
    Ok(Bytes::from(out))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    async fn inflate(bytes: &[u8], limit: usize) -> Result<Bytes, InflateError> {
        let mut held = budget::budget().empty();
        inflate_held(bytes, limit, &mut held).await
    }

    fn gzip(b: &[u8]) -> Vec<u8> {
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(b).unwrap();
        e.finish().unwrap()
    }

    #[tokio::test]
    async fn inflates_within_the_limit() {
        assert_eq!(&inflate(&gzip(b"{}"), 2).await.unwrap()[..], b"{}");
    }

    #[tokio::test]
    async fn a_bomb_is_refused_at_the_limit() {
        let bomb = gzip(&vec![0u8; 1 << 20]);
        assert!(bomb.len() < 8 << 10);
        let f = inflate(&bomb, 64 << 10).await.unwrap_err();
        assert!(matches!(f, InflateError::TooLarge(_)));
        let answer = f.of_upstream();
        assert_eq!(answer.code, http::StatusCode::BAD_GATEWAY);
        assert!(
            answer.message.contains("inflates past"),
            "{}",
            answer.message
        );
        let request = inflate(&bomb, 64 << 10).await.unwrap_err().of_request();
        assert_eq!(request.code, http::StatusCode::PAYLOAD_TOO_LARGE);
    }

    #[tokio::test]
    async fn corrupt_gzip_is_a_bad_gateway() {
        let e = inflate(b"not gzip", 10).await.unwrap_err();
        assert!(matches!(e, InflateError::Corrupt(_)));
        assert_eq!(e.of_request().code, http::StatusCode::BAD_REQUEST);
    }
}
