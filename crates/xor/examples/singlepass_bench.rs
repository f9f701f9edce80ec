//! Measures SinglePass beside Checklist and DPF at one shape, on one core, in one run, with a
//! plain read of the same bytes for the ratios: `cargo run --release -p pir-xor --example
//! singlepass_bench -- [RECORDS] [LOOKUPS] [RUNS]` (32-byte records; defaults 3,000,000, 2000
//! and 5).
//!
//! Printed: the plain read of the database; for SinglePass (the default layout and the paper's
//! square layout `Q = sqrt(B)`) the offline server's pass, the client's setup, the online
//! server's time per lookup (decoding the body and answering, median) beside a read of the
//! same `Q` random records, the client's time per lookup, and an update of 1 % of the records
//! against a re-hint; for Checklist its offline phase and online answer; for DPF its answer.
//! The shared machines are noisy: read the ratios, and the medians over `RUNS`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::{Duration, Instant};

use pir_core::{Database, DbShape, MultiServerScheme};
use pir_xor::checklist;
use pir_xor::singlepass::{server, wire, Changes, Client, Params};
use pir_xor::DpfPir;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

const B: usize = 32;

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64()
}

fn time<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

/// Nanoseconds this thread has run on a CPU (Linux `/proc/thread-self/schedstat`), or `None`
/// elsewhere. Time spent waiting for a core (the machine is shared) does not count; time
/// waiting for memory does.
fn cpu_ns() -> Option<u64> {
    std::fs::read_to_string("/proc/thread-self/schedstat")
        .ok()?
        .split_whitespace()
        .next()?
        .parse()
        .ok()
}

/// [`time`], with the on-CPU time beside the wall-clock time (the wall time when unknown).
fn time_cpu<T>(f: impl FnOnce() -> T) -> (T, Duration, Duration) {
    let cpu = cpu_ns();
    let (out, wall) = time(f);
    let on_cpu = match (cpu, cpu_ns()) {
        (Some(a), Some(b)) => Duration::from_nanos(b.saturating_sub(a)),
        _ => wall,
    };
    (out, wall, on_cpu)
}

/// A plain read of `count` random records: the floor under a lookup that reads them.
fn gather_read(db: &[u8], count: usize, rng: &mut impl Rng) -> Duration {
    let records = db.len() / B;
    let rows: Vec<usize> = (0..count).map(|_| rng.random_range(0..records)).collect();
    let backend = pir_kernels::Backend::current();
    let (digest, t) = time(|| pir_kernels::memory::read_rows_with(backend, db, B, &rows));
    std::hint::black_box(digest);
    t
}

struct SinglePassRow {
    offline_server: f64,
    offline_client: f64,
    offline_server_cpu: f64,
    offline_client_cpu: f64,
    best_server: f64,
    best_client: f64,
    online_server: f64,
    online_read: f64,
    client: f64,
}

fn singlepass(
    label: &str,
    params: Params,
    db: &[u8],
    lookups: usize,
    runs: usize,
    rng: &mut ChaCha20Rng,
) -> (SinglePassRow, Client) {
    let (mut server_t, mut client_t) = (Vec::new(), Vec::new());
    let (mut server_cpu, mut client_cpu) = (Vec::new(), Vec::new());
    let mut client = None;
    for _ in 0..runs {
        let request = Client::offline_request(rng);
        let (hints, t, cpu) = time_cpu(|| server::hints(&params, db, &request).unwrap());
        server_t.push(t);
        server_cpu.push(cpu);
        let (c, t, cpu) = time_cpu(|| Client::new(params, &request, &hints).unwrap());
        client_t.push(t);
        client_cpu.push(cpu);
        client = Some(c);
    }
    let mut client = client.expect("runs >= 1");
    let (mut online, mut read, mut work) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..lookups {
        let index = rng.random_range(0..params.records());
        let ((query, pending), t_query) = time(|| client.query(index, rng).unwrap());
        let online_body = wire::encode_lookup(&params, &query.online);
        let refresh_body = wire::encode_lookup(&params, &query.refresh);
        read.push(gather_read(db, params.rows(), rng));
        let (a, t) = time(|| {
            let offsets = wire::decode_lookup(&online_body, &params).unwrap();
            server::answer(&params, db, &offsets).unwrap()
        });
        online.push(t);
        let offsets = wire::decode_lookup(&refresh_body, &params).unwrap();
        let r = server::answer(&params, db, &offsets).unwrap();
        let (record, t_finish) = time(|| client.finish(pending, &a, &r).unwrap());
        assert_eq!(record, db[index as usize * B..(index as usize + 1) * B]);
        work.push(t_query + t_finish);
    }
    let row = SinglePassRow {
        best_server: server_t.iter().min().expect("runs >= 1").as_secs_f64(),
        best_client: client_t.iter().min().expect("runs >= 1").as_secs_f64(),
        offline_server: median(server_t),
        offline_client: median(client_t),
        offline_server_cpu: median(server_cpu),
        offline_client_cpu: median(client_cpu),
        online_server: median(online) * 1e6,
        online_read: median(read) * 1e6,
        client: median(work) * 1e6,
    };
    println!(
        "singlepass {label}: Q = {} rows x m = {} columns; hint {} B; per lookup {} B up and {} \
         B down per server",
        params.rows(),
        params.columns(),
        params.hint_bytes(),
        wire::SHAPE_LEN + 2 * params.rows(),
        params.answer_bytes()
    );
    println!(
        "  offline: server {:.4} s, client {:.4} s (total {:.4} s; target <= 0.2 s); on-CPU \
         server {:.4} s, client {:.4} s (total {:.4} s)",
        row.offline_server,
        row.offline_client,
        row.offline_server + row.offline_client,
        row.offline_server_cpu,
        row.offline_client_cpu,
        row.offline_server_cpu + row.offline_client_cpu
    );
    println!(
        "  online: server {:.2} us per lookup (decode + answer; target <= 20 us) = {:.2}x a read \
         of its {} records ({:.2} us); client {:.2} us per lookup",
        row.online_server,
        row.online_server / row.online_read,
        params.rows(),
        row.online_read,
        row.client
    );
    (row, client)
}

