//! A shard's part of the answers of the schemes whose queries are sets of rows of the whole
//! database (Checklist, SinglePass, DPF): the shard holds rows `first..first + n` of a
//! database of `B` records of `b` bytes ([`HeldRows`]), expands every query over the whole
//! database exactly as a whole server does, and XORs only the selected rows it holds. Every
//! answer of these schemes is the XOR of the rows a set selects (a SinglePass answer is one
//! such XOR per grid row, a hint range one per hint), so the XOR of every shard's answer to
//! the same query is the whole server's answer, byte for byte.
//!
//! Work per shard: the whole set's expansion (`s` AES blocks for a Checklist set, the row
//! permutations for SinglePass hints, the whole DPF evaluation) and the reads of its own rows
//! only; a shard holding none of the rows answers zeros after the same expansion. Nothing
//! here depends on the index asked for beyond what the whole server's work does.

use pir_core::{DbShape, Error};
use rayon::prelude::*;

use crate::checklist::pset::{Ggm, PuncturedKey, Scratch};
use crate::checklist::{self, initial_set};
use crate::offline::OfflineRequest;
use crate::singlepass::{self, perm};
use crate::{DpfAnswer, DpfPir, DpfQuery};

/// The rows of a larger database one shard holds: `bytes` is rows `first..first + n` of
/// `record_bytes` bytes each, back to back (`n` may be 0: a shard with none of these rows).
#[derive(Debug, Clone, Copy)]
pub struct HeldRows<'a> {
    /// The rows held, `n * record_bytes` bytes.
    pub bytes: &'a [u8],
    /// `b`.
    pub record_bytes: usize,
    /// The first row held, in the whole database.
    pub first: u64,
}

impl HeldRows<'_> {
    /// `n`, the rows held.
    pub fn count(&self) -> u64 {
        (self.bytes.len() / self.record_bytes.max(1)) as u64
    }

    /// Checks that the rows fit a database of `records` records of `record_bytes` bytes.
    pub fn check(&self, records: u64, record_bytes: usize) -> Result<(), Error> {
        if self.record_bytes != record_bytes
            || record_bytes == 0
            || !self.bytes.len().is_multiple_of(record_bytes)
            || self
                .first
                .checked_add(self.count())
                .is_none_or(|end| end > records)
        {
            return Err(Error::DatabaseMismatch(format!(
                "{} bytes of {}-byte rows from row {} do not fit {records} records of \
                 {record_bytes} bytes",
                self.bytes.len(),
                self.record_bytes,
                self.first
            )));
        }
        Ok(())
    }

    /// The local position of whole row `row`, if held.
    fn local(&self, row: u64) -> Option<u64> {
        row.checked_sub(self.first).filter(|&l| l < self.count())
    }

    /// XORs the held rows among `rows` (whole-database indices) into `out` (`b` bytes).
    fn xor_rows(&self, rows: &[u64], local: &mut Vec<u64>, out: &mut [u8]) {
        local.clear();
        local.extend(rows.iter().filter_map(|&row| self.local(row)));
        // Local positions are below n, the rows `bytes` holds.
        pir_kernels::xor_gather(self.bytes, self.record_bytes, local, out);
    }
}

/// This shard's part of the answer to a Checklist punctured set (a lookup or a refresh):
/// the XOR of the set's elements it holds.
pub fn checklist_answer(
    params: &checklist::Params,
    rows: HeldRows<'_>,
    key: &PuncturedKey,
) -> Result<Vec<u8>, Error> {
    rows.check(params.records(), params.record_bytes())?;
    let (mut scratch, mut elements, mut local) = (Scratch::default(), Vec::new(), Vec::new());
    params
        .sets()
        .punctured_elements(&Ggm::new(), key, &mut scratch, &mut elements);
    let mut out = vec![0u8; params.record_bytes()];
    rows.xor_rows(&elements, &mut local, &mut out);
    Ok(out)
}

