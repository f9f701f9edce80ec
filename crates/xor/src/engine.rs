//! The server engine: answers Chor and RAID-PIR query bodies against one database, one query
//! at a time or many in one pass, with the fastest method for the database's shape.
//!
//! - **Plain scan** ([`pir_kernels::xor`]): every thread of the caller's rayon pool scans a
//!   share of the rows with the best SIMD backend.
//! - **Four Russians** ([`pir_kernels::russians`], Günther 2019, section 2.3): a table of
//!   `(2^t - 1) / t` times the database answers a query with one lookup per `t` rows. It wins
//!   for large blocks, where a lookup streams a whole block, and loses for small ones, where
//!   random lookups cost more than streaming `t` rows; [`Russians::Auto`] uses it from
//!   [`RUSSIANS_MIN_BLOCK`] bytes up, within a memory limit. The table groups rows by
//!   [`TABLE_CHUNKS`] interleaved chunks, so it answers, per chunk, every query whose chunk
//!   count divides 48: Chor, and RAID-PIR with 1, 2, 3, 4, 6, 8, 12, 16, 24 or 48 chunks, in
//!   either answer mode. Other chunk counts use the plain scan.
//! - **Batches** ([`pir_kernels::batch`]): queries answered together share one pass over the
//!   database; each answer is exactly the one the query gets alone.
//!
//! Parallelism comes from the `*_parallel` kernels, which run on the caller's rayon pool: the
//! engine itself spawns nothing, and a server sizes the pool.

use pir_core::bits::BitVec;
use pir_core::{Codec, Database, DbShape, Error, MultiServerScheme, SchemeId};
use pir_kernels::russians::RussiansLayout;
use pir_kernels::Selection;

use crate::chor::Chor;
use crate::raid::{RaidPir, RaidQueryBody};
use crate::serve::max_query_body;
use crate::shard::ShardRows;

/// Smallest block size at which [`Russians::Auto`] uses four-Russians tables: below it the
/// random table lookups do not reliably beat a streaming scan. Measured with `pir bench` on a
/// 2-core AMD EPYC (Zen 4) VM, one core, 256 MiB, tables in huge pages, plain / t = 4 in ms,
/// two runs: 512 B 11.1 / 9.9 and 12.1 / 13.7, 1 KiB 11.4 / 5.8 and 20.2 / 7.9, 2 KiB
/// 11.2 / 4.2 and 16.2 / 7.8 (the crossover table is in README.md).
pub const RUSSIANS_MIN_BLOCK: usize = 1024;

/// Chunks of the engine's four-Russians table: groups hold rows `j mod 48` of one chunk, so a
/// query with a chunk count dividing 48 gets per-chunk sums from it (RAID-PIR per-chunk
/// answers included). Databases under [`TABLE_CHUNKS`] x `t` x 16 rows get a table over
/// consecutive rows instead (one chunk: whole-block answers only), which wastes no memory on
/// a partial last super-group.
pub const TABLE_CHUNKS: usize = 48;

/// Group size `t` that [`Russians::Auto`] uses (memory 3.75 x the database).
pub const RUSSIANS_AUTO_GROUP: usize = 4;

/// Whether to precompute four-Russians tables.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Russians {
    /// Never; every query is a plain scan.
    Off,
    /// From [`RUSSIANS_MIN_BLOCK`]-byte blocks up, with `t` = [`RUSSIANS_AUTO_GROUP`], if the
    /// table fits the memory limit.
    Auto,
    /// Always, with this group size (1 to 8), if the table fits the memory limit.
    Group(usize),
}

/// How an [`Engine`] answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EngineOptions {
    /// Four-Russians tables.
    pub russians: Russians,
    /// Largest table to build, in bytes.
    pub russians_memory_limit: usize,
}

impl Default for EngineOptions {
    fn default() -> Self {
        Self {
            russians: Russians::Auto,
            russians_memory_limit: 8 << 30,
        }
    }
}

/// A database with its precomputed tables.
pub struct Engine {
    database: Database,
    russians: Option<(RussiansLayout, pir_kernels::memory::HugeBuffer)>,
    /// Set on a shard's engine: the rows of the whole database it holds.
    shard: Option<ShardRows>,
}

