//! The method of four Russians for XOR scans (RAID-PIR, Günther 2019, sections 2.3 and 3.2.2).
//!
//! Rows are taken in groups of `t` rows of the same chunk: super-group `s` covers rows
//! `s c t .. (s + 1) c t`, and chunk `j`'s group in it is rows `(s t + u) c + j` for
//! `u = 0..t` (with `c = 1`, simply `t` consecutive rows). For every group a table holds the
//! XOR of every non-empty subset of its rows, `2^t - 1` entries of `b` bytes, built with a
//! Gray-code walk so each entry costs one XOR of two earlier ones. A query then reads one
//! entry per group (chosen by its `t` selection bits) instead of up to `t` rows: `B / t` rows
//! of reads instead of `B`, for `(2^t - 1) / t` times the database in memory (t = 4: 3.75x,
//! t = 5: 6.2x, t = 8: 31.9x). Missing rows past the end of the database count as zero rows.
//!
//! A table may hold only some chunks (every `step`-th from `first`): a QDP server reads only
//! its flip chunks online (Günther 2019, listing 3.3.1b), so with `n` servers it needs `1 / n` of
//! the memory, and can afford a larger `t` for the same memory.
//!
//! The same Gray-code tables, built on the fly per group of 4 rows and shared by every query
//! of a batch, are the core of [`crate::batch`].

use std::ops::{Range, RangeInclusive};

use crate::xor::{bit_at, xor3, xor_in, Selection};
use crate::Backend;

/// Group sizes the tables support: a group's bits span at most two bytes of a bit vector.
pub const GROUP_SIZES: RangeInclusive<usize> = 1..=8;

/// The shape of a four-Russians table: `rows` rows of `b` bytes, `c` chunks of which the table
/// holds chunks `first, first + step, ...`, groups of `t`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RussiansLayout {
    rows: usize,
    b: usize,
    c: usize,
    t: usize,
    held: HeldChunks,
}

/// The chunks a table holds: `first, first + step, ...` below `c`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct HeldChunks {
    first: usize,
    step: usize,
}

impl RussiansLayout {
    /// A layout holding every chunk, or `None` if `t` is not in [`GROUP_SIZES`], a size is
    /// zero, or the table size overflows.
    pub fn new(rows: usize, b: usize, c: usize, t: usize) -> Option<Self> {
        Self::for_chunks(rows, b, c, t, 0, 1)
    }

    /// A layout holding only chunks `first, first + step, ...` below `c` (a QDP server's flip
    /// chunks: `first` = the server, `step` = the servers `n`), or `None` as for
    /// [`RussiansLayout::new`] or if `first >= c` or `step == 0`.
    pub fn for_chunks(
        rows: usize,
        b: usize,
        c: usize,
        t: usize,
        first: usize,
        step: usize,
    ) -> Option<Self> {
        if !GROUP_SIZES.contains(&t) || rows == 0 || b == 0 || first >= c || step == 0 {
            return None;
        }
        let held = HeldChunks { first, step };
        let layout = Self {
            rows,
            b,
            c,
            t,
            held,
        };
        layout.checked_table_bytes().map(|_| layout)
    }

    /// `t`, rows per group.
    pub fn group_size(&self) -> usize {
        self.t
    }

    /// `c`, the chunks of the selections this table answers.
    pub fn chunks(&self) -> usize {
        self.c
    }

    /// The chunks the table holds, increasing.
    pub fn held_chunks(&self) -> impl Iterator<Item = usize> {
        (self.held.first..self.c).step_by(self.held.step)
    }

    /// How many chunks the table holds.
    pub fn held(&self) -> usize {
        (self.c - self.held.first).div_ceil(self.held.step)
    }

    /// Number of super-groups, `ceil(B / (c t))`.
    pub fn super_groups(&self) -> usize {
        self.rows.div_ceil(self.c * self.t)
    }

    /// Entries per group, `2^t - 1` (the empty subset is not stored).
    pub fn entries(&self) -> usize {
        (1 << self.t) - 1
    }

