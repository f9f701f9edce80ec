//! What a load run saw over time: lookups counted in the interval they were sent in, and the
//! servers sampled at the end of every interval (their `/metrics`: resident memory, bytes, the
//! QDP queue depth and fallback scans; their CPU time from `/proc/PID/stat`).
//!
//! A lookup belongs to the interval in which it was *sent*, whenever its reply comes, so each
//! interval's `sent` is its `ok + errors` and the intervals add up to the run's totals.

use std::fmt::Write as _;
use std::sync::Mutex;
use std::time::Duration;

use pir_client::HttpsTransport;
use serde::Serialize;

/// Clock ticks per second of `/proc/PID/stat`'s CPU times: the kernel's `USER_HZ`, which is
/// 100 on every architecture Linux exposes to user space (x86_64, aarch64 included).
const USER_HZ: f64 = 100.0;

/// The CPU time (user + system, all threads) process `pid` has used, in seconds, from
/// `/proc/PID/stat` (fields 14 and 15); `None` where it cannot be read.
pub fn process_cpu_seconds(pid: u32) -> Option<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    cpu_seconds_of_stat(&stat)
}

/// Fields 14 and 15 of a `/proc/PID/stat` line, in seconds. The command name (field 2) is in
/// parentheses and may hold spaces, so the fields are counted after its closing one.
pub fn cpu_seconds_of_stat(stat: &str) -> Option<f64> {
    let after = &stat[stat.rfind(')')? + 1..];
    let mut fields = after.split_whitespace();
    // After the name: state (3), ppid, pgrp, session, tty, tpgid, flags, minflt, cminflt,
    // majflt, cmajflt (13), then utime (14) and stime (15).
    let utime: u64 = fields.nth(11)?.parse().ok()?;
    let stime: u64 = fields.next()?.parse().ok()?;
    Some((utime + stime) as f64 / USER_HZ)
}

/// The sum over `pids` of their CPU seconds; `None` if any cannot be read (or there are none).
pub fn cpu_seconds_of(pids: &[u32]) -> Option<f64> {
    if pids.is_empty() {
        return None;
    }
    pids.iter().map(|&pid| process_cpu_seconds(pid)).sum()
}

/// What one server's `/metrics` says that a load run reports.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct ServerMetrics {
    /// `process_resident_memory_bytes`.
    pub rss_bytes: Option<u64>,
    /// `pir_bytes_received_total`.
    pub bytes_in: Option<u64>,
    /// `pir_bytes_sent_total`.
    pub bytes_out: Option<u64>,
    /// `pir_qdp_queue_depth`.
    pub qdp_queue_depth: Option<u64>,
    /// `pir_qdp_fallback_scans`.
    pub qdp_fallback_scans: Option<u64>,
}

impl ServerMetrics {
    /// Reads the values from a Prometheus text exposition.
    pub fn parse(text: &str) -> ServerMetrics {
        let value = |name: &str| {
            text.lines()
                .filter(|l| !l.starts_with('#'))
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(' '))
                .and_then(|v| v.trim().parse::<f64>().ok())
                .map(|v| v as u64)
        };
        ServerMetrics {
            rss_bytes: value("process_resident_memory_bytes"),
            bytes_in: value("pir_bytes_received_total"),
            bytes_out: value("pir_bytes_sent_total"),
            qdp_queue_depth: value("pir_qdp_queue_depth"),
            qdp_fallback_scans: value("pir_qdp_fallback_scans"),
        }
    }

    /// The sum of several servers' values (a value missing at any server is missing).
    pub fn sum(all: &[ServerMetrics]) -> ServerMetrics {
        fn add(all: &[ServerMetrics], f: fn(&ServerMetrics) -> Option<u64>) -> Option<u64> {
            if all.is_empty() {
                return None;
            }
            all.iter().map(f).sum()
        }
        ServerMetrics {
            rss_bytes: add(all, |m| m.rss_bytes),
            bytes_in: add(all, |m| m.bytes_in),
            bytes_out: add(all, |m| m.bytes_out),
            qdp_queue_depth: add(all, |m| m.qdp_queue_depth),
            qdp_fallback_scans: add(all, |m| m.qdp_fallback_scans),
        }
    }
}

