//! Listen addresses as people write them: `127.0.0.1:8001`, `[::1]:8001`,
//! and, as Go and kubectl accept, `:8001` (the listener's default host) and
//! `localhost:8001` (loopback).

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use serde::{Deserialize, Deserializer};

/// A listen address in none of the accepted forms; the message says which
/// they are.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "`{text}` is not a listen address: write HOST:PORT (`127.0.0.1:8001`, `[::1]:8001`, \
     `0.0.0.0:9090`), `:PORT` ({default_host}) or `localhost:PORT`"
)]
pub struct ListenAddrError {
    /// The address as written.
    text: String,
    /// Where `:PORT` listens.
    default_host: IpAddr,
}

/// Parses `s`; `:PORT` listens on `default_host`, `localhost:PORT` on
/// 127.0.0.1. The error says which forms are accepted.
pub fn parse_listen(s: &str, default_host: IpAddr) -> Result<SocketAddr, ListenAddrError> {
    let t = s.trim();
    let bad = || ListenAddrError {
        text: s.to_owned(),
        default_host,
    };
    if let Ok(a) = t.parse::<SocketAddr>() {
        return Ok(a);
    }
    let (host, port) = t.rsplit_once(':').ok_or_else(bad)?;
    let port: u16 = port.parse().map_err(|_| bad())?;
    let ip = match host {
        "" => default_host,
        "localhost" => IpAddr::V4(Ipv4Addr::LOCALHOST),
        _ => return Err(bad()),
    };
    Ok(SocketAddr::new(ip, port))
}

fn with_default<'de, D: Deserializer<'de>>(
    d: D,
    host: IpAddr,
) -> Result<Option<SocketAddr>, D::Error> {
    match Option::<String>::deserialize(d)? {
        None => Ok(None),
        Some(s) => parse_listen(&s, host)
            .map(Some)
            .map_err(serde::de::Error::custom),
    }
}

/// A loopback listener's address (`:PORT` is 127.0.0.1:PORT).
pub fn loopback_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    with_default(d, IpAddr::V4(Ipv4Addr::LOCALHOST))
}

/// A listener's address (`:PORT` is every interface, as in Go).
pub fn any_opt<'de, D: Deserializer<'de>>(d: D) -> Result<Option<SocketAddr>, D::Error> {
    with_default(d, IpAddr::V4(Ipv4Addr::UNSPECIFIED))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn colon_port_and_localhost_are_accepted() {
        let lo = IpAddr::V4(Ipv4Addr::LOCALHOST);
        let any = IpAddr::V4(Ipv4Addr::UNSPECIFIED);
        assert_eq!(
            parse_listen(":18003", lo).unwrap().to_string(),
            "127.0.0.1:18003"
        );
        assert_eq!(
            parse_listen(":9090", any).unwrap().to_string(),
            "0.0.0.0:9090"
        );
        assert_eq!(
            parse_listen("localhost:18003", any).unwrap().to_string(),
            "127.0.0.1:18003"
        );
        assert_eq!(
            parse_listen("[::1]:8001", lo).unwrap().to_string(),
            "[::1]:8001"
        );
        assert_eq!(
            parse_listen("10.0.0.1:80", lo).unwrap().to_string(),
            "10.0.0.1:80"
        );
        for bad in ["18003", "example.com:80", ":http", "localhost", ":99999"] {
            let e = parse_listen(bad, lo).unwrap_err().to_string();
            assert!(
                e.contains("`:PORT`") && e.contains("localhost:PORT"),
                "{bad}: {e}"
            );
        }
    }

    #[test]
    fn the_config_file_takes_them_too() {
        let s = crate::load(
            "rules:\n- from: a.example.com\n  to: a.b.example.com\nlisteners:\n  http: :18003\n  metrics: :9090\n",
        )
        .unwrap();
        assert_eq!(
            s.file.listeners.http.unwrap().to_string(),
            "127.0.0.1:18003"
        );
        assert_eq!(
            s.file.listeners.metrics.unwrap().to_string(),
            "0.0.0.0:9090"
        );
        let e = crate::load(
            "rules:\n- from: a.example.com\n  to: a.b.example.com\nlisteners:\n  http: here:1\n",
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("localhost:PORT"), "{e}");
    }
}
