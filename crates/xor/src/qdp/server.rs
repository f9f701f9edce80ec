//! The QDP server: the precompute worker's logic, the queue of precomputed partial answers,
//! issued seeds, and the online step ([`PendingAnswer`]).

use super::*;

/// A seed allocated for precomputation; turn it into a [`PrecomputedEntry`] with
/// [`Precomputer::compute`] (outside any lock the runtime holds).
#[derive(Debug)]
pub struct PrecomputeJob {
    raid: RaidPir,
    server: usize,
    seed: FreshSeed,
}

impl PrecomputeJob {
    /// The precompute order of this job's seed for the shards of a sharded database
    /// ([`crate::qdp_shard::encode_order`]): each shard computes its rows' partial answer.
    pub fn order(&self) -> Vec<u8> {
        crate::qdp_shard::encode_order(&self.raid, self.server, &self.seed.seed)
    }
}

/// A seed with the partial answer of its non-flip chunks, or (an entry of a front end,
/// [`Precomputer::delegate`]) a seed whose partial answer its shards hold. Not `Clone`: an
/// entry is issued once.
pub struct PrecomputedEntry {
    raid: RaidPir,
    server: usize,
    id: u64,
    seed: Seed,
    partial: Option<RaidAnswer>,
}

impl std::fmt::Debug for PrecomputedEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PrecomputedEntry")
            .field("server", &self.server)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// The precomputation worker's logic for one server position (cheap to copy to a thread).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Precomputer {
    raid: RaidPir,
    server: usize,
}

impl Precomputer {
    /// Computes the partial answer of `job`'s seed: the RAID-PIR answer of the seed with
    /// all-zero flip chunks, i.e. the per-chunk scan over the non-flip chunks' rows.
    pub fn compute(&self, job: PrecomputeJob, db: &Database) -> Result<PrecomputedEntry, Error> {
        if job.raid != self.raid || job.server != self.server {
            return Err(Error::InvalidParameter(
                "precompute job belongs to another QDP server".into(),
            ));
        }
        let query = RaidQuery {
            server: self.server,
            seed: job.seed.seed,
            flips: zero_flips(&self.raid, self.server),
        };
        let partial = self.raid.answer(db, &query)?;
        Ok(PrecomputedEntry {
            raid: self.raid,
            server: self.server,
            id: job.seed.id,
            seed: job.seed.seed,
            partial: Some(partial),
        })
    }

    /// The entry of `job` for a server that holds no rows (the front end of a sharded
    /// database): its partial answer is computed by the shards, each over its rows, from the
    /// order [`PrecomputeJob::order`] the front end sent them (`crate::qdp_shard`). The entry
    /// queues and issues as a computed one; its query comes back as the plain RAID-PIR query
    /// ([`PendingAnswer::into_query`]) that the shards finish with their partial answers.
    pub fn delegate(&self, job: PrecomputeJob) -> Result<PrecomputedEntry, Error> {
        if job.raid != self.raid || job.server != self.server {
            return Err(Error::InvalidParameter(
                "precompute job belongs to another QDP server".into(),
            ));
        }
        Ok(PrecomputedEntry {
            raid: self.raid,
            server: self.server,
            id: job.seed.id,
            seed: job.seed.seed,
            partial: None,
        })
    }

    /// One step of Preprocess (Listing 3.3.1a): if the queue has room, computes one entry and
    /// queues it. Returns whether an entry was added. A multi-threaded runtime calls
    /// [`QdpServer::begin_precompute`], [`Precomputer::compute`] and
    /// [`QdpServer::finish_precompute`] instead, holding its lock only for the first and last.
    pub fn step<S: SeedStore>(
        &self,
        server: &mut QdpServer<S>,
        db: &Database,
    ) -> Result<bool, QdpError> {
        let Some(job) = server.begin_precompute()? else {
            return Ok(false);
        };
        let entry = self.compute(job, db)?;
        Ok(server.finish_precompute(entry))
    }
}