/// This shard's part of Checklist hints `range` of `request`: each hint's parity over the
/// set's elements it holds.
pub fn checklist_hints(
    params: &checklist::Params,
    rows: HeldRows<'_>,
    request: &OfflineRequest,
    range: std::ops::Range<usize>,
) -> Result<Vec<u8>, Error> {
    rows.check(params.records(), params.record_bytes())?;
    if range.start > range.end || range.end > params.hints() {
        return Err(Error::OutOfRange {
            field: "hint range end",
            found: range.end as u64,
            limit: params.hints() as u64,
        });
    }
    let b = params.record_bytes();
    let mut out = vec![0u8; range.len() * b];
    let ggm = Ggm::new();
    // Sets in groups, as the whole server makes them, so each thread reuses its buffers.
    const GROUP: usize = 64;
    out.par_chunks_mut(GROUP * b)
        .enumerate()
        .for_each(|(group, parities)| {
            let (mut scratch, mut elements, mut local) =
                (Scratch::default(), Vec::new(), Vec::new());
            for (k, parity) in parities.chunks_exact_mut(b).enumerate() {
                let key = initial_set(params, &request.master, range.start + group * GROUP + k);
                params
                    .sets()
                    .elements(&ggm, &key, &mut scratch, &mut elements);
                rows.xor_rows(&elements, &mut local, parity);
            }
        });
    Ok(out)
}

/// The held rows of grid row `row` of a SinglePass layout with `m` columns: the whole grid
/// row's first record and this shard's records of it, as (first column, bytes).
fn grid_row<'a>(rows: &HeldRows<'a>, row: usize, m: usize) -> Option<(usize, &'a [u8])> {
    let b = rows.record_bytes;
    let start = (row as u64) * m as u64;
    let end = start + m as u64;
    let from = start.max(rows.first);
    let to = end.min(rows.first + rows.count());
    (from < to).then(|| {
        // from - first < n and to - first <= n: positions inside `bytes`.
        let (l0, l1) = ((from - rows.first) as usize, (to - rows.first) as usize);
        ((from - start) as usize, &rows.bytes[l0 * b..l1 * b])
    })
}

/// This shard's part of a SinglePass lookup (one offset per grid row): per row, the record at
/// that offset if held, zeros otherwise.
pub fn singlepass_answer(
    params: &singlepass::Params,
    rows: HeldRows<'_>,
    offsets: &[u16],
) -> Result<Vec<u8>, Error> {
    rows.check(params.records(), params.record_bytes())?;
    let (b, m) = (params.record_bytes(), params.columns());
    if offsets.len() != params.rows() {
        return Err(Error::WrongLength(format!(
            "{} offsets for {} rows",
            offsets.len(),
            params.rows()
        )));
    }
    if let Some(&bad) = offsets.iter().find(|&&o| usize::from(o) >= m) {
        return Err(Error::OutOfRange {
            field: "offset",
            found: u64::from(bad),
            limit: m as u64,
        });
    }
    let mut out = vec![0u8; params.answer_bytes()];
    for ((row, &offset), slot) in offsets.iter().enumerate().zip(out.chunks_exact_mut(b)) {
        let at = (row as u64) * m as u64 + u64::from(offset);
        if let Some(l) = rows.local(at) {
            // l < n: a record of `bytes`.
            let l = l as usize;
            slot.copy_from_slice(&rows.bytes[l * b..(l + 1) * b]);
        }
    }
    Ok(out)
}

/// This shard's part of a SinglePass hint request: hint `c` is the XOR of the held records
/// that each grid row's permutation puts in column `c`.
pub fn singlepass_hints(
    params: &singlepass::Params,
    rows: HeldRows<'_>,
    request: &OfflineRequest,
) -> Result<Vec<u8>, Error> {
    rows.check(params.records(), params.record_bytes())?;
    let (b, m) = (params.record_bytes(), params.columns());
    let mut hints = vec![0u8; params.hint_bytes()];
    let mut columns = vec![0u16; m];
    for row in 0..params.rows() {
        let Some((from, held)) = grid_row(&rows, row, m) else {
            continue;
        };
        perm::shuffle_row(&request.master, row, &mut columns);
        for (record, &c) in held.chunks_exact(b).zip(&columns[from..]) {
            let c = usize::from(c);
            pir_kernels::xor_into(&mut hints[c * b..(c + 1) * b], record);
        }
    }
    Ok(hints)
}

