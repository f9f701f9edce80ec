//! `pir-bench`: the measurements behind `pir bench`.
//!
//! Every row is a server's time on one database shape, in one mode, next to a plain read of
//! the same bytes measured in the same run (`../shared/GUIDE.md`, measurement rules): the runs
//! alternate between the read and the server work so both see the same machine, and each
//! number is the median of the runs. Modes:
//! - `plain`: one query, the SIMD scan (four Russians off);
//! - `four-russians`: one query from a precomputed table of group size `t`;
//! - `batched-x64`: 64 queries in one pass; its GB/s is the effective throughput,
//!   64 x the database size over the wall time.
//!
//! Server time includes decoding and expanding the query (the AES-CTR seed expansion of
//! RAID-PIR) and encoding the answer, as a mirror does it, but not the network.
//!
//! Also the drivers that measure running servers from outside, as clients do: the load
//! generator of `pir loadtest` ([`loadtest`]) and the breach scale benchmark of `pir breach
//! bench` ([`breach`]), and the sharded-serving benchmark of `pir bench --shards` ([`shards`]:
//! `pir shard serve` and `pir front serve` processes, their CPU time and memory read from
//! `/proc`, and a delaying TCP relay between them). The drivers speak to servers through the client only, never the server
//! runtime. Not the server code itself, nor any scheme.
//!
//! [`tune`] is `pir release tune`: goodput and data efficiency of private fetches of a
//! release's files against the block size (upPIR's Figs. 7-9), in process.
//!
//! [`command`] is `pir bench` and `pir loadtest` themselves: their flags, the choice of rows,
//! the printed tables and reports (`pir bench --oram` hands over to `pir-blockstore`, whose
//! driver runs its stores in process). `pir breach bench` itself ([`breach::command`]) starts
//! its two servers in this process with the code of `pir breach serve`
//! (`pir_breach::command::start_server`). The binary only dispatches to them.

pub mod breach;
pub mod checklist;
pub mod command;
pub mod lattice;
pub mod loadtest;
pub mod plot;
pub mod qdp;
pub mod schemes;
pub mod shards;
pub mod table;
pub mod tune;

use std::time::{Duration, Instant};

use pir_core::{Database, DbShape, MultiServerScheme, SchemeId};
use pir_xor::engine::{Engine, EngineOptions, Prepared, Russians};
use pir_xor::{AnswerMode, Chor, RaidPir};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

/// One database shape of the standard set.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Its name on the command line and in the output.
    pub name: &'static str,
    /// `B`.
    pub blocks: usize,
    /// `b`, in bytes.
    pub block_size: usize,
    /// The scheme its queries use.
    pub scheme: SchemeId,
}

/// The shapes of the issue and of the papers: RAID-PIR's hash-set shapes (2^20 and 2^24 blocks
/// of 32 bytes), 2^18 blocks of 4 KiB (1 GiB), 1 GiB of 1 MiB blocks (upPIR's sweet spot) and
/// RAID-PIR's 1.07 GB of 4 KiB blocks with RAID-PIR queries (n = 2, r = 2, c = 2).
pub const SHAPES: [Shape; 5] = [
    Shape {
        name: "2^20x32B",
        blocks: 1 << 20,
        block_size: 32,
        scheme: SchemeId::Chor,
    },
    Shape {
        name: "2^24x32B",
        blocks: 1 << 24,
        block_size: 32,
        scheme: SchemeId::Chor,
    },
    Shape {
        name: "2^18x4KiB",
        blocks: 1 << 18,
        block_size: 4096,
        scheme: SchemeId::Chor,
    },
    Shape {
        name: "1GiB-1MiB",
        blocks: 1 << 10,
        block_size: 1 << 20,
        scheme: SchemeId::Chor,
    },
    Shape {
        name: "1.07GB-4KiB-raid",
        blocks: 1 << 18,
        block_size: 4096,
        scheme: SchemeId::RaidPir,
    },
];

/// A server mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Mode {
    /// One query, plain SIMD scan.
    Plain,
    /// One query from a four-Russians table of group size `t`.
    FourRussians(usize),
    /// This many queries in one pass.
    Batched(usize),
}

impl Mode {
    /// Its name in the output.
    pub fn name(self) -> String {
        match self {
            Mode::Plain => "plain".into(),
            Mode::FourRussians(t) => format!("four-russians-t{t}"),
            Mode::Batched(k) => format!("batched-x{k}"),
        }
    }
}

