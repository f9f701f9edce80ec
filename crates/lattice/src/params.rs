//! LWE parameters, the plaintext-modulus table, and the database shape (notation in
//! [`crate::notation`]).
//!
//! # Why `p` depends on `m`
//!
//! An answer entry is `ans_i = H_i s + Δ D[i][col] + Σ_j D'[i][j] e_j (mod q)`, where
//! `D' = D - floor(p/2)` has entries of absolute value at most `p/2` (the database is used
//! *centered*), and `e_j` are independent rounded Gaussians of parameter `σ`. The error
//! `Σ_j D'[i][j] e_j` is subgaussian with parameter at most `sqrt(m) (p/2) σ`, so
//! `Pr[|error| >= t] <= 2 exp(-t² / (2 m (p/2)² σ²))`. Decoding (rounding to the nearest
//! multiple of `Δ = floor(q/p)`) is correct when `|error| < Δ/2 ≈ q/(2p)`. Asking the tail to be at
//! most `δ = 2^-40` gives
//!
//! ```text
//! p² <= q / (sqrt(2 ln(2/δ)) · sqrt(m) · σ)
//! ```
//!
//! which is [`max_plaintext_modulus`] and reproduces the SimplePIR table ([`SIMPLE_PIR_P`])
//! exactly. DoublePIR's client decodes `κ(n+1)` values of the second layer per entry, so the
//! same bound with `δ / (κ(n+1))` (a union bound) gives its slightly smaller table
//! ([`DOUBLE_PIR_P`]; the paper's values are at most one below the formula).

use pir_core::{Error, SchemeId};

pub mod inspire;
pub mod ypir;

/// Bytes of a database version (a digest of the packed database), which every hint and query
/// carries ([`crate::wire::DbVersion`]).
pub const VERSION_LEN: usize = 32;

/// `n`, the LWE secret dimension of SimplePIR and DoublePIR, with `q = 2^32` and `σ = 6.4`.
/// The papers' `n = 1024` (Henzinger et al., USENIX Security 2023, section 4.2, 128 bits in
/// the lattice estimator's cost model) is 94 bits classical core-SVP; `n = 1280` is the
/// smallest step that reaches 128 ([`crate::security::LWE`]: 128 classical, 116 quantum; the
/// sweep and the costs are in `docs/security.md`). The query, the answer and the server's
/// answer time do not depend on `n`; the hint, the client's query preparation and decoding
/// grow 1.25x. YPIR's first layer has its own ring dimension, [`ypir::D1`].
pub const LWE_N: usize = 1280;

/// `log2 q`: the ciphertext modulus is `q = 2^32`, so arithmetic mod `q` is native wrapping
/// `u32` arithmetic (Henzinger et al. 2023, section 4.2; the security of the set is at
/// [`LWE_N`]).
pub const LOG_Q: u32 = 32;

/// `σ`, the parameter of the rounded Gaussian error (standard deviation of the continuous
/// Gaussian before rounding): 6.4, as in Henzinger et al. 2023, section 4.2 (the security of
/// the set is at [`LWE_N`]).
pub const SIGMA: f64 = 6.4;

/// `log2 δ`: a decoded entry is wrong with probability at most `2^-40` (Henzinger et al. 2023,
/// section 4.2; YPIR, Menon and Wu 2024, uses the same correctness target).
pub const FAILURE_LOG2: i32 = -40;

/// `log2 m` of the first and last rows of the plaintext-modulus tables.
pub const TABLE_LOG_M: (u32, u32) = (13, 21);

/// SimplePIR's `p` for `m = 2^13, 2^14, ..., 2^21` columns (Henzinger et al. 2023, parameter
/// table of section 4.2 / the artifact's `params.csv`); equal to [`max_plaintext_modulus`]
/// with one decoding per entry.
pub const SIMPLE_PIR_P: [u32; 9] = [991, 833, 701, 589, 495, 416, 350, 294, 247];

/// DoublePIR's `p` for `m = 2^13 ... 2^21`: [`max_plaintext_modulus`] with `κ(n+1)` decodings
/// per entry at `n =` [`LWE_N`] (the paper's table, at `n = 1024`, is one higher at the three
/// narrowest widths: 929, 781, 657).
pub const DOUBLE_PIR_P: [u32; 9] = [928, 780, 656, 552, 464, 390, 328, 276, 231];

