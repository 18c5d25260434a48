//! The text log line: byte for byte `tracing-subscriber`'s default (`Full`)
//! format, written without most of its `core::fmt` calls.
//!
//! Every answered request logs one `info` line; the stock formatter spent
//! ~10.7k instructions on it (`write!` per field, per ANSI style that is
//! off, per timestamp part). [`TextFormat`] writes the timestamp, level,
//! target, field names, integers, bools, plain strings and most floats
//! directly; other values through their `Debug` as the stock visitor does.
//! What it does not write itself it hands to the stock code, so the line
//! cannot drift: a writer with ANSI colours (stderr a terminal), an event
//! inside a span, a record from the `log` crate, an error value (with its
//! sources), a float that `core::fmt` must round.

use std::fmt;
use std::time::{SystemTime, UNIX_EPOCH};

use tracing::field::{Field, Visit};
use tracing::{Event, Level, Metadata, Subscriber};
use tracing_subscriber::field::VisitOutput;
use tracing_subscriber::fmt::format::{DefaultVisitor, Format, Full, Writer};
use tracing_subscriber::fmt::time::FormatTime;
use tracing_subscriber::fmt::{FmtContext, FormatEvent, FormatFields};
use tracing_subscriber::registry::LookupSpan;

/// The text format's event formatter: the stock `Full` format's bytes.
#[derive(Debug)]
pub struct TextFormat<T = UtcMicros> {
    timer: T,
    /// What the rare events (see the module's doc) are written by.
    stock: Format<Full, T>,
}

impl TextFormat {
    /// The production formatter: timestamps from the system clock.
    pub fn new() -> Self {
        Self::with_timer(UtcMicros)
    }
}

impl Default for TextFormat {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: FormatTime + Clone> TextFormat<T> {
    /// The formatter with `timer` writing each line's timestamp (tests pass
    /// a fixed one).
    pub fn with_timer(timer: T) -> Self {
        Self {
            stock: tracing_subscriber::fmt::format().with_timer(timer.clone()),
            timer,
        }
    }
}

impl<S, N, T> FormatEvent<S, N> for TextFormat<T>
where
    S: Subscriber + for<'a> LookupSpan<'a>,
    N: for<'a> FormatFields<'a> + 'static,
    T: FormatTime,
{
    fn format_event(
        &self,
        ctx: &FmtContext<'_, S, N>,
        mut writer: Writer<'_>,
        event: &Event<'_>,
    ) -> fmt::Result {
        let meta = event.metadata();
        if writer.has_ansi_escapes() || from_log_crate(meta) || ctx.event_scope().is_some() {
            return self.stock.format_event(ctx, writer, event);
        }
        // The stock order: timestamp, level, target, fields.
        if self.timer.format_time(&mut writer).is_err() {
            writer.write_str("<unknown time>")?;
        }
        writer.write_char(' ')?;
        writer.write_str(padded_level(meta.level()))?;
        writer.write_str(meta.target())?;
        writer.write_str(": ")?;
        let mut fields = FieldWriter::new(writer.by_ref());
        event.record(&mut fields);
        fields.finish()?;
        writer.write_char('\n')
    }
}

/// A `log` crate record turned into an event: the stock formatter takes its
/// level and target from the record's own fields.
fn from_log_crate(meta: &Metadata<'_>) -> bool {
    meta.target() == "log" && meta.fields().field("log.target").is_some()
}

/// The level right-aligned in five columns, and the space after it.
fn padded_level(level: &Level) -> &'static str {
    match *level {
        Level::TRACE => "TRACE ",
        Level::DEBUG => "DEBUG ",
        Level::INFO => " INFO ",
        Level::WARN => " WARN ",
        Level::ERROR => "ERROR ",
    }
}

/// An event's fields as the stock visitor writes them, in the order
/// recorded, separated by one space: the message as its text, the others
/// as `name=value` with the value in its `Debug` form.
struct FieldWriter<'a> {
    writer: Writer<'a>,
    first: bool,
    result: fmt::Result,
}

impl<'a> FieldWriter<'a> {
    fn new(writer: Writer<'a>) -> Self {
        Self {
            writer,
            first: true,
            result: Ok(()),
        }
    }

    fn finish(self) -> fmt::Result {
        self.result
    }

    /// Whether `field` is written: not after an error, and not the `log.`
    /// fields (the stock visitor leaves those to the event's metadata).
    fn wants(&self, field: &Field) -> bool {
        self.result.is_ok() && !field.name().starts_with("log.")
    }

    /// The separating space and `name=` (a raw identifier's `r#` dropped).
    fn key(&mut self, field: &Field) -> fmt::Result {
        self.separate()?;
        let name = field.name();
        self.writer
            .write_str(name.strip_prefix("r#").unwrap_or(name))?;
        self.writer.write_char('=')
    }

