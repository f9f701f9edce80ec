//! InsPIRe's parameters: the database layout, its shape, the lengths of its queries, keys
//! and answers, and the constants these rest on. They are parameters, below the schemes:
//! [`crate::params::Params::new`] lays a database out with them, and [`crate::inspire`]
//! (which re-exports them under their old paths) builds the scheme on top. The reasoning
//! behind each bound is in [`crate::inspire`].

use pir_core::Error;

use super::{Params, Scheme, MAX_RECORD_BITS, VERSION_LEN};

/// The ring dimension: `d = 4096` (128 bits and more at `log2 q = 55.9`; 2048 gives 96).
pub const D: usize = 4096;
/// `log2 p`: 16-bit entries.
pub const P_BITS: u32 = 16;
/// `p`.
pub const P: u32 = 1 << P_BITS;
/// `p / 2`: the server packs each entry less this (a signed value in `[-p/2, p/2)`), which
/// halves the first pass's worst-case noise; the client adds it back.
pub const CENTER: u32 = P / 2;
/// `log2` of the base of the key-switching gadget of `K_g` and `K_h` (balanced).
pub const GADGET_BITS: u32 = 19;
/// Digits of that gadget.
pub const GADGET_DIGITS: usize = 3;
/// Low bits of each query element the client drops (see the correctness bound).
pub const DROPPED_BITS: u32 = 14;
/// Bits of a query element on the wire: `ceil(log2 (q / 2^14))`.
pub const QUERY_BITS: u32 = 42;
/// Bits of a packed ciphertext's mask coefficients after modulus switching.
pub const MASK_BITS: u32 = 25;
/// Bits of a packed ciphertext's body coefficients after modulus switching: `P_BITS + 2`.
pub const BODY_BITS: u32 = 18;
/// Most columns `m` (the first pass's noise bound, above).
pub const MAX_COLUMNS: usize = 1 << 15;
/// Most packed ciphertexts per answer: each keeps `3 (d - 1) d · 8` bytes (384 MiB) of
/// offline gadget digits (so that a key upload costs products, not NTTs), so 8 of them
/// (records up to 64 KiB) take 3 GiB.
pub const MAX_PACKED: usize = 8;
/// Packed ciphertexts the layout may use beyond what one record needs, to shorten the query.
pub const LAYOUT_PACKED: usize = 4;
/// What the layout counts each packed ciphertext as beyond its bytes on the wire, in bytes:
/// each costs the server 384 MiB and its share of a key upload, so one more is taken only
/// when it saves more than this.
pub const PACKED_WEIGHT: u64 = 2048;
/// Bytes of a packed ciphertext's mask in an answer (its body has one coefficient per row).
pub const MASK_BYTES: usize = D * MASK_BITS as usize / 8;
/// Bytes of a full packed ciphertext (4096 rows) in an answer.
pub const PACKED_BYTES: usize = D * (MASK_BITS + BODY_BITS) as usize / 8;
/// Length of a key id.
pub const KEY_ID_LEN: usize = 16;
/// Bytes of one key element.
pub const ELEMENT_BYTES: usize = 7;
/// Key polynomials: `K_g`'s digits then `K_h`'s.
pub const KEY_POLYS: usize = 2 * GADGET_DIGITS;
/// Bytes of the key bodies in an upload.
pub const KEY_BYTES: usize = ELEMENT_BYTES * KEY_POLYS * D;
/// Bytes of a query before `c`: version, mode, key id.
pub const HEADER_BYTES: usize = VERSION_LEN + 1 + KEY_ID_LEN;

/// The shape of an InsPIRe database beyond [`Params`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// `ℓ`, rows: packed values per answer.
    pub rows: usize,
    /// `m`, columns.
    pub columns: usize,
    /// `m` rounded up to whole blocks of 4096: the RLWE ciphertexts the query's elements
    /// come from (it sends only the first `m`).
    pub padded_columns: usize,
}

