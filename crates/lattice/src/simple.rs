//! SimplePIR (Henzinger et al., USENIX Security 2023, section 4): one LWE layer.
//!
//! - Setup (server): lay the records out as `D ∈ Z_p^{ℓ×m}` ([`Params`]), compute the hint
//!   `H = D'A ∈ Z_q^{ℓ×n}` for the public `A ∈ Z_q^{m×n}` of a seed.
//! - Query (client, knows only the hint): for the record's column, a fresh secret
//!   `s ← Z_q^n`, errors `e ← χ^m`, and `c = A s + e + Δ u_column`.
//! - Answer (server): `ans = D'c ∈ Z_q^ℓ`: one pass over the packed database, the same work and
//!   size for every index.
//! - Decode (client): `entry_i = round((ans_i - H_i s) / Δ) mod p` for the rows of the record.
//!
//! Privacy: `c` is an LWE sample, pseudorandom to the server under the LWE assumption with
//! `n = 1280, q = 2^32, σ = 6.4` (128 bits classical core-SVP, `docs/security.md`); a fresh
//! secret per query.

use pir_core::Error;
use pir_kernels::matvec::Packing;
use rand::CryptoRng;

use crate::gaussian::ErrorSampler;
use crate::lwe::{self, ZpMatrix};
use crate::params::{Location, Params, Scheme, LWE_N};
use crate::prg;
use crate::records;
use crate::single::{BuildInput, Saved};
use crate::wire::{self, HintHeader};

/// A SimplePIR server: the packed database and what it needs to answer.
#[derive(Debug)]
pub struct SimplePirServer {
    header: HintHeader,
    db: ZpMatrix,
    /// The first column of the whole matrix this server holds (0 unless it is a shard).
    first_column: usize,
}

impl SimplePirServer {
    /// Packs the records and computes the hint for the public matrix of the first seed, or
    /// takes the saved hint (its header must match). Returns the server and the offline work
    /// to save: the hint message every client downloads (no extra state). `progress` follows
    /// the hint computation (rows of `A` consumed).
    pub fn build(input: BuildInput<'_>) -> Result<(SimplePirServer, Saved), Error> {
        let columns = 0..input.params.columns();
        Self::build_columns(input, columns)
    }

    /// A shard of the server: only `columns` of the database matrix, packed from
    /// `input.records`, which holds just the bytes of the record bit string those columns hold
    /// ([`column_bytes`]). Its answer is `D_k' c_k` and its hint `D_k' A_k` (`A_k` the rows of
    /// `A` its columns meet): the sums of these over shards that cover every column are the
    /// whole server's answer and hint, because `D' c = Σ_k D_k' c_k` splits the sum over
    /// columns. The header is the whole database's, so the summed hint is byte for byte the
    /// unsharded one.
    pub fn build_columns(
        input: BuildInput<'_>,
        columns: std::ops::Range<usize>,
    ) -> Result<(SimplePirServer, Saved), Error> {
        let header = input.header(Scheme::SimplePir)?;
        let db = pack_columns(&header.params, input.records, columns.clone())?;
        let hint = match input.saved {
            Some(saved) => saved.check(&header, 0)?.1,
            None => wire::encode_hint(
                &header,
                &db.times_public_from(&header.seed, columns.start, input.progress),
            ),
        };
        let saved = Saved {
            hint,
            extra: Vec::new(),
        };
        let first_column = columns.start;
        Ok((
            SimplePirServer {
                header,
                db,
                first_column,
            },
            saved,
        ))
    }

    /// The database shape.
    pub fn params(&self) -> &Params {
        &self.header.params
    }

    /// The hint header (a client compares its `version` with its cached hint's).
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// Bytes the packed database occupies in memory.
    pub fn memory_bytes(&self) -> usize {
        self.db.memory_bytes()
    }

