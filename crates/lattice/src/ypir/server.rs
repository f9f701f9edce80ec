//! The YPIR server: offline work (`H1` by NTT, the second layer's static masks, the packing
//! plan) and answers (first pass, rescaling, second pass, packing, modulus switching).

use std::sync::Arc;

use pir_core::Error;
use pir_kernels::{matvec, ntt, Backend};
use rayon::prelude::*;

pub use super::keys::MAX_KEY_SETS;
use super::keys::{KeySet, KeyStore};
use super::rns::{self, Rns};
use super::tree::{PackJob, Packer, Plan};
use super::wire::Lengths;
use super::{centered_rescaled, rescale, reversed, wire, Shape, KIND_A2, RESCALED_BITS};
use crate::lwe::ZpMatrix;
use crate::params::ypir::D1;
use crate::params::{Params, Scheme};
use crate::prg::{self, Seed};
use crate::ring::{Ring, RING_D};
use crate::simple::pack_database;
use crate::single::{BuildInput, Saved};
use crate::wire::HintHeader;

/// Blocks of `A1` summed in the NTT domain before reducing mod `2^32`: each block adds at
/// most `2048 · 128 · 2^31 = 2^49` to a coefficient, and `q2 / 2 > 2^54.9`.
const BLOCKS_PER_REDUCTION: usize = 32;

/// A YPIR server: the packed database, the second layer's static rows, `A2` and the packing
/// plan.
#[derive(Debug)]
pub struct YpirServer {
    header: HintHeader,
    shape: Shape,
    db: ZpMatrix,
    /// Static rows of the second layer, `(k n + c) × groups`: coefficient `c` of the rescaled
    /// `H̃` of entry `k` of each group, centered and then offset by `2^15` (so in
    /// `[0, 2^16)`: the second pass multiplies unsigned 32-bit words into 64-bit sums).
    second: Vec<u32>,
    /// `A2`'s blocks (NTT form).
    a2: Vec<Rns>,
    packer: Packer,
    plan: Plan,
    keys: KeyStore,
}

/// A leaf mask past the static ones, in NTT form ([`PackJob::dynamic_mask`]).
pub(super) type DynamicMask<'a> = dyn Fn(usize) -> Result<Rns, Error> + Sync + 'a;