/// Every server's `/metrics` (positions `0..servers`), summed.
pub(super) async fn sample_metrics(metrics: &HttpsTransport, servers: usize) -> ServerMetrics {
    let mut all = Vec::with_capacity(servers);
    for server in 0..servers {
        let text = metrics.get_plain(server, "/metrics", 4 << 20).await.ok();
        let text = text.and_then(|t| String::from_utf8(t).ok());
        all.push(text.map_or_else(ServerMetrics::default, |t| ServerMetrics::parse(&t)));
    }
    ServerMetrics::sum(&all)
}

/// The lookups sent in one interval.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IntervalTally {
    /// Lookups sent.
    pub sent: u64,
    /// Of those, not served.
    pub errors: u64,
    /// Latencies of those served, microseconds.
    pub latencies_us: Vec<u64>,
}

/// The lookups of a run, by the interval they were sent in.
#[derive(Debug)]
pub(super) struct Intervals {
    width: Duration,
    tallies: Mutex<Vec<IntervalTally>>,
}

impl Intervals {
    /// Intervals of `width` covering `run`.
    pub(super) fn new(width: Duration, run: Duration) -> Intervals {
        let count = run.as_micros().div_ceil(width.as_micros().max(1)).max(1) as usize;
        Intervals {
            width,
            tallies: Mutex::new(vec![IntervalTally::default(); count]),
        }
    }

    /// Counts a lookup sent `since_start` into the run: served in `latency`, or not.
    pub(super) fn record(&self, since_start: Duration, outcome: Option<Duration>) {
        let mut tallies = self.tallies.lock().unwrap_or_else(|p| p.into_inner());
        let last = tallies.len() - 1;
        let k = ((since_start.as_micros() / self.width.as_micros().max(1)) as usize).min(last);
        let tally = &mut tallies[k];
        tally.sent += 1;
        match outcome {
            Some(latency) => tally.latencies_us.push(latency.as_micros() as u64),
            None => tally.errors += 1,
        }
    }

    /// The interval width.
    pub(super) fn width(&self) -> Duration {
        self.width
    }

    /// The tallies, once the run is over.
    pub(super) fn into_tallies(self) -> Vec<IntervalTally> {
        self.tallies.into_inner().unwrap_or_else(|p| p.into_inner())
    }
}

/// The servers at the end of one interval.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Sample {
    /// Their metrics, summed over the servers.
    pub metrics: ServerMetrics,
    /// Their CPU seconds since the start of the run, summed (with `--server-pid`).
    pub cpu_s: Option<f64>,
}

/// One interval of a run, as the report and the CSV give it.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct IntervalRow {
    /// End of the interval, seconds since the start.
    pub t_s: f64,
    /// Lookups sent in it.
    pub sent: u64,
    /// Of those, served.
    pub ok: u64,
    /// Of those, not served.
    pub errors: u64,
    /// Latency quantiles of those served, ms (NaN, `null` in JSON, when none was).
    pub p50_ms: f64,
    /// p99.
    pub p99_ms: f64,
    /// The QDP queue depth at its end, summed over the servers.
    pub qdp_queue_depth: Option<u64>,
    /// QDP answers computed by a full scan during it (the queue was empty), all servers.
    pub qdp_fallback_scans: Option<u64>,
    /// Server CPU seconds used during it, all servers given by `--server-pid`.
    pub server_cpu_s: Option<f64>,
}

/// The rows of a run: `tallies` (one per interval of `width`) beside `samples` (the servers
/// at the start, then at the end of each interval).
pub fn rows(tallies: &[IntervalTally], width: Duration, samples: &[Sample]) -> Vec<IntervalRow> {
    let delta = |k: usize, f: &dyn Fn(&Sample) -> Option<f64>| -> Option<f64> {
        Some(f(samples.get(k + 1)?)? - f(samples.get(k)?)?)
    };
    tallies
        .iter()
        .enumerate()
        .map(|(k, tally)| {
            let mut sorted = tally.latencies_us.clone();
            sorted.sort_unstable();
            let end = samples.get(k + 1);
            IntervalRow {
                t_s: (k + 1) as f64 * width.as_secs_f64(),
                sent: tally.sent,
                ok: sorted.len() as u64,
                errors: tally.errors,
                p50_ms: super::percentile(&sorted, 0.50),
                p99_ms: super::percentile(&sorted, 0.99),
                qdp_queue_depth: end.and_then(|s| s.metrics.qdp_queue_depth),
                qdp_fallback_scans: delta(k, &|s| s.metrics.qdp_fallback_scans.map(|v| v as f64))
                    .map(|v| v.max(0.0) as u64),
                server_cpu_s: delta(k, &|s| s.cpu_s),
            }
        })
        .collect()
}