/// This shard's part of a DPF answer over a database of shape `whole`: the key evaluated over
/// every row, as a whole server does, and the selected rows it holds XORed, encoded as a
/// whole server encodes its answer.
pub fn dpf_answer(whole: DbShape, rows: HeldRows<'_>, query: &DpfQuery) -> Result<Vec<u8>, Error> {
    use pir_core::MultiServerScheme;
    let b = whole.block_size();
    rows.check(whole.block_count() as u64, b)?;
    let dpf = DpfPir::new(whole);
    let bits = dpf.selection(query)?;
    let mut block = vec![0u8; b];
    let first = rows.first as usize;
    let held: Vec<u64> = (0..rows.count() as usize)
        .filter(|&l| bits.get(first + l))
        .map(|l| l as u64)
        .collect();
    pir_kernels::xor_gather(rows.bytes, b, &held, &mut block);
    Ok(dpf.encode_answer(&DpfAnswer::new(block)))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pir_core::{Database, MultiServerScheme};
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// Every split of 0..records into held parts, XORed, gives the whole answer.
    fn parts(records: usize, rng: &mut ChaCha20Rng) -> Vec<std::ops::Range<usize>> {
        let mut cuts: Vec<usize> = (0..rng.random_range(0..4))
            .map(|_| rng.random_range(0..=records))
            .collect();
        cuts.sort_unstable();
        let mut first = 0;
        cuts.into_iter()
            .chain([records])
            .map(|cut| {
                let range = first..cut;
                first = cut;
                range
            })
            .collect()
    }

    fn xor_of(
        db: &[u8],
        ranges: &[std::ops::Range<usize>],
        f: impl Fn(HeldRows<'_>) -> Vec<u8>,
    ) -> Vec<u8> {
        let mut out: Option<Vec<u8>> = None;
        for range in ranges {
            let part = f(HeldRows {
                bytes: &db[range.start * 32..range.end * 32],
                record_bytes: 32,
                first: range.start as u64,
            });
            match &mut out {
                Some(acc) => pir_kernels::xor_into(acc, &part),
                None => out = Some(part),
            }
        }
        out.unwrap()
    }

    #[test]
    fn held_parts_xor_to_the_whole_answers() {
        let mut rng = ChaCha20Rng::seed_from_u64(11);
        for records in [1u64, 7, 300, 1000] {
            let shape = DbShape::new(records, 32).unwrap();
            let db = Database::random(shape, &mut rng);
            let bytes = db.bytes();
            for _ in 0..3 {
                let ranges = parts(records as usize, &mut rng);
                // Checklist.
                let params = checklist::Params::new(records, 32).unwrap();
                let request = OfflineRequest::random(&mut rng);
                let range = 0..params.hints().min(40);
                let whole =
                    checklist::server::hints(&params, &db, &request, range.clone()).unwrap();
                let sharded = xor_of(bytes, &ranges, |rows| {
                    checklist_hints(&params, rows, &request, range.clone()).unwrap()
                });
                assert_eq!(sharded, whole, "hints of {records}");
                let key = params.sets().random(&mut rng);
                let punctured = params.sets().puncture(
                    &Ggm::new(),
                    &key,
                    rng.random_range(0..params.sets().size()),
                );
                let whole = checklist::server::answer(&params, &db, &punctured).unwrap();
                let sharded = xor_of(bytes, &ranges, |rows| {
                    checklist_answer(&params, rows, &punctured).unwrap()
                });
                assert_eq!(sharded, whole, "lookup of {records}");
                // SinglePass.
                let sp = singlepass::Params::new(records, 32).unwrap();
                let whole = singlepass::server::hints(&sp, bytes, &request).unwrap();
                let sharded = xor_of(bytes, &ranges, |rows| {
                    singlepass_hints(&sp, rows, &request).unwrap()
                });
                assert_eq!(sharded, whole, "SinglePass hints of {records}");
                let offsets: Vec<u16> = (0..sp.rows())
                    .map(|_| rng.random_range(0..sp.columns()) as u16)
                    .collect();
                let whole = singlepass::server::answer(&sp, bytes, &offsets).unwrap();
                let sharded = xor_of(bytes, &ranges, |rows| {
                    singlepass_answer(&sp, rows, &offsets).unwrap()
                });
                assert_eq!(sharded, whole, "SinglePass lookup of {records}");
                // DPF.
                let dpf = DpfPir::new(shape);
                let index = rng.random_range(0..records as usize);
                let (queries, _) = dpf.query(&[index], &mut rng).unwrap();
                let whole = dpf.encode_answer(&dpf.answer(&db, &queries[0]).unwrap());
                let sharded = xor_of(bytes, &ranges, |rows| {
                    dpf_answer(shape, rows, &queries[0]).unwrap()
                });
                assert_eq!(sharded, whole, "DPF of {records}");
            }
        }
    }

    #[test]
    fn rows_outside_the_database_are_refused() {
        let params = checklist::Params::new(10, 32).unwrap();
        let rows = HeldRows {
            bytes: &[0u8; 64],
            record_bytes: 32,
            first: 9,
        };
        let request = OfflineRequest { master: [1; 16] };
        assert!(checklist_hints(&params, rows, &request, 0..1).is_err());
    }
}
