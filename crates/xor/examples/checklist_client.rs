//! Times Checklist's client preprocessing ([`checklist::Client::new`]: expanding every hint set
//! and pointing each record at the sets holding it) on the calling thread:
//! `cargo run --release -p pir-xor --example checklist_client -- [RECORDS] [RUNS]` (32-byte
//! records; defaults 3,000,000 and 3). The hints are random bytes: the client's setup does not
//! read them, so no server pass is needed. Run it under `valgrind --tool=callgrind` at a
//! smaller size for instruction counts that do not depend on the machine's load.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::time::Instant;

use pir_xor::checklist::{Client, Params};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// CPU seconds this process has run (user and system, Linux `/proc/self/stat`), or NaN
/// elsewhere: time spent waiting for a core on a shared machine does not count (time waiting
/// for memory does).
fn cpu_s() -> f64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else {
        return f64::NAN;
    };
    // Fields after the command name (which may hold spaces) start at its closing ')'.
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .map_or("", |(_, rest)| rest)
        .split_whitespace()
        .collect();
    let ticks = |i: usize| fields.get(i).and_then(|f| f.parse::<f64>().ok());
    // utime and stime are fields 14 and 15 of the whole line, 12 and 13 after the name; the
    // kernel counts them in USER_HZ = 100 ticks per second.
    match (ticks(11), ticks(12)) {
        (Some(user), Some(system)) => (user + system) / 100.0,
        _ => f64::NAN,
    }
}

fn main() {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .map(|a| a.parse().expect("RECORDS and RUNS are numbers"))
        .collect();
    let records = args.first().copied().unwrap_or(3_000_000);
    let runs = args.get(1).copied().unwrap_or(3).max(1);
    let params = Params::new(records, 32).unwrap();
    let hints = vec![0u8; params.hint_bytes()];
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let (mut times, mut cpu) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let request = Client::offline_request(&mut rng);
        let (start, cpu_start) = (Instant::now(), cpu_s());
        let client = pool.install(|| Client::new(params, &request, &hints).unwrap());
        times.push(start.elapsed().as_secs_f64());
        cpu.push(cpu_s() - cpu_start);
        std::hint::black_box(&client);
    }
    times.sort_by(f64::total_cmp);
    cpu.sort_by(f64::total_cmp);
    println!(
        "checklist client setup {records}x32B s={} m={} ({} set elements): median {:.3} s of {runs} (min {:.3} s; CPU time median {:.2} s), one thread",
        params.sets().size(),
        params.hints(),
        params.hints() * params.sets().size(),
        times[times.len() / 2],
        times[0],
        cpu[cpu.len() / 2]
    );
}
