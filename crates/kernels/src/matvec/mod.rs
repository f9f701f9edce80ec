//! Products of a packed matrix over `Z_p` with vectors and matrices over `Z_q`, `q = 2^32`:
//! the inner loops of SimplePIR and DoublePIR (`pir-lattice`).
//!
//! All arithmetic wraps mod 2^32 (native `u32`), which is exactly arithmetic in `Z_q`.
//!
//! # Packed layout
//!
//! A matrix with entries below `2^bits` (`1 <= bits <= 16`) stores `slots = floor(32 / bits)`
//! entries per `u32` word. Row `i` is `W` consecutive words (`words_per_row`), rows follow each
//! other, so the whole matrix is one contiguous `rows * W` slice. Inside a row, column `j` lives
//! in word `j % W`, bits `[s * bits, (s + 1) * bits)` with `s = j / W` ("slot-major"). So slot `s`
//! of the `W` words of a row holds columns `s * W .. (s + 1) * W`, and a vector `x` multiplied
//! by the matrix is read as `slots` contiguous runs: no shuffles, no gathers, one SIMD load per
//! run. A row holds `slots * W` columns; columns past the logical width are zero.
//!
//! With `bits = 9` or `10` (plaintext moduli 512..1024) three entries share a word, so a
//! database of `N` entries takes `4 N / 3` bytes; with `bits = 8`, four.
//!
//! # Kernels
//!
//! - [`matvec`]: `out = M x`, one pass over `M`, rows split over every core (rayon).
//! - [`matvec_batch`]: `K` vectors in one pass: each word is loaded once and multiplied
//!   against all `K` vectors (at most [`MAX_BATCH`] per pass; more are done in groups).
//!   Rows whose vectors would not stay in L2 are cut into column blocks (each block's
//!   vectors at most half this CPU's L2), every row passing one block before the next.
//! - [`matmul_add`]: `H += M[:, c0..c0+T] A` for a block of `T` rows of a dense `A` (`n` columns):
//!   hint computation (`D A`).
//! - [`vectors_times_dense`]: `H += Y A` for a few short vectors `Y` (unpacked words) and a
//!   dense `A`: DoublePIR's answer-side `Y A2`.
//!
//! Each has a `_with(backend, ...)` form; the plain form uses [`Backend::current`]. The
//! portable backend is the reference; the AVX2 and AVX-512 ones are tested against it.
//!
//! # Byte entries on AVX-512 VNNI
//!
//! With `bits = 8` (`p = 256`, what SimplePIR and DoublePIR use at most sizes) a word is four
//! unsigned bytes, exactly the left operand of `vpdpbusd` (four byte products summed into a
//! 32-bit lane). The vector side is split into signed base-256 digits,
//! `x = x0 + 2^8 x1 + 2^16 x2 + 2^24 x3 (mod 2^32)` with every `xd` in `[-128, 127]`, so
//! `M x = Σ_d 2^(8d) (M x_d)`: four `vpdpbusd` per 64 bytes of matrix and no unpacking at
//! all, where the generic tile spends a shift, a mask, a multiply and an add per entry. The
//! digit sums wrap mod 2^32, which is all the final shifted sum needs.
//!
//! # Byte entries on AVX2
//!
//! Without VNNI the same idea runs on `vpmaddwd` (two 16-bit products summed per 32-bit
//! lane): the bytes of 8 words become two vectors of 16-bit entries (slots 0 and 2, slots 1
//! and 3), and the vector side two signed 16-bit digits, `x = x0 + 2^16 x1`, so 32 entries
//! cost four `vpmaddwd` and four adds per vector (`x86::tile_avx2_bytes`).
//!
//! Panics: only on slice lengths that disagree with the matrix shape (callers derive both from
//! the same validated parameters), like the XOR kernels.

use rayon::prelude::*;

use crate::aligned::LineAligned;
use crate::Backend;

/// Most vectors one pass of [`matvec_batch`] multiplies at once; larger batches are split
/// (into groups of 4 where the AVX-512 VNNI tile runs).
pub const MAX_BATCH: usize = 8;

/// Rows of one parallel task are a multiple of this (the largest tile height below).
const TASK_ROW_MULTIPLE: usize = 8;

/// How `Z_p` entries are packed into words: `bits` bits each, `32 / bits` per word.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Packing {
    bits: u32,
}

