//! Background shuffling: evictions as resumable jobs whose I/O interleaves with batches
//! (ObliviStore section 4, its asynchronous shuffler).
//!
//! A batch no longer pays for its evictions before the next batch reads: each eviction is a
//! job (plan, read the source levels in chunks, rebuild, write the new level in chunks,
//! install) and the driver runs the jobs' I/O in *waves* between batches, a bounded number of
//! slots per batch, so a top-level rebuild (megabytes) is spread over several batches instead
//! of stopping every request while it runs.
//!
//! Reads never wait for a job. A job only reads its source levels until its new level is laid
//! out and writes nothing before that, so the sources stay readable as they stand; once the job has read and opened every source (`Shuffler::held_levels`), its
//! buffer holds them, and a batch reads nothing more of them (the store saw the job read
//! them in full): a request whose block is there takes it from the buffer. A block a batch
//! takes out of a running job (from a source, the client-side levels or the cache) is
//! released from it (`Shuffler::release`): its slot in the new level becomes a dummy. So
//! every slot of a level is still read at most once by batches between two rebuilds.
//!
//! Scheduling, all of it a function of what the store already sees (which partitions were
//! read, the round-robin sweep, how full each partition's levels are), never of which blocks
//! were asked:
//! - every read of a partition queues one eviction of it (owed by the read), so a level's
//!   reads keep pace with its rebuilds; a level on the store is read at most `slots -
//!   capacity` times (the dummies it surely has) before it is rebuilt: a batch stops at a
//!   request whose partition has a level at that count, and the shuffler runs that
//!   partition's jobs first (`Shuffler::priority`);
//! - jobs owed by reads run before sweep jobs; one job per partition at a time; at most
//!   [`MAX_RUNNING_JOBS`] run at once, one chunk of each per wave;
//! - rate: every queued job adds its expected cost (a running mean of planned job sizes)
//!   times [`OVERDRIVE`] to a slot credit, and waves run while credit is left; so the
//!   shuffler keeps up on average and no single batch pays for a whole rebuild;
//! - the bound on pending work (ObliviStore's semaphores): while more than
//!   [`MAX_OWED_JOBS`] evictions are owed, no new batch is formed and the driver shuffles
//!   instead, so the eviction cache cannot grow without limit when the store is slow.
//!
//! Crash safety: a job changes nothing in the position map or the levels until its last
//! write is done (it only reads the old levels, and writes the region the durable state does
//! not reference); [`crate::Client::sync`] runs every owed job to completion before the caller
//! commits a state, so a committed state never references a region being rebuilt.

use std::collections::{HashMap, VecDeque};

use rand::{CryptoRng, Rng};

use super::{Extent, LevelWrite, Oram, SLOT_BITS};
use crate::error::OramError;
use crate::partition::{Level, DUMMY};
use crate::seal::SlotPlace;

/// Most slots one job reads or writes in one wave (512 KiB at 4 KiB blocks): the unit that
/// bounds how long a wave stops the batches.
pub const SHUFFLE_CHUNK: u32 = 128;
/// Most jobs running at once (each holds the blocks of the levels it rebuilds).
pub const MAX_RUNNING_JOBS: usize = 32;
/// The bound on pending work: with more evictions owed than this, batches wait for the
/// shuffler (eight batches of 32 requests at the eviction rate 1.5 per request, with room).
pub const MAX_OWED_JOBS: usize = 512;
/// Most slots of one wave when the shuffler is forced (a sync, an idle driver).
pub const FORCED_WAVE_SLOTS: u64 = 4 * SHUFFLE_CHUNK as u64;
/// The shuffler runs this much faster than the mean rate work arrives at, so that owed work
/// drains instead of drifting up to the bound.
pub const OVERDRIVE: f64 = 1.25;
/// Most bytes of spare buffers the shuffler keeps for reuse (write pieces and job buffers;
/// client memory only). Reusing them saves an allocation, its page faults and the zeroing of
/// every piece and job: about a tenth of the CPU per request at 1 GiB (docs/benchmarks.md).
const SPARE_BYTES: usize = 8 << 20;

