//! The client's pointers from each index to the sets holding it.
//!
//! Index `x` visits the slots in its own cyclic order, starting at slot `o(x) = x m / B`: the
//! *rank* of slot `h` for `x` is `(h - o(x)) mod m`. A lookup of `x` uses the holding set of
//! smallest rank (see [`super::client`] for why a fixed rule keeps the table's distribution).
//! Starting every index somewhere else spreads the lookups over all slots, so a used set was
//! the first for few other indices (about `s / λ`), instead of the low slots being everyone's
//! first.
//!
//! For each index the client keeps what it knows about the two smallest ranks `c1 < c2` of
//! the slots holding it: either the rank (`Known`) or a lower bound (`Stale`). When a set is
//! used up, the second pointer takes the first's place; a stale first pointer is resolved by
//! expanding sets from its bound on (a few milliseconds at three million records), and all
//! pointers are recomputed after `m / 4` lookups.

use pir_kernels::stream::{StreamBuffer, LINE_WORDS};
use pir_kernels::Backend;

/// Flag of a lower bound.
const STALE: u32 = 1 << 31;

/// Knowledge of one of the two smallest ranks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Rank {
    /// The rank is this.
    Known(u32),
    /// The rank is at least this.
    AtLeast(u32),
}

fn encode(rank: Rank) -> u32 {
    match rank {
        Rank::Known(r) => r,
        Rank::AtLeast(b) => STALE | b,
    }
}

fn decode(word: u32) -> Rank {
    if word & STALE == 0 {
        Rank::Known(word)
    } else {
        Rank::AtLeast(word & !STALE)
    }
}

/// Two words per index, side by side (8 bytes, one cache line: 24 MB at three million
/// records).
pub struct Pointers {
    /// `[first, second]` of each index.
    words: Vec<[u32; 2]>,
    slots: u32,
    records: u64,
}

impl Pointers {
    /// Pointers for `records` indices over `slots` slots (`slots <= 2^28`), knowing nothing
    /// yet: fill them with [`Pointers::insert`] for every (index, slot) pair.
    pub fn new(records: u64, slots: usize) -> Self {
        // slots <= MAX_HINTS = 2^28 < STALE; records <= 2^32 (SetShape).
        let slots = slots as u32;
        let none = encode(Rank::AtLeast(slots));
        Self {
            words: vec![[none; 2]; records as usize],
            slots,
            records,
        }
    }

    /// The rank of `slot` for `x`.
    pub fn rank(&self, x: u64, slot: usize) -> u32 {
        let m = u64::from(self.slots);
        // x < B <= 2^32 and m <= 2^28: the product fits a u64.
        let start = x * m / self.records;
        // slot < m and start < m
        ((slot as u64 + m - start) % m) as u32
    }

    /// The slot of rank `rank` for `x`.
    pub fn slot(&self, x: u64, rank: u32) -> usize {
        let m = u64::from(self.slots);
        // x < B <= 2^32 and m <= 2^28: the product fits a u64.
        let start = x * m / self.records;
        ((u64::from(rank) + start) % m) as usize
    }

    /// What is known of `x`'s first rank.
    pub fn first(&self, x: u64) -> Rank {
        decode(self.words[x as usize][0])
    }

    /// What is known of `x`'s second rank.
    pub fn second(&self, x: u64) -> Rank {
        decode(self.words[x as usize][1])
    }

    fn set(&mut self, x: u64, first: Rank, second: Rank) {
        self.words[x as usize] = [encode(first), encode(second)];
    }

    /// The pointers of a whole table at once, as [`Pointers::new`] and [`Pointers::insert`] of
    /// every (index, slot) pair would make them, but faster: see [`Builder`].
    pub fn builder(records: u64, slots: usize) -> Builder {
        Builder::new(records, slots, PENDING_LINES)
    }