impl Packing {
    /// Entries of `bits` bits; `None` unless `1 <= bits <= 16`.
    pub const fn new(bits: u32) -> Option<Packing> {
        if bits >= 1 && bits <= 16 {
            Some(Packing { bits })
        } else {
            None
        }
    }

    /// Bits per entry.
    pub const fn bits(self) -> u32 {
        self.bits
    }

    /// Entries per word, `floor(32 / bits)`.
    pub const fn slots(self) -> usize {
        (32 / self.bits) as usize
    }

    /// `2^bits - 1`.
    pub const fn mask(self) -> u32 {
        (1u32 << self.bits) - 1
    }

    /// Words a row of `columns` entries needs.
    pub const fn words_per_row(self, columns: usize) -> usize {
        columns.div_ceil(self.slots())
    }
}

/// A read-only packed matrix (layout in the module documentation).
#[derive(Debug, Clone, Copy)]
pub struct PackedMatrix<'a> {
    words: &'a [u32],
    rows: usize,
    words_per_row: usize,
    packing: Packing,
}

impl<'a> PackedMatrix<'a> {
    /// Views `words` as `rows` rows of `words_per_row` words; `None` if the length disagrees.
    pub fn new(
        words: &'a [u32],
        rows: usize,
        words_per_row: usize,
        packing: Packing,
    ) -> Option<Self> {
        (rows.checked_mul(words_per_row) == Some(words.len())).then_some(PackedMatrix {
            words,
            rows,
            words_per_row,
            packing,
        })
    }

    /// Number of rows.
    pub fn rows(&self) -> usize {
        self.rows
    }

    /// Words per row, `W`.
    pub fn words_per_row(&self) -> usize {
        self.words_per_row
    }

    /// The packing of the entries.
    pub fn packing(&self) -> Packing {
        self.packing
    }

    /// Columns a row holds, `slots * W` (the length of a vector it multiplies).
    pub fn columns(&self) -> usize {
        self.packing.slots() * self.words_per_row
    }

    /// Entry `(row, column)`. Panics if either is out of range.
    pub fn entry(&self, row: usize, column: usize) -> u32 {
        assert!(
            row < self.rows && column < self.columns(),
            "entry out of range"
        );
        let word = self.words[row * self.words_per_row + column % self.words_per_row];
        unpack(word, self.packing, column / self.words_per_row)
    }
}

#[inline(always)]
fn unpack(word: u32, packing: Packing, slot: usize) -> u32 {
    (word >> (slot as u32 * packing.bits)) & packing.mask()
}

/// Packs `values` (column order; missing columns are zero) into one row of words, in place.
/// Values are masked to `bits` bits. Panics if `values` has more entries than the row holds.
pub fn pack_row(values: &[u32], packing: Packing, row: &mut [u32]) {
    let width = row.len();
    assert!(
        values.len() <= packing.slots() * width,
        "pack_row: too many values"
    );
    row.fill(0);
    if width == 0 {
        return;
    }
    for (slot, run) in values.chunks(width).enumerate() {
        let shift = slot as u32 * packing.bits;
        for (word, &v) in row.iter_mut().zip(run) {
            *word |= (v & packing.mask()) << shift;
        }
    }
}

/// `out[i] = sum_j M[i][j] * x[j] mod 2^32`, with the backend in force.
pub fn matvec(matrix: PackedMatrix<'_>, x: &[u32], out: &mut [u32]) {
    matvec_with(Backend::current(), matrix, x, out);
}

/// [`matvec`] on a chosen backend (one the CPU lacks falls back to portable).
/// Panics unless `x.len() == matrix.columns()` and `out.len() == matrix.rows()`.
pub fn matvec_with(backend: Backend, matrix: PackedMatrix<'_>, x: &[u32], out: &mut [u32]) {
    matvec_batch_with(backend, matrix, &[x], out);
}

/// `K` products in one pass over the matrix: `out[i * K + k] = sum_j M[i][j] * xs[k][j]`.
pub fn matvec_batch(matrix: PackedMatrix<'_>, xs: &[&[u32]], out: &mut [u32]) {
    matvec_batch_with(Backend::current(), matrix, xs, out);
}