/// Slots of the next piece of a level with `rest` slots left: [`SHUFFLE_CHUNK`], or all of
/// them when one more would be left. Never a one-slot piece: one-slot reads are a batch's,
/// and the two kinds of read are told apart by size on purpose (the obliviousness tests).
fn piece(rest: u32) -> u32 {
    if rest <= SHUFFLE_CHUNK + 1 {
        rest
    } else {
        SHUFFLE_CHUNK
    }
}

/// The expected slots (read and written) of one eviction: levels below the top are a binary
/// counter, so level `l` is rebuilt by one eviction in `2^(l+1)`, reading about as many slots
/// as it writes (`2^(l+1)`); the top level is rebuilt once in `2^k`, reading the whole
/// partition. The starting value of the running mean the credit uses.
pub(crate) fn expected_cost(g: &crate::params::Geometry) -> f64 {
    let local = g.local_levels();
    let top = g.top as usize;
    let below = (local..top).map(|l| 2.0 * f64::from(g.slots(l)) / f64::from(2u32 << l));
    let whole: f64 = (local..=top).map(|l| f64::from(g.slots(l))).sum();
    below.sum::<f64>() + (whole + f64::from(g.slots(top))) / f64::from(g.z())
}

/// One piece of a source level to read.
struct Chunk {
    level: usize,
    first: u32,
    extent: Extent,
}

/// A rebuilt level waiting to be written.
struct Built {
    level: Level,
    epoch: u64,
    region: u8,
}

/// One eviction in progress.
struct Job {
    partition: u32,
    target: usize,
    sources: Vec<usize>,
    new_block: Option<u32>,
    chunks: Vec<Chunk>,
    next_read: usize,
    reals: Vec<u32>,
    /// The blocks the job holds: where each one's contents start in `plain`.
    data: HashMap<u32, usize>,
    /// The held blocks' contents, back to back: one buffer per job, reused
    /// ([`Shuffler::spare_jobs`]), instead of one allocation per block.
    plain: Vec<u8>,
    built: Option<Built>,
    next_write: u32,
    /// Blocks a batch took from the job's buffer or sources after the level was laid out:
    /// their slots in the new level become dummies.
    dead: Vec<u32>,
}

/// The shuffler's queues and counters (client memory only: it is empty whenever a state is
/// committed, see the module docs).
#[derive(Default)]
pub(crate) struct Shuffler {
    urgent: VecDeque<u32>,
    sweep: VecDeque<u32>,
    running: Vec<Job>,
    /// The partition of the request a batch stopped at (its read budget is spent): its
    /// jobs run first.
    pub(crate) priority: Option<u32>,
    credit: f64,
    mean_cost: f64,
    /// Write-piece buffers handed back by finished waves, for the next pieces.
    spare_writes: Vec<Vec<u8>>,
    /// Buffers of installed jobs (cleared), for the next jobs.
    spare_jobs: Vec<(HashMap<u32, usize>, Vec<u8>)>,
}

impl Shuffler {
    pub(crate) fn new(mean_cost: f64) -> Shuffler {
        Shuffler {
            mean_cost,
            ..Shuffler::default()
        }
    }

    /// The levels of `partition` its running job holds in full (every source level read
    /// and opened: the store saw the job read them); empty if none.
    pub(crate) fn held_levels(&self, partition: u32) -> &[usize] {
        match self.running.iter().find(|j| j.partition == partition) {
            Some(job) if job.built.is_some() => &job.sources,
            _ => &[],
        }
    }

    /// A batch took `block` out of `partition` (read from a level, from the client-side
    /// levels or from the eviction cache): the partition's running job, if it holds the
    /// block, must not place it.
    pub(crate) fn release(&mut self, partition: u32, block: u32) {
        let Some(job) = self.running.iter_mut().find(|j| j.partition == partition) else {
            return;
        };
        if job.new_block == Some(block) {
            job.new_block = None;
        }
        if job.data.remove(&block).is_some() {
            job.reals.retain(|&b| b != block);
            if job.built.is_some() {
                job.dead.push(block);
            }
        }
    }

    /// A batch reads `block` (of `size` bytes) from a level the partition's running job
    /// holds: its contents from the job's buffer, and the job no longer places it.
    pub(crate) fn take(
        &mut self,
        partition: u32,
        block: u32,
        size: usize,
    ) -> Result<Vec<u8>, OramError> {
        let data = self
            .running
            .iter()
            .find(|j| j.partition == partition)
            .and_then(|j| {
                let at = *j.data.get(&block)?;
                j.plain.get(at..at + size).map(<[u8]>::to_vec)
            })
            .ok_or(OramError::Internal(
                "a held block is not in the shuffle buffer",
            ))?;
        self.release(partition, block);
        Ok(data)
    }

