//! YPIR's and YPIR+SP's parameters: the database layouts, their shapes, the lengths of their
//! queries and answers, and the constants these rest on. They are parameters, below the
//! schemes: [`crate::params::Params::new`] lays a database out with them, and
//! [`crate::ypir`] (which re-exports them under their old paths) builds the scheme on top.
//! The reasoning behind each bound is in [`crate::ypir`] and [`crate::ypir::sp`].

use pir_core::Error;

use super::{Params, Scheme, VERSION_LEN};
use crate::ring::RING_D;

/// `d1`, the ring dimension of the first layer (LWE over `Z_{2^32}[X]/(X^d1 + 1)`, `σ = 6.4`,
/// a fresh Gaussian secret per query), YPIR's `d1 = 1024` (Menon and Wu 2024). Its stated level
/// is [`crate::security::YPIR_FIRST`]: 94 bits classical core-SVP, below 128; `d1 = 2048`
/// reaches 236 (`docs/security.md`), at the cost of a first layer twice as wide.
pub const D1: usize = 1024;

/// `log2 q̃1`: the first layer's answer and hint rows are rescaled from `2^32` to this, and it
/// is also the plaintext modulus of the packed layer (one value per packed coefficient).
pub const RESCALED_BITS: u32 = 18;
/// `log2` of the packed layer's plaintext modulus (= [`RESCALED_BITS`]).
pub const PACKED_P_BITS: u32 = RESCALED_BITS;
/// Bits of a packed ciphertext's mask coefficients after modulus switching.
pub const ANSWER_MASK_BITS: u32 = 28;
/// Bits of a packed ciphertext's body coefficients after modulus switching (one more than
/// the paper's 20: see the correctness bound above).
pub const ANSWER_BODY_BITS: u32 = 21;
/// Most columns `m` (the first layer's noise bound, above).
pub const MAX_COLUMNS: usize = 1 << 18;
/// Most row groups `ℓ / e` (the second pass sums at most this many 45-bit terms in an `i64`).
pub const MAX_GROUPS: usize = 1 << 17;
/// Most entries (bytes) per record. Each entry adds `n + 1` packed values (about 6 KB of
/// answer) and half a packing tree of offline work (a tree's static digits are about 57 MB,
/// streamed once per answer): 8 entries keep an answer within 5 ciphertexts (63 KB) and the
/// plan within 290 MB. Larger records are laid out for YPIR+SP ([`sp`]).
pub const MAX_RECORD_ENTRIES: usize = 8;
/// Bytes of one element mod `q2` on the wire (`q2 < 2^56`).
pub const ELEMENT_BYTES: usize = 7;

/// Packing levels: `log2 d`.
pub const LEVELS: usize = 11;

/// Gadget `(bits, digits)` of the key-switching key of each level (level 1, the bottom, first).
///
/// Key switching at level `l` adds noise of variance `k d (B²/12) σ²` (balanced digits of base
/// `B`, `k` of them); a level-`l` node's noise doubles in variance at each of the `11 - l`
/// levels above it, and there are up to `2^(11-l)` such nodes, so level `l` contributes
/// `4^(11-l)` times its switching variance. The bottom levels therefore get the fine gadget
/// (`2^14`, four digits: `2^21.4` per switch) and the rest the coarse one (`2^19`, three digits:
/// `2^26.2`): total standard deviation about `2^33.5`, against a decoding margin of `2^36.9`
/// ([`PACKED_P_BITS`]); the coarse gadget everywhere would reach `2^35.9`. Key bodies
/// are what the client uploads: `36 · 2048 · 7` bytes.
pub const GADGET: [(u32, usize); LEVELS] = [
    (14, 4),
    (14, 4),
    (14, 4),
    (19, 3),
    (19, 3),
    (19, 3),
    (19, 3),
    (19, 3),
    (19, 3),
    (19, 3),
    (19, 3),
];

