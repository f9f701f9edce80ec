//! `pir release tune`: which block size suits a release on this machine (upPIR, Cappos 2013,
//! sections 5.3 and 5.4, Figs. 7-9).
//!
//! The release's files are packed again, in memory, at each power-of-two block size, as
//! `pir release build` packs them (each file from a block boundary, padded to whole blocks,
//! optionally to size classes), behind the mirrors' scan engine with its default
//! four-Russians tables. Every file is then fetched privately, one file at a time, as `pir
//! fetch` does with three mirrors (RAID-PIR, n = 3, r = 2, c = 3; a single block in `Single`
//! mode, more in `PerChunk` mode, in the client's rounds):
//! - the client makes and encodes the queries, each mirror decodes its query and answers
//!   (the engine's `prepare` and `answer_batch`, as a mirror runs them), the client decodes
//!   the answers and the blocks, which are checked against the packed copy;
//! - **goodput** is the file bytes fetched over the time of that work, with the mirrors'
//!   part counted as the slowest mirror's (they answer in parallel). The network is left
//!   out, as in the paper's Figs. 8 and 9 (mirror XOR time and data efficiency combined);
//! - **data efficiency** is the file bytes over every byte moved: the encoded queries and
//!   answers, whose blocks carry the files' padding (Fig. 7's "size of the release by the
//!   amount of data a client would have to download to obtain every update in it one update
//!   at a time", with the queries counted too).
//!
//! [`recommend`] picks the largest goodput among the sizes whose efficiency is within
//! [`EFFICIENCY_SLACK`] of the best: bigger blocks scan faster (section 5.2) but pad more
//! (section 5.3), and mirrors pay for every byte moved, so goodput alone would trade much
//! bandwidth for a little speed.
//!
//! Not measured: TLS, the network, the manifest's hash checks.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use pir_core::{Database, DbShape, MultiServerScheme, SchemeId};
use pir_updates::command::ReleaseTuneArgs;
use pir_xor::{AnswerMode, Engine, EngineOptions, RaidPir};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

use crate::plot::{line_chart_png, Chart, Series};
use crate::table::{header, line, number, Column};

/// Smallest block size measured (the range: 1 KiB to 8 MiB).
pub const MIN_TUNE_BLOCK: usize = 1 << 10;
/// Largest block size measured.
pub const MAX_TUNE_BLOCK: usize = 8 << 20;
/// A size is recommended only if its efficiency is at least `1 - EFFICIENCY_SLACK` of the
/// best measured.
pub const EFFICIENCY_SLACK: f64 = 0.10;

/// The mirrors a fetch asks and RAID-PIR's redundancy: `pir fetch`'s default over a list of
/// three or more mirrors.
const SERVERS: usize = 3;
const REDUNDANCY: usize = 2;

/// How long and what to measure.
#[derive(Debug, Clone, Copy)]
pub struct TuneOptions {
    /// Smallest block size, a power of two.
    pub min_block: usize,
    /// Largest block size, a power of two.
    pub max_block: usize,
    /// Passes over every file per size, or (`None`) as many as fit in `seconds` (at least one).
    pub rounds: Option<u32>,
    /// Time per block size when `rounds` is `None`.
    pub seconds: f64,
    /// Pad files to power-of-two block counts (`pir release build --size-classes`).
    pub size_classes: bool,
}

/// One block size's measurements.
#[derive(Debug, Clone, Serialize)]
pub struct TuneRow {
    /// Bytes per block.
    pub block_size: usize,
    /// Blocks of the packed release.
    pub blocks: u64,
    /// Bytes of padding in the packed release (blocks times size, less the files' bytes).
    pub padding_bytes: u64,
    /// Files fetched.
    pub fetches: u64,
    /// Bytes of the files fetched.
    pub useful_bytes: u64,
    /// Bytes of the encoded queries sent to every mirror.
    pub query_bytes: u64,
    /// Bytes of the encoded answers from every mirror.
    pub answer_bytes: u64,
    /// Seconds of the client's work (queries, decoding).
    pub client_seconds: f64,
    /// Seconds of the mirrors' work, the slowest mirror of each round.
    pub mirror_seconds: f64,
    /// Useful bytes per second of client and mirror work.
    pub goodput: f64,
    /// Useful bytes over the query and answer bytes.
    pub efficiency: f64,
}