    /// Bytes of spare buffers held.
    fn spare_bytes(&self) -> usize {
        let writes: usize = self.spare_writes.iter().map(Vec::capacity).sum();
        let jobs: usize = self.spare_jobs.iter().map(|(_, p)| p.capacity()).sum();
        writes + jobs
    }

    /// Keeps a finished write piece's buffer for reuse, within [`SPARE_BYTES`].
    fn keep_write(&mut self, bytes: Vec<u8>) {
        if self.spare_bytes() + bytes.capacity() <= SPARE_BYTES {
            self.spare_writes.push(bytes);
        }
    }

    /// A buffer of `len` bytes for a write piece. Its contents are stale (a reused buffer's
    /// old ciphertext): the caller overwrites every byte (every slot is sealed in full).
    fn write_buffer(&mut self, len: usize) -> Vec<u8> {
        let mut bytes = self.spare_writes.pop().unwrap_or_default();
        if bytes.len() >= len {
            bytes.truncate(len);
        } else {
            bytes.resize(len, 0);
        }
        bytes
    }

    fn is_running(&self, partition: u32) -> bool {
        self.running.iter().any(|j| j.partition == partition)
    }

    /// Evictions owed: queued and running.
    pub(crate) fn owed(&self) -> usize {
        self.urgent.len() + self.sweep.len() + self.running.len()
    }
}

/// One wave of shuffle I/O: read `reads` (concatenated, in order), write `writes`, then hand
/// the bytes read to [`Oram::finish_shuffle`]. No write overlaps a read of the same wave.
pub struct ShuffleWave {
    /// Slot ranges to read, in this order.
    pub reads: Vec<Extent>,
    /// Pieces of rebuilt levels to write.
    pub writes: Vec<LevelWrite>,
    /// Per read: the job's partition and its chunk index.
    read_by: Vec<(u32, usize)>,
    /// Partitions whose job wrote its last piece in this wave.
    completes: Vec<u32>,
}

impl Oram {
    /// Queues the evictions owed after a batch that read `read`: one per read partition
    /// (blocking it until done) and the sweep's, and adds their expected cost to the credit.
    pub fn queue_evictions(&mut self, read: &[u32]) {
        let targets = self.eviction_targets(read);
        let jobs = targets.len();
        // `eviction_targets` lists the read partitions first (one per read), then the
        // sweep's.
        for (i, partition) in targets.into_iter().enumerate() {
            if i < read.len() {
                self.shuffler.urgent.push_back(partition);
            } else {
                self.shuffler.sweep.push_back(partition);
            }
        }
        self.shuffler.credit += jobs as f64 * self.shuffler.mean_cost * OVERDRIVE;
    }

    /// Evictions owed (queued or running).
    pub fn shuffle_owed(&self) -> usize {
        self.shuffler.owed()
    }

    /// Whether batches must wait for the shuffler (the bound on pending work).
    pub fn shuffle_over_bound(&self) -> bool {
        self.shuffler.owed() > MAX_OWED_JOBS
    }

    /// Plans the next wave of shuffle I/O, or `None` when nothing is owed or (unless `force`)
    /// the credit is spent.
    pub fn begin_shuffle(
        &mut self,
        force: bool,
        rng: &mut impl CryptoRng,
    ) -> Result<Option<ShuffleWave>, OramError> {
        if self.shuffler.owed() == 0 {
            self.shuffler.credit = 0.0;
            return Ok(None);
        }
        if !force && self.shuffler.credit <= 0.0 {
            return Ok(None);
        }
        let limit = if force {
            FORCED_WAVE_SLOTS
        } else {
            (self.shuffler.credit.ceil() as u64).min(FORCED_WAVE_SLOTS)
        };
        let mut wave = ShuffleWave {
            reads: Vec::new(),
            writes: Vec::new(),
            read_by: Vec::new(),
            completes: Vec::new(),
        };
        let mut slots = 0u64;
        // Started jobs first (they hold memory and block their partitions), one piece each.
        let mut i = 0;
        while i < self.shuffler.running.len() && slots < limit {
            slots += self.advance(i, &mut wave)?;
            i += 1;
        }
        while slots < limit && self.shuffler.running.len() < MAX_RUNNING_JOBS {
            let Some(partition) = self.next_queued() else {
                break;
            };
            if let Some(at) = self.start_job(partition, rng)? {
                slots += self.advance(at, &mut wave)?;
            }
        }
        self.shuffler.credit -= slots as f64;
        let read: u64 = wave.reads.iter().map(|e| u64::from(e.slots)).sum();
        let written: u64 = wave.writes.iter().map(|w| u64::from(w.extent.slots)).sum();
        self.traffic.extents_read += wave.reads.len() as u64;
        self.traffic.slots_read += read;
        self.traffic.extents_written += wave.writes.len() as u64;
        self.traffic.slots_written += written;
        Ok(Some(wave))
    }

