//! `pir bench --oram --oram-direct` and `--oram-store-latency-ms MS`: the oblivious disk on a
//! real device and behind slow stores.
//!
//! Method: as `pir bench --oram` (fill every block once, then `--runs` rounds of `--ops`
//! random 4 KiB reads and writes, half each, 32 in flight), on one directory store in
//! `--scratch` (default: the system temporary directory). With `--oram-direct` the store's
//! file is reopened with `O_DIRECT` after init ([`crate::direct::DirectStores`]), so every
//! read and write reaches the device; the bench refuses, saying why, a directory whose file
//! system does not take `O_DIRECT`. With `--oram-store-latency-ms` every store request (a
//! read of a batch's slots, a write of its levels, a sync) waits that long first, the fill
//! excepted. The store layer counts requests and seeks ([`crate::direct::Counted`]). The
//! baseline, in the same run on the same directory: random 4 KiB reads (`O_DIRECT` too when
//! asked) of a plain file of the same logical size.

use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::direct::{self, Counted, DirectStores, IoStats};
use crate::{Disk, StoreSpec};

/// What is asked.
#[derive(Debug, Clone)]
pub struct DeviceBenchPlan {
    /// Logical size, e.g. `64MiB`.
    pub size: String,
    /// Open the store with `O_DIRECT`.
    pub direct: bool,
    /// Added latency before every store request, in milliseconds.
    pub latency_ms: u64,
    /// Operations per timed round.
    pub ops: u64,
    /// Timed rounds.
    pub runs: usize,
    /// Print one JSON object instead of text.
    pub json: bool,
    /// Where the scratch directory goes.
    pub scratch: Option<PathBuf>,
    /// The line describing this machine.
    pub machine: String,
}

struct Measured {
    elapsed: Duration,
    latencies: Vec<Duration>,
    cpu: f64,
    io: IoStats,
}

struct Outcome {
    rounds: Vec<Measured>,
    /// Plain random 4 KiB reads per second of a plain file.
    plain_ops: f64,
}

const BLOCK: u64 = 4096;

/// The file system type of `dir`, by name where it is a common one.
fn fs_name(dir: &Path) -> String {
    let Ok(stat) = rustix::fs::statfs(dir) else {
        return "unknown".into();
    };
    #[allow(clippy::unnecessary_cast)] // f_type's width differs between targets.
    match stat.f_type as i64 {
        0xEF53 => "ext4".into(),
        0x0102_1994 => "tmpfs".into(),
        0x5846_5342 => "xfs".into(),
        0x9123_683E => "btrfs".into(),
        0x794C_7630 => "overlay".into(),
        other => format!("0x{other:x}"),
    }
}

fn open_bench_disk(
    dir: &Path,
    size: u64,
    direct: bool,
) -> Result<(
    Disk,
    std::sync::Arc<direct::IoCounts>,
    std::sync::Arc<std::sync::atomic::AtomicU64>,
)> {
    let state = dir.join("state");
    Disk::init(
        &state,
        size,
        BLOCK as u32,
        &[StoreSpec::Dir(dir.join("store0"))],
        None,
    )?;
    let mut disk = Disk::open(&state, None)?;
    let mut handles = None;
    disk.map_stores(|old, specs, geometry| {
        let inner: Box<dyn pir_oram::SlotStore + Send> = if direct {
            drop(old);
            let dirs: Vec<PathBuf> = specs
                .iter()
                .filter_map(|s| match s {
                    StoreSpec::Dir(d) => Some(d.clone()),
                    _ => None,
                })
                .collect();
            Box::new(DirectStores::open(&dirs, geometry)?)
        } else {
            old
        };
        let (store, counts, latency) = Counted::new(inner, geometry.sealed_slot(), geometry.stores);
        handles = Some((counts, latency));
        Ok(Box::new(store))
    })?;
    let (counts, latency) = handles.context("the stores were not wrapped")?;
    Ok((disk, counts, latency))
}