    fn value(&mut self, field: &Field, write: impl FnOnce(&mut Writer<'a>) -> fmt::Result) {
        self.result = self.key(field).and_then(|()| write(&mut self.writer));
    }

    /// The message: its text with terminal control characters escaped
    /// when the writer asks for it (as the stock visitor does).
    fn message(&mut self, write: impl FnOnce(&mut dyn fmt::Write) -> fmt::Result) {
        self.result = self.separate().and_then(|()| {
            if self.writer.sanitizes_ansi_escapes() {
                write(&mut Escaping(&mut self.writer))
            } else {
                write(&mut self.writer)
            }
        });
    }

    /// The space before every field but the first.
    fn separate(&mut self) -> fmt::Result {
        if self.first {
            self.first = false;
            Ok(())
        } else {
            self.writer.write_char(' ')
        }
    }
}

impl Visit for FieldWriter<'_> {
    fn record_str(&mut self, field: &Field, value: &str) {
        if !self.wants(field) {
            return;
        }
        if field.name() == "message" {
            self.message(|w| w.write_str(value));
        } else {
            self.value(field, |w| write_quoted(w, value));
        }
    }

    fn record_u64(&mut self, field: &Field, value: u64) {
        if self.wants(field) {
            self.value(field, |w| w.write_str(itoa::Buffer::new().format(value)));
        }
    }

    fn record_i64(&mut self, field: &Field, value: i64) {
        if self.wants(field) {
            self.value(field, |w| w.write_str(itoa::Buffer::new().format(value)));
        }
    }

    fn record_bool(&mut self, field: &Field, value: bool) {
        if self.wants(field) {
            self.value(field, |w| w.write_str(if value { "true" } else { "false" }));
        }
    }

    fn record_f64(&mut self, field: &Field, value: f64) {
        if self.wants(field) {
            self.value(field, |w| write_f64(w, value));
        }
    }

    fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
        if self.wants(field) {
            // Rare (start-up and failures), with its list of sources: the
            // stock visitor writes it.
            let mut stock = DefaultVisitor::new(self.writer.by_ref(), self.first);
            stock.record_error(field, value);
            self.result = stock.finish();
            self.first = false;
        }
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        if !self.wants(field) {
            return;
        }
        if field.name() == "message" {
            self.message(|w| write!(w, "{value:?}"));
        } else {
            self.value(field, |w| write!(w, "{value:?}"));
        }
    }
}

/// `value` as `{:?}` writes a `str`: quoted, copied as it is when nothing
/// in it needs escaping.
pub(crate) fn write_quoted(w: &mut impl fmt::Write, value: &str) -> fmt::Result {
    let plain = value
        .bytes()
        .all(|b| (b' '..=b'~').contains(&b) && b != b'"' && b != b'\\');
    if plain {
        w.write_char('"')?;
        w.write_str(value)?;
        w.write_char('"')
    } else {
        write!(w, "{value:?}")
    }
}

/// `value` as `{:?}` writes an `f64`: the shortest digits that read back
/// as `value` (the closest of them, a tie rounded up), plainly from 1e-4 to
/// 1e16 and zero, with an exponent outside. zmij writes the same digits
/// plainly over a wider range, but rounds a tie to even: it takes only the
/// values that can't be a tie, `core::fmt` the rest.
fn write_f64(w: &mut impl fmt::Write, value: f64) -> fmt::Result {
    let size = value.abs();
    if size == 0.0 || ((1e-4..1e16).contains(&size) && !may_tie(value)) {
        w.write_str(zmij::Buffer::new().format_finite(value))
    } else {
        write!(w, "{value:?}")
    }
}

/// Whether two shortest decimals could be equally close to `value` (from
/// 1e-4 to 1e16, so normal). With `k` binary fraction digits its exact
/// decimal expansion ends at the `k`th decimal place, and has at least
/// `k - 3` significant digits (at most three zeros after the point). A tie
/// is a value exactly midway between two decimals of at most 17 digits: at
/// most 18 significant digits, so `k` at most 21. Past that no decimal of
/// 17 digits lies midway, nor on the edge of the values that read back as
/// `value` (which has more fraction digits still): both algorithms give
/// the one closest shortest decimal.
fn may_tie(value: f64) -> bool {
    let bits = value.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    let mantissa = (bits & ((1 << 52) - 1)) | (1 << 52);
    // value = mantissa * 2^(exponent - 1075) (normal: 1e-4 is one).
    let fraction_bits = 1075 - exponent - mantissa.trailing_zeros() as i32;
    fraction_bits <= 21
}

/// Writes through with the characters a terminal would act on (ESC, BEL,
/// BS, FF, DEL and the C1 controls) spelled out, as the stock formatter
/// does for messages.
struct Escaping<'w, 'a>(&'w mut Writer<'a>);

