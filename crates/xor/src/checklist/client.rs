//! The Checklist client: hint sets and parities, a pointer from every index to the first set
//! holding it, and the online phase (module documentation of [`super`]).
//!
//! **Which set a lookup uses.** Always the *first* slot whose set holds the index. The sets of
//! the table are independent and uniformly random; the first one holding `i` is a uniform set
//! conditioned on holding `i`, and its replacement ([`SetShape::gen_through`]) is drawn from
//! exactly that distribution and put in the same slot, so after every lookup the table is again
//! distributed like a fresh one, whatever was asked before. (A rule like "the newest set holding
//! `i`" would not be: refreshed sets hold earlier queries' indices, and preferring them would
//! tell the online server that one of the elements it sees was asked for recently.)
//!
//! **Which slot is first** is decided per index, in a cyclic order of the slots that starts
//! at a different slot for each index, and pointers to the first two holders are kept
//! ([`super::pointers`]); both depend only on the table, never on which index was asked.

use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Error};
use rand::{CryptoRng, Rng};

use super::pointers::{Pointers, Rank};
use super::pset::{Ggm, PuncturedKey, Scratch, SetKey, SetShape};
use super::{decoy_probability, initial_set, OfflineRequest, Params};

/// First bytes of a saved client state.
pub const STATE_MAGIC: &[u8] = b"pir-checklist-state-v1";

/// Recompute every pointer after `m / REBUILD_DIVISOR` lookups.
pub const REBUILD_DIVISOR: usize = 4;

/// One client's Checklist state for one database.
pub struct Client {
    params: Params,
    ggm: Ggm,
    /// Set `h`'s key, `None` while a query holds it (or after a query was abandoned).
    keys: Vec<Option<SetKey>>,
    /// Set `h`'s parity at `h * b`.
    parities: Vec<u8>,
    /// Where each index's first two holders are.
    pointers: Pointers,
    /// Sets used since the pointers were last recomputed.
    used: usize,
    scratch: Scratch,
    elements: Vec<u64>,
}

crate::offline::debug_params_only!(Client);

/// The two messages of one lookup: a punctured set for each server.
pub type Query = crate::offline::Query<PuncturedKey>;

/// What the client keeps between [`Client::query`] and [`Client::finish`].
pub struct Pending {
    /// `None` for a decoy round.
    used: Option<Used>,
    fresh: SetKey,
}

struct Used {
    slot: usize,
    parity: Vec<u8>,
}

impl std::fmt::Debug for Pending {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pending").finish_non_exhaustive()
    }
}

/// The result of one round.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// The record asked for.
    Record(Vec<u8>),
    /// A decoy round (see [`super::decoy_probability`]): ask again with a new query.
    Retry,
}

impl Client {
    /// A fresh offline request (a new master seed).
    pub fn offline_request(rng: &mut (impl CryptoRng + ?Sized)) -> OfflineRequest {
        OfflineRequest::random(rng)
    }

    /// The client of `request` once its `m` hints (`m * b` bytes, from the offline server)
    /// have arrived. Expands every set once to point each index at the first set holding it.
    pub fn new(params: Params, request: &OfflineRequest, hints: &[u8]) -> Result<Self, Error> {
        crate::offline::check_hint_len(hints.len(), params.hints(), params.record_bytes(), "sets")?;
        let keys = (0..params.hints())
            .map(|h| Some(initial_set(&params, &request.master, h)))
            .collect();
        let mut client = Self {
            params,
            ggm: Ggm::new(),
            keys,
            parities: hints.to_vec(),
            pointers: Pointers::new(params.records(), params.hints()),
            used: 0,
            scratch: Scratch::default(),
            elements: Vec::with_capacity(params.sets().size()),
        };
        client.point_all();
        Ok(client)
    }

