//! Checklist's two server roles over one [`Database`]: the offline server's hints and refresh
//! answers, and the online server's punctured answers (both are [`answer`]).
//!
//! Work per request never depends on the index asked for: a punctured key always expands to
//! `s - 1` elements, and the hint computation is fixed by `m` and `s`.

use pir_core::{Database, Error};
use rayon::prelude::*;

use super::pset::{Ggm, PuncturedKey, Scratch};
use super::{initial_set, OfflineRequest, Params};

/// Checks that `db` is the database `params` describe.
pub fn check_database(params: &Params, db: &Database) -> Result<(), Error> {
    let shape = db.shape();
    if shape.block_count() as u64 != params.records() || shape.block_size() < params.record_bytes()
    {
        return Err(Error::DatabaseMismatch(format!(
            "Checklist parameters for {} records of {} bytes, database of {} blocks of {} bytes",
            params.records(),
            params.record_bytes(),
            shape.block_count(),
            shape.block_size()
        )));
    }
    Ok(())
}

/// XORs the first `b` bytes of the records at `indices` into `out`.
fn xor_records(db: &Database, b: usize, indices: &[u64], out: &mut [u8]) {
    // Indices come from a validated set shape: below B = block_count.
    pir_kernels::xor_gather(db.bytes(), db.shape().block_size(), indices, &mut out[..b]);
}

/// The parities of sets `range` of the client's master seed, `b` bytes each, in order (the
/// offline phase; a client fetches its `m` hints in one or several ranges). Runs on the
/// caller's rayon pool.
pub fn hints(
    params: &Params,
    db: &Database,
    request: &OfflineRequest,
    range: std::ops::Range<usize>,
) -> Result<Vec<u8>, Error> {
    check_database(params, db)?;
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
    // Sets in groups so that each thread reuses its buffers across many sets.
    const GROUP: usize = 64;
    out.par_chunks_mut(GROUP * b)
        .enumerate()
        .for_each(|(group, parities)| {
            let mut scratch = Scratch::default();
            let mut elements = Vec::with_capacity(params.sets().size());
            for (k, parity) in parities.chunks_exact_mut(b).enumerate() {
                let h = range.start + group * GROUP + k;
                let key = initial_set(params, &request.master, h);
                params
                    .sets()
                    .elements(&ggm, &key, &mut scratch, &mut elements);
                xor_records(db, b, &elements, parity);
            }
        });
    Ok(out)
}

/// One server's answer to a punctured key: the XOR of the `s - 1` records it names. The online
/// server answers lookups with it and the offline server answers refreshes with it.
pub fn answer(params: &Params, db: &Database, key: &PuncturedKey) -> Result<Vec<u8>, Error> {
    check_database(params, db)?;
    let mut scratch = Scratch::default();
    let mut elements = Vec::with_capacity(params.sets().size());
    answer_with(params, db, key, &Ggm::new(), &mut scratch, &mut elements)
}

/// [`answer`] with the caller's expander and buffers (a server answering many keys).
pub fn answer_with(
    params: &Params,
    db: &Database,
    key: &PuncturedKey,
    ggm: &Ggm,
    scratch: &mut Scratch,
    elements: &mut Vec<u64>,
) -> Result<Vec<u8>, Error> {
    check_database(params, db)?;
    params
        .sets()
        .punctured_elements(ggm, key, scratch, elements);
    let mut out = vec![0u8; params.record_bytes()];
    xor_records(db, params.record_bytes(), elements, &mut out);
    Ok(out)
}
