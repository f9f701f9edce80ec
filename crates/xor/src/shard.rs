//! A shard's part of a query: the rows `first..first + n` of a database of `B` rows, as a
//! selection over the shard's own rows (`pir shard serve`).
//!
//! A query selects rows with one bit vector per chunk: row `i` is bit `i / c` of chunk
//! `i mod c` (`c = 1` for Chor and DPF, RAID-PIR's `c` otherwise). The shard's local row
//! `l = i - first` keeps the same layout over its own rows (local chunk `l mod c`, bit
//! `l / c`), so the scan kernels and four-Russians tables built over the shard's rows work
//! unchanged; local chunk `jl` holds whole chunk `(first + jl) mod c`, so the per-chunk sums
//! are rotated back by `first mod c` ([`unrotate`]) before the answer is encoded. A shard's
//! answer is then the XOR of the rows the query selects among its own, and the XOR of every
//! shard's answer is the whole database's (`pir_service::shard`).

use pir_core::bits::BitVec;
use pir_core::{DbShape, Error};

/// Which rows of a larger database an engine holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardRows {
    /// The whole database's shape (what queries are made for).
    pub whole: DbShape,
    /// The first row held.
    pub first: usize,
}

impl ShardRows {
    /// Checks that `held` (the shard's own rows) lies inside the whole database.
    pub fn check(&self, held: DbShape) -> Result<(), Error> {
        if held.block_size() != self.whole.block_size()
            || self
                .first
                .checked_add(held.block_count())
                .is_none_or(|end| end > self.whole.block_count())
        {
            return Err(Error::InvalidParameter(format!(
                "a shard of {} rows of {} bytes from row {} does not fit a database of {} \
                 rows of {} bytes",
                held.block_count(),
                held.block_size(),
                self.first,
                self.whole.block_count(),
                self.whole.block_size()
            )));
        }
        Ok(())
    }

    /// The selection over `rows` local rows from the whole database's selection (one bit
    /// vector per chunk; an empty vector selects nothing and stays empty).
    pub fn localize(&self, whole: &[BitVec], rows: usize) -> Vec<BitVec> {
        let c = whole.len().max(1);
        (0..whole.len())
            .map(|jl| {
                let source = &whole[(self.first + jl) % c];
                if source.is_empty() || jl >= rows {
                    return BitVec::zeros(0);
                }
                let len = (rows - jl).div_ceil(c);
                let start = (self.first + jl) / c;
                let mut local = BitVec::zeros(len);
                for p in 0..len {
                    if start + p < source.len() && source.get(start + p) {
                        local.flip(p);
                    }
                }
                local
            })
            .collect()
    }

    /// The per-chunk sums (`c` slots of `b` bytes) in the whole database's chunk order from
    /// the shard's local order.
    pub fn unrotate(&self, local: &[u8], c: usize) -> Vec<u8> {
        let shift = self.first % c.max(1);
        if shift == 0 || local.is_empty() {
            return local.to_vec();
        }
        let b = local.len() / c;
        let mut out = vec![0u8; local.len()];
        for jl in 0..c {
            let j = (jl + shift) % c;
            out[j * b..(j + 1) * b].copy_from_slice(&local[jl * b..(jl + 1) * b]);
        }
        out
    }
}

/// Checks a query body of `scheme` for a database of `shape` as an engine would before
/// answering it, without expanding it (a front end's check, so that one bad query fails
/// alone rather than the batch it shares with other clients' queries at every shard).
pub fn check_query(shape: DbShape, scheme: pir_core::SchemeId, body: &[u8]) -> Result<(), Error> {
    use pir_core::{Codec, MultiServerScheme, SchemeId};
    let limit = crate::serve::max_query_body(shape);
    if body.len() > limit {
        return Err(Error::Oversized {
            len: body.len(),
            limit,
        });
    }
    match scheme {
        SchemeId::Chor => crate::Chor::for_mirror(shape).decode_query(body).map(drop),
        SchemeId::RaidPir => crate::raid::RaidQueryBody::from_bytes(body, &shape).map(drop),
        SchemeId::Dpf => crate::DpfPir::new(shape).decode_query(body).map(drop),
        other => Err(Error::WrongScheme {
            found: other as u8,
            expected: SchemeId::RaidPir as u8,
        }),
    }
}
