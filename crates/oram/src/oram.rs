//! The client's ORAM state machine: position map, partitions, eviction cache, batches.
//!
//! One batch (ObliviStore's concurrent requests, section 3):
//! 1. [`Oram::begin_batch`] takes pending requests strictly in arrival order, gives each a
//!    partition to read and returns the slots to read: one per filled level of that
//!    partition on the store. The partition is the block's home, drawn uniformly at its
//!    previous access and never read since, even when the block now sits in the eviction
//!    cache (then every slot read is a dummy). Reading a random partition for cached blocks
//!    instead (as SSS section 4 does) leaks: the first read after the eviction pass wrote
//!    the block back hits the partition just written, which a repeat-one-block workload
//!    makes frequent (our obliviousness test caught it). A *fake* read of a uniformly random
//!    partition is issued for a request whose block has an earlier request in the batch
//!    (ObliviStore's rule); its block is pinned in the cache until it is applied. Several
//!    requests may read one partition, each its own unread slots, and a partition being
//!    shuffled is read as it stands ([`shuffle`]: levels its job holds in full come from the
//!    job's buffer). A batch ends early only at a request whose partition has a level whose
//!    public read count reached its dummy budget; that request keeps its partition and it
//!    and every later one wait, whatever they ask.
//! 2. [`Oram::finish_batch`] gets the sealed slots back, opens the real ones, applies the
//!    operations and moves each accessed block to the cache of a fresh random partition.
//!    Requests for one block are applied in arrival order (the earlier ones are in the same
//!    batch or an earlier one), so every request of the batch is answered here, after every
//!    read of the batch completed.
//! 3. Evictions: [`Oram::eviction_targets`] lists each read partition once (so every read
//!    of a partition is followed by a write before the next read, which bounds how many
//!    dummies a level needs) and `EVICTION_RATE` round-robin partitions per request.
//!    A write carries one block from the partition's cache, or a dummy; the store cannot
//!    tell which. [`Oram::queue_evictions`] queues them as background jobs ([`shuffle`]):
//!    [`Oram::begin_shuffle`] / [`Oram::finish_shuffle`] run their I/O in waves between
//!    batches; no read waits for them.
//!    [`Oram::plan_write`] and [`Oram::finish_write`] are the same rebuild in one piece
//!    (recovery uses them).

use std::collections::{HashMap, VecDeque};

use rand::{CryptoRng, Rng};

use crate::error::OramError;
use crate::params::{Geometry, EVICTION_RATE};
use crate::partition::Partition;
use crate::seal::{Sealer, SlotPlace, KEY_LEN};

mod rebuild;
pub mod shuffle;

pub use shuffle::ShuffleWave;

/// Position-map marker: the block was never written; it reads as zeros.
pub const LOC_NOWHERE: u32 = u32::MAX;
/// Position-map marker: the block is in the eviction cache.
pub const LOC_CACHE: u32 = u32::MAX - 1;
const SLOT_BITS: u32 = 24;

/// What a request does to its block.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// Return the block.
    Read,
    /// Replace the block (`B` bytes).
    Write(Vec<u8>),
    /// Replace `bytes.len()` bytes at `offset` inside the block; the rest is kept.
    Patch {
        /// Offset inside the block.
        offset: u32,
        /// New bytes.
        bytes: Vec<u8>,
    },
}

/// One logical request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// The caller's id, returned in the [`Answer`].
    pub id: u64,
    /// Logical block.
    pub block: u32,
    /// The operation.
    pub op: Op,
}

/// The answer to a request: the block's contents for a read, empty for a write.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Answer {
    /// The request's id.
    pub id: u64,
    /// Block contents (reads only).
    pub data: Vec<u8>,
}

/// A run of consecutive slots on one store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Extent {
    /// Store index.
    pub store: u32,
    /// First slot, counted from the start of the store.
    pub first_slot: u64,
    /// Number of slots.
    pub slots: u32,
}

