//! XOR scans: the inner loop of Chor and RAID-PIR answers.
//!
//! A database is `B` rows of `b` bytes in one region. A query selects rows with one bit each,
//! in the interleaved chunk layout of RAID-PIR: with `c` chunks, row `r` belongs to chunk
//! `r mod c` at position `r / c`, and the query carries one LSB-first bit vector per chunk
//! ([`Selection`]). Chor is the case `c = 1`. A scan XORs every selected row into the
//! accumulator of its chunk: `accs` holds `c` slots of `b` bytes, slot `j` at `j * b`.
//!
//! Two loops, both multiversioned (the same Rust compiled for the portable target, for AVX2
//! and for AVX-512, chosen by [`Backend`]):
//! - rows of 4 KiB or more: visit the set bits only and XOR whole rows (the unselected
//!   half of the rows is never read);
//! - smaller rows: branch-free, `acc ^= row & mask` for every row, because a mispredicted
//!   branch per 32-byte row would cost more than the memory it saves.

use std::ops::Range;

use crate::Backend;

/// Rows of at least this many bytes are scanned by visiting set bits only. Below it, skipping
/// rows defeats the hardware prefetcher and the scan becomes latency-bound (measured on Zen 4:
/// 0.5x the read bandwidth at 256-512 bytes, 0.8x at 1 KiB, but 1.4x at 4 KiB, where half the
/// rows are never read); the dense scan reads everything at about 1.0x.
pub const SPARSE_ROW_BYTES: usize = 4096;

/// One query's row selection: one LSB-first bit vector per chunk.
///
/// Chunk `j` holds rows `j, j + c, j + 2c, ...`; bit `k` of its vector selects row `j + k c`.
/// Missing bytes read as zero, so an empty vector selects nothing (a chunk the server does not
/// process).
#[derive(Debug, Clone, Copy)]
pub struct Selection<'a> {
    chunks: &'a [&'a [u8]],
}

impl<'a> Selection<'a> {
    /// A selection over `chunks.len()` chunks (at least one).
    pub fn new(chunks: &'a [&'a [u8]]) -> Self {
        assert!(!chunks.is_empty(), "a selection needs at least one chunk");
        Self { chunks }
    }

    /// `c`, the number of chunks.
    pub fn chunk_count(&self) -> usize {
        self.chunks.len()
    }

    /// The bit vector of chunk `j`.
    pub fn chunk(&self, j: usize) -> &'a [u8] {
        self.chunks[j]
    }

    /// Whether row `row` is selected.
    #[inline(always)]
    pub fn bit(&self, row: usize) -> bool {
        let c = self.chunks.len();
        bit_at(self.chunks[row % c], row / c)
    }
}

#[inline(always)]
pub(crate) fn bit_at(bits: &[u8], k: usize) -> bool {
    bits.get(k >> 3)
        .is_some_and(|byte| (byte >> (k & 7)) & 1 == 1)
}

/// Little-endian 64-bit word `w` of an LSB-first bit vector (zero past its end).
#[inline(always)]
pub(crate) fn word_at(bits: &[u8], w: usize) -> u64 {
    let start = w * 8;
    match bits.get(start..start + 8) {
        Some(bytes) => {
            let mut word = [0u8; 8];
            word.copy_from_slice(bytes);
            u64::from_le_bytes(word)
        }
        None => {
            let mut word = [0u8; 8];
            if let Some(tail) = bits.get(start..) {
                word[..tail.len()].copy_from_slice(tail);
            }
            u64::from_le_bytes(word)
        }
    }
}

/// `acc ^= src`, byte for byte, with the current backend. Panics if the lengths differ
/// (callers size both from the same validated block size).
pub fn xor_into(acc: &mut [u8], src: &[u8]) {
    xor_into_with(Backend::current(), acc, src);
}