    /// While filling from nothing: `slot` holds `x` (keeps the two smallest ranks).
    pub fn insert(&mut self, x: u64, slot: usize) {
        let r = self.rank(x, slot);
        let key = |rank: Rank| match rank {
            Rank::Known(k) | Rank::AtLeast(k) => k,
        };
        let (first, second) = (self.first(x), self.second(x));
        if r < key(first) {
            self.set(x, Rank::Known(r), first);
        } else if r != key(first) && r < key(second) {
            self.set(x, first, Rank::Known(r));
        }
    }

    /// `slot`'s set no longer holds `x` (it was used up).
    pub fn removed(&mut self, x: u64, slot: usize) {
        let r = self.rank(x, slot);
        match (self.first(x), self.second(x)) {
            (Rank::Known(c1), second) if c1 == r => {
                let next = match second {
                    Rank::Known(c2) => Rank::AtLeast(c2 + 1),
                    Rank::AtLeast(b) => Rank::AtLeast(b.saturating_add(1).min(self.slots)),
                };
                self.set(x, second, next);
            }
            (first, Rank::Known(c2)) if c2 == r => {
                self.set(x, first, Rank::AtLeast(r + 1));
            }
            // Any other rank lies above what is known or inside a bound: both stay true.
            _ => {}
        }
    }

    /// `slot`'s set now holds `x` (a fresh set; it did not hold `x` before).
    pub fn added(&mut self, x: u64, slot: usize) {
        let r = self.rank(x, slot);
        match (self.first(x), self.second(x)) {
            (Rank::Known(c1), _) if r < c1 => self.set(x, Rank::Known(r), Rank::Known(c1)),
            (Rank::Known(c1), Rank::Known(c2)) if c1 < r && r < c2 => {
                self.set(x, Rank::Known(c1), Rank::Known(r))
            }
            (Rank::Known(c1), Rank::AtLeast(b2)) if c1 < r && r < b2 => {
                self.set(x, Rank::Known(c1), Rank::Known(r))
            }
            (Rank::AtLeast(b1), _) if r < b1 => self.set(x, Rank::Known(r), Rank::AtLeast(b1)),
            (Rank::AtLeast(_), Rank::AtLeast(b2)) if r < b2 => {
                let first = self.first(x);
                self.set(x, first, Rank::AtLeast(r));
            }
            _ => {}
        }
    }

    /// A search from `x`'s first bound found its first rank `r`.
    pub fn resolved(&mut self, x: u64, r: u32) {
        let second = match self.second(x) {
            Rank::AtLeast(b) => Rank::AtLeast(b.max(r + 1)),
            known => known,
        };
        self.set(x, Rank::Known(r), second);
    }

    /// A search from `x`'s first bound found no set holding it.
    pub fn exhausted(&mut self, x: u64) {
        let none = Rank::AtLeast(self.slots);
        self.set(x, none, none);
    }

    /// Checks every pointer against the true ranks (`holders(x)`: the slots holding `x`).
    /// For tests: true when everything known is right and every bound holds.
    pub fn consistent(&self, holders: impl Fn(u64) -> Vec<usize>) -> bool {
        (0..self.records).all(|x| {
            let mut ranks: Vec<u32> = holders(x).iter().map(|&h| self.rank(x, h)).collect();
            ranks.sort_unstable();
            let c1 = ranks.first().copied().unwrap_or(self.slots);
            let c2 = ranks.get(1).copied().unwrap_or(self.slots);
            let holds = |rank: Rank, truth: u32| match rank {
                Rank::Known(k) => k == truth,
                Rank::AtLeast(b) => truth >= b,
            };
            holds(self.first(x), c1) && holds(self.second(x), c2)
        })
    }
}

/// Indices per bucket of [`Builder`], as a power of two: 2^14 indices of 8 bytes, 128 KiB of
/// pointers, brought into L2 once per [`PENDING_LINES`] lines of pairs.
const BUCKET_SHIFT: u32 = 14;