/// The block sizes from `min` to `max`, doubling; both must be powers of two in the range
/// [`MIN_TUNE_BLOCK`]..=[`MAX_TUNE_BLOCK`], `min <= max`.
pub fn block_sizes(min: usize, max: usize) -> Result<Vec<usize>> {
    for (flag, size) in [("--min-block", min), ("--max-block", max)] {
        ensure!(
            size.is_power_of_two() && (MIN_TUNE_BLOCK..=MAX_TUNE_BLOCK).contains(&size),
            "{flag} {size}: give a power of two from {MIN_TUNE_BLOCK} to {MAX_TUNE_BLOCK}"
        );
    }
    ensure!(min <= max, "--min-block {min} is above --max-block {max}");
    Ok(std::iter::successors(Some(min), |b| Some(b * 2))
        .take_while(|&b| b <= max)
        .collect())
}

/// The files' bytes packed at `block_size`, as `pir release build` does: the database and
/// each file's blocks (first, count).
fn pack(
    files: &[Vec<u8>],
    block_size: usize,
    size_classes: bool,
) -> Result<(Database, Vec<(usize, usize)>)> {
    let mut spans = Vec::with_capacity(files.len());
    let mut next = 0u64;
    for file in files {
        let count =
            pir_updates::release::padded_block_count(file.len() as u64, block_size, size_classes);
        spans.push((next as usize, count as usize));
        next += count;
    }
    let mut database = Database::zeroed(DbShape::new(next, block_size)?);
    let bytes = database
        .try_bytes_mut()
        .context("a fresh database is writable")?;
    for (file, &(first, _)) in files.iter().zip(&spans) {
        let at = first * block_size;
        bytes[at..at + file.len()].copy_from_slice(file);
    }
    Ok((database, spans))
}

/// What one private fetch of one file cost.
#[derive(Default)]
struct Cost {
    client: Duration,
    mirrors: Duration,
    query_bytes: u64,
    answer_bytes: u64,
}

/// Fetches blocks `first..first + count` of `engine`'s database privately and checks them;
/// returns what it cost.
fn fetch(engine: &Engine, first: usize, count: usize, rng: &mut ChaCha20Rng) -> Result<Cost> {
    let shape = engine.database().shape();
    // As `pir fetch`: the mode depends only on the block count.
    let mode = if count > 1 {
        AnswerMode::PerChunk
    } else {
        AnswerMode::Single
    };
    let chunks = SERVERS.min(shape.block_count());
    let raid = RaidPir::new(shape, SERVERS, REDUNDANCY, chunks, mode)?;
    let indices: Vec<usize> = (first..first + count).collect();
    let rounds = pir_client::retrieve::plan_rounds(&indices, raid.max_blocks_per_query(), |i| {
        raid.chunk_of(i)
    });
    let mut cost = Cost::default();
    for round in rounds {
        let started = Instant::now();
        let (queries, state) = raid.query(&round, rng)?;
        let encoded: Vec<Vec<u8>> = queries.iter().map(|q| raid.encode_query(q)).collect();
        cost.client += started.elapsed();
        let mut answers = Vec::with_capacity(SERVERS);
        let mut slowest = Duration::ZERO;
        for body in &encoded {
            let started = Instant::now();
            let prepared = engine.prepare(SchemeId::RaidPir, body)?;
            let answer = engine.answer_batch(&[prepared]).remove(0);
            slowest = slowest.max(started.elapsed());
            cost.query_bytes += body.len() as u64;
            cost.answer_bytes += answer.len() as u64;
            answers.push(answer);
        }
        cost.mirrors += slowest;
        let started = Instant::now();
        let decoded = queries
            .iter()
            .zip(&answers)
            .map(|(q, a)| raid.decode_answer(q, a))
            .collect::<Result<Vec<_>, _>>()?;
        let blocks = raid.decode(&state, &decoded)?;
        cost.client += started.elapsed();
        for (index, block) in round.iter().zip(&blocks) {
            ensure!(
                block.as_slice() == engine.database().block(*index),
                "block {index} decoded wrong at {} bytes per block",
                shape.block_size()
            );
        }
    }
    Ok(cost)
}

