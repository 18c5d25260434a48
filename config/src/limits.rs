//! `limits:`: sizes and timeouts, with Kubernetes-like defaults.
//!
//! The defaults follow kube-apiserver's own HTTP server where it has one
//! (`staging/src/k8s.io/apiserver/pkg/server/secure_serving.go`:
//! `ReadHeaderTimeout` 32 s, `IdleTimeout` 90 s, `MaxHeaderBytes` 1 MiB; its
//! non-long-running request timeout is 60 s; client-go dials for 30 s; it
//! reads request bodies of at most 3 MiB, `MaxRequestBodyBytes` in
//! `k8s.io/apiserver/pkg/server/config.go`), and regroup's behaviour before
//! the section existed otherwise (100 headers).

use std::time::Duration;

use serde::{Deserialize, Deserializer};

/// Every size and timeout regroup enforces. `Default` is the documented
/// defaults (`docs/config.md`).
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase", default)]
pub struct Limits {
    /// Time a client has to send a request's headers (slowloris). For
    /// HTTP/1.1 this also bounds waiting for the next request on a kept-alive
    /// connection (hyper starts the clock when it waits for a request head).
    #[serde(deserialize_with = "duration")]
    pub header_read_timeout: Duration,
    /// Largest request head (request line and headers), in bytes.
    pub max_header_bytes: usize,
    /// Most headers in one request.
    pub max_headers: usize,
    /// Most connections open at once on each listener; beyond it regroup
    /// stops accepting until one closes.
    pub max_connections: usize,
    /// A connection with no request in flight for this long is closed.
    #[serde(deserialize_with = "duration")]
    pub idle_timeout: Duration,
    /// Time to establish a TCP connection to the upstream.
    #[serde(deserialize_with = "duration")]
    pub upstream_connect_timeout: Duration,
    /// Time from sending a request upstream to its response headers (never
    /// the body: watches and large lists stream for as long as they last).
    /// When it passes the app gets a 504 `Timeout` Status.
    #[serde(deserialize_with = "duration")]
    pub upstream_response_header_timeout: Duration,
    /// The h2 connection to the apiserver is pinged when it received no
    /// frame for this long (client-go's `ReadIdleTimeout`); `0`: never
    /// (no health check).
    #[serde(deserialize_with = "duration")]
    pub upstream_read_idle_timeout: Duration,
    /// No answer to that ping within this: the connection is closed, every
    /// request and watch on it ends and the next request opens a new one
    /// (client-go's `PingTimeout`).
    #[serde(deserialize_with = "duration")]
    pub upstream_ping_timeout: Duration,
    /// Most streams (requests in flight, open watches) regroup opens on one
    /// h2 connection to the apiserver; the server's own advertised limit
    /// (`SETTINGS_MAX_CONCURRENT_STREAMS`) applies too, whichever is lower.
    /// When every connection is full, another is opened.
    pub upstream_max_streams_per_connection: usize,
    /// An upstream connection with nothing in flight this long is closed
    /// (HTTP/1.1; h2 beyond the first connection, which stays), on a timer
    /// of the pool's own. Go's transport: `IdleConnTimeout`, 90 s.
    #[serde(deserialize_with = "duration")]
    pub upstream_idle_connection_timeout: Duration,
    /// Largest request body regroup reads whole to rename (413 beyond,
    /// before the rest is read).
    pub max_request_body_bytes: usize,
    /// Largest AdmissionReview or ConversionReview the webhook listener
    /// reads (413 beyond): a review holds an object and its old version, or
    /// every object of a list being converted.
    pub max_review_bytes: usize,
    /// Largest size a gzip body may inflate to (either direction).
    pub max_inflated_bytes: usize,
    /// Largest single object (a response that is one object, an item of a
    /// list, a watch event) regroup holds to rename; also bounds a gzip
    /// answer's inflated size.
    pub max_object_bytes: usize,
    /// The one memory budget every byte regroup holds to rename is taken
    /// from. `None`: half the cgroup's `memory.max` when there is one, else
    /// [`DEFAULT_MEMORY_BUDGET_BYTES`].
    pub memory_budget_bytes: Option<usize>,
    /// How long new work waits for the budget before it is refused (429).
    #[serde(deserialize_with = "duration")]
    pub memory_budget_wait: Duration,
    /// Where a renamed protobuf list waits for its last item, once past
    /// [`SPILL_KEEP_BYTES`] in memory: an anonymous file (unlinked from
    /// the start) in this directory. `None`: the system's temporary
    /// directory (`TMPDIR`, else `/tmp`).
    pub spill_dir: Option<std::path::PathBuf>,
    /// Most bytes one renamed protobuf list may spill (507 beyond); `0`:
    /// never spill (a list renamed past [`SPILL_KEEP_BYTES`] is refused).
    pub max_spill_bytes: u64,
    /// On SIGTERM/SIGINT: how long in-flight requests get to finish (watches
    /// are ended cleanly at once) before regroup exits anyway.
    #[serde(deserialize_with = "duration")]
    pub shutdown_grace_period: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            header_read_timeout: Duration::from_secs(32),
            max_header_bytes: 1 << 20,
            max_headers: 100,
            max_connections: 4096,
            idle_timeout: Duration::from_secs(90),
            upstream_connect_timeout: Duration::from_secs(30),
            upstream_response_header_timeout: Duration::from_secs(60),
            upstream_read_idle_timeout: UPSTREAM_READ_IDLE_TIMEOUT,
            upstream_ping_timeout: UPSTREAM_PING_TIMEOUT,
            upstream_max_streams_per_connection: UPSTREAM_MAX_STREAMS_PER_CONNECTION,
            upstream_idle_connection_timeout: Duration::from_secs(90),
            max_request_body_bytes: MAX_REQUEST_BODY_BYTES,
            max_review_bytes: 32 << 20,
            max_inflated_bytes: 256 << 20,
            max_object_bytes: MAX_OBJECT_BYTES,
            memory_budget_bytes: None,
            memory_budget_wait: Duration::from_secs(1),
            spill_dir: None,
            max_spill_bytes: MAX_SPILL_BYTES,
            shutdown_grace_period: Duration::from_secs(30),
        }
    }
}