/// Lines of pairs (16 each) a bucket of [`Builder`] holds before they are applied: four pairs
/// per index of the bucket (256 KiB), so that each line of pointers brought in takes about 32
/// pairs (with one pair per index, 8, the pointers' cache misses cost a third of the build;
/// four keep the waiting pairs at 16 bytes per index, 48 MB at three million records).
const PENDING_LINES: usize = (4 << BUCKET_SHIFT) / LINE_WORDS;

/// Fills the pointers of a whole table from its sets, given in increasing slot order
/// ([`Builder::add_set`]), then [`Builder::finish`]es them into [`Pointers`] equal to what
/// [`Pointers::insert`] of every pair makes.
///
/// Why it is faster: `insert` finds `x`'s rank with a 128-bit division per element (tens of
/// cycles, for `λ B` elements). Here each index keeps the *keys* of its two smallest-rank
/// slots, `key(h) = h + m` if `h < o(x)` else `h`, which orders slots exactly as their ranks
/// do (`rank = key - o(x)`) and needs only `h < o(x)`, that is `x >= ceil((h + 1) B / m)`: one
/// division per set, a comparison per element. The ranks are computed once per index at the
/// end. Both words of an index lie side by side.
///
/// A set's elements are spread over the whole table, and pointing each one at once costs a
/// cache miss per element, so the (index, slot) pairs wait in buckets of `2^SHIFT` nearby
/// indices until enough have come to apply them inside L2 (a radix pass). Each bucket collects
/// a line of 16 pairs in a small cached staging area, and full lines go to the waiting buffer
/// with streaming stores ([`StreamBuffer`]): ordinary stores would read every line of the
/// buffer in before writing it. A waiting pair is one `u32`: the index's offset in its bucket,
/// whether the slot lies before `o(x)`, and the slot's offset from the *epoch* (every bucket is
/// emptied when a slot no longer fits the bits left, which at these sizes never happens:
/// 17 bits, `m` up to 131,072). Keeping the two smallest keys does not depend on the order the
/// pairs come in, so the buckets change nothing in the result.
///
/// `SHIFT` is a constant so that the per-element loop shifts and masks by immediates; the
/// element loop keeps only what it needs in registers and hands a full line to
/// [`Waiting::spill`], out of line (once per 16 elements).
pub struct Builder<const SHIFT: u32 = BUCKET_SHIFT> {
    /// Pairs `slot offset << (SHIFT + 1) | before << SHIFT | x offset` being collected: bucket
    /// `k`'s line and how many it holds. Empty when there is one bucket: then every pair is
    /// applied at once.
    stage: Vec<[u32; LINE_WORDS]>,
    staged: Vec<u32>,
    waiting: Waiting<SHIFT>,
    /// Slot offsets below `span` fit a pair.
    span: u32,
}

/// What [`Builder`] keeps besides its staging lines: the keys and the full lines waiting.
struct Waiting<const SHIFT: u32> {
    /// The two smallest keys of each index; `2m` for none. Padded to whole buckets, so that a
    /// pair's offset always lies inside its bucket's slice.
    keys: Vec<[u32; 2]>,
    slots: u32,
    records: u64,
    /// Full lines waiting: bucket `k` holds `written[k]` of them from line `k * capacity` on.
    pending: StreamBuffer,
    written: Vec<usize>,
    capacity: usize,
    /// The slot pairs' offsets count from.
    epoch: u32,
}

impl<const SHIFT: u32> Builder<SHIFT> {
    fn new(records: u64, slots: usize, capacity: usize) -> Self {
        Self::with_span(records, slots, capacity, 1 << (31 - SHIFT))
    }

    /// Epochs `span` slots long (at most `2^(31 - SHIFT)`): for tests of the epochs.
    fn with_span(records: u64, slots: usize, capacity: usize, span: u32) -> Self {
        // slots <= MAX_HINTS = 2^28, so 2 slots fits a u32 below STALE.
        let m = slots as u32;
        // records <= 2^32: at most 2^32 >> SHIFT buckets.
        let buckets = records.div_ceil(1 << SHIFT) as usize;
        let staged = if buckets > 1 { buckets } else { 0 };
        Self {
            stage: vec![[0; LINE_WORDS]; staged],
            staged: vec![0; staged],
            waiting: Waiting {
                keys: vec![[2 * m; 2]; buckets.max(1) << SHIFT],
                slots: m,
                records,
                pending: StreamBuffer::zeroed(staged * capacity),
                written: vec![0; staged],
                capacity,
                epoch: 0,
            },
            span,
        }
    }