    /// Recomputes every pointer from the sets: a group of sets at a time is expanded on the
    /// rayon pool, then one thread points their elements ([`Pointers::builder`]).
    fn point_all(&mut self) {
        use rayon::prelude::*;
        // 64 sets of `s` 4-byte elements: 443 KB at three million records, inside L2.
        const GROUP: usize = 64;
        let m = self.keys.len();
        let params = self.params;
        let size = params.sets().size();
        let ggm = &self.ggm;
        let mut builder = Pointers::builder(params.records(), m);
        let mut elements = vec![0u32; GROUP * size];
        for (group, keys) in self.keys.chunks(GROUP).enumerate() {
            let elements = &mut elements[..keys.len() * size];
            elements.par_chunks_mut(size).zip(keys).for_each_init(
                Scratch::default,
                |scratch, (out, key)| {
                    if let Some(key) = key {
                        params.sets().elements_into(ggm, key, scratch, out);
                    }
                },
            );
            for (offset, (set, key)) in elements.chunks_exact(size).zip(keys).enumerate() {
                if key.is_some() {
                    builder.add_set(group * GROUP + offset, set);
                }
            }
        }
        self.pointers = builder.finish();
        self.used = 0;
    }

    /// True when every pointer agrees with the sets (expands every set: for tests).
    #[doc(hidden)]
    pub fn pointers_consistent(&mut self) -> bool {
        let mut holders = vec![Vec::new(); self.params.records() as usize];
        for (slot, key) in self.keys.iter().enumerate() {
            if let Some(key) = key {
                self.params
                    .sets()
                    .elements(&self.ggm, key, &mut self.scratch, &mut self.elements);
                for &x in &self.elements {
                    if holders[x as usize].last() != Some(&slot) {
                        holders[x as usize].push(slot);
                    }
                }
            }
        }
        self.pointers.consistent(|x| holders[x as usize].clone())
    }

    /// The client's state as bytes, to keep across restarts (the sets are secret: store the
    /// file where only the user can read it). Queries in flight are not kept: their sets stay
    /// used up.
    ///
    /// ```text
    /// state = magic "pir-checklist-state-v1" | records u64 | record_bytes u32 | set_size u32
    ///       | hints u32 | hints x (present u8 | seed 16 | shift u64) | hints x b parity bytes
    /// ```
    pub fn encode_state(&self) -> Vec<u8> {
        Codec::to_bytes(self)
    }

    /// A client from [`Client::encode_state`] bytes, for a database of `params` (an error if
    /// the state is for other parameters or damaged; [`Codec::from_bytes`]). Recomputes the
    /// pointers.
    pub fn decode_state(params: Params, bytes: &[u8]) -> Result<Self, Error> {
        <Self as Codec>::from_bytes(bytes, &params)
    }

    /// The parameters.
    pub fn params(&self) -> &Params {
        &self.params
    }

    /// Sets the client still holds (`m` minus those of queries in flight or abandoned).
    pub fn live_hints(&self) -> usize {
        self.keys.iter().filter(|k| k.is_some()).count()
    }

    /// Starts a lookup of `index`: the two server messages and what [`Client::finish`] needs.
    /// The set used is taken out of the client at once, so it can never be sent twice, even if
    /// this query is abandoned. Errors (before anything is sent) if `index` is out of range or,
    /// with probability below `2^-40`, no set holds it.
    pub fn query(
        &mut self,
        index: u64,
        rng: &mut (impl CryptoRng + ?Sized),
    ) -> Result<(Query, Pending), Error> {
        crate::offline::check_index(index, self.params.records())?;
        if self.used > self.keys.len() / REBUILD_DIVISOR {
            self.point_all();
        }
        let sets = *self.params.sets();
        if rng.random_bool(decoy_probability(&self.params)) {
            let online = self.decoy(index, rng);
            let refresh = self.decoy(index, rng);
            // A decoy round keeps nothing: its fresh set is never used.
            let fresh = sets.random(rng);
            let pending = Pending { used: None, fresh };
            return Ok((Query { online, refresh }, pending));
        }
        let slot = self.find(index)?;
        // `find` leaves the set's elements in `self.elements`.
        let positions: Vec<usize> = (0..sets.size())
            .filter(|&t| self.elements[t] == index)
            .collect();
        let position = positions[rng.random_range(0..positions.len())];
        let Some(key) = self.keys[slot].take() else {
            // `find` returns only slots holding a key.
            return Err(Error::InvalidParameter("the set found is gone".into()));
        };
        let online = sets.puncture(&self.ggm, &key, position);
        // The slot no longer holds its elements (each once, though a set may repeat one).
        self.elements.sort_unstable();
        self.elements.dedup();
        for &x in &self.elements {
            self.pointers.removed(x, slot);
        }
        self.used += 1;
        let b = self.params.record_bytes();
        let parity = self.parities[slot * b..(slot + 1) * b].to_vec();
        let (fresh, fresh_position) =
            sets.gen_through(&self.ggm, index, rng, &mut self.scratch, &mut self.elements);
        let refresh = sets.puncture(&self.ggm, &fresh, fresh_position);
        let pending = Pending {
            used: Some(Used { slot, parity }),
            fresh,
        };
        Ok((Query { online, refresh }, pending))
    }

