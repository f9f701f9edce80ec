//! The oblivious load balancer: spreads one block space over several ORAM nodes so that which
//! node serves a request reveals nothing about which block it is (ObliviStore's distributed
//! setting: the nodes are the partitions of a partition ORAM one level up). Sans-I/O: it plans
//! what each node reads and writes per batch and takes the replies back; the HTTPS node client,
//! the sealed state file and the NBD export are in `pir-blockstore`.
//!
//! How it works (the argument is in docs/oram.md, "ORAM nodes behind an oblivious load
//! balancer"):
//! - every logical block has a node, drawn uniformly at random when it was last accessed (or at
//!   init) and never sent anywhere since, and a place: a slot of that node, "never written"
//!   (reads as zeros), or the balancer's eviction cache;
//! - a batch is padded to a power of two `m <= BATCH` accesses; each access reads exactly one
//!   node-block: the block's slot on its node, or (cached, never written, repeated in the
//!   batch, or padding) a random slot of a node that is uniform and independent of everything
//!   sent before. Then the block gets a fresh uniform node and joins the cache;
//! - every batch also writes exactly [`writes_per_node`]`(k, m)` blocks to every node: cached
//!   blocks of that node, oldest first, then dummies (zeros into a free slot);
//! - a slot read since the last durable state is not written again until the next one is
//!   durable ([`Balancer::mark_durable`]), so the durable state always points at intact slots.
//!
//! So every node's view per batch is: `m` reads spread multinomially over the nodes, and a
//! fixed number of writes, whatever blocks were asked for.

use std::collections::{HashMap, VecDeque};

use rand::{CryptoRng, Rng, RngCore};

use crate::error::OramError;
use crate::oram::{Answer, Op, Request};

/// Most accesses in one batch (the ORAM core's `MAX_BATCH`).
pub const BATCH: usize = 32;
/// Batches between checkpoints (node flushes and a durable balancer state), whatever the
/// client asks: bounds the slots held back by [`Balancer::mark_durable`].
pub const CHECKPOINT_BATCHES: u32 = 64;
/// Most blocks one node's eviction queue may hold (see docs/oram.md: above it with
/// probability below 2^-80 per batch for 2 to 64 nodes).
pub const QUEUE_LIMIT: usize = 256;
/// Most nodes.
pub const MAX_NODES: usize = 64;
/// Security parameter of the capacity bounds: each fails with probability below 2^-80.
const LN_FAIL: f64 = 80.0 * std::f64::consts::LN_2;

const NEVER_WRITTEN: u32 = u32::MAX;
const CACHED: u32 = u32::MAX - 1;
/// Largest node slot (the two above are markers).
pub const MAX_NODE_BLOCKS: u32 = u32::MAX - 2;

/// Node-blocks every node writes per batch of `m` accesses over `k` nodes: `m` for one node,
/// else `ceil(9m / 8k)` (9/8 of the expected arrivals: the queues drain; docs/oram.md has
/// the bound).
pub fn writes_per_node(k: usize, m: usize) -> usize {
    if k <= 1 {
        m
    } else {
        (9 * m).div_ceil(8 * k)
    }
}

/// An upper bound on a Binomial(n, 1/k) variable of mean `mu = n/k` that fails with
/// probability below 2^-80 (Chernoff: `P(X >= (1+d)mu) <= exp(-d^2 mu / (2+d))`).
fn chernoff(n: u64, k: u64) -> u64 {
    if k <= 1 {
        return n;
    }
    let mu = n as f64 / k as f64;
    let l = LN_FAIL;
    let bound = mu + (l + (l * l + 8.0 * mu * l).sqrt()) / 2.0;
    (bound.ceil() as u64).min(n)
}

/// Node-blocks each of `k` nodes needs for `blocks` logical blocks: its share of the blocks
/// and of the slots held back between checkpoints (each a Chernoff bound at 2^-80), and a
/// batch of writes.
pub fn node_blocks_needed(blocks: u64, k: usize) -> u64 {
    let k = k.max(1) as u64;
    let held = u64::from(CHECKPOINT_BATCHES) * BATCH as u64;
    chernoff(blocks, k) + chernoff(held, k) + 2 * BATCH as u64
}