/// The packing step both YPIR servers end with: every tree packed for every query of the
/// batch (trees in parallel, a static node's digits read once for all queries), each root
/// brought out of NTT form and CRT-combined, then each query's answer encoded. Query `j`
/// has the leaf bodies `bodies[j]`, the keys `keys[j]` and the dynamic masks `masks[j]`.
/// Any error fails the whole batch.
pub(super) fn pack_answers(
    packer: &Packer,
    plan: &Plan,
    lengths: &Lengths,
    bodies: &[Vec<u64>],
    keys: &[&KeySet],
    masks: &[&DynamicMask<'_>],
) -> Result<Vec<Vec<u8>>, Error> {
    let ring = &packer.ring;
    let body_of: Vec<_> = bodies
        .iter()
        .map(|bodies| move |k: usize| bodies[k])
        .collect();
    let jobs: Vec<PackJob<'_>> = keys
        .iter()
        .zip(&body_of)
        .zip(masks)
        .map(|((keys, body), dynamic_mask)| PackJob {
            body,
            dynamic_mask: *dynamic_mask,
            key_bodies: keys,
        })
        .collect();
    let trees = (0..plan.trees())
        .into_par_iter()
        .map(|tree| {
            packer
                .pack_batch(plan, tree, &jobs)?
                .into_iter()
                .map(|(mut a, mut b)| {
                    rns::inverse(ring, &mut a);
                    rns::inverse(ring, &mut b);
                    Ok((rns::crt(&a), rns::crt(&b)))
                })
                .collect::<Result<Vec<_>, Error>>()
        })
        .collect::<Result<Vec<_>, Error>>()?;
    Ok((0..jobs.len())
        .map(|j| {
            let ciphertexts: Vec<_> = trees.iter().map(|t| t[j].clone()).collect();
            wire::encode_answer(lengths, &ciphertexts)
        })
        .collect())
}

/// A query after the first pass: the query, its keys and `t = D' c1`.
type FirstPassed = (wire::Query, Arc<KeySet>, Vec<u32>);

/// The public blocks of `A1` (`m / d1` polynomials mod `2^32`, centered).
pub(crate) fn a1_blocks(seed: &Seed, blocks: usize) -> Vec<Vec<i64>> {
    (0..blocks)
        .map(|u| {
            let mut row = vec![0u32; D1];
            prg::expand_rows_of(seed, D1, u, &mut row);
            row.into_iter().map(|x| i64::from(x as i32)).collect()
        })
        .collect()
}

/// `A2`'s blocks (coefficient form).
pub(crate) fn a2_blocks(seed: &Seed, blocks: usize) -> Result<Vec<Rns>, Error> {
    (0..blocks)
        .map(|u| rns::public_element(seed, KIND_A2, u as u64, RING_D))
        .collect()
}

impl YpirServer {
    /// Packs the records and does the offline work for the public seeds (`A1` from the first,
    /// `A2` and the key masks from the second), reusing the saved `H1` (rescaled) when it
    /// belongs to this database. Returns the server and the offline work to save: the
    /// header-only hint message and `H1`. `progress` counts rows of `H1`.
    pub fn build(input: BuildInput<'_>) -> Result<(YpirServer, Saved), Error> {
        let shape = Shape::of(&input.params)?;
        let header = input.header(Scheme::Ypir)?;
        let params = header.params;
        let db = pack_database(&params, input.records)?;
        let seeds = input.seeds;
        let rows = params.rows();
        let h1 = match input.saved {
            Some(saved) => saved.check(&header, rows * D1)?.0,
            None => first_layer_masks(&db, &shape, &seeds[0], rows, input.progress)?,
        };
        if h1.iter().any(|&x| x >> RESCALED_BITS != 0) {
            return Err(Error::DatabaseMismatch(
                "the saved offline work holds values out of range".into(),
            ));
        }
        let (e, groups) = (shape.entries, shape.groups);
        let mut second = vec![0u32; shape.static_leaves() * groups];
        second
            .par_chunks_mut(groups)
            .enumerate()
            .for_each(|(r, out)| {
                let (k, c) = (r / D1, r % D1);
                for (g, o) in out.iter_mut().enumerate() {
                    *o = (centered_rescaled(h1[(g * e + k) * D1 + c]) + OFFSET) as u32;
                }
            });
        let ring = Ring::new(RING_D, Backend::current())?;
        let mut a2 = a2_blocks(&seeds[1], groups / RING_D)?;
        for block in &mut a2 {
            rns::forward(&ring, block);
        }
        let packer = Packer::new(ring.clone(), &seeds[1])?;
        let masks: Vec<Rns> = second
            .par_chunks(groups)
            .map(|row| row_mask(&ring, &a2, row.iter().map(|&v| i64::from(v) - OFFSET)))
            .collect();
        let plan = packer.plan(shape.leaves(), shape.static_leaves(), &|k| {
            masks
                .get(k)
                .cloned()
                .ok_or_else(|| Error::InvalidParameter("no such static leaf".into()))
        })?;
        let server = YpirServer {
            header,
            shape,
            db,
            second,
            a2,
            packer,
            plan,
            keys: KeyStore::default(),
        };
        let saved = Saved {
            hint: header.encode(),
            extra: h1,
        };
        Ok((server, saved))
    }

    /// The hint header (all a client needs: there is no hint matrix).
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// Bytes in memory: the packed database, the static rows and the packing plan.
    pub fn memory_bytes(&self) -> usize {
        self.db.memory_bytes() + self.second.len() * 4 + self.plan.memory_bytes()
    }

    /// The database shape.
    pub fn params(&self) -> &Params {
        &self.header.params
    }

    /// Answers many queries: one first pass over the database for all of them, one second
    /// pass, and each packing tree for all of them together; a malformed query gets its
    /// own error.
    pub fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        // In order: a query's keys may come with an earlier query of the same batch.
        let decoded: Vec<Result<(wire::Query, Arc<KeySet>), Error>> = queries
            .iter()
            .map(|q| {
                let query = wire::decode_query(q, &self.shape.lengths(), &self.header.version)?;
                let keys = self.keys.keys_of(&self.packer.ring, &query)?;
                Ok((query, keys))
            })
            .collect();
        let vectors: Vec<&[u32]> = decoded
            .iter()
            .flatten()
            .map(|(q, _)| &q.c1[..self.shape.columns])
            .collect();
        let products = self.db.times_vectors(&vectors);
        let k = vectors.len();
        let rows = self.params().rows();
        let mut next = 0;
        let work: Vec<Result<_, Error>> = decoded
            .into_iter()
            .map(|query| {
                let (query, keys) = query?;
                let t: Vec<u32> = (0..rows).map(|i| products[i * k + next]).collect();
                next += 1;
                Ok((query, keys, t))
            })
            .collect();
        self.finish(&work)
    }

    /// Answers one query.
    pub fn answer(&self, query: &[u8]) -> Result<Vec<u8>, Error> {
        self.answer_batch(&[query])
            .pop()
            .unwrap_or_else(|| Err(Error::InvalidParameter("no answer".into())))
    }

    /// Everything after the first pass (`t = D' c1` per query): the second pass over the
    /// static rows once for all queries, then every packing tree for all of them together
    /// (a static node's digits are read once for the batch). A query that failed earlier
    /// keeps its error.
    fn finish(&self, work: &[Result<FirstPassed, Error>]) -> Vec<Result<Vec<u8>, Error>> {
        let ring = &self.packer.ring;
        let backend = ring.backend();
        let (e, groups) = (self.shape.entries, self.shape.groups);
        let valid: Vec<&FirstPassed> = work.iter().flatten().collect();
        // Per query: the rescaled first-layer answer as rows over the groups, and c2's
        // residues and their sums.
        let prepared: Vec<(Vec<Vec<u32>>, Rns, [u64; 2])> = valid
            .par_iter()
            .map(|(query, _, t)| {
                let t_rows: Vec<Vec<u32>> = (0..e)
                    .map(|k| {
                        (0..groups)
                            .map(|g| (centered_rescaled(rescale(t[g * e + k])) + OFFSET) as u32)
                            .collect()
                    })
                    .collect();
                let c2: Rns = [0, 1].map(|i| {
                    let q = u64::from(rns::q(i));
                    query.c2.iter().map(|&x| (x % q) as u32).collect()
                });
                let sums = [0, 1].map(|i| c2[i].iter().map(|&c| u64::from(c)).sum::<u64>());
                (t_rows, c2, sums)
            })
            .collect();
        // Second pass: bodies of every leaf.
        let queries: Vec<(&Rns, [u64; 2])> =
            prepared.iter().map(|(_, c2, sums)| (c2, *sums)).collect();
        let static_bodies = second_pass(backend, &self.second, groups, &queries);
        let bodies: Vec<Vec<u64>> = prepared
            .iter()
            .enumerate()
            .map(|(j, (t_rows, c2, sums))| {
                let mut bodies: Vec<u64> = static_bodies.iter().map(|row| row[j]).collect();
                bodies.extend(t_rows.iter().map(|row| inner(backend, row, c2, *sums)));
                bodies
            })
            .collect();
        let static_leaves = self.shape.static_leaves();
        let dynamic_masks: Vec<_> = prepared
            .iter()
            .map(|(t_rows, _, _)| {
                move |k: usize| -> Result<Rns, Error> {
                    let row = k
                        .checked_sub(static_leaves)
                        .and_then(|r| t_rows.get(r))
                        .ok_or_else(|| Error::InvalidParameter("no such leaf".into()))?;
                    Ok(row_mask(
                        ring,
                        &self.a2,
                        row.iter().map(|&v| i64::from(v) - OFFSET),
                    ))
                }
            })
            .collect();
        let keys: Vec<&KeySet> = valid.iter().map(|(_, keys, _)| &**keys).collect();
        let masks: Vec<&DynamicMask<'_>> = dynamic_masks
            .iter()
            .map(|mask| mask as &DynamicMask<'_>)
            .collect();
        let answers = pack_answers(
            &self.packer,
            &self.plan,
            &self.shape.lengths(),
            &bodies,
            &keys,
            &masks,
        );
        let mut answers = answers.map(Vec::into_iter);
        work.iter()
            .map(|item| match (item, &mut answers) {
                (Err(e), _) => Err(e.clone()),
                (Ok(_), Err(e)) => Err(e.clone()),
                (Ok(_), Ok(answers)) => answers
                    .next()
                    .ok_or_else(|| Error::InvalidParameter("a query without an answer".into())),
            })
            .collect()
    }
}

/// The second pass over the static rows `second` (rows of `width` values, offset form) for
/// every query's `(c2 residues, their sums)`: `out[r][j]`, the body of static leaf `r` for
/// query `j`. Rows four at a time: the four stay in cache while every query's `c2` passes them
/// once.
pub(super) fn second_pass(
    backend: Backend,
    second: &[u32],
    width: usize,
    queries: &[(&Rns, [u64; 2])],
) -> Vec<Vec<u64>> {
    second
        .par_chunks(4 * width.max(1))
        .flat_map_iter(|quad| {
            let rows: Vec<&[u32]> = quad.chunks(width.max(1)).collect();
            let mut out = vec![Vec::with_capacity(queries.len()); rows.len()];
            for &(c2, sums) in queries {
                match <[&[u32]; 4]>::try_from(rows.as_slice()) {
                    Ok(four) => {
                        for (o, sum) in out.iter_mut().zip(inner4(backend, four, c2, sums)) {
                            o.push(sum);
                        }
                    }
                    Err(_) => {
                        for (o, row) in out.iter_mut().zip(&rows) {
                            o.push(inner(backend, row, c2, sums));
                        }
                    }
                }
            }
            out
        })
        .collect()
}

/// The offset that makes the second layer's centered values unsigned.
pub(super) const OFFSET: i64 = 1 << (RESCALED_BITS - 1);

/// `Σ_g (row[g] - 2^15) c2[g] mod q`, both primes, for `row` in offset form: each product of
/// a value below `2^16` and a residue below `2^28` is below `2^44`, at most `2^17` of them
/// sum below `2^61` (`sums` are the residues' sums, for the offset).
pub(super) fn inner(backend: Backend, row: &[u32], c2: &Rns, sums: [u64; 2]) -> u64 {
    let n = row.len().min(c2[0].len()).min(c2[1].len());
    let (s0, s1) = matvec::dot_pair(backend, &row[..n], &c2[0][..n], &c2[1][..n]);
    reduce_inner(s0, s1, sums)
}

/// The residues' sums of [`inner`] less the offset's part, recombined mod `q`.
fn reduce_inner(s0: u64, s1: u64, sums: [u64; 2]) -> u64 {
    let residue = |i: usize, sum: u64| -> u32 {
        let q = u64::from(rns::q(i));
        let offset = (OFFSET as u64 % q) * (sums[i] % q) % q;
        ((sum % q + q - offset) % q) as u32
    };
    rns::crt_one(residue(0, s0), residue(1, s1))
}

/// [`inner`] of four rows (the same length) against one query.
fn inner4(backend: Backend, rows: [&[u32]; 4], c2: &Rns, sums: [u64; 2]) -> [u64; 4] {
    let n = rows[0].len().min(c2[0].len()).min(c2[1].len());
    if rows.iter().any(|r| r.len() < n) {
        return rows.map(|row| inner(backend, row, c2, sums));
    }
    let pairs = matvec::dot_pair4(backend, rows.map(|r| &r[..n]), &c2[0][..n], &c2[1][..n]);
    pairs.map(|(s0, s1)| reduce_inner(s0, s1, sums))
}

/// The second-layer mask polynomial (NTT form) of a row of values over the row groups:
/// `Σ_u ṽ_u a2_u`, `ṽ_u` the reversed polynomial of block `u` of the row.
pub(crate) fn row_mask(ring: &Ring, a2: &[Rns], row: impl Iterator<Item = i64>) -> Rns {
    let values: Vec<i64> = row.collect();
    let mut acc = rns::zero(RING_D);
    for (u, block) in values.chunks(RING_D).enumerate() {
        let mut v = rns::from_signed(&reversed(block, RING_D));
        rns::forward(ring, &mut v);
        rns::mul_acc_many(&mut acc, &[(&v, &a2[u])]);
    }
    acc
}

/// `H1` rescaled: row `i` holds the coefficients of `H_i = Σ_u D̃'_{i,u} a1_u` mod `2^32`,
/// rounded to `Z_{2^16}`. By NTT over the two primes (exact: see [`BLOCKS_PER_REDUCTION`]),
/// rows in parallel.
pub(super) fn first_layer_masks(
    db: &ZpMatrix,
    shape: &Shape,
    seed: &Seed,
    rows: usize,
    progress: &mut dyn FnMut(u64, u64),
) -> Result<Vec<u32>, Error> {
    let ring = Ring::new(D1, Backend::current())?;
    let blocks = shape.padded_columns / D1;
    let a1: Vec<Rns> = a1_blocks(seed, blocks)
        .iter()
        .map(|a| {
            let mut r = rns::from_signed(a);
            rns::forward(&ring, &mut r);
            r
        })
        .collect();
    let a1_companions: Vec<Rns> = a1
        .iter()
        .map(|a| {
            [
                ntt::shoup_companions(&a[0], rns::q(0)),
                ntt::shoup_companions(&a[1], rns::q(1)),
            ]
        })
        .collect();
    let backend = ring.backend();
    let center = db.center();
    let columns = shape.columns;
    let mut h1 = vec![0u32; rows * D1];
    let chunk_rows = 256;
    for (chunk_index, chunk) in h1.chunks_mut(chunk_rows * D1).enumerate() {
        chunk.par_chunks_mut(D1).enumerate().for_each(|(i, out)| {
            let row = chunk_index * chunk_rows + i;
            let mut values = vec![0u32; shape.padded_columns];
            db.row_values(row, &mut values);
            let mut total = vec![0u32; D1];
            let mut acc = rns::zero(D1);
            let mut block = vec![0u32; D1];
            for (u, (a, a_companion)) in a1.iter().zip(&a1_companions).enumerate() {
                for p in 0..2 {
                    let q = rns::q(p);
                    // The reversed polynomial of D' (columns past m are zero, not -128).
                    for (j, &v) in values[u * D1..(u + 1) * D1].iter().enumerate() {
                        let centered = if u * D1 + j < columns {
                            i64::from(v) - i64::from(center)
                        } else {
                            0
                        };
                        let (at, value) = if j == 0 {
                            (0, centered)
                        } else {
                            (D1 - j, -centered)
                        };
                        block[at] = if value < 0 {
                            (value + i64::from(q)) as u32
                        } else {
                            value as u32
                        };
                    }
                    ring.table(p).forward(backend, &mut block);
                    ntt::mul_add_fixed(backend, &mut acc[p], &block, &a[p], &a_companion[p], q);
                }
                if (u + 1) % BLOCKS_PER_REDUCTION == 0 || u + 1 == blocks {
                    rns::inverse(&ring, &mut acc);
                    for (t, x) in total.iter_mut().zip(rns::crt(&acc)) {
                        *t = t.wrapping_add(rns::centered(x) as u32);
                    }
                    acc = rns::zero(D1);
                }
            }
            for (o, t) in out.iter_mut().zip(total) {
                *o = rescale(t);
            }
        });
        progress(
            ((chunk_index + 1) * chunk_rows).min(rows) as u64,
            rows as u64,
        );
    }
    Ok(h1)
}

crate::single::single_server!(YpirServer, keys);
