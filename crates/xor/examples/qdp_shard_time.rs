//! Online shard CPU per QDP check, before and after QDP's offline half moved to the shards
//! (`pir_xor::qdp_shard`): a breach-shaped database (RAID-PIR n = 2, r = 2, c = 2, one-block
//! answers) cut into S shards, each shard's engine built as `pir shard serve` builds it.
//! "Before" is the full scan every shard did for every check; "after" is the online half of
//! a precomputed seed (its flip chunk's rows among the shard's) plus the XOR into the stored
//! partial answer. One thread; the figure is the sum over the shards, median of the rounds.
//!
//! ```text
//! cargo run --release -p pir-xor --example qdp_shard_time -- [MiB=64] [block=4096] [S=2] [rounds=5] [plain]
//! ```
//! `plain` turns the four-Russians tables off (the default engine builds them from 1 KiB
//! blocks up).

#![allow(clippy::unwrap_used, clippy::expect_used)] // an example: fail loudly

use std::time::Instant;

use pir_core::bits::BitVec;
use pir_core::{Database, DbShape, MultiServerScheme, SchemeId};
use pir_xor::shard::ShardRows;
use pir_xor::{AnswerMode, Engine, EngineOptions, RaidPir, RaidQuery, Russians};
use rand::{Rng, SeedableRng};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let num = |i: usize, default: usize| args.get(i).map_or(default, |a| a.parse().unwrap());
    let (mib, b, shards, rounds) = (num(0, 64), num(1, 4096), num(2, 2), num(3, 5));
    let plain = args.iter().any(|a| a == "plain");
    let rows = (mib << 20) / b;
    let shape = DbShape::new(rows as u64, b).unwrap();
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let db = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, 2, 2, 2, AnswerMode::Single).unwrap();
    let options = EngineOptions {
        russians: if plain { Russians::Off } else { Russians::Auto },
        ..EngineOptions::default()
    };
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(1)
        .build()
        .unwrap();
    let engines: Vec<Engine> = (0..shards)
        .map(|k| {
            let (first, end) = (k * rows / shards, (k + 1) * rows / shards);
            let part = Database::from_bytes(
                DbShape::new((end - first) as u64, b).unwrap(),
                &db.bytes()[first * b..end * b],
            )
            .unwrap();
            let at = ShardRows {
                whole: shape,
                first,
            };
            pool.install(|| Engine::shard(part, at, options, &|_, _| {}).unwrap())
        })
        .collect();
    println!(
        "{mib} MiB, {rows} blocks of {b} B, S = {shards}, tables: {:?}, one thread",
        engines[0].russians_group()
    );
    let (mut before, mut after, mut offline) = (Vec::new(), Vec::new(), Vec::new());
    for round in 0..rounds {
        let seed: [u8; 16] = rng.random();
        let mut flips = BitVec::zeros(raid.chunk_len(0));
        for i in 0..flips.len() {
            if rng.random::<bool>() {
                flips.flip(i);
            }
        }
        let body = raid.encode_query(&RaidQuery {
            server: 0,
            seed,
            flips: vec![flips],
        });
        let order = pir_xor::qdp_shard::encode_order(&raid, 0, &seed);
        let (mut t_before, mut t_after, mut t_offline) = (0.0, 0.0, 0.0);
        for engine in &engines {
            pool.install(|| {
                // The offline half first, as a shard does it: before the query exists.
                let start = Instant::now();
                let (_, prepared) = engine.prepare_order(&order).unwrap();
                let mut partial = engine.answer(&prepared);
                t_offline += start.elapsed().as_secs_f64();
                // Before and after alternated, the order flipped every round.
                let mut full = Vec::new();
                let mut online = Vec::new();
                for step in 0..2 {
                    let start = Instant::now();
                    if (step + round) % 2 == 0 {
                        full = engine.answer(&engine.prepare(SchemeId::RaidPir, &body).unwrap());
                        t_before += start.elapsed().as_secs_f64();
                    } else {
                        online = partial.clone();
                        let half = engine.answer(&engine.prepare_online(&body).unwrap());
                        pir_kernels::xor_into(&mut online, &half);
                        t_after += start.elapsed().as_secs_f64();
                    }
                }
                partial = online;
                assert_eq!(partial, full, "the two halves are the full answer");
            });
        }
        before.push(t_before * 1e3);
        after.push(t_after * 1e3);
        offline.push(t_offline * 1e3);
    }
    let (mb, ma, mo) = (median(before), median(after), median(offline));
    println!("online shard CPU per check, summed over the {shards} shards, median of {rounds}:");
    println!("  before (full scan): {mb:.2} ms");
    println!("  after (online half): {ma:.2} ms ({:.2}x)", ma / mb);
    println!("  offline half (precompute order): {mo:.2} ms");
}
