//! YPIR row shards (issue 32, `docs/sharding.md`): a shard holds a range of the matrix's row
//! groups and answers a query with its *part*, everything before the packing step over its
//! rows ([`YpirShard`]); a front end adds the parts mod `q2` and packs the sums with the
//! client's keys, which only it holds ([`YpirPacking`]).
//!
//! Why the parts add up. Row `i` of `t = D'c1` and of `H1` comes from row `i` of `D` alone,
//! and rescaling is per value. Everything after is a sum over row groups: a static leaf's body
//! `Σ_g second[r][g] c2[g]`, a dynamic leaf's body `Σ_g t̃_k[g] c2[g]`, and every leaf's mask
//! `Σ_u rev(v_u) a2_u`, linear in the row `v` (a shard's mask is that of the row with the
//! other shards' groups zero). So the shards' leaf bodies and masks, summed mod each prime of
//! `q2`, are the whole server's value for value, and the front end's packing of the sums is
//! the whole server's answer byte for byte. The packing (key switching of gadget digits) is
//! not additive: the front end does it once, as the whole server would.
//!
//! ```text
//! offline part (kind Manifest, scheme YPIR): what the front end builds the packing plan from
//!   header_len u32 | header            the whole database's header-only hint message
//!   first_group u32 | end_group u32    the shard's row groups
//!   masks    e d1 × (4096 u32 | 4096 u32)   its partial masks of the static leaves, NTT form,
//!                                            residues mod q2's two primes, each below its prime
//! part (kind Answer, scheme YPIR): a shard's answer to one query
//!   bodies   e (d1 + 1) × 7 B          partial leaf bodies mod q2 (static leaves first)
//!   masks    e × (4096 u32 | 4096 u32) partial masks of the dynamic leaves, as above
//! ```
//!
//! A shard is sent the client's query without its keys: `c1` and `c2` in a query message
//! whose key mode is "cached" under [`SHARD_KEY_ID`], the same id for every client. The front
//! end keeps the clients' keys (uploads, cache, expiry) and never forwards them, so a shard
//! receives less than a whole server does. Costs: a shard holds its rows of `D`, its columns of
//! the static rows and its blocks of `A2` (about DB/S); the front end holds the packing plan
//! (about 250 MB per record entry, whatever the database size) and the key cache, and packs
//! every answer; a shard's offline part is `e d1` masks of 32 KiB (64 MiB per entry).

use std::ops::Range;
use std::sync::Arc;

use pir_core::wire::{encode_envelope, MessageKind, Reader, Writer};
use pir_core::Error;
use pir_kernels::Backend;
use rayon::prelude::*;

use super::keys::{KeySet, KeyStore};
use super::rns::{self, Rns};
use super::server::{first_layer_masks, inner, pack_answers, second_pass, DynamicMask, OFFSET};
use super::tree::{Packer, Plan};
use super::wire::{self, Keys, Query};
use super::{
    centered_rescaled, rescale, reversed, Shape, ELEMENT_BYTES, KIND_A2, MAX_RECORD_ENTRIES,
};
use crate::lwe::ZpMatrix;
use crate::params::ypir::D1;
use crate::params::Scheme;
use crate::ring::{Ring, RING_D};
use crate::single::{BuildInput, KeyPolicy, Saved};
use crate::wire::HintHeader;

/// The key id of every query a front end sends its shards (key mode "cached"): shards hold no
/// keys and ignore it; it is the same for every client, so it links nothing.
pub const SHARD_KEY_ID: wire::KeyId = [0x5a; wire::KEY_ID_LEN];

/// Bytes of one mask on the wire (two residue vectors of `d` words).
const MASK_BYTES: usize = 2 * RING_D * 4;
/// Largest header message in an offline part.
const MAX_HEADER_BYTES: usize = 4096;
/// Largest offline part body: the header, the group range and `e d1` masks.
const MAX_OFFLINE_BODY: usize = 4 + MAX_HEADER_BYTES + 8 + MAX_RECORD_ENTRIES * D1 * MASK_BYTES;

