//! QDP's offline half on the shards of a sharded database, sans I/O: the precompute order a
//! front end sends its shards for each seed it will issue, a shard's bounded store of the
//! partial answers it computed from them, and the two halves of a shard's answer.
//!
//! A QDP server's answer to `(seed id, flips)` is the RAID-PIR answer of `(server, seed,
//! flips)`, and that is linear in the rows: the XOR of the non-flip chunks' rows the seed
//! selects (the partial answer, computable as soon as the seed is drawn) and the flip chunks'
//! rows the flips select (the online half). On a shard both halves are restricted to its rows
//! ([`crate::shard`]), so the XOR over the shards of (partial XOR online half) is the whole
//! server's answer, byte for byte.
//!
//! ```text
//! precompute order = RAID-PIR params | seed 16 bytes    (= the first QUERY_HEADER_LEN bytes of
//!                                                          the plain query (server, seed, flips))
//! its answer       = empty (the shard's signature over the batch says it was taken)
//! ```
//!
//! The order is a plain RAID-PIR query body without its flip chunks, so the partial answer
//! is keyed by the query header it will meet: when a plain query arrives whose header (params
//! and seed) has a stored partial answer, the shard takes it (used once) and scans only the
//! flip chunks' rows; otherwise (a restarted shard, an evicted or replayed seed, an order that
//! never arrived) it scans every processed chunk as plain RAID-PIR. Both give the same bytes.
//!
//! Privacy: the order names the seed of a position-`s` server and its position, which is what
//! that server holds (it drew the seed); shards of position `s` are that server's rows, one
//! operator. Nothing in an order depends on a client's query: it is sent before the seed is
//! issued.

use std::collections::{HashMap, VecDeque};

use pir_core::bits::BitVec;
use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Error};

use crate::engine::{Engine, Prepared};
use crate::prg::Seed;
use crate::raid::{RaidParams, RaidPir, RaidQueryBody, QUERY_HEADER_LEN};

/// The key of a partial answer: a plain RAID-PIR query body's params and seed.
pub type PartialKey = [u8; QUERY_HEADER_LEN];

/// Bytes of a precompute order.
pub const ORDER_LEN: usize = QUERY_HEADER_LEN;

/// Partial answers a shard keeps by default: the whole server's default queue plus its
/// default issued seeds (`crate::qdp::QdpConfig::default`), so that no order of a front end
/// with the default configuration is evicted before its query can arrive. Memory: one
/// answer (`b` bytes in the breach database's single-block mode) per entry.
pub const DEFAULT_SHARD_PARTIALS: usize = 500 + 1024;

/// The precompute order of `seed` for position `server` of `raid`.
pub fn encode_order(raid: &RaidPir, server: usize, seed: &Seed) -> Vec<u8> {
    let mut writer = Writer::with_capacity(ORDER_LEN);
    RaidParams {
        scheme: *raid,
        server,
    }
    .encode(&mut writer);
    writer.bytes(seed);
    writer.into_bytes()
}

/// The key of a plain RAID-PIR query body (`None` if shorter than a query header: such a body
/// is refused by the engine anyway).
pub fn key_of(body: &[u8]) -> Option<PartialKey> {
    body.get(..QUERY_HEADER_LEN)?.try_into().ok()
}

impl Engine {
    /// Decodes a precompute order (untrusted bytes, checked against the query shape) into
    /// its key and the query of its partial answer: the seed's non-flip chunks over this
    /// engine's rows. Answer it with the engine's answer methods (batches share a pass).
    pub fn prepare_order(&self, body: &[u8]) -> Result<(PartialKey, Prepared), Error> {
        if body.len() != ORDER_LEN {
            return Err(Error::Malformed(format!(
                "a QDP precompute order is {ORDER_LEN} bytes, not {}",
                body.len()
            )));
        }
        let mut reader = Reader::new(body);
        let RaidParams { scheme, server } = RaidParams::decode(&mut reader, &self.query_shape())?;
        let seed: Seed = reader.array()?;
        reader.finish()?;
        let flips: Vec<BitVec> = scheme
            .flip_chunks(server)
            .map(|chunk| BitVec::zeros(scheme.chunk_len(chunk)))
            .collect();
        let query = crate::RaidQuery {
            server,
            seed,
            flips,
        };
        let mut selection = scheme.selection(&query)?;
        // The flip chunks are the online half: nothing of them is precomputed.
        for chunk in scheme.flip_chunks(server) {
            selection[chunk] = BitVec::zeros(0);
        }
        let key = key_of(body).ok_or_else(|| Error::Malformed("short order".into()))?;
        Ok((key, self.prepare_raid(scheme, server, selection)))
    }

