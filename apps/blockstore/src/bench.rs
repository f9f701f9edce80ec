//! `pir bench --oram`: throughput, latency and traffic of the oblivious disk on file stores.
//!
//! Method: create a disk of the given size in a scratch directory, fill every block once (so
//! every level holds data: the steady state, not an empty ORAM), then run `runs` rounds of
//! `ops` uniformly random 4 KiB reads and writes (half each) with 32 requests in flight, and
//! report medians. The baselines, measured in the same run on the same file system: plain
//! random reads of one block each from a plain file of the same logical size (what a
//! non-oblivious disk does per operation), and a plain sequential read of as many bytes as
//! the ORAM moved (the page-cache/memory limit for the bytes actually touched).

use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use pir_oram::{state, Op, Request, Traffic};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::disk::{Disk, DiskError, StoreSpec};

/// What to measure.
pub struct OramBenchOptions {
    /// Logical size in bytes.
    pub size: u64,
    /// Block size.
    pub block: u32,
    /// The stores (empty: one directory under `dir`).
    pub stores: Vec<StoreSpec>,
    /// The runtime remote stores run on.
    pub runtime: Option<tokio::runtime::Handle>,
    /// Operations per timed round.
    pub ops: u64,
    /// Timed rounds (the median is reported).
    pub runs: usize,
    /// Requests in flight.
    pub in_flight: usize,
    /// Scratch directory (the stores are created inside it).
    pub dir: PathBuf,
}

/// One timed round.
#[derive(Clone, Debug)]
pub struct Round {
    /// Wall time of the round.
    pub elapsed: Duration,
    /// Storage traffic of the round.
    pub traffic: Traffic,
    /// Per-request latency, sorted.
    pub latencies: Vec<Duration>,
    /// Eviction-cache size after each batch.
    pub cache: Vec<usize>,
    /// CPU seconds this process used during the round (user + system, every thread; NaN
    /// where `/proc/self/stat` cannot be read).
    pub cpu_s: f64,
}

/// The result.
pub struct OramReport {
    /// Options echoed.
    pub size: u64,
    /// Block size.
    pub block: u32,
    /// Stores.
    pub stores: u32,
    /// Operations per round.
    pub ops: u64,
    /// Rounds, in order.
    pub rounds: Vec<Round>,
    /// Fill time (every block written once).
    pub fill: Duration,
    /// Encoded client state in bytes.
    pub state_bytes: usize,
    /// Largest eviction cache seen.
    pub peak_cache: usize,
    /// Plain random one-block reads per second from the store file (same run).
    pub plain_random_ops: f64,
    /// Plain sequential read speed of the store file, bytes per second (same run).
    pub plain_read_bps: f64,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

impl OramReport {
    /// Median operations per second.
    pub fn ops_per_second(&self) -> f64 {
        median(
            self.rounds
                .iter()
                .map(|r| self.ops as f64 / r.elapsed.as_secs_f64())
                .collect(),
        )
    }

    /// Storage bytes moved (read + written) per operation, median round.
    pub fn bytes_per_op(&self, slot: u64) -> f64 {
        median(
            self.rounds
                .iter()
                .map(|r| {
                    ((r.traffic.slots_read + r.traffic.slots_written) * slot) as f64
                        / self.ops as f64
                })
                .collect(),
        )
    }

    /// Distinct storage reads per operation (each a contiguous extent: a seek).
    pub fn seeks_per_op(&self) -> f64 {
        median(
            self.rounds
                .iter()
                .map(|r| r.traffic.extents_read as f64 / self.ops as f64)
                .collect(),
        )
    }

    /// Storage writes per operation.
    pub fn writes_per_op(&self) -> f64 {
        median(
            self.rounds
                .iter()
                .map(|r| r.traffic.extents_written as f64 / self.ops as f64)
                .collect(),
        )
    }

    /// CPU seconds per operation (this process, every thread), median round.
    pub fn cpu_s_per_op(&self) -> f64 {
        median(
            self.rounds
                .iter()
                .map(|r| r.cpu_s / self.ops as f64)
                .collect(),
        )
    }

    /// Latency percentile over all rounds.
    pub fn latency(&self, fraction: f64) -> Duration {
        let mut all: Vec<Duration> = self
            .rounds
            .iter()
            .flat_map(|r| r.latencies.iter().copied())
            .collect();
        all.sort_unstable();
        all[((all.len() - 1) as f64 * fraction) as usize]
    }

    /// Eviction-cache size percentile over all batches.
    pub fn cache_percentile(&self, fraction: f64) -> usize {
        let mut all: Vec<usize> = self
            .rounds
            .iter()
            .flat_map(|r| r.cache.iter().copied())
            .collect();
        all.sort_unstable();
        all[((all.len() - 1) as f64 * fraction) as usize]
    }