/// One shard of a YPIR database: its rows of `D`, its columns of the static rows, its blocks
/// of `A2`.
#[derive(Debug)]
pub struct YpirShard {
    header: HintHeader,
    shape: Shape,
    groups: Range<usize>,
    db: ZpMatrix,
    /// The whole server's static rows at this shard's groups (`e d1 × groups.len()`).
    second: Vec<u32>,
    /// `A2`'s blocks `first_block..` that this shard's groups touch (NTT form).
    a2: Vec<Rns>,
    first_block: usize,
    ring: Ring,
}

/// The row groups of matrix rows `rows`: whole groups of `e` rows within the database.
fn group_range(shape: &Shape, rows: &Range<usize>) -> Result<Range<usize>, Error> {
    let e = shape.entries.max(1);
    if rows.start >= rows.end
        || !rows.start.is_multiple_of(e)
        || !rows.end.is_multiple_of(e)
        || rows.end / e > shape.groups
    {
        return Err(Error::InvalidParameter(format!(
            "rows {rows:?} are not whole row groups of {e} rows of this YPIR database"
        )));
    }
    Ok(rows.start / e..rows.end / e)
}

impl YpirShard {
    /// Shard `rows` (matrix rows, whole row groups) of the database `input` describes, from
    /// `input.records` = its part ([`crate::double_rows::row_part`] of those rows): its rows
    /// of `H1`, its columns of the static rows, and its offline part (the returned hint, to
    /// serve to the front end; `input.saved` is not used: a shard recomputes its part).
    pub fn build_rows(
        input: BuildInput<'_>,
        rows: Range<usize>,
    ) -> Result<(YpirShard, Saved), Error> {
        let shape = Shape::of(&input.params)?;
        let header = input.header(Scheme::Ypir)?;
        let groups = group_range(&shape, &rows)?;
        let db = crate::double_rows::pack_rows(&header.params, input.records, &rows)?;
        let h1 = first_layer_masks(&db, &shape, &input.seeds[0], rows.len(), input.progress)?;
        let (e, width) = (shape.entries, groups.len());
        let mut second = vec![0u32; shape.static_leaves() * width];
        second
            .par_chunks_mut(width)
            .enumerate()
            .for_each(|(r, out)| {
                let (k, c) = (r / D1, r % D1);
                for (g, o) in out.iter_mut().enumerate() {
                    *o = (centered_rescaled(h1[(g * e + k) * D1 + c]) + OFFSET) as u32;
                }
            });
        let ring = Ring::new(RING_D, Backend::current())?;
        let first_block = groups.start / RING_D;
        let a2 = (first_block..groups.end.div_ceil(RING_D))
            .map(|u| {
                let mut block = rns::public_element(&input.seeds[1], KIND_A2, u as u64, RING_D)?;
                rns::forward(&ring, &mut block);
                Ok(block)
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let shard = YpirShard {
            header,
            shape,
            groups,
            db,
            second,
            a2,
            first_block,
            ring,
        };
        let masks: Vec<Rns> = shard
            .second
            .par_chunks(width)
            .map(|row| shard.partial_mask(row))
            .collect();
        let hint = encode_offline(&shard.header, &shard.groups, &masks);
        Ok((shard, Saved { hint, extra: h1 }))
    }

    /// The whole database's header.
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// The row groups this shard holds.
    pub fn groups(&self) -> Range<usize> {
        self.groups.clone()
    }

    /// Bytes in memory: its rows of the packed database, its static columns and `A2` blocks.
    pub fn memory_bytes(&self) -> usize {
        self.db.memory_bytes() + self.second.len() * 4 + self.a2.len() * MASK_BYTES
    }

    /// The mask (NTT form) of a row over this shard's groups (offset form), the other groups
    /// zero: `Σ_u rev(v_u) a2_u` over the blocks it touches.
    fn partial_mask(&self, row: &[u32]) -> Rns {
        let mut acc = rns::zero(RING_D);
        let mut values = vec![0i64; RING_D];
        for (b, a2) in self.a2.iter().enumerate() {
            let start = (self.first_block + b) * RING_D;
            for (j, v) in values.iter_mut().enumerate() {
                *v = (start + j)
                    .checked_sub(self.groups.start)
                    .and_then(|g| row.get(g))
                    .map_or(0, |&x| i64::from(x) - OFFSET);
            }
            let mut r = rns::from_signed(&reversed(&values, RING_D));
            rns::forward(&self.ring, &mut r);
            rns::mul_acc_many(&mut acc, &[(&r, a2)]);
        }
        acc
    }

    /// This shard's parts of many queries (YPIR query messages; their keys, if any, are not
    /// used): one first pass over its rows for all of them, one second pass; a malformed
    /// query gets its own error.
    pub fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        let lengths = self.shape.lengths();
        let decoded: Vec<Result<Query, Error>> = queries
            .iter()
            .map(|q| wire::decode_query(q, &lengths, &self.header.version))
            .collect();
        let valid: Vec<&Query> = decoded.iter().flatten().collect();
        let vectors: Vec<&[u32]> = valid.iter().map(|q| &q.c1[..self.shape.columns]).collect();
        let products = self.db.times_vectors(&vectors);
        let n = valid.len();
        let (e, width) = (self.shape.entries, self.groups.len());
        // Per query: its rescaled rows over this shard's groups, and its c2 there.
        let prepared: Vec<(Vec<Vec<u32>>, Rns, [u64; 2])> = (0..n)
            .into_par_iter()
            .map(|j| {
                let t_rows: Vec<Vec<u32>> = (0..e)
                    .map(|k| {
                        (0..width)
                            .map(|g| {
                                let t = products[(g * e + k) * n + j];
                                (centered_rescaled(rescale(t)) + OFFSET) as u32
                            })
                            .collect()
                    })
                    .collect();
                let c2: Rns = [0, 1].map(|i| {
                    let q = u64::from(rns::q(i));
                    valid[j].c2[self.groups.clone()]
                        .iter()
                        .map(|&x| (x % q) as u32)
                        .collect()
                });
                let sums = [0, 1].map(|i| c2[i].iter().map(|&c| u64::from(c)).sum::<u64>());
                (t_rows, c2, sums)
            })
            .collect();
        let backend = self.ring.backend();
        let queries: Vec<(&Rns, [u64; 2])> =
            prepared.iter().map(|(_, c2, sums)| (c2, *sums)).collect();
        let static_bodies = second_pass(backend, &self.second, width, &queries);
        let parts: Vec<Vec<u8>> = prepared
            .par_iter()
            .enumerate()
            .map(|(j, (t_rows, c2, sums))| {
                let mut bodies: Vec<u64> = static_bodies.iter().map(|row| row[j]).collect();
                bodies.extend(t_rows.iter().map(|row| inner(backend, row, c2, *sums)));
                let masks: Vec<Rns> = t_rows.iter().map(|row| self.partial_mask(row)).collect();
                encode_part(&bodies, &masks)
            })
            .collect();
        let mut parts = parts.into_iter();
        decoded
            .into_iter()
            .map(|query| {
                query.and_then(|_| {
                    parts
                        .next()
                        .ok_or_else(|| Error::InvalidParameter("a query without a part".into()))
                })
            })
            .collect()
    }
}

crate::single::single_server!(YpirShard);

fn put_masks(w: &mut Writer, masks: &[Rns]) {
    for mask in masks {
        for residues in mask {
            for &x in residues {
                w.u32(x);
            }
        }
    }
}

/// `count` masks, each residue checked to be below its prime.
fn get_masks(r: &mut Reader<'_>, count: usize) -> Result<Vec<Rns>, Error> {
    (0..count)
        .map(|_| {
            let mut mask = rns::zero(RING_D);
            for (i, residues) in mask.iter_mut().enumerate() {
                for x in residues.iter_mut() {
                    *x = r.u32()?;
                    if *x >= rns::q(i) {
                        return Err(Error::Malformed(
                            "a mask residue at or above its prime".into(),
                        ));
                    }
                }
            }
            Ok(mask)
        })
        .collect()
}

fn encode_offline(header: &HintHeader, groups: &Range<usize>, masks: &[Rns]) -> Vec<u8> {
    let header = header.encode();
    let mut w = Writer::with_capacity(12 + header.len() + masks.len() * MASK_BYTES);
    // A header message is about 100 bytes and a group index below MAX_GROUPS: both fit.
    w.u32(header.len() as u32);
    w.bytes(&header);
    w.u32(groups.start as u32);
    w.u32(groups.end as u32);
    put_masks(&mut w, masks);
    encode_envelope(Scheme::Ypir.id(), MessageKind::Manifest, &w.into_bytes())
}

fn encode_part(bodies: &[u64], masks: &[Rns]) -> Vec<u8> {
    let mut w = Writer::with_capacity(bodies.len() * ELEMENT_BYTES + masks.len() * MASK_BYTES);
    for &x in bodies {
        w.bytes(&x.to_le_bytes()[..ELEMENT_BYTES]);
    }
    put_masks(&mut w, masks);
    encode_envelope(Scheme::Ypir.id(), MessageKind::Answer, &w.into_bytes())
}

/// A shard's offline part, decoded: the whole database's header, the shard's row groups and
/// its partial masks of the static leaves.
#[derive(Debug, Clone)]
pub struct ShardOffline {
    header: HintHeader,
    groups: Range<usize>,
    masks: Vec<Rns>,
}

impl ShardOffline {
    /// Decodes an offline part (untrusted bytes: lengths checked before allocating, every
    /// residue below its prime).
    pub fn decode(bytes: &[u8]) -> Result<Self, Error> {
        let body = crate::wire::open(bytes, Scheme::Ypir, MessageKind::Manifest, MAX_OFFLINE_BODY)?;
        let mut r = Reader::new(body);
        let len = r.u32()? as usize;
        if len > MAX_HEADER_BYTES {
            return Err(Error::Oversized {
                len,
                limit: MAX_HEADER_BYTES,
            });
        }
        let (header, matrix) = crate::wire::decode_hint(r.take(len)?, Scheme::Ypir)?;
        if matrix.is_some() {
            return Err(Error::Malformed(
                "a YPIR shard's offline part holds a hint matrix".into(),
            ));
        }
        let shape = Shape::of(&header.params)?;
        let groups = r.u32()? as usize..r.u32()? as usize;
        if groups.start >= groups.end || groups.end > shape.groups {
            return Err(Error::Malformed(format!(
                "row groups {groups:?} of a database of {}",
                shape.groups
            )));
        }
        let count = shape.static_leaves();
        if r.remaining() != count * MASK_BYTES {
            return Err(Error::WrongLength(format!(
                "a YPIR shard's offline part holds {count} masks of {MASK_BYTES} bytes"
            )));
        }
        let masks = get_masks(&mut r, count)?;
        r.finish()?;
        Ok(Self {
            header,
            groups,
            masks,
        })
    }

