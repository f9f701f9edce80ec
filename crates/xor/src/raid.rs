//! RAID-PIR (Demmler, Herzberg, Schneider 2014; Günther 2019, sections 3.2 and 3.2.1).
//!
//! The `B` blocks are split into `c` chunks; each chunk is processed by `r` of the `n` servers.
//! For every chunk one of its servers (the *flip server*) receives an explicit bit vector (the
//! *flip chunk*), the other `r - 1` receive pseudorandom bits expanded from a 128-bit seed
//! ([`crate::prg`]), so a server receives one seed plus its flip chunks instead of `B` bits.
//! The client picks the flip chunks so that, per chunk, all `r` selections XOR to the unit
//! vector of the wanted block; the XOR of the servers' answers is then that block.
//!
//! # Layout (notation of [`pir_core::glossary`])
//!
//! - Chunk of block `i`: `j = i mod c`, position inside the chunk `p = i / c`; chunk `j` holds
//!   `k_j = ceil((B - j) / c)` blocks, so every chunk is non-empty because `c <= B`.
//!
//!   **Deviation from the thesis**, which uses contiguous chunks `C_j = B_{kj} .. B_{kj+k-1}`:
//!   the chunk sets here are still a fixed, public partition of the blocks, so the security
//!   argument is unchanged; but consecutive blocks of a file fall in different chunks, so one
//!   multi-block query (section 3.2.1, up to `c` chunk-disjoint blocks) fetches up to `c`
//!   consecutive blocks, and the number of queries needed for a file depends only on its block
//!   count, never on where the file sits in the database.
//! - Chunk `j` is processed by the `r` distinct servers `(j + t) mod n`, `t = 0..r`; its flip
//!   server is `j mod n` (`t = 0`). Server `s` processes chunk `j` iff `(s - j) mod n < r`.
//!   (The thesis lets server `i` process `C_i .. C_{i+r-1}`; this is the same rotation with
//!   the roles mirrored, and it extends to `c != n`.)
//! - Seed expansion for server `s`: the stream `prg::expand(seed_s)` is cut, in increasing `j`,
//!   over the chunks `s` processes that are not its flip chunks; each takes the next
//!   `ceil(k_j / 8)` bytes, bit `p` LSB-first, bits past `k_j` ignored.
//!
//! # Privacy
//!
//! Every chunk is seen by `r` distinct servers; any `r - 1` of them miss at least one: either a
//! PRG server, whose fresh seed masks the flip chunk, or the flip server, without which they
//! only see their own seeds. So the index stays hidden from any `r - 1` colluding servers. A
//! server's work and answer size depend only on `(n, r, c, B, b)`, its position and the mode,
//! never on the index. The [`AnswerMode`] must be chosen by policy, never from the indices.
//!
//! # Wire format (little-endian)
//!
//! ```text
//! query  = block_count u64 | block_size u32 | n u16 | r u16 | c u32 | server u16
//!        | mode u8 (0 Single, 1 PerChunk) | seed 16 bytes
//!        | flip chunks of this server, increasing j, ceil(k_j / 8) bytes each, tail bits zero
//! answer = Single: b bytes; PerChunk: (chunks processed by the server) * b bytes, increasing j
//! ```

use pir_core::bits::{self, BitVec};
use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Database, DbShape, Error, MultiServerScheme, SchemeId};
use rand::CryptoRng;

use crate::chor::{check_shape_header, write_shape_header};
use crate::prg::{self, Seed, SEED_LEN};
pub use crate::{MAX_SERVERS, MIN_SERVERS};

/// Most chunks `c`: bounds the blocks one multi-block query returns, the per-chunk answer
/// count of one server, and the flip-chunk overhead of a query body (at most one partial byte
/// per chunk). Section 3.2.1 of Günther 2019 allows up to `c` blocks per query.
pub const MAX_CHUNKS: usize = 256;

/// Bytes of the fixed query header, up to and including the seed:
/// `8 + 4 + 2 + 2 + 4 + 2 + 1 + 16`.
pub const QUERY_HEADER_LEN: usize = 8 + 4 + 2 + 2 + 4 + 2 + 1 + SEED_LEN;

