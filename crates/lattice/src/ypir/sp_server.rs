//! The YPIR+SP server ([`super::sp`]): offline, the masks `H_i` by NTT and the packing plan;
//! online, one pass over the database for a batch of queries, then each query's packing.

use std::sync::Arc;

use pir_core::Error;
use pir_kernels::Backend;
use rayon::prelude::*;

use super::keys::{KeySet, KeyStore};
use super::rns::{self, Rns};
use super::server::{pack_answers, row_mask, DynamicMask};
use super::sp::{query_blocks, SpShape};
use super::tree::{Packer, Plan};
use super::wire;
use crate::lwe::ZpMatrix;
use crate::params::Scheme;
use crate::prg::Seed;
use crate::ring::{Ring, RING_D};
use crate::simple::pack_database;
use crate::single::{BuildInput, Saved};
use crate::wire::HintHeader;

/// A YPIR+SP server: the packed database, the packing plan and the clients' keys.
#[derive(Debug)]
pub struct YpirSpServer {
    header: HintHeader,
    shape: SpShape,
    db: ZpMatrix,
    packer: Packer,
    plan: Plan,
    keys: KeyStore,
}

impl YpirSpServer {
    /// Packs the records and does the offline work for the public seed (the first), reusing
    /// the saved masks `H` (NTT form) when they belong to this database. Returns the server and
    /// the offline work to save: the header-only hint message and the masks. `progress`
    /// counts rows.
    pub fn build(input: BuildInput<'_>) -> Result<(YpirSpServer, Saved), Error> {
        let shape = SpShape::of(&input.params)?;
        let header = input.header(Scheme::YpirSp)?;
        let db = pack_database(&header.params, input.records)?;
        let seed = header.seed;
        let ring = Ring::new(RING_D, Backend::current())?;
        let rows = shape.rows;
        let words = 2 * RING_D;
        let masks = match input.saved {
            Some(saved) => {
                let masks = saved.check(&header, rows * words)?.0;
                let bad = masks.chunks_exact(RING_D).enumerate().any(|(i, half)| {
                    let q = rns::q(i % 2);
                    half.iter().any(|&x| x >= q)
                });
                if bad {
                    return Err(Error::DatabaseMismatch(
                        "the saved offline work holds values out of range".into(),
                    ));
                }
                masks
            }
            None => masks(&ring, &db, &shape, rows, &seed, input.progress)?,
        };
        let packer = Packer::new(ring, &seed)?;
        let plan = packer.plan(rows, rows, &|k| {
            let at = masks
                .get(k * words..(k + 1) * words)
                .ok_or_else(|| Error::InvalidParameter("no such leaf".into()))?;
            Ok([at[..RING_D].to_vec(), at[RING_D..].to_vec()])
        })?;
        let server = YpirSpServer {
            header,
            shape,
            db,
            packer,
            plan,
            keys: KeyStore::default(),
        };
        let saved = Saved {
            hint: header.encode(),
            extra: masks,
        };
        Ok((server, saved))
    }

    /// The hint header (all a client needs: there is no hint matrix).
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// Bytes in memory: the packed database and the packing plan.
    pub fn memory_bytes(&self) -> usize {
        self.db.memory_bytes() + self.plan.memory_bytes()
    }