    /// The whole database's header.
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// The shard's row groups.
    pub fn groups(&self) -> Range<usize> {
        self.groups.clone()
    }
}

/// A query's key-switching keys at the front end (opaque; never sent to a shard).
#[derive(Clone)]
pub struct QueryKeys(Arc<KeySet>);

impl std::fmt::Debug for QueryKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("QueryKeys { .. }")
    }
}

/// One query's part from a shard, or the sum of every shard's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Part {
    bodies: Vec<u64>,
    masks: Vec<Rns>,
}

impl Part {
    /// Adds `other` (a part of the same database) mod `q2`.
    pub fn add(&mut self, other: &Part) -> Result<(), Error> {
        if other.bodies.len() != self.bodies.len() || other.masks.len() != self.masks.len() {
            return Err(Error::WrongLength("parts of different shapes".into()));
        }
        let q = rns::modulus();
        for (x, &y) in self.bodies.iter_mut().zip(&other.bodies) {
            // Both below q < 2^56: the sum does not overflow.
            *x = (*x + y) % q;
        }
        for (x, y) in self.masks.iter_mut().zip(&other.masks) {
            rns::add_assign(x, y);
        }
        Ok(())
    }
}

/// A shard's part message for a database of `shape` ([`YpirPacking::decode_part`]).
pub(crate) fn decode_part(shape: &Shape, bytes: &[u8]) -> Result<Part, Error> {
    let len = shape.leaves() * ELEMENT_BYTES + shape.entries * MASK_BYTES;
    let body = crate::wire::open(bytes, Scheme::Ypir, MessageKind::Answer, len)?;
    if body.len() != len {
        return Err(Error::WrongLength(format!(
            "a YPIR shard part of this database is {len} bytes, found {}",
            body.len()
        )));
    }
    let mut r = Reader::new(body);
    let q = rns::modulus();
    let bodies = (0..shape.leaves())
        .map(|_| {
            let mut le = [0u8; 8];
            le[..ELEMENT_BYTES].copy_from_slice(r.take(ELEMENT_BYTES)?);
            let x = u64::from_le_bytes(le);
            if x >= q {
                return Err(Error::Malformed("a leaf body at or above q2".into()));
            }
            Ok(x)
        })
        .collect::<Result<Vec<u64>, Error>>()?;
    let masks = get_masks(&mut r, shape.entries)?;
    r.finish()?;
    Ok(Part { bodies, masks })
}