/// 1 % of the records changed: the server's diff and body, the client's decode and apply, then
/// lookups on the new version.
fn updates(
    params: Params,
    client: &mut Client,
    db: &mut [u8],
    row: &SinglePassRow,
    rng: &mut ChaCha20Rng,
) {
    let old = db.to_vec();
    let count = (params.records() / 100) as usize;
    let mut changed = 0;
    while changed < count {
        let i = rng.random_range(0..params.records()) as usize;
        if db[i * B..(i + 1) * B] == old[i * B..(i + 1) * B] {
            rng.fill_bytes(&mut db[i * B..(i + 1) * B]);
            changed += 1;
        }
    }
    let (changes, t_diff) = time(|| server::changes(&params, &old, db).unwrap());
    let body = wire::encode_changes(&params, &changes);
    let (decoded, t_decode) = time(|| wire::decode_changes(&body, &params).unwrap());
    // Applied 41 times: applying twice undoes it (XOR), so an odd count leaves it applied. The
    // on-CPU clock advances at scheduler ticks, so it is read over all 41; the wall clock per
    // apply gives the best run (the least disturbed by the other engineers' jobs).
    const APPLIES: u32 = 41;
    let mut best = Duration::MAX;
    let (_, _, cpu) = time_cpu(|| {
        for _ in 0..APPLIES {
            let (_, t) = time(|| client.apply(&decoded).unwrap());
            best = best.min(t);
        }
    });
    let (apply, apply_cpu) = (best.as_secs_f64(), cpu.as_secs_f64() / f64::from(APPLIES));
    let rehint = row.best_server + row.best_client;
    let rehint_cpu = row.offline_server_cpu + row.offline_client_cpu;
    println!(
        "  update of {} records (1 %): client apply, best run {:.3} ms = {:.4}x a re-hint's best \
         runs ({:.4} s; target <= 0.01x), {:.4}x the server's pass alone; on-CPU {:.3} ms = {:.4}x the re-hint's \
         on-CPU {:.4} s; decoding the {} B body {:.3} ms more ({:.4}x with it); the server's \
         diff of two versions {:.1} ms",
        changes.len(),
        apply * 1e3,
        apply / rehint,
        rehint,
        apply / row.best_server,
        apply_cpu * 1e3,
        apply_cpu / rehint_cpu,
        rehint_cpu,
        body.len(),
        t_decode.as_secs_f64() * 1e3,
        (apply + t_decode.as_secs_f64()) / rehint,
        t_diff.as_secs_f64() * 1e3
    );
    for _ in 0..200 {
        let index = rng.random_range(0..params.records());
        let (query, pending) = client.query(index, rng).unwrap();
        let a = server::answer(&params, db, &query.online).unwrap();
        let r = server::answer(&params, db, &query.refresh).unwrap();
        let record = client.finish(pending, &a, &r).unwrap();
        assert_eq!(record, db[index as usize * B..(index as usize + 1) * B]);
    }
    let _: &Changes = &decoded;
}