    fn checked_table_bytes(&self) -> Option<usize> {
        self.super_groups()
            .checked_mul(self.held())?
            .checked_mul(self.entries())?
            .checked_mul(self.b)
    }

    /// Bytes of one super-group's tables.
    pub fn super_group_bytes(&self) -> usize {
        self.held() * self.entries() * self.b
    }

    /// Bytes of the whole table, about `(2^t - 1) / t` times the rows of the held chunks.
    pub fn table_bytes(&self) -> usize {
        self.super_groups() * self.super_group_bytes()
    }

    /// The memory cost of group size `t` as a multiple of the rows it covers, `(2^t - 1) / t`.
    pub fn memory_factor(t: usize) -> f64 {
        ((1u64 << t) - 1) as f64 / t as f64
    }
}

/// Builds the whole table for `region` with every thread of the current rayon pool, calling
/// `progress(done, total)` in super-groups as it goes. The table asks for huge pages
/// ([`crate::memory::HugeBuffer`]): a scan reads one scattered entry per group.
pub fn build_parallel(
    layout: RussiansLayout,
    region: &[u8],
    progress: &(dyn Fn(usize, usize) + Sync),
) -> crate::memory::HugeBuffer {
    let mut table = crate::memory::HugeBuffer::zeroed(layout.table_bytes());
    build_parallel_into(layout, region, &mut table, progress);
    table
}

/// [`build_parallel`] into `table` (exactly [`RussiansLayout::table_bytes`] bytes), for a
/// table in memory the caller chose.
pub fn build_parallel_into(
    layout: RussiansLayout,
    region: &[u8],
    table: &mut [u8],
    progress: &(dyn Fn(usize, usize) + Sync),
) {
    use rayon::prelude::*;
    assert_eq!(
        table.len(),
        layout.table_bytes(),
        "four Russians: table size"
    );
    let backend = Backend::current();
    let per = layout.super_group_bytes();
    // Work in runs of super-groups so progress calls stay cheap.
    let run = (64 << 20) / per.max(1) + 1;
    let total = layout.super_groups();
    let done = std::sync::atomic::AtomicUsize::new(0);
    table
        .par_chunks_mut(per * run)
        .enumerate()
        .for_each(|(i, part)| {
            let first = i * run;
            let count = part.len() / per;
            build_with(backend, layout, region, first..first + count, part);
            let now = done.fetch_add(count, std::sync::atomic::Ordering::Relaxed) + count;
            progress(now, total);
        });
}

multiversioned! {
    /// Builds the tables of super-groups `groups` into `out` (exactly their bytes).
    pub fn build_with(layout: RussiansLayout, region: &[u8], groups: Range<usize>, out: &mut [u8]) {
        let RussiansLayout { rows, b, c, t, .. } = layout;
        assert!(rows * b <= region.len(), "four Russians: region too short");
        assert_eq!(out.len(), groups.len() * layout.super_group_bytes(), "four Russians: table slice");
        let entries = layout.entries();
        let held = layout.held();
        for (n, s) in groups.enumerate() {
            for (h, j) in layout.held_chunks().enumerate() {
                let group = &mut out[(n * held + h) * entries * b..][..entries * b];
                gray_fill(group, b, t, |u| {
                    let row = (s * t + u) * c + j;
                    (row < rows).then(|| &region[row * b..(row + 1) * b])
                });
            }
        }
    }
}