impl Shape {
    /// The shape of `params` (an InsPIRe database), checked.
    pub fn of(params: &Params) -> Result<Shape, Error> {
        if params.scheme != Scheme::Inspire {
            return Err(Error::InvalidParameter(
                "parameters are not for InsPIRe".into(),
            ));
        }
        if params.p != P || params.rows() > MAX_PACKED * D || params.columns() > MAX_COLUMNS {
            return Err(Error::Malformed("not an InsPIRe layout".into()));
        }
        Ok(Shape {
            rows: params.rows(),
            columns: params.columns(),
            padded_columns: params.columns().next_multiple_of(D),
        })
    }

    /// Packed ciphertexts in an answer.
    pub fn packed(&self) -> usize {
        self.rows.div_ceil(D)
    }

    /// Rows (packed values) of packed ciphertext `k`: 4096, fewer in the last.
    pub fn rows_of(&self, k: usize) -> usize {
        self.rows.saturating_sub(k * D).min(D)
    }

    /// Bytes of the query's elements: `m` of [`QUERY_BITS`].
    pub fn c_bytes(&self) -> usize {
        (self.columns * QUERY_BITS as usize).div_ceil(8)
    }

    /// Bytes of a query body that names keys uploaded before.
    pub fn query_bytes_cached(&self) -> usize {
        HEADER_BYTES + self.c_bytes()
    }

    /// Bytes of a query body that uploads the keys.
    pub fn query_bytes_upload(&self) -> usize {
        self.query_bytes_cached() + KEY_BYTES
    }

    /// Bytes of packed ciphertext `k` in an answer: its mask, and a body coefficient per
    /// row it holds.
    pub fn packed_bytes(&self, k: usize) -> usize {
        MASK_BYTES + (self.rows_of(k) * BODY_BITS as usize).div_ceil(8)
    }

    /// Bytes of an answer body.
    pub fn answer_bytes(&self) -> usize {
        (0..self.packed()).map(|k| self.packed_bytes(k)).sum()
    }
}

/// InsPIRe's layout of `records` records of `record_bits` bits: `p = 2^16`, and among the
/// layouts with at most [`LAYOUT_PACKED`] packed ciphertexts more than one record needs, the
/// one with the fewest bytes up and down (`5.25 m + 12800 ⌈ℓ / 4096⌉ + 2.25 ℓ`), each
/// packed ciphertext counted [`PACKED_WEIGHT`] bytes more.
pub fn layout(records: u64, record_bits: u32) -> Result<Params, Error> {
    let probe = Params {
        scheme: Scheme::Inspire,
        records,
        record_bits,
        rows: 1,
        columns: 1,
        p: P,
    };
    if records == 0 || record_bits == 0 || record_bits > MAX_RECORD_BITS {
        return Err(Error::InvalidParameter(format!(
            "need at least one record of 1 to {MAX_RECORD_BITS} bits"
        )));
    }
    let per_entry = probe.records_per_entry();
    let entries = probe.entries_per_record() as u64;
    let groups = records.div_ceil(per_entry);
    let d = D as u64;
    let least = entries.div_ceil(d) as usize;
    if least > MAX_PACKED {
        return Err(Error::InvalidParameter(format!(
            "records of {} bytes are too large for InsPIRe (at most {} KiB)",
            record_bits.div_ceil(8),
            MAX_PACKED * D * 2 / 1024
        )));
    }
    let mut best: Option<(u64, u64)> = None;
    for packed in least..=(least + LAYOUT_PACKED).min(MAX_PACKED) {
        let per_column = (packed as u64 * d / entries).max(1);
        let m = groups.div_ceil(per_column);
        if m > MAX_COLUMNS as u64 {
            continue;
        }
        let shape = Shape {
            rows: (groups.div_ceil(m) * entries) as usize,
            columns: m as usize,
            padded_columns: m.next_multiple_of(d) as usize,
        };
        let bytes =
            (shape.c_bytes() + shape.answer_bytes()) as u64 + PACKED_WEIGHT * shape.packed() as u64;
        if best.is_none_or(|(b, _)| bytes < b) {
            best = Some((bytes, m));
        }
    }
    let (_, m) = best.ok_or_else(|| {
        Error::InvalidParameter(format!(
            "{records} records of {record_bits} bits are more than InsPIRe lays out \
             ({MAX_COLUMNS} columns of {} rows); split the database",
            MAX_PACKED * D
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
