//! What a front end keeps about its shards' replicas: which are live (for `/health` and the
//! order replicas are asked in), how fast each shard answers (the hedge delay), and the
//! per-shard counters and latency histogram of `/metrics`.
//!
//! Privacy rule (GUIDE section 7): only counts and times. A shard's time depends on the batch
//! size and its rows, never on the index a query asked for, so nothing here is derived from a
//! query.

use std::collections::VecDeque;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use crate::metrics::{Histogram, LATENCY_BUCKETS};

/// When a front end asks a second replica of a shard that has not answered yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Hedge {
    /// Never: another replica is asked only when one fails or misses its deadlines.
    Off,
    /// After this long without a valid answer.
    After(Duration),
    /// After the shard's recent 99th-percentile answer time ([`AUTO_FLOOR`] at least), or
    /// [`AUTO_START`] until [`AUTO_SAMPLES`] answers have been timed.
    Auto,
}

/// The hedge delay of [`Hedge::Auto`] before enough answers are timed.
pub const AUTO_START: Duration = Duration::from_millis(100);
/// The least hedge delay of [`Hedge::Auto`]: below it, scheduling noise alone would hedge.
pub const AUTO_FLOOR: Duration = Duration::from_millis(2);
/// Answers timed before [`Hedge::Auto`] uses their 99th percentile.
pub const AUTO_SAMPLES: usize = 32;
/// Answer times kept per shard for [`Hedge::Auto`].
const RECENT: usize = 256;

/// A per-shard counter of `/metrics`: its name, its help, where it is.
type Counter = (&'static str, &'static str, fn(&ShardOps) -> &AtomicU64);

/// One shard's replicas and counters.
#[derive(Debug)]
struct ShardOps {
    /// Per replica, the latest observation applied: its ticket ([`Ops::ticket`]) shifted left
    /// by one, with the low bit set if it was seen answering. `fetch_max` applies an
    /// observation only if it was started after the one shown, in one atomic step: a probe
    /// sent before a replica went down and answered after a later probe saw it down does not
    /// mark it live again.
    live: Vec<AtomicU64>,
    /// From sending the part to its valid signed answer.
    seconds: Histogram,
    /// The latest answer times, microseconds (for the hedge delay).
    recent: Mutex<VecDeque<u64>>,
    retries: AtomicU64,
    hedges: AtomicU64,
    failures: AtomicU64,
    unavailable: AtomicU64,
}

/// The operational state of every shard of a front end.
#[derive(Debug)]
pub struct Ops {
    shards: Vec<ShardOps>,
    hedge: Hedge,
    /// The last ticket given out ([`Ops::ticket`]).
    tickets: AtomicU64,
}

/// One shard's replica coverage, as `/health` reports it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Coverage {
    /// Replicas last seen answering (a valid part or a probe).
    pub live: usize,
    /// Replicas configured.
    pub configured: usize,
}

impl Ops {
    /// The state of shards with `replicas[k]` replicas each, all assumed live until seen
    /// failing.
    pub fn new(replicas: &[usize], hedge: Hedge) -> Self {
        Self {
            shards: replicas
                .iter()
                .map(|&n| ShardOps {
                    // Ticket 0, seen answering.
                    live: (0..n).map(|_| AtomicU64::new(1)).collect(),
                    seconds: Histogram::new(&LATENCY_BUCKETS),
                    recent: Mutex::new(VecDeque::with_capacity(RECENT)),
                    retries: AtomicU64::new(0),
                    hedges: AtomicU64::new(0),
                    failures: AtomicU64::new(0),
                    unavailable: AtomicU64::new(0),
                })
                .collect(),
            hedge,
            tickets: AtomicU64::new(0),
        }
    }

    /// A ticket for an observation of a replica started now (later ones are larger).
    pub fn ticket(&self) -> u64 {
        self.tickets.fetch_add(1, Ordering::Relaxed) + 1
    }

    /// Records whether replica `replica` of shard `shard` answered (a valid part or a probe)
    /// to the observation of `ticket`, unless one started later was recorded already.
    pub fn set_live(&self, shard: usize, replica: usize, ticket: u64, live: bool) {
        if let Some(seen) = self.shards.get(shard).and_then(|s| s.live.get(replica)) {
            // Tickets stay far below 2^63 (one per request or probe).
            seen.fetch_max(ticket << 1 | u64::from(live), Ordering::Relaxed);
        }
    }