multiversioned! {
    /// [`xor_into`] with a chosen backend (falls back to portable if the CPU lacks it).
    pub fn xor_into_with(acc: &mut [u8], src: &[u8]) {
        assert_eq!(acc.len(), src.len(), "xor_into: length mismatch");
        xor_in(acc, src);
    }
}

multiversioned! {
    /// `out = a ^ b` with a chosen backend. Panics if the lengths differ.
    pub fn xor3_with(out: &mut [u8], a: &[u8], b: &[u8]) {
        assert!(
            out.len() == a.len() && a.len() == b.len(),
            "xor3: length mismatch"
        );
        xor3(out, a, b);
    }
}

/// `acc ^= src` over the common length; inlined into each backend's loop.
#[inline(always)]
pub(crate) fn xor_in(acc: &mut [u8], src: &[u8]) {
    for (a, s) in acc.iter_mut().zip(src) {
        *a ^= *s;
    }
}

/// `acc ^= src & mask` (mask all zeros or all ones), in 64-bit lanes; lengths are multiples
/// of 8 here (rows are multiples of 32 bytes), any tail is handled bytewise.
#[inline(always)]
fn xor_in_masked(acc: &mut [u8], src: &[u8], mask: u64) {
    let mut acc_lanes = acc.chunks_exact_mut(8);
    let mut src_lanes = src.chunks_exact(8);
    for (a, s) in (&mut acc_lanes).zip(&mut src_lanes) {
        let x = lane(a, 0) ^ (lane(s, 0) & mask);
        a.copy_from_slice(&x.to_ne_bytes());
    }
    for (a, s) in acc_lanes
        .into_remainder()
        .iter_mut()
        .zip(src_lanes.remainder())
    {
        *a ^= *s & mask as u8;
    }
}

/// 64 row masks (all ones where `selected(i)`), passed through memory the compiler cannot see
/// into so it cannot turn the masked XOR back into a branch per row, which would mispredict on
/// random bits.
#[inline(always)]
fn opaque_masks(selected: impl Fn(usize) -> bool) -> [u64; 64] {
    let mut masks = [0u64; 64];
    for (i, m) in masks.iter_mut().enumerate() {
        *m = 0u64.wrapping_sub(u64::from(selected(i)));
    }
    std::hint::black_box(&mut masks);
    masks
}

/// `out = a ^ b` over the common length.
#[inline(always)]
pub(crate) fn xor3(out: &mut [u8], a: &[u8], b: &[u8]) {
    for ((o, x), y) in out.iter_mut().zip(a).zip(b) {
        *o = *x ^ *y;
    }
}

/// XORs rows `rows` (each `acc.len()` bytes, numbered from the start of `region`) into `acc`.
/// Panics if a row lies outside the region (callers derive rows from validated parameters).
pub fn xor_rows(region: &[u8], rows: impl IntoIterator<Item = usize>, acc: &mut [u8]) {
    let backend = Backend::current();
    let b = acc.len();
    for row in rows {
        xor_into_with(backend, acc, &region[row * b..(row + 1) * b]);
    }
}

/// Rows requested ahead of the one being XORed by [`xor_gather`]: enough misses in flight to
/// cover memory latency. Measured on 1,732 random rows of 3 million 32-byte records: 30 us
/// with 8, 29 with 16, 27-28 with 24, 26.5 with 48 (noise about 2 us); 60 us without.
pub const GATHER_PREFETCH: usize = 24;

/// XORs the first `acc.len()` bytes of the rows at `indices` (row `i` starts at byte
/// `i * stride` of `region`) into `acc`. The rows are scattered (a Checklist set is `sqrt(B)`
/// random records), so memory latency bounds this, not bandwidth: each row is requested
/// [`GATHER_PREFETCH`] rows before it is read, so that many misses are in flight at once.
///
/// Panics if a row lies outside the region (callers derive indices from validated sets).
pub fn xor_gather(region: &[u8], stride: usize, indices: &[u64], acc: &mut [u8]) {
    let b = acc.len();
    assert!(b <= stride || indices.is_empty(), "rows overlap");
    for (k, &index) in indices.iter().enumerate() {
        if let Some(&ahead) = indices.get(k + GATHER_PREFETCH) {
            // A hint only: never dereferenced, so an index past the region does no harm (the
            // read below still checks it).
            crate::prefetch_l1(region.as_ptr().wrapping_add(ahead as usize * stride));
        }
        let at = index as usize * stride;
        for (a, r) in acc.iter_mut().zip(&region[at..at + b]) {
            *a ^= r;
        }
    }
}