/// client-go's h2 health check: a ping after 30 s without a frame read
/// (`ReadIdleTimeout`), the connection closed when no answer comes within
/// 15 s (`PingTimeout`).
pub const UPSTREAM_READ_IDLE_TIMEOUT: Duration = Duration::from_secs(30);
/// See [`UPSTREAM_READ_IDLE_TIMEOUT`].
pub const UPSTREAM_PING_TIMEOUT: Duration = Duration::from_secs(15);

/// kube-apiserver's own limit of streams per h2 connection: its
/// `--http2-max-streams-per-connection` defaults to 0, which it serves as
/// 100 (docs/proxy.md, "The upstream pool").
pub const UPSTREAM_MAX_STREAMS_PER_CONNECTION: usize = 100;

/// kube-apiserver's `MaxRequestBodyBytes` (3 MiB,
/// `k8s.io/apiserver/pkg/server/config.go`): it refuses any larger body of
/// a write, so regroup never reads more to rename one.
pub const MAX_REQUEST_BODY_BYTES: usize = 3 << 20;

/// The default `maxObjectBytes`: etcd stores at most about 1.5 MiB per
/// object (its `--max-request-bytes`); 8 MiB leaves room for what the
/// apiserver adds (a Table's cells, managed fields, a YAML rendering).
pub const MAX_OBJECT_BYTES: usize = 8 << 20;

/// The default `maxSpillBytes`: 1 GiB, five times the largest list
/// measured (`bench/list_memory.py`'s 200 MiB).
pub const MAX_SPILL_BYTES: u64 = 1 << 30;

/// What a renamed protobuf list keeps in memory before it spills: lists
/// this small (nearly all of them) never touch the disk.
pub const SPILL_KEEP_BYTES: usize = 1 << 20;

/// The memory budget without a cgroup limit to take a share of.
pub const DEFAULT_MEMORY_BUDGET_BYTES: usize = 64 << 20;

/// The largest memory budget (4 GiB: one semaphore's permits).
pub const MAX_MEMORY_BUDGET_BYTES: usize = u32::MAX as usize;