/// What to run.
#[derive(Debug, Clone)]
pub struct BenchOptions {
    /// Shapes to run (all of [`SHAPES`] if empty).
    pub shapes: Vec<Shape>,
    /// Modes to run.
    pub modes: Vec<Mode>,
    /// Thread counts to run each row with (1 = one core).
    pub threads: Vec<usize>,
    /// Timed runs per row (the median is reported).
    pub runs: usize,
}

/// One measured row, as printed and as `--json` writes it.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    /// Shape name.
    pub shape: String,
    /// Scheme name.
    pub scheme: String,
    /// Mode name.
    pub mode: String,
    /// Threads used by the server work and the read alike.
    pub threads: usize,
    /// SIMD backend.
    pub backend: String,
    /// Database bytes.
    pub database_bytes: usize,
    /// Median server time, ms.
    pub median_ms: f64,
    /// Database bytes (times the number of queries, for batches) per second of server time.
    pub gb_per_s: f64,
    /// A plain read of the same bytes with the same threads, same run.
    pub memory_read_gb_per_s: f64,
    /// `gb_per_s / memory_read_gb_per_s`.
    pub ratio: f64,
    /// Extra memory the mode needs (the four-Russians table), bytes.
    pub extra_memory_bytes: usize,
    /// Time to build that extra memory, seconds.
    pub setup_s: f64,
    /// Runs behind the median.
    pub runs: usize,
    /// Bytes of memory the mode actually reads per batch (selected rows, table entries, or the
    /// database once per shared pass), mean over the runs; `None` where not counted.
    pub touched_bytes: Option<usize>,
    /// `touched_bytes` per second of server time over the plain read's bandwidth: how close
    /// the mode runs to the memory limit on what it touches (1.0 = at the limit).
    pub touched_ratio: Option<f64>,
    /// Median time of a plain read (no XOR) of exactly the rows or table entries one query's
    /// answer reads, in the same order, with the same threads, same run
    /// (`pir_kernels::memory::read_rows_parallel`): the
    /// memory system's limit for that access pattern, ms. `None` for dense scans (their limit
    /// is the plain read) and batches.
    pub touched_read_ms: Option<f64>,
    /// `touched_read_ms / median_ms`: the share of the access pattern's limit the mode reaches
    /// (1.0 = as fast as reading those rows alone).
    pub limit_ratio: Option<f64>,
    /// The CPU model (from `/proc/cpuinfo`).
    pub cpu: String,
}

impl Row {
    /// A row for `shape`: `served` bytes (the database, times the queries for batches) in the
    /// median server time, next to a plain read of the `database` bytes, both in ms in `times`
    /// (`(read, server)`); `extra` is the extra memory and its build time.
    #[allow(clippy::too_many_arguments)]
    pub fn measured(
        shape: &Shape,
        scheme: &str,
        mode: String,
        threads: usize,
        (database, served): (usize, usize),
        (read_ms, median): (f64, f64),
        extra: (usize, f64),
        runs: usize,
    ) -> Row {
        let gb_per_s = served as f64 / (median * 1e6);
        let memory_read_gb_per_s = database as f64 / (read_ms * 1e6);
        Row {
            shape: shape.name.into(),
            scheme: scheme.into(),
            mode,
            threads,
            backend: pir_kernels::Backend::current().name().into(),
            database_bytes: database,
            median_ms: median,
            gb_per_s,
            memory_read_gb_per_s,
            ratio: gb_per_s / memory_read_gb_per_s,
            extra_memory_bytes: extra.0,
            setup_s: extra.1,
            runs,
            touched_bytes: None,
            touched_ratio: None,
            touched_read_ms: None,
            limit_ratio: None,
            cpu: cpu_model(),
        }
    }

    /// The row with the median time of a plain read of just the rows its answer reads.
    pub fn with_touched_read(mut self, read_ms: Option<f64>) -> Row {
        self.touched_read_ms = read_ms;
        self.limit_ratio = read_ms.map(|ms| ms / self.median_ms);
        self
    }

    /// The row with the bytes its mode read per batch, and their ratio to the plain read.
    pub fn with_touched(mut self, bytes: usize) -> Row {
        let gb_per_s = bytes as f64 / (self.median_ms * 1e6);
        self.touched_bytes = Some(bytes);
        self.touched_ratio = Some(gb_per_s / self.memory_read_gb_per_s);
        self
    }
}

/// The CPU model as `/proc/cpuinfo` names it (the architecture where it cannot be read).
pub fn cpu_model() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|info| {
            info.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split_once(':'))
                .map(|(_, m)| m.trim().to_string())
        })
        .unwrap_or_else(|| std::env::consts::ARCH.to_string())
}

