//! Times DoublePIR's answer at full size without the offline work: the server takes a random
//! `H1` and a random hint as if saved (its answers then do not decode, but the server does the
//! same work), so a 1 GiB shape starts in seconds instead of minutes, for profiling:
//! `cargo run --release -p pir-lattice --example double_fake -- RECORDS BITS RUNS [K [ROWS]]`
//! (`8589934592 1 20` is the authors' 1 GiB of 1-bit records; ROWS, for records of one
//! entry, lays the same entries out in that many rows instead of [`Params::new`]'s).
//!
//! With `DOUBLE_FAKE_PASSES=1` it times the answer's three passes one by one instead, each
//! against a plain read of the same bytes (alternated, medians): the database times `c1`,
//! `Decomp(H1ᵀ)` times one `c2`, and `Y A2` (random matrices of the server's shapes).

use std::time::Instant;

use pir_lattice::params::LWE_N;
use pir_lattice::wire::{self, HintHeader};
use pir_lattice::{BuildInput, DoublePirClient, DoublePirServer, Params, Saved, Scheme};
use rand::{RngCore, SeedableRng};

fn main() -> Result<(), pir_core::Error> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (records, bits, runs, k, rows) = match args[..] {
        [r, b, n] => (r, b as u32, n as usize, 1, 0),
        [r, b, n, k] => (r, b as u32, n as usize, k as usize, 0),
        [r, b, n, k, rows] => (r, b as u32, n as usize, k as usize, rows),
        _ => (1 << 33, 1, 20, 1, 0),
    };
    let mut params = Params::new(Scheme::DoublePir, records, bits)?;
    if rows > 0 {
        // Another layout of the same entries (for records of at most one entry).
        let per_entry = u64::from(pir_lattice::params::entry_bits(params.p) / bits).max(1);
        params.rows = rows as u32;
        params.columns = records.div_ceil(per_entry).div_ceil(rows) as u32;
        params.validate()?;
    }
    println!(
        "rows {} columns {} p {} kappa {} entries/record {}",
        params.rows,
        params.columns,
        params.p,
        params.digits(),
        params.entries_per_record()
    );
    if std::env::var_os("DOUBLE_FAKE_PASSES").is_some() {
        time_passes(&params, runs);
        return Ok(());
    }
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    let mut data = vec![0u8; params.database_bytes() as usize];
    rng.fill_bytes(&mut data);
    let header = HintHeader {
        params,
        seed: [1; 16],
        seed2: Some([3; 16]),
        version: [2; 32],
    };
    let mut words = |n: usize| (0..n).map(|_| rng.next_u32()).collect::<Vec<u32>>();
    let kappa_n = params.digits() * LWE_N;
    let saved = Saved {
        hint: wire::encode_hint(&header, &words(kappa_n * LWE_N)),
        extra: words(params.rows as usize * LWE_N),
    };
    let t = Instant::now();
    let (server, saved) = DoublePirServer::build(BuildInput {
        params,
        records: &data,
        seeds: [[1; 16], [3; 16]],
        version: [2; 32],
        saved: Some(saved),
        progress: &mut |_, _| {},
    })?;
    println!("setup {:.1} s", t.elapsed().as_secs_f64());
    drop(data);
    let client = DoublePirClient::new(&saved.hint)?;
    let queries: Vec<Vec<u8>> = (0..k)
        .map(|_| {
            client
                .query(rng.next_u64() % records, &mut rng)
                .map(|q| q.1)
        })
        .collect::<Result<_, _>>()?;
    let refs: Vec<&[u8]> = queries.iter().map(Vec::as_slice).collect();
    // A plain read of as many bytes as the server keeps (database, `Decomp(H1ᵀ)`, `A2`;
    // random, so every page is backed), alternated with the answers: the floor under them.
    let mut plain = vec![0u8; server.memory_bytes()];
    rng.fill_bytes(&mut plain);
    // With DOUBLE_FAKE_HUGE=1, the same bytes again in transparent huge pages (where the
    // kernel grants them), read too.
    let mut huge = pir_kernels::memory::HugeBuffer::zeroed(
        if std::env::var_os("DOUBLE_FAKE_HUGE").is_some() {
            plain.len()
        } else {
            0
        },
    );
    if !huge.is_empty() {
        huge.copy_from_slice(&plain);
    }
    let (mut times, mut reads, mut huge_reads) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(pir_kernels::memory::read(&plain));
        reads.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        std::hint::black_box(pir_kernels::memory::read(&huge));
        huge_reads.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        let answers = server.answer_batch(&refs);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(answers);
    }
    times.sort_by(f64::total_cmp);
    reads.sort_by(f64::total_cmp);
    huge_reads.sort_by(f64::total_cmp);
    let (answer, read) = (times[times.len() / 2], reads[reads.len() / 2]);
    println!(
        "answer x{k} median {answer:.2} ms (min {:.2}); plain read of the server's {:.3} GB \
         median {read:.2} ms ({:.2} GB/s); answer/read {:.3}; backend {:?}; \
         the same read in huge pages {:.2} ms",
        times[0],
        plain.len() as f64 / 1e9,
        plain.len() as f64 / (read * 1e6),
        answer / read,
        pir_kernels::Backend::current(),
        huge_reads[huge_reads.len() / 2],
    );
    Ok(())
}