impl std::fmt::Debug for Engine {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("shape", &self.database.shape())
            .field("russians", &self.russians_group())
            .finish()
    }
}

/// One step of answering a batch.
enum Step {
    /// Query `i` on its own.
    Alone(usize),
    /// These queries, all of `chunks` chunks, in one shared pass.
    Pass { chunks: usize, members: Vec<usize> },
}

/// A query body, decoded and checked against the database, ready to scan.
#[derive(Debug)]
pub struct Prepared {
    scheme: Kind,
    selection: Vec<BitVec>,
    /// On a shard: where its rows lie, to put the per-chunk sums back in the whole order.
    shard: Option<ShardRows>,
}

#[derive(Debug)]
enum Kind {
    Chor(Chor),
    /// A DPF key, expanded into one selection vector: answered like Chor.
    Dpf(crate::DpfPir),
    Raid {
        raid: RaidPir,
        server: usize,
    },
}

impl Prepared {
    /// A RAID-PIR query for position `server`, with its per-chunk selection (for
    /// [`crate::held`], which answers it chunk by chunk).
    pub(crate) fn raid(raid: RaidPir, server: usize, selection: Vec<BitVec>) -> Prepared {
        Prepared {
            scheme: Kind::Raid { raid, server },
            selection,
            // Chunk-only mirrors hold whole chunks of an unsharded release.
            shard: None,
        }
    }

    /// The per-chunk selection vectors.
    pub(crate) fn selection(&self) -> &[BitVec] {
        &self.selection
    }

    /// The number of chunks `c` of its selection (1 for Chor).
    pub fn chunk_count(&self) -> usize {
        self.selection.len()
    }

    fn sums_all_chunks(&self) -> bool {
        match &self.scheme {
            Kind::Chor(_) | Kind::Dpf(_) => true,
            Kind::Raid { raid, .. } => raid.sums_all_chunks(),
        }
    }

    fn refs(&self) -> Vec<&[u8]> {
        self.selection.iter().map(BitVec::as_bytes).collect()
    }

    /// Encodes the answer body from the per-chunk sums (`c * b` bytes).
    pub(crate) fn finish_from_sums(&self, sums: &[u8]) -> Vec<u8> {
        let unrotated;
        let sums = match &self.shard {
            Some(rows) => {
                unrotated = rows.unrotate(sums, self.selection.len());
                &unrotated[..]
            }
            None => sums,
        };
        match &self.scheme {
            Kind::Chor(chor) => chor.encode_answer(&crate::ChorAnswer {
                block: sums.to_vec(),
            }),
            Kind::Dpf(dpf) => dpf.encode_answer(&crate::DpfAnswer::new(sums.to_vec())),
            Kind::Raid { raid, server } => {
                raid.encode_answer(&raid.answer_from_chunk_sums(*server, sums))
            }
        }
    }

    /// Encodes the answer body from the XOR of all selected rows (`b` bytes).
    fn finish_from_total(&self, total: Vec<u8>) -> Vec<u8> {
        match &self.scheme {
            Kind::Chor(chor) => chor.encode_answer(&crate::ChorAnswer { block: total }),
            Kind::Dpf(dpf) => dpf.encode_answer(&crate::DpfAnswer::new(total)),
            Kind::Raid { raid, .. } => raid.encode_answer(&raid.answer_from_total(total)),
        }
    }
}

/// Up to this many queries answerable from the four-Russians table are answered one by one
/// rather than in one shared pass. Measured at 1 GiB (32768 x 32 KiB and 262144 x 4 KiB), two
/// threads, AMD EPYC, AVX-512 and `PIR_KERNEL=avx2` alike (`pir bench --modes
/// plain,four-russians,batched --batch K`): a table answer takes 9.2-11 ms, a shared pass
/// 89-137 ms for 2 to 16 queries.
pub const BATCH_PASS_IN_TABLE_QUERIES: usize = 8;

/// Up to this many queries without a table (RAID-PIR per-chunk answers, or no table) are
/// answered one by one: a plain answer takes 19-20 ms on the machine above, a shared pass
/// 89-137 ms.
pub const BATCH_PASS_IN_PLAIN_QUERIES: usize = 4;