/// [`matvec_batch`] on a chosen backend. Batches above [`MAX_BATCH`] take one pass per group.
/// Panics unless every `xs[k].len() == matrix.columns()` and `out.len() == rows * xs.len()`.
pub fn matvec_batch_with(
    backend: Backend,
    matrix: PackedMatrix<'_>,
    xs: &[&[u32]],
    out: &mut [u32],
) {
    let k_all = xs.len();
    assert_eq!(out.len(), matrix.rows * k_all, "matvec: output length");
    for x in xs {
        assert_eq!(x.len(), matrix.columns(), "matvec: vector length");
    }
    if k_all == 0 {
        return;
    }
    // Where the byte tiles run (VNNI, AVX2 `vpmaddwd`), 5 to 8 vectors in one pass are
    // slower than two passes of 4: their accumulators no longer fit in registers.
    let per_pass = if TileKind::choose(backend, matrix.packing, SPLIT_BATCH) != TileKind::Generic {
        SPLIT_BATCH
    } else {
        MAX_BATCH
    };
    if k_all > per_pass {
        let mut group_out = vec![0u32; matrix.rows * per_pass];
        for (g, group) in xs.chunks(per_pass).enumerate() {
            let k = group.len();
            let part = &mut group_out[..matrix.rows * k];
            matvec_batch_with(backend, matrix, group, part);
            for (i, row) in part.chunks_exact(k).enumerate() {
                out[i * k_all + g * per_pass..][..k].copy_from_slice(row);
            }
        }
        return;
    }
    let width = matrix.words_per_row;
    if width == 0 || matrix.rows == 0 {
        out.fill(0);
        return;
    }
    let backend = if backend.is_available() {
        backend
    } else {
        Backend::Portable
    };
    let lanes = match backend {
        Backend::Portable => PORTABLE_LANES,
        Backend::Avx2 => 8,
        Backend::Avx512 => 16,
    };
    let kind = TileKind::choose(backend, matrix.packing, k_all);
    let blocks = column_blocks(xs, width, matrix.packing, lanes, kind);
    // About four tasks per core (work stealing evens out a busy core), whole tiles per task.
    let rows_per_task = matrix
        .rows
        .div_ceil(4 * rayon::current_num_threads())
        .next_multiple_of(TASK_ROW_MULTIPLE);
    out.par_chunks_mut(rows_per_task * k_all)
        .zip(matrix.words.par_chunks(rows_per_task * width))
        .for_each(|(out, words)| {
            let rows = words.len() / width;
            for (b, block) in blocks.iter().enumerate() {
                let vectors: Vec<&[u32]> = if block.vectors.is_empty() {
                    xs.to_vec()
                } else {
                    block.vectors.iter().map(Vec::as_slice).collect()
                };
                let band = Band {
                    words: &words[block.first..],
                    rows,
                    stride: width,
                    width: block.width,
                    packing: matrix.packing,
                    add: b > 0,
                };
                let xi = &block.interleaved;
                match k_all {
                    1 => rows_dispatch::<1>(backend, kind, &band, &vectors, xi, out),
                    2 => rows_dispatch::<2>(backend, kind, &band, &vectors, xi, out),
                    3 => rows_dispatch::<3>(backend, kind, &band, &vectors, xi, out),
                    4 => rows_dispatch::<4>(backend, kind, &band, &vectors, xi, out),
                    5 => rows_dispatch::<5>(backend, kind, &band, &vectors, xi, out),
                    6 => rows_dispatch::<6>(backend, kind, &band, &vectors, xi, out),
                    7 => rows_dispatch::<7>(backend, kind, &band, &vectors, xi, out),
                    _ => rows_dispatch::<8>(backend, kind, &band, &vectors, xi, out),
                }
            }
        });
}

/// Bytes of (interleaved) vectors one column block may hold, half this CPU's L2: every row
/// of a band reads the block's vectors once per tile, so they must stay in L2 beside the
/// rows streaming through (at 1 GiB, 4 AVX2 vectors over rows of 32,768 words: 226 ms in
/// blocks of 512 KiB, 204 ms in blocks of 1 MiB on a 2 MiB L2). Without blocks,
/// DoublePIR's first pass at 1 GiB (541,201 columns, 2.2 MB per vector) with 4 vectors read
/// them from L3: 4 queries took 4.6x one.
pub(crate) fn block_vector_bytes() -> usize {
    crate::memory::l2_bytes() / 2
}

