//! SinglePass's server side over a database of `B` records of `b` bytes, stored back to back in
//! one `&[u8]` (`B b` bytes; a [`pir_core::Database`] whose block size is `b` passes its
//! `bytes()`): the offline server's hints ([`hints`]), the answer both servers give a lookup
//! ([`answer`]), and the changes a server publishes when records change ([`changes`]).
//!
//! Work per request never depends on the index asked for: a hint request is one pass over every
//! record, a lookup reads exactly `Q` records (one per row; the zero cells past `B` in the last
//! row are written without a read).

use pir_core::Error;
use rayon::prelude::*;

use super::perm;
use super::{xor_into, Changes, OfflineRequest, Params};

/// Rows one thread of the hint pass takes at a time.
const ROW_GROUP: usize = 8;

/// Checks that `db` is the database `params` describe.
pub fn check_database(params: &Params, db: &[u8]) -> Result<(), Error> {
    if db.len() != params.database_bytes() {
        return Err(Error::DatabaseMismatch(format!(
            "SinglePass parameters for {} records of {} bytes ({} bytes), a database of {} bytes",
            params.records(),
            params.record_bytes(),
            params.database_bytes(),
            db.len()
        )));
    }
    Ok(())
}

/// The `m` hints of `request`'s permutations, `b` bytes each, in column order: hint `c` is the
/// XOR of the record each row's permutation puts in column `c`. One pass over the records in
/// storage order (each read once); runs on the caller's rayon pool, each thread over its own
/// rows into its own hints, XORed together at the end.
pub fn hints(params: &Params, db: &[u8], request: &OfflineRequest) -> Result<Vec<u8>, Error> {
    check_database(params, db)?;
    let (b, m) = (params.record_bytes(), params.columns());
    let row_bytes = m * b;
    let groups: Vec<usize> = (0..params.rows()).step_by(ROW_GROUP).collect();
    let hints = groups
        .into_par_iter()
        .fold(
            || (vec![0u8; params.hint_bytes()], vec![0u16; m]),
            |(mut hints, mut columns), first| {
                for row in first..(first + ROW_GROUP).min(params.rows()) {
                    perm::shuffle_row(&request.master, row, &mut columns);
                    // The last row may end early: its remaining cells are zero records.
                    let start = (row * row_bytes).min(db.len());
                    let end = (start + row_bytes).min(db.len());
                    for (record, &c) in db[start..end].chunks_exact(b).zip(&columns) {
                        let c = usize::from(c);
                        xor_into(&mut hints[c * b..(c + 1) * b], record);
                    }
                }
                (hints, columns)
            },
        )
        .map(|(hints, _)| hints)
        .reduce(
            || vec![0u8; params.hint_bytes()],
            |mut a, b| {
                pir_kernels::xor_into(&mut a, &b);
                a
            },
        );
    Ok(hints)
}

/// One server's answer to a lookup: the record at `offsets[i]` of every row `i`, `Q b` bytes in
/// row order. The online server answers lookups with it, the offline server refreshes. Errors
/// if an offset is not below `m` or the count is not `Q` (a caller's bug: [`super::wire`]
/// checks untrusted bodies before this).
pub fn answer(params: &Params, db: &[u8], offsets: &[u16]) -> Result<Vec<u8>, Error> {
    check_database(params, db)?;
    if offsets.len() != params.rows() {
        return Err(Error::WrongLength(format!(
            "{} offsets for {} rows",
            offsets.len(),
            params.rows()
        )));
    }
    let (b, m) = (params.record_bytes(), params.columns());
    if let Some(&bad) = offsets.iter().find(|&&o| usize::from(o) >= m) {
        return Err(Error::OutOfRange {
            field: "offset",
            found: u64::from(bad),
            limit: m as u64,
        });
    }
    let mut out = vec![0u8; params.answer_bytes()];
    for ((row, &offset), slot) in offsets.iter().enumerate().zip(out.chunks_exact_mut(b)) {
        let at = (row * m + usize::from(offset)) * b;
        // Cells past B (in the last row only) are zero records: `out` is already zero there.
        if let Some(record) = db.get(at..at + b) {
            slot.copy_from_slice(record);
        }
    }
    Ok(out)
}

/// The changes between two versions of a database of `params`' shape: `(index, old xor new)`
/// for every record that differs, in index order.
pub fn changes(params: &Params, old: &[u8], new: &[u8]) -> Result<Changes, Error> {
    check_database(params, old)?;
    check_database(params, new)?;
    let b = params.record_bytes();
    let mut out = Changes::new(b);
    for (index, (o, n)) in old.chunks_exact(b).zip(new.chunks_exact(b)).enumerate() {
        if o != n {
            out.push(index as u64, o, n)?;
        }
    }
    Ok(out)
}