/// Largest record this crate lays out: 256 KiB (a record occupies one column).
pub const MAX_RECORD_BITS: u32 = 1 << 21;
/// Most rows `ℓ`: keeps SimplePIR's hint (`ℓ · n · 4` bytes) within one 4 GiB message.
pub const MAX_ROWS: u32 = 1 << 19;
/// Most columns `m`: the end of the plaintext-modulus table.
pub const MAX_COLUMNS: u32 = 1 << TABLE_LOG_M.1;
/// Most database entries a DoublePIR record may span: each costs one more second-layer query
/// (`ℓ` words up, `κ(n+1)` words down); larger records should use SimplePIR.
pub const DOUBLE_PIR_MAX_RECORD_ENTRIES: u32 = 64;

/// DoublePIR's wide layout keeps the second layer (database-independent work on the first
/// answer and on `Decomp(H1ᵀ)`) at most `1/4` of the first layer's multiply-adds, so the
/// answer runs near memory speed; a larger share would shrink the query further (its optimum
/// is `ℓ = sqrt(N e)/e`) at the cost of answer time ([`Params::double_pir_wide`]).
pub const DOUBLE_PIR_SECOND_LAYER_SHARE: u64 = 4;

/// ... and at most `1/8` of the bytes the first layer reads. Every pass of a one-entry
/// record's answer does one multiply-add per byte it reads, so its time is its bytes: the
/// second layer reads `Decomp(H1ᵀ)` (`κ n ℓ` digits) and `A2` (`ℓ n` words), and at 1 GiB of
/// 1-bit records this rule halves `ℓ` against the multiply-add rule's (13,107 rows instead of
/// 26,214): 10 % fewer bytes per answer (1.21 GB instead of 1.34) for a query 41 % larger
/// (380 KB instead of 269 KB; docs/benchmarks.md). Records of many entries do `e` multiply-adds
/// per digit of `Decomp(H1ᵀ)`, and for them the multiply-add rule is the tighter one.
pub const DOUBLE_PIR_SECOND_LAYER_BYTES_SHARE: u64 = 8;

/// The two lattice schemes of this crate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// SimplePIR: one LWE layer; the client downloads the hint `H = D A` (`ℓ × n`).
    SimplePir,
    /// DoublePIR: a second LWE layer over the first answer and the hint; the client's hint is
    /// `κn × n`, independent of the database size.
    DoublePir,
    /// YPIR: DoublePIR's two layers with the second answer packed into RLWE ciphertexts; no
    /// hint download ([`crate::ypir`]).
    Ypir,
    /// YPIR+SP: SimplePIR's one layer over RLWE, its answer packed as YPIR packs; no hint
    /// download, for records too large for YPIR ([`crate::ypir::sp`]). `Params::new` of
    /// [`Scheme::Ypir`] lays large records out with this one.
    YpirSp,
    /// InsPIRe: one RLWE layer (`d = 4096`) with its answer packed by InspiRING; no hint
    /// download ([`crate::inspire`]).
    Inspire,
}

impl Scheme {
    /// The single-server scheme of a wire id.
    pub fn from_id(id: SchemeId) -> Result<Scheme, Error> {
        match id {
            SchemeId::SimplePir => Ok(Scheme::SimplePir),
            SchemeId::DoublePir => Ok(Scheme::DoublePir),
            SchemeId::Ypir => Ok(Scheme::Ypir),
            SchemeId::YpirSp => Ok(Scheme::YpirSp),
            SchemeId::Inspire => Ok(Scheme::Inspire),
            other => Err(Error::WrongScheme {
                found: other as u8,
                expected: SchemeId::SimplePir as u8,
            }),
        }
    }

    /// Whether the scheme has a second public seed (DoublePIR's `A2`, YPIR's second layer);
    /// YPIR+SP draws its query blocks and key masks from its one seed.
    pub fn two_seeds(self) -> bool {
        matches!(self, Scheme::DoublePir | Scheme::Ypir)
    }