impl fmt::Write for Escaping<'_, '_> {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        let mut rest = s;
        while let Some((at, ch)) = rest.char_indices().find(|&(_, c)| is_terminal_control(c)) {
            self.0.write_str(&rest[..at])?;
            match ch {
                '\x1b' => self.0.write_str("\\x1b")?,
                '\x07' => self.0.write_str("\\x07")?,
                '\x08' => self.0.write_str("\\x08")?,
                '\x0c' => self.0.write_str("\\x0c")?,
                '\x7f' => self.0.write_str("\\x7f")?,
                c => write!(self.0, "\\u{{{:x}}}", c as u32)?,
            }
            rest = &rest[at + ch.len_utf8()..];
        }
        self.0.write_str(rest)
    }
}

fn is_terminal_control(c: char) -> bool {
    matches!(
        c,
        '\x1b' | '\x07' | '\x08' | '\x0c' | '\x7f' | '\u{80}'..='\u{9f}'
    )
}

/// The stock `SystemTime` timer's timestamp (RFC 3339, UTC, microseconds:
/// `2026-11-25T01:02:03.000004Z`), formatted without `core::fmt`.
#[derive(Debug, Clone, Copy, Default)]
pub struct UtcMicros;

impl FormatTime for UtcMicros {
    fn format_time(&self, w: &mut Writer<'_>) -> fmt::Result {
        write_utc_micros(w, SystemTime::now())
    }
}

/// Writes `t` as `YYYY-MM-DDTHH:MM:SS.ffffffZ` (a year beyond 9999 with a
/// `+`, before year 0 as `-YYYY`, as the stock timer does).
pub fn write_utc_micros(w: &mut impl fmt::Write, t: SystemTime) -> fmt::Result {
    // Seconds and nanoseconds since the epoch, the nanoseconds counted
    // forward from the second (so 0.5 s before the epoch is -1 s + 0.5 s).
    let (secs, nanos) = match t.duration_since(UNIX_EPOCH) {
        Ok(d) => (d.as_secs() as i64, d.subsec_nanos()),
        Err(e) => {
            let d = e.duration();
            match d.subsec_nanos() {
                0 => (-(d.as_secs() as i64), 0),
                n => (-(d.as_secs() as i64) - 1, 1_000_000_000 - n),
            }
        }
    };
    // The date and time of day change once a second: kept per thread, the
    // line of each request writes its microseconds only (the civil date
    // is ~300 instructions, measured by callgrind).
    let cached = SECOND.with(|c| {
        let (at, head) = c.get();
        (at == secs).then_some(head)
    });
    let mut buf = *b"0000-00-00T00:00:00.000000Z";
    match cached {
        Some(head) => buf[..20].copy_from_slice(&head),
        None => {
            let (year, month, day) = civil_from_days(secs.div_euclid(86_400));
            let of_day = secs.rem_euclid(86_400) as u32;
            put_digits(&mut buf[5..7], month);
            put_digits(&mut buf[8..10], day);
            put_digits(&mut buf[11..13], of_day / 3600);
            put_digits(&mut buf[14..16], of_day / 60 % 60);
            put_digits(&mut buf[17..19], of_day % 60);
            if !(0..=9999).contains(&year) {
                // Never cached: rare enough to write in full each time.
                put_digits(&mut buf[20..26], nanos / 1_000);
                if year > 9999 {
                    write!(w, "+{year}")?;
                } else {
                    write!(w, "{year:05}")?;
                }
                return w.write_str(std::str::from_utf8(&buf[4..]).map_err(|_| fmt::Error)?);
            }
            put_digits(&mut buf[0..4], year as u32);
            let mut head = [0u8; 20];
            head.copy_from_slice(&buf[..20]);
            SECOND.with(|c| c.set((secs, head)));
        }
    }
    put_digits(&mut buf[20..26], nanos / 1_000);
    // Only ASCII digits and punctuation were written.
    w.write_str(std::str::from_utf8(&buf).map_err(|_| fmt::Error)?)
}

thread_local! {
    /// The second last written by this thread (since the epoch) and its
    /// `YYYY-MM-DDTHH:MM:SS.`, for a year within 0..=9999.
    static SECOND: std::cell::Cell<(i64, [u8; 20])> =
        const { std::cell::Cell::new((i64::MIN, [0; 20])) };
}

/// `n`'s last `out.len()` decimal digits, zero-padded.
fn put_digits(out: &mut [u8], mut n: u32) {
    for d in out.iter_mut().rev() {
        *d = b'0' + (n % 10) as u8;
        n /= 10;
    }
}

/// The proleptic Gregorian (year, month, day) of `days` since 1970-01-01,
/// counted in 400-year eras that start on March 1st (so the leap day ends
/// a year).
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, [0, 146096]
    let yoe = (doe - doe / 1_460 + doe / 36_524 - doe / 146_096) / 365; // [0, 399]
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of year from March 1st
    let mp = (5 * doy + 2) / 153; // month from March, [0, 11]
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

#[cfg(test)]
mod tests;