/// The whole database's header, shape and static leaf masks from the shards' offline parts
/// (in shard order: their row groups must tile the database's, all under the same header).
pub(crate) fn summed_masks(
    shards: &[ShardOffline],
) -> Result<(HintHeader, Shape, Vec<Rns>), Error> {
    let first = shards
        .first()
        .ok_or_else(|| Error::InvalidParameter("no shards".into()))?;
    let header = first.header;
    let shape = Shape::of(&header.params)?;
    let mut next = 0;
    let mut masks = vec![rns::zero(RING_D); shape.static_leaves()];
    for (k, shard) in shards.iter().enumerate() {
        if shard.header != header {
            return Err(Error::DatabaseMismatch(format!(
                "shard {k}'s offline part is for another database than shard 0's"
            )));
        }
        if shard.groups.start != next {
            return Err(Error::DatabaseMismatch(format!(
                "shard {k} holds row groups {:?}, the previous shard ended at {next}",
                shard.groups
            )));
        }
        next = shard.groups.end;
        for (sum, part) in masks.iter_mut().zip(&shard.masks) {
            rns::add_assign(sum, part);
        }
    }
    if next != shape.groups {
        return Err(Error::DatabaseMismatch(format!(
            "the shards hold row groups up to {next} of {}",
            shape.groups
        )));
    }
    Ok((header, shape, masks))
}