/// Measures `files` packed at `block_size`.
pub fn measure(files: &[Vec<u8>], block_size: usize, options: &TuneOptions) -> Result<TuneRow> {
    let (database, spans) = pack(files, block_size, options.size_classes)?;
    let shape = database.shape();
    let useful_per_pass: u64 = files.iter().map(|f| f.len() as u64).sum();
    let engine = Engine::new(database, EngineOptions::default(), &|_, _| {});
    // Seeded: the blocks asked do not change what is measured, only the queries' bits.
    let mut rng = ChaCha20Rng::seed_from_u64(block_size as u64);
    let started = Instant::now();
    let mut total = Cost::default();
    let (mut passes, mut fetches) = (0u32, 0u64);
    loop {
        for &(first, count) in &spans {
            let cost = fetch(&engine, first, count, &mut rng)?;
            total.client += cost.client;
            total.mirrors += cost.mirrors;
            total.query_bytes += cost.query_bytes;
            total.answer_bytes += cost.answer_bytes;
            fetches += 1;
        }
        passes += 1;
        let done = match options.rounds {
            Some(rounds) => passes >= rounds,
            None => started.elapsed().as_secs_f64() >= options.seconds,
        };
        if done {
            break;
        }
    }
    let useful = useful_per_pass * u64::from(passes);
    let seconds = (total.client + total.mirrors).as_secs_f64();
    Ok(TuneRow {
        block_size,
        blocks: shape.block_count() as u64,
        padding_bytes: shape.total_bytes() as u64 - useful_per_pass,
        fetches,
        useful_bytes: useful,
        query_bytes: total.query_bytes,
        answer_bytes: total.answer_bytes,
        client_seconds: total.client.as_secs_f64(),
        mirror_seconds: total.mirrors.as_secs_f64(),
        // A fetch too fast for the clock still took some time: never divide by zero.
        goodput: useful as f64 / seconds.max(1e-9),
        efficiency: useful as f64 / (total.query_bytes + total.answer_bytes).max(1) as f64,
    })
}

/// The block size to build with: the largest goodput among the rows whose efficiency is
/// within [`EFFICIENCY_SLACK`] of the best (the smaller size on a tie). `None` without rows.
pub fn recommend(rows: &[TuneRow]) -> Option<usize> {
    let best = rows.iter().map(|r| r.efficiency).fold(0.0, f64::max);
    rows.iter()
        .filter(|r| r.efficiency >= best * (1.0 - EFFICIENCY_SLACK))
        .fold(None::<&TuneRow>, |pick, r| match pick {
            Some(p) if p.goodput >= r.goodput => Some(p),
            _ => Some(r),
        })
        .map(|r| r.block_size)
}

/// The files of the release in `dir` (built by `pir release build`), in manifest order.
pub fn release_files(dir: &Path) -> Result<Vec<Vec<u8>>> {
    let release = pir_updates::release::open(dir, None, false)
        .with_context(|| format!("{} is not a release from pir release build", dir.display()))?;
    Ok(release
        .manifest
        .files
        .iter()
        .map(|entry| release.file_bytes(entry).to_vec())
        .collect())
}

