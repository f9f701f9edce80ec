//! The oblivious load balancer ([`pir_oram::balance`]) over simulated nodes: answers match a
//! plain map, a crash at any point loses no durable write, and what the nodes see (how many
//! blocks each reads and writes per batch) has the same distribution whatever blocks are
//! asked for (two-sample chi-square tests, with a check that the same test rejects a static
//! block-to-node placement).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;

use pir_oram::balance::{self, node_blocks_needed, Balancer, NodeOps};
use pir_oram::{Op, Request};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

const B: usize = 16;

/// Nodes in memory: every node a vector of blocks; a batch reads then writes.
#[derive(Clone)]
struct Nodes {
    blocks: Vec<Vec<Vec<u8>>>,
}

impl Nodes {
    fn new(k: usize, each: u32) -> Nodes {
        Nodes {
            blocks: vec![vec![vec![0u8; B]; each as usize]; k],
        }
    }

    fn serve(&mut self, plan: &[NodeOps]) -> Vec<Vec<u8>> {
        plan.iter()
            .zip(&mut self.blocks)
            .map(|(ops, node)| {
                let out: Vec<u8> = ops
                    .reads
                    .iter()
                    .flat_map(|&s| node[s as usize].clone())
                    .collect();
                for (slot, data) in &ops.writes {
                    node[*slot as usize] = data.clone();
                }
                out
            })
            .collect()
    }
}

fn setup(blocks: u32, k: usize, seed: u64) -> (Balancer, Nodes, ChaCha20Rng) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let each = node_blocks_needed(u64::from(blocks), k) as u32;
    let bal = Balancer::create(B as u32, blocks, &vec![each; k], &mut rng).unwrap();
    (bal, Nodes::new(k, each), rng)
}

/// Runs every queued request; returns the answers by id and what each batch sent the nodes.
fn drain(
    bal: &mut Balancer,
    nodes: &mut Nodes,
    rng: &mut ChaCha20Rng,
) -> (HashMap<u64, Vec<u8>>, Vec<Vec<NodeOps>>) {
    let mut out = HashMap::new();
    let mut views = Vec::new();
    while let Some(plan) = bal.begin_batch(rng).unwrap() {
        let view = plan.nodes.clone();
        let replies = nodes.serve(&view);
        for a in bal.finish_batch(plan, &replies).unwrap() {
            out.insert(a.id, a.data);
        }
        views.push(view);
        if bal.checkpoint_due() {
            // The simulated nodes are always durable; a real caller writes the state here.
            bal.mark_durable();
        }
    }
    (out, views)
}

/// Queues a random read, write or patch of a random block, applying it to `model`; returns
/// the id and, for a read, the value it must return.
fn random_request(
    bal: &mut Balancer,
    model: &mut HashMap<u32, Vec<u8>>,
    rng: &mut ChaCha20Rng,
    id: u64,
) -> Option<Vec<u8>> {
    let block = rng.random_range(0..bal.blocks());
    let value = model.entry(block).or_insert_with(|| vec![0u8; B]);
    let (op, want) = match rng.random_range(0..3) {
        0 => (Op::Read, Some(value.clone())),
        1 => {
            let mut data = vec![0u8; B];
            rng.fill_bytes(&mut data);
            *value = data.clone();
            (Op::Write(data), None)
        }
        _ => {
            let offset = rng.random_range(0..B as u32);
            let bytes = vec![rng.random::<u8>(); rng.random_range(0..=B - offset as usize)];
            value[offset as usize..offset as usize + bytes.len()].copy_from_slice(&bytes);
            (Op::Patch { offset, bytes }, None)
        }
    };
    bal.submit(Request { id, block, op }).unwrap();
    want
}

/// The state written at a checkpoint, and the balancer reopened from it.
fn checkpoint(bal: &mut Balancer) -> Vec<u8> {
    let state = balance::encode(bal);
    bal.mark_durable();
    state
}