/// Fills `table` (`2^t - 1` entries of `width` bytes; entry `i - 1` holds the XOR of the
/// rows whose bits are set in `i`) by a Gray-code walk: consecutive codes differ in one row,
/// so each entry is one XOR of the previous entry and that row. `row(u)` is `None` for a
/// missing (zero) row.
#[inline(always)]
pub(crate) fn gray_fill<'r>(
    table: &mut [u8],
    width: usize,
    t: usize,
    row: impl Fn(usize) -> Option<&'r [u8]>,
) {
    let mut previous = 0usize;
    for i in 1..(1usize << t) {
        let code = i ^ (i >> 1);
        let changed = i.trailing_zeros() as usize;
        let out_at = (code - 1) * width;
        match (previous, row(changed)) {
            (0, Some(r)) => table[out_at..out_at + width].copy_from_slice(r),
            (0, None) => table[out_at..out_at + width].fill(0),
            (p, added) => {
                let prev_at = (p - 1) * width;
                let (out, prev) = if out_at > prev_at {
                    let (lo, hi) = table.split_at_mut(out_at);
                    (&mut hi[..width], &lo[prev_at..prev_at + width])
                } else {
                    let (lo, hi) = table.split_at_mut(prev_at);
                    (&mut lo[out_at..out_at + width], &hi[..width])
                };
                match added {
                    Some(r) => xor3(out, prev, r),
                    None => out.copy_from_slice(prev),
                }
            }
        }
        previous = code;
    }
}

/// The `t` selection bits of group `s` in a chunk's bit vector (`t <= 8`, so they lie in at
/// most two bytes; bits past the end read as zero).
#[inline(always)]
pub(crate) fn group_bits(bits: &[u8], s: usize, t: usize) -> usize {
    let bit = s * t;
    let at = bit / 8;
    let lo = bits.get(at).copied().unwrap_or(0);
    let hi = bits.get(at + 1).copied().unwrap_or(0);
    (usize::from(u16::from_le_bytes([lo, hi])) >> (bit % 8)) & ((1 << t) - 1)
}

/// Answers one query from the table: XORs one entry per group of super-groups `groups` into
/// the chunk slots of `accs` (`c * b` bytes). Only the held chunks' slots are touched; the
/// selection bits of other chunks are not read.
pub fn scan(
    layout: RussiansLayout,
    selection: Selection<'_>,
    table: &[u8],
    groups: Range<usize>,
    accs: &mut [u8],
) {
    scan_with(Backend::current(), layout, selection, table, groups, accs);
}

multiversioned! {
    /// [`scan`] with a chosen backend. A table over consecutive rows (`c = 1`) also answers a
    /// selection with several chunks, as one XOR of all its selected rows (the group's bits
    /// are gathered from the chunks they belong to); `accs` is then one slot of `b` bytes.
    /// A table of `c` chunks also answers a selection whose chunk count `cc` divides `c`, per
    /// chunk: table chunk `j` holds rows `j mod c`, all in selection chunk `j mod cc`, at
    /// positions `m` apart (`m = c / cc`); `accs` then has `cc` slots.
    pub fn scan_with(layout: RussiansLayout, selection: Selection<'_>, table: &[u8], groups: Range<usize>, accs: &mut [u8]) {
        let RussiansLayout { b, c, t, .. } = layout;
        let cc = selection.chunk_count();
        let strided = cc != c && c != 1;
        let gathered = cc != c && c == 1;
        assert!(!strided || c % cc == 0, "four Russians: chunk count");
        assert_eq!(table.len(), layout.table_bytes(), "four Russians: table size");
        let slots = if strided { cc } else { c };
        assert_eq!(accs.len(), slots * b, "four Russians: accumulator size");
        let m = c / cc.min(c);
        let entries = layout.entries();
        let held = layout.held();
        // In gathered mode, row s t + u is bit k of chunk cj: walk (cj, k) without dividing.
        let chunks = selection.chunk_count();
        let long = b > crate::xor::LONG_ROW_BYTES;
        let mut long_list = Vec::new();
        let mut ahead: [Option<(usize, usize)>; LOOKAHEAD] = [None; LOOKAHEAD];
        let mut next = 0;
        let mut cj = (groups.start * t) % chunks;
        let mut k = (groups.start * t) / chunks;
        for s in groups {
            for (h, j) in layout.held_chunks().enumerate() {
                let index = if gathered {
                    let mut index = 0;
                    for u in 0..t {
                        index |= usize::from(bit_at(selection.chunk(cj), k)) << u;
                        cj += 1;
                        if cj == chunks {
                            cj = 0;
                            k += 1;
                        }
                    }
                    index
                } else if strided {
                    let bits = selection.chunk(j % cc);
                    let first = s * t * m + j / cc;
                    let mut index = 0;
                    for u in 0..t {
                        index |= usize::from(bit_at(bits, first + u * m)) << u;
                    }
                    index
                } else {
                    group_bits(selection.chunk(j), s, t)
                };
                if index != 0 {
                    let at = ((s * held + h) * entries + index - 1) * b;
                    let slot = if strided { j % cc } else { j };
                    if long {
                        long_list.push((at, slot));
                        continue;
                    }
                    // Entries are scattered over a table several times the database: start
                    // loading this one now and XOR the one chosen LOOKAHEAD lookups ago.
                    crate::prefetch_l2_all(&table[at..at + b]);
                    if let Some((j, at)) = ahead[next].replace((slot, at)) {
                        xor_in(&mut accs[j * b..(j + 1) * b], &table[at..at + b]);
                    }
                    next = (next + 1) % LOOKAHEAD;
                }
            }
        }
        for (j, at) in ahead.into_iter().flatten() {
            xor_in(&mut accs[j * b..(j + 1) * b], &table[at..at + b]);
        }
        // Long entries: per slot (so that runs of one slot XOR four at a time), ascending.
        long_list.sort_by_key(|&(_, slot)| slot);
        crate::xor::xor_long_rows(table, b, &long_list, accs);
    }
}