/// Where a logical block is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Place {
    node: u16,
    /// A slot of `node`, or [`NEVER_WRITTEN`], or [`CACHED`] (waiting to go to `node`).
    slot: u32,
}

/// What one node is asked in one batch: read these slots (the reply is their blocks, in
/// order), then write these.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeOps {
    /// Slots to read.
    pub reads: Vec<u32>,
    /// Slots to write, with whole blocks.
    pub writes: Vec<(u32, Vec<u8>)>,
}

#[derive(Clone, Copy, Debug)]
enum Fetch {
    /// Read number `at` of `node`'s reads.
    Node {
        node: usize,
        at: usize,
    },
    Zero,
    Cache,
    /// The block's value comes from an earlier access of the same batch.
    Earlier,
}

#[derive(Debug)]
struct Job {
    request: Request,
    fetch: Fetch,
}

/// One planned batch: send `nodes[i]` to node `i`, then hand the replies to
/// [`Balancer::finish_batch`].
#[derive(Debug)]
pub struct Plan {
    /// Per node, what to read and write.
    pub nodes: Vec<NodeOps>,
    jobs: Vec<Job>,
}

/// Counters of what went to the nodes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NodeTraffic {
    /// Logical requests answered.
    pub requests: u64,
    /// Batches sent.
    pub batches: u64,
    /// Node-blocks read (real and dummy).
    pub blocks_read: u64,
    /// Node-blocks written (real and dummy).
    pub blocks_written: u64,
}

/// The balancer's state: the place of every block, the eviction cache, free slots.
pub struct Balancer {
    block_size: u32,
    place: Vec<Place>,
    node_blocks: Vec<u32>,
    free: Vec<Vec<u32>>,
    held: Vec<Vec<u32>>,
    queues: Vec<VecDeque<u32>>,
    cache: HashMap<u32, Vec<u8>>,
    pending: VecDeque<Request>,
    since_durable: u32,
    traffic: NodeTraffic,
}

fn params(message: String) -> OramError {
    OramError::Params(message)
}

impl Balancer {
    /// A new balancer of `blocks` blocks of `block_size` bytes over nodes of `node_blocks`
    /// node-blocks each; every block starts never written, on a uniformly random node.
    pub fn create<R: RngCore + CryptoRng>(
        block_size: u32,
        blocks: u32,
        node_blocks: &[u32],
        rng: &mut R,
    ) -> Result<Balancer, OramError> {
        Self::check_shape(block_size, blocks, node_blocks)?;
        let k = node_blocks.len();
        let place = (0..blocks)
            .map(|_| Place {
                node: rng.random_range(0..k) as u16,
                slot: NEVER_WRITTEN,
            })
            .collect();
        Ok(Self::assemble(
            block_size,
            node_blocks.to_vec(),
            place,
            HashMap::new(),
            Vec::new(),
        ))
    }

    fn check_shape(block_size: u32, blocks: u32, node_blocks: &[u32]) -> Result<(), OramError> {
        let k = node_blocks.len();
        if k == 0 || k > MAX_NODES {
            return Err(params(format!("1 to {MAX_NODES} nodes, not {k}")));
        }
        if blocks == 0 || block_size == 0 {
            return Err(params("an empty block space".into()));
        }
        let need = node_blocks_needed(u64::from(blocks), k);
        for (i, &have) in node_blocks.iter().enumerate() {
            if u64::from(have) < need || have > MAX_NODE_BLOCKS {
                return Err(params(format!(
                    "node {i} holds {have} blocks; {blocks} blocks over {k} node(s) need {need} \
                     per node (`pir oram node-size` prints the size to init each node with)"
                )));
            }
        }
        Ok(())
    }

    fn assemble(
        block_size: u32,
        node_blocks: Vec<u32>,
        place: Vec<Place>,
        cache: HashMap<u32, Vec<u8>>,
        order: Vec<u32>,
    ) -> Balancer {
        let k = node_blocks.len();
        let mut used: Vec<Vec<bool>> = node_blocks
            .iter()
            .map(|&n| vec![false; n as usize])
            .collect();
        let mut queues = vec![VecDeque::new(); k];
        for p in &place {
            if p.slot < CACHED {
                used[p.node as usize][p.slot as usize] = true;
            }
        }
        for block in order {
            queues[place[block as usize].node as usize].push_back(block);
        }
        let free = used
            .iter()
            .map(|u| (0..u.len() as u32).filter(|&s| !u[s as usize]).collect())
            .collect();
        Balancer {
            block_size,
            place,
            node_blocks,
            free,
            held: vec![Vec::new(); k],
            queues,
            cache,
            pending: VecDeque::new(),
            since_durable: 0,
            traffic: NodeTraffic::default(),
        }
    }