    /// The scheme's id in the wire envelope.
    pub fn id(self) -> SchemeId {
        match self {
            Scheme::SimplePir => SchemeId::SimplePir,
            Scheme::DoublePir => SchemeId::DoublePir,
            Scheme::Ypir => SchemeId::Ypir,
            Scheme::YpirSp => SchemeId::YpirSp,
            Scheme::Inspire => SchemeId::Inspire,
        }
    }
}

/// `Δ = floor(q / p)`, the scale of an encoded plaintext.
pub fn delta(p: u32) -> u32 {
    ((1u64 << LOG_Q) / u64::from(p.max(1))) as u32
}

/// `κ`, the number of base-`p` digits of an element of `Z_q`: the least `κ` with `p^κ >= q`.
pub fn digits(p: u32) -> usize {
    let mut kappa = 0;
    let mut power: u64 = 1;
    while power < (1u64 << LOG_Q) {
        power = power.saturating_mul(u64::from(p.max(2)));
        kappa += 1;
    }
    kappa
}

/// `floor(log2 p)`: data bits stored in one entry (record bits are cut into pieces this long).
pub fn entry_bits(p: u32) -> u32 {
    31 - p.max(2).leading_zeros()
}

/// `ceil(log2 p)`: bits needed to store any element of `Z_p` (DoublePIR's digit matrices).
pub fn element_bits(p: u32) -> u32 {
    32 - (p.max(2) - 1).leading_zeros()
}

/// The largest `p` for which `m` terms of error decode correctly except with probability
/// `2^FAILURE_LOG2 / decodings` (derivation in the module documentation).
pub fn max_plaintext_modulus(m: u64, decodings: u64) -> u32 {
    let tail = 2.0 * decodings.max(1) as f64 * 2f64.powi(-FAILURE_LOG2);
    let z = (2.0 * tail.ln()).sqrt();
    let bound = 2f64.powi(LOG_Q as i32) / (z * (m.max(1) as f64).sqrt() * SIGMA);
    bound.sqrt().floor() as u32
}

/// The plaintext modulus for a matrix whose rows sum `m` error terms: the table entry of the
/// smallest tabulated `m' >= m` (`p` only shrinks as `m` grows, so this is conservative;
/// `m < 2^13` uses the `2^13` entry). For DoublePIR pass `max(ℓ, m)`: the second layer sums
/// `ℓ` error terms. Errors above `2^21`.
pub fn p_for(m: u64, scheme: Scheme) -> Result<u32, Error> {
    let log_m = m
        .max(1)
        .next_power_of_two()
        .trailing_zeros()
        .max(TABLE_LOG_M.0);
    if log_m > TABLE_LOG_M.1 {
        return Err(Error::InvalidParameter(format!(
            "{m} columns exceed the parameter table (at most 2^{})",
            TABLE_LOG_M.1
        )));
    }
    let i = (log_m - TABLE_LOG_M.0) as usize;
    Ok(match scheme {
        Scheme::SimplePir => SIMPLE_PIR_P[i],
        Scheme::DoublePir => DOUBLE_PIR_P[i],
        // YPIR rescales the first answer before decoding: p = 256 at every width it lays out.
        Scheme::Ypir => 256,
        // YPIR+SP decodes from the packed layer: 16 data bits per entry at every width.
        Scheme::YpirSp => ypir::sp::P,
        Scheme::Inspire => inspire::P,
    })
}

/// The `p` [`Params::new`] uses for width `m`: [`p_for`], or a power of two `2^b` below it
/// (`b` at most one bit under `log2 p`) when that stores more data bits per 32-bit word of
/// the packed matrix (the table's
/// `p = 701` keeps 9 data bits in 10 stored bits, three entries per word: 27 data bits;
/// `p = 256` keeps 8 in 8, four per word: 32). The server reads the packed matrix once per
/// answer, so denser packing is directly a faster answer (16 % fewer bytes at `p = 256`,
/// for 12.5 % more entries to multiply). DoublePIR takes a power of two only if it keeps
/// `κ` (a digit more would grow the hint and the answer). A smaller `p` only lowers the
/// decoding error. The cost: every value of `Z_p` is then a possible entry, so a corrupted
/// answer is no longer caught by decoding to an impossible one (answers are signed).
fn scheme_p(m: u64, scheme: Scheme) -> Result<u32, Error> {
    let p = p_for(m, scheme)?;
    let data_bits_per_word = |p: u32| (32 / element_bits(p)) * entry_bits(p);
    let mut best = p;
    // At most one data bit less per entry (more would multiply the entries, the server's
    // arithmetic, for little storage: 16 packs 32 data bits per word too); largest first,
    // so a tie keeps more data bits per entry.
    for b in (entry_bits(p).saturating_sub(1).max(1)..=entry_bits(p)).rev() {
        let power = 1u32 << b;
        let allowed = match scheme {
            Scheme::SimplePir | Scheme::Ypir | Scheme::YpirSp | Scheme::Inspire => true,
            Scheme::DoublePir => digits(power) == digits(p),
        };
        if allowed && data_bits_per_word(power) > data_bits_per_word(best) {
            best = power;
        }
    }
    Ok(best)
}

