//! Puncturable pseudorandom sets (Corrigan-Gibbs and Kogan, Eurocrypt 2020, section 4; the
//! GGM construction Checklist implements in C, Kogan and Corrigan-Gibbs 2021, section 7).
//!
//! A set key names `s` elements of `0..B`: the leaves of a GGM tree under a 128-bit seed, each
//! reduced to a value below `B`, all shifted by one common offset:
//!
//! ```text
//! node children   = (MMO_L(x), MMO_R(x)),  MMO_k(x) = AES-128_{K_k}(x) xor x  (fixed public keys)
//! leaf t (t < s)  = the node reached from the root by the depth-bit path t (most significant first)
//! value(t)        = (u64 little-endian of the leaf's first 8 bytes) * B >> 64   (in 0..B)
//! element(t)      = (value(t) + shift) mod B
//! depth           = ceil(log2 s); leaves at or beyond s are never used
//! ```
//!
//! *Puncturing* at position `p` gives away the co-path of leaf `p` (the sibling of every node on
//! its path, `depth` seeds) and the shift: whoever holds it expands every element except the one
//! at `p`, and learns nothing about that one (GGM security), so it also learns nothing about
//! which index the set was chosen for.
//!
//! The shift makes a set *through a given index* as cheap as a random set ([`gen_with`]): pick
//! a random seed and position `p`, and set `shift = i - value(p)`. Since `value(p)` is
//! pseudorandom and hidden once `p` is punctured, the shift is uniform and independent of `i`,
//! and so are the other elements (`value(t) - value(p) + i`).
//!
//! Fixed-key AES used as a correlation-robust hash (MMO) is the PRG of the practical DPF and
//! puncturable-set literature; the keys below are public and pinned (a change changes every
//! set's meaning). Security: 128-bit seeds.

use aes::cipher::{BlockEncrypt, KeyInit};
use aes::{Aes128, Block};
use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Error};
use rand::{CryptoRng, Rng};

/// Pinned public AES keys of the tree: left child, right child.
pub const FIXED_KEYS: [[u8; 16]; 2] = [*b"pir-pset-left-v1", *b"pir-pset-rght-v1"];

/// Deepest tree: sets of at most `2^24` elements (a set of `sqrt(B)` elements for `B` up to
/// `2^48` records, far beyond any database here).
pub const MAX_DEPTH: usize = 24;

/// Largest universe: indices are `u32` on the client (its per-index pointer table).
pub const MAX_UNIVERSE: u64 = 1 << 32;

/// The sets' universe `0..B` and their size `s`, checked once.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SetShape {
    universe: u64,
    size: usize,
    depth: usize,
}

impl SetShape {
    /// Sets of `size` elements of `0..universe`.
    pub fn new(universe: u64, size: usize) -> Result<Self, Error> {
        if universe == 0 || universe > MAX_UNIVERSE {
            return Err(Error::InvalidParameter(format!(
                "a set universe of {universe} indices (1..={MAX_UNIVERSE} allowed)"
            )));
        }
        if size == 0 || size > 1 << MAX_DEPTH {
            return Err(Error::InvalidParameter(format!(
                "a set of {size} elements (1..={} allowed)",
                1usize << MAX_DEPTH
            )));
        }
        let depth = size.next_power_of_two().trailing_zeros() as usize;
        Ok(Self {
            universe,
            size,
            depth,
        })
    }

    /// `B`: elements lie in `0..universe`.
    pub fn universe(&self) -> u64 {
        self.universe
    }

    /// `s`: elements per set.
    pub fn size(&self) -> usize {
        self.size
    }

    /// Tree depth, `ceil(log2 s)`.
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// Bytes of a punctured key on the wire.
    pub fn punctured_len(&self) -> usize {
        PUNCTURED_HEADER + 16 * self.depth
    }
}

/// position u32 | shift u64
const PUNCTURED_HEADER: usize = 4 + 8;