    /// Block size in bytes.
    pub fn block_size(&self) -> u32 {
        self.block_size
    }

    /// Logical blocks.
    pub fn blocks(&self) -> u32 {
        self.place.len() as u32
    }

    /// Nodes.
    pub fn nodes(&self) -> usize {
        self.node_blocks.len()
    }

    /// Node-blocks of each node.
    pub fn node_blocks(&self) -> &[u32] {
        &self.node_blocks
    }

    /// Blocks in the eviction cache.
    pub fn cache_len(&self) -> usize {
        self.cache.len()
    }

    /// What went to the nodes so far.
    pub fn traffic(&self) -> &NodeTraffic {
        &self.traffic
    }

    /// Requests queued.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Whether enough batches ran since the last durable state that a checkpoint is due
    /// (flush the nodes, write the state, [`Balancer::mark_durable`]).
    pub fn checkpoint_due(&self) -> bool {
        self.since_durable >= CHECKPOINT_BATCHES
    }

    /// Queues a request (checked now: a bad one is refused, not planned).
    pub fn submit(&mut self, request: Request) -> Result<(), OramError> {
        if request.block >= self.blocks() {
            return Err(OramError::OutOfRange {
                block: u64::from(request.block),
                blocks: self.blocks(),
            });
        }
        let b = self.block_size as usize;
        match &request.op {
            Op::Read => {}
            Op::Write(data) if data.len() == b => {}
            Op::Patch { offset, bytes } if (*offset as usize).saturating_add(bytes.len()) <= b => {}
            _ => return Err(params("a write that does not fit its block".into())),
        }
        self.pending.push_back(request);
        Ok(())
    }

    fn dummy_read<R: Rng>(&self, node: usize, nodes: &mut [NodeOps], rng: &mut R) {
        let slot = rng.random_range(0..self.node_blocks[node]);
        nodes[node].reads.push(slot);
    }

    /// Plans the next batch (up to [`BATCH`] queued requests), or `None` if none is queued.
    pub fn begin_batch<R: RngCore + CryptoRng>(
        &mut self,
        rng: &mut R,
    ) -> Result<Option<Plan>, OramError> {
        let n = self.pending.len().min(BATCH);
        if n == 0 {
            return Ok(None);
        }
        let m = n.next_power_of_two();
        let k = self.nodes();
        let mut nodes = vec![NodeOps::default(); k];
        let mut jobs = Vec::with_capacity(n);
        let mut arrivals = Vec::with_capacity(n);
        for request in self.pending.drain(..n).collect::<Vec<_>>() {
            let block = request.block;
            let was = self.place[block as usize];
            let fetch = if arrivals.contains(&block) {
                self.dummy_read(rng.random_range(0..k), &mut nodes, rng);
                Fetch::Earlier
            } else if was.slot == CACHED {
                let queue = &mut self.queues[was.node as usize];
                let i = queue.iter().position(|&q| q == block);
                let i = i.ok_or(OramError::Internal("a cached block in no queue"))?;
                queue.remove(i);
                self.dummy_read(rng.random_range(0..k), &mut nodes, rng);
                Fetch::Cache
            } else if was.slot == NEVER_WRITTEN {
                // Its node is uniform and unsent: reading a random slot there looks like a read.
                self.dummy_read(was.node as usize, &mut nodes, rng);
                Fetch::Zero
            } else {
                let node = was.node as usize;
                nodes[node].reads.push(was.slot);
                self.held[node].push(was.slot);
                Fetch::Node {
                    node,
                    at: nodes[node].reads.len() - 1,
                }
            };
            if !matches!(fetch, Fetch::Earlier) {
                arrivals.push(block);
                self.place[block as usize] = Place {
                    node: rng.random_range(0..k) as u16,
                    slot: CACHED,
                };
            }
            jobs.push(Job { request, fetch });
        }
        for _ in n..m {
            self.dummy_read(rng.random_range(0..k), &mut nodes, rng);
        }
        self.plan_evictions(&mut nodes, writes_per_node(k, m), rng)?;
        for &block in &arrivals {
            self.queues[self.place[block as usize].node as usize].push_back(block);
        }
        if self.queues.iter().any(|q| q.len() > QUEUE_LIMIT) {
            return Err(OramError::Internal(
                "a node's eviction queue passed its bound (probability below 2^-80)",
            ));
        }
        self.since_durable += 1;
        self.traffic.batches += 1;
        self.traffic.blocks_read += m as u64;
        self.traffic.blocks_written += (k * writes_per_node(k, m)) as u64;
        Ok(Some(Plan { nodes, jobs }))
    }