/// How servers answer, chosen by the client's policy (never from the indices it wants).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AnswerMode {
    /// Each server returns one block, the XOR over all its chunks: one index per query
    /// (section 3.2).
    Single,
    /// Each server returns one block per chunk it processes, increasing chunk number: up to
    /// `c` chunk-disjoint indices per query (section 3.2.1).
    PerChunk,
}

impl AnswerMode {
    /// The mode's wire byte.
    pub fn to_byte(self) -> u8 {
        match self {
            AnswerMode::Single => 0,
            AnswerMode::PerChunk => 1,
        }
    }

    /// Parses a mode byte from the wire.
    pub fn from_byte(byte: u8) -> Result<AnswerMode, Error> {
        match byte {
            0 => Ok(AnswerMode::Single),
            1 => Ok(AnswerMode::PerChunk),
            other => Err(Error::UnknownValue {
                field: "RAID-PIR answer mode",
                found: u64::from(other),
            }),
        }
    }
}

/// RAID-PIR over a database of a fixed shape with parameters `n`, `r`, `c` and a mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaidPir {
    shape: DbShape,
    servers: usize,
    redundancy: usize,
    chunks: usize,
    mode: AnswerMode,
}

/// What server `server` receives: its seed and its flip chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaidQuery {
    /// The receiving server's position `s`, `0..n`.
    pub server: usize,
    /// Fresh random seed; expands to the sub-queries of the chunks `s` processes but does not
    /// flip.
    pub seed: Seed,
    /// One vector per flip chunk of `s` (chunks `j` with `j mod n == s`), increasing `j`,
    /// `k_j` bits each.
    pub flips: Vec<BitVec>,
}

/// What one server sends back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaidAnswer {
    /// `b`-byte blocks: one in [`AnswerMode::Single`], one per processed chunk (increasing
    /// chunk number) in [`AnswerMode::PerChunk`].
    pub blocks: Vec<Vec<u8>>,
}

/// What the client keeps between [`RaidPir::query`](MultiServerScheme::query) and
/// [`RaidPir::decode`](MultiServerScheme::decode).
#[derive(Clone, PartialEq, Eq)]
pub struct RaidState {
    indices: Vec<usize>,
}

impl std::fmt::Debug for RaidState {
    // The indices are the one secret of the protocol; keep them out of debug output and logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RaidState").finish_non_exhaustive()
    }
}

impl RaidState {
    /// The requested block indices, in request order.
    pub fn indices(&self) -> &[usize] {
        &self.indices
    }
}

/// The parameters every RAID-PIR and QDP body names after the shape: the scheme (`n`, `r`,
/// `c`, mode) and the receiving server's position. Read from untrusted bytes, they are checked
/// against the database shape (the context) and against each other, allocating nothing.
///
/// ```text
/// params = block_count u64 | block_size u32 | n u16 | r u16 | c u32 | server u16 | mode u8
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RaidParams {
    /// The scheme the body is for.
    pub scheme: RaidPir,
    /// The receiving server's position, `0..n`.
    pub server: usize,
}

impl Codec<'_> for RaidParams {
    type Context = DbShape;

    fn encode(&self, w: &mut Writer) {
        let scheme = &self.scheme;
        write_shape_header(w, scheme.shape);
        // n <= 64, r <= n, c <= 256 (`RaidPir::new`) and server < n (every caller's query),
        // so these conversions never saturate.
        w.u16(u16::try_from(scheme.servers).unwrap_or(u16::MAX));
        w.u16(u16::try_from(scheme.redundancy).unwrap_or(u16::MAX));
        w.u32(u32::try_from(scheme.chunks).unwrap_or(u32::MAX));
        w.u16(u16::try_from(self.server).unwrap_or(u16::MAX));
        w.u8(scheme.mode.to_byte());
    }

    fn decode(r: &mut Reader<'_>, shape: &DbShape) -> Result<Self, Error> {
        check_shape_header(r, *shape)?;
        let servers = usize::from(r.u16()?);
        let redundancy = usize::from(r.u16()?);
        let chunks = r.u32()? as usize;
        let server = usize::from(r.u16()?);
        let mode = AnswerMode::from_byte(r.u8()?)?;
        let scheme = RaidPir::new(*shape, servers, redundancy, chunks, mode).map_err(|error| {
            match error {
                // Parameters read from the wire are the peer's fault, not the caller's.
                Error::InvalidParameter(message) => Error::Malformed(message),
                other => other,
            }
        })?;
        if server >= servers {
            return Err(Error::OutOfRange {
                field: "server position",
                found: server as u64,
                limit: servers as u64,
            });
        }
        Ok(Self { scheme, server })
    }
}

