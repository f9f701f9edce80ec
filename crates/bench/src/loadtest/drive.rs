//! Running a plan: the clients (closed loop) or the schedule (open loop), the sampler of the
//! servers, the abusive connections; and the search for the knee, open-loop steps at growing
//! rates until latency or errors blow up.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use pir_client::HttpsTransport;

use super::abuse::{start_abuse, AbuseTally};
use super::timeline::{self, cpu_seconds_of, Intervals, Sample};
use super::work::Client;
use super::{Load, Plan, Report, Source};

/// Longest a lookup may take before it counts as an error (the run waits for every lookup).
pub const LOOKUP_TIMEOUT: Duration = Duration::from_secs(30);
/// Most lookups in flight in open loop: a lookup due beyond this is not sent but counted as
/// an error, so a stalled server cannot make the generator hold without bound.
pub const MAX_IN_FLIGHT: usize = 4096;

/// What the lookups of a run share.
struct Shared {
    source: Source,
    intervals: Intervals,
    began: Instant,
    first_error: Mutex<Option<String>>,
}

impl Shared {
    /// Counts a lookup sent at `sent` (served after `Ok(latency)`, or not).
    fn record(&self, sent: Instant, outcome: Result<Duration, String>) {
        let since = sent.saturating_duration_since(self.began);
        match outcome {
            Ok(latency) => self.intervals.record(since, Some(latency)),
            Err(error) => {
                self.intervals.record(since, None);
                let mut first = self.first_error.lock().unwrap_or_else(|p| p.into_inner());
                first.get_or_insert(error);
            }
        }
    }

    /// Makes lookup `k` over `client`, timed from `due`, and counts it.
    async fn lookup(&self, client: &Client, k: usize, due: Instant) -> bool {
        let outcome = tokio::time::timeout(
            LOOKUP_TIMEOUT,
            client.lookup(&self.source.work, k, self.source.max_reply),
        )
        .await;
        let outcome = match outcome {
            Ok(Ok(())) => Ok(due.elapsed()),
            Ok(Err(e)) => Err(format!("{e:#}")),
            Err(_) => Err(format!("no reply within {} s", LOOKUP_TIMEOUT.as_secs())),
        };
        let served = outcome.is_ok();
        self.record(due, outcome);
        served
    }
}