    /// `w` writes to every node: queued blocks first, then zeros into a free slot.
    fn plan_evictions<R: Rng>(
        &mut self,
        nodes: &mut [NodeOps],
        w: usize,
        rng: &mut R,
    ) -> Result<(), OramError> {
        let b = self.block_size as usize;
        for (node, ops) in nodes.iter_mut().enumerate() {
            for _ in 0..w {
                let free = &mut self.free[node];
                if free.is_empty() {
                    return Err(OramError::Internal(
                        "a node ran out of free slots (below its capacity bound's 2^-80)",
                    ));
                }
                let i = rng.random_range(0..free.len());
                match self.queues[node].pop_front() {
                    Some(block) => {
                        let slot = free.swap_remove(i);
                        let data = self
                            .cache
                            .remove(&block)
                            .ok_or(OramError::Internal("a queued block not in the cache"))?;
                        self.place[block as usize].slot = slot;
                        ops.writes.push((slot, data));
                    }
                    None => ops.writes.push((free[i], vec![0u8; b])),
                }
            }
        }
        Ok(())
    }

    /// Takes every node's reply (its reads' blocks, concatenated, in order) and answers the
    /// batch's requests, in order.
    pub fn finish_batch(
        &mut self,
        plan: Plan,
        replies: &[Vec<u8>],
    ) -> Result<Vec<Answer>, OramError> {
        let b = self.block_size as usize;
        if replies.len() != plan.nodes.len() {
            return Err(OramError::Internal("a reply per node"));
        }
        for (node, (ops, reply)) in plan.nodes.iter().zip(replies).enumerate() {
            if reply.len() != ops.reads.len() * b {
                return Err(OramError::ShortRead {
                    store: node as u32,
                    got: reply.len(),
                    want: ops.reads.len() * b,
                });
            }
        }
        let mut current: HashMap<u32, Vec<u8>> = HashMap::new();
        let mut answers = Vec::with_capacity(plan.jobs.len());
        for job in plan.jobs {
            let block = job.request.block;
            let value = match current.entry(block) {
                std::collections::hash_map::Entry::Occupied(seen) => seen.into_mut(),
                std::collections::hash_map::Entry::Vacant(first) => first.insert(match job.fetch {
                    Fetch::Node { node, at } => replies[node][at * b..(at + 1) * b].to_vec(),
                    Fetch::Zero => vec![0u8; b],
                    Fetch::Cache => self
                        .cache
                        .remove(&block)
                        .ok_or(OramError::Internal("a cached block went missing"))?,
                    Fetch::Earlier => return Err(OramError::Internal("an earlier access")),
                }),
            };
            let data = match job.request.op {
                Op::Read => value.clone(),
                Op::Write(new) => {
                    *value = new;
                    Vec::new()
                }
                Op::Patch { offset, bytes } => {
                    let at = offset as usize;
                    value[at..at + bytes.len()].copy_from_slice(&bytes);
                    Vec::new()
                }
            };
            answers.push(Answer {
                id: job.request.id,
                data,
            });
        }
        self.traffic.requests += answers.len() as u64;
        self.cache.extend(current);
        Ok(answers)
    }

    /// The state just written is durable: slots read before it may be written again.
    pub fn mark_durable(&mut self) {
        for (free, held) in self.free.iter_mut().zip(&mut self.held) {
            free.append(held);
        }
        self.since_durable = 0;
    }
}

mod codec;
pub use codec::{decode, encode};