    /// Answers one query message.
    pub fn answer(&self, query: &[u8]) -> Result<Vec<u8>, Error> {
        let c = wire::decode_query(query, &self.header.params, &self.header.version)?;
        let answer = self.db.times_vectors(&[&c[self.first_column..]]);
        Ok(wire::encode_answer(Scheme::SimplePir, &answer))
    }

    /// Answers many queries in one pass over the database per group of
    /// `pir_kernels::matvec::MAX_BATCH`; malformed queries get their own error.
    pub fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        let decoded: Vec<Result<Vec<u32>, Error>> = queries
            .iter()
            .map(|q| wire::decode_query(q, &self.header.params, &self.header.version))
            .collect();
        let first = self.first_column;
        let vectors: Vec<&[u32]> = decoded.iter().flatten().map(|c| &c[first..]).collect();
        let products = self.db.times_vectors(&vectors);
        let k = vectors.len();
        let rows = self.db.rows();
        let mut next = 0;
        decoded
            .into_iter()
            .map(|query| {
                query.map(|_| {
                    let answer: Vec<u32> = (0..rows).map(|i| products[i * k + next]).collect();
                    next += 1;
                    wire::encode_answer(Scheme::SimplePir, &answer)
                })
            })
            .collect()
    }
}

/// Lays the records out as the packed database matrix.
pub(crate) fn pack_database(params: &Params, records: &[u8]) -> Result<ZpMatrix, Error> {
    pack_columns(params, records, 0..params.columns())
}

/// Bits of the record bit string one column of the matrix holds: a column is a run of
/// consecutive records (or record groups), so a range of columns is a range of records.
pub fn column_bits(params: &Params) -> u64 {
    let entries = params.entries_per_record();
    let per_column = (params.rows() / entries) as u64;
    let record_bits = u64::from(params.record_bits);
    if entries == 1 {
        per_column * params.records_per_entry() * record_bits
    } else {
        per_column * record_bits
    }
}

/// The bytes of the record bit string that `columns` hold (cut at the end of the records):
/// what a shard of those columns keeps. An error if a column does not start on a byte.
pub fn column_bytes(
    params: &Params,
    columns: std::ops::Range<usize>,
) -> Result<std::ops::Range<u64>, Error> {
    let stride = column_bits(params);
    let total = params.database_bytes();
    if columns == (0..params.columns()) {
        // The whole matrix is the whole bit string, whatever the column's width.
        return Ok(0..total);
    }
    if !stride.is_multiple_of(8) || columns.start > columns.end || columns.end > params.columns() {
        return Err(Error::InvalidParameter(format!(
            "columns {columns:?} of {} cannot be a shard (column of {stride} bits)",
            params.columns()
        )));
    }
    let start = (columns.start as u64 * stride / 8).min(total);
    let end = (columns.end as u64 * stride / 8).min(total);
    Ok(start..end)
}

/// Lays out `columns` of the packed database matrix from `part`, the bytes of the record bit
/// string they hold ([`column_bytes`]).
fn pack_columns(
    params: &Params,
    part: &[u8],
    columns: std::ops::Range<usize>,
) -> Result<ZpMatrix, Error> {
    let range = column_bytes(params, columns.clone())?;
    if part.len() as u64 != range.end - range.start {
        return Err(Error::InvalidParameter(format!(
            "the database part holds {} bytes, the parameters say {}",
            part.len(),
            range.end - range.start
        )));
    }
    let offset = range.start * 8;
    let records = part;
    let packing = Packing::new(params.entry_bits())
        .ok_or_else(|| Error::InvalidParameter("plaintext modulus out of range".into()))?;
    // `Params::entry_span` for every entry, with the per-row part computed once per tile
    // row and the per-column step added (no divisions per entry), a tile's rows read column
    // by column: consecutive rows of a column are consecutive records, so the records are
    // read nearly in order (packing is on every server start; 1 GiB row by row took 26 s).
    let entries = params.entries_per_record();
    let record_bits = u64::from(params.record_bits);
    let total = params.records * record_bits;
    let b = u64::from(params.entry_bits());
    let (first_column, columns) = (columns.start, columns.len());
    let stride = column_bits(params);
    let matrix = ZpMatrix::from_tiles(
        params.rows(),
        columns,
        packing,
        params.center(),
        |first, values| {
            let count = values.len() / columns;
            let spans: Vec<(u64, u64)> = (first..first + count)
                .map(|row| {
                    if entries == 1 {
                        let bits = params.records_per_entry() * record_bits;
                        (row as u64 * bits, bits)
                    } else {
                        let piece = (row % entries) as u64 * b;
                        (
                            (row / entries) as u64 * record_bits + piece,
                            b.min(record_bits - piece),
                        )
                    }
                })
                .collect();
            for column in 0..columns {
                let step = (first_column + column) as u64 * stride;
                for (r, &(base, len)) in spans.iter().enumerate() {
                    let start = base + step;
                    values[r * columns + column] = if start >= total {
                        0
                    } else {
                        let len = len.min(total - start) as u32;
                        records::read_bits(records, start - offset, len)
                    };
                }
            }
        },
    );
    Ok(matrix)
}

