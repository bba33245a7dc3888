//! Process-wide counters and gauges, rendered in Prometheus' text format.
//!
//! Hand-rolled on atomics: a handful of series does not justify a metrics framework, and
//! the hot path pays one relaxed atomic add per counter.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};

#[derive(Debug, Default)]
pub struct Metrics {
    pub events_accepted: AtomicU64,
    pub requests_accepted: AtomicU64,
    /// Events or requests refused, by reason (`missing_distinct_id`, `invalid_api_key`…).
    rejected: Mutex<BTreeMap<&'static str, u64>>,
    pub historical_too_recent: AtomicU64,
    pub wal_fsyncs: AtomicU64,
    pub wal_bytes: AtomicU64,
    pub wal_records: AtomicU64,
    pub flushes: AtomicU64,
    pub flush_failures: AtomicU64,
    /// Person processing or person-store commits that failed.
    pub person_failures: AtomicU64,
    pub flushed_rows: AtomicU64,
    pub bytes_written: AtomicU64,
    pub files_written: AtomicU64,
    pub compactions: AtomicU64,
    pub compaction_files_removed: AtomicU64,
    pub buffer_rows: AtomicI64,
    pub buffer_bytes: AtomicI64,
    /// 1 while a maintenance pass (compaction, the override fold, vacuum) runs.
    pub maintenance_running: AtomicI64,
    pub committed_seq: AtomicU64,
}

impl Metrics {
    pub fn reject(&self, reason: &'static str, n: u64) {
        if n == 0 {
            return;
        }
        let mut m = self.rejected.lock().unwrap_or_else(|e| e.into_inner());
        *m.entry(reason).or_default() += n;
    }

    pub fn rejected(&self, reason: &str) -> u64 {
        let m = self.rejected.lock().unwrap_or_else(|e| e.into_inner());
        m.get(reason).copied().unwrap_or(0)
    }

    /// Prometheus text exposition format, version 0.0.4.
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(2048);
        let load = |a: &AtomicU64| a.load(Ordering::Relaxed);
        let counters: [(&str, &str, u64); 15] = [
            (
                "hedgerow_events_accepted_total",
                "Events acknowledged to a client (durable in the WAL).",
                load(&self.events_accepted),
            ),
            (
                "hedgerow_capture_requests_accepted_total",
                "Capture requests answered with success.",
                load(&self.requests_accepted),
            ),
            (
                "hedgerow_historical_events_too_recent_total",
                "Events of historical_migration batches younger than 48 h (ingested as live events).",
                load(&self.historical_too_recent),
            ),
            (
                "hedgerow_wal_fsyncs_total",
                "fsync calls made by the write-ahead log (one per commit group).",
                load(&self.wal_fsyncs),
            ),
            (
                "hedgerow_wal_bytes_total",
                "Bytes appended to the write-ahead log.",
                load(&self.wal_bytes),
            ),
            (
                "hedgerow_wal_records_total",
                "Records appended to the write-ahead log.",
                load(&self.wal_records),
            ),
            (
                "hedgerow_flushes_total",
                "Buffer flushes committed to the events table.",
                load(&self.flushes),
            ),
            (
                "hedgerow_flush_failures_total",
                "Buffer flushes that failed and will be retried.",
                load(&self.flush_failures),
            ),
            (
                "hedgerow_person_failures_total",
                "Person processing steps or person-store commits that failed (logged).",
                load(&self.person_failures),
            ),
            (
                "hedgerow_flushed_rows_total",
                "Rows written to Parquet by flushes.",
                load(&self.flushed_rows),
            ),
            (
                "hedgerow_bytes_written_total",
                "Parquet bytes written by flushes.",
                load(&self.bytes_written),
            ),
            (
                "hedgerow_files_written_total",
                "Parquet files written by flushes.",
                load(&self.files_written),
            ),
            (
                "hedgerow_compactions_total",
                "Compaction commits.",
                load(&self.compactions),
            ),
            (
                "hedgerow_compaction_files_removed_total",
                "Small files replaced by compaction.",
                load(&self.compaction_files_removed),
            ),
            (
                "hedgerow_committed_wal_seq",
                "Last WAL sequence covered by a table commit.",
                load(&self.committed_seq),
            ),
        ];
        for (name, help, v) in counters {
            let kind = if name.ends_with("_total") {
                "counter"
            } else {
                "gauge"
            };
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {v}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP hedgerow_events_rejected_total Events or requests refused, by reason.\n# TYPE hedgerow_events_rejected_total counter"
        );
        for (reason, n) in self
            .rejected
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .iter()
        {
            let _ = writeln!(
                out,
                "hedgerow_events_rejected_total{{reason=\"{reason}\"}} {n}"
            );
        }
        let gauges = [
            (
                "hedgerow_buffer_rows",
                "Rows in the in-memory buffers, not yet in Parquet.",
                self.buffer_rows.load(Ordering::Relaxed),
            ),
            (
                "hedgerow_buffer_bytes",
                "Approximate bytes held by the in-memory buffers.",
                self.buffer_bytes.load(Ordering::Relaxed),
            ),
            (
                "hedgerow_maintenance_running",
                "1 while compaction, the person-id override fold or vacuum runs (their memory is outside the buffers').",
                self.maintenance_running.load(Ordering::Relaxed),
            ),
        ];
        for (name, help, v) in gauges {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {v}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_and_reasons() {
        let m = Metrics::default();
        m.events_accepted.fetch_add(3, Ordering::Relaxed);
        m.reject("missing_distinct_id", 2);
        m.reject("missing_distinct_id", 1);
        m.reject("nothing", 0);
        let text = m.render();
        assert!(text.contains("hedgerow_events_accepted_total 3\n"));
        assert!(
            text.contains("hedgerow_events_rejected_total{reason=\"missing_distinct_id\"} 3\n")
        );
        assert!(!text.contains("nothing"));
        assert!(text.contains("# TYPE hedgerow_buffer_rows gauge"));
        assert!(text.contains("hedgerow_maintenance_running 0\n"));
        assert_eq!(m.rejected("missing_distinct_id"), 3);
    }
}