/// Table entries [`scan_with`] has asked for before it XORs the oldest (entries up to
/// [`crate::xor::LONG_ROW_BYTES`]; longer ones are read as the sparse scan reads long rows).
/// With it, four-Russians RAID-PIR at 1.07 GB of 4 KiB blocks took 22-27 ms instead of 38-41
/// on one core (A/B, same session; `pir bench --modes qdp`).
const LOOKAHEAD: usize = 4;

/// How many table entries [`scan`] reads for `selection`: the groups of the held chunks with
/// at least one selected row (group `(s, j)` holds rows `(s t + u) c + j`, whatever the
/// selection's own chunk count). For reports of the bytes a query touches; not a hot path.
pub fn entries_read(layout: RussiansLayout, selection: Selection<'_>) -> usize {
    let RussiansLayout { rows, c, t, .. } = layout;
    let mut read = 0;
    for s in 0..layout.super_groups() {
        for j in layout.held_chunks() {
            let selected = (0..t)
                .map(|u| (s * t + u) * c + j)
                .any(|row| row < rows && selection.bit(row));
            read += usize::from(selected);
        }
    }
    read
}

/// The table entries [`scan`] reads for `selection`, as entry numbers (entry `e` is bytes
/// `e b .. (e + 1) b` of the table), in the order the scan reads them. For a read of the same
/// entries without the XOR (`crate::memory::read_rows_with`), the limit the scan is measured
/// against; not a hot path.
pub fn entries_list(layout: RussiansLayout, selection: Selection<'_>) -> Vec<usize> {
    let RussiansLayout { rows, c, t, .. } = layout;
    let (entries, held) = (layout.entries(), layout.held());
    let mut list = Vec::new();
    for s in 0..layout.super_groups() {
        for (h, j) in layout.held_chunks().enumerate() {
            let index = (0..t)
                .map(|u| (s * t + u) * c + j)
                .enumerate()
                .filter(|&(_, row)| row < rows && selection.bit(row))
                .fold(0, |index, (u, _)| index | 1 << u);
            if index != 0 {
                list.push((s * held + h) * entries + index - 1);
            }
        }
    }
    if layout.b > crate::xor::LONG_ROW_BYTES {
        // Long entries are read per held chunk (as the scan reads them per slot).
        list.sort_by_key(|&e| (e / entries) % held);
    }
    list
}

