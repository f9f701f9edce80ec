//! Single-server rows of `pir bench`: SimplePIR and DoublePIR answer time next to a plain
//! read of the same database bytes, measured in the same run with the same threads.
//!
//! The hint is computed once per shape (reported as `setup_s`, not timed as server work);
//! YPIR's one-time keys are uploaded by the untimed warm-up query, so the timed queries are
//! later queries (keys cached: `key_bytes` 0); `first_query_bytes` and `later_query_bytes`
//! give both sizes. Each timed run answers `K` fresh queries in one pass (`answer_batch`; `K = 1` is what the
//! server does for a lone client). GB/s is `K` times the database bytes over the median
//! answer time: the effective throughput of cross-client batching.
//!
//! This module uses only external crates and the table layout of [`crate::table`].

use std::time::{Duration, Instant};

use pir_lattice::{build_server, open_client, Params, Scheme, SingleClient, SingleServer};
use rand::RngCore;
use serde::Serialize;

use crate::table;

/// A lattice database shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LatticeShape {
    /// Its name in the output.
    pub name: String,
    /// Number of records.
    pub records: u64,
    /// Bits per record.
    pub record_bits: u32,
}

/// `1GiB-1bit` (2^33 one-bit records), `8GiB-1bit` (2^36; the server then holds about
/// 17 GB), `1GiB-32B` (2^25 records of 32 bytes), `1GiB-32KiB` (2^15 records of 32 KiB,
/// YPIR+SP's shape), or `RECORDSxBYTES` (for example `65536x32`).
pub fn lattice_shape_named(name: &str) -> Option<LatticeShape> {
    let (records, record_bits) = match name.to_ascii_lowercase().as_str() {
        "1gib-1bit" => (1u64 << 33, 1),
        "8gib-1bit" => (1u64 << 36, 1),
        "1gib-32b" => (1u64 << 25, 256),
        "1gib-32kib" => (1u64 << 15, 32 * 1024 * 8),
        other => {
            let (n, b) = other.split_once('x')?;
            let bytes: u32 = b.trim_end_matches('b').parse().ok()?;
            (n.parse().ok()?, bytes.checked_mul(8)?)
        }
    };
    Some(LatticeShape {
        name: name.to_string(),
        records,
        record_bits,
    })
}

/// One measured lattice row (the XOR rows' field names, plus sizes).
#[derive(Debug, Clone, Serialize)]
pub struct LatticeRow {
    /// Shape name.
    pub shape: String,
    /// `simplepir` or `doublepir`.
    pub scheme: String,
    /// `answer-xK`: `K` queries per pass.
    pub mode: String,
    /// Threads used by the answer and the read alike.
    pub threads: usize,
    /// Database bytes.
    pub database_bytes: u64,
    /// Median answer time, ms.
    pub median_ms: f64,
    /// Database bytes times `K` per second of answer time.
    pub gb_per_s: f64,
    /// A plain read of the same bytes with the same threads, same run.
    pub memory_read_gb_per_s: f64,
    /// `gb_per_s / memory_read_gb_per_s`.
    pub ratio: f64,
    /// Bytes of the hint message a client downloads once.
    pub hint_bytes: usize,
    /// Bytes the server keeps in memory (the packed matrix and what the scheme needs); the
    /// answer reads the packed matrix, slightly larger than the records.
    pub server_memory_bytes: usize,
    /// Bytes of one timed query message: a later query, once the server holds the client's
    /// one-time keys (the same as `first_query_bytes` for schemes without keys).
    pub query_bytes: usize,
    /// Bytes of key material each timed query carries: 0, the keys are cached (YPIR and
    /// YPIR+SP upload them once per server; SimplePIR and DoublePIR have none).
    pub key_bytes: usize,
    /// Bytes of a client's first query to a server: the query and its one-time keys.
    pub first_query_bytes: usize,
    /// Bytes of each later query (keys named by key id).
    pub later_query_bytes: usize,
    /// Bytes of one answer message.
    pub answer_bytes: usize,
    /// Seconds to pack the database and compute the hint.
    pub setup_s: f64,
    /// Runs behind the median.
    pub runs: usize,
}