/// A RAID-PIR query body as sent (layout in the module documentation). The context is the
/// database's shape: the body names its own parameters, as a mirror (which can play any
/// position of any parameters) reads them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RaidQueryBody {
    /// The scheme the query was made for.
    pub scheme: RaidPir,
    /// The query (its `server` is the position the body names).
    pub query: RaidQuery,
}

impl Codec<'_> for RaidQueryBody {
    type Context = DbShape;

    fn encode(&self, w: &mut Writer) {
        RaidParams {
            scheme: self.scheme,
            server: self.query.server,
        }
        .encode(w);
        w.bytes(&self.query.seed);
        for flip in &self.query.flips {
            w.bytes(flip.as_bytes());
        }
    }

    fn decode(r: &mut Reader<'_>, shape: &DbShape) -> Result<Self, Error> {
        let RaidParams { scheme, server } = RaidParams::decode(r, shape)?;
        let seed = r.array()?;
        let flips = scheme.read_flips(server, r)?;
        Ok(Self {
            scheme,
            query: RaidQuery {
                server,
                seed,
                flips,
            },
        })
    }
}

/// How many blocks of how many bytes an answer body holds: the context of [`RaidAnswer`] (the
/// client knows both from its parameters and the position it asked).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AnswerShape {
    /// Blocks in the answer.
    pub blocks: usize,
    /// Bytes per block.
    pub block_size: usize,
}

impl Codec<'_> for RaidAnswer {
    type Context = AnswerShape;

    fn encode(&self, w: &mut Writer) {
        for block in &self.blocks {
            w.bytes(block);
        }
    }

    fn decode(r: &mut Reader<'_>, shape: &AnswerShape) -> Result<Self, Error> {
        // The context bounds the count (at most MAX_CHUNKS blocks of at most 16 MiB); the bytes
        // must be there before anything is copied.
        let len = shape.blocks.saturating_mul(shape.block_size);
        let bytes = r.take(len)?;
        let blocks = bytes
            .chunks_exact(shape.block_size.max(1))
            .map(<[u8]>::to_vec)
            .collect();
        Ok(Self { blocks })
    }
}

impl RaidPir {
    /// Builds the scheme: `2 <= n <= MAX_SERVERS`, `2 <= r <= n`, `1 <= c <= min(B, MAX_CHUNKS)`.
    pub fn new(
        shape: DbShape,
        servers: usize,
        redundancy: usize,
        chunks: usize,
        mode: AnswerMode,
    ) -> Result<RaidPir, Error> {
        if !(MIN_SERVERS..=MAX_SERVERS).contains(&servers) {
            return Err(Error::InvalidParameter(format!(
                "RAID-PIR needs between {MIN_SERVERS} and {MAX_SERVERS} servers, got {servers}"
            )));
        }
        if !(2..=servers).contains(&redundancy) {
            return Err(Error::InvalidParameter(format!(
                "RAID-PIR redundancy r = {redundancy} must be between 2 and n = {servers}"
            )));
        }
        let max_chunks = shape.block_count().min(MAX_CHUNKS);
        if !(1..=max_chunks).contains(&chunks) {
            return Err(Error::InvalidParameter(format!(
                "RAID-PIR chunk count c = {chunks} must be between 1 and {max_chunks} (min of B and {MAX_CHUNKS})"
            )));
        }
        Ok(RaidPir {
            shape,
            servers,
            redundancy,
            chunks,
            mode,
        })
    }