/// Scans rows `rows` of `region` (rows of `b` bytes) with the current backend, XORing each
/// selected row into the slot of its chunk in `accs` (`c * b` bytes).
///
/// Panics if `region` is shorter than `rows.end * b` or `accs` is not `c * b` bytes.
pub fn scan(
    selection: Selection<'_>,
    region: &[u8],
    b: usize,
    rows: Range<usize>,
    accs: &mut [u8],
) {
    scan_with(Backend::current(), selection, region, b, rows, accs);
}

/// [`scan`] with a chosen backend.
pub fn scan_with(
    backend: Backend,
    selection: Selection<'_>,
    region: &[u8],
    b: usize,
    rows: Range<usize>,
    accs: &mut [u8],
) {
    assert!(b > 0, "scan: zero row size");
    assert!(
        rows.end * b <= region.len(),
        "scan: rows outside the region"
    );
    assert_eq!(
        accs.len(),
        selection.chunk_count() * b,
        "scan: accumulator size"
    );
    if rows.is_empty() {
        return;
    }
    // The dense loops run the AVX2 build on AVX-512 machines: LLVM's AVX-512 code for the
    // masked XOR was slower in our measurements (Zen 4: 3.8 GB/s instead of 21 GB/s at 32-byte
    // rows before the masks were made opaque; at 128-byte rows 127 ms instead of 13.6 ms for
    // 256 MiB on one core, and no faster from 256 bytes to 2 KiB), and 256-bit lanes already
    // reach memory speed there.
    let dense_backend = match backend {
        Backend::Avx512 => Backend::Avx2,
        other => other,
    };
    if b >= SPARSE_ROW_BYTES {
        scan_sparse(backend, selection, region, b, rows, accs);
    } else if selection.chunk_count() == 1 {
        scan_dense_single(dense_backend, selection.chunk(0), region, b, rows, accs);
    } else {
        scan_dense(dense_backend, selection, region, b, rows, accs);
    }
}

/// Selected rows requested before the oldest requested one is XORed by the sparse scan.
/// Measured with `examples/xor_limits.rs` (1.07 GB of 4 KiB rows, half selected at random,
/// one core, Zen 4, huge pages): a read of just the selected rows took 37.9 ms with no
/// prefetch, 22.5 with one row ahead, 21.6 with two, 21.5 with four, 22.4 with eight;
/// prefetching only the first lines of each row and letting the hardware follow was slower
/// (34-35 ms), as was prefetching into L1 (43 ms).
pub const SPARSE_AHEAD: usize = 2;

