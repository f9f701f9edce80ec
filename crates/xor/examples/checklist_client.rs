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
    let mut times = Vec::new();
    for _ in 0..runs {
        let request = Client::offline_request(&mut rng);
        let start = Instant::now();
        let client = pool.install(|| Client::new(params, &request, &hints).unwrap());
        times.push(start.elapsed().as_secs_f64());
        std::hint::black_box(&client);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "checklist client setup {records}x32B s={} m={} ({} set elements): median {:.3} s of {runs} (min {:.3} s), one thread",
        params.sets().size(),
        params.hints(),
        params.hints() * params.sets().size(),
        times[times.len() / 2],
        times[0]
    );
}