/// The smallest memory budget: one object of the default size, twice.
pub const MIN_MEMORY_BUDGET_BYTES: usize = 1 << 20;

/// The smallest `maxHeaderBytes` (hyper's smallest read buffer).
pub const MIN_HEADER_BYTES: usize = 8192;

impl Limits {
    /// What is wrong with these limits, one message per problem.
    pub fn problems(&self) -> Vec<String> {
        let mut p = Vec::new();
        for (name, d) in [
            ("headerReadTimeout", self.header_read_timeout),
            ("idleTimeout", self.idle_timeout),
            ("upstreamConnectTimeout", self.upstream_connect_timeout),
            (
                "upstreamResponseHeaderTimeout",
                self.upstream_response_header_timeout,
            ),
            ("upstreamPingTimeout", self.upstream_ping_timeout),
            (
                "upstreamIdleConnectionTimeout",
                self.upstream_idle_connection_timeout,
            ),
        ] {
            if d.is_zero() {
                p.push(format!("limits.{name}: must be more than 0s"));
            }
        }
        if self.max_header_bytes < MIN_HEADER_BYTES || self.max_header_bytes > u32::MAX as usize {
            p.push(format!(
                "limits.maxHeaderBytes: {} is out of range ({MIN_HEADER_BYTES} to {})",
                self.max_header_bytes,
                u32::MAX
            ));
        }
        for (name, v) in [
            ("maxHeaders", self.max_headers),
            ("maxConnections", self.max_connections),
            ("maxRequestBodyBytes", self.max_request_body_bytes),
            ("maxReviewBytes", self.max_review_bytes),
            ("maxInflatedBytes", self.max_inflated_bytes),
            ("maxObjectBytes", self.max_object_bytes),
            (
                "upstreamMaxStreamsPerConnection",
                self.upstream_max_streams_per_connection,
            ),
        ] {
            if v == 0 {
                p.push(format!("limits.{name}: must be at least 1"));
            }
        }
        if let Some(b) = self.memory_budget_bytes {
            if !(MIN_MEMORY_BUDGET_BYTES..=MAX_MEMORY_BUDGET_BYTES).contains(&b) {
                p.push(format!(
                    "limits.memoryBudgetBytes: {b} is out of range ({MIN_MEMORY_BUDGET_BYTES} to {MAX_MEMORY_BUDGET_BYTES})"
                ));
            }
        }
        if self.max_connections > (u32::MAX >> 3) as usize {
            p.push("limits.maxConnections: too large".into());
        }
        p
    }
}

/// Why a duration can't be parsed.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not numbers with units.
    #[error(
        "`{0}` is not a duration (numbers with units, as Go writes them: `32s`, `1.5s`, \
         `500ms`, `1m30s`, `2h`)"
    )]
    NotADuration(String),
    /// A `-` before it: no limit can be negative.
    #[error("`{0}`: a negative duration")]
    Negative(String),
}

/// Parses a duration as Go's `time.ParseDuration` does: a sequence of
/// decimal numbers, each with an optional fraction and a unit (`ns`, `us`,
/// `µs`, `ms`, `s`, `m`, `h`): `32s`, `1.5s`, `1m30s`, `300ms`, `2h45m`,
/// and `0`. Negative durations are refused (no limit can be negative).
pub fn parse_duration(s: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError::NotADuration(s.to_owned());
    let mut rest = s.trim();
    if let Some(r) = rest.strip_prefix('+') {
        rest = r;
    }
    if rest.starts_with('-') {
        return Err(DurationError::Negative(s.to_owned()));
    }
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(bad());
    }
    let mut nanos: u128 = 0;
    while !rest.is_empty() {
        let int_len = rest
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(rest.len());
        let int = &rest[..int_len];
        rest = &rest[int_len..];
        let frac = match rest.strip_prefix('.') {
            Some(r) => {
                let n = r.find(|c: char| !c.is_ascii_digit()).unwrap_or(r.len());
                rest = &r[n..];
                &r[..n]
            }
            None => "",
        };
        if int.is_empty() && frac.is_empty() {
            return Err(bad());
        }
        let unit_len = rest
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(rest.len());
        let unit: u128 = match &rest[..unit_len] {
            "ns" => 1,
            "us" | "µs" | "μs" => 1_000,
            "ms" => 1_000_000,
            "s" => 1_000_000_000,
            "m" => 60_000_000_000,
            "h" => 3_600_000_000_000,
            _ => return Err(bad()),
        };
        rest = &rest[unit_len..];
        let whole: u128 = if int.is_empty() {
            0
        } else {
            int.parse().map_err(|_| bad())?
        };
        let mut part = whole.checked_mul(unit).ok_or_else(bad)?;
        // The fraction, to the nanosecond (Go rounds down too).
        let mut scale = unit;
        for d in frac.bytes().take(20) {
            scale /= 10;
            part += u128::from(d - b'0') * scale;
        }
        nanos = nanos.checked_add(part).ok_or_else(bad)?;
    }
    let secs = u64::try_from(nanos / 1_000_000_000).map_err(|_| bad())?;
    Ok(Duration::new(secs, (nanos % 1_000_000_000) as u32))
}