/// A whole set: seed and shift. Secret to the client (and to the offline server for the sets it
/// made hints for).
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct SetKey {
    /// The GGM root.
    pub seed: [u8; 16],
    /// Added to every leaf value, mod `B`.
    pub shift: u64,
}

impl std::fmt::Debug for SetKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SetKey").finish_non_exhaustive()
    }
}

/// A set with one position removed: what a server receives.
#[derive(Clone, PartialEq, Eq)]
pub struct PuncturedKey {
    position: u32,
    shift: u64,
    /// Sibling of the path node at each level, from the root's children down.
    copath: Vec<[u8; 16]>,
}

impl std::fmt::Debug for PuncturedKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PuncturedKey").finish_non_exhaustive()
    }
}

/// The fixed-key GGM tree expander.
pub struct Ggm {
    aes: [Aes128; 2],
}

impl Default for Ggm {
    fn default() -> Self {
        Self::new()
    }
}

impl Ggm {
    /// The expander with the pinned keys.
    pub fn new() -> Self {
        Self {
            aes: FIXED_KEYS.map(|k| Aes128::new(&k.into())),
        }
    }

    fn child(&self, node: &Block, right: bool) -> Block {
        let mut out = *node;
        self.aes[usize::from(right)].encrypt_block(&mut out);
        xor_block(&out, node)
    }

    /// The first 8 bytes (little-endian) of each of the first `count` leaves of the subtree of
    /// depth `depth` under `root`, in order, left in `scratch.words`. Breadth first, each level
    /// written into the other of two buffers; AES sees up to [`CHUNK`] independent blocks per
    /// call (its AES-NI backend encrypts eight at a time), and the last level keeps only the
    /// 8 bytes a leaf's value needs.
    fn leaf_words(&self, root: Block, depth: usize, count: usize, scratch: &mut Scratch) {
        let Scratch {
            nodes,
            next,
            left,
            right,
            words,
        } = scratch;
        if depth == 0 {
            words.clear();
            if count > 0 {
                words.push(low_word(&root));
            }
            return;
        }
        left.resize(CHUNK, Block::default());
        right.resize(CHUNK, Block::default());
        // The buffers only grow: every entry below `width` is written before it is read, so
        // none is cleared (zeroing them cost as much as the copies AES needs).
        grow(nodes, 1);
        nodes[0] = root;
        let mut width = 1;
        for level in 1..=depth {
            let leaves = level == depth;
            if leaves {
                grow(words, 2 * width);
            } else {
                grow(next, 2 * width);
            }
            for (i, parents) in nodes[..width].chunks(CHUNK).enumerate() {
                let n = parents.len();
                let (left, right) = (&mut left[..n], &mut right[..n]);
                // Buffer to buffer (no copies of the parents); the lengths are equal, `n`.
                let encrypted = self.aes[0]
                    .encrypt_blocks_b2b(parents, left)
                    .and(self.aes[1].encrypt_blocks_b2b(parents, right));
                debug_assert!(encrypted.is_ok());
                let pairs = parents.iter().zip(left.iter()).zip(right.iter());
                if leaves {
                    let out = words[2 * CHUNK * i..].chunks_exact_mut(2);
                    for (o, ((p, l), r)) in out.zip(pairs) {
                        let p = low_word(p);
                        o[0] = low_word(l) ^ p;
                        o[1] = low_word(r) ^ p;
                    }
                } else {
                    let out = next[2 * CHUNK * i..].chunks_exact_mut(2);
                    for (o, ((p, l), r)) in out.zip(pairs) {
                        o[0] = xor_block(l, p);
                        o[1] = xor_block(r, p);
                    }
                }
            }
            if leaves {
                words.truncate(count);
            } else {
                // Only the nodes the first `count` leaves descend from.
                width = count.div_ceil(1 << (depth - level));
                std::mem::swap(nodes, next);
            }
        }
    }
}

/// Makes `buffer` at least `len` long (new entries are default values).
fn grow<T: Default + Clone>(buffer: &mut Vec<T>, len: usize) {
    if buffer.len() < len {
        buffer.resize(len, T::default());
    }
}

