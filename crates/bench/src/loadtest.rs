//! The load generator behind `pir loadtest`: many concurrent clients against one server, with
//! abusive ones mixed in. The binary parses flags, calls [`source`] and [`run`], and prints the
//! [`Report`].
//!
//! Each client is its own HTTPS connection pinned to the server's key, sending valid queries
//! back to back for the whole run. The queries are made once, at the start, by the real
//! client code (a mirror: Chor queries over the release its manifest describes; a
//! single-server `pir serve`: the lattice client's own queries, recorded as they leave), then
//! replayed: the server cannot tell a replay from a new query, and the load tool spends its
//! CPU on the network, not on making queries. A reply counts as served when it is a signed
//! answer envelope (not an error).
//!
//! With `--abuse`, alongside the clients: connections that send headers one byte a second
//! (slowloris), connections that send nothing, requests announcing 100 MB bodies, requests
//! whose body trickles, and malformed envelopes. The report says how the server dealt with
//! each and whether the valid clients were served meanwhile.
//!
//! The server's resident memory comes from its `/metrics` (`process_resident_memory_bytes`):
//! before the run, its peak during it (sampled every 250 ms) and after it, once the abusive
//! connections are gone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use pir_client::{HttpsTransport, Tap, Transport};
use pir_core::wire::{self, MessageKind};
use pir_core::{DbShape, MultiServerScheme, SchemeId};
use pir_keys::PublicKey;
use pir_service::framing;
use rand::Rng;

mod abuse;

pub use abuse::AbuseCounts;
use abuse::{start_abuse, AbuseTally};

/// Distinct queries made at the start and replayed.
pub const DISTINCT_QUERIES: usize = 32;

/// The kinds of server the load generator drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A mirror (`pir mirror serve`): Chor queries over its newest release.
    Mirror,
    /// A single-server database (`pir serve`): SimplePIR, DoublePIR or YPIR queries.
    Lattice,
}

/// One run: the server, its clients, how long, and the abusive connections.
#[derive(Debug, Clone)]
pub struct Plan {
    /// The server's URL and the key that pins its TLS.
    pub server: (String, PublicKey),
    /// Concurrent valid clients (at least 1).
    pub clients: usize,
    /// How long the clients run, in seconds (at least 1).
    pub seconds: u64,
    /// Abusive connections of each kind, or `None` for none at all.
    pub abusers: Option<usize>,
}

impl Plan {
    /// The two lines printed before a run: what is targeted and how.
    pub fn intro(&self, source: &Source) -> [String; 2] {
        [
            format!("target: {} at {}", source.what, self.server.0),
            format!(
                "{} clients for {} s{}",
                self.clients,
                self.seconds,
                match self.abusers {
                    Some(n) =>
                        format!(", with {n} slowloris, {n} idle and {n} bad-body connections"),
                    None => String::new(),
                }
            ),
        ]
    }
}

/// Valid queries to replay and the largest reply they may get.
#[derive(Debug, Clone)]
pub struct Source {
    requests: Vec<Vec<u8>>,
    max_reply: usize,
    what: String,
}

impl Source {
    /// What the queries are for, in words.
    pub fn what(&self) -> &str {
        &self.what
    }

    /// The request envelopes replayed, in order.
    pub fn requests(&self) -> &[Vec<u8>] {
        &self.requests
    }

    /// The largest reply a request may get.
    pub fn max_reply(&self) -> usize {
        self.max_reply
    }
}

/// The queries for a server of `kind` at `server`, made by the real client code.
pub async fn source(server: &(String, PublicKey), kind: Kind) -> Result<Source> {
    match kind {
        Kind::Mirror => mirror_source(server).await,
        Kind::Lattice => lattice_source(server).await,
    }
}

/// Chor queries (the first server's share) over the release the mirror serves.
async fn mirror_source(server: &(String, PublicKey)) -> Result<Source> {
    let transport = HttpsTransport::new(std::slice::from_ref(server))?;
    let manifest =
        pir_client::fetch_manifest(&transport, 0, pir_updates::fetch::MAX_MANIFEST_BYTES)
            .await
            .context("fetching the mirror's manifest")?;
    let decoded = pir_updates::manifest::Manifest::decode_unverified(&manifest)
        .context("the mirror's manifest")?;
    let id = pir_keys::sha256(&manifest);
    chor_source(
        decoded.block_count,
        decoded.block_size as usize,
        id,
        &mut rand::rng(),
    )
}