/// One closed-loop client: its own connection, lookups back to back until `stop`.
async fn client(shared: Arc<Shared>, plan: Arc<Plan>, stop: Arc<AtomicBool>, start_at: usize) {
    let client = match Client::open(&plan.servers, &shared.source.work).await {
        Ok(client) => client,
        Err(e) => {
            shared.record(Instant::now(), Err(format!("{e:#}")));
            return;
        }
    };
    let mut k = start_at;
    while !stop.load(Ordering::Relaxed) {
        k += 1;
        if !shared.lookup(&client, k, Instant::now()).await {
            // A refused or dropped lookup: back off a little, as a real client would.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Open loop: lookup `k` is due `k / rate` seconds after the start, sent then whatever is in
/// flight (up to [`MAX_IN_FLIGHT`]); returns once every lookup sent is answered or timed out.
async fn open_loop(shared: Arc<Shared>, plan: &Plan, rate: f64) -> Result<()> {
    let client = Arc::new(Client::open(&plan.servers, &shared.source.work).await?);
    let end = shared.began + Duration::from_secs(plan.seconds);
    let in_flight = Arc::new(AtomicUsize::new(0));
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0usize.. {
        let due = shared.began + Duration::from_secs_f64(k as f64 / rate);
        if due >= end {
            break;
        }
        tokio::time::sleep_until(due.into()).await;
        while tasks.try_join_next().is_some() {}
        if in_flight.load(Ordering::Relaxed) >= MAX_IN_FLIGHT {
            let error = format!("not sent: {MAX_IN_FLIGHT} lookups in flight");
            shared.record(due, Err(error));
            continue;
        }
        in_flight.fetch_add(1, Ordering::Relaxed);
        let (shared, client, in_flight) = (shared.clone(), client.clone(), in_flight.clone());
        tasks.spawn(async move {
            shared.lookup(&client, k, due).await;
            in_flight.fetch_sub(1, Ordering::Relaxed);
        });
    }
    while let Some(done) = tasks.join_next().await {
        done.context("a lookup task")?;
    }
    Ok(())
}

/// The servers now: their `/metrics` and their CPU seconds.
async fn sample(metrics: &HttpsTransport, plan: &Plan) -> Sample {
    Sample {
        metrics: timeline::sample_metrics(metrics, plan.servers.len()).await,
        cpu_s: cpu_seconds_of(&plan.server_pids),
    }
}

/// Samples the servers at the end of each of `count` intervals of `width` from `began`.
async fn sampler(plan: Arc<Plan>, began: Instant, width: Duration, count: usize) -> Vec<Sample> {
    let Ok(metrics) = HttpsTransport::new(&plan.servers) else {
        return Vec::new();
    };
    let mut samples = Vec::with_capacity(count);
    for k in 1..=count {
        tokio::time::sleep_until((began + width * k as u32).into()).await;
        samples.push(sample(&metrics, &plan).await);
    }
    samples
}

/// Runs `plan` with the lookups of `source` and reports what the clients, the abusive
/// connections and the servers showed.
pub async fn run(plan: &Plan, source: Source) -> Result<Report> {
    plan.check()?;
    let plan = Arc::new(plan.clone());
    let metrics = HttpsTransport::new(&plan.servers)?;
    let before = sample(&metrics, &plan).await;
    let stop = Arc::new(AtomicBool::new(false));
    let abuse_stop = Arc::new(AtomicBool::new(false));
    let abuse = Arc::new(AbuseTally::default());
    let mut abusers = match plan.abusers {
        Some(count) => {
            let addr = pir_client::transport::authority_of(&plan.servers[0].0)?;
            let key = plan.servers[0].1;
            start_abuse(addr, key, count, abuse_stop.clone(), abuse.clone())
        }
        None => tokio::task::JoinSet::new(),
    };
    let run_for = Duration::from_secs(plan.seconds);
    let width = Duration::from_millis(plan.interval_ms);
    let intervals = Intervals::new(width, run_for);
    let count = (run_for.as_micros().div_ceil(width.as_micros())) as usize;
    let began = Instant::now();
    let shared = Arc::new(Shared {
        source: source.clone(),
        intervals,
        began,
        first_error: Mutex::new(None),
    });
    let sampling = tokio::spawn(sampler(plan.clone(), began, width, count));
    match plan.load {
        Load::Closed { clients } => {
            let mut tasks = tokio::task::JoinSet::new();
            for k in 0..clients {
                let (shared, plan, stop) = (shared.clone(), plan.clone(), stop.clone());
                tasks.spawn(client(shared, plan, stop, k * 7));
            }
            tokio::time::sleep_until((began + run_for).into()).await;
            stop.store(true, Ordering::Relaxed);
            while let Some(done) = tasks.join_next().await {
                done.context("a client task")?;
            }
        }
        Load::Open { rate } => open_loop(shared.clone(), &plan, rate).await?,
    }
    let elapsed_s = began
        .elapsed()
        .as_secs_f64()
        .min(run_for.as_secs_f64())
        .max(1e-9);
    let mut samples = vec![before];
    samples.extend(sampling.await.context("the sampler")?);
    abuse_stop.store(true, Ordering::Relaxed);
    while abusers.join_next().await.is_some() {}
    if plan.abusers.is_some() {
        // Let the server notice the closed connections, then read its memory again.
        tokio::time::sleep(Duration::from_secs(2)).await;
    }
    let after = sample(&metrics, &plan).await;
    let shared =
        Arc::try_unwrap(shared).map_err(|_| anyhow::anyhow!("a lookup task outlived the run"))?;
    let first_error = shared
        .first_error
        .into_inner()
        .unwrap_or_else(|p| p.into_inner());
    let width = shared.intervals.width();
    let tallies = shared.intervals.into_tallies();
    let rows = timeline::rows(&tallies, width, &samples);
    let mut latencies_us: Vec<u64> = tallies
        .iter()
        .flat_map(|t| t.latencies_us.iter().copied())
        .collect();
    latencies_us.sort_unstable();
    let last = samples.last().copied().unwrap_or_default();
    let diff = |f: fn(&Sample) -> Option<u64>| Some(f(&last)?.saturating_sub(f(&before)?));
    let peak = samples.iter().filter_map(|s| s.metrics.rss_bytes).max();
    Ok(Report {
        target: source.what.clone(),
        clients: match plan.load {
            Load::Closed { clients } => clients,
            Load::Open { .. } => 0,
        },
        rate: match plan.load {
            Load::Open { rate } => Some(rate),
            Load::Closed { .. } => None,
        },
        elapsed_s,
        latencies_us,
        errors: tallies.iter().map(|t| t.errors).sum(),
        first_error,
        rss_bytes: [before.metrics.rss_bytes, peak, after.metrics.rss_bytes],
        abuse: plan.abusers.map(|_| abuse.counts()),
        intervals: rows,
        server_cpu_s: match (before.cpu_s, last.cpu_s) {
            (Some(a), Some(b)) => Some(b - a),
            _ => None,
        },
        server_bytes: [diff(|s| s.metrics.bytes_in), diff(|s| s.metrics.bytes_out)],
        qdp_fallback_scans: diff(|s| s.metrics.qdp_fallback_scans),
    })
}

/// When a step of the knee search has gone past the knee.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct KneeRule {
    /// Most errors, as a share of the lookups sent (0.01: 1 %).
    pub max_error_share: f64,
    /// Highest p99 latency, ms.
    pub max_p99_ms: f64,
    /// Least share of the offered rate served (0.9: 90 %).
    pub min_served_share: f64,
}

impl KneeRule {
    /// Why `report` is past the knee, or `None` if it held.
    pub fn broken(&self, report: &Report) -> Option<String> {
        let sent = report.sent().max(1) as f64;
        let (_, p99, _) = report.quantiles_ms();
        let offered = report.rate.unwrap_or(0.0);
        if report.errors as f64 / sent > self.max_error_share {
            Some(format!(
                "{} errors of {} lookups",
                report.errors,
                report.sent()
            ))
        } else if p99.is_nan() || p99 > self.max_p99_ms {
            Some(format!("p99 {p99:.1} ms over {} ms", self.max_p99_ms))
        } else if report.throughput() < self.min_served_share * offered {
            Some(format!(
                "served {:.1}/s of {offered:.1}/s offered",
                report.throughput()
            ))
        } else {
            None
        }
    }
}

/// The result of a knee search: every step, and which held last.
#[derive(Debug, Clone)]
pub struct Knee {
    /// Each step's report, in order of rate.
    pub steps: Vec<Report>,
    /// Why the last step broke the rule (`None`: every step held).
    pub broke: Option<String>,
    /// The step at the knee: the last that held (`None`: even the first broke).
    pub knee: Option<usize>,
}

/// Open-loop steps of `plan` (its rate first, times `factor` each step, at most `steps`)
/// until one breaks `rule`.
pub async fn knee(
    plan: &Plan,
    source: &Source,
    factor: f64,
    steps: usize,
    rule: KneeRule,
    progress: &mut dyn FnMut(&Report),
) -> Result<Knee> {
    let Load::Open { mut rate } = plan.load else {
        anyhow::bail!("the knee search runs open loop: give --rate");
    };
    let mut found = Knee {
        steps: Vec::new(),
        broke: None,
        knee: None,
    };
    for _ in 0..steps.max(1) {
        let step = Plan {
            load: Load::Open { rate },
            ..plan.clone()
        };
        let report = run(&step, source.clone()).await?;
        progress(&report);
        let broken = rule.broken(&report);
        found.steps.push(report);
        if broken.is_some() {
            found.broke = broken;
            break;
        }
        found.knee = Some(found.steps.len() - 1);
        rate *= factor;
    }
    Ok(found)
}