/// Total key-switching key parts (sum of the digits of every level).
pub fn key_parts() -> usize {
    GADGET.iter().map(|&(_, k)| k).sum()
}

/// What the lengths of a query and an answer depend on (from [`Shape`] or
/// [`sp::SpShape`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lengths {
    /// [`Scheme::Ypir`] or [`Scheme::YpirSp`] (the envelope's scheme id).
    pub scheme: Scheme,
    /// Words of `c1`.
    pub c1: usize,
    /// Elements of `c2`.
    pub c2: usize,
    /// Packed ciphertexts in an answer.
    pub trees: usize,
    /// Bits of a packed ciphertext's body coefficients.
    pub body_bits: u32,
}

impl Lengths {
    /// Bytes of a query body that refers to keys sent before under its key id.
    pub fn query_bytes_by_id(&self) -> usize {
        VERSION_LEN + 1 + KEY_ID_LEN + 4 * self.c1 + ELEMENT_BYTES * self.c2
    }

    /// Bytes of a query body that carries the key-switching keys (the largest query).
    pub fn query_bytes(&self) -> usize {
        self.query_bytes_by_id() + ELEMENT_BYTES * key_parts() * RING_D
    }

    /// Bytes of an answer body.
    pub fn answer_bytes(&self) -> usize {
        self.trees * RING_D * (ANSWER_MASK_BITS + self.body_bits) as usize / 8
    }
}

/// Length of a key id.
pub const KEY_ID_LEN: usize = 16;

/// The shape of a YPIR database beyond [`Params`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// `e`, entries per record group.
    pub entries: usize,
    /// Row groups `ℓ / e` (a multiple of 2048): what `c2` selects.
    pub groups: usize,
    /// `m`, columns.
    pub columns: usize,
    /// `m` rounded up to whole blocks of 1024: `c1`'s length.
    pub padded_columns: usize,
}

impl Shape {
    /// The shape of `params` (a YPIR database), checked.
    pub fn of(params: &Params) -> Result<Shape, Error> {
        if params.scheme != Scheme::Ypir {
            return Err(Error::InvalidParameter(
                "parameters are not for YPIR".into(),
            ));
        }
        let entries = params.entries_per_record();
        if entries > MAX_RECORD_ENTRIES {
            return Err(Error::InvalidParameter(format!(
                "records over {MAX_RECORD_ENTRIES} bytes are too large for YPIR (YPIR+SP lays them out)"
            )));
        }
        let groups = params.rows() / entries.max(1);
        if params.p != 256
            || !groups.is_multiple_of(RING_D)
            || groups > MAX_GROUPS
            || params.columns() > MAX_COLUMNS
        {
            return Err(Error::Malformed("not a YPIR layout".into()));
        }
        Ok(Shape {
            entries,
            groups,
            columns: params.columns(),
            padded_columns: params.columns().next_multiple_of(D1),
        })
    }

    /// Leaves of the packing: `e (n + 1)`.
    pub fn leaves(&self) -> usize {
        self.entries * (D1 + 1)
    }

    /// Leaves with offline masks: `e n`.
    pub fn static_leaves(&self) -> usize {
        self.entries * D1
    }

    /// Packed ciphertexts in an answer.
    pub fn trees(&self) -> usize {
        self.leaves().div_ceil(RING_D)
    }

    /// The lengths of its queries and answers.
    pub fn lengths(&self) -> Lengths {
        Lengths {
            scheme: Scheme::Ypir,
            c1: self.padded_columns,
            c2: self.groups,
            trees: self.trees(),
            body_bits: ANSWER_BODY_BITS,
        }
    }

    /// Bytes of a query body that carries the key-switching keys (the largest query).
    pub fn query_bytes(&self) -> usize {
        self.lengths().query_bytes()
    }

    /// Bytes of a query body that refers to keys sent before under its key id.
    pub fn query_bytes_by_id(&self) -> usize {
        self.lengths().query_bytes_by_id()
    }