/// [`DISTINCT_QUERIES`] Chor queries (the first server's share) for random blocks of the
/// release `id` of `block_count` blocks of `block_size` bytes.
pub fn chor_source(
    block_count: u64,
    block_size: usize,
    id: [u8; 32],
    rng: &mut impl rand::CryptoRng,
) -> Result<Source> {
    let shape = DbShape::new(block_count, block_size)?;
    let scheme = pir_xor::Chor::new(shape, 2)?;
    let mut requests = Vec::with_capacity(DISTINCT_QUERIES);
    for _ in 0..DISTINCT_QUERIES {
        let index = rng.random_range(0..block_count) as usize;
        let (queries, _) = scheme.query(&[index], rng)?;
        requests.push(pir_service::reply::request(
            SchemeId::Chor,
            &id,
            &[scheme.encode_query(&queries[0])],
        ));
    }
    Ok(Source {
        requests,
        max_reply: framing::reply_bytes(1, scheme.max_answer_body()),
        what: format!(
            "mirror, release {}: {block_count} blocks of {block_size} B, Chor queries ({} B each)",
            hex::encode(&id[..8]),
            scheme.encode_query(&scheme.query(&[0], rng)?.0[0]).len()
        ),
    })
}

/// The lattice client's own queries (SimplePIR, DoublePIR or YPIR, whatever the server runs).
async fn lattice_source(server: &(String, PublicKey)) -> Result<Source> {
    let https = HttpsTransport::new(std::slice::from_ref(server))?;
    let (recording, recorded) = Tap::recording(Arc::new(https));
    let session = pir_client::lattice::LatticeSession::open_with(recording, server.1, None)
        .await
        .context("opening a session with the server")?;
    let records = session.header().params.records;
    let mut rng = rand::rng();
    let mut max_reply = 0;
    for _ in 0..DISTINCT_QUERIES.min(8) {
        let index = rng.random_range(0..records);
        let fetched = session
            .fetch(&[index])
            .await
            .context("a lookup to record the queries")?;
        max_reply = max_reply.max(fetched.reply_bytes);
    }
    // The query envelopes the session sent (not its info and hint requests).
    let requests: Vec<Vec<u8>> = (recorded.lock().unwrap_or_else(|p| p.into_inner()).iter())
        .filter(|(_, request)| {
            wire::decode_envelope(request, request.len())
                .is_ok_and(|e| e.kind == MessageKind::Query)
        })
        .map(|(_, request)| request.clone())
        .collect();
    if requests.is_empty() {
        bail!("the session sent no query to record");
    }
    Ok(Source {
        what: format!(
            "single-server PIR ({:?}), {records} records, queries of {} B",
            session.header().params.scheme,
            requests[0].len()
        ),
        requests,
        max_reply: max_reply.max(1) * 2 + 4096,
    })
}

/// What the valid clients saw.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

impl Tally {
    /// Adds what another client saw; the first error kept is the earliest merged.
    fn merge(&mut self, other: Tally) {
        self.latencies_us.extend(other.latencies_us);
        self.errors += other.errors;
        if self.first_error.is_none() {
            self.first_error = other.first_error;
        }
    }
}