    /// Completes a lookup with the online server's answer to [`Query::online`] and the offline
    /// server's answer to [`Query::refresh`], `b` bytes each.
    pub fn finish(
        &mut self,
        pending: Pending,
        online: &[u8],
        refresh: &[u8],
    ) -> Result<Outcome, Error> {
        let b = self.params.record_bytes();
        for (what, answer) in [("online", online), ("refresh", refresh)] {
            if answer.len() != b {
                return Err(Error::WrongLength(format!(
                    "the {what} answer has {} bytes, records have {b}",
                    answer.len()
                )));
            }
        }
        let Some(used) = pending.used else {
            return Ok(Outcome::Retry);
        };
        let record: Vec<u8> = used.parity.iter().zip(online).map(|(p, a)| p ^ a).collect();
        let slot = used.slot;
        for ((parity, r), x) in self.parities[slot * b..(slot + 1) * b]
            .iter_mut()
            .zip(refresh)
            .zip(&record)
        {
            *parity = r ^ x;
        }
        self.keys[slot] = Some(pending.fresh);
        let sets = *self.params.sets();
        sets.elements(
            &self.ggm,
            &pending.fresh,
            &mut self.scratch,
            &mut self.elements,
        );
        self.elements.sort_unstable();
        self.elements.dedup();
        for &x in &self.elements {
            self.pointers.added(x, slot);
        }
        Ok(Outcome::Record(record))
    }

    /// The first slot holding `index` (in its order), its elements left in `self.elements`.
    fn find(&mut self, index: u64) -> Result<usize, Error> {
        let sets = *self.params.sets();
        let bound = match self.pointers.first(index) {
            Rank::Known(rank) => {
                let slot = self.pointers.slot(index, rank);
                // A known first rank names a slot holding a key that holds the index: every
                // change of a slot updates the pointers of the elements it loses and gains.
                if let Some(key) = &self.keys[slot] {
                    sets.elements(&self.ggm, key, &mut self.scratch, &mut self.elements);
                    if self.elements.contains(&index) {
                        return Ok(slot);
                    }
                }
                0
            }
            Rank::AtLeast(bound) => bound,
        };
        // m <= 2^28
        for rank in bound..self.keys.len() as u32 {
            let slot = self.pointers.slot(index, rank);
            let Some(key) = &self.keys[slot] else {
                continue;
            };
            sets.elements(&self.ggm, key, &mut self.scratch, &mut self.elements);
            if self.elements.contains(&index) {
                self.pointers.resolved(index, rank);
                return Ok(slot);
            }
        }
        self.pointers.exhausted(index);
        Err(Error::InvalidParameter(
            "no hint set holds this record (probability below 2^-40, or most hints were used \
             by abandoned queries); fetch the hints again"
                .into(),
        ))
    }

    /// A decoy query: a fresh set through `index`, punctured elsewhere, kept with probability
    /// `2 / (c + 1)` where `c` counts `index` in what is sent (module documentation of
    /// [`super`]).
    fn decoy(&mut self, index: u64, rng: &mut (impl CryptoRng + ?Sized)) -> PuncturedKey {
        let sets: SetShape = *self.params.sets();
        loop {
            let (key, through) = sets.gen_with(&self.ggm, index, rng);
            // A decoy needs s >= 2: decoy_probability is zero for s < 2.
            let mut position = rng.random_range(0..sets.size() - 1);
            if position >= through {
                position += 1;
            }
            sets.elements(&self.ggm, &key, &mut self.scratch, &mut self.elements);
            let count = (0..sets.size())
                .filter(|&t| t != position && self.elements[t] == index)
                .count();
            if rng.random_bool(2.0 / (count as f64 + 1.0)) {
                return sets.puncture(&self.ggm, &key, position);
            }
        }
    }
}