struct Pending {
    request: Request,
    /// Arrival number (request ids are the caller's and need not be distinct).
    seq: u64,
    partition: Option<u32>,
    fake: bool,
}

/// A request whose read is done, waiting for the earlier requests for its block.
struct Parked {
    request: Request,
    fake: bool,
    /// The block as read (a real read), or `None` (a fake read: the block is in the cache
    /// once the earlier requests are applied).
    data: Option<Vec<u8>>,
}

struct Entry {
    request: Request,
    seq: u64,
    partition: u32,
    fake: bool,
    /// Index of the real slot among the batch's reads, with its place.
    real: Option<(usize, SlotPlace)>,
    /// Where the block is when no slot read carries it.
    from: Where,
}

/// Where a real read finds its block when no slot read of the batch carries it.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Where {
    /// In one of the partition's client-side levels.
    Local,
    /// In a level the partition's running shuffle job holds in its buffer.
    Buffer,
    /// In the eviction cache, or nowhere (never written), or in the slot read.
    Elsewhere,
}

/// Slots to read for one batch; hand back with the sealed bytes to [`Oram::finish_batch`].
pub struct Batch {
    entries: Vec<Entry>,
    /// The slots to read, one extent each, in this order.
    pub reads: Vec<Extent>,
}

impl Batch {
    /// Requests in the batch.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether the batch is empty.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Partitions read, in order.
    pub fn partitions(&self) -> Vec<u32> {
        self.entries.iter().map(|e| e.partition).collect()
    }
}

/// The levels to read back before rebuilding a level of one partition.
pub struct WritePlan {
    partition: u32,
    target: usize,
    sources: Vec<usize>,
    new_block: Option<u32>,
    /// Whole source-level regions to read, in this order.
    pub reads: Vec<Extent>,
}

/// A rebuilt level to write.
pub struct LevelWrite {
    /// Where.
    pub extent: Extent,
    /// The sealed slots, `extent.slots` of them.
    pub bytes: Vec<u8>,
}

/// Counters for benchmarks and the obliviousness tests (what storage saw).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Traffic {
    /// Logical requests answered.
    pub requests: u64,
    /// Extents read (each one contiguous storage read: a seek).
    pub extents_read: u64,
    /// Slots read.
    pub slots_read: u64,
    /// Extents written.
    pub extents_written: u64,
    /// Slots written.
    pub slots_written: u64,
}

/// The client's ORAM.
pub struct Oram {
    pub(crate) geometry: Geometry,
    pub(crate) instance: [u8; 16],
    pub(crate) slot_key: [u8; KEY_LEN],
    pub(crate) session: u32,
    pub(crate) rebuilds: u32,
    pub(crate) sweep: u32,
    pub(crate) clean: bool,
    pub(crate) home: Vec<u32>,
    pub(crate) loc: Vec<u32>,
    pub(crate) partitions: Vec<Partition>,
    pub(crate) cached: HashMap<u32, Vec<u8>>,
    pub(crate) local_data: HashMap<u32, Vec<u8>>,
    sweep_credit: u32,
    sealer: Sealer,
    pins: HashMap<u32, u32>,
    pending: VecDeque<Pending>,
    /// Per block: the arrival numbers of its requests not applied yet, in order.
    order: HashMap<u32, VecDeque<u64>>,
    parked: HashMap<u64, Parked>,
    next_seq: u64,
    traffic: Traffic,
    shuffler: shuffle::Shuffler,
}

impl Oram {
    /// A new, empty ORAM (every block reads as zeros) with fresh keys, in session 1.
    pub fn create(geometry: Geometry, rng: &mut impl CryptoRng) -> Result<Oram, OramError> {
        let mut instance = [0u8; 16];
        rng.fill_bytes(&mut instance);
        let mut slot_key = [0u8; KEY_LEN];
        rng.fill_bytes(&mut slot_key);
        let home = (0..geometry.blocks)
            .map(|_| rng.random_range(0..geometry.partitions))
            .collect();
        let loc = vec![LOC_NOWHERE; geometry.blocks as usize];
        let partitions = (0..geometry.partitions)
            .map(|_| Partition::new(geometry.levels()))
            .collect();
        Oram::assemble(
            geometry,
            instance,
            slot_key,
            1,
            0,
            false,
            home,
            loc,
            partitions,
            HashMap::new(),
            HashMap::new(),
        )
    }