/// SimplePIR's query for the column of record `index` (DoublePIR's first layer): where the
/// record lies, a fresh secret `s`, and `c = A s + e + Δ u_column` for the `A` of the header's
/// first seed.
pub(crate) fn column_query(
    header: &HintHeader,
    index: u64,
    rng: &mut impl CryptoRng,
) -> Result<(Location, Vec<u32>, Vec<u32>), Error> {
    let params = &header.params;
    let location = params.locate(index)?;
    let (secret, c) = lwe::encrypt_unit(
        &header.seed,
        params.columns(),
        location.column,
        params.delta(),
        ErrorSampler::shared(),
        rng,
    );
    Ok((location, secret, c))
}

/// A SimplePIR client: the hint and the seed of `A`.
#[derive(Debug)]
pub struct SimplePirClient {
    header: HintHeader,
    hint: Vec<u32>,
}

/// What the client keeps between a query and its answer. Holds the LWE secret: never send it.
pub struct SimpleQueryState {
    location: Location,
    secret: Vec<u32>,
}

crate::single::redacted_debug!(SimpleQueryState);

impl SimplePirClient {
    /// Parses a full hint message (header and matrix).
    pub fn new(hint: &[u8]) -> Result<SimplePirClient, Error> {
        let (header, hint) = wire::decode_full_hint(hint, Scheme::SimplePir)?;
        Ok(SimplePirClient { header, hint })
    }

    /// A query for record `index`: the message for the server and the state for [`Self::decode`].
    pub fn query(
        &self,
        index: u64,
        rng: &mut impl CryptoRng,
    ) -> Result<(SimpleQueryState, Vec<u8>), Error> {
        let (location, secret, c) = column_query(&self.header, index, rng)?;
        let bytes = wire::encode_query(Scheme::SimplePir, &self.header.version, &[&c]);
        Ok((SimpleQueryState { location, secret }, bytes))
    }

    /// Decodes the server's answer into the record (`ceil(bits / 8)` bytes, bits LSB first).
    pub fn decode(&self, state: &SimpleQueryState, answer: &[u8]) -> Result<Vec<u8>, Error> {
        let params = &self.header.params;
        let answer = wire::decode_answer(answer, params)?;
        let loc = &state.location;
        let entries: Vec<u32> = (loc.row..loc.row + loc.entries)
            .map(|row| {
                let hint_row = &self.hint[row * LWE_N..(row + 1) * LWE_N];
                let noisy = answer[row].wrapping_sub(prg::dot(hint_row, &state.secret));
                lwe::round_entry(noisy, params.p)
            })
            .collect();
        records::assemble(params, loc, &entries)
    }
}

crate::single::single_server!(SimplePirServer);
crate::single::single_client!(SimplePirClient, SimpleQueryState);