fn measure(plan: &DeviceBenchPlan, size: u64, dir: &Path) -> Result<Outcome> {
    let (mut disk, counts, latency) = open_bench_disk(dir, size, plan.direct)?;
    crate::bench::fill(&mut disk, &mut |_, _| {})?;
    latency.store(plan.latency_ms * 1000, Ordering::Relaxed);
    let mut rounds = Vec::new();
    for r in 0..plan.runs.max(1) {
        let cpu = super::nodes_bench::cpu_seconds("self");
        let io = counts.snapshot();
        let t = Instant::now();
        let round = crate::bench::round(
            &mut disk,
            plan.ops.max(1),
            crate::pir_oram::MAX_BATCH,
            100 + r as u64,
        )?;
        rounds.push(Measured {
            elapsed: t.elapsed(),
            latencies: round.latencies,
            cpu: super::nodes_bench::cpu_seconds("self") - cpu,
            io: counts.snapshot() - io,
        });
    }
    latency.store(0, Ordering::Relaxed);
    disk.close()?;
    let plain_ops = plain_random(&dir.join("plain.raw"), size, plan.ops.max(1), plan.direct)?;
    Ok(Outcome { rounds, plain_ops })
}

/// Random 4 KiB reads per second (median of 3 rounds of `ops`) of a plain file of `size`
/// random bytes, written and synced first; with `direct`, read with `O_DIRECT`.
fn plain_random(path: &Path, size: u64, ops: u64, direct: bool) -> Result<f64> {
    use std::os::unix::fs::{FileExt, OpenOptionsExt};
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    {
        let file = std::fs::File::create(path)?;
        let mut chunk = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < size {
            rng.fill_bytes(&mut chunk);
            let n = chunk.len().min((size - at) as usize);
            file.write_all_at(&chunk[..n], at)?;
            at += n as u64;
        }
        file.sync_all()?;
    }
    let mut options = std::fs::OpenOptions::new();
    options.read(true);
    if direct {
        options.custom_flags(rustix::fs::OFlags::DIRECT.bits() as i32);
    }
    let file = options
        .open(path)
        .with_context(|| format!("cannot open {}", path.display()))?;
    // An aligned 4 KiB buffer inside a larger one (O_DIRECT needs the address aligned).
    let mut raw = vec![0u8; 2 * direct::ALIGN];
    let at = raw.as_ptr().align_offset(direct::ALIGN).min(direct::ALIGN);
    let buffer = &mut raw[at..at + BLOCK as usize];
    let mut rates = Vec::new();
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..ops {
            let offset = rng.random_range(0..size / BLOCK) * BLOCK;
            file.read_exact_at(buffer, offset)?;
        }
        rates.push(ops as f64 / t.elapsed().as_secs_f64());
    }
    std::fs::remove_file(path)?;
    Ok(median(rates))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `pir bench --oram --oram-direct` / `--oram-store-latency-ms`.