    /// Bytes of an answer body.
    pub fn answer_bytes(&self) -> usize {
        self.lengths().answer_bytes()
    }
}

/// The query and answer lengths of a YPIR or YPIR+SP database.
pub fn lengths_of(params: &Params) -> Result<Lengths, Error> {
    match params.scheme {
        Scheme::YpirSp => Ok(sp::SpShape::of(params)?.lengths()),
        _ => Ok(Shape::of(params)?.lengths()),
    }
}

/// YPIR's layout of `records` records of `record_bits` bits: `p = 256`, row groups a multiple
/// of 2048, and among those the one with the smallest query (`4 m + 7 ℓ/e` bytes, `m` padded
/// to whole blocks of 1024).
pub fn layout(records: u64, record_bits: u32) -> Result<Params, Error> {
    let probe = Params {
        scheme: Scheme::Ypir,
        records,
        record_bits,
        rows: 1,
        columns: 1,
        p: 256,
    };
    let per_entry = probe.records_per_entry();
    let entries = probe.entries_per_record() as u64;
    if entries > MAX_RECORD_ENTRIES as u64 {
        // Larger records: YPIR+SP, whose answer grows with the record, not with `n` per byte.
        return sp::layout(records, record_bits);
    }
    let groups = records.div_ceil(per_entry);
    let most_groups = (MAX_GROUPS as u64).min(u64::from(super::MAX_ROWS) / entries);
    let mut best: Option<(u64, u64, u64)> = None;
    let mut g = RING_D as u64;
    while g <= most_groups {
        let m = groups.div_ceil(g);
        if m <= MAX_COLUMNS as u64 {
            let bytes = 4 * m.next_multiple_of(D1 as u64) + ELEMENT_BYTES as u64 * g;
            if best.is_none_or(|(b, _, _)| bytes < b) {
                best = Some((bytes, g, m));
            }
        }
        g += RING_D as u64;
    }
    let (_, g, m) = best.ok_or_else(|| {
        Error::InvalidParameter(format!(
            "{records} records of {record_bits} bits are more than YPIR lays out \
             ({MAX_COLUMNS} columns of {MAX_GROUPS} row groups); split the database"
        ))
    })?;
    let params = Params {
        rows: (g * entries) as u32,
        columns: m as u32,
        ..probe
    };
    params.validate()?;
    Ok(params)
}

/// YPIR+SP's parameters ([`crate::ypir::sp`]).
pub mod sp {
    use pir_core::Error;

    use super::{Lengths, ANSWER_MASK_BITS, ELEMENT_BYTES};
    use crate::params::{Params, Scheme};
    use crate::ring::RING_D;

    /// `p`: entries are 16-bit words, so the matrix packs two per 32-bit word with no waste and a
    /// 32 KiB record is 16,384 entries, 8 packed ciphertexts.
    pub const P: u32 = 1 << 16;
    /// `log2 p`.
    pub const P_BITS: u32 = 16;
    /// Bits of a packed ciphertext's body after modulus switching (the paper's 20; see the
    /// bound above).
    pub const BODY_BITS: u32 = 20;
    /// Most columns `m`: `T`'s sums of `m` products below `2^44` stay below `2^64`, and the
    /// first pass's noise within the bound above.
    pub const MAX_COLUMNS: usize = 1 << 20;
    /// Most packed ciphertexts per answer: the packing plan keeps about 124 MiB of digits per
    /// ciphertext (read once per answer), so 32 of them (records up to 128 KiB) take 4 GiB.
    pub const MAX_TREES: usize = 32;
    /// Packed ciphertexts the layout may use beyond what one record needs, to shorten the
    /// query: each costs 12 KB of answer, 124 MiB of server memory and about as much reading
    /// per answer, so a few at most.
    pub const LAYOUT_TREES: usize = 4;

