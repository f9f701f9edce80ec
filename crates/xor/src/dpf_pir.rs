//! Two-server PIR from a distributed point function ([`crate::dpf`]): Chor's scheme with each
//! selection vector compressed into a DPF key.
//!
//! The client makes a key pair for the point `i` over the `B` blocks and sends one key to each
//! server; each server expands its key into `B` selection bits ([`DpfKey::eval_all`]) and
//! XORs the selected blocks (the same scan as Chor); the XOR of the two answers is block `i`.
//! Privacy: a server that does not collude with the other sees one DPF key, pseudorandom
//! whatever `i` is (128-bit security, the PRG is fixed-key AES). Communication: 267 bytes up
//! per server at `B = 2^20` instead of Chor's 128 KiB; the server's extra work is the
//! expansion, about `B / 64` AES blocks.
//!
//! ```text
//! query  = block_count u64 | block_size u32 | DPF key (crate::dpf; depth from block_count)
//! answer = b bytes
//! ```

use pir_core::bits::BitVec;
use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Database, DbShape, Error, MultiServerScheme, SchemeId};
use rand::CryptoRng;

use crate::chor::{
    answer_selection, check_shape_header, write_shape_header, xor_answers, QUERY_HEADER_LEN,
};
use crate::dpf::{self, DpfKey};

/// DPF PIR over a database of a fixed shape (always two servers).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DpfPir {
    shape: DbShape,
}

/// What one server receives: its DPF key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpfQuery {
    key: DpfKey,
}

impl DpfQuery {
    /// The query that sends `key`.
    pub fn from_key(key: DpfKey) -> Self {
        Self { key }
    }
}

/// One server's answer: the XOR of the blocks its key selects.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpfAnswer {
    block: Vec<u8>,
}

impl DpfAnswer {
    /// The answer whose bytes are `block` (the XOR of the selected blocks).
    pub fn new(block: Vec<u8>) -> Self {
        Self { block }
    }
}

/// A DPF query body as sent: the shape the key was made for, then the key. The context is the
/// database's shape, which the body must name and which fixes the key's depth.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DpfQueryBody {
    /// The database shape the query was made for.
    pub shape: DbShape,
    /// The key.
    pub query: DpfQuery,
}

impl Codec<'_> for DpfQueryBody {
    type Context = DbShape;

    fn encode(&self, w: &mut Writer) {
        write_shape_header(w, self.shape);
        self.query.key.encode(w);
    }

    fn decode(r: &mut Reader<'_>, shape: &DbShape) -> Result<Self, Error> {
        check_shape_header(r, *shape)?;
        let key = DpfKey::decode(r, &dpf::depth_for(shape.block_count()))?;
        Ok(Self {
            shape: *shape,
            query: DpfQuery { key },
        })
    }
}

/// A DPF answer body: `b` bytes, the context being the database's shape.
impl Codec<'_> for DpfAnswer {
    type Context = DbShape;

    fn encode(&self, w: &mut Writer) {
        w.bytes(&self.block);
    }

    fn decode(r: &mut Reader<'_>, shape: &DbShape) -> Result<Self, Error> {
        Ok(Self {
            block: r.take(shape.block_size())?.to_vec(),
        })
    }
}

/// What the client keeps: nothing but the index (the answers XOR to the block).
#[derive(Clone)]
pub struct DpfState {
    index: usize,
}

impl std::fmt::Debug for DpfState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DpfState").finish_non_exhaustive()
    }
}

impl DpfState {
    /// The requested block index.
    pub fn index(&self) -> usize {
        self.index
    }
}

impl DpfPir {
    /// The scheme over `shape`.
    pub fn new(shape: DbShape) -> DpfPir {
        DpfPir { shape }
    }

    /// Exact length of a query body for `shape`.
    pub fn query_body_len(shape: DbShape) -> usize {
        QUERY_HEADER_LEN + dpf::key_len(dpf::depth_for(shape.block_count()))
    }

    /// The selection bits a query's key expands to (what a server scans with).
    pub fn selection(&self, query: &DpfQuery) -> Result<BitVec, Error> {
        query.key.eval_all(self.shape.block_count())
    }
}

impl MultiServerScheme for DpfPir {
    type Query = DpfQuery;
    type Answer = DpfAnswer;
    type ClientState = DpfState;

    fn id(&self) -> SchemeId {
        SchemeId::Dpf
    }

    fn shape(&self) -> DbShape {
        self.shape
    }

    fn servers(&self) -> usize {
        2
    }

    fn max_blocks_per_query(&self) -> usize {
        1
    }

    fn max_answer_body(&self) -> usize {
        self.shape.block_size()
    }