/// The machine line every bench table starts with: CPU model, kernel backend, cores.
pub fn machine_line() -> String {
    let model = cpu_model();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    format!(
        "CPU: {model}; kernel backend {} (of {}); {cores} cores",
        pir_kernels::Backend::current().name(),
        pir_kernels::Backend::available()
            .iter()
            .map(|b| b.name())
            .collect::<Vec<_>>()
            .join(", ")
    )
}

/// Times a plain read (no XOR) of rows `rows` of `b` bytes of `region`, in that order, on the
/// current rayon pool: the limit of an answer that reads just these rows.
pub(crate) fn time_rows_read(region: &[u8], b: usize, rows: &[usize]) -> Duration {
    let t = Instant::now();
    std::hint::black_box(pir_kernels::memory::read_rows_parallel(region, b, rows));
    t.elapsed()
}

/// The median of some durations, in milliseconds.
pub fn median_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort_unstable();
    match samples.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => samples[n / 2].as_secs_f64() * 1e3,
        n => (samples[n / 2 - 1] + samples[n / 2]).as_secs_f64() * 1e3 / 2.0,
    }
}

/// A random database of `shape`, filled with the AES-CTR PRG (fast enough for gigabytes), in
/// huge pages as a mirror with `lock_in_ram` holds it (`HugeBuffer`; an ordinary allocation
/// where no anonymous map can be made).
pub fn random_database(shape: DbShape, seed: u8) -> Database {
    use rayon::prelude::*;
    let fill = |bytes: &mut [u8]| {
        bytes
            .par_chunks_mut(64 << 20)
            .enumerate()
            .for_each(|(i, part)| {
                let mut key = [seed; 16];
                key[..8].copy_from_slice(&(i as u64).to_le_bytes());
                pir_xor::prg::expand(&key, part);
            });
    };
    let mut huge = pir_kernels::memory::HugeBuffer::zeroed(shape.total_bytes());
    fill(&mut huge);
    match Database::from_region(shape, std::sync::Arc::new(huge)) {
        Ok(db) => db,
        Err(_) => {
            // The fallback allocation was not 64-byte aligned: an owned database instead.
            let mut db = Database::zeroed(shape);
            if let Some(bytes) = db.try_bytes_mut() {
                fill(bytes);
            }
            db
        }
    }
}

// The standard shapes and indices are valid by construction.
#[allow(clippy::expect_used)]
/// `count` query bodies for `shape`'s scheme, for random indices (one server's view each).
pub fn query_bodies(
    shape: &Shape,
    db: DbShape,
    count: usize,
    rng: &mut ChaCha20Rng,
) -> Vec<Vec<u8>> {
    use rand::Rng;
    (0..count)
        .map(|_| {
            let index = rng.random_range(0..db.block_count());
            match shape.scheme {
                SchemeId::RaidPir => {
                    let raid = RaidPir::new(db, 2, 2, 2, AnswerMode::Single)
                        .expect("RAID-PIR n=2 r=2 c=2 fits every standard shape");
                    let (queries, _) = raid.query(&[index], rng).expect("index in range");
                    raid.encode_query(&queries[0])
                }
                _ => {
                    let chor = Chor::new(db, 2).expect("two servers");
                    let (queries, _) = chor.query(&[index], rng).expect("index in range");
                    chor.encode_query(&queries[0])
                }
            }
        })
        .collect()
}

// Building a pool of a few threads only fails if the OS refuses threads; nothing to go on with.
#[allow(clippy::expect_used)]
fn pool(threads: usize) -> rayon::ThreadPool {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .expect("a rayon pool of a few threads can always be built")
}