    /// The shape of a YPIR+SP database beyond [`Params`].
    #[derive(Debug, Clone, Copy, PartialEq, Eq)]
    pub struct SpShape {
        /// `ℓ`, rows: packed values per answer.
        pub rows: usize,
        /// `m`, columns.
        pub columns: usize,
        /// `m` rounded up to whole blocks of 2048: the query's length.
        pub padded_columns: usize,
    }

    impl SpShape {
        /// The shape of `params` (a YPIR+SP database), checked.
        pub fn of(params: &Params) -> Result<SpShape, Error> {
            if params.scheme != Scheme::YpirSp {
                return Err(Error::InvalidParameter(
                    "parameters are not for YPIR+SP".into(),
                ));
            }
            if params.p != P || params.rows() > MAX_TREES * RING_D || params.columns() > MAX_COLUMNS
            {
                return Err(Error::Malformed("not a YPIR+SP layout".into()));
            }
            Ok(SpShape {
                rows: params.rows(),
                columns: params.columns(),
                padded_columns: params.columns().next_multiple_of(RING_D),
            })
        }

        /// Packed ciphertexts in an answer.
        pub fn trees(&self) -> usize {
            self.rows.div_ceil(RING_D)
        }

        /// The lengths of its queries and answers.
        pub fn lengths(&self) -> Lengths {
            Lengths {
                scheme: Scheme::YpirSp,
                c1: 0,
                c2: self.padded_columns,
                trees: self.trees(),
                body_bits: BODY_BITS,
            }
        }
    }

    /// YPIR+SP's layout of `records` records of `record_bits` bits: `p = 2^16`, and among the
    /// layouts with at most [`LAYOUT_TREES`] packed ciphertexts more than one record needs, the
    /// one with the fewest bytes up and down (`7 m' + 12288 ⌈ℓ / 2048⌉`; the keys are the same
    /// for all).
    pub fn layout(records: u64, record_bits: u32) -> Result<Params, Error> {
        let probe = Params {
            scheme: Scheme::YpirSp,
            records,
            record_bits,
            rows: 1,
            columns: 1,
            p: P,
        };
        if records == 0 || record_bits == 0 || record_bits > crate::params::MAX_RECORD_BITS {
            return Err(Error::InvalidParameter(format!(
                "need at least one record of 1 to {} bits",
                crate::params::MAX_RECORD_BITS
            )));
        }
        let per_entry = probe.records_per_entry();
        let entries = probe.entries_per_record() as u64;
        let groups = records.div_ceil(per_entry);
        let d = RING_D as u64;
        let least = entries.div_ceil(d) as usize;
        if least > MAX_TREES {
            return Err(Error::InvalidParameter(format!(
                "records of {} bytes are too large for YPIR+SP (at most {} KiB)",
                record_bits.div_ceil(8),
                MAX_TREES * RING_D * 2 / 1024
            )));
        }
        let tree_bytes = (RING_D * (ANSWER_MASK_BITS + BODY_BITS) as usize / 8) as u64;
        let mut best: Option<(u64, u64)> = None;
        for trees in least..=least.clamp(LAYOUT_TREES, MAX_TREES) {
            let per_column = (trees as u64 * d / entries).max(1);
            let m = groups.div_ceil(per_column);
            if m > MAX_COLUMNS as u64 {
                continue;
            }
            let bytes = ELEMENT_BYTES as u64 * m.next_multiple_of(d) + tree_bytes * trees as u64;
            if best.is_none_or(|(b, _)| bytes < b) {
                best = Some((bytes, m));
            }
        }
        let (_, m) = best.ok_or_else(|| {
            Error::InvalidParameter(format!(
                "{records} records of {record_bits} bits are more than YPIR+SP lays out \
                 ({MAX_COLUMNS} columns); split the database"
            ))
        })?;
        // As few rows as hold the records in `m` columns (a small database packs less).
        let per_column = groups.div_ceil(m);
        let params = Params {
            rows: (per_column * entries) as u32,
            columns: m as u32,
            ..probe
        };
        params.validate()?;
        Ok(params)
    }
}