    /// Refuses a body that names other parameters than this scheme's (a peer error).
    pub(crate) fn check_same(&self, found: &RaidPir) -> Result<(), Error> {
        if found == self {
            return Ok(());
        }
        Err(Error::Malformed(format!(
            "parameters (n {}, r {}, c {}, mode {:?}) differ from this scheme's \
             (n {}, r {}, c {}, mode {:?})",
            found.servers,
            found.redundancy,
            found.chunks,
            found.mode,
            self.servers,
            self.redundancy,
            self.chunks,
            self.mode
        )))
    }

    /// The shape of server `server`'s answer body.
    pub fn answer_shape(&self, server: usize) -> AnswerShape {
        AnswerShape {
            blocks: self.answer_body_len(server) / self.shape.block_size(),
            block_size: self.shape.block_size(),
        }
    }

    /// `r`, the number of servers that process each chunk.
    pub fn redundancy(&self) -> usize {
        self.redundancy
    }

    /// `c`, the number of chunks.
    pub fn chunks(&self) -> usize {
        self.chunks
    }

    /// How servers answer.
    pub fn mode(&self) -> AnswerMode {
        self.mode
    }

    /// The chunk of block `index`: `index mod c`.
    pub fn chunk_of(&self, index: usize) -> usize {
        index % self.chunks
    }

    /// `k_j = ceil((B - j) / c)`, the number of blocks in chunk `chunk` (0 past the last chunk).
    pub fn chunk_len(&self, chunk: usize) -> usize {
        if chunk >= self.chunks {
            return 0;
        }
        (self.shape.block_count() - chunk).div_ceil(self.chunks)
    }

    /// True iff server `server` processes chunk `chunk`: `(server - chunk) mod n < r`
    /// (false for a server or chunk outside the parameters).
    pub fn processes(&self, server: usize, chunk: usize) -> bool {
        self.offset(server, chunk) < self.redundancy
    }

    /// `(server - chunk) mod n`: 0 for the flip server, `1..r` for the PRG servers;
    /// `usize::MAX` for a server or chunk outside the parameters.
    fn offset(&self, server: usize, chunk: usize) -> usize {
        if server >= self.servers || chunk >= self.chunks {
            return usize::MAX;
        }
        (server + self.servers - chunk % self.servers) % self.servers
    }