/// A block of words `first .. first + width` of every row, and the vectors' entries that
/// meet it.
struct ColumnBlock {
    first: usize,
    width: usize,
    /// The vectors cut to this block (as for a matrix `width` words wide); empty when the
    /// block is the whole row (the caller's vectors are used).
    vectors: Vec<Vec<u32>>,
    /// Their interleaving for the tile that runs, on whole cache lines.
    interleaved: LineAligned,
}

/// Cuts rows of `width` words into blocks whose vectors take at most [`block_vector_bytes`]
/// (whole groups of `lanes` words each), with each block's vectors and their interleaving.
fn column_blocks(
    xs: &[&[u32]],
    width: usize,
    packing: Packing,
    lanes: usize,
    kind: TileKind,
) -> Vec<ColumnBlock> {
    let slots = packing.slots();
    let per_word = 4 * slots * xs.len();
    let block = (block_vector_bytes() / per_word / lanes).max(1) * lanes;
    let interleave_for = |vectors: &[&[u32]], width: usize| match kind {
        TileKind::Vnni => interleave_digits(vectors, width),
        TileKind::Halves => interleave_halves(vectors, width),
        TileKind::Generic => interleave(vectors, width, packing, lanes),
    };
    if block >= width {
        return vec![ColumnBlock {
            first: 0,
            width,
            vectors: Vec::new(),
            interleaved: LineAligned::copy_of(&interleave_for(xs, width)),
        }];
    }
    (0..width)
        .step_by(block)
        .map(|first| {
            let block_width = block.min(width - first);
            let vectors: Vec<Vec<u32>> = xs
                .iter()
                .map(|x| {
                    (0..slots)
                        .flat_map(|slot| &x[slot * width + first..][..block_width])
                        .copied()
                        .collect()
                })
                .collect();
            let refs: Vec<&[u32]> = vectors.iter().map(Vec::as_slice).collect();
            let interleaved = LineAligned::copy_of(&interleave_for(&refs, block_width));
            ColumnBlock {
                first,
                width: block_width,
                vectors,
                interleaved,
            }
        })
        .collect()
}

/// One task's share of a product: `rows` rows, `stride` words apart, of which the tiles
/// read words `0 .. width` (a column block; `words` starts at the block). `add`: add the
/// sums to the output (a later block) instead of storing them.
struct Band<'a> {
    words: &'a [u32],
    rows: usize,
    stride: usize,
    width: usize,
    packing: Packing,
    add: bool,
}

/// Runs `K` products over a band of rows on the chosen backend, `R` rows at a time: each
/// tile loads every vector run once for `R` rows and every matrix word once for `K` vectors,
/// keeping the `R * K` accumulators in registers (so the loop is bound by memory, not by
/// reloading the vectors from cache).
fn rows_dispatch<const K: usize>(
    backend: Backend,
    kind: TileKind,
    band: &Band<'_>,
    xs: &[&[u32]],
    xi: &[u32],
    out: &mut [u32],
) {
    let mut vectors: [&[u32]; K] = [&[]; K];
    vectors.copy_from_slice(&xs[..K]);
    let xs = &vectors;
    // `run!(R, tile)`: the band in tiles of `R` rows of the given tile kernel.
    macro_rules! run {
        ($rows:literal, $tile:ident) => {
            run_band::<$rows, K>(band, xs, xi, out, ($tile::<$rows, K>, $tile::<1, K>))
        };
    }
    #[cfg(target_arch = "x86_64")]
    use x86::{tile_avx2, tile_avx2_bytes, tile_avx512, tile_vnni};
    match backend {
        // `TileKind::choose` picks these two only after checking the CPU features, the
        // packing and (VNNI) K <= SPLIT_BATCH.
        #[cfg(target_arch = "x86_64")]
        _ if kind == TileKind::Vnni => match K {
            1 => run!(8, tile_vnni),
            2 => run!(4, tile_vnni),
            _ => run!(2, tile_vnni),
        },
        // Two 32-bit accumulators per row and vector: 16 ymm registers hold R * K <= 4.
        #[cfg(target_arch = "x86_64")]
        _ if kind == TileKind::Halves => match K {
            1 => run!(4, tile_avx2_bytes),
            2 => run!(2, tile_avx2_bytes),
            _ => run!(1, tile_avx2_bytes),
        },
        #[cfg(target_arch = "x86_64")]
        Backend::Avx512 if Backend::Avx512.is_available() => match K {
            1 => run!(8, tile_avx512),
            2 => run!(4, tile_avx512),
            3 | 4 => run!(2, tile_avx512),
            _ => run!(1, tile_avx512),
        },
        #[cfg(target_arch = "x86_64")]
        Backend::Avx2 if Backend::Avx2.is_available() => match K {
            1 => run!(4, tile_avx2),
            2 => run!(2, tile_avx2),
            _ => run!(1, tile_avx2),
        },
        _ => match K {
            1 => run!(4, tile_portable),
            2 => run!(2, tile_portable),
            _ => run!(1, tile_portable),
        },
    }
}

