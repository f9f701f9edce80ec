//! Times Checklist's phases at one shape: `cargo run --release -p pir-bench --example
//! checklist_time -- RECORDS [LOOKUPS]` (32-byte records). The benchmark with same-run ratios
//! is `pir bench --modes checklist` (whose lookups this shares); this is for profiling: the
//! online server's two parts alone, and 99th percentiles.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use pir_bench::checklist::{lookup, Answering};
use pir_core::{Database, DbShape};
use pir_xor::checklist::{server, Client, Params};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let records: u64 = args.get(1).map_or(3_000_000, |a| a.parse().unwrap());
    let lookups: usize = args.get(2).map_or(2000, |a| a.parse().unwrap());
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let db = Database::random(DbShape::new(records, 32).unwrap(), &mut rng);
    let params = Params::new(records, 32).unwrap();
    println!(
        "B={records} s={} m={} hints {} B",
        params.sets().size(),
        params.hints(),
        params.hint_bytes()
    );
    let request = Client::offline_request(&mut rng);
    let t = Instant::now();
    let hints = server::hints(&params, &db, &request, 0..params.hints()).unwrap();
    println!("server offline {:.3} s", t.elapsed().as_secs_f64());
    let t = Instant::now();
    let mut client = Client::new(params, &request, &hints).unwrap();
    println!("client offline {:.3} s", t.elapsed().as_secs_f64());
    let mut answering = Answering::default();
    let (mut server_us, mut client_us) = (Vec::new(), Vec::new());
    for _ in 0..lookups {
        let index = rng.random_range(0..records);
        let tries = lookup(&params, &db, &mut client, &mut answering, index, &mut rng).unwrap();
        for one in tries {
            server_us.push(one.online.as_secs_f64() * 1e6);
            client_us.push(one.client.as_secs_f64() * 1e6);
        }
    }
    let a = &mut answering;
    // The online server's two parts alone, on fresh punctured keys.
    let keys: Vec<_> = (0..2000)
        .map(|_| {
            let key = params.sets().random(&mut rng);
            params
                .sets()
                .puncture(&a.ggm, &key, rng.random_range(0..params.sets().size()))
        })
        .collect();
    let t = Instant::now();
    for key in &keys {
        params
            .sets()
            .punctured_elements(&a.ggm, key, &mut a.scratch, &mut a.elements);
    }
    let expand_us = t.elapsed().as_secs_f64() * 1e6 / keys.len() as f64;
    let t = Instant::now();
    for key in &keys {
        std::hint::black_box(a.answer(&params, &db, key).unwrap());
    }
    let answer_us = t.elapsed().as_secs_f64() * 1e6 / keys.len() as f64;
    println!("online server: expansion {expand_us:.1} us of {answer_us:.1} us per answer");
    server_us.sort_by(f64::total_cmp);
    client_us.sort_by(f64::total_cmp);
    let med = |v: &[f64]| v[v.len() / 2];
    let p99 = |v: &[f64]| v[v.len() * 99 / 100];
    println!(
        "online server median {:.1} us (p99 {:.1}); client median {:.1} us (p99 {:.1})",
        med(&server_us),
        p99(&server_us),
        med(&client_us),
        p99(&client_us)
    );
}
