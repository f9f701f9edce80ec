//! The InsPIRe server: offline, the masks `H_i` by NTT and InspiRING's chains for each block
//! of 4096 rows (the mask and every switch's digits); at a key upload, each block's key
//! offset (products of the stored digits and the key bodies); per query, one pass over the
//! database and one NTT per packed ciphertext.

use std::sync::Arc;
use std::time::Instant;

use pir_core::Error;
use rayon::prelude::*;

use super::client::{packer, query_blocks};
use super::ring_pack::{InspiRing, PackingKeys, Prepared};
use super::{wire, Shape, CENTER, D, GADGET};
use crate::lwe::ZpMatrix;
use crate::params::Scheme;
use crate::ring::Ring;
use crate::simple::pack_database;
use crate::single::{BuildInput, Saved};
use crate::wire::HintHeader;
use crate::ypir::keys::KeyCache;
use crate::ypir::reversed;
use crate::ypir::rns::{self, Rns};

/// A client's key offsets, one per packed ciphertext (one inner vector: the key cache's
/// shape).
type Offsets = Arc<Vec<Vec<Rns>>>;

/// An InsPIRe server: the packed database, the offline packing work and the clients' key
/// offsets.
#[derive(Debug)]
pub struct InspireServer {
    header: HintHeader,
    shape: Shape,
    db: ZpMatrix,
    packer: InspiRing,
    /// One per block of `D` rows.
    prepared: Vec<Prepared>,
    /// Per uploaded key id: each block's key offset (one inner vector).
    keys: KeyCache,
}

impl InspireServer {
    /// Packs the records and does the offline work for the public seed (the first). Returns
    /// the server and the header-only hint message (no extra state is saved: the offline
    /// work is redone at start). `progress` counts rows.
    pub fn build(input: BuildInput<'_>) -> Result<(InspireServer, Saved), Error> {
        let shape = Shape::of(&input.params)?;
        let header = input.header(Scheme::Inspire)?;
        let db = pack_database(&header.params, input.records)?;
        let packer = packer(&header.seed)?;
        let blocks = query_blocks(&packer.ring, &header.seed, shape.padded_columns / D)?;
        let mut prepared = Vec::with_capacity(shape.packed());
        for first in (0..shape.rows).step_by(D) {
            let rows = first..(first + D).min(shape.rows);
            let masks: Vec<Rns> = rows
                .into_par_iter()
                .map(|row| {
                    let mut values = vec![0u32; shape.padded_columns];
                    db.row_values(row, &mut values);
                    row_mask(&packer.ring, &blocks, &values[..shape.columns])
                })
                .collect();
            prepared.push(Prepared::new(&packer, &masks)?);
            (input.progress)((first + D).min(shape.rows) as u64, shape.rows as u64);
        }
        let server = InspireServer {
            header,
            shape,
            db,
            packer,
            prepared,
            keys: KeyCache::default(),
        };
        let saved = Saved {
            hint: header.encode(),
            extra: Vec::new(),
        };
        Ok((server, saved))
    }

    /// The hint header (all a client needs: there is no hint matrix).
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// Bytes in memory: the packed database and the offline packing work.
    pub fn memory_bytes(&self) -> usize {
        self.db.memory_bytes()
            + self
                .prepared
                .iter()
                .map(Prepared::memory_bytes)
                .sum::<usize>()
    }

    /// The key offsets of a query: computed from uploaded keys (and kept under their id), or
    /// the ones kept. Errors name no key id.
    fn offsets_of(&self, query: &wire::Query) -> Result<Offsets, Error> {
        let Some(bodies) = &query.keys else {
            return self.keys.get(&query.key_id, Instant::now());
        };
        let ring = &self.packer.ring;
        let ntt: Vec<Rns> = bodies
            .iter()
            .map(|part| {
                let mut r: Rns = [0, 1].map(|i| {
                    let q = u64::from(rns::q(i));
                    part.iter().map(|&x| (x % q) as u32).collect()
                });
                rns::forward(ring, &mut r);
                r
            })
            .collect();
        let (g, h) = ntt.split_at(GADGET.digits);
        let keys = PackingKeys {
            g: g.to_vec(),
            h: h.to_vec(),
        };
        let offsets = self
            .prepared
            .par_iter()
            .map(|p| p.key_offset(&self.packer, &keys))
            .collect::<Result<Vec<Rns>, Error>>()?;
        let offsets = Arc::new(vec![offsets]);
        self.keys
            .insert(query.key_id, Arc::clone(&offsets), Instant::now())?;
        Ok(offsets)
    }