    /// Histogram of the eviction-cache size: (upper bound, batches), power-of-two buckets.
    pub fn cache_histogram(&self) -> Vec<(usize, usize)> {
        let mut buckets: Vec<(usize, usize)> = Vec::new();
        for &c in self.rounds.iter().flat_map(|r| r.cache.iter()) {
            let bound = (c + 1).next_power_of_two();
            match buckets.iter_mut().find(|(b, _)| *b == bound) {
                Some(entry) => entry.1 += 1,
                None => buckets.push((bound, 1)),
            }
        }
        buckets.sort_unstable();
        buckets
    }
}

pub(crate) fn fill(disk: &mut Disk, progress: &mut dyn FnMut(u64, u64)) -> Result<(), DiskError> {
    let b = disk.geometry().block_size as usize;
    let blocks = u64::from(disk.geometry().blocks);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let mut data = vec![0u8; 256 * b];
    let mut at = 0u64;
    while at < blocks {
        let n = 256.min(blocks - at);
        rng.fill_bytes(&mut data);
        disk.write_at(at * b as u64, &data[..n as usize * b])?;
        at += n;
        progress(at, blocks);
    }
    disk.flush()?;
    Ok(())
}

pub(crate) fn round(
    disk: &mut Disk,
    ops: u64,
    in_flight: usize,
    seed: u64,
) -> Result<Round, DiskError> {
    let g = disk.geometry().clone();
    let b = g.block_size as usize;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let before = disk.oram().traffic().clone();
    let mut started: std::collections::HashMap<u64, Instant> = std::collections::HashMap::new();
    let mut latencies = Vec::with_capacity(ops as usize);
    let mut cache = Vec::new();
    let mut next = 0u64;
    let cpu_before = cpu_seconds();
    let begin = Instant::now();
    while (latencies.len() as u64) < ops {
        while started.len() < in_flight && next < ops {
            let block = rng.random_range(0..g.blocks);
            let op = if next.is_multiple_of(2) {
                let mut data = vec![0u8; b];
                rng.fill_bytes(&mut data);
                Op::Write(data)
            } else {
                Op::Read
            };
            disk.submit(Request {
                id: next,
                block,
                op,
            })?;
            started.insert(next, Instant::now());
            next += 1;
        }
        for answer in disk.step()? {
            if let Some(t) = started.remove(&answer.id) {
                latencies.push(t.elapsed());
            }
        }
        cache.push(disk.oram().cache_len());
    }
    let elapsed = begin.elapsed();
    let cpu_s = cpu_seconds() - cpu_before;
    let after = disk.oram().traffic();
    latencies.sort_unstable();
    Ok(Round {
        elapsed,
        traffic: Traffic {
            requests: after.requests - before.requests,
            extents_read: after.extents_read - before.extents_read,
            slots_read: after.slots_read - before.slots_read,
            extents_written: after.extents_written - before.extents_written,
            slots_written: after.slots_written - before.slots_written,
        },
        latencies,
        cache,
        cpu_s,
    })
}

/// CPU seconds this process has used (user + system, every thread) from `/proc/self/stat`
/// (fields 14 and 15, in `USER_HZ` = 100 ticks per second on every Linux user space), or NaN
/// elsewhere. Time spent waiting for a core on a shared machine does not count.
fn cpu_seconds() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // The command name (field 2) may hold spaces: count fields after its closing ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) / 100.0,
        _ => f64::NAN,
    }
}

/// Writes a plain file of `size` random bytes (what a non-oblivious disk would hold) and
/// measures, medians of 3: random one-block reads per second, and sequential read speed over
/// `bytes` bytes (wrapping around the file).
fn plain_baselines(
    file: &Path,
    size: u64,
    block: u64,
    ops: u64,
    bytes: u64,
) -> std::io::Result<(f64, f64)> {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    {
        let f = std::fs::File::create(file)?;
        let mut chunk = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < size {
            rng.fill_bytes(&mut chunk);
            let n = chunk.len().min((size - at) as usize);
            f.write_all_at(&chunk[..n], at)?;
            at += n as u64;
        }
    }
    let f = std::fs::File::open(file)?;
    let mut buffer = vec![0u8; block as usize];
    let mut random = Vec::new();
    let mut sequential = Vec::new();
    let chunk_len = (1u64 << 20).min(size);
    let mut chunk = vec![0u8; chunk_len as usize];
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..ops {
            let at = rng.random_range(0..size / block) * block;
            f.read_exact_at(&mut buffer, at)?;
        }
        random.push(ops as f64 / t.elapsed().as_secs_f64());
        let t = Instant::now();
        let mut done = 0u64;
        while done < bytes {
            f.read_exact_at(&mut chunk, done % (size - chunk_len + 1))?;
            done += chunk_len;
        }
        sequential.push(done as f64 / t.elapsed().as_secs_f64());
    }
    std::fs::remove_file(file)?;
    Ok((median(random), median(sequential)))
}

/// Runs the benchmark; `progress(done, total)` is called during the fill.
pub fn run(
    options: &OramBenchOptions,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<OramReport, DiskError> {
    let state = options.dir.join("state");
    let stores = if options.stores.is_empty() {
        vec![StoreSpec::Dir(options.dir.join("store0"))]
    } else {
        options.stores.clone()
    };
    let runtime = options.runtime.as_ref();
    Disk::init(&state, options.size, options.block, &stores, runtime)?;
    let mut disk = Disk::open(&state, runtime)?;
    let t = Instant::now();
    fill(&mut disk, progress)?;
    let fill_time = t.elapsed();
    let mut rounds = Vec::new();
    for r in 0..options.runs {
        rounds.push(round(
            &mut disk,
            options.ops,
            options.in_flight,
            100 + r as u64,
        )?);
    }
    let state_bytes = state::encode(disk.oram(), false).len();
    let peak_cache = disk.peak_cache();
    let slot = disk.geometry().sealed_slot();
    let moved = rounds[0].traffic.slots_read + rounds[0].traffic.slots_written;
    disk.close()?;
    let file = options.dir.join("plain.raw");
    let (plain_random_ops, plain_read_bps) = plain_baselines(
        &file,
        options.size,
        u64::from(options.block),
        options.ops,
        moved * slot,
    )
    .map_err(|source| DiskError::Io {
        path: file.display().to_string(),
        source,
    })?;
    Ok(OramReport {
        size: options.size,
        block: options.block,
        stores: stores.len() as u32,
        ops: options.ops,
        rounds,
        fill: fill_time,
        state_bytes,
        peak_cache,
        plain_random_ops,
        plain_read_bps,
    })
}
