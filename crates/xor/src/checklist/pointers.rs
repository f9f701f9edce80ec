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

/// Two words per index (8 bytes: 24 MB at three million records).
pub struct Pointers {
    first: Vec<u32>,
    second: Vec<u32>,
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
            first: vec![none; records as usize],
            second: vec![none; records as usize],
            slots,
            records,
        }
    }

    /// The rank of `slot` for `x`.
    pub fn rank(&self, x: u64, slot: usize) -> u32 {
        let m = u64::from(self.slots);
        let start = (u128::from(x) * u128::from(m) / u128::from(self.records)) as u64;
        // slot < m and start < m
        ((slot as u64 + m - start) % m) as u32
    }

    /// The slot of rank `rank` for `x`.
    pub fn slot(&self, x: u64, rank: u32) -> usize {
        let m = u64::from(self.slots);
        let start = (u128::from(x) * u128::from(m) / u128::from(self.records)) as u64;
        ((u64::from(rank) + start) % m) as usize
    }

    /// What is known of `x`'s first rank.
    pub fn first(&self, x: u64) -> Rank {
        decode(self.first[x as usize])
    }

    /// What is known of `x`'s second rank.
    pub fn second(&self, x: u64) -> Rank {
        decode(self.second[x as usize])
    }

    fn set(&mut self, x: u64, first: Rank, second: Rank) {
        self.first[x as usize] = encode(first);
        self.second[x as usize] = encode(second);
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