/// Which tile runs a product (and so how the vectors are interleaved).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum TileKind {
    /// Unpack each slot, one 32-bit multiply per entry ([`interleave`]).
    Generic,
    /// AVX-512 VNNI on byte entries ([`interleave_digits`]).
    Vnni,
    /// AVX2 `vpmaddwd` on byte entries ([`interleave_halves`]).
    Halves,
}

impl TileKind {
    fn choose(backend: Backend, packing: Packing, k: usize) -> TileKind {
        if vnni_applies(backend, packing, k) {
            TileKind::Vnni
        } else if backend == Backend::Avx2 && packing.bits() == 8 && Backend::Avx2.is_available() {
            TileKind::Halves
        } else {
            TileKind::Generic
        }
    }
}

/// The most vectors the byte tiles ([`x86::tile_vnni`], [`x86::tile_avx2_bytes`]) take in
/// one pass; larger batches take one pass per group of this many (at 1 GiB on one core of
/// an Intel Xeon, `examples/matvec_ab.rs`: 8 vectors in one pass took 278 ms with VNNI and
/// 393 ms with AVX2, two passes of 4 took 263 ms and 350 ms).
const SPLIT_BATCH: usize = 4;

/// Whether [`x86::tile_vnni`] runs this product: AVX-512 chosen, the CPU has VNNI, byte
/// entries, and at most [`SPLIT_BATCH`] vectors (with more, one row at a time spills its
/// `4 K` accumulators out of the 32 registers).
fn vnni_applies(backend: Backend, packing: Packing, k: usize) -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        backend == Backend::Avx512
            && packing.bits() == 8
            && k <= SPLIT_BATCH
            && Backend::Avx512.is_available()
            && std::arch::is_x86_feature_detected!("avx512vnni")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        let _ = (backend, packing, k);
        false
    }
}

/// The signed base-256 digits of `x`: `x = Σ_d 2^(8d) digits[d] (mod 2^32)`, each in
/// `[-128, 127]` (the signed operand of `vpdpbusd`).
fn signed_digits(mut x: u32) -> [i8; 4] {
    let mut digits = [0i8; 4];
    for digit in &mut digits {
        let low = (x & 0xff) as u8 as i8;
        *digit = low;
        // Subtracting a negative digit carries one into the next; the carry out of the top
        // digit is a multiple of 2^32 and is dropped.
        x = x.wrapping_sub(low as i32 as u32) >> 8;
    }
    digits
}

/// The vectors as [`x86::tile_vnni`] reads them: for each group of 16 words of a row (`c`),
/// for each digit `d`, for each vector `k`, 16 words whose bytes are digit `d` of the four
/// entries (slots) that meet those words. Words past the last whole group are left to
/// [`tail`].
fn interleave_digits(xs: &[&[u32]], width: usize) -> Vec<u32> {
    const LANES: usize = 16;
    let k_all = xs.len();
    interleave_split::<LANES, _>(xs, width, signed_digits, |xi, (c, k, lane), by_slot| {
        for d in 0..4 {
            xi[((c * 4 + d) * k_all + k) * LANES + lane] =
                u32::from_le_bytes(std::array::from_fn(|slot| by_slot[slot][d] as u8));
        }
    })
}

