//! The driver behind `pir breach bench`, the scale benchmark of issue 4. Generates
//! `--entries` random SHA-1 hashes deterministically from `--seed` (nothing is committed or
//! downloaded), builds the breach database into a temporary directory ([`build`]); the caller
//! starts the two servers on it ([`command::run`]: on 127.0.0.1 in its own process, with the
//! code of `pir breach serve`; tests: in-process services) and opens a session to them;
//! [`measure`] then times full private checks (seed requests, QDP queries, decoding, lookup)
//! for hashes in the corpus and hashes not in it.
//!
//! Reported: build time, peak memory, median end-to-end check time (target: at most 1 s),
//! server online time of a QDP query (handled in-process, no network), bytes per check, and
//! memory per server (the memory-mapped database, the QDP queue, and the four-Russians table
//! of the flip chunk with `--four-russians`).

pub mod command;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{bail, ensure, Context, Result};
use pir_breach::corpus::{CorpusFormat, CorpusStats, Sha1Entry};
use pir_breach::database::{build_sha1, Sha1Layout};
use pir_breach::header::DbHeader;
use pir_breach::{BreachService, BreachSession};
use pir_client::Transport;
use pir_core::{MultiServerScheme, SchemeId};
use pir_keys::PublicKey;
use pir_service::reply::{self, Expect};
use rayon::prelude::*;

/// The target for one end-to-end check.
const TARGET: Duration = Duration::from_secs(1);
/// Entries generated per PRG key (one parallel work item).
const GENERATE_CHUNK: usize = 1 << 20;
/// Longest wait for the QDP queues to fill before the timed checks.
const QUEUE_WAIT: Duration = Duration::from_secs(600);

/// What a benchmark run is asked for.
#[derive(Debug, Clone)]
pub struct Options {
    /// Random SHA-1 hashes in the corpus (at least 1).
    pub entries: u64,
    /// The seed they are generated from.
    pub seed: u64,
    /// Timed checks of hashes in the corpus, each with one of a hash not in it (at least 1).
    pub checks: usize,
    /// Precomputed QDP entries each server queues.
    pub qdp_queue: usize,
    /// Where the temporary directory goes (default: the system's).
    pub dir: Option<PathBuf>,
}

/// The database [`build`] made, in a temporary directory removed on drop.
#[derive(Debug)]
pub struct Built {
    dir: tempfile::TempDir,
    db_path: PathBuf,
    header: DbHeader,
    hits: Vec<Sha1Entry>,
}

impl Built {
    /// The database file.
    pub fn db_path(&self) -> &Path {
        &self.db_path
    }

    /// The QDP seed-state file of server `server`.
    pub fn seed_state(&self, server: usize) -> PathBuf {
        self.dir.path().join(format!("seeds-{server}"))
    }

    /// The database's header.
    pub fn header(&self) -> &DbHeader {
        &self.header
    }

    /// The corpus entries the timed checks look up.
    pub fn hits(&self) -> &[Sha1Entry] {
        &self.hits
    }
}

/// A breach server of the benchmark, started by the caller on [`Built::db_path`].
pub trait BenchServer {
    /// The service of its default database (its QDP queue, metrics, and in-process requests).
    fn service(&self) -> Arc<BreachService>;
    /// The key it signs with.
    fn public_key(&self) -> PublicKey;
}

/// Generates the corpus and builds its database; says what it did through `out`.
pub fn build(options: &Options, out: &mut dyn FnMut(String)) -> Result<Built> {
    ensure!(options.entries >= 1, "--entries must be at least 1");
    ensure!(options.checks >= 1, "--checks must be at least 1");
    let dir = tempfile::Builder::new()
        .prefix("pir-breach-bench-")
        .tempdir_in(options.dir.as_deref().unwrap_or(&std::env::temp_dir()))
        .context("creating the benchmark directory")?;
    let db_path = dir.path().join("bench.db");

    let started = Instant::now();
    let entries = generate(options.entries, options.seed);
    let generate_s = started.elapsed().as_secs_f64();
    let hits: Vec<Sha1Entry> = (0..options.checks)
        .map(|i| entries[i * entries.len() / options.checks])
        .collect();
    let started = Instant::now();
    let stats = CorpusStats {
        lines: options.entries,
        entry_lines: options.entries,
        ..CorpusStats::default()
    };
    let (db, reason) = build_sha1(CorpusFormat::Hibp, &entries, &Sha1Layout::default(), &stats)?;
    drop(entries);
    let build_s = started.elapsed().as_secs_f64();
    db.write(&db_path)?;
    let header = db.header().clone();
    drop(db);
    out(format!(
        "{} random SHA-1 hashes (seed {}) generated and sorted in {generate_s:.1} s; database \
         built in {build_s:.1} s, peak memory so far {}",
        header.stats.entries,
        options.seed,
        peak_memory()
    ));
    out(reason.to_string());
    let file_bytes = std::fs::metadata(&db_path)?.len();
    out(format!(
        "{} buckets of {} bytes ({:.2} GB file), compression ratio {:.3}",
        header.bucket_count(),
        header.block_size,
        file_bytes as f64 / 1e9,
        header.compression_ratio()
    ));
    Ok(Built {
        dir,
        db_path,
        header,
        hits,
    })
}