    #[allow(clippy::too_many_arguments)]
    pub(crate) fn assemble(
        geometry: Geometry,
        instance: [u8; 16],
        slot_key: [u8; KEY_LEN],
        session: u32,
        sweep: u32,
        clean: bool,
        home: Vec<u32>,
        loc: Vec<u32>,
        partitions: Vec<Partition>,
        cached: HashMap<u32, Vec<u8>>,
        local_data: HashMap<u32, Vec<u8>>,
    ) -> Result<Oram, OramError> {
        let sealer = Sealer::new(&slot_key, instance, session)?;
        let shuffler = shuffle::Shuffler::new(shuffle::expected_cost(&geometry));
        Ok(Oram {
            geometry,
            instance,
            slot_key,
            session,
            rebuilds: 0,
            sweep,
            clean,
            home,
            loc,
            partitions,
            cached,
            local_data,
            sweep_credit: 0,
            sealer,
            pins: HashMap::new(),
            pending: VecDeque::new(),
            order: HashMap::new(),
            parked: HashMap::new(),
            next_seq: 0,
            traffic: Traffic::default(),
            shuffler,
        })
    }

    /// The shape.
    pub fn geometry(&self) -> &Geometry {
        &self.geometry
    }

    /// Blocks in the eviction cache (the client-side stash).
    pub fn cache_len(&self) -> usize {
        self.cached.len()
    }

    /// Requests waiting for a batch.
    pub fn pending_len(&self) -> usize {
        self.pending.len()
    }

    /// Storage traffic so far.
    pub fn traffic(&self) -> &Traffic {
        &self.traffic
    }

    /// The session number (durable before this session writes a slot).
    pub fn session(&self) -> u32 {
        self.session
    }

    /// Whether the state was closed cleanly (false while a session runs).
    pub fn was_clean(&self) -> bool {
        self.clean
    }

    /// Starts a new session: a new nonce and epoch space, marked unclean until
    /// [`crate::state::encode`] is called with `clean`. The caller must make the resulting
    /// state durable before the first slot is written.
    pub fn begin_session(&mut self) -> Result<(), OramError> {
        self.session = self.session.checked_add(1).ok_or(OramError::State(
            "session counter exhausted; re-create the store".into(),
        ))?;
        self.rebuilds = 0;
        self.clean = false;
        self.sealer = Sealer::new(&self.slot_key, self.instance, self.session)?;
        Ok(())
    }

    /// Queues a request. Checks the block id and the operation's size.
    pub fn submit(&mut self, request: Request) -> Result<(), OramError> {
        if request.block >= self.geometry.blocks {
            return Err(OramError::OutOfRange {
                block: u64::from(request.block),
                blocks: self.geometry.blocks,
            });
        }
        let b = self.geometry.block_size as usize;
        match &request.op {
            Op::Read => {}
            Op::Write(data) if data.len() == b => {}
            Op::Patch { offset, bytes } if (*offset as usize).saturating_add(bytes.len()) <= b => {}
            _ => {
                return Err(OramError::Params(
                    "a write must fit inside its block".into(),
                ))
            }
        }
        self.pending.push_back(Pending {
            request,
            seq: self.next_seq,
            partition: None,
            fake: false,
        });
        self.next_seq += 1;
        Ok(())
    }

    fn unpin(&mut self, block: u32) {
        if let Some(count) = self.pins.get_mut(&block) {
            *count -= 1;
            if *count == 0 {
                self.pins.remove(&block);
            }
        }
    }