/// Answers one query from the table with every thread of the current rayon pool.
pub fn scan_parallel(layout: RussiansLayout, selection: Selection<'_>, table: &[u8]) -> Vec<u8> {
    let backend = Backend::current();
    let cc = selection.chunk_count();
    let slots = if cc == layout.c {
        layout.c * layout.b
    } else if layout.c == 1 {
        layout.b
    } else {
        cc * layout.b
    };
    let parts = crate::xor::split_rows(0..layout.super_groups(), rayon::current_num_threads(), 8);
    crate::xor::scan_parts(&parts, slots, backend, |part, accs| {
        scan_with(backend, layout, selection, table, part, accs);
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bench_support::pseudo_random;
    use proptest::prelude::*;

    #[test]
    fn gray_table_holds_every_subset() {
        let rows: Vec<Vec<u8>> = (0..4).map(|u| vec![1u8 << u; 32]).collect();
        let mut table = vec![0u8; 15 * 32];
        gray_fill(&mut table, 32, 4, |u| Some(rows[u].as_slice()));
        for i in 1..16usize {
            assert_eq!(table[(i - 1) * 32], i as u8, "entry {i}");
        }
        // A missing row contributes nothing.
        gray_fill(&mut table, 32, 4, |u| (u != 2).then(|| rows[u].as_slice()));
        for i in 1..16usize {
            assert_eq!(table[(i - 1) * 32], (i & !4) as u8, "entry {i}");
        }
    }

    #[test]
    fn layout_rules_and_memory_factor() {
        assert!(RussiansLayout::new(10, 32, 1, 0).is_none());
        assert!(RussiansLayout::new(10, 32, 1, 9).is_none());
        assert!(RussiansLayout::new(0, 32, 1, 4).is_none());
        assert!(RussiansLayout::new(10, 32, 0, 4).is_none());
        let l = RussiansLayout::new(10, 64, 1, 4).unwrap();
        assert_eq!(l.super_groups(), 3);
        assert_eq!(l.table_bytes(), 3 * 15 * 64);
        assert_eq!(RussiansLayout::memory_factor(4), 3.75);
        assert_eq!(RussiansLayout::memory_factor(5), 6.2);
        assert!(RussiansLayout::new(usize::MAX / 2, 1 << 20, 1, 8).is_none());
        // Chunks 1 and 4 of 6: two of six groups per super-group.
        let some = RussiansLayout::for_chunks(100, 64, 6, 5, 1, 3).unwrap();
        assert_eq!(some.held_chunks().collect::<Vec<_>>(), [1, 4]);
        assert_eq!(some.super_groups(), 4);
        assert_eq!(some.table_bytes(), 4 * 2 * 31 * 64);
        assert!(RussiansLayout::for_chunks(100, 64, 6, 5, 6, 3).is_none());
        assert!(RussiansLayout::for_chunks(100, 64, 6, 5, 0, 0).is_none());
    }

    #[test]
    fn group_bits_may_straddle_two_bytes() {
        let bits = [0b1010_0000u8, 0b0000_0111];
        // t = 5: group 1 is bits 5..10 = 1, 0, 1, 1, 1.
        assert_eq!(group_bits(&bits, 1, 5), 0b11101);
        // Group 2 is bits 10..15 (only bit 10 set); group 4 lies past the end.
        assert_eq!(group_bits(&bits, 2, 5), 0b00001);
        assert_eq!(group_bits(&bits, 4, 5), 0);
    }

    proptest! {
        #[test]
        fn table_scan_matches_the_plain_scan(
            rows in 1usize..300,
            b32 in prop::sample::select(vec![1usize, 2, 3, 5, 9, 520]),
            c in 1usize..5,
            t in GROUP_SIZES,
            seed in any::<u64>(),
        ) {
            let b = 32 * b32;
            // Entries over LONG_ROW_BYTES (16,640 bytes) take the long-entry path: fewer rows
            // and small groups, or the tables grow to gigabytes.
            let (rows, t) = if b > crate::xor::LONG_ROW_BYTES { (rows.min(40), t.min(4)) } else { (rows, t) };
            let region = pseudo_random(rows * b, seed);
            let chunk_bits: Vec<Vec<u8>> = (0..c)
                .map(|j| {
                    let len = rows.saturating_sub(j).div_ceil(c);
                    let mut bits = pseudo_random(len.div_ceil(8), seed ^ (j as u64 + 7));
                    // Bits past the chunk's end are zero, as pir-xor guarantees.
                    for k in len..bits.len() * 8 {
                        bits[k / 8] &= !(1 << (k % 8));
                    }
                    bits
                })
                .collect();
            let refs: Vec<&[u8]> = chunk_bits.iter().map(|v| v.as_slice()).collect();
            let selection = Selection::new(&refs);
            let mut expect = vec![0u8; c * b];
            crate::xor::scan_with(Backend::Portable, selection, &region, b, 0..rows, &mut expect);
            let layout = RussiansLayout::new(rows, b, c, t).unwrap();
            let table = build_parallel(layout, &region, &|_, _| {});
            for backend in Backend::available() {
                let mut accs = vec![0u8; c * b];
                scan_with(backend, layout, selection, &table, 0..layout.super_groups(), &mut accs);
                prop_assert_eq!(&accs, &expect, "backend {:?}", backend);
                let mut built = vec![0u8; layout.table_bytes()];
                build_with(backend, layout, &region, 0..layout.super_groups(), &mut built);
                prop_assert_eq!(&built[..], &table[..]);
            }
            prop_assert_eq!(scan_parallel(layout, selection, &table), expect.clone());
            // A table of some chunks answers for those chunks and leaves the others' slots.
            for first in 0..c {
                for step in 1..=c {
                    let some = RussiansLayout::for_chunks(rows, b, c, t, first, step).unwrap();
                    let some_table = build_parallel(some, &region, &|_, _| {});
                    let mut want = vec![0u8; c * b];
                    for j in some.held_chunks() {
                        want[j * b..(j + 1) * b].copy_from_slice(&expect[j * b..(j + 1) * b]);
                    }
                    let sel = Selection::new(&refs);
                    prop_assert_eq!(scan_parallel(some, sel, &some_table), want);
                }
            }
            // A table over consecutive rows answers the same selection as one sum.
            let flat = RussiansLayout::new(rows, b, 1, t).unwrap();
            let flat_table = build_parallel(flat, &region, &|_, _| {});
            let mut total = vec![0u8; b];
            for slot in expect.chunks_exact(b) {
                crate::xor::xor_into_with(Backend::Portable, &mut total, slot);
            }
            for backend in Backend::available() {
                let mut acc = vec![0u8; b];
                scan_with(backend, flat, selection, &flat_table, 0..flat.super_groups(), &mut acc);
                prop_assert_eq!(&acc, &total, "gathered, backend {:?}", backend);
            }
            // A table of a multiple of c chunks answers the selection per chunk (strided).
            for k in [2usize, 3, 4] {
                let wide = RussiansLayout::new(rows, b, c * k, t).unwrap();
                let wide_table = build_parallel(wide, &region, &|_, _| {});
                for backend in Backend::available() {
                    let mut accs = vec![0u8; c * b];
                    scan_with(backend, wide, selection, &wide_table, 0..wide.super_groups(), &mut accs);
                    prop_assert_eq!(&accs, &expect, "strided x{}, backend {:?}", k, backend);
                }
                prop_assert_eq!(scan_parallel(wide, selection, &wide_table), expect.clone());
                // Entries read: at most one per group, at least one per group with a row set.
                let read = entries_read(wide, selection);
                let list = entries_list(wide, selection);
                prop_assert_eq!(list.len(), read);
                // XORing the listed entries is the scan's answer, summed over the chunks.
                let mut summed = vec![0u8; b];
                for &e in &list {
                    crate::xor::xor_into_with(Backend::Portable, &mut summed, &wide_table[e * b..(e + 1) * b]);
                }
                let mut want = vec![0u8; b];
                for slot in expect.chunks_exact(b) {
                    crate::xor::xor_into_with(Backend::Portable, &mut want, slot);
                }
                prop_assert_eq!(summed, want);
                prop_assert!(read <= wide.super_groups() * wide.held());
                let rows_set = (0..rows).filter(|&r| selection.bit(r)).count();
                prop_assert!(read <= rows_set && read * t >= rows_set);
            }
        }
    }
}