/// An issued seed waiting for its query.
struct Issued {
    seq: u64,
    seed: Seed,
    partial: Option<RaidAnswer>,
}

/// One server position's QDP state: seed source, queue of precomputed entries and issued map.
/// Belongs to one database: call [`QdpServer::clear`] when the database changes.
pub struct QdpServer<S> {
    raid: RaidPir,
    server: usize,
    config: QdpConfig,
    source: SeedSource<S>,
    queue: VecDeque<PrecomputedEntry>,
    issued: HashMap<u64, Issued>,
    /// `(seq, epoch, id)` in issue order; entries already answered are skipped lazily.
    order: VecDeque<(u64, u64, u64)>,
    next_seq: u64,
    epoch: u64,
}

impl<S> std::fmt::Debug for QdpServer<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("QdpServer")
            .field("server", &self.server)
            .field("queued", &self.queue.len())
            .field("issued", &self.issued.len())
            .finish_non_exhaustive()
    }
}

impl<S: SeedStore> QdpServer<S> {
    /// QDP state for position `server` of `raid`, deriving seeds from `key` above the store's
    /// high-water mark.
    pub fn new(
        raid: RaidPir,
        server: usize,
        config: QdpConfig,
        key: &SeedKey,
        store: S,
    ) -> Result<Self, QdpError> {
        if server >= raid.servers() {
            return Err(Error::InvalidParameter(format!(
                "server position {server} outside the {} servers",
                raid.servers()
            ))
            .into());
        }
        if config.issued_capacity == 0 || config.issued_ticks == 0 {
            return Err(Error::InvalidParameter(
                "QDP issued capacity and lifetime must be at least 1".into(),
            )
            .into());
        }
        Ok(QdpServer {
            raid,
            server,
            config,
            source: SeedSource::open(key, store, config.reserve_batch)?,
            queue: VecDeque::new(),
            issued: HashMap::new(),
            order: VecDeque::new(),
            next_seq: 0,
            epoch: 0,
        })
    }

    /// The RAID-PIR parameters served.
    pub fn scheme(&self) -> &RaidPir {
        &self.raid
    }

    /// The server position served.
    pub fn server(&self) -> usize {
        self.server
    }

    /// Precomputed entries waiting to be issued.
    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    /// Issued seeds waiting for their query.
    pub fn issued_len(&self) -> usize {
        self.issued.len()
    }

    /// The configuration.
    pub fn config(&self) -> QdpConfig {
        self.config
    }

    /// The seed source (counters, for monitoring and tests).
    pub fn seed_source(&self) -> &SeedSource<S> {
        &self.source
    }

    /// Whether the worker should pause now under `policy` (see [`should_pause`]).
    pub fn should_pause(&self, policy: PausePolicy, busy: bool) -> bool {
        should_pause(policy, self.queue.len(), self.config.queue_capacity, busy)
    }

    /// The precomputation logic for this server.
    pub fn precomputer(&self) -> Precomputer {
        Precomputer {
            raid: self.raid,
            server: self.server,
        }
    }

    /// Allocates a seed to precompute, or `None` if the queue is full.
    pub fn begin_precompute(&mut self) -> Result<Option<PrecomputeJob>, QdpError> {
        if self.queue.len() >= self.config.queue_capacity {
            return Ok(None);
        }
        Ok(Some(PrecomputeJob {
            raid: self.raid,
            server: self.server,
            seed: self.source.next_seed()?,
        }))
    }

    /// Queues a computed entry; returns false (and drops it, its seed unused forever) if the
    /// queue filled up meanwhile or the entry belongs to another server.
    pub fn finish_precompute(&mut self, entry: PrecomputedEntry) -> bool {
        if entry.raid != self.raid
            || entry.server != self.server
            || self.queue.len() >= self.config.queue_capacity
        {
            return false;
        }
        self.queue.push_back(entry);
        true
    }