    /// Set `slot` holds `elements` (each below `B`). Slots must come in increasing order (the
    /// result does not depend on it, but a repeated element is skipped only within its set).
    pub fn add_set(&mut self, slot: usize, elements: &[u32]) {
        let waiting = &mut self.waiting;
        let m = u64::from(waiting.slots);
        // `slot < o(x)` exactly when `(slot + 1) B <= x m`, that is `x >= first_after`.
        // slot < m <= 2^28 and B <= 2^32: (slot + 1) B < 2^61.
        let first_after = ((slot as u64 + 1) * waiting.records).div_ceil(m.max(1));
        // slot < 2^28
        let slot = slot as u32;
        let before = |x: u32| u32::from(u64::from(x) >= first_after);
        if self.stage.is_empty() {
            for &x in elements {
                // One bucket: every index lies in the padded keys.
                keep(
                    &mut waiting.keys[x as usize],
                    slot + before(x) * waiting.slots,
                );
            }
            return;
        }
        if slot.wrapping_sub(waiting.epoch) >= self.span {
            waiting.flush(&self.stage, &mut self.staged);
            waiting.epoch = slot;
        }
        let mask = (1u32 << SHIFT) - 1;
        let offset = (slot - waiting.epoch) << (SHIFT + 1);
        // Slices, not the vectors: their pointers and lengths stay in registers across the
        // out-of-line spill.
        let (stage, staged) = (&mut self.stage[..], &mut self.staged[..]);
        for &x in elements {
            let bucket = (x >> SHIFT) as usize;
            let count = staged[bucket] as usize % LINE_WORDS;
            let line = &mut stage[bucket];
            line[count] = offset | before(x) << SHIFT | (x & mask);
            if count + 1 < LINE_WORDS {
                staged[bucket] = (count + 1) as u32;
            } else {
                staged[bucket] = 0;
                waiting.spill(bucket, line);
            }
        }
    }

    /// The pointers: each key turned into its rank.
    pub fn finish(mut self) -> Pointers {
        self.waiting.flush(&self.stage, &mut self.staged);
        let Waiting {
            mut keys,
            slots,
            records,
            ..
        } = self.waiting;
        // records <= 2^32 fits usize on the 64-bit targets this runs on.
        keys.truncate(records as usize);
        let m = u64::from(slots);
        let none = encode(Rank::AtLeast(slots));
        for (x, entry) in keys.iter_mut().enumerate() {
            // x < B <= 2^32, m <= 2^28: the product fits a u64, the quotient is below m.
            let start = (x as u64 * m / records) as u32;
            *entry = entry.map(|key| {
                if key == 2 * slots {
                    none
                } else {
                    encode(Rank::Known(key - start))
                }
            });
        }
        Pointers {
            words: keys,
            slots,
            records,
        }
    }
}

impl<const SHIFT: u32> Waiting<SHIFT> {
    /// `bucket`'s staged line is full: out to the waiting buffer, and the bucket's waiting
    /// pairs applied when it is full too.
    #[inline(never)]
    fn spill(&mut self, bucket: usize, line: &[u32; LINE_WORDS]) {
        let written = self.written[bucket];
        self.pending
            .write_line(bucket * self.capacity + written, line);
        if written + 1 < self.capacity {
            self.written[bucket] = written + 1;
            return;
        }
        self.written[bucket] = 0;
        let words = LINE_WORDS * self.capacity;
        let pairs = &self.pending.read()[bucket * words..][..words];
        apply::<SHIFT>(&mut self.keys, bucket, self.epoch, self.slots, pairs);
    }