/// The widest tabulated `m` whose DoublePIR `p` needs at most `kappa` digits (the narrowest
/// table entry if none does).
fn widest_columns_with_digits(kappa: usize) -> u64 {
    (TABLE_LOG_M.0..=TABLE_LOG_M.1)
        .zip(DOUBLE_PIR_P)
        .filter(|&(_, p)| digits(p) <= kappa)
        .map(|(log_m, _)| 1u64 << log_m)
        .max()
        .unwrap_or(1 << TABLE_LOG_M.0)
}

/// The shape of a lattice-PIR database: what the hint header carries, so a client can lay
/// out queries and decode answers. Derived quantities are methods.
///
/// Records are a bit string: record `i` is bits `[i·bits, (i+1)·bits)` of the database, least
/// significant bit first (the layout of `pir_core::bits`). With `b =` [`entry_bits`]`(p)`:
/// a record of at most `b` bits shares an entry with `floor(b / bits)` others; a longer one
/// is cut into `ceil(bits / b)` pieces that lie down consecutive rows of one column. Such a
/// *group* of entries (one entry of small records, or the pieces of one record) is the unit
/// of layout; groups fill column 0 top to bottom, then column 1, and so on.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Params {
    /// Which scheme the database is served with.
    pub scheme: Scheme,
    /// `N`, the number of records.
    pub records: u64,
    /// Bits per record.
    pub record_bits: u32,
    /// `ℓ`, the number of rows of the database matrix.
    pub rows: u32,
    /// `m`, the number of columns of the database matrix.
    pub columns: u32,
    /// `p`, the plaintext modulus.
    pub p: u32,
}

/// Where one record lies in the matrix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// Its column (what the query selects).
    pub column: usize,
    /// The first row of its group.
    pub row: usize,
    /// Entries of the group (rows `row..row + entries`).
    pub entries: usize,
    /// Offset of the record's bits inside the group's bits.
    pub bit_offset: u32,
}

impl Params {
    /// Lays out `records` records of `record_bits` bits, with `p` from the table for the
    /// resulting width: SimplePIR near-square (rule in [`Params::with_modulus`]), DoublePIR
    /// wide (rule in [`Params::double_pir_wide`]; near-square if the wide layout cannot hold
    /// the records).
    ///
    /// Because `p` depends on the width and the layout on `p`, the rule is applied again with
    /// the new `p` until it is stable (`p` only shrinks, so this ends after a few rounds).
    /// The table's `p` is rounded down to a power of two when that packs more data bits per
    /// word (rule in [`scheme_p`]; at most widths both schemes use `p = 256`, four entries
    /// of 8 data bits per word instead of three of 9).
    pub fn new(scheme: Scheme, records: u64, record_bits: u32) -> Result<Params, Error> {
        match scheme {
            Scheme::Ypir => ypir::layout(records, record_bits),
            Scheme::YpirSp => ypir::sp::layout(records, record_bits),
            Scheme::Inspire => inspire::layout(records, record_bits),
            Scheme::SimplePir => Params::settle(scheme, |p| {
                Params::with_modulus(scheme, records, record_bits, p)
            }),
            Scheme::DoublePir => {
                Params::settle(scheme, |p| Params::double_pir_wide(records, record_bits, p))
                    .or_else(|_| {
                        Params::settle(scheme, |p| {
                            Params::with_modulus(scheme, records, record_bits, p)
                        })
                    })
            }
        }
    }