/// The saved state ([`Client::encode_state`]). Context: the parameters of the database the
/// state must belong to. A state is always a whole file: its length is checked first.
impl<'a> Codec<'a> for Client {
    type Context = Params;

    fn encode(&self, w: &mut Writer) {
        let m = self.keys.len();
        w.bytes(STATE_MAGIC);
        w.u64(self.params.records());
        // Bounded by Params: record_bytes <= 2^16, s <= 2^24, m <= 2^28.
        w.u32(self.params.record_bytes() as u32);
        w.u32(self.params.sets().size() as u32);
        w.u32(m as u32);
        for key in &self.keys {
            match key {
                Some(key) => {
                    w.u8(1);
                    w.bytes(&key.seed);
                    w.u64(key.shift);
                }
                None => {
                    w.u8(0);
                    w.bytes(&[0; 16]);
                    w.u64(0);
                }
            }
        }
        w.bytes(&self.parities);
    }

    fn decode(r: &mut Reader<'a>, params: &Params) -> Result<Self, Error> {
        let m = params.hints();
        let expected = STATE_MAGIC.len() + 20 + m * 25 + params.hint_bytes();
        crate::offline::open_state(r, STATE_MAGIC, expected, "Checklist")?;
        let shape = (
            r.u64()?,
            r.u32()? as usize,
            r.u32()? as usize,
            r.u32()? as usize,
        );
        if shape
            != (
                params.records(),
                params.record_bytes(),
                params.sets().size(),
                m,
            )
        {
            return Err(Error::DatabaseMismatch(
                "the saved Checklist state is for other parameters".into(),
            ));
        }
        let mut keys = Vec::with_capacity(m);
        for _ in 0..m {
            let present = r.u8()?;
            let seed: [u8; 16] = r.array()?;
            let shift = r.u64()?;
            keys.push(match present {
                0 => None,
                1 if shift < params.records() => Some(SetKey { seed, shift }),
                _ => return Err(Error::Malformed("a saved set key is out of range".into())),
            });
        }
        let parities = r.take(params.hint_bytes())?.to_vec();
        let mut client = Self {
            params: *params,
            ggm: Ggm::new(),
            keys,
            parities,
            pointers: Pointers::new(params.records(), m),
            used: 0,
            scratch: Scratch::default(),
            elements: Vec::with_capacity(params.sets().size()),
        };
        client.point_all();
        Ok(client)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    /// FNV-1a over 32-bit words: a fingerprint of a whole table.
    fn fingerprint(words: impl Iterator<Item = u32>) -> u64 {
        words.fold(0xcbf2_9ce4_8422_2325, |h, w| {
            (h ^ u64::from(w)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }

    /// The client's preprocessing for a fixed master seed, pinned: every set's elements and
    /// every index's two pointers. A faster expander or pointer builder must not change them
    /// (values recorded from the first implementation, which fills the pointers by
    /// [`Pointers::insert`]-equivalent rules; `pointers::tests` checks the builder against it).
    #[test]
    fn preprocessing_output_is_pinned() {
        // 100,000 records: several buckets of the pointer builder, each flushed many times.
        let params = Params::new(100_000, 4).unwrap();
        let request = OfflineRequest {
            master: *b"pinned-master-01",
        };
        let hints = vec![0u8; params.hint_bytes()];
        let client = Client::new(params, &request, &hints).unwrap();
        let (mut scratch, mut elements) = (Scratch::default(), Vec::new());
        let mut all = Vec::new();
        for key in client.keys.iter().flatten() {
            params
                .sets()
                .elements(&client.ggm, key, &mut scratch, &mut elements);
            // Elements are below B = 100,000.
            all.extend(elements.iter().map(|&e| e as u32));
        }
        let pointers = (0..params.records()).flat_map(|x| {
            let word = |rank| match rank {
                Rank::Known(r) => r,
                Rank::AtLeast(b) => 1 << 31 | b,
            };
            [
                word(client.pointers.first(x)),
                word(client.pointers.second(x)),
            ]
        });
        assert_eq!(
            (fingerprint(all.into_iter()), fingerprint(pointers)),
            (3_320_360_331_275_091_221, 4_669_803_021_538_992_112)
        );
    }
}