multiversioned! {
    /// Large rows: XOR only the selected ones, visiting set bits a word at a time, each row
    /// requested [`SPARSE_AHEAD`] selected rows before it is XORed into its chunk's slot;
    /// rows over [`LONG_ROW_BYTES`] are listed first and XORed by [`xor_long_rows`].
    fn scan_sparse(selection: Selection<'_>, region: &[u8], b: usize, rows: Range<usize>, accs: &mut [u8]) {
        if b > LONG_ROW_BYTES {
            // Few, long rows: list them, then XOR them up to four at a time.
            let mut list = Vec::new();
            for_each_selected(selection, rows, |row, slot| list.push((row * b, slot)));
            xor_long_rows(region, b, &list, accs);
            return;
        }
        // Rows requested but not yet XORed, oldest at `head`: (row, slot).
        let mut ring = [(0usize, 0usize); SPARSE_AHEAD];
        let mut head = 0;
        let mut filled = 0;
        let mut visit = |row: usize, slot: usize| {
            crate::prefetch_l2_all(&region[row * b..(row + 1) * b]);
            if filled == SPARSE_AHEAD {
                let (old, old_slot) = std::mem::replace(&mut ring[head], (row, slot));
                xor_in(&mut accs[old_slot * b..(old_slot + 1) * b], &region[old * b..(old + 1) * b]);
                head = (head + 1) % SPARSE_AHEAD;
            } else {
                ring[(head + filled) % SPARSE_AHEAD] = (row, slot);
                filled += 1;
            }
        };
        for_each_selected(selection, rows, &mut visit);
        for k in 0..filled {
            let (row, slot) = ring[(head + k) % SPARSE_AHEAD];
            xor_in(&mut accs[slot * b..(slot + 1) * b], &region[row * b..(row + 1) * b]);
        }
    }
}

/// Calls `visit(row, chunk)` for every selected row in `rows`, in the order the sparse scan
/// reads them: 64 positions of every chunk at a time (positions `k` of chunk `j` are rows
/// `k c + j`).
#[inline(always)]
fn for_each_selected(
    selection: Selection<'_>,
    rows: Range<usize>,
    mut visit: impl FnMut(usize, usize),
) {
    let c = selection.chunk_count();
    let first_word = rows.start / c / 64;
    let last_word = (rows.end - 1) / c / 64;
    for w in first_word..=last_word {
        for j in 0..c {
            let mut word = word_at(selection.chunk(j), w);
            while word != 0 {
                let row = (w * 64 + word.trailing_zeros() as usize) * c + j;
                word &= word - 1;
                if row < rows.start {
                    continue;
                }
                if row >= rows.end {
                    break;
                }
                visit(row, j);
            }
        }
    }
}

/// Rows (and four-Russians entries) above this size are read without software prefetch and
/// XORed up to four at a time ([`xor_long_rows`]). Requesting a whole 1 MiB row two rows
/// ahead filled L2 twice over; without the request the hardware prefetcher streams a long row
/// at full speed on its own. Measured on Zen 4, one core, AVX2, 1 GiB of 1 MiB rows, half of
/// them selected (`pir bench --modes plain --shape 1GiB-1MiB`): 28.2-28.9 ms with the
/// request, 22.4-23.4 without, 19.8-20.8 XORing pairs of rows, 18.2-19.7 fours. Tiling the
/// columns (32-256 KiB of every row at a time, to keep the accumulators in L2) was slower:
/// 35.6-40.4 ms.
pub const LONG_ROW_BYTES: usize = 16 << 10;

/// XORs rows of `b` bytes into accumulator slots: `list` holds `(offset, slot)`, the row at
/// `region[offset..offset + b]` goes into `accs[slot b..(slot + 1) b]`, in list order. Runs
/// of rows for the same slot are XORed four (or two) at a time, so the accumulator, which at
/// these sizes lives in L3, is read and written once per four rows instead of per row.
#[inline(always)]
pub(crate) fn xor_long_rows(region: &[u8], b: usize, list: &[(usize, usize)], accs: &mut [u8]) {
    let row = |at: usize| &region[at..at + b];
    let mut k = 0;
    while k < list.len() {
        let slot = list[k].1;
        let same = list[k..]
            .iter()
            .take(4)
            .take_while(|&&(_, s)| s == slot)
            .count();
        let acc = &mut accs[slot * b..(slot + 1) * b];
        k += match same {
            4 => {
                let [a, b2, c, d] = [0, 1, 2, 3].map(|m| row(list[k + m].0));
                xor_in4(acc, a, b2, c, d);
                4
            }
            2 | 3 => {
                xor_in2(acc, row(list[k].0), row(list[k + 1].0));
                2
            }
            _ => {
                xor_in(acc, row(list[k].0));
                1
            }
        };
    }
}

