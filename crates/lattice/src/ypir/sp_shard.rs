//! YPIR+SP row shards (issue 32, `docs/sharding.md`): a shard holds a range of the matrix's
//! rows and answers a query with its rows' leaf bodies, everything before the packing step
//! ([`YpirSpShard`]); a front end places the parts among the leaves and packs them with the
//! client's keys ([`super::YpirPacking`], shared with YPIR's shards).
//!
//! Why the parts are the whole server's. The first pass `T = D c mod q2` is per row (row `i`
//! of `T` from row `i` of `D`), and so is the offline mask `H_i = Σ_u D̃_{i,u} a_u`: each row
//! is one leaf of the packing, with its body `T_i` and its mask `H_i`. A shard holding whole
//! rows therefore holds whole leaves; the whole server's leaves are the shards' side by side
//! (the front end's sum of parts, each zero outside its rows), and the front end's packing
//! of them is the whole server's answer byte for byte.
//!
//! ```text
//! offline part (kind Manifest, scheme YPIR+SP): what the front end builds the packing plan from
//!   header_len u32 | header            the whole database's header-only hint message
//!   first_row u32 | end_row u32        the shard's rows
//!   masks    rows × (4096 u32 | 4096 u32)   its rows' masks H_i, NTT form, residues mod q2's
//!                                            two primes, each below its prime
//! part (kind Answer, scheme YPIR+SP): a shard's answer to one query
//!   bodies   rows × 7 B                its rows' bodies T_i mod q2
//! ```
//!
//! A shard is sent the query without the client's keys ([`super::shard::SHARD_KEY_ID`]), as
//! YPIR's are. Costs: a shard holds its rows of `D` only (about DB/S); the front end holds the
//! packing plan (about 495 MiB per packed ciphertext, whatever the database size) and the key
//! cache; a shard's offline part is 32 KiB per row.

use std::ops::Range;

use pir_core::Error;
use pir_kernels::Backend;

use super::rns::Rns;
use super::shard::{encode_offline, encode_part, in_order};
use super::sp::SpShape;
use super::sp_server::{first_pass, masks};
use super::wire::{self, Query};
use crate::lwe::ZpMatrix;
use crate::params::Scheme;
use crate::ring::{Ring, RING_D};
use crate::single::{BuildInput, Saved};
use crate::wire::HintHeader;

/// One shard of a YPIR+SP database: its rows of `D`.
#[derive(Debug)]
pub struct YpirSpShard {
    header: HintHeader,
    shape: SpShape,
    rows: Range<usize>,
    db: ZpMatrix,
}

impl YpirSpShard {
    /// Shard `rows` (matrix rows) of the database `input` describes, from `input.records` =
    /// its part ([`crate::double_rows::row_part`] of those rows): its rows of `D` and its
    /// offline part (the returned hint, to serve to the front end: its rows' masks; `extra`
    /// holds them as the whole server saves its own; `input.saved` is not used, a shard
    /// recomputes its part). `progress` counts rows.
    pub fn build_rows(
        input: BuildInput<'_>,
        rows: Range<usize>,
    ) -> Result<(YpirSpShard, Saved), Error> {
        let shape = SpShape::of(&input.params)?;
        let header = input.header(Scheme::YpirSp)?;
        if rows.start >= rows.end || rows.end > shape.rows {
            return Err(Error::InvalidParameter(format!(
                "rows {rows:?} are not a shard of a YPIR+SP matrix of {} rows",
                shape.rows
            )));
        }
        let db = crate::double_rows::pack_rows(&header.params, input.records, &rows)?;
        let ring = Ring::new(RING_D, Backend::current())?;
        let h = masks(&ring, &db, &shape, rows.len(), &header.seed, input.progress)?;
        let split: Vec<Rns> = h
            .chunks_exact(2 * RING_D)
            .map(|mask| [mask[..RING_D].to_vec(), mask[RING_D..].to_vec()])
            .collect();
        let hint = encode_offline(&header, &rows, &split);
        let shard = YpirSpShard {
            header,
            shape,
            rows,
            db,
        };
        Ok((shard, Saved { hint, extra: h }))
    }

    /// The whole database's header.
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// The matrix rows this shard holds.
    pub fn rows(&self) -> Range<usize> {
        self.rows.clone()
    }

    /// Bytes in memory: its rows of the packed database.
    pub fn memory_bytes(&self) -> usize {
        self.db.memory_bytes()
    }

    /// This shard's parts of many queries (YPIR+SP query messages; their keys, if any, are
    /// not used): one first pass over its rows for all of them; a malformed query gets its
    /// own error.
    pub fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        let lengths = self.shape.lengths();
        let decoded: Vec<Result<Query, Error>> = queries
            .iter()
            .map(|q| wire::decode_query(q, &lengths, &self.header.version))
            .collect();
        let valid: Vec<&Query> = decoded.iter().flatten().collect();
        let parts = first_pass(&self.db, &self.shape, &valid)
            .into_iter()
            .map(|bodies| encode_part(Scheme::YpirSp, &bodies, &[]));
        in_order(decoded, parts)
    }
}

crate::single::single_server!(YpirSpShard);

#[cfg(test)]
#[path = "sp_shard_tests.rs"]
mod tests;