    /// Answers many queries: one pass over the database for all of them (both residues of
    /// each), then each query's packing; a malformed query gets its own error.
    pub fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        let lengths = self.shape.lengths();
        let decoded: Vec<Result<(wire::Query, Arc<KeySet>), Error>> = queries
            .iter()
            .map(|q| {
                let query = wire::decode_query(q, &lengths, &self.header.version)?;
                let keys = self.keys.keys_of(&self.packer.ring, &query)?;
                Ok((query, keys))
            })
            .collect();
        let valid: Vec<&wire::Query> = decoded.iter().flatten().map(|(query, _)| query).collect();
        let bodies = first_pass(&self.db, &self.shape, &valid);
        let keys: Vec<&KeySet> = decoded.iter().flatten().map(|(_, keys)| &**keys).collect();
        let mut answers = self.finish(&keys, &bodies).into_iter();
        decoded
            .into_iter()
            .map(|query| {
                query?;
                answers
                    .next()
                    .unwrap_or_else(|| Err(Error::InvalidParameter("no answer computed".into())))
            })
            .collect()
    }

    /// Answers one query.
    pub fn answer(&self, query: &[u8]) -> Result<Vec<u8>, Error> {
        self.answer_batch(&[query])
            .pop()
            .unwrap_or_else(|| Err(Error::InvalidParameter("no answer".into())))
    }

    /// Packs each query's rows' bodies (`bodies[j]`, with the keys `keys[j]`) and switches
    /// the modulus: the trees in parallel, every query of the batch through each tree
    /// together (so each static node's digits are read once for all of them).
    fn finish(&self, keys: &[&KeySet], bodies: &[Vec<u64>]) -> Vec<Result<Vec<u8>, Error>> {
        let no_dynamic = |_| {
            Err(Error::InvalidParameter(
                "YPIR+SP has no online masks".into(),
            ))
        };
        let masks = vec![&no_dynamic as &DynamicMask<'_>; keys.len()];
        let lengths = self.shape.lengths();
        match pack_answers(&self.packer, &self.plan, &lengths, bodies, keys, &masks) {
            Ok(answers) => answers.into_iter().map(Ok).collect(),
            Err(e) => keys.iter().map(|_| Err(e.clone())).collect(),
        }
    }
}

/// The first pass for a batch of queries (both residues of each in one pass over `db`):
/// per query, the bodies `T_i = (D c)_i mod q2` of `db`'s rows, CRT-combined. `db` holds the
/// whole matrix (the server) or a shard's rows of it ([`super::sp_shard`]): row `i`'s body
/// comes from row `i` alone.
pub(super) fn first_pass(
    db: &ZpMatrix,
    shape: &SpShape,
    queries: &[&wire::Query],
) -> Vec<Vec<u64>> {
    let columns = db.vector_len();
    let residues: Vec<Vec<u32>> = queries
        .iter()
        .flat_map(|query| {
            (0..2).map(|i| {
                let q = u64::from(rns::q(i));
                let mut r: Vec<u32> = query.c2[..shape.columns]
                    .iter()
                    .map(|&x| (x % q) as u32)
                    .collect();
                r.resize(columns, 0);
                r
            })
        })
        .collect();
    let vectors: Vec<&[u32]> = residues.iter().map(|r| r.as_slice()).collect();
    let sums = db.times_wide(&vectors);
    let k = vectors.len();
    let (q0, q1) = (u64::from(rns::q(0)), u64::from(rns::q(1)));
    (0..k / 2)
        .map(|j| {
            sums.chunks_exact(k)
                .map(|row| rns::crt_one((row[2 * j] % q0) as u32, (row[2 * j + 1] % q1) as u32))
                .collect()
        })
        .collect()
}

/// `H` of `db`'s `rows` rows (the whole matrix, or a shard's rows: row `i`'s mask comes from
/// row `i` alone): row `i` holds `H_i = Σ_u D̃_{i,u} a_u` in NTT form (both primes'
/// residues, 4096 words), rows in parallel.
pub(super) fn masks(
    ring: &Ring,
    db: &ZpMatrix,
    shape: &SpShape,
    rows: usize,
    seed: &Seed,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<u32>, Error> {
    let blocks = query_blocks(ring, seed, shape)?;
    let words = 2 * RING_D;
    let mut out = vec![0u32; rows * words];
    let chunk_rows = 256;
    for (chunk_index, chunk) in out.chunks_mut(chunk_rows * words).enumerate() {
        chunk
            .par_chunks_mut(words)
            .enumerate()
            .for_each(|(i, out)| {
                let row = chunk_index * chunk_rows + i;
                let mut values = vec![0u32; shape.padded_columns];
                db.row_values(row, &mut values);
                let mask: Rns = row_mask(ring, &blocks, values.iter().map(|&v| i64::from(v)));
                out[..RING_D].copy_from_slice(&mask[0]);
                out[RING_D..].copy_from_slice(&mask[1]);
            });
        progress(
            ((chunk_index + 1) * chunk_rows).min(rows) as u64,
            rows as u64,
        );
    }
    Ok(out)
}

crate::single::single_server!(YpirSpServer, keys);