// Shapes are the standard valid ones; queries are made here for this database.
#[allow(clippy::expect_used)]
/// Runs every requested row, calling `report` after each.
pub fn run(options: &BenchOptions, report: &mut dyn FnMut(&Row)) -> Vec<Row> {
    let shapes: Vec<Shape> = if options.shapes.is_empty() {
        SHAPES.to_vec()
    } else {
        options.shapes.clone()
    };
    let runs = options.runs.max(1);
    let mut rows = Vec::new();
    let mut rng = ChaCha20Rng::seed_from_u64(2026);
    for shape in &shapes {
        let db_shape =
            DbShape::new(shape.blocks as u64, shape.block_size).expect("standard shapes are valid");
        let bytes = db_shape.total_bytes();
        let mut database = Some(random_database(db_shape, 0x5a));
        for &mode in &options.modes {
            let russians = match mode {
                Mode::FourRussians(t) => Russians::Group(t),
                _ => Russians::Off,
            };
            let engine_options = EngineOptions {
                russians,
                russians_memory_limit: usize::MAX,
            };
            let db = database
                .take()
                .unwrap_or_else(|| random_database(db_shape, 0x5a));
            let started = Instant::now();
            let engine = pool(options.threads.iter().copied().max().unwrap_or(1))
                .install(|| Engine::new(db, engine_options, &|_, _| {}));
            let setup_s = started.elapsed().as_secs_f64();
            let queries = match mode {
                Mode::Batched(k) => k,
                _ => 1,
            };
            for &threads in &options.threads {
                let pool = pool(threads);
                let mut server = Vec::new();
                let mut reads = Vec::new();
                let mut touched = Vec::new();
                let mut limits = Vec::new();
                // One untimed warm-up of each, then alternate.
                for run in 0..=runs {
                    let bodies = query_bodies(shape, db_shape, queries, &mut rng);
                    let read_time = pool.install(|| {
                        let t = Instant::now();
                        std::hint::black_box(pir_kernels::memory::read_parallel(
                            engine.database().bytes(),
                        ));
                        t.elapsed()
                    });
                    let (server_time, prepared) = pool.install(|| {
                        let t = Instant::now();
                        let prepared: Vec<Prepared> = bodies
                            .iter()
                            .map(|body| engine.prepare(shape.scheme, body).expect("valid query"))
                            .collect();
                        std::hint::black_box(engine.answer_batch(&prepared));
                        (t.elapsed(), prepared)
                    });
                    // The limit of a sparse answer: a plain read of just the rows it reads.
                    let limit_time = match prepared.as_slice() {
                        [one] => engine.rows_read(one).map(|(region, size, list)| {
                            pool.install(|| time_rows_read(region, size, &list))
                        }),
                        _ => None,
                    };
                    if run > 0 {
                        reads.push(read_time);
                        server.push(server_time);
                        limits.extend(limit_time);
                        let refs: Vec<&Prepared> = prepared.iter().collect();
                        touched.push(engine.bytes_read(&refs));
                    }
                }
                let median = median_ms(server);
                let read_ms = median_ms(reads);
                let row = Row::measured(
                    shape,
                    shape.scheme.name(),
                    mode.name(),
                    threads,
                    (bytes, bytes * queries),
                    (read_ms, median),
                    (engine.russians_table_bytes(), setup_s),
                    runs,
                )
                .with_touched(touched.iter().sum::<usize>() / touched.len().max(1))
                .with_touched_read((!limits.is_empty()).then(|| median_ms(limits)));
                report(&row);
                rows.push(row);
            }
            drop(engine);
        }
    }
    rows
}

/// The header of the text table.
///
/// `ratio` is the database bytes (times the queries of a batch) per second over the plain
/// read's bandwidth: a mode that skips rows can pass 1. `touched` is the bytes the mode really
/// read, and `t-ratio` their bandwidth over the plain read's: how close to the memory limit it
/// runs on what it touches. `limit ms` is a plain read (no XOR) of exactly those rows or table
/// entries, in the same order, and `x limit` that time over the mode's: how close the mode runs
/// to what the memory system gives for its access pattern (scattered 4 KiB rows read slower
/// than a sequential stream).
pub fn table_header() -> String {
    format!("{}  extra memory", table::header(&table_columns()))
}

/// The columns of the text table, but the last (`extra memory`, after two spaces).
fn table_columns() -> Vec<table::Column> {
    table::timing_columns(
        [17, 9, 18, 3, 10, 9, 12, 6],
        &[
            table::number("touched", 10),
            table::number("t-ratio", 7),
            table::number("limit ms", 9),
            table::number("x limit", 7),
        ],
    )
}

/// One row of the text table.
pub fn table_line(row: &Row) -> String {
    let extra = if row.extra_memory_bytes > 0 {
        format!(
            "{:.2} GiB table ({:.2}x db), built in {:.1} s",
            row.extra_memory_bytes as f64 / (1u64 << 30) as f64,
            row.extra_memory_bytes as f64 / row.database_bytes as f64,
            row.setup_s
        )
    } else {
        "-".into()
    };
    let touched = row
        .touched_bytes
        .map_or_else(|| "-".to_string(), |b| format!("{:.0} MB", b as f64 / 1e6));
    let or_dash = |v: Option<f64>| v.map_or_else(|| "-".to_string(), |r| format!("{r:.2}"));
    let mut cells = table::timing_cells(
        [&row.shape, &row.scheme, &row.mode],
        row.threads,
        [row.median_ms, row.gb_per_s, row.memory_read_gb_per_s],
        (row.ratio, 2),
    );
    cells.push(touched);
    cells.extend([row.touched_ratio, row.touched_read_ms, row.limit_ratio].map(or_dash));
    format!("{}  {extra}", table::line(&table_columns(), &cells))
}