fn median_ms(mut samples: Vec<Duration>) -> f64 {
    samples.sort_unstable();
    match samples.len() {
        0 => f64::NAN,
        n if n % 2 == 1 => samples[n / 2].as_secs_f64() * 1e3,
        n => (samples[n / 2 - 1] + samples[n / 2]).as_secs_f64() * 1e3 / 2.0,
    }
}

/// The error of a failed row.
pub type BenchError = pir_core::Error;

/// Measures `scheme` on `shape` with each thread count and each batch size `K` (queries
/// per pass, 1 to [`pir_kernels::matvec::MAX_BATCH`] share one pass), calling `report` per
/// row.
pub fn run_lattice(
    shape: &LatticeShape,
    scheme: Scheme,
    threads: &[usize],
    batches: &[usize],
    runs: usize,
    report: &mut dyn FnMut(&LatticeRow),
) -> Result<Vec<LatticeRow>, BenchError> {
    let params = Params::new(scheme, shape.records, shape.record_bits)?;
    let bytes = params.database_bytes();
    let mut records = vec![0u8; usize::try_from(bytes).unwrap_or(usize::MAX)];
    {
        use rayon::prelude::*;
        records
            .par_chunks_mut(1 << 20)
            .for_each(|part| rand::rng().fill_bytes(part));
    }
    let most = threads.iter().copied().max().unwrap_or(1).max(1);
    let setup_pool = pool(most)?;
    let started = Instant::now();
    let server = setup_pool.install(|| -> Result<Server, BenchError> {
        let (server, hint) = build_server(
            params,
            &records,
            [[1; 16], [3; 16]],
            [2; 32],
            &mut |_, _| {},
        )?;
        Ok(Server {
            client: open_client(params.scheme, &hint)?,
            hint_bytes: hint.len(),
            server,
        })
    })?;
    let setup_s = started.elapsed().as_secs_f64();
    let mut rows = Vec::new();
    let mut rng = rand::rng();
    for &t in threads {
        let pool = pool(t.max(1))?;
        for &k in batches {
            let k = k.max(1);
            let (mut answers, mut reads) = (Vec::new(), Vec::new());
            let (mut query_bytes, mut answer_bytes) = (0, 0);
            // One untimed warm-up of each, then alternate.
            for run in 0..=runs.max(1) {
                let queries = (0..k)
                    .map(|_| server.query(rng.next_u64() % params.records, &mut rng))
                    .collect::<Result<Vec<_>, _>>()?;
                query_bytes = queries[0].len();
                let read = pool.install(|| {
                    let t = Instant::now();
                    std::hint::black_box(pir_kernels::memory::read_parallel(&records));
                    t.elapsed()
                });
                let refs: Vec<&[u8]> = queries.iter().map(Vec::as_slice).collect();
                let (answered, elapsed) = pool.install(|| {
                    let t = Instant::now();
                    let answered = server.answer_batch(&refs);
                    (answered, t.elapsed())
                });
                // a failed answer fails the row
                let answered = answered.into_iter().collect::<Result<Vec<_>, _>>()?;
                answer_bytes = answered.first().map_or(0, Vec::len);
                if run > 0 {
                    reads.push(read);
                    answers.push(elapsed);
                }
            }
            let median = median_ms(answers);
            let read_ms = median_ms(reads);
            let gb_per_s = (k as u64 * bytes) as f64 / (median * 1e6);
            let memory_read_gb_per_s = bytes as f64 / (read_ms * 1e6);
            let row = LatticeRow {
                shape: shape.name.clone(),
                scheme: params.scheme.id().name().into(),
                mode: format!("answer-x{k}"),
                threads: t,
                database_bytes: bytes,
                median_ms: median,
                gb_per_s,
                memory_read_gb_per_s,
                ratio: gb_per_s / memory_read_gb_per_s,
                hint_bytes: server.hint_bytes(),
                server_memory_bytes: server.memory_bytes(),
                query_bytes,
                key_bytes: 0,
                first_query_bytes: server.first_query_bytes(params),
                later_query_bytes: server.later_query_bytes(params),
                answer_bytes,
                setup_s,
                runs: runs.max(1),
            };
            report(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// A single-server scheme's server and a client of it, through the scheme-independent traits.
struct Server {
    server: Box<dyn SingleServer>,
    client: Box<dyn SingleClient>,
    hint_bytes: usize,
}

impl Server {
    /// One query (YPIR: the first, untimed warm-up uploads the keys; the later ones, timed,
    /// name them by key id).
    fn query(&self, index: u64, rng: &mut rand::rngs::ThreadRng) -> Result<Vec<u8>, BenchError> {
        Ok(self.client.query(index, rng)?.1)
    }

    /// Bytes of a first query message: a later one and the one-time keys.
    fn first_query_bytes(&self, params: Params) -> usize {
        self.later_query_bytes(params) + self.client.key_bytes()
    }

    /// Bytes of a later query message (deterministic: from the shape alone).
    fn later_query_bytes(&self, params: Params) -> usize {
        pir_core::wire::HEADER_LEN + pir_lattice::wire::later_query_body_bytes(&params)
    }

    fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, BenchError>> {
        self.server.answer_batch(queries)
    }

    fn memory_bytes(&self) -> usize {
        self.server.memory_bytes()
    }

    fn hint_bytes(&self) -> usize {
        self.hint_bytes
    }
}

fn pool(threads: usize) -> Result<rayon::ThreadPool, BenchError> {
    rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .map_err(|e| pir_core::Error::InvalidParameter(format!("cannot start threads: {e}")))
}

/// The columns of the text table.
fn columns() -> Vec<table::Column> {
    table::timing_columns(
        [12, 9, 10, 3, 10, 8, 10, 6],
        &[
            table::number("hint bytes", 12),
            table::number("query B", 10),
            table::number("1st query B", 11),
            table::number("answer B", 10),
        ],
    )
}

/// The header of the text table.
pub fn lattice_table_header() -> String {
    table::header(&columns())
}

/// One row of the text table.
pub fn lattice_table_line(row: &LatticeRow) -> String {
    let mut cells = table::timing_cells(
        [&row.shape, &row.scheme, &row.mode],
        row.threads,
        [row.median_ms, row.gb_per_s, row.memory_read_gb_per_s],
        (row.ratio, 3),
    );
    cells.extend(
        [
            row.hint_bytes,
            row.query_bytes,
            row.first_query_bytes,
            row.answer_bytes,
        ]
        .map(|b| b.to_string()),
    );
    table::line(&columns(), &cells)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// First-query and later-query bytes of every lattice scheme (from the shape alone, so
    /// exact at 1 GiB without building it): a row's `first_query_bytes - later_query_bytes`
    /// is the one-time keys, 0 for SimplePIR and DoublePIR.
    #[test]
    fn first_and_later_query_bytes_at_1_gib() {
        let header = pir_core::wire::HEADER_LEN;
        let keys = 7 * 36 * 2048;
        for (shape, scheme, has_keys) in [
            ("1GiB-1bit", Scheme::SimplePir, false),
            ("1GiB-1bit", Scheme::DoublePir, false),
            ("1GiB-1bit", Scheme::Ypir, true),
            ("1GiB-32KiB", Scheme::YpirSp, true),
            ("1GiB-32B", Scheme::Ypir, true),
        ] {
            let s = lattice_shape_named(shape).unwrap();
            let params = Params::new(scheme, s.records, s.record_bits).unwrap();
            let first = header + pir_lattice::wire::query_body_bytes(&params);
            let later = header + pir_lattice::wire::later_query_body_bytes(&params);
            let answer = header + pir_lattice::wire::answer_body_bytes(&params);
            println!(
                "{shape} {}: first {first} later {later} answer {answer}",
                params.scheme.id().name()
            );
            assert_eq!(first - later, if has_keys { keys } else { 0 }, "{shape}");
        }
    }
}
