//! Where a database is cut into shards: record ranges (XOR schemes), whole matrix columns
//! (SimplePIR), matrix rows (DoublePIR).

use std::ops::Range;

use pir_lattice::Params;

use super::ShardError;

/// Splits rows `0..rows` into `shards` consecutive ranges of whole `unit`s of rows (the last
/// range takes what is left), as even as possible; an error if there are fewer units than
/// shards (a shard would be empty).
pub fn split_rows(rows: u64, shards: usize, unit: u64) -> Result<Vec<Range<u64>>, ShardError> {
    let units = rows.div_ceil(unit.max(1));
    if shards == 0 || units < shards as u64 {
        return Err(ShardError::Combine(format!(
            "{rows} rows in units of {unit} cannot make {shards} non-empty shards"
        )));
    }
    let (base, extra) = (units / shards as u64, units % shards as u64);
    let mut first = 0u64;
    Ok((0..shards as u64)
        .map(|k| {
            let take = (base + u64::from(k < extra)) * unit.max(1);
            let range = first..(first + take).min(rows);
            first = range.end;
            range
        })
        .collect())
}

/// Records per column of a SimplePIR matrix: shards split on multiples of it.
pub fn simple_pir_unit(params: &Params) -> u64 {
    pir_lattice::simple::column_bits(params) / u64::from(params.record_bits.max(1))
}

/// The matrix columns that hold records `rows` of a SimplePIR database; an error if `rows`
/// do not start on a column (the last shard may end anywhere at the last record).
pub fn simple_pir_columns(params: &Params, rows: &Range<u64>) -> Result<Range<usize>, ShardError> {
    let unit = simple_pir_unit(params).max(1);
    if !rows.start.is_multiple_of(unit)
        || (!rows.end.is_multiple_of(unit) && rows.end != params.records)
    {
        return Err(ShardError::Combine(format!(
            "rows {rows:?} do not fall on whole matrix columns of {unit} records"
        )));
    }
    let columns = params.columns() as u64;
    Ok(rows.start.div_ceil(unit).min(columns) as usize
        ..rows.end.div_ceil(unit).min(columns) as usize)
}

/// Matrix rows per unit of a DoublePIR row split for `shards` shards: a record's group of
/// rows (so that boundaries fall between records) where there are at least `shards` groups
/// per column, else single rows (a long record's pieces may then go to two shards; its
/// answer still adds up, row by row).
pub fn double_pir_unit(params: &Params, shards: usize) -> u64 {
    let entries = params.entries_per_record().max(1);
    if params.rows() / entries >= shards {
        entries as u64
    } else {
        1
    }
}

/// The matrix rows a DoublePIR shard map entry names (a DoublePIR map's rows are the
/// matrix's rows, `ℓ` in all); an error if they lie past `ℓ` or are empty.
pub fn double_pir_rows(params: &Params, rows: &Range<u64>) -> Result<Range<usize>, ShardError> {
    if rows.start >= rows.end || rows.end > params.rows() as u64 {
        return Err(ShardError::Combine(format!(
            "rows {rows:?} are not a shard of a DoublePIR matrix of {} rows",
            params.rows()
        )));
    }
    Ok(rows.start as usize..rows.end as usize)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ranges_cover_the_rows_in_whole_units() {
        let ranges = split_rows(103, 4, 10).unwrap();
        assert_eq!(ranges, vec![0..30, 30..60, 60..90, 90..103]);
        assert_eq!(split_rows(7, 3, 1).unwrap(), vec![0..3, 3..5, 5..7]);
        assert!(split_rows(10, 3, 5).is_err());
        assert!(split_rows(10, 0, 1).is_err());
    }
}