/// `acc ^= a ^ b` over the common length.
#[inline(always)]
fn xor_in2(acc: &mut [u8], a: &[u8], b: &[u8]) {
    let len = acc.len();
    let (a, b) = (&a[..len], &b[..len]);
    for i in 0..len {
        acc[i] ^= a[i] ^ b[i];
    }
}

/// `acc ^= a ^ b ^ c ^ d` over the common length.
#[inline(always)]
pub(crate) fn xor_in4(acc: &mut [u8], a: &[u8], b: &[u8], c: &[u8], d: &[u8]) {
    let len = acc.len();
    let (a, b, c, d) = (&a[..len], &b[..len], &c[..len], &d[..len]);
    for i in 0..len {
        acc[i] ^= a[i] ^ b[i] ^ c[i] ^ d[i];
    }
}

multiversioned! {
    /// Small rows, one chunk: branch-free masked XOR, bits read a word at a time.
    fn scan_dense_single(bits: &[u8], region: &[u8], b: usize, rows: Range<usize>, accs: &mut [u8]) {
        match b {
            32 => dense_fixed::<4>(bits, region, rows, accs),
            64 => dense_fixed::<8>(bits, region, rows, accs),
            96 => dense_fixed::<12>(bits, region, rows, accs),
            128 => dense_fixed::<16>(bits, region, rows, accs),
            _ => {
                let mut row = rows.start;
                while row < rows.end {
                    let word = word_at(bits, row / 64) >> (row % 64);
                    let stop = ((row / 64 + 1) * 64).min(rows.end);
                    let masks = opaque_masks(|i| (word >> i) & 1 == 1);
                    for (r, mask) in (row..stop).zip(masks) {
                        xor_in_masked(accs, &region[r * b..(r + 1) * b], mask);
                    }
                    row = stop;
                }
            }
        }
    }
}

/// Reads 64-bit word `i` of a row.
#[inline(always)]
pub(crate) fn lane(row: &[u8], i: usize) -> u64 {
    let mut bytes = [0u8; 8];
    bytes.copy_from_slice(&row[i * 8..i * 8 + 8]);
    u64::from_ne_bytes(bytes)
}

/// The dense scan for rows of exactly `8 W` bytes: the accumulator lives in registers.
#[inline(always)]
fn dense_fixed<const W: usize>(bits: &[u8], region: &[u8], rows: Range<usize>, out: &mut [u8]) {
    let b = 8 * W;
    let mut acc = [0u64; W];
    let mut row = rows.start;
    while row < rows.end {
        let word = word_at(bits, row / 64) >> (row % 64);
        let stop = ((row / 64 + 1) * 64).min(rows.end);
        let span = &region[row * b..stop * b];
        let masks = opaque_masks(|i| (word >> i) & 1 == 1);
        for (r, mask) in span.chunks_exact(b).zip(masks) {
            for (k, a) in acc.iter_mut().enumerate() {
                *a ^= lane(r, k) & mask;
            }
        }
        row = stop;
    }
    for (k, a) in acc.iter().enumerate() {
        let at = &mut out[k * 8..k * 8 + 8];
        let x = lane(at, 0) ^ a;
        at.copy_from_slice(&x.to_ne_bytes());
    }
}

multiversioned! {
    /// Small rows, several chunks: branch-free masked XOR into the row's chunk slot.
    fn scan_dense(selection: Selection<'_>, region: &[u8], b: usize, rows: Range<usize>, accs: &mut [u8]) {
        let c = selection.chunk_count();
        let mut row = rows.start;
        while row < rows.end {
            let stop = (row + 64).min(rows.end);
            let masks = opaque_masks(|i| selection.bit(row + i));
            for (r, mask) in (row..stop).zip(masks) {
                let j = r % c;
                xor_in_masked(&mut accs[j * b..(j + 1) * b], &region[r * b..(r + 1) * b], mask);
            }
            row = stop;
        }
    }
}