pub async fn run(plan: DeviceBenchPlan) -> Result<()> {
    let size = crate::size::parse_size(&plan.size).map_err(anyhow::Error::msg)?;
    let scratch = match &plan.scratch {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .context("cannot make a scratch directory")?;
    let dir = scratch.path().to_path_buf();
    let fs = fs_name(&dir);
    if plan.direct {
        direct::probe(&dir).map_err(anyhow::Error::msg)?;
        if fs == "tmpfs" {
            // Recent kernels take O_DIRECT on tmpfs, but there is no device behind it.
            anyhow::bail!(
                "{} is on tmpfs: O_DIRECT there reads memory, not a device; give --scratch a \
                 directory on a disk (`findmnt -T DIR` shows its file system)",
                dir.display()
            );
        }
    }
    if !plan.json {
        println!("{}", plan.machine);
        println!(
            "oblivious store: {} logical, 4 KiB blocks, one directory store in {} ({fs}){}{}; filling every block once...",
            plan.size,
            dir.display(),
            if plan.direct { ", O_DIRECT" } else { "" },
            if plan.latency_ms > 0 {
                format!(", {} ms added before every store request", plan.latency_ms)
            } else {
                String::new()
            }
        );
    }
    let (inner_plan, inner_dir) = (plan.clone(), dir.clone());
    let outcome = tokio::task::spawn_blocking(move || measure(&inner_plan, size, &inner_dir))
        .await
        .context("the benchmark panicked")??;
    report(&plan, size, &fs, &dir, &outcome);
    Ok(())
}

fn report(plan: &DeviceBenchPlan, size: u64, fs: &str, dir: &Path, outcome: &Outcome) {
    let rounds = &outcome.rounds;
    let ops = plan.ops.max(1) as f64;
    let per_op = |f: &dyn Fn(&Measured) -> f64| median(rounds.iter().map(|m| f(m) / ops).collect());
    let ops_per_s = median(
        rounds
            .iter()
            .map(|m| ops / m.elapsed.as_secs_f64())
            .collect(),
    );
    let mut all: Vec<Duration> = rounds.iter().flat_map(|m| m.latencies.clone()).collect();
    all.sort_unstable();
    let pct = |f: f64| all[((all.len() - 1) as f64 * f) as usize].as_secs_f64() * 1e3;
    let cpu = per_op(&|m| m.cpu);
    let seeks = per_op(&|m| m.io.seeks as f64);
    let reads = per_op(&|m| m.io.reads as f64);
    let writes = per_op(&|m| m.io.writes as f64);
    let bytes = per_op(&|m| (m.io.bytes_read + m.io.bytes_written) as f64);
    let store_mbps = median(
        rounds
            .iter()
            .map(|m| (m.io.bytes_read + m.io.bytes_written) as f64 / m.elapsed.as_secs_f64() / 1e6)
            .collect(),
    );
    let logical_mbps = ops_per_s * BLOCK as f64 / 1e6;
    let plain_mbps = outcome.plain_ops * BLOCK as f64 / 1e6;
    if plan.json {
        println!(
            "{{\"bench\":\"oram\",\"size\":{size},\"block\":{BLOCK},\"stores\":1,\"in_flight\":{},\"ops\":{},\"runs\":{},\"ops_per_s\":{ops_per_s:.1},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"cpu_s_per_op\":{cpu:.7},\"bytes_per_op\":{bytes:.0},\"direct\":{},\"store_latency_ms\":{},\"fs\":{fs:?},\"dir\":{:?},\"seeks_per_op\":{seeks:.2},\"store_reads_per_op\":{reads:.2},\"store_writes_per_op\":{writes:.2},\"store_mb_per_s\":{store_mbps:.1},\"logical_mb_per_s\":{logical_mbps:.2},\"plain_random_ops_per_s\":{:.0},\"plain_random_mb_per_s\":{plain_mbps:.1},\"machine\":{:?}}}",
            crate::pir_oram::MAX_BATCH,
            plan.ops.max(1),
            rounds.len(),
            pct(0.5),
            pct(0.99),
            plan.direct,
            plan.latency_ms,
            dir.display().to_string(),
            outcome.plain_ops,
            plan.machine
        );
        return;
    }
    println!(
        "random 4 KiB, half reads, 32 in flight, median of {} rounds of {}:",
        rounds.len(),
        plan.ops.max(1)
    );
    println!(
        "  {ops_per_s:.0} ops/s = {logical_mbps:.2} MB/s logical; latency p50 {:.2} ms, p99 {:.2} ms; CPU {:.3} ms per op",
        pct(0.5),
        pct(0.99),
        cpu * 1e3
    );
    println!(
        "  store per op: {seeks:.1} seeks, {reads:.1} reads + {writes:.1} writes, {:.0} KB; {store_mbps:.1} MB/s to the store",
        bytes / 1e3
    );
    println!(
        "  vs a plain file on the same directory: {:.0} random 4 KiB reads/s ({plain_mbps:.1} MB/s){}; ORAM = {:.3} x that",
        outcome.plain_ops,
        if plan.direct { ", O_DIRECT" } else { "" },
        ops_per_s / outcome.plain_ops
    );
}