    /// Answers many queries: one pass over the database for all of them (both residues of
    /// each), then each query's packing; a malformed query gets its own error.
    pub fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        // In order: a query's keys may come with an earlier query of the batch.
        let decoded: Vec<Result<(wire::Query, Offsets), Error>> = queries
            .iter()
            .map(|q| {
                let query = wire::decode_query(q, &self.shape, &self.header.version)?;
                let offsets = self.offsets_of(&query)?;
                Ok((query, offsets))
            })
            .collect();
        let columns = self.db.vector_len();
        let residues: Vec<Vec<u32>> = decoded
            .iter()
            .flatten()
            .flat_map(|(query, _)| {
                let expanded: Vec<u64> = query.c[..self.shape.columns]
                    .iter()
                    .map(|&x| wire::expand(x))
                    .collect();
                (0..2).map(move |i| {
                    let q = u64::from(rns::q(i));
                    let mut r: Vec<u32> = expanded.iter().map(|&x| (x % q) as u32).collect();
                    r.resize(columns, 0);
                    r
                })
            })
            .collect();
        let vectors: Vec<&[u32]> = residues.iter().map(|r| r.as_slice()).collect();
        let sums = self.db.times_wide(&vectors);
        let k = vectors.len();
        let (q0, q1) = (u64::from(rns::q(0)), u64::from(rns::q(1)));
        let q = rns::modulus();
        let mut next = 0;
        decoded
            .into_iter()
            .map(|item| {
                let (query, offsets) = item?;
                let j = next;
                next += 1;
                // The entries are packed less p / 2: Σ_j (D_ij - p/2) c_j.
                let shift = centering(&query.c);
                let bodies: Vec<u64> = sums
                    .chunks_exact(k)
                    .map(|row| {
                        let t =
                            rns::crt_one((row[2 * j] % q0) as u32, (row[2 * j + 1] % q1) as u32);
                        (t + shift) % q
                    })
                    .collect();
                self.pack(&offsets[0], &bodies)
            })
            .collect()
    }

    /// The answer for one query's row bodies: each block packed with its key offset, brought
    /// out of NTT form and switched.
    fn pack(&self, offsets: &[Rns], bodies: &[u64]) -> Result<Vec<u8>, Error> {
        if offsets.len() != self.prepared.len() {
            return Err(Error::InvalidParameter(
                "key offsets of another database".into(),
            ));
        }
        let ring = &self.packer.ring;
        let ciphertexts: Vec<(Vec<u64>, Vec<u64>)> = self
            .prepared
            .par_iter()
            .zip(offsets)
            .zip(bodies.par_chunks(D))
            .map(|((prepared, offset), bodies)| {
                let (mut a, mut b) = prepared.pack(&self.packer, offset, bodies);
                rns::inverse(ring, &mut a);
                rns::inverse(ring, &mut b);
                (rns::crt(&a), rns::crt(&b))
            })
            .collect();
        Ok(wire::encode_answer(&ciphertexts, &self.shape))
    }

    /// Answers one query.
    pub fn answer(&self, query: &[u8]) -> Result<Vec<u8>, Error> {
        self.answer_batch(&[query])
            .pop()
            .unwrap_or_else(|| Err(Error::InvalidParameter("no answer".into())))
    }
}

/// `-(p/2) Σ_j c_j mod q` for the query elements `c` as sent: what centering the entries
/// adds to every row's body.
fn centering(c: &[u64]) -> u64 {
    let q = u128::from(rns::modulus());
    let sum = c
        .iter()
        .fold(0u128, |acc, &x| (acc + u128::from(wire::expand(x))) % q);
    ((q - sum * u128::from(CENTER) % q) % q) as u64
}

/// The mask polynomial (NTT form) of a row of database values (its `m` columns) over the
/// query's blocks: `Σ_u ṽ_u a_u`, `ṽ_u` the reversed polynomial of block `u` of the row's
/// centered entries `D_ij - p/2` (the last block padded with zeros).
fn row_mask(ring: &Ring, blocks: &[Rns], values: &[u32]) -> Rns {
    let mut acc = rns::zero(D);
    for (u, block) in values.chunks(D).enumerate() {
        let signed: Vec<i64> = block
            .iter()
            .map(|&v| i64::from(v) - i64::from(CENTER))
            .collect();
        let mut v = rns::from_signed(&reversed(&signed, D));
        rns::forward(ring, &mut v);
        rns::mul_acc_many(&mut acc, &[(&v, &blocks[u])]);
    }
    acc
}

crate::single::single_server!(InspireServer, keys);