/// The front end's half of YPIR: the packing plan of the whole database (built from the
/// shards' offline parts), the clients' keys, and the packing of the summed parts.
#[derive(Debug)]
pub struct YpirPacking {
    header: HintHeader,
    shape: Shape,
    packer: Packer,
    plan: Plan,
    keys: KeyStore,
}

impl YpirPacking {
    /// The packing of the database whose shards sent `shards` (in shard order: their row
    /// groups must tile the database's, and all name the same header). Adds their partial
    /// static masks and builds the plan (the whole server's offline packing work).
    pub fn new(shards: &[ShardOffline]) -> Result<Self, Error> {
        let (header, shape, masks) = summed_masks(shards)?;
        let seed2 = header
            .seed2
            .ok_or_else(|| Error::Malformed("a YPIR header without its second seed".into()))?;
        let packer = Packer::new(Ring::new(RING_D, Backend::current())?, &seed2)?;
        let plan = packer.plan(shape.leaves(), shape.static_leaves(), &|k| {
            masks
                .get(k)
                .cloned()
                .ok_or_else(|| Error::InvalidParameter("no such static leaf".into()))
        })?;
        Ok(Self {
            header,
            shape,
            packer,
            plan,
            keys: KeyStore::default(),
        })
    }

    /// The whole database's header (the hint clients download).
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// Bytes in memory: the packing plan.
    pub fn memory_bytes(&self) -> usize {
        self.plan.memory_bytes()
    }