    /// Drops every queued and issued entry (their partial answers belong to the old database).
    pub fn clear(&mut self) {
        self.queue.clear();
        self.issued.clear();
        self.order.clear();
    }

    /// Step 2: issues the oldest precomputed seed, or a fresh one if the queue is empty.
    pub fn issue(&mut self) -> Result<SeedGrant, QdpError> {
        let (mut id, mut seed, mut partial) = match self.queue.pop_front() {
            Some(entry) => (entry.id, entry.seed, entry.partial),
            None => {
                let fresh = self.source.next_seed()?;
                (fresh.id, fresh.seed, None)
            }
        };
        // Ids are 64-bit PRF outputs: a clash with a live id has probability issued / 2^64,
        // and is resolved with another fresh seed rather than overwriting the live entry.
        while self.issued.contains_key(&id) {
            let fresh = self.source.next_seed()?;
            (id, seed, partial) = (fresh.id, fresh.seed, None);
        }
        let seq = self.next_seq;
        self.next_seq += 1;
        self.issued.insert(id, Issued { seq, seed, partial });
        self.order.push_back((seq, self.epoch, id));
        self.expire();
        Ok(SeedGrant {
            server: self.server,
            id,
            seed,
        })
    }

    /// Step 2 on wire bodies: checks a seed request against the parameters and position
    /// served, issues a seed and encodes the response.
    pub fn handle_seed_request(&mut self, body: &[u8]) -> Result<Vec<u8>, QdpError> {
        let server = decode_seed_request(&self.raid, body)?;
        if server != self.server {
            return Err(Error::Malformed(format!(
                "seed request for server position {server}, this QDP queue serves position {}",
                self.server
            ))
            .into());
        }
        let grant = self.issue()?;
        Ok(encode_seed_response(&self.raid, &grant))
    }

    /// Advances the expiry clock by one tick and drops the issued seeds that outlived
    /// [`QdpConfig::issued_ticks`].
    pub fn tick(&mut self) {
        self.epoch += 1;
        self.expire();
    }

    /// Step 4: checks `query` and removes its issued seed; the returned [`PendingAnswer`]
    /// computes the answer (outside any lock the runtime holds).
    pub fn take(&mut self, query: &QdpQuery) -> Result<PendingAnswer, QdpError> {
        check_flips(&self.raid, query)?;
        if query.server != self.server {
            return Err(Error::Malformed(format!(
                "query for server position {}, this QDP queue serves position {}",
                query.server, self.server
            ))
            .into());
        }
        let issued = self
            .issued
            .remove(&query.seed_id)
            .ok_or(QdpError::UnknownSeed)?;
        Ok(PendingAnswer {
            raid: self.raid,
            server: self.server,
            seed: issued.seed,
            partial: issued.partial,
            flips: query.flips.clone(),
        })
    }

    /// [`QdpServer::take`] on a query body.
    pub fn take_query(&mut self, body: &[u8]) -> Result<PendingAnswer, QdpError> {
        let query = decode_query(&self.raid, body)?;
        self.take(&query)
    }

    /// Step 4 in one call: [`QdpServer::take_query`], then the encoded answer.
    pub fn answer_body(&mut self, db: &Database, body: &[u8]) -> Result<Vec<u8>, QdpError> {
        Ok(self.take_query(body)?.answer_body(db)?)
    }

    /// Drops issued entries with `issued_capacity` newer issues or `issued_ticks` ticks of age.
    fn expire(&mut self) {
        while let Some(&(seq, epoch, id)) = self.order.front() {
            let newer = self.next_seq - 1 - seq;
            let expired = newer >= self.config.issued_capacity as u64
                || self.epoch - epoch >= self.config.issued_ticks;
            if !expired {
                break;
            }
            self.order.pop_front();
            if self.issued.get(&id).is_some_and(|entry| entry.seq == seq) {
                self.issued.remove(&id);
            }
        }
    }
}