#[test]
fn answers_match_a_plain_map_over_one_to_five_nodes() {
    for k in 1..=5 {
        let (mut bal, mut nodes, mut rng) = setup(300, k, k as u64);
        let mut model = HashMap::new();
        let mut id = 0;
        for round in 0..150 {
            let mut wants = HashMap::new();
            for _ in 0..rng.random_range(1..70) {
                if let Some(want) = random_request(&mut bal, &mut model, &mut rng, id) {
                    wants.insert(id, want);
                }
                id += 1;
            }
            let (got, views) = drain(&mut bal, &mut nodes, &mut rng);
            for (i, want) in wants {
                assert_eq!(got[&i], want, "{k} nodes, round {round}");
            }
            for view in views {
                let w = view[0].writes.len();
                assert!(view.iter().all(|ops| ops.writes.len() == w));
            }
            if round % 7 == 0 {
                // A clean reopen from the state keeps every value.
                let state = checkpoint(&mut bal);
                bal = balance::decode(&state).unwrap();
                assert_eq!(balance::encode(&bal), state);
            }
        }
        assert!(bal.cache_len() <= k * balance::QUEUE_LIMIT);
    }
}

#[test]
fn a_crash_at_any_point_loses_no_durable_write() {
    let (mut bal, mut nodes, mut rng) = setup(200, 3, 11);
    let mut model = HashMap::new();
    let mut id = 0;
    for crash in 0..40 {
        let state = checkpoint(&mut bal);
        let durable_nodes = nodes.clone();
        let durable = model.clone();
        // Work after the checkpoint, with checkpoints the balancer decides (it may pass some).
        for _ in 0..rng.random_range(1..12) {
            for _ in 0..rng.random_range(1..40) {
                random_request(&mut bal, &mut model, &mut rng, id);
                id += 1;
            }
            drain(&mut bal, &mut nodes, &mut rng);
        }
        // The balancer dies: it reopens from the durable state. Nodes keep what they wrote
        // (they were flushed at the checkpoint and ran on), or one of them fell back to its
        // last flush (the checkpoint).
        bal = balance::decode(&state).unwrap();
        if crash % 2 == 1 {
            let victim = rng.random_range(0..3);
            nodes.blocks[victim] = durable_nodes.blocks[victim].clone();
        }
        model = durable;
        for block in 0..bal.blocks() {
            bal.submit(Request {
                id,
                block,
                op: Op::Read,
            })
            .unwrap();
            let (got, _) = drain(&mut bal, &mut nodes, &mut rng);
            let want = model.get(&block).cloned().unwrap_or(vec![0u8; B]);
            assert_eq!(got[&id], want, "crash {crash}: block {block}");
            id += 1;
        }
    }
}

#[test]
fn a_damaged_state_is_refused() {
    let (mut bal, mut nodes, mut rng) = setup(64, 2, 3);
    let mut model = HashMap::new();
    for id in 0..100 {
        random_request(&mut bal, &mut model, &mut rng, id);
    }
    drain(&mut bal, &mut nodes, &mut rng);
    let state = checkpoint(&mut bal);
    assert!(balance::decode(&state[..state.len() - 1]).is_err());
    let mut extra = state.clone();
    extra.push(0);
    assert!(balance::decode(&extra).is_err());
    // Two blocks in one slot: copy block 0's place onto block 1 until one is a real slot.
    let places = 1 + 4 + 4 + 2 + 2 * 4;
    let mut refused = 0;
    for b in 1..64 {
        let mut twice = state.clone();
        let (first, rest) = twice[places..].split_at_mut(6 * b);
        if rest[..6] == first[..6] {
            continue;
        }
        rest[..6].copy_from_slice(&first[..6]);
        refused += usize::from(balance::decode(&twice).is_err());
    }
    assert!(refused > 30, "{refused}");
}

#[derive(Clone, Copy, Debug)]
enum Workload {
    Uniform,
    OneBlock,
    Scan,
}

