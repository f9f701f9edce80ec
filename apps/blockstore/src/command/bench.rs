//! `pir bench --oram`: fills a store, times random reads and writes, prints the report
//! ([`crate::bench`] measures; this part makes the stores and prints).

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};
use pir_host::log::human;

use crate::bench::{OramBenchOptions, OramReport};
use crate::remote::StoreService;
use crate::size::parse_size;
use crate::StoreSpec;

/// What `pir bench --oram` is asked for (its flags, as values).
#[derive(Debug, Clone)]
pub struct OramBenchPlan {
    /// Logical size of the store, e.g. `1GiB`.
    pub size: String,
    /// Stores to spread the partitions over (at least one is used).
    pub stores: u32,
    /// Run the stores as HTTPS store servers on 127.0.0.1 in this process.
    pub remote: bool,
    /// Operations per timed round.
    pub ops: u64,
    /// Timed rounds (at least one is run).
    pub runs: usize,
    /// Where the scratch directory goes (default: the system temporary directory).
    pub scratch: Option<PathBuf>,
    /// The line describing this machine, printed first (`pir_bench::machine_line`).
    pub machine: String,
    /// Print one JSON object (`ops_per_s`, `p50_ms`, `p99_ms`, `cpu_s_per_op`, ...) instead
    /// of the report.
    pub json: bool,
}

/// The benchmark's stores: directories, or `pir oram store` servers on 127.0.0.1 in this
/// process (one per store, owned by a key saved where `pir oram` looks for it).
async fn bench_stores(
    plan: &OramBenchPlan,
    scratch: &Path,
) -> Result<(Vec<pir_server::RunningServer>, Vec<StoreSpec>)> {
    let mut servers = Vec::new();
    let mut stores = Vec::new();
    let owner = pir_keys::SecretKey::generate()?;
    if plan.remote {
        owner.save(&crate::disk::client_key_path(&scratch.join("state")))?;
    }
    for i in 0..plan.stores.max(1) {
        let dir = scratch.join(format!("store{i}"));
        if !plan.remote {
            stores.push(StoreSpec::Dir(dir));
            continue;
        }
        let key = pir_keys::SecretKey::generate()?;
        let service = std::sync::Arc::new(StoreService::open(&dir)?);
        let mut options = pir_server::ServerOptions::new("127.0.0.1:0".parse()?);
        super::one_client(&mut options);
        let tls = pir_keys::tls::server_config_for_client(&key, owner.public())?;
        let running = pir_server::start(service, tls, options).await?;
        stores.push(StoreSpec::Remote {
            url: format!("https://{}", running.addr),
            key: key.public(),
        });
        servers.push(running);
    }
    Ok((servers, stores))
}

