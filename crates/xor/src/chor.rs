//! Chor et al. k-server XOR PIR, as deployed by upPIR (Cappos 2013, section 4).
//!
//! The client wants block `idx` of `B`. Servers `0..n-1` each receive a `B`-bit vector:
//! servers `0..=n-2` uniformly random vectors, server `n-1` their XOR with bit `idx` flipped.
//! Every server answers with the XOR of the blocks whose bit is set; the XOR of all `n` answers
//! is block `idx`, because every other block is selected an even number of times.
//!
//! Privacy: any `n - 1` servers together see independent uniformly random vectors, so the index
//! stays hidden unless *all* `n` servers collude. Work and answer size (`b` bytes) do not depend
//! on the index. Communication is `B` bits up and `b` bytes down per server.
//!
//! Query body (little-endian):
//!
//! ```text
//! block_count u64 | block_size u32 | bits: ceil(B / 8) bytes, LSB-first, bits past B zero
//! ```
//!
//! Answer body: exactly `b` bytes.

use pir_core::bits::{self, BitVec};
use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Database, DbShape, Error, MultiServerScheme, SchemeId};
use rand::CryptoRng;

pub use crate::{MAX_SERVERS, MIN_SERVERS};

/// Bytes of the fixed query header: `block_count u64 | block_size u32`.
pub const QUERY_HEADER_LEN: usize = 8 + 4;

/// The Chor et al. scheme over a database of a fixed shape with `n` servers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Chor {
    shape: DbShape,
    servers: usize,
}

/// What one server receives: a `B`-bit vector selecting the blocks to XOR.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChorQuery {
    /// Bit `i` set means "XOR block `i` into the answer"; exactly `B` bits.
    pub bits: BitVec,
}

/// What one server sends back: the XOR of the selected blocks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChorAnswer {
    /// Exactly `b` bytes.
    pub block: Vec<u8>,
}

/// What the client keeps between [`Chor::query`](MultiServerScheme::query) and
/// [`Chor::decode`](MultiServerScheme::decode).
#[derive(Clone, PartialEq, Eq)]
pub struct ChorState {
    index: usize,
}

impl std::fmt::Debug for ChorState {
    // The index is the one secret of the protocol; keep it out of debug output and logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChorState").finish_non_exhaustive()
    }
}

impl ChorState {
    /// The requested block indices, in request order (one for Chor).
    pub fn indices(&self) -> &[usize] {
        std::slice::from_ref(&self.index)
    }
}

impl Chor {
    /// Builds the scheme for `servers` servers (`MIN_SERVERS..=MAX_SERVERS`).
    pub fn new(shape: DbShape, servers: usize) -> Result<Chor, Error> {
        if !(MIN_SERVERS..=MAX_SERVERS).contains(&servers) {
            return Err(Error::InvalidParameter(format!(
                "Chor needs between {MIN_SERVERS} and {MAX_SERVERS} servers, got {servers}"
            )));
        }
        Ok(Chor { shape, servers })
    }

    /// Exact length of a query body for `shape`.
    pub fn query_body_len(shape: DbShape) -> usize {
        QUERY_HEADER_LEN + bits::byte_len(shape.block_count())
    }

    /// The scheme as a mirror sees it: answers do not depend on `n`.
    pub(crate) fn for_mirror(shape: DbShape) -> Chor {
        Chor {
            shape,
            servers: MIN_SERVERS,
        }
    }

    /// Answers a query body without knowing `n` (the answer does not depend on it): what a
    /// mirror runs. Checks the shape in the body against `db` before allocating anything.
    pub(crate) fn answer_body(db: &Database, body: &[u8]) -> Result<Vec<u8>, Error> {
        let scheme = Chor::for_mirror(db.shape());
        let query = scheme.decode_query(body)?;
        let answer = scheme.answer(db, &query)?;
        Ok(scheme.encode_answer(&answer))
    }
}

/// Reads `block_count u64 | block_size u32` and checks them against `shape`.
pub(crate) fn check_shape_header(reader: &mut Reader<'_>, shape: DbShape) -> Result<(), Error> {
    let block_count = reader.u64()?;
    let block_size = reader.u32()?;
    if block_count != shape.block_count() as u64 || block_size as usize != shape.block_size() {
        return Err(Error::DatabaseMismatch(format!(
            "query is for {block_count} blocks of {block_size} bytes, this database has {} blocks of {} bytes",
            shape.block_count(),
            shape.block_size()
        )));
    }
    Ok(())
}