/// Median milliseconds of a plain read of `words` and of `work`, alternated `runs` times.
fn against_read(words: &[u32], runs: usize, mut work: impl FnMut()) -> (f64, f64) {
    let (mut reads, mut times) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(pir_kernels::memory::read_words(words));
        reads.push(t.elapsed().as_secs_f64() * 1e3);
        let t = Instant::now();
        work();
        times.push(t.elapsed().as_secs_f64() * 1e3);
    }
    reads.sort_by(f64::total_cmp);
    times.sort_by(f64::total_cmp);
    (reads[runs / 2], times[runs / 2])
}

/// Times the answer's passes at the shape of `params`, each against a read of its bytes.
fn time_passes(params: &Params, runs: usize) {
    use pir_kernels::aligned::LineAligned;
    use pir_kernels::matvec::{self, PackedMatrix, Packing};
    let runs = runs.max(1);
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state as u32
    };
    let random = |len: usize, next: &mut dyn FnMut() -> u32| {
        let mut words = LineAligned::zeroed(len);
        words.iter_mut().for_each(|w| *w = next());
        words
    };
    let Some(packing) = Packing::new(pir_lattice::params::element_bits(params.p)) else {
        return;
    };
    let (rows, columns, kappa) = (
        params.rows as usize,
        params.columns as usize,
        params.digits(),
    );
    let backend = pir_kernels::Backend::current();
    let report = |name: &str, words: &[u32], (read, time): (f64, f64)| {
        println!(
            "{name}: {:.1} MB, read {read:.2} ms ({:.2} GB/s), pass {time:.2} ms, pass/read {:.3} ({backend:?})",
            words.len() as f64 * 4e-6,
            words.len() as f64 * 4e-6 / read,
            time / read
        );
    };
    {
        let width = packing.words_per_row(columns);
        let db = random(rows * width, &mut next);
        let Some(m) = PackedMatrix::new(&db, rows, width, packing) else {
            return;
        };
        let x: Vec<u32> = (0..m.columns()).map(|_| next()).collect();
        let mut out = vec![0u32; rows];
        let t = against_read(&db, runs, || matvec::matvec_batch(m, &[&x], &mut out));
        report("database x c1", &db, t);
    }
    {
        let hint_rows = kappa * LWE_N;
        let width = packing.words_per_row(rows);
        let h = random(hint_rows * width, &mut next);
        let Some(m) = PackedMatrix::new(&h, hint_rows, width, packing) else {
            return;
        };
        let x: Vec<u32> = (0..m.columns()).map(|_| next()).collect();
        let mut out = vec![0u32; hint_rows];
        let t = against_read(&h, runs, || matvec::matvec_batch(m, &[&x], &mut out));
        report("Decomp(H1^T) x c2", &h, t);
    }
    {
        let a2 = random(rows * LWE_N, &mut next);
        let y: Vec<Vec<u32>> = (0..kappa)
            .map(|_| (0..rows).map(|_| next() % params.p).collect())
            .collect();
        let refs: Vec<&[u32]> = y.iter().map(Vec::as_slice).collect();
        let mut h = vec![0u32; kappa * LWE_N];
        let t = against_read(&a2, runs, || {
            matvec::vectors_times_dense(&refs, &a2, LWE_N, &mut h)
        });
        report("Y A2", &a2, t);
    }
}