/// One client: its own connection, queries back to back until `stop`.
async fn client(
    server: (String, PublicKey),
    source: Arc<Source>,
    stop: Arc<AtomicBool>,
    start_at: usize,
) -> Tally {
    let mut tally = Tally::default();
    let transport = match HttpsTransport::new(&[server]) {
        Ok(t) => t,
        Err(e) => {
            tally.errors += 1;
            tally.first_error = Some(e.to_string());
            return tally;
        }
    };
    let mut k = start_at;
    while !stop.load(Ordering::Relaxed) {
        let request = source.requests[k % source.requests.len()].clone();
        k += 1;
        let began = Instant::now();
        let outcome = transport.exchange(0, request, source.max_reply).await;
        let served = match &outcome {
            Ok(reply) => wire::decode_envelope(reply, reply.len())
                .map(|e| e.kind == MessageKind::Answer)
                .unwrap_or(false),
            Err(_) => false,
        };
        if served {
            tally.latencies_us.push(began.elapsed().as_micros() as u64);
        } else {
            tally.errors += 1;
            if tally.first_error.is_none() {
                tally.first_error = Some(match outcome {
                    Ok(reply) => match wire::decode_envelope(&reply, reply.len()) {
                        Ok(e) if e.kind == MessageKind::Error => wire::decode_error(e.body)
                            .map(|(_, m)| format!("refused: {m}"))
                            .unwrap_or_else(|_| "an error envelope".into()),
                        _ => "a reply that is not an answer".into(),
                    },
                    Err(e) => e.to_string(),
                });
            }
            // A refused or dropped request: back off a little, as a real client would.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    tally
}

/// The server's resident memory in bytes, from its `/metrics`.
async fn server_rss(metrics: &HttpsTransport) -> Option<u64> {
    let text = metrics.get_plain(0, "/metrics", 4 << 20).await.ok()?;
    let text = String::from_utf8(text).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
        .and_then(|v| v.trim().parse().ok())
}

/// The `p` quantile (0 to 1, nearest rank) of `sorted` microseconds, in milliseconds; NaN
/// when there is none.
pub fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("?".into(), |b| {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    })
}

/// What a run measured.
#[derive(Debug, Clone, PartialEq)]
pub struct Report {
    /// What was targeted ([`Source::what`]).
    pub target: String,
    /// Concurrent valid clients.
    pub clients: usize,
    /// Seconds the clients ran.
    pub elapsed_s: f64,
    /// Latency of every served query in microseconds, sorted.
    pub latencies_us: Vec<u64>,
    /// Queries not served (refused, dropped, or not an answer).
    pub errors: u64,
    /// The first of those errors, in words.
    pub first_error: Option<String>,
    /// The server's resident memory before the run, its peak during it and after it.
    pub rss_bytes: [Option<u64>; 3],
    /// What the abusive connections saw, if there were any.
    pub abuse: Option<AbuseCounts>,
}

impl Report {
    /// Queries served.
    pub fn served(&self) -> usize {
        self.latencies_us.len()
    }

    /// Queries served per second.
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

    /// The report as `pir loadtest --json` prints it.
    pub fn to_json(&self) -> serde_json::Value {
        let (p50, p99, p999) = self.quantiles_ms();
        let [before, peak, after] = self.rss_bytes;
        serde_json::json!({
            "target": self.target,
            "clients": self.clients,
            "seconds": self.elapsed_s,
            "served": self.served(),
            "errors": self.errors,
            "first_error": self.first_error,
            "throughput_per_s": self.throughput(),
            "latency_ms": {"p50": p50, "p99": p99, "p999": p999},
            "server_rss_bytes": {"before": before, "peak": peak, "after": after},
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

/// Runs `plan` with the queries of `source` and reports what the clients, the abusive
/// connections and the server's `/metrics` showed.
pub async fn run(plan: &Plan, source: Source) -> Result<Report> {
    if plan.clients == 0 || plan.seconds == 0 {
        bail!("--clients and --seconds must be at least 1");
    }
    let server = plan.server.clone();
    let addr = pir_client::transport::authority_of(&server.0)?;
    let source = Arc::new(source);
    let metrics = HttpsTransport::new(std::slice::from_ref(&server))?;
    let rss_before = server_rss(&metrics).await;

    let stop = Arc::new(AtomicBool::new(false));
    let abuse_stop = Arc::new(AtomicBool::new(false));
    let abuse = Arc::new(AbuseTally::default());
    let mut abusers = match plan.abusers {
        Some(count) => start_abuse(addr, server.1, count, abuse_stop.clone(), abuse.clone()),
        None => tokio::task::JoinSet::new(),
    };
    let mut clients = tokio::task::JoinSet::new();
    for k in 0..plan.clients {
        clients.spawn(client(server.clone(), source.clone(), stop.clone(), k * 7));
    }
    let began = Instant::now();
    let mut peak = rss_before;
    while began.elapsed() < Duration::from_secs(plan.seconds) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Some(rss) = server_rss(&metrics).await {
            peak = Some(peak.map_or(rss, |p| p.max(rss)));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut tally = Tally::default();
    while let Some(done) = clients.join_next().await {
        tally.merge(done.context("a client task")?);
    }
    let elapsed_s = began.elapsed().as_secs_f64();
    abuse_stop.store(true, Ordering::Relaxed);
    while abusers.join_next().await.is_some() {}
    // Let the server notice the closed connections, then read its memory again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = server_rss(&metrics).await;

    tally.latencies_us.sort_unstable();
    Ok(Report {
        target: source.what.clone(),
        clients: plan.clients,
        elapsed_s,
        latencies_us: tally.latencies_us,
        errors: tally.errors,
        first_error: tally.first_error,
        rss_bytes: [rss_before, peak, rss_after],
        abuse: plan.abusers.map(|_| abuse.counts()),
    })
}
