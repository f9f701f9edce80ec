//! Counters a mirror exposes at `/metrics` (Prometheus text format).
//!
//! Privacy rule (GUIDE section 7): only counts, bytes and times; nothing derived from what a
//! query asked for.

use std::sync::atomic::{AtomicU64, Ordering};

/// Monotonic counters, updated lock-free from every worker.
#[derive(Debug, Default)]
pub struct Metrics {
    requests: AtomicU64,
    queries: AtomicU64,
    errors: AtomicU64,
    bytes_in: AtomicU64,
    bytes_out: AtomicU64,
    scan_micros: AtomicU64,
    passes: AtomicU64,
    batched_requests: AtomicU64,
}

impl Metrics {
    /// Records one handled request.
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
    }

    /// Records one pass of the batcher that answered `requests` requests together.
    pub fn record_batch(&self, requests: usize) {
        self.passes.fetch_add(1, Ordering::Relaxed);
        self.batched_requests
            .fetch_add(requests as u64, Ordering::Relaxed);
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

    /// The Prometheus text exposition.
    pub fn render(&self) -> String {
        let get = |c: &AtomicU64| c.load(Ordering::Relaxed);
        format!(
            "# HELP pir_requests_total Requests handled.\n# TYPE pir_requests_total counter\npir_requests_total {}\n\
             # HELP pir_queries_total PIR queries answered.\n# TYPE pir_queries_total counter\npir_queries_total {}\n\
             # HELP pir_errors_total Requests refused.\n# TYPE pir_errors_total counter\npir_errors_total {}\n\
             # HELP pir_bytes_received_total Request bytes.\n# TYPE pir_bytes_received_total counter\npir_bytes_received_total {}\n\
             # HELP pir_bytes_sent_total Reply bytes.\n# TYPE pir_bytes_sent_total counter\npir_bytes_sent_total {}\n\
             # HELP pir_answer_seconds_total Time spent computing answers.\n# TYPE pir_answer_seconds_total counter\npir_answer_seconds_total {:.6}\n\
             # HELP pir_passes_total Batched passes over the database.\n# TYPE pir_passes_total counter\npir_passes_total {}\n\
             # HELP pir_batched_requests_total Requests answered by those passes.\n# TYPE pir_batched_requests_total counter\npir_batched_requests_total {}\n",
            get(&self.requests),
            get(&self.queries),
            get(&self.errors),
            get(&self.bytes_in),
            get(&self.bytes_out),
            get(&self.scan_micros) as f64 / 1e6,
            get(&self.passes),
            get(&self.batched_requests),
        )
    }
}