/// The walk [`interleave_digits`] and [`interleave_halves`] share: for each group `c` of
/// `LANES` words of a row, for each vector `k`, for each lane, the four entries (slots) that
/// meet word `c * LANES + lane`, each `split` into digits, handed to `place` with the
/// (zeroed) interleaving of `width / LANES * 4 * K * LANES` words to write them into.
fn interleave_split<const LANES: usize, D>(
    xs: &[&[u32]],
    width: usize,
    split: fn(u32) -> D,
    mut place: impl FnMut(&mut [u32], (usize, usize, usize), [D; 4]),
) -> Vec<u32> {
    let groups = width / LANES;
    let mut xi = vec![0u32; groups * 4 * xs.len() * LANES];
    for c in 0..groups {
        for (k, x) in xs.iter().enumerate() {
            for lane in 0..LANES {
                let by_slot = std::array::from_fn(|slot| split(x[slot * width + c * LANES + lane]));
                place(&mut xi, (c, k, lane), by_slot);
            }
        }
    }
    xi
}

/// `x` as two signed 16-bit digits, `x = low + 2^16 high (mod 2^32)`: `low` exact (the low
/// half read as signed), `high` only mod 2^16 (it is multiplied by 2^16).
fn signed_halves(x: u32) -> [u16; 2] {
    let low = x as u16;
    let high = (x.wrapping_sub(low as i16 as i32 as u32) >> 16) as u16;
    [low, high]
}

/// The vectors as [`x86::tile_avx2_bytes`] reads them: for each group of 8 words of a row
/// (`c`), for each digit `d` of [`signed_halves`], for each vector `k`, two runs of 8 words:
/// digit `d` of the entries of slots 0 and 2 (low and high 16 bits), then of slots 1 and 3.
/// Words past the last whole group are left to [`tail`].
fn interleave_halves(xs: &[&[u32]], width: usize) -> Vec<u32> {
    const LANES: usize = 8;
    let k_all = xs.len();
    interleave_split::<LANES, _>(xs, width, signed_halves, |xi, (c, k, lane), by_slot| {
        let [s0, s1, s2, s3] = by_slot;
        for d in 0..2 {
            let run = ((c * 2 + d) * k_all + k) * 2;
            xi[run * LANES + lane] = u32::from(s0[d]) | u32::from(s2[d]) << 16;
            xi[(run + 1) * LANES + lane] = u32::from(s1[d]) | u32::from(s3[d]) << 16;
        }
    })
}

/// Rearranges the vectors so a tile reads them as one sequential stream: for each group of
/// `lanes` words of a row (`c`), for each slot, for each vector `k`, the `lanes` entries that
/// meet those words. Words past the last whole group are left to [`tail`], which reads `xs`.
fn interleave(xs: &[&[u32]], width: usize, packing: Packing, lanes: usize) -> Vec<u32> {
    let groups = width / lanes;
    let slots = packing.slots();
    let mut xi = Vec::with_capacity(groups * slots * xs.len() * lanes);
    for c in 0..groups {
        for slot in 0..slots {
            for x in xs {
                xi.extend_from_slice(&x[slot * width + c * lanes..][..lanes]);
            }
        }
    }
    xi
}

/// What a tile multiplies: `R` rows of `width` words, `stride` words apart, from the start of
/// `words` (`R` is the tile's); the `K` vectors `xs` (`slots * width` entries each); and `xi`,
/// their interleaving for the tile's kind and lane count.
#[derive(Clone, Copy)]
struct TileInput<'a, const K: usize> {
    words: &'a [u32],
    stride: usize,
    width: usize,
    packing: Packing,
    xs: &'a [&'a [u32]; K],
    xi: &'a [u32],
}