    /// Forms the next batch of at most `max` requests, in arrival order (see the module
    /// docs). Returns `None` when nothing is pending, and an empty batch when the first
    /// pending request's partition has a level whose read budget is spent (the caller then
    /// runs shuffle work: [`Oram::begin_shuffle`] with `force`).
    pub fn begin_batch(
        &mut self,
        max: usize,
        rng: &mut impl CryptoRng,
    ) -> Result<Option<Batch>, OramError> {
        if self.pending.is_empty() || max == 0 {
            return Ok(None);
        }
        self.shuffler.priority = None;
        let mut reads = Vec::new();
        let mut entries = Vec::new();
        while entries.len() < max {
            let Some(mut p) = self.pending.pop_front() else {
                break;
            };
            let partition = self.draw(&mut p, rng);
            if !self.can_read(partition) {
                // The batch ends here, whatever the request asks: later requests never
                // overtake it (so none is answered before an earlier one for its block is),
                // and the shuffler runs this partition's work first.
                self.shuffler.priority = Some(partition);
                self.pending.push_front(p);
                break;
            }
            let entry = self.read_partition(p.request, p.seq, partition, p.fake, &mut reads)?;
            entries.push(entry);
        }
        self.traffic.extents_read += reads.len() as u64;
        self.traffic.slots_read += reads.len() as u64;
        Ok(Some(Batch { entries, reads }))
    }

    /// The partition request `p` reads, drawn once (when it first reaches a batch): the
    /// block's home when no earlier request for it is outstanding, else a fake read of a
    /// uniformly random partition (ObliviStore's rule).
    fn draw(&mut self, p: &mut Pending, rng: &mut impl CryptoRng) -> u32 {
        if let Some(partition) = p.partition {
            return partition;
        }
        let block = p.request.block;
        let queue = self.order.entry(block).or_default();
        p.fake = !queue.is_empty();
        queue.push_back(p.seq);
        let partition = if p.fake {
            // Pinned: the block stays in the cache until this request is applied.
            *self.pins.entry(block).or_insert(0) += 1;
            rng.random_range(0..self.geometry.partitions)
        } else {
            self.home[block as usize]
        };
        p.partition = Some(partition);
        partition
    }

    /// Whether one more read of `partition` finds an unread dummy in every level it reads
    /// from the store, by public counts only: a level holds at most `capacity` real blocks,
    /// so `slots - capacity` reads of it never run out of dummies, whichever blocks they
    /// wanted. Levels the shuffle buffer holds are not read (see [`Oram::read_partition`]).
    fn can_read(&self, partition: u32) -> bool {
        let held = self.shuffler.held_levels(partition);
        let part = &self.partitions[partition as usize];
        let g = &self.geometry;
        (g.local_levels()..part.levels.len()).all(|l| {
            let level = &part.levels[l];
            !level.filled || held.contains(&l) || level.reads < g.slots(l) - g.capacity(l)
        })
    }