    /// The online half of a plain RAID-PIR query body: only its flip chunks' rows among this
    /// engine's (the seed is not expanded). XOR its answer into the partial answer stored
    /// under [`key_of`] the body to get the body's whole answer.
    pub fn prepare_online(&self, body: &[u8]) -> Result<Prepared, Error> {
        let shape = self.query_shape();
        let limit = crate::serve::max_query_body(shape);
        if body.len() > limit {
            return Err(Error::Oversized {
                len: body.len(),
                limit,
            });
        }
        let RaidQueryBody { scheme, query } = RaidQueryBody::from_bytes(body, &shape)?;
        let mut selection = vec![BitVec::zeros(0); scheme.chunks()];
        for (chunk, bits) in scheme.flip_chunks(query.server).zip(query.flips) {
            selection[chunk] = bits;
        }
        Ok(self.prepare_raid(scheme, query.server, selection))
    }
}

/// A shard's partial answers, at most `capacity`, the oldest evicted first (an issued seed
/// that is never queried expires at the front end; its order here ages out the same way).
#[derive(Debug)]
pub struct ShardPartials {
    capacity: usize,
    answers: HashMap<PartialKey, Vec<u8>>,
    /// Keys in insertion order; keys already taken are skipped lazily.
    order: VecDeque<PartialKey>,
}

impl ShardPartials {
    /// An empty store of at most `capacity` partial answers (0 keeps none: every query is
    /// answered by a full scan).
    pub fn new(capacity: usize) -> Self {
        Self {
            capacity,
            answers: HashMap::new(),
            order: VecDeque::new(),
        }
    }

    /// Partial answers held.
    pub fn len(&self) -> usize {
        self.answers.len()
    }

    /// Whether none is held.
    pub fn is_empty(&self) -> bool {
        self.answers.is_empty()
    }

    /// The most held.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Keeps `answer` under `key`, evicting the oldest beyond the capacity. An order sent
    /// twice keeps its newer answer (the same bytes: the same seed over the same rows).
    pub fn insert(&mut self, key: PartialKey, answer: Vec<u8>) {
        if self.capacity == 0 {
            return;
        }
        if self.answers.insert(key, answer).is_none() {
            self.order.push_back(key);
        }
        while self.answers.len() > self.capacity {
            match self.order.pop_front() {
                Some(old) => {
                    self.answers.remove(&old);
                }
                None => break,
            }
        }
        // Taken keys leave stale entries in `order`; drop them once they outnumber the live.
        if self.order.len() > 2 * self.capacity.max(self.answers.len()) {
            let answers = &self.answers;
            self.order.retain(|k| answers.contains_key(k));
        }
    }

    /// Removes and returns the partial answer of the plain query `body` (used once).
    pub fn take(&mut self, body: &[u8]) -> Option<Vec<u8>> {
        self.answers.remove(&key_of(body)?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_store_is_bounded_and_answers_are_taken_once() {
        let mut store = ShardPartials::new(2);
        let key = |n: u8| [n; QUERY_HEADER_LEN];
        store.insert(key(1), vec![1]);
        store.insert(key(2), vec![2]);
        store.insert(key(3), vec![3]);
        assert_eq!(store.len(), 2);
        assert_eq!(store.take(&key(1)), None, "the oldest was evicted");
        assert_eq!(store.take(&key(2)), Some(vec![2]));
        assert_eq!(store.take(&key(2)), None, "taken once");
        assert_eq!(store.take(&key(3)[..5]), None, "a short body has no key");
        for n in 0..100 {
            store.insert(key(n), vec![n]);
            store.take(&key(n));
        }
        assert!(store.order.len() <= 4, "taken keys do not pile up");
        let mut none = ShardPartials::new(0);
        none.insert(key(1), vec![1]);
        assert!(none.is_empty());
    }
}