/// Parents expanded per AES call: a multiple of the AES-NI backend's eight parallel blocks,
/// and small enough that both children arrays stay in L1 (2 KiB).
const CHUNK: usize = 64;

/// Reusable buffers of the expander (one per thread).
#[derive(Default)]
pub struct Scratch {
    /// One level of the tree.
    nodes: Vec<Block>,
    /// The level below it.
    next: Vec<Block>,
    /// `CHUNK` parents under the left and the right key.
    left: Vec<Block>,
    right: Vec<Block>,
    /// The leaves' first 8 bytes.
    words: Vec<u64>,
}

/// A block's first 8 bytes, little-endian (all a leaf's value needs).
#[inline(always)]
fn low_word(block: &Block) -> u64 {
    let mut word = [0u8; 8];
    word.copy_from_slice(&block[..8]);
    u64::from_le_bytes(word)
}

#[inline(always)]
fn xor_block(a: &Block, b: &Block) -> Block {
    let a: [u8; 16] = (*a).into();
    let b: [u8; 16] = (*b).into();
    Block::from((u128::from_ne_bytes(a) ^ u128::from_ne_bytes(b)).to_ne_bytes())
}

/// A leaf's value in `0..B` by a multiply and a shift (Lemire's range reduction: no division,
/// which would cost more than the AES; bias at most `B / 2^64 <= 2^-32` per element).
#[inline(always)]
fn leaf_value(word: u64, universe: u64) -> u64 {
    ((u128::from(word) * u128::from(universe)) >> 64) as u64
}

/// `(a + b) mod m` for `a, b < m <= 2^32` (the sum cannot overflow).
#[inline(always)]
fn add_mod(a: u64, b: u64, m: u64) -> u64 {
    let sum = a + b;
    if sum >= m {
        sum - m
    } else {
        sum
    }
}

impl SetShape {
    /// Every element of the set `key`, in position order, appended to `out` (cleared first).
    pub fn elements(&self, ggm: &Ggm, key: &SetKey, scratch: &mut Scratch, out: &mut Vec<u64>) {
        ggm.leaf_words(Block::from(key.seed), self.depth, self.size, scratch);
        let (universe, shift) = (self.universe, key.shift);
        out.clear();
        out.extend(
            scratch
                .words
                .iter()
                .map(|&word| add_mod(leaf_value(word, universe), shift, universe)),
        );
    }

    /// [`SetShape::elements`] into `out`, which holds `s` elements (each below `B <= 2^32`):
    /// no allocation, 4 bytes per element.
    pub fn elements_into(&self, ggm: &Ggm, key: &SetKey, scratch: &mut Scratch, out: &mut [u32]) {
        ggm.leaf_words(Block::from(key.seed), self.depth, self.size, scratch);
        // An element is below B <= MAX_UNIVERSE = 2^32, and the shift below B: the kernel
        // computes exactly `add_mod(leaf_value(word, B), shift, B)`.
        pir_kernels::range::scale_into_range_auto(&scratch.words, self.universe, key.shift, out);
    }

    /// The element at `position` alone (one root-to-leaf path).
    pub fn element_at(&self, ggm: &Ggm, key: &SetKey, position: usize) -> u64 {
        let mut node = Block::from(key.seed);
        for level in 0..self.depth {
            node = ggm.child(&node, (position >> (self.depth - 1 - level)) & 1 == 1);
        }
        add_mod(
            leaf_value(low_word(&node), self.universe),
            key.shift,
            self.universe,
        )
    }

    /// The key with `position` removed. Panics if `position >= s` (callers pick it from the set).
    pub fn puncture(&self, ggm: &Ggm, key: &SetKey, position: usize) -> PuncturedKey {
        assert!(position < self.size, "puncture position inside the set");
        let mut node = Block::from(key.seed);
        let mut copath = Vec::with_capacity(self.depth);
        for level in 0..self.depth {
            let right = (position >> (self.depth - 1 - level)) & 1 == 1;
            copath.push(ggm.child(&node, !right).into());
            node = ggm.child(&node, right);
        }
        PuncturedKey {
            // position < s <= 2^24
            position: position as u32,
            shift: key.shift,
            copath,
        }
    }

