//! A synchronous driver: runs batches of an [`Oram`] against a [`SlotStore`].
//!
//! The driver does the I/O the core plans, in the order the core requires: a batch's reads,
//! its answers, then waves of background shuffle I/O (the evictions owed, as resumable jobs:
//! [`crate::oram::shuffle`]) until the shuffle credit of that batch is spent. A rebuild is
//! spread over many batches instead of stopping the next one while it runs. Committing the
//! client state is the caller's job (it owns the state file): call [`Client::sync`] first,
//! which finishes every owed job and makes every slot the state references durable.

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
        }
    }

    /// Runs one batch of pending requests and the shuffle work it pays for; returns its
    /// answers, one per request of the batch (empty if nothing was pending, or if the first
    /// pending request's partition has a level whose read budget is spent: then one wave of
    /// shuffle work is run instead).
    pub fn step(&mut self) -> Result<Vec<Answer>, OramError> {
        // The bound on pending work: no new reads while too many evictions are owed.
        while self.oram.shuffle_over_bound() {
            self.shuffle(true)?;
        }
        let batch = match self.oram.begin_batch(MAX_BATCH, &mut self.rng)? {
            Some(batch) if !batch.is_empty() => batch,
            other => {
                debug_assert!(other.is_none_or(|b| b.reads.is_empty()));
                self.shuffle(true)?;
                return Ok(Vec::new());
            }
        };
        let n = self.store.read_reusing(&batch.reads, &mut self.buffer)?;
        let read = batch.partitions();
        let answers = self
            .oram
            .finish_batch(batch, &mut self.buffer[..n], &mut self.rng)?;
        // The cache is at its largest now, before the evictions drain it.
        self.peak_cache = self.peak_cache.max(self.oram.cache_len());
        self.oram.queue_evictions(&read);
        while self.shuffle(false)? {}
        Ok(answers)
    }

    /// Runs one wave of owed shuffle I/O: within the credit the batches gave it, or (`force`)
    /// regardless. Returns whether there was one.
    pub fn shuffle(&mut self, force: bool) -> Result<bool, OramError> {
        let Some(wave) = self.oram.begin_shuffle(force, &mut self.rng)? else {
            return Ok(false);
        };
        let mut n = 0;
        if !wave.reads.is_empty() {
            n = self.store.read_reusing(&wave.reads, &mut self.buffer)?;
        }
        if !wave.writes.is_empty() {
            let refs: Vec<(crate::oram::Extent, &[u8])> = wave
                .writes
                .iter()
                .map(|w| (w.extent, w.bytes.as_slice()))
                .collect();
            self.store.write_many(&refs)?;
        }
        self.oram
            .finish_shuffle(wave, &mut self.buffer[..n], &mut self.rng)?;
        Ok(true)
    }

    /// Runs every owed eviction to completion.
    pub fn evict(&mut self) -> Result<(), OramError> {
        while self.shuffle(true)? {}
        self.peak_cache = self.peak_cache.max(self.oram.cache_len());
        Ok(())
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
