//! The standard `process_*` metrics (the names every Prometheus client
//! library exports, unprefixed), read from `/proc/self` at each scrape:
//! resident and virtual memory, open and maximum file descriptors, CPU
//! seconds and start time. Elsewhere than Linux there is no `/proc`, and
//! none of them is written.

use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::ConstCounter;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::registry::Unit;

/// `/proc` reports CPU times in clock ticks of `USER_HZ`, which Linux fixes
/// at 100 for this interface on every architecture it runs on.
const TICKS_PER_SECOND: f64 = 100.0;

/// One reading of `/proc/self`.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct ProcessStats {
    pub resident_bytes: Option<i64>,
    pub virtual_bytes: Option<i64>,
    pub open_fds: Option<i64>,
    pub max_fds: Option<i64>,
    pub cpu_seconds: Option<f64>,
    pub start_time_seconds: Option<f64>,
}

impl ProcessStats {
    /// Reads this process's numbers; what can't be read stays `None`.
    pub fn read() -> ProcessStats {
        let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
        let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
        let boot = std::fs::read_to_string("/proc/stat").unwrap_or_default();
        let limits = std::fs::read_to_string("/proc/self/limits").unwrap_or_default();
        let (cpu_seconds, start_ticks) = parse_stat(&stat).unzip();
        let boot_time = boot
            .lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok());
        ProcessStats {
            resident_bytes: status_kib(&status, "VmRSS:").map(|k| k * 1024),
            virtual_bytes: status_kib(&status, "VmSize:").map(|k| k * 1024),
            open_fds: std::fs::read_dir("/proc/self/fd")
                .ok()
                .map(|d| d.count() as i64),
            max_fds: limits
                .lines()
                .find_map(|l| l.strip_prefix("Max open files"))
                .and_then(|rest| rest.split_whitespace().next()?.parse().ok()),
            cpu_seconds,
            start_time_seconds: boot_time
                .zip(start_ticks)
                .map(|(b, t)| b + t / TICKS_PER_SECOND),
        }
    }
}

/// A `Name:   1234 kB` line of `/proc/self/status`, in KiB.
fn status_kib(status: &str, key: &str) -> Option<i64> {
    status
        .lines()
        .find_map(|l| l.strip_prefix(key))
        .and_then(|rest| rest.split_whitespace().next()?.parse().ok())
}

/// From `/proc/self/stat`: user + system CPU seconds, and the start time in
/// ticks after boot. The command name (field 2) is in parentheses and may
/// hold spaces or parentheses itself, so fields are counted after the last
/// `)`: utime and stime are fields 14 and 15, starttime field 22.
fn parse_stat(stat: &str) -> Option<(f64, f64)> {
    let rest = &stat[stat.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // `rest` starts at field 3 (state).
    let field = |n: usize| f.get(n - 3)?.parse::<f64>().ok();
    let cpu = (field(14)? + field(15)?) / TICKS_PER_SECOND;
    Some((cpu, field(22)?))
}

/// The collector registered (unprefixed) next to regroup's own metrics.
#[derive(Debug)]
pub struct ProcessCollector;

impl Collector for ProcessCollector {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let s = ProcessStats::read();
        let gauges: [(&str, &str, Option<Unit>, Option<i64>); 4] = [
            (
                "process_resident_memory",
                "Resident memory size in bytes",
                Some(Unit::Bytes),
                s.resident_bytes,
            ),
            (
                "process_virtual_memory",
                "Virtual memory size in bytes",
                Some(Unit::Bytes),
                s.virtual_bytes,
            ),
            (
                "process_open_fds",
                "Number of open file descriptors",
                None,
                s.open_fds,
            ),
            (
                "process_max_fds",
                "Maximum number of open file descriptors",
                None,
                s.max_fds,
            ),
        ];
        for (name, help, unit, value) in &gauges {
            if let Some(v) = value {
                let m = ConstGauge::new(*v);
                m.encode(encoder.encode_descriptor(name, help, unit.as_ref(), m.metric_type())?)?;
            }
        }
        if let Some(v) = s.start_time_seconds {
            let m = ConstGauge::new(v);
            m.encode(encoder.encode_descriptor(
                "process_start_time",
                "Start time of the process since unix epoch in seconds",
                Some(&Unit::Seconds),
                m.metric_type(),
            )?)?;
        }
        if let Some(v) = s.cpu_seconds {
            let m = ConstCounter::new(v);
            m.encode(encoder.encode_descriptor(
                "process_cpu",
                "Total user and system CPU time spent in seconds",
                Some(&Unit::Seconds),
                m.metric_type(),
            )?)?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_fields_are_counted_after_the_command_name() {
        // A command name with spaces and a parenthesis, as /proc shows it.
        let stat = "4242 (my (odd) cmd) S 1 4242 4242 0 -1 4194560 500 0 0 0 \
                    250 50 0 0 20 0 8 0 123456 1000000 300 18446744073709551615";
        let (cpu, start) = parse_stat(stat).expect("parsed");
        assert_eq!(cpu, 3.0);
        assert_eq!(start, 123456.0);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn this_process_is_read_from_proc() {
        let before = ProcessStats::read();
        let files: Vec<std::fs::File> = (0..8)
            .map(|_| std::fs::File::open("/proc/self/status").unwrap())
            .collect();
        let after = ProcessStats::read();
        drop(files);
        assert!(before.resident_bytes.unwrap() > 1 << 20);
        assert!(before.virtual_bytes.unwrap() >= before.resident_bytes.unwrap());
        // Other tests in this process open files too: at least the 8 here.
        assert!(after.open_fds.unwrap() >= 8, "{after:?}");
        assert!(before.max_fds.unwrap() >= 64);
        assert!(after.cpu_seconds.unwrap() >= 0.0);
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs_f64();
        let start = before.start_time_seconds.unwrap();
        assert!(
            start <= now + 1.0 && start > now - 86_400.0,
            "{start} vs {now}"
        );
    }
}
