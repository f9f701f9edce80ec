//! Times one server's keyword-PIR answer (`pir_xor::dpf_keyword`) over N random keys with
//! 32-byte values: `cargo run --release -p pir-xor --example dpf_keyword_time -- [N]`.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use pir_xor::dpf_keyword::{decode, query, KeywordDatabase};
use rand::SeedableRng;

fn main() {
    let n: u32 = std::env::args()
        .nth(1)
        .map_or(1 << 20, |a| a.parse().unwrap());
    let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..n)
        .map(|k| (format!("key{k}").into_bytes(), k.to_le_bytes().repeat(8)))
        .collect();
    let db = KeywordDatabase::build(&entries, 32).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let mut times = Vec::new();
    for k in 0..9u32 {
        let (keys, state) = query(format!("key{}", k * 1000).as_bytes(), &mut rng).unwrap();
        let start = Instant::now();
        let a = db.answer(&keys[0]).unwrap();
        times.push(start.elapsed().as_secs_f64() * 1e3);
        let b = db.answer(&keys[1]).unwrap();
        assert_eq!(
            decode(&state, [&a, &b]).unwrap(),
            Some((k * 1000).to_le_bytes().repeat(8))
        );
    }
    times.sort_by(f64::total_cmp);
    println!("keyword DPF, {n} keys of 32-byte values, one thread: {:.1} ms per server answer (median of 9)", times[4]);
}
