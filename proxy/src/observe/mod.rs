//! Observability: Prometheus metrics (and the health listener that serves
//! them), process metrics, and the log format and writer.

pub mod labels;
pub mod log_format;
pub mod log_writer;
pub mod metrics;
pub mod process_metrics;
pub mod request_log;