    /// Every element of the punctured set, in position order (position `p` left out), appended
    /// to `out` (cleared first): `s - 1` elements.
    pub fn punctured_elements(
        &self,
        ggm: &Ggm,
        key: &PuncturedKey,
        scratch: &mut Scratch,
        out: &mut Vec<u64>,
    ) {
        out.clear();
        let position = key.position as usize;
        // Leaves are emitted left to right: the siblings left of the path come from the
        // shallowest level down, those right of it from the deepest level up.
        let mut right_side = Vec::with_capacity(self.depth);
        for (level, sibling) in key.copath.iter().enumerate() {
            let below = self.depth - 1 - level;
            let first = ((position >> below) ^ 1) << below;
            if first >= self.size {
                continue;
            }
            let count = (1usize << below).min(self.size - first);
            if first < position {
                self.emit(ggm, sibling, below, count, scratch, out, key.shift);
            } else {
                right_side.push((sibling, below, count));
            }
        }
        for (sibling, below, count) in right_side.into_iter().rev() {
            self.emit(ggm, sibling, below, count, scratch, out, key.shift);
        }
    }

    #[allow(clippy::too_many_arguments)]
    fn emit(
        &self,
        ggm: &Ggm,
        root: &[u8; 16],
        depth: usize,
        count: usize,
        scratch: &mut Scratch,
        out: &mut Vec<u64>,
        shift: u64,
    ) {
        ggm.leaf_words(Block::from(*root), depth, count, scratch);
        let universe = self.universe;
        out.extend(
            scratch
                .words
                .iter()
                .map(|&word| add_mod(leaf_value(word, universe), shift, universe)),
        );
    }

    /// A fresh uniformly random set.
    pub fn random(&self, rng: &mut (impl CryptoRng + ?Sized)) -> SetKey {
        let mut seed = [0u8; 16];
        rng.fill_bytes(&mut seed);
        SetKey {
            seed,
            shift: rng.random_range(0..self.universe),
        }
    }

    /// A fresh set holding `index` at a uniformly random position, and that position
    /// (`GenWith` of the paper, by the shift; see the module documentation).
    pub fn gen_with(
        &self,
        ggm: &Ggm,
        index: u64,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> (SetKey, usize) {
        let mut seed = [0u8; 16];
        rng.fill_bytes(&mut seed);
        let position = rng.random_range(0..self.size);
        let unshifted = SetKey { seed, shift: 0 };
        let value = self.element_at(ggm, &unshifted, position);
        let shift = add_mod(index, self.universe - value, self.universe);
        (SetKey { seed, shift }, position)
    }
}

impl SetShape {
    /// A set distributed exactly as a uniformly random set *conditioned on holding `index`*,
    /// and a uniformly random position of `index` in it. [`SetShape::gen_with`] weighs a set by
    /// how many times it holds `index` (a set holding it twice is twice as likely); keeping
    /// its result with probability `1 / count` removes that weight. Almost every set holds the
    /// index once, so this rarely loops. `elements` is left holding the set's elements.
    pub fn gen_through(
        &self,
        ggm: &Ggm,
        index: u64,
        rng: &mut (impl CryptoRng + ?Sized),
        scratch: &mut Scratch,
        elements: &mut Vec<u64>,
    ) -> (SetKey, usize) {
        loop {
            let (key, position) = self.gen_with(ggm, index, rng);
            self.elements(ggm, &key, scratch, elements);
            let count = elements.iter().filter(|&&e| e == index).count();
            // count >= 1: `position` holds the index.
            if count == 1 || rng.random_range(0..count) == 0 {
                return (key, position);
            }
        }
    }
}

impl PuncturedKey {
    /// The position left out (uniform and independent of the index the set was used for).
    pub fn position(&self) -> usize {
        self.position as usize
    }
}

/// The wire form of a punctured key: `position u32 | shift u64 | depth x 16-byte seeds`,
/// little-endian. Context: the [`SetShape`] both sides agreed on (it fixes the depth, so the
/// length is known before anything is read; the position must lie in `0..s`, the shift in
/// `0..B`).
impl<'a> Codec<'a> for PuncturedKey {
    type Context = SetShape;