/// Every size of `options`, measured; `progress` is told each row as it is done.
pub fn measure_all(
    files: &[Vec<u8>],
    options: &TuneOptions,
    progress: &mut dyn FnMut(&TuneRow),
) -> Result<Vec<TuneRow>> {
    if files.is_empty() {
        bail!("the release has no files");
    }
    let mut rows = Vec::new();
    for block_size in block_sizes(options.min_block, options.max_block)? {
        let row = measure(files, block_size, options)?;
        progress(&row);
        rows.push(row);
    }
    Ok(rows)
}

const COLUMNS: [Column; 7] = [
    number("block", 8),
    number("blocks", 8),
    number("padding", 10),
    number("fetches", 8),
    number("goodput MB/s", 13),
    number("efficiency", 11),
    number("moved/useful", 13),
];

/// The table's header line.
pub fn table_header() -> String {
    header(&COLUMNS)
}

/// One row of the table.
pub fn table_line(row: &TuneRow) -> String {
    line(
        &COLUMNS,
        &[
            human(row.block_size as u64),
            row.blocks.to_string(),
            human(row.padding_bytes),
            row.fetches.to_string(),
            format!("{:.2}", row.goodput / 1e6),
            format!("{:.1}%", row.efficiency * 100.0),
            format!("{:.2}", 1.0 / row.efficiency),
        ],
    )
}

/// `4K`, `2M`: sizes in powers of two.
fn human(bytes: u64) -> String {
    match bytes {
        b if b >= 1 << 20 && b % (1 << 20) == 0 => format!("{}M", b >> 20),
        b if b >= 1 << 10 && b % (1 << 10) == 0 => format!("{}K", b >> 10),
        b => b.to_string(),
    }
}

/// The chart: goodput (MB/s) and efficiency (%) against the block size, log x.
pub fn plot(path: &Path, rows: &[TuneRow]) -> Result<()> {
    let series = [
        Series {
            label: "goodput (MB/s)".into(),
            points: rows
                .iter()
                .map(|r| (r.block_size as f64, r.goodput / 1e6))
                .collect(),
        },
        Series {
            label: "data efficiency (%)".into(),
            points: rows
                .iter()
                .map(|r| (r.block_size as f64, r.efficiency * 100.0))
                .collect(),
        },
    ];
    let chart = Chart {
        title: "pir release tune: private fetch of every file (RAID-PIR, 3 mirrors)",
        x_label: "block size (bytes)",
        y_label: "goodput (MB/s) / data efficiency (%)",
        log_x: true,
        series: &series,
    };
    line_chart_png(path, &chart)?;
    Ok(())
}

/// `pir release tune`: measure, print, plot, recommend.
pub fn run(args: &ReleaseTuneArgs) -> Result<()> {
    let options = TuneOptions {
        min_block: args.min_block,
        max_block: args.max_block,
        rounds: args.rounds,
        seconds: args.seconds,
        size_classes: args.size_classes,
    };
    let files = release_files(&args.dir)?;
    if !args.json {
        println!("{}", table_header());
    }
    let json = args.json;
    let rows = measure_all(&files, &options, &mut |row| {
        if !json {
            println!("{}", table_line(row));
        }
    })?;
    plot(&args.plot, &rows)?;
    let pick = recommend(&rows).context("no block size was measured")?;
    let flag = format!("--block-size {pick}");
    if args.json {
        let out = serde_json::json!({
            "rows": rows,
            "recommended_block_size": pick,
            "flag": flag,
            "rule": format!(
                "the largest goodput among the sizes within {:.0}% of the best data efficiency",
                EFFICIENCY_SLACK * 100.0
            ),
            "chart": args.plot,
        });
        println!("{out}");
    } else {
        println!(
            "chart: {}\nrecommended: pir release build ... {flag}{}\n(the largest goodput \
             among the sizes within {:.0}% of the best data efficiency)",
            args.plot.display(),
            if args.size_classes {
                " --size-classes"
            } else {
                ""
            },
            EFFICIENCY_SLACK * 100.0
        );
    }
    Ok(())
}

#[cfg(test)]
#[path = "tune_tests.rs"]
mod tests;
