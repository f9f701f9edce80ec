//! The ORAM behaves like a plain array of blocks, whatever the requests, and refuses a store
//! that changes, swaps or rolls back slots.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use pir_oram::{state, Client, Geometry, MemoryStore, Op, Oram, OramError, Request};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn client(
    blocks: u64,
    block_size: u32,
    stores: u32,
    seed: u64,
) -> Client<MemoryStore, ChaCha20Rng> {
    let g = Geometry::new(block_size, blocks, stores).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let oram = Oram::create(g.clone(), &mut rng).unwrap();
    let sizes: Vec<u64> = (0..stores).map(|s| g.store_bytes(s)).collect();
    Client::new(oram, MemoryStore::new(g.sealed_slot(), &sizes), rng)
}

/// Runs `ops` random requests in batches of up to `width`, checking every read against a map.
fn random_run(c: &mut Client<MemoryStore, ChaCha20Rng>, ops: usize, width: usize, seed: u64) {
    let g = c.oram.geometry().clone();
    let b = g.block_size as usize;
    let mut model: HashMap<u32, Vec<u8>> = HashMap::new();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut id = 0u64;
    let mut done = 0;
    while done < ops {
        let n = rng.random_range(1..=width);
        let mut requests = Vec::new();
        let mut expected = Vec::new();
        for _ in 0..n {
            // A small hot set makes the same-block-twice case frequent.
            let block = if rng.random_bool(0.3) {
                rng.random_range(0..4)
            } else {
                rng.random_range(0..g.blocks)
            };
            let op = match rng.random_range(0..3) {
                0 => Op::Read,
                1 => Op::Write((0..b).map(|_| rng.random()).collect()),
                _ => {
                    let offset = rng.random_range(0..b as u32);
                    let len = rng.random_range(0..=(b as u32 - offset));
                    Op::Patch {
                        offset,
                        bytes: (0..len).map(|_| rng.random()).collect(),
                    }
                }
            };
            let current = model.entry(block).or_insert_with(|| vec![0u8; b]);
            expected.push(match &op {
                Op::Read => current.clone(),
                Op::Write(data) => {
                    *current = data.clone();
                    Vec::new()
                }
                Op::Patch { offset, bytes } => {
                    current[*offset as usize..*offset as usize + bytes.len()]
                        .copy_from_slice(bytes);
                    Vec::new()
                }
            });
            requests.push(Request { id, block, op });
            id += 1;
        }
        let answers = c.run(requests).unwrap();
        for (answer, want) in answers.iter().zip(&expected) {
            assert_eq!(&answer.data, want, "request {}", answer.id);
        }
        done += n;
    }
}

#[test]
fn long_random_run_matches_a_plain_map_and_the_stash_stays_small() {
    let mut c = client(4096, 512, 1, 7);
    random_run(&mut c, 20_000, 32, 8);
    // The eviction cache is bounded well below N (measured bound; see pir bench --oram).
    assert!(c.peak_cache < 400, "peak eviction cache {}", c.peak_cache);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    #[test]
    fn any_shape_any_requests(blocks in 4u64..700, stores in 1u32..4, width in 1usize..40, seed in any::<u64>()) {
        let mut c = client(blocks, 512, stores, seed);
        random_run(&mut c, 600, width, seed ^ 1);
    }
}

#[test]
fn the_state_round_trips_and_reopens() {
    let mut c = client(500, 512, 2, 3);
    random_run(&mut c, 2000, 16, 4);
    let plain = state::encode(&c.oram, false);
    let sealed = state::seal(&[5; 32], [1; 12], &plain).unwrap();
    let reopened = state::decode(&state::open(&[5; 32], sealed.clone()).unwrap()).unwrap();
    assert_eq!(state::encode(&reopened, false), plain);
    assert!(state::open(&[6; 32], sealed).is_err());
    // Any single damaged byte in the plain state is refused or decodes to a checked state.
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    for _ in 0..200 {
        let mut bad = plain.clone();
        let at = rng.random_range(0..bad.len());
        bad[at] ^= 1 << rng.random_range(0..8);
        let _ = state::decode(&bad);
        let _ = state::decode(&bad[..at]);
    }
}

