//! What a server exposes at `/metrics` (Prometheus text format 0.0.4).
//!
//! Counters (requests, queries, errors, bytes, answer time, passes), a histogram of the time
//! each request took to answer, a histogram of how many requests shared one batched pass, the
//! build, and whatever gauges the scheme backend adds (the QDP queue depth, say).
//!
//! Privacy rule (GUIDE section 7): only counts, bytes and times; nothing derived from what a
//! query asked for. A request's time depends on the batch it shared and the database shape,
//! never on the index it asked for.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};

/// Upper bounds (seconds) of the request-time histogram buckets: from a cached small answer
/// to a full scan of a large database.
pub const LATENCY_BUCKETS: [f64; 10] = [
    0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.5, 2.5,
];
/// Upper bounds of the requests-per-pass histogram buckets (the batcher takes at most 64 by
/// default).
pub const BATCH_BUCKETS: [f64; 7] = [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0];

/// A Prometheus histogram with fixed buckets, updated lock-free.
#[derive(Debug)]
pub(crate) struct Histogram {
    bounds: &'static [f64],
    /// Non-cumulative counts per bucket; the last one is `+Inf`.
    counts: Vec<AtomicU64>,
    /// Sum of the observations, in millionths.
    sum_micro: AtomicU64,
}

impl Histogram {
    pub(crate) fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: (0..=bounds.len()).map(|_| AtomicU64::new(0)).collect(),
            sum_micro: AtomicU64::new(0),
        }
    }

    pub(crate) fn observe(&self, value: f64) {
        let bucket = self
            .bounds
            .iter()
            .position(|&bound| value <= bound)
            .unwrap_or(self.bounds.len());
        self.counts[bucket].fetch_add(1, Ordering::Relaxed);
        self.sum_micro
            .fetch_add((value * 1e6) as u64, Ordering::Relaxed);
    }

    fn render(&self, out: &mut String, name: &str, help: &str) {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} histogram");
        self.render_series(out, name, "");
    }

    /// The bucket, sum and count lines, each with `labels` (`key="value",` or empty).
    pub(crate) fn render_series(&self, out: &mut String, name: &str, labels: &str) {
        let mut cumulative = 0;
        for (i, count) in self.counts.iter().enumerate() {
            cumulative += count.load(Ordering::Relaxed);
            let le = self
                .bounds
                .get(i)
                .map_or_else(|| "+Inf".to_string(), |b| b.to_string());
            let _ = writeln!(out, "{name}_bucket{{{labels}le=\"{le}\"}} {cumulative}");
        }
        let sum = self.sum_micro.load(Ordering::Relaxed) as f64 / 1e6;
        let plain = labels.trim_end_matches(',');
        let braces = if plain.is_empty() {
            String::new()
        } else {
            format!("{{{plain}}}")
        };
        let _ = writeln!(
            out,
            "{name}_sum{braces} {sum:.6}\n{name}_count{braces} {cumulative}"
        );
    }
}

/// The HTTP endpoints whose latency is measured separately (a fixed set: the path of a request,
/// never anything in it).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    /// `POST /pir/v1`: queries, manifests, hints in pieces.
    Query,
    /// `GET /pir/v1/hint` and `/pir/v1/hint/ID`: hint downloads.
    Hint,
    /// `GET /health`.
    Health,
    /// `GET /metrics`.
    Metrics,
    /// Anything else (answered 404 or 405).
    Other,
}

impl Endpoint {
    /// Every endpoint, in the order of the `/metrics` lines.
    pub const ALL: [Endpoint; 5] = [
        Endpoint::Query,
        Endpoint::Hint,
        Endpoint::Health,
        Endpoint::Metrics,
        Endpoint::Other,
    ];

    /// The endpoint of a request `path`.
    pub fn of(path: &str) -> Endpoint {
        match path {
            "/pir/v1" => Endpoint::Query,
            "/pir/v1/hint" => Endpoint::Hint,
            p if p.starts_with("/pir/v1/hint/") => Endpoint::Hint,
            "/health" => Endpoint::Health,
            "/metrics" => Endpoint::Metrics,
            _ => Endpoint::Other,
        }
    }

    /// Its `endpoint` label.
    pub fn label(self) -> &'static str {
        match self {
            Endpoint::Query => "/pir/v1",
            Endpoint::Hint => "/pir/v1/hint",
            Endpoint::Health => "/health",
            Endpoint::Metrics => "/metrics",
            Endpoint::Other => "other",
        }
    }
}

/// A gauge a backend reports at render time (name, help text, value).
pub type Gauge = (&'static str, &'static str, u64);

