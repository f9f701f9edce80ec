//! `pir bench` and `pir loadtest`: their flags and what each does with them.
//!
//! `pir bench` runs the rows of this crate in this process (the XOR modes, QDP, the lattice
//! schemes, Checklist: [`rows`]) and prints each as it finishes; `pir bench --oram` is the
//! oblivious store's driver, `pir_blockstore::command::bench`. `pir loadtest` drives a running
//! server with [`crate::loadtest`]. The `pir` binary only dispatches here. Not the
//! measurements themselves: they are the crate's other modules.

mod loadtest;
mod rows;
mod shards;

use std::path::PathBuf;

use clap::{Args, ValueEnum};

pub use loadtest::run as loadtest;
pub use rows::{choose, Choice};

/// `pir bench`, with or without `--oram`.
pub async fn bench(args: BenchArgs) -> anyhow::Result<()> {
    if !args.shards.is_empty() {
        return shards::run(&args).await;
    }
    if !args.oram {
        return rows::run(&args);
    }
    if args.oram_nodes == 0 && (args.oram_direct || args.oram_store_latency_ms > 0) {
        use pir_blockstore::command::device_bench;
        return device_bench::run(device_bench::DeviceBenchPlan {
            size: args.oram_size,
            direct: args.oram_direct,
            latency_ms: args.oram_store_latency_ms,
            ops: args.ops,
            runs: args.runs,
            json: args.json,
            scratch: args.scratch,
            machine: crate::machine_line(),
        })
        .await;
    }
    if args.oram_nodes > 0 {
        use pir_blockstore::command::nodes_bench;
        return nodes_bench::run(nodes_bench::NodesBenchPlan {
            size: args.oram_size,
            nodes: args.oram_nodes,
            delay_ms: args.oram_delay_ms,
            in_flight: args.oram_in_flight,
            ops: args.ops,
            runs: args.runs,
            json: args.json,
            scratch: args.scratch,
            machine: crate::machine_line(),
        })
        .await;
    }
    pir_blockstore::command::bench::run(pir_blockstore::command::bench::OramBenchPlan {
        size: args.oram_size,
        stores: args.oram_stores,
        remote: args.oram_remote,
        ops: args.ops,
        runs: args.runs,
        scratch: args.scratch,
        machine: crate::machine_line(),
        json: args.json,
    })
    .await
}