    /// Per shard: live and configured replicas.
    pub fn coverage(&self) -> Vec<Coverage> {
        self.shards
            .iter()
            .map(|s| Coverage {
                live: s
                    .live
                    .iter()
                    .filter(|l| l.load(Ordering::Relaxed) & 1 == 1)
                    .count(),
                configured: s.live.len(),
            })
            .collect()
    }

    /// Shard `shard`'s replicas in the order to ask them: live ones first, each group rotated
    /// by `turn` so that replicas share the load.
    pub(crate) fn order(&self, shard: usize, turn: usize) -> Vec<usize> {
        self.order_held(shard, turn, &[])
    }

    /// [`Ops::order`], and within the live replicas those with the larger `held[replica]`
    /// first (a breach front end's count of the batch's seeds whose partial answers the
    /// replica acknowledged); an empty or short `held` counts 0 for the replicas it lacks.
    pub(crate) fn order_held(&self, shard: usize, turn: usize, held: &[u32]) -> Vec<usize> {
        let Some(s) = self.shards.get(shard) else {
            return Vec::new();
        };
        let n = s.live.len().max(1);
        let rotated = (0..s.live.len()).map(|i| (i + turn) % n);
        let (mut live, down): (Vec<usize>, Vec<usize>) =
            rotated.partition(|&r| s.live[r].load(Ordering::Relaxed) & 1 == 1);
        // Stable: replicas holding as many keep their rotation.
        live.sort_by_key(|&r| std::cmp::Reverse(held.get(r).copied().unwrap_or(0)));
        live.extend(down);
        live
    }

    /// Whether replica `replica` of shard `shard` was last seen answering.
    pub(crate) fn is_live(&self, shard: usize, replica: usize) -> bool {
        self.shards
            .get(shard)
            .and_then(|s| s.live.get(replica))
            .is_some_and(|l| l.load(Ordering::Relaxed) & 1 == 1)
    }

    /// How long to wait for shard `shard`'s answer before hedging, if at all.
    pub(crate) fn hedge_delay(&self, shard: usize) -> Option<Duration> {
        match self.hedge {
            Hedge::Off => None,
            Hedge::After(delay) => Some(delay),
            Hedge::Auto => {
                let s = self.shards.get(shard)?;
                let recent = s.recent.lock().ok()?;
                if recent.len() < AUTO_SAMPLES {
                    return Some(AUTO_START);
                }
                let mut times: Vec<u64> = recent.iter().copied().collect();
                let at = (times.len() * 99 / 100).min(times.len() - 1);
                let (_, p99, _) = times.select_nth_unstable(at);
                Some(Duration::from_micros(*p99).max(AUTO_FLOOR))
            }
        }
    }

    /// Records shard `shard`'s valid answer after `took`.
    pub(crate) fn answered(&self, shard: usize, took: Duration) {
        if let Some(s) = self.shards.get(shard) {
            s.seconds.observe(took.as_secs_f64());
            if let Ok(mut recent) = s.recent.lock() {
                if recent.len() == RECENT {
                    recent.pop_front();
                }
                recent.push_back(took.as_micros() as u64);
            }
        }
    }

    /// Counts a replica of `shard` that failed, missed its deadline or sent a wrong part.
    pub(crate) fn failed(&self, shard: usize) {
        self.count(shard, |s| &s.failures);
    }
    /// Counts a part sent to another replica after one failed.
    pub(crate) fn retried(&self, shard: usize) {
        self.count(shard, |s| &s.retries);
    }
    /// Counts a part sent to another replica while the first was still out.
    pub(crate) fn hedged(&self, shard: usize) {
        self.count(shard, |s| &s.hedges);
    }
    /// Counts a batch failed because no replica of `shard` gave a valid part.
    pub(crate) fn unavailable(&self, shard: usize) {
        self.count(shard, |s| &s.unavailable);
    }

    fn count(&self, shard: usize, which: impl Fn(&ShardOps) -> &AtomicU64) {
        if let Some(s) = self.shards.get(shard) {
            which(s).fetch_add(1, Ordering::Relaxed);
        }
    }

    /// The `/health` text: a first line (`ok front ...` when every shard has a live replica,
    /// `unready front ...` when one has none), then one line per shard.
    pub fn health(&self, first: &str) -> String {
        let coverage = self.coverage();
        let covered = coverage.iter().filter(|c| c.live > 0).count();
        let ready = covered == coverage.len();
        let mut out = format!(
            "{} {first} covered={covered}/{}\n",
            if ready { "ok" } else { "unready" },
            coverage.len()
        );
        for (k, c) in coverage.iter().enumerate() {
            let _ = writeln!(
                out,
                "shard {k} live={}/{}{}",
                c.live,
                c.configured,
                if c.live == 0 {
                    " (no live replica)"
                } else {
                    ""
                }
            );
        }
        out
    }

