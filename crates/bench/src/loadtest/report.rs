//! What a load run measured, as `pir loadtest` prints it (text or JSON).

use super::timeline::{self, IntervalRow};
use super::{mib, percentile, AbuseCounts};

/// What a run measured.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Report {
    /// What was targeted ([`super::Source::what`]).
    pub target: String,
    /// Concurrent clients (closed loop; 0 in open loop).
    pub clients: usize,
    /// The rate lookups were sent at (open loop), a second.
    pub rate: Option<f64>,
    /// Seconds lookups were sent.
    pub elapsed_s: f64,
    /// Latency of every served lookup in microseconds, sorted.
    pub latencies_us: Vec<u64>,
    /// Lookups not served (refused, dropped, timed out, or not an answer).
    pub errors: u64,
    /// The first of those errors, in words.
    pub first_error: Option<String>,
    /// The servers' resident memory (summed) before the run, its peak during it and after it.
    pub rss_bytes: [Option<u64>; 3],
    /// What the abusive connections saw, if there were any.
    pub abuse: Option<AbuseCounts>,
    /// The run, interval by interval.
    pub intervals: Vec<IntervalRow>,
    /// CPU seconds the servers given by `--server-pid` used during the run, together.
    pub server_cpu_s: Option<f64>,
    /// Bytes the servers received and sent during the run (their `/metrics`), together.
    pub server_bytes: [Option<u64>; 2],
    /// QDP answers computed by a full scan during the run, all servers.
    pub qdp_fallback_scans: Option<u64>,
}

impl Report {
    /// Lookups served.
    pub fn served(&self) -> usize {
        self.latencies_us.len()
    }

    /// Lookups sent: served or not.
    pub fn sent(&self) -> u64 {
        self.served() as u64 + self.errors
    }

    /// Lookups served per second.
    pub fn throughput(&self) -> f64 {
        self.served() as f64 / self.elapsed_s
    }

    /// Latency quantiles p50, p99 and p99.9, in milliseconds.
    pub fn quantiles_ms(&self) -> (f64, f64, f64) {
        let l = &self.latencies_us;
        (
            percentile(l, 0.50),
            percentile(l, 0.99),
            percentile(l, 0.999),
        )
    }

    /// Server CPU per served lookup, in milliseconds (all servers given together).
    pub fn cpu_ms_per_lookup(&self) -> Option<f64> {
        let served = self.served();
        self.server_cpu_s
            .filter(|_| served > 0)
            .map(|s| s * 1e3 / served as f64)
    }

    /// Bytes the servers received and sent per lookup sent (all servers together).
    pub fn bytes_per_lookup(&self) -> [Option<f64>; 2] {
        let sent = self.sent();
        self.server_bytes
            .map(|b| b.filter(|_| sent > 0).map(|b| b as f64 / sent as f64))
    }

    /// What does not add up in this report, if anything: every lookup sent is served or an
    /// error, and the intervals add up to the totals.
    pub fn inconsistencies(&self) -> Vec<String> {
        let mut found = Vec::new();
        let sum = |f: fn(&IntervalRow) -> u64| self.intervals.iter().map(f).sum::<u64>();
        for row in &self.intervals {
            if row.sent != row.ok + row.errors {
                found.push(format!(
                    "interval ending at {} s: {} sent, {} served, {} errors",
                    row.t_s, row.sent, row.ok, row.errors
                ));
            }
        }
        let totals = (self.sent(), self.served() as u64, self.errors);
        let summed = (sum(|r| r.sent), sum(|r| r.ok), sum(|r| r.errors));
        if totals != summed {
            found.push(format!(
                "the intervals add up to {summed:?} (sent, served, errors), the run to {totals:?}"
            ));
        }
        found
    }

    /// The intervals as CSV ([`timeline::csv`]).
    pub fn csv(&self) -> String {
        timeline::csv(&self.intervals)
    }