    /// Completes a wave: opens the slots read (concatenated in `wave.reads` order) into their
    /// jobs, rebuilds the levels whose sources are all read, installs the jobs whose last
    /// piece was written.
    pub fn finish_shuffle(
        &mut self,
        wave: ShuffleWave,
        sealed: &mut [u8],
        rng: &mut impl CryptoRng,
    ) -> Result<(), OramError> {
        let slot_bytes = self.geometry.sealed_slot() as usize;
        let want: usize = wave.reads.iter().map(|e| e.slots as usize).sum::<usize>() * slot_bytes;
        if sealed.len() != want {
            return Err(OramError::ShortRead {
                store: 0,
                got: sealed.len(),
                want,
            });
        }
        let ShuffleWave {
            reads,
            writes,
            read_by,
            completes,
        } = wave;
        for write in writes {
            self.shuffler.keep_write(write.bytes);
        }
        let mut offset = 0;
        for (extent, &(partition, chunk)) in reads.iter().zip(&read_by) {
            let len = extent.slots as usize * slot_bytes;
            self.open_chunk(partition, chunk, &mut sealed[offset..offset + len])?;
            offset += len;
            let at = self.job_index(partition)?;
            if self.shuffler.running[at].next_read == self.shuffler.running[at].chunks.len() {
                self.build(at, rng)?;
            }
        }
        for partition in completes {
            let at = self.job_index(partition)?;
            let job = self.shuffler.running.swap_remove(at);
            self.install(job, rng)?;
        }
        Ok(())
    }

    fn job_index(&self, partition: u32) -> Result<usize, OramError> {
        self.shuffler
            .running
            .iter()
            .position(|j| j.partition == partition)
            .ok_or(OramError::Internal("a shuffle wave names no running job"))
    }

    /// The next queued eviction whose partition has no job running: the priority
    /// partition's first, then owed-by-read ones, then the sweep's.
    fn next_queued(&mut self) -> Option<u32> {
        let sh = &mut self.shuffler;
        let first = sh.priority.filter(|&p| !sh.is_running(p));
        let passes = if first.is_some() {
            &[first, None][..]
        } else {
            &[None][..]
        };
        for &wanted in passes {
            for queue in [&mut sh.urgent, &mut sh.sweep] {
                let running = &sh.running;
                let found = queue.iter().position(|&p| match wanted {
                    Some(w) => p == w,
                    None => !running.iter().any(|j| j.partition == p),
                });
                if let Some(at) = found {
                    return queue.remove(at);
                }
            }
        }
        None
    }