    /// Applies every waiting and staged pair.
    fn flush(&mut self, stage: &[[u32; LINE_WORDS]], staged: &mut [u32]) {
        let words = LINE_WORDS * self.capacity;
        let pending = self.pending.read();
        for (bucket, line) in stage.iter().enumerate() {
            let waiting = &pending[bucket * words..][..self.written[bucket] * LINE_WORDS];
            apply::<SHIFT>(&mut self.keys, bucket, self.epoch, self.slots, waiting);
            let staged_pairs = &line[..staged[bucket] as usize];
            apply::<SHIFT>(&mut self.keys, bucket, self.epoch, self.slots, staged_pairs);
            (self.written[bucket], staged[bucket]) = (0, 0);
        }
    }
}

/// Applies the waiting pairs of `bucket` (made in `epoch`) to `keys` (padded to whole
/// buckets), with the kernels' backend ([`pir_kernels::keep`]: 16 pairs at a time with
/// AVX-512).
fn apply<const SHIFT: u32>(
    keys: &mut [[u32; 2]],
    bucket: usize,
    epoch: u32,
    m: u32,
    pairs: &[u32],
) {
    let keys = &mut keys[bucket << SHIFT..][..1 << SHIFT];
    pir_kernels::keep::apply_pairs(Backend::current(), keys, SHIFT, epoch, m, pairs);
}

/// Keeps `key` among the two smallest distinct keys of `entry`.
#[inline(always)]
fn keep(entry: &mut [u32; 2], key: u32) {
    let [k1, k2] = *entry;
    if key < k1 {
        *entry = [key, k1];
    } else if key != k1 && key < k2 {
        entry[1] = key;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{Rng, SeedableRng};
    use rand_chacha::ChaCha20Rng;

    /// The branchless rule keeps what the branching one keeps, for every key against every
    /// ordered pair (equal keys, the empty `2m` marker, the largest words).
    #[test]
    fn branchless_keep_equals_keep() {
        let values = [0u32, 1, 2, 5, 6, 7, 100, u32::MAX - 1, u32::MAX];
        for &k1 in &values {
            for &k2 in values.iter().filter(|&&k2| k2 >= k1) {
                for &key in &values {
                    let (mut a, mut b) = ([k1, k2], [k1, k2]);
                    keep(&mut a, key);
                    pir_kernels::keep::keep_two(&mut b, key);
                    assert_eq!(a, b, "k1 {k1} k2 {k2} key {key}");
                }
            }
        }
    }

    /// The builder makes exactly the pointers `insert` makes, for tables with repeated
    /// elements, indices in no set or one, and slots before and after each index's start.
    #[test]
    fn builder_equals_inserting_every_pair() {
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        for (records, slots, size) in [
            (1u64, 1usize, 1usize),
            (10, 3, 4),
            (97, 40, 9),
            (1000, 700, 31),
        ] {
            let mut inserted = Pointers::new(records, slots);
            let mut builder = Pointers::builder(records, slots);
            // Buckets of 8 indices, applied every 2 lines of 16 pairs; and new epochs every 3
            // slots.
            let mut bucketed = Builder::<3>::new(records, slots, 2);
            let mut epochs = Builder::<3>::with_span(records, slots, 2, 3);
            for slot in 0..slots {
                let set: Vec<u32> = (0..size)
                    .map(|_| rng.random_range(0..records) as u32)
                    .collect();
                for &x in &set {
                    inserted.insert(u64::from(x), slot);
                }
                builder.add_set(slot, &set);
                bucketed.add_set(slot, &set);
                epochs.add_set(slot, &set);
            }
            let built = builder.finish();
            assert!(
                built.words == inserted.words,
                "{records} records, {slots} slots"
            );
            let built = bucketed.finish();
            assert!(
                built.words == inserted.words,
                "bucketed: {records} records, {slots} slots"
            );
            let built = epochs.finish();
            assert!(
                built.words == inserted.words,
                "epochs: {records} records, {slots} slots"
            );
        }
    }
}