impl Engine {
    /// An engine over `database`, building four-Russians tables as `options` ask (reporting
    /// `progress(done, total)` while it builds, since 1 GiB of blocks takes seconds).
    pub fn new(
        database: Database,
        options: EngineOptions,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Engine {
        let shape = database.shape();
        let russians = Self::plan_russians(shape, options).map(|layout| {
            let table = pir_kernels::russians::build_parallel(layout, database.bytes(), progress);
            (layout, table)
        });
        Engine {
            database,
            russians,
            shard: None,
        }
    }

    /// A shard's engine: `database` holds rows `rows.first..` of a database of shape
    /// `rows.whole`; queries are made for the whole database and answered over these rows
    /// only (tables built over them alone). The XOR of every shard's answer to a query is
    /// the whole database's answer ([`crate::shard`]).
    pub fn shard(
        database: Database,
        rows: ShardRows,
        options: EngineOptions,
        progress: &(dyn Fn(usize, usize) + Sync),
    ) -> Result<Engine, Error> {
        rows.check(database.shape())?;
        let mut engine = Self::new(database, options, progress);
        engine.shard = Some(rows);
        Ok(engine)
    }

    /// The shape queries are made for: the whole database's on a shard.
    pub fn query_shape(&self) -> DbShape {
        self.shard.map_or(self.database.shape(), |rows| rows.whole)
    }

    /// The table layout `options` lead to for `shape`, if any.
    pub fn plan_russians(shape: DbShape, options: EngineOptions) -> Option<RussiansLayout> {
        let t = match options.russians {
            Russians::Off => return None,
            Russians::Auto if shape.block_size() < RUSSIANS_MIN_BLOCK => return None,
            Russians::Auto => RUSSIANS_AUTO_GROUP,
            Russians::Group(t) => t,
        };
        let chunks = if shape.block_count() >= TABLE_CHUNKS * t * 16 {
            TABLE_CHUNKS
        } else {
            1
        };
        RussiansLayout::new(shape.block_count(), shape.block_size(), chunks, t)
            .filter(|layout| layout.table_bytes() <= options.russians_memory_limit)
    }

    /// The database.
    pub fn database(&self) -> &Database {
        &self.database
    }

    /// The group size `t` of the four-Russians table in use, if any.
    pub fn russians_group(&self) -> Option<usize> {
        self.russians
            .as_ref()
            .map(|(layout, _)| layout.group_size())
    }

    /// Bytes of the four-Russians table (0 without one).
    pub fn russians_table_bytes(&self) -> usize {
        self.russians.as_ref().map_or(0, |(_, table)| table.len())
    }

    /// Decodes and checks a query body of `scheme`; nothing is allocated before the body's
    /// parameters are checked against the database shape.
    pub fn prepare(&self, scheme: SchemeId, body: &[u8]) -> Result<Prepared, Error> {
        let mut prepared = self.prepare_whole(scheme, body)?;
        if let Some(rows) = self.shard {
            prepared.selection =
                rows.localize(&prepared.selection, self.database.shape().block_count());
            prepared.shard = Some(rows);
        }
        Ok(prepared)
    }

    /// A RAID-PIR query for position `server` of `raid` with its whole-database per-chunk
    /// `selection` (already checked against the query shape), localized to a shard's rows as
    /// [`Engine::prepare`] does (`crate::qdp_shard`'s precompute orders and online halves).
    pub(crate) fn prepare_raid(
        &self,
        raid: RaidPir,
        server: usize,
        selection: Vec<BitVec>,
    ) -> Prepared {
        let mut prepared = Prepared::raid(raid, server, selection);
        if let Some(rows) = self.shard {
            prepared.selection =
                rows.localize(&prepared.selection, self.database.shape().block_count());
            prepared.shard = Some(rows);
        }
        prepared
    }

    /// [`Engine::prepare`] against the shape queries are made for.
    fn prepare_whole(&self, scheme: SchemeId, body: &[u8]) -> Result<Prepared, Error> {
        let shape = self.query_shape();
        if body.len() > max_query_body(shape) {
            return Err(Error::Oversized {
                len: body.len(),
                limit: max_query_body(shape),
            });
        }
        match scheme {
            SchemeId::Chor => {
                let chor = Chor::for_mirror(shape);
                let query = chor.decode_query(body)?;
                Ok(Prepared {
                    scheme: Kind::Chor(chor),
                    selection: vec![query.bits],
                    shard: None,
                })
            }
            SchemeId::RaidPir => {
                let RaidQueryBody {
                    scheme: raid,
                    query,
                } = RaidQueryBody::from_bytes(body, &shape)?;
                let selection = raid.selection(&query)?;
                Ok(Prepared {
                    scheme: Kind::Raid {
                        raid,
                        server: query.server,
                    },
                    selection,
                    shard: None,
                })
            }
            SchemeId::Dpf => {
                // The key is expanded here, once, into the selection every scan method takes.
                let dpf = crate::DpfPir::new(shape);
                let query = dpf.decode_query(body)?;
                let selection = dpf.selection(&query)?;
                Ok(Prepared {
                    scheme: Kind::Dpf(dpf),
                    selection: vec![selection],
                    shard: None,
                })
            }
            other => Err(Error::WrongScheme {
                found: other as u8,
                expected: SchemeId::RaidPir as u8,
            }),
        }
    }

    /// Answers one prepared query with every thread of the current rayon pool.
    pub fn answer(&self, prepared: &Prepared) -> Vec<u8> {
        let refs = prepared.refs();
        let selection = Selection::new(&refs);
        let region = self.database.bytes();
        let b = self.database.shape().block_size();
        match &self.russians {
            Some((layout, table)) if layout.chunks() == 1 && prepared.sums_all_chunks() => prepared
                .finish_from_total(pir_kernels::russians::scan_parallel(
                    *layout, selection, table,
                )),
            Some((layout, table)) if self.uses_table(prepared) => prepared.finish_from_sums(
                &pir_kernels::russians::scan_parallel(*layout, selection, table),
            ),
            _ => prepared.finish_from_sums(&pir_kernels::scan_parallel(
                selection,
                region,
                b,
                0..self.database.shape().block_count(),
            )),
        }
    }

    /// Answers all prepared queries, sharing one pass over the database among the queries
    /// with the same chunk count; returns the answer bodies in order.
    pub fn answer_batch(&self, prepared: &[Prepared]) -> Vec<Vec<u8>> {
        self.answer_batch_refs(&prepared.iter().collect::<Vec<_>>())
    }

    /// Whether `prepared` is answered from the four-Russians table (one entry per group).
    fn uses_table(&self, prepared: &Prepared) -> bool {
        match &self.russians {
            None => false,
            Some((layout, _)) if layout.chunks() == 1 => prepared.sums_all_chunks(),
            Some((layout, _)) => layout.chunks() % prepared.chunk_count() == 0,
        }
    }

    /// [`Engine::answer_batch`] over borrowed queries.
    ///
    /// The shared pass ([`pir_kernels::batch`]) reads every row once for all its queries and
    /// costs about as much as [`BATCH_PASS_IN_TABLE_QUERIES`] table answers or
    /// [`BATCH_PASS_IN_PLAIN_QUERIES`] plain ones (which skip unselected rows); smaller groups are
    /// answered one query at a time, which is faster for them (a client fetching a few blocks
    /// sends a batch of 2 or 3 queries).
    pub fn answer_batch_refs(&self, prepared: &[&Prepared]) -> Vec<Vec<u8>> {
        let b = self.database.shape().block_size();
        let rows = 0..self.database.shape().block_count();
        let mut answers: Vec<Option<Vec<u8>>> = vec![None; prepared.len()];
        for step in self.plan(prepared) {
            match step {
                Step::Alone(i) => answers[i] = Some(self.answer(prepared[i])),
                Step::Pass { chunks: c, members } => {
                    let refs: Vec<Vec<&[u8]>> =
                        members.iter().map(|&i| prepared[i].refs()).collect();
                    let selections: Vec<Selection<'_>> =
                        refs.iter().map(|r| Selection::new(r)).collect();
                    let sums = pir_kernels::batch::scan_parallel(
                        &selections,
                        self.database.bytes(),
                        b,
                        rows.clone(),
                    );
                    for (n, &i) in members.iter().enumerate() {
                        answers[i] =
                            Some(prepared[i].finish_from_sums(&sums[n * c * b..(n + 1) * c * b]));
                    }
                }
            }
        }
        answers.into_iter().flatten().collect()
    }

    /// How [`Engine::answer_batch_refs`] answers `prepared`: small groups one query at a time,
    /// larger groups of the same chunk count in one shared pass each.
    fn plan(&self, prepared: &[&Prepared]) -> Vec<Step> {
        if prepared.len() <= 1 {
            return (0..prepared.len()).map(Step::Alone).collect();
        }
        let mut steps = Vec::new();
        let mut planned = vec![false; prepared.len()];
        let table_queries: Vec<usize> = (0..prepared.len())
            .filter(|&i| self.uses_table(prepared[i]))
            .collect();
        if table_queries.len() <= BATCH_PASS_IN_TABLE_QUERIES {
            for &i in &table_queries {
                steps.push(Step::Alone(i));
                planned[i] = true;
            }
        }
        let mut counts: Vec<usize> = (0..prepared.len())
            .filter(|&i| !planned[i])
            .map(|i| prepared[i].chunk_count())
            .collect();
        counts.sort_unstable();
        counts.dedup();
        for c in counts {
            let members: Vec<usize> = (0..prepared.len())
                .filter(|&i| !planned[i] && prepared[i].chunk_count() == c)
                .collect();
            let limit = if members.iter().all(|&i| self.uses_table(prepared[i])) {
                BATCH_PASS_IN_TABLE_QUERIES
            } else {
                BATCH_PASS_IN_PLAIN_QUERIES
            };
            if members.len() <= limit {
                steps.extend(members.into_iter().map(Step::Alone));
            } else {
                steps.push(Step::Pass { chunks: c, members });
            }
        }
        steps
    }

    /// Bytes of memory [`Engine::answer_batch_refs`] reads to answer `prepared`, following the
    /// same choices: table entries for table answers, the selected rows for plain answers of
    /// rows of [`pir_kernels::xor::SPARSE_ROW_BYTES`] and more (every row below), the whole
    /// database once per shared pass. For reports (`pir bench`), measured against the memory
    /// bandwidth; not a hot path.
    pub fn bytes_read(&self, prepared: &[&Prepared]) -> usize {
        let shape = self.database.shape();
        let b = shape.block_size();
        let rows = shape.block_count();
        let alone = |p: &Prepared| -> usize {
            let refs = p.refs();
            let selection = Selection::new(&refs);
            match &self.russians {
                Some((layout, _)) if self.uses_table(p) => {
                    pir_kernels::russians::entries_read(*layout, selection) * b
                }
                _ if b >= pir_kernels::xor::SPARSE_ROW_BYTES => {
                    (0..rows).filter(|&r| selection.bit(r)).count() * b
                }
                _ => rows * b,
            }
        };
        self.plan(prepared)
            .iter()
            .map(|step| match step {
                Step::Alone(i) => alone(prepared[*i]),
                Step::Pass { .. } => rows * b,
            })
            .sum()
    }

    /// What [`Engine::answer`] reads for `prepared` when it reads only some rows: the region
    /// (the database or the four-Russians table), the size of its rows, and the rows or
    /// entries it reads, in order. `None` for a dense scan, which reads every row. For
    /// `pir bench`, which times a plain read of just these rows as the limit of the answer;
    /// not a hot path.
    pub fn rows_read(&self, prepared: &Prepared) -> Option<(&[u8], usize, Vec<usize>)> {
        let shape = self.database.shape();
        let b = shape.block_size();
        let refs = prepared.refs();
        let selection = Selection::new(&refs);
        match &self.russians {
            Some((layout, table)) if self.uses_table(prepared) => Some((
                &table[..],
                b,
                pir_kernels::russians::entries_list(*layout, selection),
            )),
            _ if b >= pir_kernels::xor::SPARSE_ROW_BYTES => Some((
                self.database.bytes(),
                b,
                (0..shape.block_count())
                    .filter(|&r| selection.bit(r))
                    .collect(),
            )),
            _ => None,
        }
    }

    /// [`Engine::prepare`] then [`Engine::answer`].
    pub fn answer_body(&self, scheme: SchemeId, body: &[u8]) -> Result<Vec<u8>, Error> {
        Ok(self.answer(&self.prepare(scheme, body)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::AnswerMode;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn queries(shape: DbShape, rng: &mut ChaCha20Rng) -> Vec<(SchemeId, Vec<u8>)> {
        let mut out = Vec::new();
        let chor = Chor::new(shape, 2).unwrap();
        let (qs, _) = chor.query(&[shape.block_count() / 2], rng).unwrap();
        out.push((SchemeId::Chor, chor.encode_query(&qs[0])));
        let dpf = crate::DpfPir::new(shape);
        let (qs, _) = dpf.query(&[shape.block_count() / 3], rng).unwrap();
        for q in &qs {
            out.push((SchemeId::Dpf, dpf.encode_query(q)));
        }
        // Chunk counts dividing the table's 48 and one that does not (5: plain scan).
        for (c, mode) in [
            (1, AnswerMode::Single),
            (3, AnswerMode::Single),
            (3, AnswerMode::PerChunk),
            (16, AnswerMode::PerChunk),
            (5, AnswerMode::PerChunk),
        ] {
            let raid = RaidPir::new(shape, 3, 2, c.min(shape.block_count()), mode).unwrap();
            let (qs, _) = raid.query(&[shape.block_count() - 1], rng).unwrap();
            for q in &qs {
                out.push((SchemeId::RaidPir, raid.encode_query(q)));
            }
        }
        out
    }

    #[test]
    fn bytes_read_follows_the_answer_path() {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let shape = DbShape::new(3072, 4096).unwrap();
        let db = Database::random(shape, &mut rng);
        let chor = Chor::new(shape, 2).unwrap();
        let (qs, _) = chor.query(&[17], &mut rng).unwrap();
        let body = chor.encode_query(&qs[0]);
        let selected = qs[0].bits.count_ones();
        let plain = Engine::new(
            Database::from_bytes(shape, db.bytes()).unwrap(),
            EngineOptions {
                russians: Russians::Off,
                ..EngineOptions::default()
            },
            &|_, _| {},
        );
        let p = plain.prepare(SchemeId::Chor, &body).unwrap();
        // Plain, 4 KiB rows: the selected rows only.
        assert_eq!(plain.bytes_read(&[&p]), selected * 4096);
        // Past the plain threshold, one shared pass reads the database once.
        let many: Vec<&Prepared> =
            std::iter::repeat_n(&p, BATCH_PASS_IN_PLAIN_QUERIES + 1).collect();
        assert_eq!(plain.bytes_read(&many), shape.total_bytes());
        // The rows it reads, XORed, are its answer.
        let (region, size, list) = plain.rows_read(&p).unwrap();
        assert_eq!((list.len(), size), (selected, 4096));
        let mut sum = vec![0u8; 4096];
        for &r in &list {
            pir_kernels::xor_into(&mut sum, &region[r * 4096..(r + 1) * 4096]);
        }
        assert_eq!(
            plain.answer(&p),
            chor.encode_answer(&crate::ChorAnswer { block: sum.clone() })
        );
        let table = Engine::new(
            db,
            EngineOptions {
                russians: Russians::Group(4),
                ..EngineOptions::default()
            },
            &|_, _| {},
        );
        let p = table.prepare(SchemeId::Chor, &body).unwrap();
        // The table: one entry per group with a selected row, at most 3072 / 4 of them.
        let read = table.bytes_read(&[&p]);
        assert!(read <= 768 * 4096 && read * 4 >= selected * 4096, "{read}");
        // Its entries, XORed, are the same answer; a dense engine reads every row.
        let (region, size, list) = table.rows_read(&p).unwrap();
        assert_eq!(list.len() * size, read);
        let mut from_table = vec![0u8; 4096];
        for &e in &list {
            pir_kernels::xor_into(&mut from_table, &region[e * 4096..(e + 1) * 4096]);
        }
        assert_eq!(from_table, sum);
        let small = DbShape::new(64, 32).unwrap();
        let dense = Engine::new(
            Database::zeroed(small),
            EngineOptions::default(),
            &|_, _| {},
        );
        let chor = Chor::new(small, 2).unwrap();
        let (qs, _) = chor.query(&[3], &mut rng).unwrap();
        let p = dense
            .prepare(SchemeId::Chor, &chor.encode_query(&qs[0]))
            .unwrap();
        assert!(dense.rows_read(&p).is_none());
    }

    #[test]
    fn every_method_gives_the_reference_answer() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        for (rows, b) in [
            (1usize, 32usize),
            (37, 32),
            (200, 64),
            (129, 1024),
            (50, 4096),
            // Enough rows for a 48-chunk table with t = 2 (48 x 2 x 16).
            (3001, 64),
        ] {
            let shape = DbShape::new(rows as u64, b).unwrap();
            let db = Database::random(shape, &mut rng);
            let reference: Vec<Vec<u8>> = queries(shape, &mut rng.clone())
                .iter()
                .map(|(scheme, body)| crate::serve::answer_body(&db, *scheme, body).unwrap())
                .collect();
            let bodies = queries(shape, &mut rng);
            for russians in [
                Russians::Off,
                Russians::Auto,
                Russians::Group(2),
                Russians::Group(8),
            ] {
                let options = EngineOptions {
                    russians,
                    ..EngineOptions::default()
                };
                let engine = Engine::new(
                    Database::from_bytes(shape, db.bytes()).unwrap(),
                    options,
                    &|_, _| {},
                );
                if rows == 3001 && russians == Russians::Group(2) {
                    assert_eq!(
                        engine.russians.as_ref().map(|(l, _)| l.chunks()),
                        Some(TABLE_CHUNKS)
                    );
                }
                let prepared: Vec<Prepared> = bodies
                    .iter()
                    .map(|(scheme, body)| engine.prepare(*scheme, body).unwrap())
                    .collect();
                for (p, expect) in prepared.iter().zip(&reference) {
                    assert_eq!(&engine.answer(p), expect, "{rows}x{b} {russians:?}");
                }
                // Ten queries: small groups, answered one by one.
                assert_eq!(
                    engine.answer_batch(&prepared),
                    reference,
                    "{rows}x{b} batch"
                );
                // Thirty: every group is past its threshold, answered in shared passes.
                let many: Vec<&Prepared> =
                    prepared.iter().cycle().take(3 * prepared.len()).collect();
                assert!(many.len() > 2 * BATCH_PASS_IN_TABLE_QUERIES);
                let expect: Vec<Vec<u8>> =
                    reference.iter().cycle().take(many.len()).cloned().collect();
                assert_eq!(
                    engine.answer_batch_refs(&many),
                    expect,
                    "{rows}x{b} big batch"
                );
            }
        }
    }

    #[test]
    fn auto_uses_tables_for_large_blocks_only_and_within_the_limit() {
        let small = DbShape::new(1000, 32).unwrap();
        let large = DbShape::new(1000, 4096).unwrap();
        let options = EngineOptions::default();
        assert!(Engine::plan_russians(small, options).is_none());
        // The threshold itself is in, the block size below it out.
        let at = DbShape::new(1000, RUSSIANS_MIN_BLOCK).unwrap();
        let below = DbShape::new(1000, RUSSIANS_MIN_BLOCK - 32).unwrap();
        assert!(Engine::plan_russians(at, options).is_some());
        assert!(Engine::plan_russians(below, options).is_none());
        assert_eq!(
            Engine::plan_russians(large, options).map(|l| l.group_size()),
            Some(4)
        );
        let tight = EngineOptions {
            russians_memory_limit: 1 << 20,
            ..options
        };
        assert!(Engine::plan_russians(large, tight).is_none());
        let forced = EngineOptions {
            russians: Russians::Group(8),
            ..options
        };
        assert_eq!(
            Engine::plan_russians(small, forced).map(|l| l.group_size()),
            Some(8)
        );
        let off = EngineOptions {
            russians: Russians::Off,
            ..options
        };
        assert!(Engine::plan_russians(large, off).is_none());
    }

    #[test]
    fn refuses_bad_bodies_before_scanning() {
        let shape = DbShape::new(64, 64).unwrap();
        let engine = Engine::new(
            Database::zeroed(shape),
            EngineOptions::default(),
            &|_, _| {},
        );
        assert!(engine.prepare(SchemeId::Chor, &[]).is_err());
        assert!(matches!(
            engine.prepare(SchemeId::Chor, &vec![0u8; 1 << 20]),
            Err(Error::Oversized { .. })
        ));
        assert!(matches!(
            engine.prepare(SchemeId::SimplePir, &[0u8; 8]),
            Err(Error::WrongScheme { .. })
        ));
    }
}