/// `pir bench`.
///
/// Runs the standard shapes (or one) in each mode and prints, per row: the median server time
/// over --runs runs, GB/s, a plain read of the same bytes with the same threads measured in the
/// same run, and their ratio. Batched rows report effective throughput (queries x database
/// size / time). Four-Russians rows build a table of (2^t - 1)/t x the database first
/// (t = 4: 3.75x, t = 8: 31.9x); rows whose table would not fit in memory are skipped.
/// The full set needs about 6 GiB of memory and a few minutes.
#[derive(Debug, Args)]
#[command(verbatim_doc_comment)]
pub struct BenchArgs {
    /// Run one shape: 2^20x32B, 2^24x32B, 2^18x4KiB, 1GiB-1MiB or 1.07GB-4KiB-raid; for the
    /// lattice modes 1GiB-1bit (2^33 one-bit records), 8GiB-1bit (2^36; needs about 18 GiB
    /// of memory), 1GiB-32B (2^25 records of 32 bytes), 1GiB-32KiB (2^15 records of 32 KiB:
    /// ypir runs YPIR+SP), or RECORDSxBYTES (e.g. 65536x32) for a quick run.
    #[arg(long, value_name = "NAME")]
    pub shape: Option<String>,
    /// Modes: plain, four-russians, batched, and the single-server simplepir, doublepir, ypir,
    /// inspire
    /// (comma-separated; lattice rows report answer time only, after the hint is built).
    /// `qdp` (alone) times the online step of RAID-PIR with query-dependent preprocessing
    /// for n = 2 and 3 (r = 2, c = n) next to plain and four-Russians RAID-PIR (--group) on
    /// the same database; target: QDP online time <= 0.5 x four Russians, n = 2.
    /// `checklist` (alone) times Checklist's offline and online phases (--shape RECORDSxBYTES,
    /// default 3000000x32); `checklist-updates` (alone) runs --steps waterfall steps of 1 %
    /// changed records each, against re-hinting from scratch (--csv writes the curve).
    #[arg(
        long,
        value_delimiter = ',',
        default_value = "plain,four-russians,batched"
    )]
    pub modes: Vec<String>,
    /// checklist-updates: steps (1 % of the records changed in each).
    #[arg(long, default_value_t = 200)]
    pub steps: usize,
    /// checklist-updates: buckets per level before they merge (the waterfall's ratio r).
    #[arg(long, default_value_t = 4)]
    pub waterfall_ratio: usize,
    /// checklist-updates: write one CSV line per step to FILE
    /// (benches/plot_checklist_updates.py draws it).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Four-Russians group size t (1 to 8).
    #[arg(long, default_value_t = 4)]
    pub group: usize,
    /// Queries per batch in batched mode.
    #[arg(long, default_value_t = 64)]
    pub batch: usize,
    /// Lattice modes: queries answered per pass over the database, one row each
    /// (comma-separated, e.g. 1,4,8; default 1). GB/s is then the effective throughput,
    /// K x the database over the answer time (cross-client batching).
    #[arg(long, value_delimiter = ',', value_name = "K")]
    pub lattice_batch: Vec<usize>,
    /// Thread counts to run (comma-separated; default: 1 and all cores).
    #[arg(long, value_delimiter = ',')]
    pub threads: Vec<usize>,
    /// Timed runs per row; the median is reported.
    #[arg(long, default_value_t = 5)]
    pub runs: usize,
    /// Print one JSON object per row instead of a table.
    #[arg(long)]
    pub json: bool,
    /// Kernel backend: portable, avx2 or avx512 (default: the best this CPU has).
    #[arg(long)]
    pub backend: Option<String>,
    /// Benchmark the oblivious block store instead (`pir oram`): fill a store of --oram-size,
    /// then --runs rounds of --ops random 4 KiB reads and writes with 32 in flight.
    #[arg(long)]
    pub oram: bool,
    /// Logical size of the benchmarked store (it takes about 9x on disk, sparse).
    #[arg(long, value_name = "SIZE", default_value = "1GiB")]
    pub oram_size: String,
    /// Stores to spread the partitions over.
    #[arg(long, value_name = "N", default_value_t = 1)]
    pub oram_stores: u32,
    /// Run the stores as `pir oram store` HTTPS servers on 127.0.0.1 in this process
    /// (instead of directories the client writes itself).
    #[arg(long)]
    pub oram_remote: bool,
    /// Run the ORAM benchmark over N `pir oram node` processes behind the oblivious load
    /// balancer (this process): CPU time per operation summed over all of them, and the
    /// balancer-to-node traffic per block.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub oram_nodes: usize,
    /// With --oram-nodes: relay the balancer's node traffic through a user-space relay that
    /// delays every chunk by MS milliseconds each way.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub oram_delay_ms: u64,
    /// With --oram-nodes: requests kept in flight (default: 32 per batch the balancer
    /// coalesces into one node message, which is one per node up to 8 nodes: every node as
    /// loaded as one node alone; 32 gives the single-node load spread over the nodes).
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub oram_in_flight: usize,
    /// Open the ORAM benchmark's store with O_DIRECT, so the page cache does not hide the
    /// device: one directory store in --scratch (which must be on a file system that takes
    /// O_DIRECT: a disk, not tmpfs), with seeks per operation and MB/s counted by the store,
    /// beside random 4 KiB O_DIRECT reads of a plain file of the same size.
    #[arg(long)]
    pub oram_direct: bool,
    /// Add MS milliseconds before every store request of the ORAM benchmark (a read of a
    /// batch's slots, a write of its levels, a sync), as slow or distant stores would.
    #[arg(long, value_name = "MS", default_value_t = 0)]
    pub oram_store_latency_ms: u64,
    /// Operations per timed round of the ORAM benchmark.
    #[arg(long, value_name = "N", default_value_t = 50_000)]
    pub ops: u64,
    /// Scratch directory of the ORAM benchmark (default: the system temporary directory).
    #[arg(long, value_name = "DIR")]
    pub scratch: Option<PathBuf>,
    /// Benchmark sharded SimplePIR serving instead, for each shard count (e.g. 1,2,4) at the
    /// one total size of --shape RECORDSxBYTES (default 1048576x32): `pir shard serve` and
    /// `pir front serve` processes on 127.0.0.1; per query, server CPU time (shards and front
    /// end), front-end CPU time, latency p50/p99, and each shard's resident memory.
    /// --threads N gives every shard and front end N answering threads (--workers).
    #[arg(long, value_delimiter = ',', value_name = "S")]
    pub shards: Vec<usize>,
    /// --shards: queries timed per row (sent one at a time).
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub shard_queries: usize,
    /// --shards: also run each row through a relay adding this many milliseconds each way
    /// between the front end and every shard (0: no relay rows).
    #[arg(long, value_name = "MS", default_value_t = 2)]
    pub relay_ms: u64,
}

