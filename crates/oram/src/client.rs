//! A synchronous driver: runs batches of an [`Oram`] against a [`SlotStore`].
//!
//! The driver does the I/O the core plans, in the order the core requires: a batch's reads,
//! the answers, then the batch's evictions (each a read of the source levels and one write of
//! the rebuilt level). Committing the client state is the caller's job (it owns the state
//! file): call [`Client::sync`] first so every slot the state references is durable.

use rand::{CryptoRng, RngCore};

use crate::error::OramError;
use crate::oram::{Answer, Oram, Request};
use crate::store::SlotStore;

/// Requests per batch: ObliviStore keeps many operations in flight; 32 is the concurrency
/// the benchmarks report latency at.
pub const MAX_BATCH: usize = 32;

/// An [`Oram`] with its store and randomness.
pub struct Client<S, R> {
    /// The ORAM state.
    pub oram: Oram,
    /// The slot store.
    pub store: S,
    rng: R,
    buffer: Vec<u8>,
    /// Largest eviction cache seen after a batch (the stash bound the tests check).
    pub peak_cache: usize,
    /// Evictions owed by the last batch: they run before the next batch's reads (or a sync),
    /// after its answers were released, the way ObliviStore shuffles in the background of
    /// the requests rather than in front of them.
    owed: Vec<u32>,
}

impl<S: SlotStore, R: RngCore + CryptoRng> Client<S, R> {
    /// A driver for `oram` on `store`.
    pub fn new(oram: Oram, store: S, rng: R) -> Client<S, R> {
        Client {
            oram,
            store,
            rng,
            buffer: Vec::new(),
            peak_cache: 0,
            owed: Vec::new(),
        }
    }

    /// Runs one batch of pending requests; returns its answers (empty if nothing was pending).
    /// The batch's evictions are owed until the next call (or [`Client::sync`]): every
    /// partition read is still written before it is read again.
    pub fn step(&mut self) -> Result<Vec<Answer>, OramError> {
        self.evict()?;
        let Some(batch) = self.oram.begin_batch(MAX_BATCH, &mut self.rng)? else {
            return Ok(Vec::new());
        };
        self.buffer.clear();
        self.store.read(&batch.reads, &mut self.buffer)?;
        let read = batch.partitions();
        let answers = self
            .oram
            .finish_batch(batch, &mut self.buffer, &mut self.rng)?;
        // The cache is at its largest now, before the owed evictions drain it.
        self.peak_cache = self.peak_cache.max(self.oram.cache_len());
        self.owed = self.oram.eviction_targets(&read);
        Ok(answers)
    }

    /// Runs the evictions owed by the last batch.
    pub fn evict(&mut self) -> Result<(), OramError> {
        let mut targets = std::mem::take(&mut self.owed);
        // Waves of distinct partitions: their source levels are read in one go and their
        // rebuilt levels written in one go (one round trip each to every remote store).
        while !targets.is_empty() {
            let mut wave = Vec::new();
            let mut later = Vec::new();
            for partition in targets {
                if wave.contains(&partition) {
                    later.push(partition);
                } else {
                    wave.push(partition);
                }
            }
            self.write_wave(&wave)?;
            targets = later;
        }
        self.peak_cache = self.peak_cache.max(self.oram.cache_len());
        Ok(())
    }

    fn write_wave(&mut self, partitions: &[u32]) -> Result<(), OramError> {
        let plans: Vec<_> = partitions
            .iter()
            .map(|&p| self.oram.plan_write(p))
            .collect();
        let extents: Vec<_> = plans.iter().flat_map(|p| p.reads.iter().copied()).collect();
        self.buffer.clear();
        self.store.read(&extents, &mut self.buffer)?;
        let slot = self.oram.geometry().sealed_slot() as usize;
        let mut writes = Vec::new();
        let mut at = 0;
        for plan in plans {
            let len: usize = plan.reads.iter().map(|e| e.slots as usize * slot).sum();
            let part = &mut self.buffer[at..at + len];
            at += len;
            if let Some(write) = self.oram.finish_write(plan, part, &mut self.rng)? {
                writes.push(write);
            }
        }
        let refs: Vec<(crate::oram::Extent, &[u8])> = writes
            .iter()
            .map(|w| (w.extent, w.bytes.as_slice()))
            .collect();
        self.store.write_many(&refs)
    }

    /// Submits `requests` and runs batches until all are answered; answers in request order.
    pub fn run(&mut self, requests: Vec<Request>) -> Result<Vec<Answer>, OramError> {
        let ids: Vec<u64> = requests.iter().map(|r| r.id).collect();
        for request in requests {
            self.oram.submit(request)?;
        }
        let mut answers = Vec::with_capacity(ids.len());
        while self.oram.pending_len() > 0 {
            answers.extend(self.step()?);
        }
        let mut by_id: std::collections::HashMap<u64, Answer> =
            answers.into_iter().map(|a| (a.id, a)).collect();
        ids.iter()
            .map(|id| {
                by_id
                    .remove(id)
                    .ok_or(OramError::Internal("a request was not answered"))
            })
            .collect()
    }

    /// Rebuilds every partition into its top level (after an unclean shutdown, before any
    /// request: no slot read before the crash is read again).
    pub fn reshuffle_all(&mut self) -> Result<(), OramError> {
        self.evict()?;
        for partition in 0..self.oram.geometry().partitions {
            if let Some(plan) = self.oram.plan_reshuffle(partition) {
                self.buffer.clear();
                self.store.read(&plan.reads, &mut self.buffer)?;
                if let Some(write) =
                    self.oram
                        .finish_write(plan, &mut self.buffer, &mut self.rng)?
                {
                    self.store.write(write.extent, &write.bytes)?;
                }
            }
        }
        Ok(())
    }

    /// Makes every slot written so far durable (call before committing the state).
    pub fn sync(&mut self) -> Result<(), OramError> {
        self.evict()?;
        self.store.sync()
    }
}