    /// Whether every shard has a live replica.
    pub fn ready(&self) -> bool {
        self.coverage().iter().all(|c| c.live > 0)
    }

    /// The per-shard lines of `/metrics` (Prometheus text format, label `shard`).
    pub fn render(&self) -> String {
        let mut out = String::with_capacity(1024 * (1 + self.shards.len()));
        let name = "pir_shard_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} Time from sending a shard its part of a batch to a valid signed \
             part, per shard.\n# TYPE {name} histogram"
        );
        for (k, s) in self.shards.iter().enumerate() {
            s.seconds
                .render_series(&mut out, name, &format!("shard=\"{k}\","));
        }
        let counters: [Counter; 4] = [
            (
                "pir_shard_retries_total",
                "Parts sent to another replica after one failed.",
                |s| &s.retries,
            ),
            (
                "pir_shard_hedges_total",
                "Parts sent to another replica while the first was still out (hedged).",
                |s| &s.hedges,
            ),
            (
                "pir_shard_failures_total",
                "Replica failures: no reply, a missed deadline, a refusal or a wrong part.",
                |s| &s.failures,
            ),
            (
                "pir_shard_unavailable_total",
                "Batches failed because no replica of the shard gave a valid part.",
                |s| &s.unavailable,
            ),
        ];
        for (name, help, field) in counters {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            for (k, s) in self.shards.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{name}{{shard=\"{k}\"}} {}",
                    field(s).load(Ordering::Relaxed)
                );
            }
        }
        let coverage = self.coverage();
        for (name, help, value) in [
            (
                "pir_shard_live_replicas",
                "Replicas of the shard last seen answering.",
                (|c: &Coverage| c.live) as fn(&Coverage) -> usize,
            ),
            (
                "pir_shard_replicas",
                "Replicas of the shard configured.",
                |c: &Coverage| c.configured,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} gauge");
            for (k, c) in coverage.iter().enumerate() {
                let _ = writeln!(out, "{name}{{shard=\"{k}\"}} {}", value(c));
            }
        }
        let name = "pir_shard_hedge_delay_seconds";
        let _ = writeln!(
            out,
            "# HELP {name} How long a part waits before it is hedged (absent: hedging off).\n\
             # TYPE {name} gauge"
        );
        for k in 0..self.shards.len() {
            if let Some(delay) = self.hedge_delay(k) {
                let _ = writeln!(out, "{name}{{shard=\"{k}\"}} {:.6}", delay.as_secs_f64());
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn live_replicas_come_first_and_rotate() {
        let ops = Ops::new(&[3], Hedge::Off);
        assert_eq!(ops.order(0, 1), vec![1, 2, 0]);
        ops.set_live(0, 2, ops.ticket(), false);
        assert_eq!(ops.order(0, 1), vec![1, 0, 2]);
        assert_eq!(
            ops.coverage(),
            vec![Coverage {
                live: 2,
                configured: 3
            }]
        );
    }

    #[test]
    fn replicas_holding_more_come_first_among_the_live() {
        let ops = Ops::new(&[3], Hedge::Off);
        assert_eq!(ops.order_held(0, 1, &[0, 0, 5]), vec![2, 1, 0]);
        assert_eq!(ops.order_held(0, 1, &[3, 3, 0]), vec![1, 0, 2]);
        assert_eq!(ops.order_held(0, 1, &[]), ops.order(0, 1));
        // A down replica stays last, however much it holds.
        ops.set_live(0, 2, ops.ticket(), false);
        assert!(!ops.is_live(0, 2) && ops.is_live(0, 0));
        assert_eq!(ops.order_held(0, 0, &[0, 0, 9]), vec![0, 1, 2]);
    }

    #[test]
    fn auto_hedge_follows_the_recent_p99() {
        let ops = Ops::new(&[2], Hedge::Auto);
        assert_eq!(ops.hedge_delay(0), Some(AUTO_START));
        for i in 0..100u64 {
            ops.answered(0, Duration::from_millis(10 + i));
        }
        assert_eq!(ops.hedge_delay(0), Some(Duration::from_millis(109)));
        assert_eq!(Ops::new(&[1], Hedge::Off).hedge_delay(0), None);
    }
}