/// Writes `block_count u64 | block_size u32`.
pub(crate) fn write_shape_header(writer: &mut Writer, shape: DbShape) {
    writer.u64(shape.block_count() as u64);
    // `DbShape` bounds the block size by 16 MiB, so it fits in a u32.
    writer.u32(u32::try_from(shape.block_size()).unwrap_or(u32::MAX));
}

/// A Chor query body as sent: the shape it was made for, then the bits. The context is the
/// database's shape, which the body must name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChorQueryBody {
    /// The database shape the query was made for.
    pub shape: DbShape,
    /// The selection.
    pub query: ChorQuery,
}

fn write_query(writer: &mut Writer, shape: DbShape, query: &ChorQuery) {
    write_shape_header(writer, shape);
    writer.bytes(query.bits.as_bytes());
}

impl Codec<'_> for ChorQueryBody {
    type Context = DbShape;

    fn encode(&self, w: &mut Writer) {
        write_query(w, self.shape, &self.query);
    }

    fn decode(reader: &mut Reader<'_>, shape: &DbShape) -> Result<Self, Error> {
        check_shape_header(reader, *shape)?;
        // The length is exact, so it is checked before `from_wire` copies the bits.
        let need = bits::byte_len(shape.block_count());
        if reader.remaining() < need {
            return Err(Error::Truncated {
                needed: need - reader.remaining(),
            });
        }
        let bits = BitVec::from_wire(shape.block_count(), reader.take(need)?)?;
        Ok(Self {
            shape: *shape,
            query: ChorQuery { bits },
        })
    }
}

/// A server's answer for a Chor-style selection (Chor, DPF PIR): the XOR of the blocks whose
/// bit is set in `bits`, after checking the database and the selection against `shape`.
pub(crate) fn answer_selection(
    db: &Database,
    shape: DbShape,
    bits: &BitVec,
) -> Result<Vec<u8>, Error> {
    if db.shape() != shape {
        return Err(Error::DatabaseMismatch(
            "the database shape differs from the scheme's".into(),
        ));
    }
    if bits.len() != shape.block_count() {
        return Err(Error::WrongLength(format!(
            "query has {} bits, the database has {} blocks",
            bits.len(),
            shape.block_count()
        )));
    }
    let mut block = vec![0u8; shape.block_size()];
    pir_kernels::scan(
        pir_kernels::Selection::new(&[bits.as_bytes()]),
        db.bytes(),
        shape.block_size(),
        0..shape.block_count(),
        &mut block,
    );
    Ok(block)
}

/// The client's decoding of a Chor-style answer set: the XOR of one block of `block_size`
/// bytes from each of `servers` servers.
pub(crate) fn xor_answers<'a>(
    servers: usize,
    block_size: usize,
    answers: impl ExactSizeIterator<Item = &'a [u8]>,
) -> Result<Vec<u8>, Error> {
    if answers.len() != servers {
        return Err(Error::WrongLength(format!(
            "expected {servers} answers, got {}",
            answers.len()
        )));
    }
    let mut block = vec![0u8; block_size];
    for answer in answers {
        check_answer_len(answer, block_size)?;
        pir_kernels::xor_into(&mut block, answer);
    }
    Ok(block)
}

/// Checks that an answer body is exactly one block of `block_size` bytes.
pub(crate) fn check_answer_len(answer: &[u8], block_size: usize) -> Result<(), Error> {
    if answer.len() != block_size {
        return Err(Error::WrongLength(format!(
            "answer has {} bytes, expected {block_size}",
            answer.len()
        )));
    }
    Ok(())
}

impl MultiServerScheme for Chor {
    type Query = ChorQuery;
    type Answer = ChorAnswer;
    type ClientState = ChorState;

    fn id(&self) -> SchemeId {
        SchemeId::Chor
    }

    fn shape(&self) -> DbShape {
        self.shape
    }

    fn servers(&self) -> usize {
        self.servers
    }

    fn max_blocks_per_query(&self) -> usize {
        1
    }

    fn max_answer_body(&self) -> usize {
        self.shape().block_size()
    }

    fn query(
        &self,
        indices: &[usize],
        rng: &mut impl CryptoRng,
    ) -> Result<(Vec<ChorQuery>, ChorState), Error> {
        let &[index] = indices else {
            return Err(Error::InvalidParameter(format!(
                "Chor retrieves exactly one block per query, got {} indices",
                indices.len()
            )));
        };
        let block_count = self.shape.block_count();
        if index >= block_count {
            return Err(Error::InvalidParameter(format!(
                "block index out of range (database has {block_count} blocks)"
            )));
        }
        let mut last = BitVec::zeros(block_count);
        let mut queries = Vec::with_capacity(self.servers);
        for _ in 0..self.servers - 1 {
            let bits = BitVec::random(block_count, rng);
            last.xor_assign(&bits);
            queries.push(ChorQuery { bits });
        }
        last.flip(index);
        queries.push(ChorQuery { bits: last });
        Ok((queries, ChorState { index }))
    }