    /// Applies `layout` with the scheme's `p` for the layout's width until `p` is stable.
    fn settle(
        scheme: Scheme,
        layout: impl Fn(u32) -> Result<Params, Error>,
    ) -> Result<Params, Error> {
        let mut p = scheme_p(1, scheme)?;
        loop {
            let shape = layout(p)?;
            let width = match scheme {
                Scheme::SimplePir | Scheme::Ypir | Scheme::YpirSp | Scheme::Inspire => {
                    u64::from(shape.columns)
                }
                Scheme::DoublePir => u64::from(shape.columns.max(shape.rows)),
            };
            let next = scheme_p(width, scheme)?;
            if next >= p {
                return Ok(shape);
            }
            p = next;
        }
    }

    /// DoublePIR's layout for a given `p`: few rows, many columns.
    ///
    /// With `G` groups of `e` entries, `g` groups per column (`ℓ = e g`, `m = ceil(G / g)`),
    /// the first layer costs `ℓ m ≈ e G` multiply-adds and the second about `(e + 1) κ n ℓ`
    /// (`M'c2` for each of the `e` queries `c2`, and `Y'A2`), which at `ℓ ≈ m` is several
    /// times the first. The query is `m + e ℓ` words. So `g` is the query-optimal
    /// `sqrt(G) / e`, lowered until the second layer costs at most
    /// `1 /` [`DOUBLE_PIR_SECOND_LAYER_SHARE`] of the first (`m >= share · (e + 1) κ n`) and
    /// reads at most `1 /` [`DOUBLE_PIR_SECOND_LAYER_BYTES_SHARE`] of its bytes, but
    /// kept high enough that `m` stays within the widest table entry whose `p` has the same
    /// `κ` (a wider `m` would grow the hint and the answer by a digit).
    pub fn double_pir_wide(records: u64, record_bits: u32, p: u32) -> Result<Params, Error> {
        Params::check_record(records, record_bits)?;
        check_modulus(p)?;
        let (per_entry, entries) = group_shape(record_bits, entry_bits(p));
        let groups = records.div_ceil(per_entry);
        let most_per_column = u64::from(MAX_ROWS) / entries;
        let kappa = digits(p) as u64;
        let query_optimal = (integer_sqrt(groups) / entries).max(1);
        let cheap_second_layer =
            groups / (DOUBLE_PIR_SECOND_LAYER_SHARE * (entries + 1) * kappa * LWE_N as u64);
        // In bytes, with `w` elements packed per word: the first layer reads `e G` elements,
        // the second `(κ + w) n ℓ` elements' worth (`κ n ℓ` digits and `ℓ n` words of `A2`).
        let per_word = u64::from(32 / element_bits(p));
        let few_second_layer_bytes =
            groups / (DOUBLE_PIR_SECOND_LAYER_BYTES_SHARE * (kappa + per_word) * LWE_N as u64);
        let widest = widest_columns_with_digits(digits(p));
        let per_column = query_optimal
            .min(cheap_second_layer)
            .min(few_second_layer_bytes)
            .max(groups.div_ceil(widest))
            .clamp(1, most_per_column.max(1));
        Params::from_layout(Scheme::DoublePir, records, record_bits, p, per_column)
    }

    /// The near-square layout of [`Params::new`] for a given `p` (for experiments and tests
    /// that need a `p` outside the table; [`Params::validate`] refuses those on the wire).
    pub fn with_modulus(
        scheme: Scheme,
        records: u64,
        record_bits: u32,
        p: u32,
    ) -> Result<Params, Error> {
        Params::check_record(records, record_bits)?;
        check_modulus(p)?;
        let (per_entry, entries) = group_shape(record_bits, entry_bits(p));
        let groups = records.div_ceil(per_entry);
        let most_per_column = u64::from(MAX_ROWS) / entries;
        let per_column = integer_sqrt(groups.div_ceil(entries)).clamp(1, most_per_column.max(1));
        Params::from_layout(scheme, records, record_bits, p, per_column)
    }