/// `pir loadtest`.
///
/// Closed loop (--clients, lookups back to back) or open loop (--rate lookups a second on a
/// fixed schedule); --knee steps the rate up until latency or errors blow up and reports the
/// last step that held. Latency is end to end from this process over pinned TLS; server CPU
/// per lookup needs --server-pid (the servers on this machine). The report's intervals count
/// each lookup in the interval it was sent in and sample the servers' /metrics (QDP queue
/// depth and fallback full scans for breach servers) at the end of each.
#[derive(Debug, Args)]
pub struct LoadtestArgs {
    /// A server, as https://HOST:PORT=SERVER.pub (its key pins TLS). Safe Browsing and
    /// breach servers come in pairs: give server 0, then server 1.
    #[arg(long = "server", value_name = "URL=SERVER.pub", required = true)]
    pub servers: Vec<String>,
    /// What they serve: `mirror` (pir mirror serve), `lattice` (pir serve), `safebrowsing`
    /// (pir safebrowsing serve, both servers) or `breach` (pir breach serve, both servers).
    #[arg(long, value_enum)]
    pub kind: LoadKind,
    /// Safe Browsing: the proxy's lookup scheme whose lookups are sent.
    #[arg(long, value_enum, default_value_t = LoadScheme::Checklist)]
    pub scheme: LoadScheme,
    /// Concurrent clients (closed loop), each on its own connection, each sending lookups
    /// back to back.
    #[arg(long, default_value_t = 50)]
    pub clients: usize,
    /// Open loop: lookups a second, each sent on schedule however many are still in flight
    /// (instead of --clients).
    #[arg(long, value_name = "PER_SECOND")]
    pub rate: Option<f64>,
    /// Find the knee: open-loop steps from --rate, each --seconds long and --knee-factor times
    /// the last, until errors pass 1 %, p99 passes --knee-p99-ms or under 90 % of the rate is
    /// served.
    #[arg(long, requires = "rate")]
    pub knee: bool,
    /// Rate factor between knee steps.
    #[arg(long, default_value_t = 1.5)]
    pub knee_factor: f64,
    /// Most knee steps.
    #[arg(long, default_value_t = 12)]
    pub knee_steps: usize,
    /// The p99 latency (ms) past which a knee step has broken.
    #[arg(long, default_value_t = 200.0)]
    pub knee_p99_ms: f64,
    /// How long to run (each knee step).
    #[arg(long, default_value_t = 10)]
    pub seconds: u64,
    /// Interval of the report's timeline (lookup counts, latency, server samples), ms.
    #[arg(long, default_value_t = 1000)]
    pub interval_ms: u64,
    /// A server's process id (on this machine), for its CPU time from /proc/PID/stat; repeat
    /// for each server.
    #[arg(long = "server-pid", value_name = "PID")]
    pub server_pids: Vec<u32>,
    /// Write the timeline (one line per interval) as CSV to FILE (the knee step, with --knee).
    #[arg(long, value_name = "FILE")]
    pub csv: Option<PathBuf>,
    /// Draw the timeline as a PNG chart to FILE: lookups served, p99 latency, and for breach
    /// servers the QDP queue depth and fallback full scans, per interval (needs Debian's
    /// fonts-dejavu-core).
    #[arg(long, value_name = "FILE")]
    pub plot: Option<PathBuf>,
    /// The chart's caption (default: the target).
    #[arg(long, value_name = "TEXT", requires = "plot")]
    pub title: Option<String>,
    /// Mix in abusive connections: slowloris, idle, and bad bodies (100 MB announced,
    /// trickling, malformed).
    #[arg(long)]
    pub abuse: bool,
    /// Abusive connections of each kind (default: a tenth of --clients, at least 4).
    #[arg(long, value_name = "N", requires = "abuse")]
    pub abusers: Option<usize>,
    /// Print the report as JSON.
    #[arg(long)]
    pub json: bool,
}

impl LoadtestArgs {
    /// Abusive connections of each kind.
    pub fn abusers(&self) -> usize {
        self.abusers.unwrap_or((self.clients / 10).max(4))
    }
}

/// The kinds of server `pir loadtest` drives.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadKind {
    /// A mirror (`pir mirror serve`): Chor queries over its newest release.
    Mirror,
    /// A single-server database (`pir serve`): SimplePIR, DoublePIR or YPIR queries.
    Lattice,
    /// The two Safe Browsing servers (`pir safebrowsing serve`): one hash prefix's lookups.
    Safebrowsing,
    /// The two breach servers (`pir breach serve`): whole credential checks.
    Breach,
}

/// The Safe Browsing lookup schemes `pir loadtest` can send.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LoadScheme {
    /// Checklist (hints downloaded first).
    Checklist,
    /// SinglePass (hints downloaded first).
    Singlepass,
    /// DPF (no hints).
    Dpf,
}