    /// The report as `pir loadtest --json` prints it.
    pub fn to_json(&self) -> serde_json::Value {
        let (p50, p99, p999) = self.quantiles_ms();
        let [before, peak, after] = self.rss_bytes;
        let [bytes_in, bytes_out] = self.bytes_per_lookup();
        serde_json::json!({
            "target": self.target,
            "clients": self.clients,
            "rate_per_s": self.rate,
            "seconds": self.elapsed_s,
            "sent": self.sent(),
            "served": self.served(),
            "errors": self.errors,
            "first_error": self.first_error,
            "throughput_per_s": self.throughput(),
            "latency_ms": {"p50": p50, "p99": p99, "p999": p999},
            "server_rss_bytes": {"before": before, "peak": peak, "after": after},
            "server_cpu_s": self.server_cpu_s,
            "server_cpu_ms_per_lookup": self.cpu_ms_per_lookup(),
            "server_bytes_per_lookup": {"received": bytes_in, "sent": bytes_out},
            "qdp_fallback_scans": self.qdp_fallback_scans,
            "intervals": self.intervals,
            "abuse": self.abuse.as_ref().map(|a| serde_json::json!({
                "slowloris_closed": a.slow_closed,
                "slowloris_open_at_end": a.slow_open_at_end,
                "idle_closed": a.idle_closed,
                "idle_open_at_end": a.idle_open_at_end,
                "big_body_413": a.big_refused,
                "big_body_other": a.big_other,
                "trickle_408": a.trickle_refused,
                "trickle_other": a.trickle_other,
                "malformed_4xx": a.malformed_refused,
                "malformed_other": a.malformed_other,
                "longest_until_closed_s": a.longest_until_closed_s,
            })),
        })
    }

    /// The report as `pir loadtest` prints it, one line each.
    pub fn lines(&self) -> Vec<String> {
        let (p50, p99, p999) = self.quantiles_ms();
        let [before, peak, after] = self.rss_bytes;
        let mut lines = vec![
            format!(
                "served {} queries in {:.1} s: {:.1}/s; latency p50 {p50:.2} ms, p99 {p99:.2} \
                 ms, p99.9 {p999:.2} ms; errors {}{}",
                self.served(),
                self.elapsed_s,
                self.throughput(),
                self.errors,
                self.first_error
                    .as_deref()
                    .map(|e| format!(" (first: {e})"))
                    .unwrap_or_default()
            ),
            format!(
                "server memory: {} before, {} peak, {} after",
                mib(before),
                mib(peak),
                mib(after)
            ),
        ];
        if let Some(cpu) = self.server_cpu_s {
            lines.push(format!(
                "server CPU: {cpu:.2} s, {} ms per lookup",
                self.cpu_ms_per_lookup()
                    .map_or("?".into(), |ms| format!("{ms:.3}"))
            ));
        }
        if let [Some(received), Some(sent)] = self.bytes_per_lookup() {
            lines.push(format!(
                "server traffic per lookup: {received:.0} B received, {sent:.0} B sent"
            ));
        }
        if let Some(scans) = self.qdp_fallback_scans {
            let mut depth = self.intervals.iter().filter_map(|r| r.qdp_queue_depth);
            lines.push(format!(
                "QDP: {scans} fallback full scans; queue depth at the end {}",
                depth.next_back().map_or("?".into(), |d| d.to_string())
            ));
        }
        if let Some(a) = &self.abuse {
            lines.push(format!(
                "abuse: slowloris {} closed by the server ({} still open at the end), idle {} \
                 closed ({} open at the end), longest until closed {:.1} s; 100 MB bodies {} \
                 refused with 413 ({} otherwise); trickling bodies {} refused with 408 ({} \
                 otherwise); malformed {} refused with 4xx ({} otherwise)",
                a.slow_closed,
                a.slow_open_at_end,
                a.idle_closed,
                a.idle_open_at_end,
                a.longest_until_closed_s,
                a.big_refused,
                a.big_other,
                a.trickle_refused,
                a.trickle_other,
                a.malformed_refused,
                a.malformed_other,
            ));
        }
        lines
    }
}
