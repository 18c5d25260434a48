use std::io;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use tracing::Level;
use tracing_subscriber::fmt::format::Writer;
use tracing_subscriber::fmt::time::FormatTime;

use super::{civil_from_days, write_utc_micros, TextFormat};

/// A timer that always writes the same instant, for both formatters.
#[derive(Clone)]
struct Fixed;

impl FormatTime for Fixed {
    fn format_time(&self, w: &mut Writer<'_>) -> std::fmt::Result {
        w.write_str("2026-11-25T01:02:03.000004Z")
    }
}

#[derive(Clone, Default)]
struct Captured(Arc<Mutex<Vec<u8>>>);

impl io::Write for Captured {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.0.lock().unwrap().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Captured {
    fn text(&self) -> String {
        String::from_utf8(self.0.lock().unwrap().clone()).unwrap()
    }
}

#[derive(Debug)]
struct Failed {
    source: Option<io::Error>,
}

impl std::fmt::Display for Failed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("the upstream failed")
    }
}

impl std::error::Error for Failed {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        self.source.as_ref().map(|e| e as _)
    }
}

#[derive(Debug)]
#[allow(dead_code)] // read through Debug only
struct Rule {
    from: &'static str,
    to: String,
}

/// The events compared: regroup's request line and warnings as they are
/// written, and every kind of field value the visitor can be handed.
fn emit() {
    let method = http::Method::GET;
    let template = "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos/{name}";
    tracing::info!(
        listener = "proxy",
        %method,
        path = %template,
        status = 200u16,
        ms = Duration::from_nanos(412_347).as_secs_f64() * 1e3,
        "request"
    );
    tracing::warn!(%method, path = %"/api/v1/pods", code = 502u16, reason = "BadGateway", "{}", "no answer");
    tracing::error!(
        listener = "front",
        "the API server's list can't be renamed, aborting the response: {}",
        "truncated"
    );
    tracing::info!(
        owned = %String::from("an owned string"),
        count = 18_446_744_073_709_551_615u64,
        delta = -42i64,
        wide = 340_282_366_920_938_463_463_374_607_431_768_211_455u128,
        took = ?Duration::from_micros(1_234_567),
        yes = true,
        no = false,
        rule = ?Rule { from: "a.example.com", to: "b.example.com".into() },
        r#type = "raw identifier",
        "r#kind" = "a raw name spelled out",
        "fields of every kind"
    );
    for f in [
        0.0,
        -0.0,
        1.0,
        0.1,
        123.456,
        1e-4,
        9.999e-5,
        1e15,
        1e16,
        1e300,
        -2.5e-320,
        f64::MAX,
        f64::MIN_POSITIVE,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ] {
        tracing::info!(ms = f, "floats");
    }
    tracing::info!(
        quoted = "a \"quoted\" \\ back\tslash\nnew line",
        unicode = "caf\u{e9} \u{200b}",
        control = "\x1b[31mred\x07",
        empty = "",
        backslash = "a\\b",
        quote = "say \"hi\"",
        tab = "a\tb",
        del = "a\x7fb",
        printable = " !'~",
        "strings that need escaping"
    );
    tracing::info!("a message with \x1b[31m terminal \u{9b} controls\x7f \x07\x08\x0c \u{80}\u{9f}\u{a0}\u{7f}");
    tracing::info!(text = "\x1b[0m", "{}", "formatted \x1b[2J message");
    tracing::info!(no_message = 1u64);
    tracing::info!(
        error = &Failed {
            source: Some(io::Error::other("connection reset"))
        } as &(dyn std::error::Error + 'static),
        "with an error"
    );
    tracing::info!(
        error = &Failed { source: None } as &(dyn std::error::Error + 'static),
        "with an error without source"
    );
    tracing::info!(
        log.target = "hidden",
        kept = 1u64,
        "fields named log. are left out"
    );
    tracing::info!(
        log.error = &Failed { source: None } as &(dyn std::error::Error + 'static),
        kept = 1u64
    );
    tracing::info!(target: "log", kept = 2u64, log.target = "other", "a log-like event");
    tracing::info!(target: "some::other::target", peer = %"127.0.0.1:4242", "another target");
    tracing::debug!(listen = %"127.0.0.1:8001", "debug");
    tracing::trace!("trace");
    let span = tracing::info_span!("upstream", host = "10.0.0.1", port = 6443u64);
    span.in_scope(|| {
        tracing::info!(status = 200u64, "inside a span");
        tracing::info_span!("inner").in_scope(|| tracing::warn!("nested spans"));
    });
    tracing::info!(parent: &span, "explicit parent");
    let empty = tracing::info_span!("no_fields");
    empty.in_scope(|| tracing::info!("span without fields"));
}

fn through(ours: bool, ansi: bool) -> String {
    let out = Captured::default();
    let sink = out.clone();
    let builder = tracing_subscriber::fmt()
        .with_max_level(Level::TRACE)
        .with_ansi(ansi)
        .with_writer(move || sink.clone())
        .with_timer(Fixed);
    if ours {
        let subscriber = builder.event_format(TextFormat::with_timer(Fixed)).finish();
        tracing::subscriber::with_default(subscriber, emit);
    } else {
        tracing::subscriber::with_default(builder.finish(), emit);
    }
    out.text()
}

#[test]
fn text_format_writes_the_stock_full_format_byte_for_byte() {
    let stock = through(false, false);
    let ours = through(true, false);
    assert!(stock.lines().count() > 30, "{stock}");
    for (s, o) in stock.lines().zip(ours.lines()) {
        assert_eq!(s, o);
    }
    assert_eq!(stock, ours);
}

#[test]
fn text_format_request_line_reads_as_documented() {
    let ours = through(true, false);
    let first = ours.lines().next().unwrap();
    assert_eq!(
        first,
        "2026-11-25T01:02:03.000004Z  INFO regroup::observe::log_format::tests: request \
         listener=\"proxy\" method=GET \
         path=/apis/samplecontroller.k8s.io/v1alpha1/namespaces/{namespace}/foos/{name} \
         status=200 ms=0.41234699999999996"
    );
}

#[test]
fn text_format_on_a_terminal_writes_the_stock_colours() {
    let stock = through(false, true);
    assert!(stock.contains("\x1b["), "ANSI colours expected: {stock}");
    assert_eq!(stock, through(true, true));
}

fn at(secs: i64, micros: u32) -> String {
    let t = if secs >= 0 {
        UNIX_EPOCH + Duration::from_secs(secs as u64)
    } else {
        UNIX_EPOCH - Duration::from_secs(secs.unsigned_abs())
    } + Duration::from_micros(u64::from(micros));
    stamp(t)
}

fn stamp(t: SystemTime) -> String {
    let mut s = String::new();
    write_utc_micros(&mut s, t).unwrap();
    s
}

#[test]
fn timestamps_are_rfc3339_utc_with_microseconds() {
    let cases: &[(&str, i64, u32)] = &[
        ("1970-01-01T00:00:00.000000Z", 0, 0),
        ("1970-01-01T00:00:00.000001Z", 0, 1),
        ("1970-01-01T00:00:00.500000Z", 0, 500_000),
        ("1970-01-02T01:01:01.000001Z", 86_400 + 3_661, 1),
        ("2026-11-25T01:02:03.000004Z", 1_795_568_523, 4),
        // The end of a year and the next second.
        ("2026-12-31T23:59:59.999999Z", 1_798_761_599, 999_999),
        ("2027-01-01T00:00:00.000000Z", 1_798_761_600, 0),
        // Leap years: every 4th, not every 100th, every 400th.
        ("2024-02-29T12:00:00.000000Z", 1_709_208_000, 0),
        ("2024-03-01T00:00:00.000000Z", 1_709_251_200, 0),
        ("2023-03-01T00:00:00.000000Z", 1_677_628_800, 0),
        ("2000-02-29T00:00:00.000000Z", 951_782_400, 0),
        ("2100-03-01T00:00:00.000000Z", 4_107_542_400, 0),
        ("2100-02-28T23:59:59.000000Z", 4_107_542_399, 0),
        ("1900-03-01T00:00:00.000000Z", -2_203_891_200, 0),
        ("2038-01-19T03:14:07.000000Z", i32::MAX as i64, 0),
        ("2038-01-19T03:14:08.000000Z", i32::MAX as i64 + 1, 0),
        // Before the epoch: the fraction counts forward from the second.
        ("1969-12-31T23:59:59.000000Z", -1, 0),
        ("1969-12-31T23:59:59.500000Z", -1, 500_000),
        ("1969-12-30T22:58:59.000001Z", -86_400 - 3_661, 1),
        ("1901-12-13T20:45:52.000000Z", i32::MIN as i64, 0),
        ("9999-12-31T23:59:59.000000Z", 253_402_300_799, 0),
        ("+10000-01-01T00:00:00.000000Z", 253_402_300_800, 0),
        ("0000-01-01T00:00:00.000000Z", -62_167_219_200, 0),
        ("-0001-12-31T23:59:59.000000Z", -62_167_219_201, 0),
    ];
    #[cfg(not(windows))] // SystemTime's range there is narrower
    let cases = &[
        cases,
        &[
            ("+292277026596-12-04T15:30:07.000000Z", i64::MAX, 0),
            ("-292277022657-01-27T08:29:53.000000Z", i64::MIN + 1, 0),
        ],
    ]
    .concat();
    for &(expected, secs, micros) in cases {
        assert_eq!(at(secs, micros), expected, "{secs} s + {micros} us");
    }
    // Nanoseconds are cut, not rounded (as the stock timer does).
    assert_eq!(
        stamp(UNIX_EPOCH + Duration::from_nanos(1_999)),
        "1970-01-01T00:00:00.000001Z"
    );
    assert_eq!(
        stamp(UNIX_EPOCH - Duration::from_nanos(1)),
        "1969-12-31T23:59:59.999999Z"
    );
}

#[test]
fn civil_dates_agree_with_counting_days_from_1600_to_2500() {
    let leap = |y: i64| (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
    let days_in = |y: i64, m: u32| match m {
        2 if leap(y) => 29,
        2 => 28,
        4 | 6 | 9 | 11 => 30,
        _ => 31,
    };
    // 1600-01-01 is 135,140 days before the epoch.
    let (mut y, mut m, mut d) = (1600i64, 1u32, 1u32);
    for days in -135_140..=194_000i64 {
        assert_eq!(civil_from_days(days), (y, m, d), "day {days}");
        d += 1;
        if d > days_in(y, m) {
            d = 1;
            m += 1;
            if m > 12 {
                m = 1;
                y += 1;
            }
        }
    }
    assert_eq!((y, m, d), (2501, 2, 27));
}

fn debug_of(v: f64) -> String {
    let mut s = String::new();
    super::write_f64(&mut s, v).unwrap();
    s
}

#[test]
fn floats_are_written_as_debug_writes_them() {
    let edges = [
        0.0,
        -0.0,
        1e-4,
        -1e-4,
        1e-4 - 1e-20,
        f64::from_bits(1e16f64.to_bits() - 1),
        1e16,
        1e16 - 2.0,
        0.1 + 0.2,
        // Midway between two shortest decimals: `{:?}` rounds up.
        984_624_112_542_591.0 + 0.25,
        1000.0 + 1.0 / 16384.0,
        1.0 / 3.0,
        f64::EPSILON,
        f64::MIN_POSITIVE,
        5e-324,
        f64::MAX,
        f64::NAN,
        f64::INFINITY,
        f64::NEG_INFINITY,
    ];
    for v in edges {
        assert_eq!(debug_of(v), format!("{v:?}"), "{v:e}");
    }
    // Small values with few fraction bits: ties at 18 significant digits
    // (0.000199794769287109375 = 419 / 2^21 is midway between two of 17).
    for k in 14..=26 {
        for n in 1..=20_000u32 {
            let v = f64::from(n) / 2f64.powi(k);
            assert_eq!(debug_of(v), format!("{v:?}"), "{n} / 2^{k}");
        }
    }
    // xorshift64: any bit pattern (every exponent, NaN payloads), and the
    // values the request line logs (milliseconds from a Duration).
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..std::env::var("REGROUP_FLOAT_CASES").map_or(200_000, |n| n.parse().unwrap()) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let any = f64::from_bits(x);
        assert_eq!(debug_of(any), format!("{any:?}"), "{x:#x}");
        let ms = Duration::from_nanos(x % 100_000_000_000).as_secs_f64() * 1e3;
        assert_eq!(debug_of(ms), format!("{ms:?}"), "{x}");
        let scaled = (x >> 11) as f64 / (1u64 << 53) as f64 * 10f64.powi((x % 24) as i32 - 6);
        assert_eq!(debug_of(scaled), format!("{scaled:?}"), "{x}");
        // Few fraction bits, around the 21 below which a tie is possible.
        let short = (x >> 12) as f64 / 2f64.powi((x % 40) as i32);
        assert_eq!(debug_of(short), format!("{short:?}"), "{x}");
    }
}