    /// The chunks server `server` processes, increasing.
    pub fn processed_chunks(&self, server: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.chunks).filter(move |&chunk| self.processes(server, chunk))
    }

    /// The flip chunks of server `server` (`j mod n == server`), increasing.
    pub fn flip_chunks(&self, server: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.chunks).filter(move |&chunk| self.offset(server, chunk) == 0)
    }

    /// The chunks whose sub-queries server `server` expands from its seed, increasing.
    fn seeded_chunks(&self, server: usize) -> impl Iterator<Item = usize> + '_ {
        (0..self.chunks)
            .filter(move |&chunk| (1..self.redundancy).contains(&self.offset(server, chunk)))
    }

    /// Exact length of the query body for server `server`.
    pub fn query_body_len(&self, server: usize) -> usize {
        QUERY_HEADER_LEN
            + self
                .flip_chunks(server)
                .map(|chunk| bits::byte_len(self.chunk_len(chunk)))
                .sum::<usize>()
    }

    /// Exact length of the answer body of server `server`.
    pub fn answer_body_len(&self, server: usize) -> usize {
        let blocks = match self.mode {
            AnswerMode::Single => 1,
            AnswerMode::PerChunk => self.processed_chunks(server).count(),
        };
        blocks * self.shape.block_size()
    }

    /// Upper bound on a RAID-PIR query body for `shape`, any valid parameters: the flip chunks
    /// of one server hold at most `ceil(B / 8)` bytes of bits plus one partial byte per chunk.
    pub fn max_query_body(shape: DbShape) -> usize {
        QUERY_HEADER_LEN + bits::byte_len(shape.block_count()) + shape.block_count().min(MAX_CHUNKS)
    }

    /// The sub-queries server `server` derives from `seed`: `(chunk, k_j bits)` for every
    /// chunk it processes but does not flip, increasing chunk (layout in the module doc).
    fn expand_subqueries(&self, server: usize, seed: &Seed) -> Result<Vec<(usize, BitVec)>, Error> {
        let chunks: Vec<usize> = self.seeded_chunks(server).collect();
        let total = chunks
            .iter()
            .map(|&chunk| bits::byte_len(self.chunk_len(chunk)))
            .sum();
        let mut stream = vec![0u8; total];
        prg::expand(seed, &mut stream);
        let mut offset = 0;
        chunks
            .into_iter()
            .map(|chunk| {
                let len = self.chunk_len(chunk);
                let bits = BitVec::from_prefix_truncating(len, &stream[offset..])?;
                offset += bits::byte_len(len);
                Ok((chunk, bits))
            })
            .collect()
    }

    /// Checks a query against the parameters (it may have been built by hand).
    fn check_query(&self, query: &RaidQuery) -> Result<(), Error> {
        self.check_flips(query.server, &query.flips)
    }

    /// Checks a server position and its flip chunks' lengths against the parameters (RAID-PIR
    /// and QDP queries carry the same flip chunks).
    pub(crate) fn check_flips(&self, server: usize, flips: &[BitVec]) -> Result<(), Error> {
        if server >= self.servers {
            return Err(Error::OutOfRange {
                field: "server position",
                found: server as u64,
                limit: self.servers as u64,
            });
        }
        let expected: Vec<usize> = self
            .flip_chunks(server)
            .map(|chunk| self.chunk_len(chunk))
            .collect();
        let found: Vec<usize> = flips.iter().map(BitVec::len).collect();
        if expected != found {
            return Err(Error::WrongLength(format!(
                "flip chunks of {found:?} bits, the parameters need {expected:?}"
            )));
        }
        Ok(())
    }

    /// Checks the requested indices against the mode and the chunk rule of section 3.2.1.
    pub(crate) fn check_indices(&self, indices: &[usize]) -> Result<(), Error> {
        let allowed = self.max_blocks_per_query();
        if indices.is_empty() || indices.len() > allowed {
            return Err(Error::InvalidParameter(format!(
                "this RAID-PIR mode retrieves 1 to {allowed} blocks per query, got {}",
                indices.len()
            )));
        }
        let mut used = vec![false; self.chunks];
        for &index in indices {
            if index >= self.shape.block_count() {
                return Err(Error::InvalidParameter(format!(
                    "block index out of range (database has {} blocks)",
                    self.shape.block_count()
                )));
            }
            let chunk = self.chunk_of(index);
            if std::mem::replace(&mut used[chunk], true) {
                return Err(Error::InvalidParameter(
                    "blocks of one RAID-PIR query must lie in distinct chunks (index mod c)".into(),
                ));
            }
        }
        Ok(())
    }

    /// Position of `chunk` in the per-chunk answer of `server` (its rank among the processed
    /// chunks), or `None` if the server does not process it.
    fn answer_slot(&self, server: usize, chunk: usize) -> Option<usize> {
        self.processes(server, chunk).then(|| {
            self.processed_chunks(server)
                .take_while(|&c| c < chunk)
                .count()
        })
    }

    /// The rows server `query.server` XORs: one bit vector per chunk (`k_j` bits for chunk `j`,
    /// empty for the chunks it does not process), in the layout of [`pir_kernels::Selection`].
    /// Checks the query against the parameters first.
    pub fn selection(&self, query: &RaidQuery) -> Result<Vec<BitVec>, Error> {
        self.check_query(query)?;
        let mut selection = vec![BitVec::zeros(0); self.chunks];
        for (chunk, bits) in self.flip_chunks(query.server).zip(&query.flips) {
            selection[chunk] = bits.clone();
        }
        for (chunk, bits) in self.expand_subqueries(query.server, &query.seed)? {
            selection[chunk] = bits;
        }
        Ok(selection)
    }

    /// Whether this query's answer is one XOR of every selected row (so four-Russians tables
    /// over consecutive rows can answer it).
    pub fn sums_all_chunks(&self) -> bool {
        self.mode == AnswerMode::Single
    }

    /// The answer of `server` from the per-chunk sums of its selection (`c * b` bytes, chunk
    /// `j` at `j * b`, as the scan kernels write them).
    pub fn answer_from_chunk_sums(&self, server: usize, sums: &[u8]) -> RaidAnswer {
        let b = self.shape.block_size();
        let blocks = match self.mode {
            AnswerMode::Single => {
                let mut block = vec![0u8; b];
                for sum in sums.chunks_exact(b) {
                    pir_kernels::xor_into(&mut block, sum);
                }
                vec![block]
            }
            AnswerMode::PerChunk => self
                .processed_chunks(server)
                .map(|chunk| sums[chunk * b..(chunk + 1) * b].to_vec())
                .collect(),
        };
        RaidAnswer { blocks }
    }

    /// The answer from one XOR of all selected rows (only for [`AnswerMode::Single`]).
    pub fn answer_from_total(&self, total: Vec<u8>) -> RaidAnswer {
        RaidAnswer {
            blocks: vec![total],
        }
    }

    /// Reads the flip-chunk bit vectors of `server` (the tail of a query body), checking the
    /// remaining length first. Shared by plain RAID-PIR and QDP query bodies.
    pub(crate) fn read_flips(
        &self,
        server: usize,
        reader: &mut Reader<'_>,
    ) -> Result<Vec<BitVec>, Error> {
        let need: usize = self
            .flip_chunks(server)
            .map(|chunk| bits::byte_len(self.chunk_len(chunk)))
            .sum();
        if reader.remaining() < need {
            return Err(Error::Truncated {
                needed: need - reader.remaining(),
            });
        }
        self.flip_chunks(server)
            .map(|chunk| {
                let len = self.chunk_len(chunk);
                BitVec::from_wire(len, reader.take(bits::byte_len(len))?)
            })
            .collect()
    }

    fn check_answers(&self, answers: &[RaidAnswer]) -> Result<(), Error> {
        if answers.len() != self.servers {
            return Err(Error::WrongLength(format!(
                "expected {} answers, got {}",
                self.servers,
                answers.len()
            )));
        }
        for (server, answer) in answers.iter().enumerate() {
            let blocks = self.answer_body_len(server) / self.shape.block_size();
            if answer.blocks.len() != blocks
                || answer
                    .blocks
                    .iter()
                    .any(|block| block.len() != self.shape.block_size())
            {
                return Err(Error::WrongLength(format!(
                    "answer of server {server} does not have {blocks} blocks of {} bytes",
                    self.shape.block_size()
                )));
            }
        }
        Ok(())
    }
}