/// Scans `rows` with every thread of the current rayon pool, each on its own share of rows;
/// returns the `c * b` accumulators of the whole range.
pub fn scan_parallel(
    selection: Selection<'_>,
    region: &[u8],
    b: usize,
    rows: Range<usize>,
) -> Vec<u8> {
    let backend = Backend::current();
    let slots = selection.chunk_count() * b;
    let threads = rayon::current_num_threads().max(1);
    // Shares are whole 64-row words of every chunk so each thread reads its bits word-wise.
    let granule = 64 * selection.chunk_count();
    let parts = split_rows(rows, threads, granule);
    scan_parts(&parts, slots, backend, |part, accs| {
        scan_with(backend, selection, region, b, part, accs);
    })
}

/// Runs `scan` on every part in parallel on the current rayon pool, each into its own zeroed
/// `len` accumulator bytes, and XORs those together: the last step of every parallel scan.
pub(crate) fn scan_parts(
    parts: &[Range<usize>],
    len: usize,
    backend: Backend,
    scan: impl Fn(Range<usize>, &mut [u8]) + Sync + Send,
) -> Vec<u8> {
    let partials = rayon_map(parts, |part| {
        let mut accs = vec![0u8; len];
        scan(part.clone(), &mut accs);
        accs
    });
    fold(partials, len, backend)
}

/// Splits `rows` into at most `parts` ranges whose inner boundaries are multiples of `granule`.
pub fn split_rows(rows: Range<usize>, parts: usize, granule: usize) -> Vec<Range<usize>> {
    let len = rows.len();
    if len == 0 {
        return Vec::new();
    }
    let granule = granule.max(1);
    let per = len.div_ceil(parts.max(1)).div_ceil(granule) * granule;
    let mut out = Vec::new();
    let mut start = rows.start;
    while start < rows.end {
        // Align the first boundary to the granule counted from row 0.
        let mut end = (start + per).min(rows.end);
        if end < rows.end {
            end -= end % granule;
            if end <= start {
                end = (start + granule).min(rows.end);
            }
        }
        out.push(start..end);
        start = end;
    }
    out
}

/// Runs `f` on every item in parallel on the current rayon pool, keeping order.
pub(crate) fn rayon_map<T: Sync, R: Send>(
    items: &[T],
    f: impl Fn(&T) -> R + Sync + Send,
) -> Vec<R> {
    use rayon::prelude::*;
    items.par_iter().map(f).collect()
}