    /// Plans one request's read of `partition`: one slot of every filled level on the store
    /// (the block's slot where it is, an unread dummy elsewhere), except the levels a running
    /// shuffle job of the partition has read in full: the job's buffer holds those (the
    /// store saw the job read them), so they are not read again and the block, if it is
    /// there, is taken from the buffer. Appends the slots to `reads`.
    fn read_partition(
        &mut self,
        request: Request,
        seq: u64,
        partition: u32,
        fake: bool,
        reads: &mut Vec<Extent>,
    ) -> Result<Entry, OramError> {
        let target = if fake {
            LOC_NOWHERE
        } else {
            self.loc[request.block as usize]
        };
        let held = self.shuffler.held_levels(partition);
        let mut real = None;
        let mut from = Where::Elsewhere;
        let local_levels = self.geometry.local_levels();
        let part = &mut self.partitions[partition as usize];
        for (level_index, level) in part.levels.iter_mut().enumerate() {
            if !level.filled {
                continue;
            }
            let here = target != LOC_NOWHERE
                && target != LOC_CACHE
                && (target >> SLOT_BITS) as usize == level_index;
            let slot_here = target & ((1 << SLOT_BITS) - 1);
            if level_index < local_levels || held.contains(&level_index) {
                // A client-side level, or one in the shuffle buffer: nothing to read from
                // the store.
                if here {
                    level.consume(slot_here);
                    from = if level_index < local_levels {
                        Where::Local
                    } else {
                        Where::Buffer
                    };
                }
                continue;
            }
            let slot = if here {
                real = Some((
                    reads.len(),
                    SlotPlace {
                        partition,
                        level: level_index as u8,
                        region: level.region,
                        slot: slot_here,
                        epoch: level.epoch,
                    },
                ));
                slot_here
            } else {
                // Never empty: `can_read` checked the level's read budget (reported, never
                // a panic).
                level
                    .dummies
                    .pop()
                    .ok_or(OramError::Internal("a level ran out of dummies"))?
            };
            level.consume(slot);
            let first_slot = self
                .geometry
                .region_start(partition, level_index, level.region)
                + u64::from(slot);
            reads.push(Extent {
                store: partition % self.geometry.stores,
                first_slot,
                slots: 1,
            });
        }
        Ok(Entry {
            request,
            seq,
            partition,
            fake,
            real,
            from,
        })
    }

    /// Completes a batch with the sealed slots read (concatenated in `batch.reads` order) and
    /// returns the answers: of this batch's requests, and of earlier fake reads that waited
    /// for this batch's real read of their block. A request is answered only once every
    /// earlier request for its block is.
    pub fn finish_batch(
        &mut self,
        batch: Batch,
        sealed: &mut [u8],
        rng: &mut impl CryptoRng,
    ) -> Result<Vec<Answer>, OramError> {
        let slot_bytes = self.geometry.sealed_slot() as usize;
        let want = batch.reads.len() * slot_bytes;
        if sealed.len() != want {
            return Err(OramError::ShortRead {
                store: 0,
                got: sealed.len(),
                want,
            });
        }
        let mut touched = Vec::with_capacity(batch.entries.len());
        for entry in batch.entries {
            let data = if entry.fake {
                None
            } else {
                Some(self.fetch(&entry, sealed, slot_bytes)?)
            };
            touched.push(entry.request.block);
            self.parked.insert(
                entry.seq,
                Parked {
                    request: entry.request,
                    fake: entry.fake,
                    data,
                },
            );
        }
        let mut answers = Vec::new();
        for block in touched {
            self.apply_ready(block, &mut answers, rng)?;
        }
        self.traffic.requests += answers.len() as u64;
        Ok(answers)
    }

    /// The block a real read found: in its slot, a client-side level, the cache, or nowhere.
    fn fetch(
        &mut self,
        entry: &Entry,
        sealed: &mut [u8],
        slot_bytes: usize,
    ) -> Result<Vec<u8>, OramError> {
        let block = entry.request.block;
        match entry.real {
            Some((index, place)) => {
                let slot = &mut sealed[index * slot_bytes..(index + 1) * slot_bytes];
                let plain = self.sealer.open(place, slot).ok_or(OramError::Tampered {
                    store: place.partition % self.geometry.stores,
                    partition: place.partition,
                    level: u32::from(place.level),
                    slot: place.slot,
                })?;
                let data = plain.to_vec();
                self.partitions[entry.partition as usize].real -= 1;
                self.shuffler.release(entry.partition, block);
                Ok(data)
            }
            None if entry.from == Where::Local => {
                self.partitions[entry.partition as usize].real -= 1;
                self.shuffler.release(entry.partition, block);
                self.local_data
                    .remove(&block)
                    .ok_or(OramError::Internal("a client-side block has no data"))
            }
            None if entry.from == Where::Buffer => {
                self.partitions[entry.partition as usize].real -= 1;
                self.shuffler
                    .take(entry.partition, block, self.geometry.block_size as usize)
            }
            None if self.loc[block as usize] == LOC_NOWHERE => {
                Ok(vec![0u8; self.geometry.block_size as usize])
            }
            None if self.loc[block as usize] == LOC_CACHE => {
                let home = &mut self.partitions[entry.partition as usize].cache;
                home.retain(|&b| b != block);
                self.shuffler.release(entry.partition, block);
                self.cached
                    .remove(&block)
                    .ok_or(OramError::Internal("a cached block has no data"))
            }
            None => Err(OramError::Internal("a real read found no slot")),
        }
    }