    fn check_record(records: u64, record_bits: u32) -> Result<(), Error> {
        if records == 0 || record_bits == 0 || record_bits > MAX_RECORD_BITS {
            return Err(Error::InvalidParameter(format!(
                "need at least one record of 1 to {MAX_RECORD_BITS} bits"
            )));
        }
        Ok(())
    }

    /// The shape with `per_column` groups in each column, checked.
    fn from_layout(
        scheme: Scheme,
        records: u64,
        record_bits: u32,
        p: u32,
        per_column: u64,
    ) -> Result<Params, Error> {
        let (per_entry, entries) = group_shape(record_bits, entry_bits(p));
        let groups = records.div_ceil(per_entry);
        if entries > u64::from(MAX_ROWS) {
            return Err(Error::InvalidParameter(format!(
                "a record of {record_bits} bits needs more than {MAX_ROWS} rows at p = {p}"
            )));
        }
        let rows = per_column * entries;
        let columns = groups.div_ceil(per_column);
        let shape = Params {
            scheme,
            records,
            record_bits,
            rows: u32::try_from(rows).unwrap_or(u32::MAX),
            columns: u32::try_from(columns).unwrap_or(u32::MAX),
            p,
        };
        shape.check_shape()?;
        Ok(shape)
    }

    /// Checks everything a hint header could get wrong: `p` within the table for this width
    /// (a larger `p` would break the 2^-40 correctness bound), sizes within the limits, and
    /// rows and columns that hold exactly the records.
    pub fn validate(&self) -> Result<(), Error> {
        match self.scheme {
            Scheme::Ypir => {
                ypir::Shape::of(self)?;
            }
            Scheme::YpirSp => {
                ypir::sp::SpShape::of(self)?;
            }
            Scheme::Inspire => {
                inspire::Shape::of(self)?;
            }
            Scheme::SimplePir | Scheme::DoublePir => {}
        }
        if matches!(self.scheme, Scheme::Ypir | Scheme::YpirSp | Scheme::Inspire) {
            return self
                .check_shape()
                .map_err(|e| Error::Malformed(e.to_string()));
        }
        let width = match self.scheme {
            Scheme::SimplePir | Scheme::Ypir | Scheme::YpirSp | Scheme::Inspire => {
                u64::from(self.columns)
            }
            Scheme::DoublePir => u64::from(self.columns.max(self.rows)),
        };
        let limit = p_for(width, self.scheme).map_err(|e| Error::Malformed(e.to_string()))?;
        if self.p > limit {
            return Err(Error::Malformed(format!(
                "plaintext modulus {} is above {limit}, the most that decodes correctly",
                self.p
            )));
        }
        self.check_shape()
            .map_err(|e| Error::Malformed(e.to_string()))
    }

    fn check_shape(&self) -> Result<(), Error> {
        let bad = |what: &str| Err(Error::InvalidParameter(what.to_string()));
        if self.records == 0 || self.record_bits == 0 || self.record_bits > MAX_RECORD_BITS {
            return bad("records must be 1 to MAX_RECORD_BITS bits, at least one of them");
        }
        check_modulus(self.p)?;
        if self.rows == 0 || self.rows > MAX_ROWS || self.columns == 0 || self.columns > MAX_COLUMNS
        {
            return bad("matrix dimensions out of range");
        }
        let (per_entry, entries) = group_shape(self.record_bits, entry_bits(self.p));
        if u64::from(self.rows) % entries != 0 {
            return bad("rows are not a whole number of record groups");
        }
        if self.scheme == Scheme::DoublePir && entries > u64::from(DOUBLE_PIR_MAX_RECORD_ENTRIES) {
            return bad("record too large for DoublePIR (use SimplePIR)");
        }
        let groups = self.records.div_ceil(per_entry);
        let per_column = u64::from(self.rows) / entries;
        if groups.div_ceil(per_column) != u64::from(self.columns) {
            return bad("columns do not match the number of records");
        }
        Ok(())
    }

    /// `n`: the LWE dimension of the scheme's first layer ([`LWE_N`] for SimplePIR and
    /// DoublePIR, YPIR's ring dimension [`ypir::D1`] for YPIR and YPIR+SP).
    pub fn n(&self) -> usize {
        match self.scheme {
            Scheme::SimplePir | Scheme::DoublePir => LWE_N,
            Scheme::Ypir | Scheme::YpirSp => ypir::D1,
            Scheme::Inspire => inspire::D,
        }
    }