/// A tile kernel: `R` rows times `K` vectors, sums as `[row][vector]`. `unsafe` because the
/// SIMD tiles need their CPU feature; the portable one is safe.
type Tile<const R: usize, const K: usize> = unsafe fn(TileInput<'_, K>) -> [[u32; K]; R];

/// The end of every tile: each row's `K` accumulators reduced to a sum by `sum`, plus the
/// products of the row's words from `full` on, which the tile's steps did not reach ([`tail`]).
#[inline(always)]
fn finish<A: Copy, const R: usize, const K: usize>(
    input: TileInput<'_, K>,
    full: usize,
    acc: &[[A; K]; R],
    sum: impl Fn(A) -> u32,
) -> [[u32; K]; R] {
    let mut sums = [[0u32; K]; R];
    for (r, sums) in sums.iter_mut().enumerate() {
        for (total, a) in sums.iter_mut().zip(&acc[r]) {
            *total = sum(*a);
        }
        let row = &input.words[r * input.stride..][..input.width];
        tail(row, full, input.packing, input.xs, sums);
    }
    sums
}

/// Splits a band into tiles of `R` rows (the last rows one at a time) and stores (or adds)
/// the sums.
fn run_band<const R: usize, const K: usize>(
    band: &Band<'_>,
    xs: &[&[u32]; K],
    xi: &[u32],
    out: &mut [u32],
    (tile, single): (Tile<R, K>, Tile<1, K>),
) {
    let (stride, width) = (band.stride, band.width);
    let input = |words| TileInput {
        words,
        stride,
        width,
        packing: band.packing,
        xs,
        xi,
    };
    let store = |out: &mut [u32], sums: &[u32]| {
        if band.add {
            for (o, s) in out.iter_mut().zip(sums) {
                *o = o.wrapping_add(*s);
            }
        } else {
            out.copy_from_slice(sums);
        }
    };
    let tiles = band.rows / R;
    for t in 0..tiles {
        let words = &band.words[t * R * stride..][..(R - 1) * stride + width];
        // SAFETY: `rows_dispatch` passes SIMD tiles only after checking their CPU feature, and
        // every vector has `slots * width` entries (asserted by `matvec_batch_with`, cut by
        // `column_blocks`) and `xi` is their interleaving for the tile's lane count.
        let sums = unsafe { tile(input(words)) };
        store(&mut out[t * R * K..][..R * K], sums.as_flattened());
    }
    for r in tiles * R..band.rows {
        let words = &band.words[r * stride..][..width];
        // SAFETY: as above.
        let sums = unsafe { single(input(words)) };
        store(&mut out[r * K..][..K], sums.as_flattened());
    }
}

/// Lanes of the portable loop: four SSE2 vectors, which the compiler forms from this code.
const PORTABLE_LANES: usize = 16;

/// Portable reference tile (safe; `unsafe fn` only to share the [`Tile`] type).
///
/// # Safety
/// None: every slice access is bounds-checked.
unsafe fn tile_portable<const R: usize, const K: usize>(input: TileInput<'_, K>) -> [[u32; K]; R] {
    const L: usize = PORTABLE_LANES;
    let (words, stride, width, xi) = (input.words, input.stride, input.width, input.xi);
    let packing = input.packing;
    let mask = packing.mask();
    let mut acc = [[[0u32; L]; K]; R];
    let full = width - width % L;
    let mut xi = xi.chunks_exact(L);
    for base in (0..full).step_by(L) {
        for slot in 0..packing.slots() {
            let shift = slot as u32 * packing.bits;
            for k in 0..K {
                let Some(x) = xi.next() else {
                    return [[0; K]; R];
                };
                for (r, acc) in acc.iter_mut().enumerate() {
                    let chunk = &words[r * stride + base..][..L];
                    for lane in 0..L {
                        let v = (chunk[lane] >> shift) & mask;
                        acc[k][lane] = acc[k][lane].wrapping_add(v.wrapping_mul(x[lane]));
                    }
                }
            }
        }
    }
    finish(input, full, &acc, |lanes: [u32; L]| {
        lanes.iter().fold(0u32, |a, &b| a.wrapping_add(b))
    })
}

/// Adds the products of words `from..` of `row` (the part SIMD loops leave over) to `sums`.
#[inline(always)]
fn tail<const K: usize>(
    row: &[u32],
    from: usize,
    packing: Packing,
    xs: &[&[u32]; K],
    sums: &mut [u32; K],
) {
    let width = row.len();
    for (c, &word) in row.iter().enumerate().skip(from) {
        for slot in 0..packing.slots() {
            let v = unpack(word, packing, slot);
            for (sum, x) in sums.iter_mut().zip(xs) {
                *sum = sum.wrapping_add(v.wrapping_mul(x[slot * width + c]));
            }
        }
    }
}

/// The SIMD tiles. AVX-512 intrinsics are stable since Rust 1.89, so this crate needs at
/// least that toolchain on x86-64.
#[cfg(target_arch = "x86_64")]
mod x86;

pub mod wide;
pub use wide::{matvec_wide, matvec_wide_with};

mod dot;
pub use dot::{dot_pair, dot_pair4};

mod matmul;
pub use matmul::{
    matmul_add, matmul_add_with, vectors_times_dense, vectors_times_dense_with, DENSE_GROUP,
    DENSE_VECTORS,
};

#[cfg(test)]
mod tests;