/// Waits (at most [`QUEUE_WAIT`]) for the servers' QDP queues to fill enough for the timed
/// checks, then times them over `session` and in-process; says what it measured through `out`.
pub async fn measure<S: BenchServer, T: Transport>(
    options: &Options,
    built: &Built,
    servers: &[S],
    session: &BreachSession<T>,
    out: &mut dyn FnMut(String),
) -> Result<()> {
    let (header, hits) = (&built.header, &built.hits);
    let want = options.qdp_queue.min(2 * options.checks + 2);
    let started = Instant::now();
    while servers
        .iter()
        .any(|s| s.service().backend().qdp().queue_len() < want)
        && started.elapsed() < QUEUE_WAIT
    {
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let queued: Vec<usize> = servers
        .iter()
        .map(|s| s.service().backend().qdp().queue_len())
        .collect();
    out(format!(
        "QDP queues hold {queued:?} precomputed entries after {:.1} s (precomputing one entry \
         takes about {:.2} s per server on this machine)",
        started.elapsed().as_secs_f64(),
        started.elapsed().as_secs_f64() / want.max(1) as f64
    ));

    // Timed end-to-end checks: hits (with their counts) and misses.
    let before = traffic(servers);
    let mut times = Vec::new();
    let mut miss_seed = options.seed.wrapping_add(1) | 1 << 63;
    for (i, hit) in hits.iter().enumerate() {
        let miss = generate_one(&mut miss_seed);
        for (hash, expect) in [(hit.hash, Some(hit.count)), (miss, None)] {
            let t = Instant::now();
            let (bucket, value) = header.sha1_location(&hash)?;
            let block = session.retrieve(bucket).await?;
            let found = header.decode_bucket(&block)?.count_of(&value);
            times.push(t.elapsed());
            if found != expect {
                bail!("check {i}: expected {expect:?}, the servers' answer gave {found:?}");
            }
        }
    }
    let after = traffic(servers);
    let checks = times.len();
    let check_ms = crate::median_ms(times.clone());
    let max_ms = times.iter().max().map_or(0.0, |d| d.as_secs_f64() * 1e3);
    let online_ms = server_online_ms(session, servers, options.checks)?;
    out(format!(
        "end-to-end check (127.0.0.1, TLS, seed round trip + QDP query, decode, lookup): median \
         {check_ms:.1} ms, max {max_ms:.1} ms over {checks} checks ({} hits found with their \
         counts, {} misses not found); target <= {} ms: {}",
        hits.len(),
        hits.len(),
        TARGET.as_millis(),
        if check_ms <= TARGET.as_secs_f64() * 1e3 {
            "met"
        } else {
            "NOT met"
        }
    ));
    out(format!(
        "server online time of a QDP query (server 0, request handled in-process: take the \
         seed, XOR the flip chunk's rows into the precomputed entry, sign): median {online_ms:.1} ms"
    ));
    out(format!(
        "bytes per check (both servers, message envelopes): client sent {:.0}, received {:.0}",
        (after.0 - before.0) as f64 / checks as f64,
        (after.1 - before.1) as f64 / checks as f64
    ));
    out(memory_line(options, header, &servers[0].service()));
    Ok(())
}

/// What one server holds, and this process's memory.
fn memory_line(options: &Options, header: &DbHeader, service: &BreachService) -> String {
    let database_bytes = header.bucket_count() * header.block_size;
    let queue_bytes = options.qdp_queue * header.block_size;
    let table = match service.backend().qdp().flip_table_bytes() {
        0 => String::new(),
        bytes => format!(
            " + four-Russians table of its flip chunk {:.2} GB",
            bytes as f64 / 1e9
        ),
    };
    format!(
        "memory per server: database {:.2} GB (memory-mapped file) + QDP queue {} entries x {} \
         bytes = {:.1} MB{table}; this process (both servers, after the build): rss {}, peak {}",
        database_bytes as f64 / 1e9,
        options.qdp_queue,
        header.block_size,
        queue_bytes as f64 / 1e6,
        current_memory(),
        peak_memory()
    )
}

/// `count` distinct random SHA-1 entries, sorted, from `seed` (AES-128-CTR, one key per
/// chunk of [`GENERATE_CHUNK`] entries; counts 1 to 1000).
pub fn generate(count: u64, seed: u64) -> Vec<Sha1Entry> {
    let count = usize::try_from(count).unwrap_or(usize::MAX);
    let mut entries = vec![
        Sha1Entry {
            hash: [0; 20],
            count: 1
        };
        count
    ];
    entries
        .par_chunks_mut(GENERATE_CHUNK)
        .enumerate()
        .for_each(|(chunk, part)| {
            let mut key = [0u8; 16];
            key[..8].copy_from_slice(&seed.to_le_bytes());
            key[8..].copy_from_slice(&(chunk as u64).to_le_bytes());
            let mut bytes = vec![0u8; part.len() * 24];
            pir_xor::prg::expand(&key, &mut bytes);
            for (entry, raw) in part.iter_mut().zip(bytes.chunks_exact(24)) {
                entry.hash.copy_from_slice(&raw[..20]);
                let tail = u32::from_le_bytes([raw[20], raw[21], raw[22], raw[23]]);
                entry.count = 1 + u64::from(tail % 1000);
            }
        });
    entries.par_sort_unstable_by(|a, b| a.hash.cmp(&b.hash));
    entries.dedup_by(|a, b| a.hash == b.hash);
    entries
}

/// One more random hash (for misses; 2^-160-ish chance of hitting the corpus).
pub fn generate_one(state: &mut u64) -> [u8; 20] {
    let mut key = [0xa5u8; 16];
    key[..8].copy_from_slice(&state.to_le_bytes());
    *state = state.wrapping_add(1);
    let mut hash = [0u8; 20];
    pir_xor::prg::expand(&key, &mut hash);
    hash
}

/// Median time server 0 takes to handle a QDP query request, called directly.
fn server_online_ms<S: BenchServer, T: Transport>(
    session: &BreachSession<T>,
    servers: &[S],
    runs: usize,
) -> Result<f64> {
    let qdp = session.qdp();
    let database_id = pir_breach::service::database_id(session.header());
    let request = |message: &[u8]| reply::request(SchemeId::Qdp, &database_id, &[message.to_vec()]);
    let payload = |server: &S, request: &[u8]| -> Result<Vec<u8>> {
        let answer = server.service().handle(request);
        ensure!(answer.status == 200, "a benchmark server refused a request");
        let expect = Expect {
            scheme: SchemeId::Qdp,
            database_id: &database_id,
            key: &server.public_key(),
            count: 1,
            max_answer: answer.body.len(),
        };
        Ok(reply::open(&answer.body, request, expect)?[0].to_vec())
    };
    let mut times = Vec::new();
    for run in 0..runs {
        let mut grants = Vec::new();
        for (s, server) in servers.iter().enumerate() {
            let body = payload(server, &request(&qdp.seed_request(s)?))?;
            grants.push(qdp.read_seed_response(s, &body)?);
        }
        let index = run * 7919 % session_blocks(session);
        let (queries, _) = qdp.query(&[index], &grants)?;
        let query = request(&qdp.encode_query(&queries[0]));
        let t = Instant::now();
        payload(&servers[0], &query)?;
        times.push(t.elapsed());
    }
    Ok(crate::median_ms(times))
}

fn session_blocks<T: Transport>(session: &BreachSession<T>) -> usize {
    session.qdp().scheme().shape().block_count()
}

/// Request and reply bytes both servers have counted so far.
fn traffic<S: BenchServer>(servers: &[S]) -> (u64, u64) {
    let counter = |text: &str, name: &str| -> u64 {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or(0)
    };
    servers.iter().fold((0, 0), |(sent, received), server| {
        let text = server.service().metrics().render();
        (
            sent + counter(&text, "pir_bytes_received_total "),
            received + counter(&text, "pir_bytes_sent_total "),
        )
    })
}

/// A line of /proc/self/status (Linux), or "unknown".
fn proc_status(field: &str) -> String {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|text| {
            text.lines()
                .find_map(|l| l.strip_prefix(field))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into())
}

fn peak_memory() -> String {
    proc_status("VmHWM:")
}

fn current_memory() -> String {
    proc_status("VmRSS:")
}