impl MultiServerScheme for RaidPir {
    type Query = RaidQuery;
    type Answer = RaidAnswer;
    type ClientState = RaidState;

    fn id(&self) -> SchemeId {
        SchemeId::RaidPir
    }

    fn shape(&self) -> DbShape {
        self.shape
    }

    fn servers(&self) -> usize {
        self.servers
    }

    fn max_answer_body(&self) -> usize {
        (0..self.servers)
            .map(|s| self.answer_body_len(s))
            .max()
            .unwrap_or(0)
    }

    fn max_blocks_per_query(&self) -> usize {
        match self.mode {
            AnswerMode::Single => 1,
            AnswerMode::PerChunk => self.chunks,
        }
    }

    /// Randomness use (pinned by a known-answer test): one 16-byte `fill_bytes` per server,
    /// servers in order.
    fn query(
        &self,
        indices: &[usize],
        rng: &mut impl CryptoRng,
    ) -> Result<(Vec<RaidQuery>, RaidState), Error> {
        self.check_indices(indices)?;
        let mut seeds = vec![[0u8; SEED_LEN]; self.servers];
        for seed in &mut seeds {
            rng.fill_bytes(seed);
        }
        // flip_j = XOR of the other r - 1 servers' sub-queries for chunk j, then e_idx.
        let mut flips: Vec<BitVec> = (0..self.chunks)
            .map(|chunk| BitVec::zeros(self.chunk_len(chunk)))
            .collect();
        for (server, seed) in seeds.iter().enumerate() {
            for (chunk, bits) in self.expand_subqueries(server, seed)? {
                flips[chunk].xor_assign(&bits);
            }
        }
        for &index in indices {
            flips[self.chunk_of(index)].flip(index / self.chunks);
        }
        let mut queries: Vec<RaidQuery> = seeds
            .into_iter()
            .enumerate()
            .map(|(server, seed)| RaidQuery {
                server,
                seed,
                flips: Vec::new(),
            })
            .collect();
        for (chunk, bits) in flips.into_iter().enumerate() {
            queries[chunk % self.servers].flips.push(bits);
        }
        Ok((
            queries,
            RaidState {
                indices: indices.to_vec(),
            },
        ))
    }