/// Looks a shape up by name, or parses a custom `BLOCKSxBYTES[-raid]` shape (for example
/// `65536x4096`, Chor queries; `-raid` for RAID-PIR queries), as used to find the
/// four-Russians crossover.
pub fn shape_named(name: &str) -> Option<Shape> {
    if let Some(shape) = SHAPES
        .into_iter()
        .find(|s| s.name.eq_ignore_ascii_case(name))
    {
        return Some(shape);
    }
    let (dims, scheme) = match name.strip_suffix("-raid") {
        Some(dims) => (dims, SchemeId::RaidPir),
        None => (name, SchemeId::Chor),
    };
    let (blocks, block_size) = dims.split_once('x')?;
    let blocks: usize = blocks.parse().ok()?;
    let block_size: usize = block_size.parse().ok()?;
    DbShape::new(blocks as u64, block_size).ok()?;
    Some(Shape {
        name: Box::leak(name.to_string().into_boxed_str()),
        blocks,
        block_size,
        scheme,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        let ms = |v: &[u64]| {
            v.iter()
                .map(|&x| Duration::from_millis(x))
                .collect::<Vec<_>>()
        };
        assert_eq!(median_ms(ms(&[5, 1, 3])), 3.0);
        assert_eq!(median_ms(ms(&[4, 1, 3, 2])), 2.5);
        assert!(median_ms(Vec::new()).is_nan());
    }

    #[test]
    fn the_tables_keep_their_layout() {
        assert_eq!(
            table_header(),
            "shape             scheme    mode               thr  median ms      GB/s    read GB/s  \
             ratio    touched t-ratio  limit ms x limit  extra memory"
        );
        assert_eq!(
            lattice::lattice_table_header(),
            "shape        scheme    mode       thr  median ms     GB/s  read GB/s  ratio   \
             hint bytes    query B 1st query B   answer B"
        );
    }

    #[test]
    fn a_small_run_reports_every_row_with_consistent_numbers() {
        let options = BenchOptions {
            shapes: vec![shape_named("4096x64-raid").unwrap()],
            modes: vec![Mode::Plain, Mode::FourRussians(4), Mode::Batched(4)],
            threads: vec![1, 2],
            runs: 3,
        };
        let mut seen = 0;
        let rows = run(&options, &mut |_| seen += 1);
        assert_eq!(rows.len(), 6);
        assert_eq!(seen, 6);
        for row in &rows {
            assert!(row.median_ms > 0.0);
            let expect = row.gb_per_s / row.memory_read_gb_per_s;
            assert!((row.ratio - expect).abs() < 1e-9);
            let json = serde_json::to_value(row).unwrap();
            for field in [
                "shape",
                "scheme",
                "mode",
                "median_ms",
                "gb_per_s",
                "memory_read_gb_per_s",
                "ratio",
                "touched_bytes",
                "touched_ratio",
                "touched_read_ms",
                "limit_ratio",
                "cpu",
            ] {
                assert!(json.get(field).is_some(), "{field}");
            }
        }
        // 4096 rows in groups of 4: at least 1024 groups of 15 entries of 64 bytes (the
        // 48-chunk table rounds up to whole super-groups of 192 rows: 22 of them).
        assert_eq!(rows[2].extra_memory_bytes, 22 * 48 * 15 * 64);
        for row in &rows {
            // Every mode reads at most the database once per query, and something.
            let touched = row.touched_bytes.expect("counted");
            assert!(touched > 0 && touched <= row.database_bytes * 4, "{row:?}");
            assert!(row.touched_ratio.is_some());
        }
        // 64-byte rows: the plain scan is dense (its limit is the plain read), the table
        // answer reads scattered entries and has a limit of its own; a batch has none.
        assert!(rows[0].touched_read_ms.is_none() && rows[4].touched_read_ms.is_none());
        let limit = rows[2].limit_ratio.expect("table answers have a limit");
        assert!(limit > 0.0 && rows[2].touched_read_ms.is_some_and(|ms| ms > 0.0));
        assert!(shape_named("2^24x32b").is_some());
        assert!(shape_named("nope").is_none());
        let custom = shape_named("1024x96-raid").unwrap();
        assert_eq!(
            (custom.blocks, custom.block_size, custom.scheme),
            (1024, 96, SchemeId::RaidPir)
        );
        assert!(shape_named("10x33").is_none());
    }
}
