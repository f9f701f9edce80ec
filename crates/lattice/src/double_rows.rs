//! A DoublePIR shard's records: a range of the matrix's *rows*, which is what DoublePIR's
//! answer is additive over.
//!
//! A column of the `ℓ × m` matrix is a run of consecutive records ([`column_bits`]); row `r`
//! of every column is the same slice of that column's bits (a group of small records, or one
//! piece of a long record), so rows `r0..r1` are one contiguous bit range of each column: a
//! strided set of records, not a record range. A shard of those rows keeps, for every column,
//! the whole bytes that range touches ([`row_slice`]), back to back ([`row_part`]); the part of
//! all rows is the records themselves. Where a row boundary falls inside a byte (a long record
//! cut between two of its pieces of a width that is not a whole number of bytes), the byte
//! is kept by both shards: a shard holds its rows and at most a byte on each side of them
//! per column, never more.
//!
//! Why the parts add up: `a1 = D'c1` row by row (row `i` of `a1` from row `i` of `D`), `H1 =
//! D'A1` row by row, and the second layer sums over rows: `Y'A2 = Σ_i Y'_i A2_i`, `M'c2 =
//! Σ_i M'_i c2_i`, `Y'c2 = Σ_i Y'_i c2_i`, the hint `H2 = M'A2 = Σ_i M'_i A2_i` (`Y_i`, `M_i`
//! the digit columns of row `i`; the centering is a sum over the same rows). So shard `k`'s
//! answer and hint over its rows, summed over shards mod `q`, are the whole server's, word
//! for word.

use std::ops::Range;

use pir_core::Error;
use pir_kernels::matvec::Packing;

use crate::lwe::ZpMatrix;
use crate::params::Params;
use crate::records;
use crate::simple::column_bits;

/// Bits of row `row` within each column: `(offset from the column's first bit, length)`.
fn row_span(params: &Params, row: usize) -> (u64, u64) {
    let record_bits = u64::from(params.record_bits);
    let entries = params.entries_per_record();
    if entries == 1 {
        let bits = params.records_per_entry() * record_bits;
        (row as u64 * bits, bits)
    } else {
        let b = u64::from(params.entry_bits());
        let piece = (row % entries) as u64 * b;
        (
            (row / entries) as u64 * record_bits + piece,
            b.min(record_bits - piece),
        )
    }
}

/// The bytes of each column's bit string that matrix rows `rows` touch: `(first byte from the
/// column's first byte, bytes)`. An error if `rows` is empty or past `ℓ`, or a column does not
/// start on a byte.
pub fn row_slice(params: &Params, rows: &Range<usize>) -> Result<(u64, u64), Error> {
    let stride = column_bits(params);
    if rows.start >= rows.end || rows.end > params.rows() || !stride.is_multiple_of(8) {
        return Err(Error::InvalidParameter(format!(
            "rows {rows:?} of {} cannot be a shard (column of {stride} bits)",
            params.rows()
        )));
    }
    let (first, _) = row_span(params, rows.start);
    let (last, len) = row_span(params, rows.end - 1);
    let (lo, hi) = (first / 8, (last + len).div_ceil(8));
    Ok((lo, hi - lo))
}

/// Shard `rows`'s part of `records` (the whole bit string, `params.database_bytes()` bytes):
/// per column the bytes of [`row_slice`], back to back, zero past the last record. For all
/// rows, the records themselves.
pub fn row_part(params: &Params, records: &[u8], rows: &Range<usize>) -> Result<Vec<u8>, Error> {
    if records.len() as u64 != params.database_bytes() {
        return Err(Error::InvalidParameter(format!(
            "{} bytes of records, the parameters say {}",
            records.len(),
            params.database_bytes()
        )));
    }
    if *rows == (0..params.rows()) {
        return Ok(records.to_vec());
    }
    let (lo, len) = row_slice(params, rows)?;
    let stride = column_bits(params) / 8;
    let (len, lo) = (len as usize, lo as usize);
    let mut part = vec![0u8; params.columns() * len];
    for (column, out) in part.chunks_exact_mut(len.max(1)).enumerate() {
        let from = (column as u64 * stride) as usize + lo;
        let have = records.len().saturating_sub(from).min(len);
        if have > 0 {
            out[..have].copy_from_slice(&records[from..from + have]);
        }
    }
    Ok(part)
}

/// Bytes of shard `rows`'s part ([`row_part`]).
pub fn row_part_bytes(params: &Params, rows: &Range<usize>) -> Result<u64, Error> {
    if *rows == (0..params.rows()) {
        return Ok(params.database_bytes());
    }
    let (_, len) = row_slice(params, rows)?;
    Ok(params.columns() as u64 * len)
}