/// A query whose seed was taken from the issued map: answering consumes it (a clone answers
/// the same query again, to the same answer; the seed stays spent).
#[derive(Clone)]
pub struct PendingAnswer {
    raid: RaidPir,
    server: usize,
    seed: Seed,
    partial: Option<RaidAnswer>,
    flips: Vec<BitVec>,
}

impl std::fmt::Debug for PendingAnswer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PendingAnswer")
            .field("server", &self.server)
            .field("precomputed", &self.partial.is_some())
            .finish_non_exhaustive()
    }
}

/// The four-Russians layout of the table server `server` needs for its online step: its flip
/// chunks only (chunks `j` with `j mod n = server`), groups of `t` rows within a chunk. With
/// `n` servers this is `1 / n` of a table over every chunk, so a QDP server can afford a
/// larger `t` than plain four-Russians RAID-PIR in the same memory. `None` for an invalid `t`
/// or a server outside the scheme.
pub fn flip_table_layout(
    raid: &RaidPir,
    server: usize,
    t: usize,
) -> Option<pir_kernels::russians::RussiansLayout> {
    if server >= raid.servers() {
        return None;
    }
    let shape = raid.shape();
    pir_kernels::russians::RussiansLayout::for_chunks(
        shape.block_count(),
        shape.block_size(),
        raid.chunks(),
        t,
        server,
        raid.servers(),
    )
}

impl PendingAnswer {
    /// Whether the seed came with a precomputed partial answer (otherwise the answer scans
    /// every processed chunk, as plain RAID-PIR).
    pub fn is_precomputed(&self) -> bool {
        self.partial.is_some()
    }

    /// The plain RAID-PIR query `(server, seed, flips)` whose answer this is, for a server
    /// that answers without holding the rows itself (the front end of a sharded database,
    /// whose shards answer it over their rows, finishing it with the partial answers they
    /// precomputed for its seed, if they did: [`crate::qdp_shard`]); `None` when a partial
    /// answer computed here came with the seed (it would be lost).
    pub fn into_query(self) -> Option<RaidQuery> {
        if self.partial.is_some() {
            return None;
        }
        Some(RaidQuery {
            server: self.server,
            seed: self.seed,
            flips: self.flips,
        })
    }

    /// The RAID-PIR answer of `(seed, flips)`: the partial answer XOR the rows the flip chunks
    /// select, or the full RAID-PIR answer without a partial one.
    pub fn answer(self, db: &Database) -> Result<RaidAnswer, Error> {
        self.answer_with(db, None)
    }

    /// [`PendingAnswer::answer`] with the online rows read from a four-Russians table whose
    /// groups lie within one chunk, built over `db`: one lookup per group of `t` flip-chunk
    /// rows instead of up to `t` rows (thesis, Günther 2019, listing 3.3.1b). The table holds
    /// either every chunk or, as [`flip_table_layout`] lays it out, only this server's flip
    /// chunks (`1 / n` of the memory). Errors if the layout does not match the database,
    /// the scheme and the server.
    pub fn answer_from_table(
        self,
        db: &Database,
        layout: pir_kernels::russians::RussiansLayout,
        table: &[u8],
    ) -> Result<RaidAnswer, Error> {
        let shape = self.raid.shape();
        let t = layout.group_size();
        let every = pir_kernels::russians::RussiansLayout::new(
            shape.block_count(),
            shape.block_size(),
            self.raid.chunks(),
            t,
        );
        let flips = flip_table_layout(&self.raid, self.server, t);
        if !(every == Some(layout) || flips == Some(layout)) || table.len() != layout.table_bytes()
        {
            return Err(Error::DatabaseMismatch(
                "the four-Russians table does not match the database, chunks and server".into(),
            ));
        }
        self.answer_with(db, Some((layout, table)))
    }