    /// Sets how long and how many bytes of clients' uploaded keys the front end keeps.
    pub fn set_key_policy(&self, policy: KeyPolicy) -> Result<(), Error> {
        self.keys.set_policy(policy)
    }

    /// Bytes of a shard's part message (envelope included): what a shard sends per query.
    pub fn part_bytes(&self) -> usize {
        pir_core::wire::HEADER_LEN
            + self.shape.leaves() * ELEMENT_BYTES
            + self.shape.entries * MASK_BYTES
    }

    /// A client's query message, checked as a whole server checks it.
    pub fn decode_query(&self, query: &[u8]) -> Result<Query, Error> {
        wire::decode_query(query, &self.shape.lengths(), &self.header.version)
    }

    /// The query's keys: converted and kept (inline keys, uploads) or found (by id, cached),
    /// as a whole server does. In the order of the queries (keys sent by id may come with an
    /// earlier query of the same request).
    pub fn keys_of(&self, query: &Query) -> Result<QueryKeys, Error> {
        Ok(QueryKeys(self.keys.keys_of(&self.packer.ring, query)?))
    }

    /// What every shard is sent for `query`: its `c1` and `c2`, no keys ([`SHARD_KEY_ID`]).
    pub fn shard_query(&self, query: &Query) -> Vec<u8> {
        let stripped = Query {
            key_id: SHARD_KEY_ID,
            c1: query.c1.clone(),
            c2: query.c2.clone(),
            keys: Keys::Cached,
        };
        wire::encode_query(Scheme::Ypir, &self.header.version, &stripped)
    }

    /// A shard's part message (untrusted bytes: its length fixed by the shape, every value
    /// below its modulus).
    pub fn decode_part(&self, bytes: &[u8]) -> Result<Part, Error> {
        decode_part(&self.shape, bytes)
    }

    /// The answers to queries with keys `keys[j]` and summed parts `parts[j]`: the whole
    /// server's packing and modulus switching, every tree for all of them together. Any error
    /// fails the whole batch.
    pub fn pack(&self, keys: &[&QueryKeys], parts: &[Part]) -> Result<Vec<Vec<u8>>, Error> {
        if keys.len() != parts.len() {
            return Err(Error::InvalidParameter("one part per query's keys".into()));
        }
        let static_leaves = self.shape.static_leaves();
        let bodies: Vec<Vec<u64>> = parts.iter().map(|p| p.bodies.clone()).collect();
        let dynamic_masks: Vec<_> = parts
            .iter()
            .map(|part| {
                move |k: usize| -> Result<Rns, Error> {
                    k.checked_sub(static_leaves)
                        .and_then(|r| part.masks.get(r))
                        .cloned()
                        .ok_or_else(|| Error::InvalidParameter("no such leaf".into()))
                }
            })
            .collect();
        let masks: Vec<&DynamicMask<'_>> = dynamic_masks
            .iter()
            .map(|mask| mask as &DynamicMask<'_>)
            .collect();
        let keys: Vec<&KeySet> = keys.iter().map(|k| &*k.0).collect();
        pack_answers(
            &self.packer,
            &self.plan,
            &self.shape.lengths(),
            &bodies,
            &keys,
            &masks,
        )
    }
}

#[cfg(test)]
#[path = "shard_tests.rs"]
mod tests;