    fn answer(&self, db: &Database, query: &RaidQuery) -> Result<RaidAnswer, Error> {
        if db.shape() != self.shape {
            return Err(Error::DatabaseMismatch(
                "the database shape differs from the scheme's".into(),
            ));
        }
        let selection = self.selection(query)?;
        let refs: Vec<&[u8]> = selection.iter().map(BitVec::as_bytes).collect();
        let b = self.shape.block_size();
        let mut sums = vec![0u8; self.chunks * b];
        pir_kernels::scan(
            pir_kernels::Selection::new(&refs),
            db.bytes(),
            b,
            0..self.shape.block_count(),
            &mut sums,
        );
        Ok(self.answer_from_chunk_sums(query.server, &sums))
    }

    fn decode(&self, state: &RaidState, answers: &[RaidAnswer]) -> Result<Vec<Vec<u8>>, Error> {
        self.check_answers(answers)?;
        let block_size = self.shape.block_size();
        match self.mode {
            AnswerMode::Single => {
                let mut block = vec![0u8; block_size];
                for answer in answers {
                    pir_kernels::xor_into(&mut block, &answer.blocks[0]);
                }
                Ok(vec![block])
            }
            AnswerMode::PerChunk => state
                .indices
                .iter()
                .map(|&index| {
                    let chunk = self.chunk_of(index);
                    let mut block = vec![0u8; block_size];
                    for t in 0..self.redundancy {
                        let server = (chunk + t) % self.servers;
                        let slot = self.answer_slot(server, chunk).ok_or_else(|| {
                            Error::InvalidParameter("client state does not match the scheme".into())
                        })?;
                        pir_kernels::xor_into(&mut block, &answers[server].blocks[slot]);
                    }
                    Ok(block)
                })
                .collect(),
        }
    }

    fn encode_query(&self, query: &RaidQuery) -> Vec<u8> {
        let mut writer = Writer::with_capacity(self.query_body_len(query.server));
        RaidQueryBody {
            scheme: *self,
            query: query.clone(),
        }
        .encode(&mut writer);
        writer.into_bytes()
    }

    fn decode_query(&self, bytes: &[u8]) -> Result<RaidQuery, Error> {
        let limit = RaidPir::max_query_body(self.shape);
        if bytes.len() > limit {
            return Err(Error::Oversized {
                len: bytes.len(),
                limit,
            });
        }
        let body = RaidQueryBody::from_bytes(bytes, &self.shape)?;
        self.check_same(&body.scheme)?;
        Ok(body.query)
    }

    fn encode_answer(&self, answer: &RaidAnswer) -> Vec<u8> {
        answer.to_bytes()
    }

    fn decode_answer(&self, query: &RaidQuery, bytes: &[u8]) -> Result<RaidAnswer, Error> {
        if query.server >= self.servers {
            return Err(Error::InvalidParameter(
                "query names a server outside the scheme".into(),
            ));
        }
        RaidAnswer::from_bytes(bytes, &self.answer_shape(query.server))
    }
}

#[cfg(test)]
#[path = "raid_tests.rs"]
mod tests;