/// The counters and histograms of one server, updated lock-free from every worker.
#[derive(Debug)]
pub struct Metrics {
    requests: AtomicU64,
    queries: AtomicU64,
    errors: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    hint_bytes: AtomicU64,
    scan_micros: AtomicU64,
    passes: AtomicU64,
    batched_requests: AtomicU64,
    request_seconds: Histogram,
    batch_requests: Histogram,
    /// Per [`Endpoint::ALL`]: from the request's arrival to its reply's headers.
    http_seconds: Vec<Histogram>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self {
            requests: AtomicU64::new(0),
            queries: AtomicU64::new(0),
            errors: AtomicU64::new(0),
            bytes_in: AtomicU64::new(0),
            bytes_out: AtomicU64::new(0),
            hint_bytes: AtomicU64::new(0),
            scan_micros: AtomicU64::new(0),
            passes: AtomicU64::new(0),
            batched_requests: AtomicU64::new(0),
            request_seconds: Histogram::new(&LATENCY_BUCKETS),
            batch_requests: Histogram::new(&BATCH_BUCKETS),
            http_seconds: Endpoint::ALL
                .iter()
                .map(|_| Histogram::new(&LATENCY_BUCKETS))
                .collect(),
        }
    }
}

impl Metrics {
    /// Records one handled request that took `micros` to answer.
    pub fn record(
        &self,
        bytes_in: usize,
        bytes_out: usize,
        queries: usize,
        error: bool,
        micros: u64,
    ) {
        self.requests.fetch_add(1, Ordering::Relaxed);
        self.queries.fetch_add(queries as u64, Ordering::Relaxed);
        self.errors.fetch_add(u64::from(error), Ordering::Relaxed);
        self.bytes_in.fetch_add(bytes_in as u64, Ordering::Relaxed);
        self.bytes_out
            .fetch_add(bytes_out as u64, Ordering::Relaxed);
        self.scan_micros.fetch_add(micros, Ordering::Relaxed);
        self.request_seconds.observe(micros as f64 / 1e6);
    }

    /// Records a hint download (`GET /pir/v1/hint`) of `bytes`: counted in the reply bytes
    /// and on its own.
    pub fn record_download(&self, bytes: usize) {
        self.bytes_out.fetch_add(bytes as u64, Ordering::Relaxed);
        self.hint_bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }

    /// Records one HTTP request to `endpoint` that took `seconds` from its arrival to its
    /// reply (queueing and batching included).
    pub fn record_http(&self, endpoint: Endpoint, seconds: f64) {
        let at = Endpoint::ALL
            .iter()
            .position(|e| *e == endpoint)
            .unwrap_or(Endpoint::ALL.len() - 1);
        if let Some(histogram) = self.http_seconds.get(at) {
            histogram.observe(seconds);
        }
    }

    /// Records one pass of the batcher that answered `requests` requests together.
    pub fn record_batch(&self, requests: usize) {
        self.passes.fetch_add(1, Ordering::Relaxed);
        self.batched_requests
            .fetch_add(requests as u64, Ordering::Relaxed);
        self.batch_requests.observe(requests as f64);
    }

    /// Passes over the database the batcher made so far.
    pub fn passes(&self) -> u64 {
        self.passes.load(Ordering::Relaxed)
    }

    /// Queries answered so far.
    pub fn queries(&self) -> u64 {
        self.queries.load(Ordering::Relaxed)
    }

    /// Requests refused with an error so far.
    pub fn errors(&self) -> u64 {
        self.errors.load(Ordering::Relaxed)
    }

