//! Times Checklist's phases at one shape: `cargo run --release -p pir-xor --example
//! checklist_time -- RECORDS [LOOKUPS]` (32-byte records). The benchmark with same-run ratios
//! is `pir bench --modes checklist`; this is for profiling.
#![allow(clippy::unwrap_used)]

use std::time::Instant;

use pir_core::{Database, DbShape};
use pir_xor::checklist::pset::{Ggm, Scratch};
use pir_xor::checklist::{server, Client, Outcome, Params};
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
    let ggm = Ggm::new();
    let mut scratch = Scratch::default();
    let mut elements = Vec::new();
    let (mut server_us, mut client_us) = (Vec::new(), Vec::new());
    for _ in 0..lookups {
        let index = rng.random_range(0..records);
        loop {
            let t = Instant::now();
            let (query, pending) = client.query(index, &mut rng).unwrap();
            let mut c = t.elapsed();
            let t = Instant::now();
            let a = server::answer_with(
                &params,
                &db,
                &query.online,
                &ggm,
                &mut scratch,
                &mut elements,
            )
            .unwrap();
            server_us.push(t.elapsed().as_secs_f64() * 1e6);
            let r = server::answer(&params, &db, &query.refresh).unwrap();
            let t = Instant::now();
            let outcome = client.finish(pending, &a, &r).unwrap();
            c += t.elapsed();
            client_us.push(c.as_secs_f64() * 1e6);
            if let Outcome::Record(record) = outcome {
                assert_eq!(record, db.block(index as usize));
                break;
            }
        }
    }
    // The online server's two parts alone, on fresh punctured keys.
    let keys: Vec<_> = (0..2000)
        .map(|_| {
            let key = params.sets().random(&mut rng);
            params
                .sets()
                .puncture(&ggm, &key, rng.random_range(0..params.sets().size()))
        })
        .collect();
    let t = Instant::now();
    for key in &keys {
        params
            .sets()
            .punctured_elements(&ggm, key, &mut scratch, &mut elements);
    }
    let expand_us = t.elapsed().as_secs_f64() * 1e6 / keys.len() as f64;
    let t = Instant::now();
    for key in &keys {
        std::hint::black_box(
            server::answer_with(&params, &db, key, &ggm, &mut scratch, &mut elements).unwrap(),
        );
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