    /// Applies, in arrival order, the requests for `block` whose reads are done and whose
    /// predecessors are all applied.
    fn apply_ready(
        &mut self,
        block: u32,
        answers: &mut Vec<Answer>,
        rng: &mut impl CryptoRng,
    ) -> Result<(), OramError> {
        loop {
            let Some(queue) = self.order.get_mut(&block) else {
                return Ok(());
            };
            let Some(parked) = queue.front().and_then(|seq| self.parked.remove(seq)) else {
                return Ok(());
            };
            queue.pop_front();
            if queue.is_empty() {
                self.order.remove(&block);
            }
            let mut data = match parked.data {
                Some(data) => data,
                None => {
                    self.unpin(block);
                    self.cached.remove(&block).ok_or(OramError::Internal(
                        "a fake read's block is not in the cache",
                    ))?
                }
            };
            let answer = match parked.request.op {
                Op::Read => data.clone(),
                Op::Write(new) => {
                    data = new;
                    Vec::new()
                }
                Op::Patch { offset, bytes } => {
                    let start = offset as usize;
                    data[start..start + bytes.len()].copy_from_slice(&bytes);
                    Vec::new()
                }
            };
            if !parked.fake {
                // A fresh, uniformly random home the store has never seen used for it.
                let home = rng.random_range(0..self.geometry.partitions);
                self.home[block as usize] = home;
                self.loc[block as usize] = LOC_CACHE;
                self.partitions[home as usize].cache.push(block);
            }
            self.cached.insert(block, data);
            answers.push(Answer {
                id: parked.request.id,
                data: answer,
            });
        }
    }

    /// The partitions to write after a batch that read `read` (see the module docs).
    pub fn eviction_targets(&mut self, read: &[u32]) -> Vec<u32> {
        let mut targets = read.to_vec();
        let (per, requests) = EVICTION_RATE;
        self.sweep_credit += read.len() as u32 * per;
        while self.sweep_credit >= requests {
            self.sweep_credit -= requests;
            targets.push(self.sweep);
            self.sweep = (self.sweep + 1) % self.geometry.partitions;
        }
        targets
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::params::Geometry;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn same_block_twice_in_one_batch_is_a_fake_read() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut oram = Oram::create(Geometry::new(512, 64, 1).unwrap(), &mut rng).unwrap();
        oram.submit(Request {
            id: 1,
            block: 5,
            op: Op::Write(vec![9; 512]),
        })
        .unwrap();
        oram.submit(Request {
            id: 2,
            block: 5,
            op: Op::Read,
        })
        .unwrap();
        let batch = oram.begin_batch(32, &mut rng).unwrap().unwrap();
        // Both are in the batch, in arrival order; the second reads a uniformly random
        // partition, not the block's home again.
        assert_eq!(batch.len(), 2);
        assert!(!batch.entries[0].fake);
        assert!(batch.entries[1].fake);
    }

    #[test]
    fn bad_requests_are_refused() {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut oram = Oram::create(Geometry::new(512, 64, 1).unwrap(), &mut rng).unwrap();
        assert!(oram
            .submit(Request {
                id: 1,
                block: 64,
                op: Op::Read
            })
            .is_err());
        assert!(oram
            .submit(Request {
                id: 1,
                block: 1,
                op: Op::Write(vec![0; 10])
            })
            .is_err());
        let patch = Op::Patch {
            offset: 510,
            bytes: vec![0; 3],
        };
        assert!(oram
            .submit(Request {
                id: 1,
                block: 1,
                op: patch
            })
            .is_err());
    }
}