    fn encode(&self, w: &mut Writer) {
        w.u32(self.position);
        w.u64(self.shift);
        for seed in &self.copath {
            w.bytes(seed);
        }
    }

    fn decode(r: &mut Reader<'a>, shape: &SetShape) -> Result<Self, Error> {
        let position = r.u32()?;
        if u64::from(position) >= shape.size as u64 {
            return Err(Error::OutOfRange {
                field: "punctured position",
                found: u64::from(position),
                limit: shape.size as u64,
            });
        }
        let shift = r.u64()?;
        if shift >= shape.universe {
            return Err(Error::OutOfRange {
                field: "set shift",
                found: shift,
                limit: shape.universe,
            });
        }
        // The seeds are all there before the copath is reserved.
        pir_core::codec::check_count(r, "copath seeds", shape.depth, MAX_DEPTH, 16)?;
        let mut copath = Vec::with_capacity(shape.depth);
        for _ in 0..shape.depth {
            copath.push(r.array()?);
        }
        Ok(Self {
            position,
            shift,
            copath,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    #[test]
    fn punctured_expansion_is_the_set_without_one_position() {
        let ggm = Ggm::new();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut scratch = Scratch::default();
        for (universe, size) in [
            (1u64, 1usize),
            (10, 3),
            (1000, 32),
            (5000, 71),
            (1 << 20, 1024),
        ] {
            let shape = SetShape::new(universe, size).unwrap();
            let key = shape.random(&mut rng);
            let mut all = Vec::new();
            shape.elements(&ggm, &key, &mut scratch, &mut all);
            assert_eq!(all.len(), size);
            assert!(all.iter().all(|&e| e < universe));
            for position in [0, size / 2, size - 1] {
                assert_eq!(shape.element_at(&ggm, &key, position), all[position]);
                let punctured = shape.puncture(&ggm, &key, position);
                let bytes = punctured.to_bytes();
                assert_eq!(bytes.len(), shape.punctured_len());
                let decoded = PuncturedKey::from_bytes(&bytes, &shape).unwrap();
                let mut rest = Vec::new();
                shape.punctured_elements(&ggm, &decoded, &mut scratch, &mut rest);
                let mut expected = all.clone();
                expected.remove(position);
                assert_eq!(
                    rest, expected,
                    "universe {universe} size {size} at {position}"
                );
            }
        }
    }

    #[test]
    fn gen_with_puts_the_index_at_the_returned_position() {
        let ggm = Ggm::new();
        let mut rng = ChaCha20Rng::seed_from_u64(2);
        let shape = SetShape::new(12345, 111).unwrap();
        for index in [0u64, 1, 12344, 777] {
            let (key, position) = shape.gen_with(&ggm, index, &mut rng);
            assert_eq!(shape.element_at(&ggm, &key, position), index);
        }
    }

    #[test]
    fn decoding_rejects_out_of_range_fields_and_short_input() {
        let shape = SetShape::new(100, 10).unwrap();
        let mut w = Writer::with_capacity(64);
        w.u32(10);
        w.u64(0);
        let bytes = w.into_bytes();
        assert!(PuncturedKey::decode(&mut Reader::new(&bytes), &shape).is_err());
        let mut w = Writer::with_capacity(64);
        w.u32(0);
        w.u64(100);
        let bytes = w.into_bytes();
        assert!(PuncturedKey::decode(&mut Reader::new(&bytes), &shape).is_err());
        let mut w = Writer::with_capacity(64);
        w.u32(0);
        w.u64(5);
        w.bytes(&[0; 16 * 3]);
        let bytes = w.into_bytes();
        assert!(matches!(
            PuncturedKey::decode(&mut Reader::new(&bytes), &shape),
            Err(Error::Truncated { .. })
        ));
    }
}