    fn answer_with(
        self,
        db: &Database,
        table: Option<(pir_kernels::russians::RussiansLayout, &[u8])>,
    ) -> Result<RaidAnswer, Error> {
        if db.shape() != self.raid.shape() {
            return Err(Error::DatabaseMismatch(
                "the database shape differs from the QDP server's".into(),
            ));
        }
        let Some(mut answer) = self.partial else {
            let query = RaidQuery {
                server: self.server,
                seed: self.seed,
                flips: self.flips,
            };
            return self.raid.answer(db, &query);
        };
        let b = self.raid.shape().block_size();
        let c = self.raid.chunks();
        // Only the flip chunks are scanned online; the other chunks' selections stay empty.
        // The scan runs on every thread of the caller's rayon pool, like the engine's.
        let mut chunks: Vec<&[u8]> = vec![&[]; c];
        for (chunk, bits) in self.raid.flip_chunks(self.server).zip(&self.flips) {
            chunks[chunk] = bits.as_bytes();
        }
        let selection = pir_kernels::Selection::new(&chunks);
        let sums = match table {
            Some((layout, table)) => pir_kernels::russians::scan_parallel(layout, selection, table),
            None => pir_kernels::scan_parallel(
                selection,
                db.bytes(),
                b,
                0..self.raid.shape().block_count(),
            ),
        };
        match (self.raid.mode(), answer.blocks.as_mut_slice()) {
            // One block: the flip chunks' sums go straight into the precomputed block (the
            // other chunks' slots are zero), without an intermediate answer.
            (AnswerMode::Single, [block]) if sums.len() == c * b => {
                for chunk in self.raid.flip_chunks(self.server) {
                    pir_kernels::xor_into(block, &sums[chunk * b..(chunk + 1) * b]);
                }
            }
            _ => {
                let online = self.raid.answer_from_chunk_sums(self.server, &sums);
                for (block, extra) in answer.blocks.iter_mut().zip(&online.blocks) {
                    pir_kernels::xor_into(block, extra);
                }
            }
        }
        Ok(answer)
    }

    /// [`PendingAnswer::answer`], encoded as a RAID-PIR answer body.
    pub fn answer_body(self, db: &Database) -> Result<Vec<u8>, Error> {
        let raid = self.raid;
        Ok(raid.encode_answer(&self.answer(db)?))
    }

    /// What the online step of a precomputed answer reads besides its precomputed partial
    /// answer: the flip-chunk rows it selects (`table: None`, the scan of
    /// [`PendingAnswer::answer`]) or the table entries it looks up (the table of
    /// [`PendingAnswer::answer_from_table`] with this layout), as `(row size, rows in the
    /// order read)`; rows are numbered in the database or the table. `None` when the step
    /// reads every row (no precomputed answer, or rows below
    /// [`pir_kernels::xor::SPARSE_ROW_BYTES`] scanned densely). For `pir bench`, which counts
    /// these bytes and times a plain read of them; not a hot path.
    pub fn rows_read(
        &self,
        table: Option<pir_kernels::russians::RussiansLayout>,
    ) -> Option<(usize, Vec<usize>)> {
        self.partial.as_ref()?;
        let shape = self.raid.shape();
        let b = shape.block_size();
        let mut chunks: Vec<&[u8]> = vec![&[]; self.raid.chunks()];
        for (chunk, bits) in self.raid.flip_chunks(self.server).zip(&self.flips) {
            chunks[chunk] = bits.as_bytes();
        }
        let selection = pir_kernels::Selection::new(&chunks);
        match table {
            Some(layout) => Some((b, pir_kernels::russians::entries_list(layout, selection))),
            None if b >= pir_kernels::xor::SPARSE_ROW_BYTES => Some((
                b,
                (0..shape.block_count())
                    .filter(|&r| selection.bit(r))
                    .collect(),
            )),
            None => None,
        }
    }

    /// Bytes of the precomputed partial answer the online step XORs into (0 without one).
    pub fn precomputed_bytes(&self) -> usize {
        self.partial
            .as_ref()
            .map_or(0, |answer| answer.blocks.iter().map(Vec::len).sum())
    }
}