    fn query(
        &self,
        indices: &[usize],
        rng: &mut impl CryptoRng,
    ) -> Result<(Vec<DpfQuery>, DpfState), Error> {
        let &[index] = indices else {
            return Err(Error::InvalidParameter(format!(
                "DPF PIR retrieves exactly one block per query, got {} indices",
                indices.len()
            )));
        };
        let keys = dpf::generate(index, self.shape.block_count(), rng)?;
        Ok((
            keys.into_iter().map(|key| DpfQuery { key }).collect(),
            DpfState { index },
        ))
    }

    fn answer(&self, db: &Database, query: &DpfQuery) -> Result<DpfAnswer, Error> {
        let bits = self.selection(query)?;
        let block = answer_selection(db, self.shape, &bits)?;
        Ok(DpfAnswer { block })
    }

    fn decode(&self, _state: &DpfState, answers: &[DpfAnswer]) -> Result<Vec<Vec<u8>>, Error> {
        let blocks = answers.iter().map(|a| a.block.as_slice());
        Ok(vec![xor_answers(2, self.shape.block_size(), blocks)?])
    }

    fn encode_query(&self, query: &DpfQuery) -> Vec<u8> {
        let mut writer = Writer::with_capacity(Self::query_body_len(self.shape));
        DpfQueryBody {
            shape: self.shape,
            query: query.clone(),
        }
        .encode(&mut writer);
        writer.into_bytes()
    }

    fn decode_query(&self, bytes: &[u8]) -> Result<DpfQuery, Error> {
        let limit = Self::query_body_len(self.shape);
        if bytes.len() > limit {
            return Err(Error::Oversized {
                len: bytes.len(),
                limit,
            });
        }
        DpfQueryBody::from_bytes(bytes, &self.shape).map(|body| body.query)
    }

    fn encode_answer(&self, answer: &DpfAnswer) -> Vec<u8> {
        answer.to_bytes()
    }

    fn decode_answer(&self, _query: &DpfQuery, bytes: &[u8]) -> Result<DpfAnswer, Error> {
        DpfAnswer::from_bytes(bytes, &self.shape)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn every_index_decodes_through_the_wire_bodies() {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        for blocks in [1u64, 3, 130, 300] {
            let shape = DbShape::new(blocks, 64).unwrap();
            let db = Database::random(shape, &mut rng);
            let scheme = DpfPir::new(shape);
            for index in 0..blocks as usize {
                let (queries, state) = scheme.query(&[index], &mut rng).unwrap();
                let answers: Vec<DpfAnswer> = queries
                    .iter()
                    .map(|q| {
                        let body = scheme.encode_query(q);
                        assert_eq!(body.len(), DpfPir::query_body_len(shape));
                        let decoded = scheme.decode_query(&body).unwrap();
                        let answer = scheme.answer(&db, &decoded).unwrap();
                        scheme
                            .decode_answer(q, &scheme.encode_answer(&answer))
                            .unwrap()
                    })
                    .collect();
                let blocks = scheme.decode(&state, &answers).unwrap();
                assert_eq!(blocks, vec![db.block(index).to_vec()], "index {index}");
            }
        }
    }

    #[test]
    fn refuses_bad_queries_and_indices() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let shape = DbShape::new(1 << 12, 32).unwrap();
        let scheme = DpfPir::new(shape);
        assert!(scheme.query(&[1 << 12], &mut rng).is_err());
        assert!(scheme.query(&[1, 2], &mut rng).is_err());
        let (queries, _) = scheme.query(&[7], &mut rng).unwrap();
        let body = scheme.encode_query(&queries[0]);
        for cut in 0..body.len() {
            assert!(scheme.decode_query(&body[..cut]).is_err(), "cut {cut}");
        }
        let mut long = body.clone();
        long.push(0);
        assert!(matches!(
            scheme.decode_query(&long),
            Err(Error::Oversized { .. })
        ));
        let other = DpfPir::new(DbShape::new(1 << 13, 32).unwrap());
        assert!(matches!(
            other.decode_query(&body),
            Err(Error::DatabaseMismatch(_))
        ));
        // A key for a smaller domain is refused even with the right shape header.
        let small = DpfPir::new(DbShape::new(100, 32).unwrap());
        let (small_queries, _) = small.query(&[7], &mut rng).unwrap();
        let mut forged = Writer::with_capacity(64);
        write_shape_header(&mut forged, shape);
        small_queries[0].key.encode(&mut forged);
        assert!(scheme.decode_query(&forged.into_bytes()).is_err());
    }

    #[test]
    fn a_query_is_267_bytes_at_a_million_blocks() {
        let shape = DbShape::new(1 << 20, 32).unwrap();
        assert_eq!(DpfPir::query_body_len(shape), 267);
    }
}