    /// Plans a job (as [`Oram::plan_write`] does) and adds it to the running ones; returns
    /// its index there. A job with nothing to read or write (its target is a client-side
    /// level) completes at once and `None` is returned.
    fn start_job(
        &mut self,
        partition: u32,
        rng: &mut impl CryptoRng,
    ) -> Result<Option<usize>, OramError> {
        let plan = self.plan_write(partition);
        let local = self.geometry.local_levels();
        if plan.target < local {
            // Every source is a client-side level (sources are below the target): nothing to
            // read or write on the store, and no batch runs before it is done, so it is
            // rebuilt at once, moving the blocks instead of copying them through a job.
            // (7 evictions in 8 are of this kind.)
            self.shuffler.mean_cost -= self.shuffler.mean_cost / 256.0;
            return match self.finish_write(plan, &mut [], rng)? {
                None => Ok(None),
                Some(_) => Err(OramError::Internal("a client-side level was written out")),
            };
        }
        let store_levels = plan.sources.iter().copied().filter(|&l| l >= local);
        let mut chunks = Vec::new();
        for (level, extent) in store_levels.zip(&plan.reads) {
            let mut first = 0u32;
            while first < extent.slots {
                let take = piece(extent.slots - first);
                chunks.push(Chunk {
                    level,
                    first,
                    extent: Extent {
                        store: extent.store,
                        first_slot: extent.first_slot + u64::from(first),
                        slots: take,
                    },
                });
                first += take;
            }
        }
        let written = if plan.target >= local {
            u64::from(self.geometry.slots(plan.target))
        } else {
            0
        };
        let cost: u64 = plan.reads.iter().map(|e| u64::from(e.slots)).sum::<u64>() + written;
        // A running mean over about the last 256 jobs.
        self.shuffler.mean_cost += (cost as f64 - self.shuffler.mean_cost) / 256.0;
        // Room for every block the level can hold: no rehashing or regrowing while it fills.
        let (mut data, mut plain) = self.shuffler.spare_jobs.pop().unwrap_or_default();
        let capacity = self.geometry.capacity(plan.target) as usize;
        data.reserve(capacity);
        plain.reserve(capacity * self.geometry.block_size as usize);
        self.shuffler.running.push(Job {
            partition,
            target: plan.target,
            sources: plan.sources,
            new_block: plan.new_block,
            chunks,
            next_read: 0,
            reals: Vec::new(),
            data,
            plain,
            built: None,
            next_write: 0,
            dead: Vec::new(),
        });
        let at = self.shuffler.running.len() - 1;
        if self.shuffler.running[at].chunks.is_empty() {
            self.build(at, rng)?;
        }
        Ok(Some(at))
    }

    /// Adds job `at`'s next piece of I/O to the wave; returns its slots.
    fn advance(&mut self, at: usize, wave: &mut ShuffleWave) -> Result<u64, OramError> {
        let sh = &mut self.shuffler;
        let job = &sh.running[at];
        let read_all = job.next_read == job.chunks.len();
        let Some(total) = job
            .built
            .as_ref()
            .filter(|_| read_all)
            .map(|built| built.level.slots.len() as u32)
        else {
            return Ok(Self::advance_read(&mut sh.running[at], wave));
        };
        let first = job.next_write;
        let take = piece(total - first);
        let slot_bytes = self.geometry.sealed_slot() as usize;
        let size = self.geometry.block_size as usize;
        let zeros = vec![0u8; size];
        let mut bytes = sh.write_buffer(take as usize * slot_bytes);
        let job = &mut sh.running[at];
        let built = job
            .built
            .as_ref()
            .ok_or(OramError::Internal("a job writes before it is built"))?;
        for (i, slot) in (first..first + take).enumerate() {
            let block = built.level.slots[slot as usize];
            let plain = match job.data.get(&block) {
                Some(&at) => job
                    .plain
                    .get(at..at + size)
                    .ok_or(OramError::Internal("a held block is past the job's buffer"))?,
                // A block a batch took after the layout is a dummy now (`install`).
                None if block == DUMMY || job.dead.contains(&block) => &zeros,
                None => return Err(OramError::Internal("a rebuilt block has no data")),
            };
            let place = SlotPlace {
                partition: job.partition,
                level: job.target as u8,
                region: built.region,
                slot,
                epoch: built.epoch,
            };
            self.sealer.seal(
                place,
                plain,
                &mut bytes[i * slot_bytes..(i + 1) * slot_bytes],
            )?;
        }
        let extent = Extent {
            store: job.partition % self.geometry.stores,
            first_slot: self
                .geometry
                .region_start(job.partition, job.target, built.region)
                + u64::from(first),
            slots: take,
        };
        job.next_write += take;
        if job.next_write == total {
            wave.completes.push(job.partition);
        }
        wave.writes.push(LevelWrite { extent, bytes });
        Ok(u64::from(take))
    }

    /// Adds `job`'s next source read to the wave (0 slots when its last read is in this wave
    /// already: it is built when the wave completes).
    fn advance_read(job: &mut Job, wave: &mut ShuffleWave) -> u64 {
        let Some(chunk) = job.chunks.get(job.next_read) else {
            return 0;
        };
        wave.reads.push(chunk.extent);
        wave.read_by.push((job.partition, job.next_read));
        job.next_read += 1;
        u64::from(chunk.extent.slots)
    }