    /// `ℓ` as a `usize`.
    pub fn rows(&self) -> usize {
        self.rows as usize
    }

    /// `m` as a `usize`.
    pub fn columns(&self) -> usize {
        self.columns as usize
    }

    /// `Δ = floor(q / p)`.
    pub fn delta(&self) -> u32 {
        delta(self.p)
    }

    /// `κ`, base-`p` digits per element of `Z_q` (DoublePIR).
    pub fn digits(&self) -> usize {
        digits(self.p)
    }

    /// `b`, data bits per entry.
    pub fn entry_bits(&self) -> u32 {
        entry_bits(self.p)
    }

    /// The centering offset `floor(p / 2)`: the server computes with `D - floor(p/2)`.
    pub fn center(&self) -> u32 {
        self.p / 2
    }

    /// Records per entry (1 for records longer than `b` bits).
    pub fn records_per_entry(&self) -> u64 {
        group_shape(self.record_bits, self.entry_bits()).0
    }

    /// Entries per group: `ceil(bits / b)` for records longer than `b`, else 1.
    pub fn entries_per_record(&self) -> usize {
        group_shape(self.record_bits, self.entry_bits()).1 as usize
    }

    /// Bytes of one decoded record, `ceil(bits / 8)`.
    pub fn record_bytes(&self) -> usize {
        (self.record_bits as usize).div_ceil(8)
    }

    /// Bytes of the whole database as a bit string, `ceil(N · bits / 8)`.
    pub fn database_bytes(&self) -> u64 {
        (self.records * u64::from(self.record_bits)).div_ceil(8)
    }

    /// Where record `index` lies; an error if there is no such record.
    pub fn locate(&self, index: u64) -> Result<Location, Error> {
        if index >= self.records {
            return Err(Error::InvalidParameter(format!(
                "record {index} does not exist (the database has {})",
                self.records
            )));
        }
        let per_entry = self.records_per_entry();
        let entries = self.entries_per_record();
        let group = index / per_entry;
        let per_column = (self.rows as usize / entries) as u64;
        Ok(Location {
            column: (group / per_column) as usize,
            row: (group % per_column) as usize * entries,
            entries,
            bit_offset: ((index % per_entry) * u64::from(self.record_bits)) as u32,
        })
    }

    /// The bits of the database that entry `(row, column)` holds, as `(first bit, length)`
    /// of the database bit string (length 0 for entries past the last record).
    pub fn entry_span(&self, row: usize, column: usize) -> (u64, u32) {
        let entries = self.entries_per_record();
        let per_column = (self.rows as usize / entries) as u64;
        let group = column as u64 * per_column + (row / entries) as u64;
        let total = self.records * u64::from(self.record_bits);
        let b = self.entry_bits();
        let (start, len) = if entries == 1 {
            let bits = self.records_per_entry() * u64::from(self.record_bits);
            (group * bits, bits)
        } else {
            let piece = (row % entries) as u64 * u64::from(b);
            let start = group * u64::from(self.record_bits) + piece;
            (start, u64::from(b).min(u64::from(self.record_bits) - piece))
        };
        if start >= total {
            return (0, 0);
        }
        (start, len.min(total - start) as u32)
    }
}

fn check_modulus(p: u32) -> Result<(), Error> {
    if !(2..=1 << 16).contains(&p) {
        return Err(Error::InvalidParameter(format!(
            "plaintext modulus {p} outside 2..=65536"
        )));
    }
    Ok(())
}

/// `(records per entry, entries per group)` for records of `bits` bits and `b`-bit entries.
fn group_shape(bits: u32, b: u32) -> (u64, u64) {
    if bits <= b {
        (u64::from(b / bits), 1)
    } else {
        (1, u64::from(bits.div_ceil(b)))
    }
}

fn integer_sqrt(x: u64) -> u64 {
    let mut r = (x as f64).sqrt() as u64;
    while r * r > x {
        r -= 1;
    }
    while (r + 1) * (r + 1) <= x {
        r += 1;
    }
    r
}

#[cfg(test)]
#[path = "params_tests.rs"]
mod tests;