#[test]
fn a_reopened_store_continues_and_an_unclean_one_reshuffles() {
    let mut c = client(800, 512, 1, 11);
    let b = 512;
    let writes: Vec<Request> = (0..800u32)
        .map(|i| Request {
            id: u64::from(i),
            block: i,
            op: Op::Write(vec![i as u8; b]),
        })
        .collect();
    c.run(writes).unwrap();
    // A commit: every owed rebuild finished and synced, then the state written.
    c.sync().unwrap();
    c.oram.mark_durable();
    let plain = state::encode(&c.oram, false);
    let store = c.store;
    let mut oram = state::decode(&plain).unwrap();
    assert!(!oram.was_clean());
    oram.begin_session().unwrap();
    let mut c = Client::new(oram, store, ChaCha20Rng::seed_from_u64(12));
    c.reshuffle_all().unwrap();
    let reads: Vec<Request> = (0..800u32)
        .map(|i| Request {
            id: u64::from(i),
            block: i,
            op: Op::Read,
        })
        .collect();
    for (i, answer) in c.run(reads).unwrap().iter().enumerate() {
        assert_eq!(answer.data, vec![i as u8; b]);
    }
}

fn tamper_run(damage: impl Fn(&mut Vec<u8>, u64)) -> OramError {
    let mut c = client(256, 512, 1, 21);
    let writes: Vec<Request> = (0..256u32)
        .map(|i| Request {
            id: u64::from(i),
            block: i,
            op: Op::Write(vec![1; 512]),
        })
        .collect();
    c.run(writes).unwrap();
    let slot = c.oram.geometry().sealed_slot();
    damage(c.store.raw(0), slot);
    for round in 0..50u64 {
        let reads: Vec<Request> = (0..256u32)
            .map(|i| Request {
                id: round * 1000 + u64::from(i),
                block: i,
                op: Op::Read,
            })
            .collect();
        if let Err(e) = c.run(reads) {
            return e;
        }
    }
    panic!("the damage was never detected");
}

#[test]
fn flipped_swapped_and_rolled_back_slots_are_detected() {
    // Flip one bit in every slot.
    let e = tamper_run(|raw, slot| {
        for s in 0..raw.len() as u64 / slot {
            raw[(s * slot + 20) as usize] ^= 1;
        }
    });
    assert!(matches!(e, OramError::Tampered { .. }), "{e}");
    // Swap every pair of neighbouring slots.
    let e = tamper_run(|raw, slot| {
        let slot = slot as usize;
        for s in (0..raw.len() / slot - 1).step_by(2) {
            let (a, b) = raw.split_at_mut((s + 1) * slot);
            a[s * slot..].swap_with_slice(&mut b[..slot]);
        }
    });
    assert!(matches!(e, OramError::Tampered { .. }), "{e}");
}

#[test]
fn a_rolled_back_store_is_detected() {
    let mut c = client(256, 512, 1, 31);
    let writes = |v: u8| -> Vec<Request> {
        (0..256u32)
            .map(|i| Request {
                id: u64::from(i),
                block: i,
                op: Op::Write(vec![v; 512]),
            })
            .collect()
    };
    c.run(writes(1)).unwrap();
    let old = c.store.raw(0).clone();
    c.run(writes(2)).unwrap();
    *c.store.raw(0) = old;
    let reads: Vec<Request> = (0..256u32)
        .map(|i| Request {
            id: u64::from(i),
            block: i,
            op: Op::Read,
        })
        .collect();
    let mut detected = false;
    for _ in 0..20 {
        match c.run(reads.clone()) {
            Err(OramError::Tampered { .. }) => {
                detected = true;
                break;
            }
            Err(e) => panic!("{e}"),
            Ok(answers) => assert!(
                answers.iter().all(|a| a.data == vec![2; 512]),
                "served rolled-back data"
            ),
        }
    }
    assert!(detected);
}