/// XORs equal-length buffers together.
pub(crate) fn fold(mut partials: Vec<Vec<u8>>, len: usize, backend: Backend) -> Vec<u8> {
    let mut total = partials.pop().unwrap_or_else(|| vec![0u8; len]);
    for part in &partials {
        xor_into_with(backend, &mut total, part);
    }
    total
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_support::pseudo_random;
    use proptest::prelude::*;

    /// The obviously correct scan: row by row, bit by bit.
    fn reference(selection: Selection<'_>, region: &[u8], b: usize, rows: Range<usize>) -> Vec<u8> {
        let c = selection.chunk_count();
        let mut accs = vec![0u8; c * b];
        for row in rows {
            if selection.bit(row) {
                let j = row % c;
                for i in 0..b {
                    accs[j * b + i] ^= region[row * b + i];
                }
            }
        }
        accs
    }

    proptest! {
        #[test]
        fn gather_xors_the_rows_named(
            rows in 1usize..200,
            stride in 1usize..70,
            b_cut in 0usize..70,
            picks in proptest::collection::vec(any::<u16>(), 0..100),
            seed in any::<u64>(),
        ) {
            let b = b_cut.min(stride);
            let region = pseudo_random(rows * stride, seed);
            let indices: Vec<u64> = picks.iter().map(|&p| u64::from(p) % rows as u64).collect();
            let mut expect = vec![0u8; b];
            for &i in &indices {
                for (k, e) in expect.iter_mut().enumerate() {
                    *e ^= region[i as usize * stride + k];
                }
            }
            let mut acc = vec![0u8; b];
            xor_gather(&region, stride, &indices, &mut acc);
            prop_assert_eq!(acc, expect);
        }

        #[test]
        fn xor_into_matches_bytewise(a in proptest::collection::vec(any::<u8>(), 0..300), seed in any::<u64>()) {
            let b = pseudo_random(a.len(), seed);
            let expect: Vec<u8> = a.iter().zip(&b).map(|(x, y)| x ^ y).collect();
            for backend in Backend::available() {
                let mut acc = a.clone();
                xor_into_with(backend, &mut acc, &b);
                prop_assert_eq!(&acc, &expect);
                let mut out = vec![0u8; a.len()];
                xor3_with(backend, &mut out, &a, &b);
                prop_assert_eq!(&out, &expect);
            }
        }

        #[test]
        fn every_backend_scans_like_the_reference(
            rows in 1usize..700,
            b32 in prop::sample::select(vec![1usize, 2, 3, 8, 12, 128, 130, 520]),
            c in 1usize..6,
            start_frac in 0.0f64..1.0,
            end_frac in 0.0f64..1.0,
            seed in any::<u64>(),
        ) {
            let b = 32 * b32;
            // Rows over LONG_ROW_BYTES (16,640 bytes) take the long-row path: fewer of them.
            let rows = if b > LONG_ROW_BYTES { rows.min(90) } else { rows };
            let region = pseudo_random(rows * b, seed);
            let chunk_bits: Vec<Vec<u8>> = (0..c)
                .map(|j| pseudo_random(rows.div_ceil(c).div_ceil(8), seed ^ (j as u64 + 1)))
                .collect();
            let refs: Vec<&[u8]> = chunk_bits.iter().map(|v| v.as_slice()).collect();
            let selection = Selection::new(&refs);
            let start = ((rows as f64) * start_frac) as usize;
            // Ranges that end at the last row and ones that end anywhere after their start.
            let end = if end_frac < 0.5 { rows } else { start + (((rows - start) as f64) * end_frac) as usize };
            let expect = reference(selection, &region, b, start..end);
            for backend in Backend::available() {
                let mut accs = vec![0u8; c * b];
                scan_with(backend, selection, &region, b, start..end, &mut accs);
                prop_assert_eq!(&accs, &expect, "backend {:?}", backend);
            }
            let whole = reference(selection, &region, b, 0..rows);
            prop_assert_eq!(scan_parallel(selection, &region, b, 0..rows), whole);
        }

        #[test]
        fn split_rows_covers_the_range(start in 0usize..1000, len in 0usize..5000, parts in 1usize..9, granule in 1usize..200) {
            let ranges = split_rows(start..start + len, parts, granule);
            let mut next = start;
            for r in &ranges {
                prop_assert_eq!(r.start, next);
                prop_assert!(r.end > r.start);
                next = r.end;
            }
            prop_assert_eq!(next, start + len);
            for r in ranges.iter().skip(1) {
                prop_assert_eq!(r.start % granule, 0);
            }
        }
    }

    #[test]
    fn xor_rows_selects_rows() {
        let region: Vec<u8> = (0..4 * 8).map(|i| i as u8).collect();
        let mut acc = vec![0u8; 8];
        xor_rows(&region, [1, 3], &mut acc);
        let expect: Vec<u8> = (0..8).map(|i| (8 + i) as u8 ^ (24 + i) as u8).collect();
        assert_eq!(acc, expect);
    }

    #[test]
    fn bits_past_the_vector_read_as_zero() {
        assert_eq!(word_at(&[0xff, 0x01], 0), 0x01ff);
        assert_eq!(word_at(&[0xff], 1), 0);
        assert!(!bit_at(&[0xff], 8));
    }
}