    fn answer(&self, db: &Database, query: &ChorQuery) -> Result<ChorAnswer, Error> {
        let block = answer_selection(db, self.shape, &query.bits)?;
        Ok(ChorAnswer { block })
    }

    fn decode(&self, _state: &ChorState, answers: &[ChorAnswer]) -> Result<Vec<Vec<u8>>, Error> {
        let blocks = answers.iter().map(|a| a.block.as_slice());
        Ok(vec![xor_answers(
            self.servers,
            self.shape.block_size(),
            blocks,
        )?])
    }

    fn encode_query(&self, query: &ChorQuery) -> Vec<u8> {
        let mut writer = Writer::with_capacity(QUERY_HEADER_LEN + query.bits.as_bytes().len());
        write_query(&mut writer, self.shape, query);
        writer.into_bytes()
    }

    fn decode_query(&self, bytes: &[u8]) -> Result<ChorQuery, Error> {
        ChorQueryBody::from_bytes(bytes, &self.shape).map(|body| body.query)
    }

    fn encode_answer(&self, answer: &ChorAnswer) -> Vec<u8> {
        answer.block.clone()
    }

    fn decode_answer(&self, _query: &ChorQuery, bytes: &[u8]) -> Result<ChorAnswer, Error> {
        check_answer_len(bytes, self.shape.block_size())?;
        Ok(ChorAnswer {
            block: bytes.to_vec(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn setup(block_count: u64, servers: usize) -> (Chor, Database, ChaCha20Rng) {
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let shape = DbShape::new(block_count, 64).unwrap();
        let db = Database::random(shape, &mut rng);
        (Chor::new(shape, servers).unwrap(), db, rng)
    }

    #[test]
    fn rejects_bad_server_counts_and_indices() {
        let shape = DbShape::new(10, 64).unwrap();
        assert!(Chor::new(shape, 1).is_err());
        assert!(Chor::new(shape, MAX_SERVERS + 1).is_err());
        let chor = Chor::new(shape, 2).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(0);
        assert!(chor.query(&[10], &mut rng).is_err());
        assert!(chor.query(&[1, 2], &mut rng).is_err());
        assert!(chor.query(&[], &mut rng).is_err());
    }

    #[test]
    fn every_index_decodes() {
        for servers in [2, 3, 5] {
            let (chor, db, mut rng) = setup(13, servers);
            for index in 0..13 {
                let (queries, state) = chor.query(&[index], &mut rng).unwrap();
                assert_eq!(queries.len(), servers);
                let answers: Vec<_> = queries
                    .iter()
                    .map(|q| chor.answer(&db, q).unwrap())
                    .collect();
                assert_eq!(
                    chor.decode(&state, &answers).unwrap(),
                    vec![db.block(index).to_vec()]
                );
            }
        }
    }

    #[test]
    fn query_body_round_trips_and_checks_tail() {
        let (chor, _, mut rng) = setup(13, 3);
        let (queries, _) = chor.query(&[4], &mut rng).unwrap();
        for query in &queries {
            let body = chor.encode_query(query);
            assert_eq!(body.len(), Chor::query_body_len(chor.shape()));
            assert_eq!(&chor.decode_query(&body).unwrap(), query);
        }
        let mut body = chor.encode_query(&queries[0]);
        // B = 13: bits 13..16 of the last byte must be zero.
        *body.last_mut().unwrap() |= 0x80;
        assert!(matches!(chor.decode_query(&body), Err(Error::Malformed(_))));
    }

    #[test]
    fn decode_rejects_wrong_answer_counts_and_lengths() {
        let (chor, db, mut rng) = setup(5, 2);
        let (queries, state) = chor.query(&[0], &mut rng).unwrap();
        let mut answers: Vec<_> = queries
            .iter()
            .map(|q| chor.answer(&db, q).unwrap())
            .collect();
        assert!(chor.decode(&state, &answers[..1]).is_err());
        answers[1].block.pop();
        assert!(chor.decode(&state, &answers).is_err());
        assert!(chor.decode_answer(&queries[0], &[0; 63]).is_err());
    }
}