    /// The Prometheus text exposition, with `gauges` (a backend's) appended.
    pub fn render_with(&self, gauges: &[Gauge]) -> String {
        let mut out = String::with_capacity(4096);
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        let counters = [
            (
                "pir_requests_total",
                "Requests handled.",
                get(&self.requests),
            ),
            (
                "pir_queries_total",
                "PIR queries answered.",
                get(&self.queries),
            ),
            ("pir_errors_total", "Requests refused.", get(&self.errors)),
            (
                "pir_bytes_received_total",
                "Request bytes.",
                get(&self.bytes_in),
            ),
            (
                "pir_bytes_sent_total",
                "Reply bytes, hint downloads included.",
                get(&self.bytes_out),
            ),
            (
                "pir_hint_bytes_sent_total",
                "Hint download bytes (GET /pir/v1/hint).",
                get(&self.hint_bytes),
            ),
            (
                "pir_passes_total",
                "Batched passes over the database.",
                get(&self.passes),
            ),
            (
                "pir_batched_requests_total",
                "Requests answered by those passes.",
                get(&self.batched_requests),
            ),
        ];
        for (name, help, value) in counters {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} counter\n{name} {value}"
            );
        }
        let _ = writeln!(
            out,
            "# HELP pir_answer_seconds_total Time spent computing answers.\n\
             # TYPE pir_answer_seconds_total counter\npir_answer_seconds_total {:.6}",
            get(&self.scan_micros) as f64 / 1e6
        );
        self.request_seconds.render(
            &mut out,
            "pir_request_seconds",
            "Time from a request's batch start to its signed reply.",
        );
        self.batch_requests.render(
            &mut out,
            "pir_batch_requests",
            "Requests answered together in one pass.",
        );
        let name = "pir_http_request_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time from a request's arrival to its reply, per endpoint.\n\
             # TYPE {name} histogram"
        );
        for (endpoint, histogram) in Endpoint::ALL.iter().zip(&self.http_seconds) {
            histogram.render_series(
                &mut out,
                name,
                &format!("endpoint=\"{}\",", endpoint.label()),
            );
        }
        let _ = writeln!(
            out,
            "# HELP pir_build_info The running build.\n# TYPE pir_build_info gauge\n\
             pir_build_info{{version=\"{}\"}} 1",
            env!("CARGO_PKG_VERSION")
        );
        for (name, help, value) in gauges {
            let _ = writeln!(
                out,
                "# HELP {name} {help}\n# TYPE {name} gauge\n{name} {value}"
            );
        }
        out
    }

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        self.render_with(&[])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hint_downloads_count_as_reply_bytes() {
        let metrics = Metrics::default();
        metrics.record(10, 20, 1, false, 5);
        metrics.record_download(1000);
        let text = metrics.render();
        assert!(text.contains("pir_bytes_sent_total 1020\n"), "{text}");
        assert!(text.contains("pir_hint_bytes_sent_total 1000\n"), "{text}");
        assert!(text.contains("pir_bytes_received_total 10\n"), "{text}");
    }

    #[test]
    fn histograms_are_cumulative_and_counted() {
        let metrics = Metrics::default();
        for micros in [100, 700, 700, 3_000_000] {
            metrics.record(10, 20, 1, false, micros);
        }
        metrics.record_batch(3);
        let text = metrics.render_with(&[("pir_qdp_queue_depth", "Entries queued.", 7)]);
        assert!(
            text.contains("pir_request_seconds_bucket{le=\"0.0005\"} 1\n"),
            "{text}"
        );
        assert!(
            text.contains("pir_request_seconds_bucket{le=\"0.001\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("pir_request_seconds_bucket{le=\"2.5\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("pir_request_seconds_bucket{le=\"+Inf\"} 4\n"),
            "{text}"
        );
        assert!(text.contains("pir_request_seconds_count 4\n"), "{text}");
        assert!(
            text.contains("pir_request_seconds_sum 3.001500\n"),
            "{text}"
        );
        assert!(
            text.contains("pir_batch_requests_bucket{le=\"2\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("pir_batch_requests_bucket{le=\"4\"} 1\n"),
            "{text}"
        );
        assert!(text.contains("pir_requests_total 4\n"));
        assert!(text.contains("pir_build_info{version=\""));
        assert!(text.contains("# TYPE pir_qdp_queue_depth gauge\npir_qdp_queue_depth 7\n"));
        // Every sample line is `name[{labels}] value`, as Prometheus parses it.
        for line in text.lines().filter(|l| !l.starts_with('#')) {
            let (_, value) = line.rsplit_once(' ').unwrap();
            assert!(value.parse::<f64>().is_ok(), "{line}");
        }
    }

    #[test]
    fn http_latency_is_kept_per_endpoint() {
        let m = Metrics::default();
        m.record_http(Endpoint::of("/pir/v1"), 0.003);
        m.record_http(Endpoint::of("/pir/v1"), 0.2);
        m.record_http(Endpoint::of("/health"), 0.0001);
        m.record_http(Endpoint::of("/no/such/path"), 0.0001);
        let text = m.render();
        for line in [
            "pir_http_request_seconds_bucket{endpoint=\"/pir/v1\",le=\"0.0025\"} 0\n",
            "pir_http_request_seconds_bucket{endpoint=\"/pir/v1\",le=\"0.005\"} 1\n",
            "pir_http_request_seconds_bucket{endpoint=\"/pir/v1\",le=\"+Inf\"} 2\n",
            "pir_http_request_seconds_count{endpoint=\"/pir/v1\"} 2\n",
            "pir_http_request_seconds_sum{endpoint=\"/pir/v1\"} 0.203000\n",
            "pir_http_request_seconds_count{endpoint=\"/health\"} 1\n",
            "pir_http_request_seconds_count{endpoint=\"/pir/v1/hint\"} 0\n",
            "pir_http_request_seconds_count{endpoint=\"other\"} 1\n",
        ] {
            assert!(text.contains(line), "{line} missing from {text}");
        }
        assert_eq!(
            text.matches("# TYPE pir_http_request_seconds histogram")
                .count(),
            1
        );
    }
}
