//! `tests/vectors/oram_balancer_state/fail_*.hex`: the balancer's state codec
//! ([`pir_oram::balance`]) refuses each damaged state for its stated reason, through the shared
//! runner of `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_fail_vectors, patch, patches, vectors_dir, FailVector};
use pir_core::Codec;
use pir_oram::balance::{self, node_blocks_needed, Balancer};
use pir_oram::{Op, Request};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Block size of the vectors' state.
const B: usize = 8;

/// A state of 4 blocks of 8 bytes over 2 nodes after one batch writing all 4: every block is
/// in the eviction cache (the batch's evictions run before its arrivals join the queues).
fn state() -> Vec<u8> {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let each = node_blocks_needed(4, 2) as u32;
    let mut bal = Balancer::create(B as u32, 4, &[each, each], &mut rng).unwrap();
    for block in 0..4u32 {
        let data = vec![block as u8 + 1; B];
        bal.submit(Request {
            id: u64::from(block),
            block,
            op: Op::Write(data),
        })
        .unwrap();
    }
    let plan = bal.begin_batch(&mut rng).unwrap().unwrap();
    let replies: Vec<Vec<u8>> = plan
        .nodes
        .iter()
        .map(|ops| vec![0u8; ops.reads.len() * B])
        .collect();
    bal.finish_batch(plan, &replies).unwrap();
    bal.mark_durable();
    assert_eq!(bal.cache_len(), 4);
    balance::encode(&bal)
}

#[test]
fn damaged_balancer_states_are_refused() {
    let good = state();
    let each = node_blocks_needed(4, 2);
    // version 0, block size 1, blocks 5, nodes 9, node sizes 11 and 15, places from 19 (node
    // u16, slot u32; 4 of them), cached count 43, then (block u32, 8 bytes) x 4 from 47.
    assert_eq!(good.len(), 47 + 4 * (4 + B));
    assert_eq!(Balancer::from_bytes(&good, &()).unwrap().to_bytes(), good);
    let place = |block: usize| 19 + 6 * block;
    let entry = |i: usize| 47 + (4 + B) * i;
    let fields: &[(&str, &str, &str, usize, usize, u64)] = &[
        ("next_version", "WrongVersion", "version 2", 0, 1, 2),
        ("no_node", "Malformed", "0 nodes", 9, 2, 0),
        ("nodes_above_limit", "OutOfRange", "65 nodes > 64", 9, 2, 65),
        (
            "node_too_small",
            "Malformed",
            "node 0 holds 1 block, fewer than its share needs",
            11,
            4,
            1,
        ),
        (
            "block_on_missing_node",
            "OutOfRange",
            "block 0 on node 2 of 2",
            place(0),
            2,
            2,
        ),
        (
            "slot_past_node",
            "OutOfRange",
            "block 0 in a slot one past the end of its node",
            place(0) + 2,
            4,
            each,
        ),
        (
            "cache_count_mismatch",
            "Malformed",
            "3 cached blocks, 4 marked cached",
            43,
            4,
            3,
        ),
        (
            "cached_above_blocks",
            "OutOfRange",
            "5 cached blocks, 4 blocks",
            43,
            4,
            5,
        ),
        (
            "cached_block_out_of_range",
            "Malformed",
            "a cached block 4 of 4",
            entry(0),
            4,
            4,
        ),
    ];
    let mut vectors = patches(&good, fields);
    vectors.extend([
        FailVector::truncated(&good, "the last cached block one byte short"),
        FailVector::trailing(&good, "a byte after the state"),
        FailVector::new("empty", "Truncated", "no bytes", Vec::new()),
    ]);
    // Two blocks in slot 0 of node 0.
    let mut twice = good.clone();
    for block in [0, 1] {
        twice = patch(&twice, place(block), 2, 0);
        twice = patch(&twice, place(block) + 2, 4, 0);
    }
    vectors.push(FailVector::new(
        "two_blocks_one_slot",
        "Malformed",
        "blocks 0 and 1 both in slot 0 of node 0",
        twice,
    ));
    let first = u64::from(u32::from_le_bytes(
        good[entry(0)..entry(0) + 4].try_into().unwrap(),
    ));
    vectors.push(FailVector::new(
        "cached_twice",
        "Malformed",
        "the second cached entry names the first's block",
        patch(&good, entry(1), 4, first),
    ));
    let dir = vectors_dir(env!("CARGO_MANIFEST_DIR"), "oram_balancer_state");
    check_fail_vectors::<Balancer>(&dir, &vectors, &());
    // The crate's own entry point keeps the reason.
    let err = balance::decode(&good[..good.len() - 1]).err().unwrap();
    assert!(err.to_string().contains("truncated"), "{err}");
}