/// The rows as CSV, with a header line.
pub fn csv(rows: &[IntervalRow]) -> String {
    let mut out = String::from(
        "t_s,sent,ok,errors,p50_ms,p99_ms,qdp_queue_depth,qdp_fallback_scans,server_cpu_s\n",
    );
    let opt = |v: Option<u64>| v.map_or(String::new(), |v| v.to_string());
    let num = |v: f64| {
        if v.is_finite() {
            format!("{v:.3}")
        } else {
            String::new()
        }
    };
    for r in rows {
        let _ = writeln!(
            out,
            "{:.3},{},{},{},{},{},{},{},{}",
            r.t_s,
            r.sent,
            r.ok,
            r.errors,
            num(r.p50_ms),
            num(r.p99_ms),
            opt(r.qdp_queue_depth),
            opt(r.qdp_fallback_scans),
            r.server_cpu_s.map_or(String::new(), num),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_times_are_read_after_the_command_name() {
        // A name with spaces and a parenthesis; utime 250, stime 50 ticks.
        let stat = "4242 (pir (x) y) S 1 2 3 4 5 6 7 8 9 10 250 50 0 0 20 0 9 0 100";
        assert_eq!(cpu_seconds_of_stat(stat), Some(3.0));
        assert_eq!(cpu_seconds_of_stat("4242 (pir) S 1 2"), None);
        // This process has a stat file of its own.
        assert!(process_cpu_seconds(std::process::id()).is_some());
        assert_eq!(cpu_seconds_of(&[]), None);
    }

    #[test]
    fn metrics_are_parsed_and_summed() {
        let text = "# HELP pir_qdp_queue_depth x\n# TYPE pir_qdp_queue_depth gauge\n\
                    pir_qdp_queue_depth 7\npir_qdp_fallback_scans 3\n\
                    pir_bytes_sent_total 1000\nprocess_resident_memory_bytes 4096\n";
        let m = ServerMetrics::parse(text);
        assert_eq!(m.qdp_queue_depth, Some(7));
        assert_eq!(m.qdp_fallback_scans, Some(3));
        assert_eq!(m.bytes_out, Some(1000));
        assert_eq!(m.bytes_in, None);
        let sum = ServerMetrics::sum(&[m, m]);
        assert_eq!(sum.qdp_queue_depth, Some(14));
        assert_eq!(sum.rss_bytes, Some(8192));
        assert_eq!(sum.bytes_in, None);
    }

    #[test]
    fn intervals_count_lookups_where_they_were_sent() {
        let intervals = Intervals::new(Duration::from_millis(500), Duration::from_secs(2));
        intervals.record(Duration::from_millis(100), Some(Duration::from_millis(3)));
        intervals.record(Duration::from_millis(600), None);
        intervals.record(Duration::from_millis(700), Some(Duration::from_millis(5)));
        // Past the end: the last interval.
        intervals.record(Duration::from_millis(2100), Some(Duration::from_millis(1)));
        let tallies = intervals.into_tallies();
        assert_eq!(tallies.len(), 4);
        let samples: Vec<Sample> = (0..=4)
            .map(|k| Sample {
                metrics: ServerMetrics {
                    qdp_fallback_scans: Some(k * 2),
                    qdp_queue_depth: Some(10 - k),
                    ..ServerMetrics::default()
                },
                cpu_s: Some(k as f64 * 0.25),
            })
            .collect();
        let rows = rows(&tallies, Duration::from_millis(500), &samples);
        assert_eq!(rows.len(), 4);
        assert_eq!((rows[1].sent, rows[1].ok, rows[1].errors), (2, 1, 1));
        assert_eq!(rows[1].p50_ms, 5.0);
        assert_eq!(rows[3].t_s, 2.0);
        assert_eq!(rows[0].qdp_queue_depth, Some(9));
        assert_eq!(rows[0].qdp_fallback_scans, Some(2));
        assert_eq!(rows[2].server_cpu_s, Some(0.25));
        assert!(rows[2].p50_ms.is_nan());
        let text = csv(&rows);
        assert_eq!(text.lines().count(), 5);
        assert!(text.starts_with("t_s,sent,ok,errors,"), "{text}");
        assert!(
            text.contains("\n1.000,2,1,1,5.000,5.000,8,2,0.250\n"),
            "{text}"
        );
        assert!(text.contains("\n1.500,0,0,0,,,7,2,0.250\n"), "{text}");
    }
}