    /// Opens the real slots of one chunk read into the job.
    fn open_chunk(
        &mut self,
        partition: u32,
        chunk: usize,
        sealed: &mut [u8],
    ) -> Result<(), OramError> {
        let at = self.job_index(partition)?;
        let slot_bytes = self.geometry.sealed_slot() as usize;
        let job = &mut self.shuffler.running[at];
        let piece = &job.chunks[chunk];
        let level = &self.partitions[partition as usize].levels[piece.level];
        for i in 0..piece.extent.slots {
            let slot = piece.first + i;
            let block = level.slots[slot as usize];
            if block == DUMMY || block == crate::partition::CONSUMED {
                continue;
            }
            let place = SlotPlace {
                partition,
                level: piece.level as u8,
                region: level.region,
                slot,
                epoch: level.epoch,
            };
            let start = i as usize * slot_bytes;
            let plain = self
                .sealer
                .open(place, &mut sealed[start..start + slot_bytes])
                .ok_or(OramError::Tampered {
                    store: partition % self.geometry.stores,
                    partition,
                    level: piece.level as u32,
                    slot,
                })?;
            job.reals.push(block);
            job.data.insert(block, job.plain.len());
            job.plain.extend_from_slice(plain);
        }
        Ok(())
    }

    /// Every source is read: lays out the new level (nothing changes in the ORAM's placement
    /// until [`Oram::install`]).
    fn build(&mut self, at: usize, rng: &mut impl CryptoRng) -> Result<(), OramError> {
        let local = self.geometry.local_levels();
        let job = &mut self.shuffler.running[at];
        let part = &self.partitions[job.partition as usize];
        for &l in job.sources.iter().filter(|&&l| l < local) {
            for (_, block) in part.levels[l].live() {
                let contents = self
                    .local_data
                    .get(&block)
                    .ok_or(OramError::Internal("a client-side block has no data"))?;
                job.reals.push(block);
                job.data.insert(block, job.plain.len());
                job.plain.extend_from_slice(contents);
            }
        }
        if let Some(block) = job.new_block {
            let contents = self
                .cached
                .get(&block)
                .ok_or(OramError::Internal("an evicted block is not in the cache"))?;
            job.reals.push(block);
            job.data.insert(block, job.plain.len());
            job.plain.extend_from_slice(contents);
        }
        if job.reals.len() > self.geometry.capacity(job.target) as usize {
            return Err(OramError::Internal("a rebuilt level is over capacity"));
        }
        let epoch = (u64::from(self.session) << 32) | u64::from(self.rebuilds);
        self.rebuilds = self.rebuilds.checked_add(1).ok_or(OramError::Internal(
            "rebuild counter exhausted; reopen the store",
        ))?;
        let durable = part.levels[job.target].durable_region;
        let region = 1 - durable;
        let slots = self.geometry.slots(job.target);
        let level = Level::build(&job.reals, slots, region, epoch, durable, rng);
        job.built = Some(Built {
            level,
            epoch,
            region,
        });
        Ok(())
    }