/// What the nodes see: per batch of 32 requests, how many blocks node 0 reads (its
/// multinomial share), and how many it writes.
fn node_view(
    workload: Workload,
    k: usize,
    batches: usize,
    seed: u64,
    static_nodes: bool,
) -> Vec<u64> {
    let (mut bal, mut nodes, mut rng) = setup(512, k, seed);
    let mut histogram = vec![0u64; 33];
    let mut id = 0u64;
    for t in 0..batches {
        let blocks: Vec<u32> = (0..32)
            .map(|i| match workload {
                Workload::Uniform => rng.random_range(0..512),
                Workload::OneBlock => 7,
                Workload::Scan => ((t * 32 + i) % 512) as u32,
            })
            .collect();
        if static_nodes {
            // A static placement (block mod k): the leak the test must catch.
            let on_zero = blocks
                .iter()
                .filter(|&&b| (b as usize).is_multiple_of(k))
                .count();
            histogram[on_zero] += 1;
            continue;
        }
        for block in blocks {
            bal.submit(Request {
                id,
                block,
                op: Op::Read,
            })
            .unwrap();
            id += 1;
        }
        let (_, views) = drain(&mut bal, &mut nodes, &mut rng);
        assert_eq!(views.len(), 1);
        for ops in &views[0] {
            assert_eq!(ops.writes.len(), balance::writes_per_node(k, 32));
        }
        histogram[views[0][0].reads.len()] += 1;
    }
    histogram
}

/// Two-sample chi-square over bins with data; returns (statistic, degrees of freedom).
fn two_sample(a: &[u64], b: &[u64]) -> (f64, usize) {
    let (na, nb) = (a.iter().sum::<u64>() as f64, b.iter().sum::<u64>() as f64);
    let mut stat = 0.0;
    let mut bins = 0;
    for (&x, &y) in a.iter().zip(b) {
        if x + y == 0 {
            continue;
        }
        let (x, y) = (x as f64, y as f64);
        let d = x * (nb / na).sqrt() - y * (na / nb).sqrt();
        stat += d * d / (x + y);
        bins += 1;
    }
    (stat, bins.max(2) - 1)
}

/// Far beyond the degrees of freedom (about p < 1e-6).
fn suspicious(stat: f64, df: usize) -> bool {
    stat > df as f64 + 7.0 * (2.0 * df as f64).sqrt() + 10.0
}

#[test]
fn which_node_serves_a_request_does_not_depend_on_the_blocks() {
    let k = 4;
    let base = node_view(Workload::Uniform, k, 1500, 1, false);
    for workload in [Workload::OneBlock, Workload::Scan] {
        let other = node_view(workload, k, 1500, 2, false);
        let (stat, df) = two_sample(&base, &other);
        assert!(
            !suspicious(stat, df),
            "{workload:?}: chi2 {stat:.1} on {df}"
        );
    }
    // The same test rejects a static placement on the one-block workload.
    let leaky = node_view(Workload::OneBlock, k, 1500, 2, true);
    let honest = node_view(Workload::Uniform, k, 1500, 3, true);
    let (stat, df) = two_sample(&honest, &leaky);
    assert!(
        suspicious(stat, df),
        "a static placement passed: chi2 {stat:.1} on {df}"
    );
}

#[test]
fn node_capacity_and_writes_follow_the_documented_bounds() {
    // One node needs every block plus the held-back slots and a batch.
    assert_eq!(node_blocks_needed(1000, 1), 1000 + 64 * 32 + 64);
    // Four nodes need a little over a quarter each (the Chernoff slack shrinks with size).
    let quarter = node_blocks_needed(1 << 18, 4) as f64 / f64::from(1 << 16);
    assert!((1.0..1.1).contains(&quarter), "{quarter}");
    assert_eq!(balance::writes_per_node(4, 32), 9);
    assert_eq!(balance::writes_per_node(1, 32), 32);
    let mut rng = ChaCha20Rng::seed_from_u64(0);
    assert!(Balancer::create(16, 1000, &[100, 100], &mut rng).is_err());
}