/// Rows `rows` of the packed database matrix (`rows.len() × m`), from `part` ([`row_part`]).
pub(crate) fn pack_rows(
    params: &Params,
    part: &[u8],
    rows: &Range<usize>,
) -> Result<ZpMatrix, Error> {
    if *rows == (0..params.rows()) {
        return crate::simple::pack_database(params, part);
    }
    if part.len() as u64 != row_part_bytes(params, rows)? {
        return Err(Error::InvalidParameter(format!(
            "the database part holds {} bytes, the parameters say {}",
            part.len(),
            row_part_bytes(params, rows)?
        )));
    }
    let (lo, len) = row_slice(params, rows)?;
    let packing = Packing::new(params.entry_bits())
        .ok_or_else(|| Error::InvalidParameter("plaintext modulus out of range".into()))?;
    let total = params.records * u64::from(params.record_bits);
    let stride = column_bits(params);
    let columns = params.columns();
    let first_row = rows.start;
    // As `simple::pack_columns`: the per-row spans once per tile, then column by column, so
    // that the part is read nearly in order.
    Ok(ZpMatrix::from_tiles(
        rows.len(),
        columns,
        packing,
        params.center(),
        |first, values| {
            let count = values.len() / columns;
            let spans: Vec<(u64, u64)> = (first..first + count)
                .map(|r| row_span(params, first_row + r))
                .collect();
            for column in 0..columns {
                let whole = column as u64 * stride;
                let here = column as u64 * len * 8;
                for (r, &(offset, bits)) in spans.iter().enumerate() {
                    let start = whole + offset;
                    values[r * columns + column] = if start >= total {
                        0
                    } else {
                        let bits = bits.min(total - start) as u32;
                        records::read_bits(part, here + offset - lo * 8, bits)
                    };
                }
            }
        },
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::params::Scheme;

    /// Every entry of a row shard's matrix is the whole matrix's entry of that row.
    #[test]
    fn row_parts_hold_the_entries_of_their_rows() {
        for (records, bits) in [
            (5000u64, 8u32),
            (700, 72),
            (333, 40),
            (90, 200),
            (20000, 16),
        ] {
            let params = Params::new(Scheme::DoublePir, records, bits).unwrap();
            let bytes: Vec<u8> = (0..params.database_bytes())
                .map(|i| (i * 131 + 7) as u8)
                .collect();
            let whole = pack_rows(&params, &bytes, &(0..params.rows())).unwrap();
            let rows = params.rows();
            for range in [0..1, 0..rows, rows / 3..rows, rows / 2..rows / 2 + 1] {
                if range.is_empty() {
                    continue;
                }
                let part = row_part(&params, &bytes, &range).unwrap();
                assert_eq!(part.len() as u64, row_part_bytes(&params, &range).unwrap());
                let shard = pack_rows(&params, &part, &range).unwrap();
                let mut a = vec![0u32; shard.vector_len()];
                let mut b = vec![0u32; whole.vector_len()];
                for (i, row) in range.clone().enumerate() {
                    shard.row_values(i, &mut a);
                    whole.row_values(row, &mut b);
                    assert_eq!(
                        a[..params.columns()],
                        b[..params.columns()],
                        "{records}x{bits} row {row} of {range:?}"
                    );
                }
            }
        }
    }

    /// Row shards' hints and answers, summed mod `q`, are the whole server's word for word,
    /// and the client decodes the record from the sum.
    #[test]
    fn row_shards_add_up_to_the_whole_server() {
        use rand::SeedableRng;

        use crate::single::BuildInput;
        use crate::wire;
        use crate::{DoublePirClient, DoublePirServer};

        let (records, bits) = (3000u64, 24u32);
        let params = Params::new(Scheme::DoublePir, records, bits).unwrap();
        let bytes: Vec<u8> = (0..params.database_bytes())
            .map(|i| (i * 29 + 11) as u8)
            .collect();
        fn input<'a>(
            params: Params,
            records: &'a [u8],
            progress: &'a mut dyn FnMut(u64, u64),
        ) -> BuildInput<'a> {
            BuildInput {
                params,
                records,
                seeds: [[1; 16], [2; 16]],
                version: [3; 32],
                saved: None,
                progress,
            }
        }
        let (whole, saved) = DoublePirServer::build(input(params, &bytes, &mut |_, _| {})).unwrap();
        let rows = params.rows();
        let mut cuts = vec![0, 1, rows / 2, rows];
        cuts.dedup();
        let mut shards = Vec::new();
        let mut hint_sum: Option<Vec<u32>> = None;
        for pair in cuts.windows(2) {
            let range = pair[0]..pair[1];
            let part = row_part(&params, &bytes, &range).unwrap();
            let (shard, offline) =
                DoublePirServer::build_rows(input(params, &part, &mut |_, _| {}), range).unwrap();
            let (_, words) = wire::decode_full_hint(&offline.hint, Scheme::DoublePir).unwrap();
            hint_sum = Some(match hint_sum {
                None => words,
                Some(sum) => add(&sum, &words),
            });
            shards.push(shard);
        }
        let (header, words) = wire::decode_full_hint(&saved.hint, Scheme::DoublePir).unwrap();
        assert_eq!(hint_sum.unwrap(), words);
        let client = DoublePirClient::new(&wire::encode_hint(&header, &words)).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(4);
        for index in [0u64, 1234, records - 1] {
            let (state, query) = client.query(index, &mut rng).unwrap();
            let answer = wire::decode_answer(&whole.answer(&query).unwrap(), &params).unwrap();
            let mut sum = vec![0u32; answer.len()];
            for shard in &shards {
                let part = wire::decode_answer(&shard.answer(&query).unwrap(), &params).unwrap();
                sum = add(&sum, &part);
            }
            assert_eq!(sum, answer, "record {index}");
            let record = client
                .decode(&state, &wire::encode_answer(Scheme::DoublePir, &sum))
                .unwrap();
            let at = (index * u64::from(bits) / 8) as usize;
            assert_eq!(record, &bytes[at..at + 3]);
        }
    }

    fn add(a: &[u32], b: &[u32]) -> Vec<u32> {
        a.iter().zip(b).map(|(x, y)| x.wrapping_add(*y)).collect()
    }
}