    /// The job's level is written: the ORAM now places its blocks there. The slots of
    /// blocks batches took meanwhile (`Shuffler::release`) become dummies, each put at a
    /// uniformly random place in the unread-dummy order (which stays a uniformly random
    /// order).
    fn install(&mut self, mut job: Job, rng: &mut impl CryptoRng) -> Result<(), OramError> {
        let mut built = job.built.take().ok_or(OramError::Internal(
            "a job was installed before it was built",
        ))?;
        let local = self.geometry.local_levels();
        let p = job.partition as usize;
        for &l in &job.sources {
            if l < local {
                for (_, block) in self.partitions[p].levels[l].live() {
                    self.local_data.remove(&block);
                }
            }
            self.partitions[p].levels[l].clear();
        }
        if let Some(block) = job.new_block {
            self.cached.remove(&block);
            self.partitions[p].cache.retain(|&b| b != block);
            self.partitions[p].real += 1;
        }
        let level = &mut built.level;
        for slot in 0..level.slots.len() {
            let block = level.slots[slot];
            if block == DUMMY {
                continue;
            }
            if job.dead.contains(&block) {
                level.slots[slot] = DUMMY;
                let at = rng.random_range(0..=level.dummies.len());
                level.dummies.insert(at, slot as u32);
            } else {
                self.loc[block as usize] = ((job.target as u32) << SLOT_BITS) | slot as u32;
            }
        }
        if job.target < local {
            // Not reached: such jobs are rebuilt at once (`start_job`); kept correct anyway.
            let size = self.geometry.block_size as usize;
            for (&block, &at) in &job.data {
                let contents = job
                    .plain
                    .get(at..at + size)
                    .ok_or(OramError::Internal("a held block is past the job's buffer"))?;
                self.local_data.insert(block, contents.to_vec());
            }
        }
        self.partitions[p].levels[job.target] = built.level;
        job.data.clear();
        job.plain.clear();
        let sh = &mut self.shuffler;
        if sh.spare_bytes() + job.plain.capacity() <= SPARE_BYTES {
            sh.spare_jobs.push((job.data, job.plain));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use rand::Rng;
    use rand_chacha::rand_core::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    use super::MAX_OWED_JOBS;
    use crate::store::SlotStore;
    use crate::{Client, Geometry, MemoryStore, Op, Oram, Request};

    /// Driving the core by hand: batches take the pending requests in arrival order and
    /// answer all of them, they read partitions whose jobs are running (a request never
    /// waits for its partition's shuffle), no level on the store is read past its dummy
    /// budget, the owed work stays near its bound, and a sync leaves nothing owed.
    #[test]
    fn batches_read_partitions_being_shuffled_and_a_sync_drains_the_shuffler() {
        let g = Geometry::new(512, 2048, 1).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let oram = Oram::create(g.clone(), &mut rng).unwrap();
        let store = MemoryStore::new(g.sealed_slot(), &[g.store_bytes(0)]);
        let mut c = Client::new(oram, store, ChaCha20Rng::seed_from_u64(6));
        let (mut id, mut served, mut short, mut during) = (0u64, 0usize, 0usize, 0usize);
        for _ in 0..600 {
            while c.oram.pending_len() < 32 {
                let block = rng.random_range(0..g.blocks);
                let op = if id.is_multiple_of(2) {
                    Op::Write(vec![id as u8; 512])
                } else {
                    Op::Read
                };
                c.oram.submit(Request { id, block, op }).unwrap();
                id += 1;
            }
            let running: Vec<u32> = c
                .oram
                .shuffler
                .running
                .iter()
                .map(|j| j.partition)
                .collect();
            let batch = c.oram.begin_batch(32, &mut rng).unwrap().unwrap();
            let read = batch.partitions();
            short += usize::from(read.len() < 32);
            during += read.iter().filter(|p| running.contains(p)).count();
            for (p, part) in c.oram.partitions.iter().enumerate() {
                let held = c.oram.shuffler.held_levels(p as u32);
                for (l, level) in part.levels.iter().enumerate().skip(g.local_levels()) {
                    if level.filled && !held.contains(&l) {
                        assert!(level.reads <= g.slots(l) - g.capacity(l));
                    }
                }
            }
            let mut bytes = Vec::new();
            c.store.read(&batch.reads, &mut bytes).unwrap();
            let answers = c.oram.finish_batch(batch, &mut bytes, &mut rng).unwrap();
            // Every request of the batch is answered with it (none waits for another).
            assert_eq!(answers.len(), read.len());
            served += answers.len();
            c.oram.queue_evictions(&read);
            assert!(c.oram.shuffle_owed() <= MAX_OWED_JOBS + 64);
            while c.shuffle(false).unwrap() {}
            if read.is_empty() {
                // The first request's read budget is spent: what `Client::step` does then.
                c.shuffle(true).unwrap();
            }
        }
        // Stops at a spent read budget are rare even here, where a batch reads about one
        // slot set per partition (32 partitions).
        assert!(short < 600 / 5, "{short} short batches");
        assert!(served > 600 * 28, "{served} served");
        assert!(during > 0, "no batch read a partition being shuffled");
        c.sync().unwrap();
        assert_eq!(c.oram.shuffle_owed(), 0);
        assert!(c.oram.shuffler.running.is_empty());
    }
}