fn duration<'de, D: Deserializer<'de>>(d: D) -> Result<Duration, D::Error> {
    let s = String::deserialize(d)?;
    parse_duration(&s).map_err(serde::de::Error::custom)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_like_go() {
        assert_eq!(parse_duration("32s"), Ok(Duration::from_secs(32)));
        assert_eq!(parse_duration("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse_duration("1m30s"), Ok(Duration::from_secs(90)));
        assert_eq!(parse_duration("2h"), Ok(Duration::from_secs(7200)));
        assert_eq!(parse_duration("0s"), Ok(Duration::ZERO));
        // Go's other forms (time.ParseDuration).
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(
            parse_duration("1m30.25s"),
            Ok(Duration::from_millis(90_250))
        );
        assert_eq!(parse_duration(".5m"), Ok(Duration::from_secs(30)));
        assert_eq!(
            parse_duration("1h2m3s4ms5us6ns"),
            Ok(Duration::new(3723, 4_005_006))
        );
        assert_eq!(parse_duration("10µs"), Ok(Duration::from_micros(10)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("+2s"), Ok(Duration::from_secs(2)));
        for bad in [
            "",
            "32",
            "s",
            "3x",
            "1.s5",
            ".",
            "1..5s",
            "99999999999999999999999h",
        ] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
        assert!(parse_duration("-1s")
            .unwrap_err()
            .to_string()
            .contains("negative"));
        assert!(parse_duration("3x")
            .unwrap_err()
            .to_string()
            .contains("`1.5s`"));
    }

    #[test]
    fn defaults_are_valid() {
        assert!(Limits::default().problems().is_empty());
        assert_eq!(Limits::default().upstream_max_streams_per_connection, 100);
        assert_eq!(
            Limits::default().upstream_idle_connection_timeout,
            Duration::from_secs(90)
        );
    }

    #[test]
    fn out_of_range_limits_are_named() {
        let l = Limits {
            header_read_timeout: Duration::ZERO,
            max_header_bytes: 100,
            max_connections: 0,
            upstream_ping_timeout: Duration::ZERO,
            // 0 turns the h2 health check off: not a problem.
            upstream_read_idle_timeout: Duration::ZERO,
            upstream_max_streams_per_connection: 0,
            upstream_idle_connection_timeout: Duration::ZERO,
            ..Limits::default()
        };
        let p = l.problems().join("\n");
        assert!(
            p.contains("limits.upstreamMaxStreamsPerConnection: must be at least 1"),
            "{p}"
        );
        assert!(p.contains("limits.headerReadTimeout"), "{p}");
        assert!(p.contains("limits.upstreamPingTimeout"), "{p}");
        assert!(
            p.contains("limits.upstreamIdleConnectionTimeout: must be more than 0s"),
            "{p}"
        );
        assert!(!p.contains("upstreamReadIdleTimeout"), "{p}");
        assert!(p.contains("limits.maxHeaderBytes"), "{p}");
        assert!(p.contains("limits.maxConnections"), "{p}");
    }
}