fn checklist_row(db: &Database, lookups: usize, rng: &mut ChaCha20Rng) {
    use checklist::{server, Client, Outcome, Params};
    let records = db.shape().block_count() as u64;
    let params = Params::new(records, B).unwrap();
    let request = Client::offline_request(rng);
    let (hints, t_server, cpu_server) =
        time_cpu(|| server::hints(&params, db, &request, 0..params.hints()).unwrap());
    let (client, t_client, cpu_client) =
        time_cpu(|| Client::new(params, &request, &hints).unwrap());
    let mut client = client;
    let (mut online, mut read) = (Vec::new(), Vec::new());
    for _ in 0..lookups {
        let index = rng.random_range(0..records);
        loop {
            let (query, pending) = client.query(index, rng).unwrap();
            read.push(gather_read(db.bytes(), params.sets().size() - 1, rng));
            let (a, t) = time(|| server::answer(&params, db, &query.online).unwrap());
            online.push(t);
            let r = server::answer(&params, db, &query.refresh).unwrap();
            if let Outcome::Record(record) = client.finish(pending, &a, &r).unwrap() {
                assert_eq!(record, db.block(index as usize));
                break;
            }
        }
    }
    let (online, read) = (median(online) * 1e6, median(read) * 1e6);
    println!(
        "checklist: s = {}, m = {} sets; hint {} B\n  offline: server {:.3} s, client {:.3} s \
         (total {:.3} s); on-CPU server {:.3} s, client {:.3} s (total {:.3} s)\n  online: server {:.2} us per lookup = {:.2}x a read of its {} records \
         ({:.2} us)",
        params.sets().size(),
        params.hints(),
        params.hint_bytes(),
        t_server.as_secs_f64(),
        t_client.as_secs_f64(),
        (t_server + t_client).as_secs_f64(),
        cpu_server.as_secs_f64(),
        cpu_client.as_secs_f64(),
        (cpu_server + cpu_client).as_secs_f64(),
        online,
        online / read,
        params.sets().size() - 1,
        read
    );
}

fn dpf_row(db: &Database, runs: usize, read_s: f64, rng: &mut ChaCha20Rng) {
    let scheme = DpfPir::new(db.shape());
    let mut answer = Vec::new();
    for _ in 0..runs {
        let index = rng.random_range(0..db.shape().block_count());
        let (queries, _) = scheme.query(&[index], rng).unwrap();
        let (a, t) = time(|| scheme.answer(db, &queries[0]).unwrap());
        std::hint::black_box(a);
        answer.push(t);
    }
    let answer = median(answer);
    println!(
        "dpf: online server {:.2} ms per lookup = {:.2}x the plain read; no offline phase",
        answer * 1e3,
        answer / read_s
    );
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let records: u64 = args.get(1).map_or(3_000_000, |a| a.parse().unwrap());
    let lookups: usize = args.get(2).map_or(2000, |a| a.parse().unwrap());
    let runs: usize = args.get(3).map_or(5, |a| a.parse().unwrap()).max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    pool.install(|| {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let db = Database::random(DbShape::new(records, B).unwrap(), &mut rng);
        let (mut reads, mut reads_cpu) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let (digest, t, cpu) = time_cpu(|| pir_kernels::memory::read(db.bytes()));
            std::hint::black_box(digest);
            reads.push(t);
            reads_cpu.push(cpu);
        }
        let (read_s, read_cpu) = (median(reads), median(reads_cpu));
        println!(
            "{records} x {B} B ({:.1} MB), one thread, backend {}, medians of {runs} runs and \
             {lookups} lookups\nplain read of the database: {:.2} ms ({:.1} GB/s), on-CPU {:.2} ms",
            db.bytes().len() as f64 / 1e6,
            pir_kernels::Backend::current().name(),
            read_s * 1e3,
            db.bytes().len() as f64 / read_s / 1e9,
            read_cpu * 1e3
        );
        let mut bytes = db.bytes().to_vec();
        let params = Params::new(records, B).unwrap();
        let (row, mut client) = singlepass("default", params, &bytes, lookups, runs, &mut rng);
        println!(
            "  offline server pass = {:.2}x the plain read ({:.2}x on-CPU)",
            row.offline_server / read_s,
            row.offline_server_cpu / read_cpu
        );
        updates(params, &mut client, &mut bytes, &row, &mut rng);
        drop(client);
        let square = (records as f64).sqrt().ceil() as u64;
        let params = Params::with_rows(records, B, square).unwrap();
        let (row, _) = singlepass(
            "square (the paper's Q = sqrt(B))",
            params,
            &bytes,
            lookups,
            runs,
            &mut rng,
        );
        println!(
            "  offline server pass = {:.2}x the plain read ({:.2}x on-CPU)",
            row.offline_server / read_s,
            row.offline_server_cpu / read_cpu
        );
        drop(bytes);
        checklist_row(&db, lookups.min(1000), &mut rng);
        dpf_row(&db, runs, read_s, &mut rng);
    });
}