/// `pir bench --oram`.
pub async fn run(plan: OramBenchPlan) -> Result<()> {
    let size = parse_size(&plan.size).map_err(anyhow::Error::msg)?;
    let scratch = match &plan.scratch {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .context("cannot make a scratch directory")?;
    let (servers, stores) = bench_stores(&plan, scratch.path()).await?;
    let kind = if plan.remote {
        "HTTPS store server(s) on 127.0.0.1"
    } else {
        "file store(s)"
    };
    let options = OramBenchOptions {
        size,
        block: 4096,
        stores,
        runtime: Some(tokio::runtime::Handle::current()),
        ops: plan.ops,
        runs: plan.runs.max(1),
        in_flight: crate::pir_oram::MAX_BATCH,
        dir: scratch.path().to_path_buf(),
    };
    if !plan.json {
        println!("{}", plan.machine);
        println!(
            "oblivious store: {} logical, 4 KiB blocks, {} {kind} in {}; filling every block once...",
            human(size),
            options.stores.len(),
            scratch.path().display()
        );
    }
    let progress = super::bar(size);
    let block = u64::from(options.block);
    let bar = progress.clone();
    let report = tokio::task::spawn_blocking(move || {
        let report = crate::bench::run(&options, &mut |done, _| bar.set_position(done * block));
        (options, report)
    })
    .await
    .context("the benchmark panicked")?;
    let (options, report) = (report.0, report.1?);
    for server in servers {
        server.shutdown().await;
    }
    progress.finish_and_clear();
    if plan.json {
        print_json(&options, &report);
    } else {
        print_report(&options, &report);
    }
    Ok(())
}

/// One JSON row: medians over the rounds, CPU of this process (client and any in-process
/// stores) per operation.
fn print_json(options: &OramBenchOptions, report: &OramReport) {
    let slot = u64::from(options.block) + u64::from(crate::pir_oram::params::SEAL_OVERHEAD);
    println!(
        "{{\"bench\":\"oram\",\"size\":{},\"block\":{},\"stores\":{},\"in_flight\":{},\"ops\":{},\"runs\":{},\"ops_per_s\":{:.1},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"cpu_s_per_op\":{:.7},\"bytes_per_op\":{:.0},\"peak_cache\":{}}}",
        options.size,
        options.block,
        options.stores.len(),
        options.in_flight,
        report.ops,
        report.rounds.len(),
        report.ops_per_second(),
        report.latency(0.5).as_secs_f64() * 1e3,
        report.latency(0.99).as_secs_f64() * 1e3,
        report.cpu_s_per_op(),
        report.bytes_per_op(slot),
        report.peak_cache,
    );
}

fn print_report(options: &OramBenchOptions, report: &OramReport) {
    let (size, block) = (options.size, u64::from(options.block));
    let slot = u64::from(options.block) + u64::from(crate::pir_oram::params::SEAL_OVERHEAD);
    let ops = report.ops_per_second();
    let mbps = ops * f64::from(options.block) / 1e6;
    let moved = report.bytes_per_op(slot);
    println!(
        "fill: {} blocks in {:.1} s ({:.0} writes/s)",
        size / block,
        report.fill.as_secs_f64(),
        (size / block) as f64 / report.fill.as_secs_f64()
    );
    println!(
        "random 4 KiB, half reads, 32 in flight, median of {} rounds of {} ops:",
        report.rounds.len(),
        report.ops
    );
    println!("  {ops:.0} ops/s = {mbps:.1} MB/s logical");
    println!(
        "  latency p50 {:.2} ms, p99 {:.2} ms",
        report.latency(0.5).as_secs_f64() * 1e3,
        report.latency(0.99).as_secs_f64() * 1e3
    );
    println!(
        "  storage per op: {:.0} KB moved ({:.1}x the block), {:.2} reads (seeks) + {:.2} level writes",
        moved / 1e3,
        moved / f64::from(options.block),
        report.seeks_per_op(),
        report.writes_per_op()
    );
    println!(
        "  storage bandwidth {:.2} GB/s = {:.2} x a plain sequential read of the same bytes ({:.2} GB/s, over the bytes touched)",
        ops * moved / 1e9,
        ops * moved / report.plain_read_bps,
        report.plain_read_bps / 1e9
    );
    println!(
        "  vs a plain (non-oblivious) disk: {:.0} random 4 KiB reads/s, ORAM = {:.3} x that",
        report.plain_random_ops,
        ops / report.plain_random_ops
    );
    println!(
        "  client memory: state {} = {} per GiB stored; eviction cache p50 {} / p99 {} / max {} blocks",
        human(report.state_bytes as u64),
        human((report.state_bytes as f64 / (size as f64 / (1u64 << 30) as f64)) as u64),
        report.cache_percentile(0.5),
        report.cache_percentile(0.99),
        report.peak_cache
    );
    let histogram: Vec<String> = report
        .cache_histogram()
        .iter()
        .map(|(bound, n)| format!("<{bound}: {n}"))
        .collect();
    println!(
        "  eviction cache histogram (batches): {}",
        histogram.join(", ")
    );
}
