//! The key-switching keys a YPIR or YPIR+SP server keeps for its clients: per request
//! ([`KeyStore`], wire modes 1 and 2) and uploaded once ([`KeyCache`], modes 3 and 4, with an
//! expiry and a byte budget).
//!
//! Privacy: a key id names key material that depends only on the client's RLWE secret and the
//! database's public seed, never on an index. It links the queries that use it to each other
//! (as a session would) for at most the expiry; nothing here logs or exposes it.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use pir_core::Error;

use super::rns::{self, Rns};
use super::wire;
use crate::ring::Ring;
pub use crate::single::KeyPolicy;

/// A client's key bodies in NTT form, per level and digit.
pub(crate) type KeySet = Vec<Vec<Rns>>;

/// Key-switching keys clients sent under a key id, most recently used last (YPIR and
/// YPIR+SP), and the keys they uploaded.
#[derive(Debug, Default)]
pub(crate) struct KeyStore {
    sets: Mutex<VecDeque<(wire::KeyId, Arc<KeySet>)>>,
    uploaded: KeyCache,
}

/// Key sets a server keeps for later queries of the same request (about 590 KB each): enough
/// for the requests of one batch; an evicted key id gets an error that says to send again.
pub const MAX_KEY_SETS: usize = 32;

/// Bytes of a key set in memory.
fn bytes_of(keys: &KeySet) -> usize {
    keys.iter()
        .flatten()
        .map(|r| 4 * (r[0].len() + r[1].len()))
        .sum()
}

/// One upload: its id, when it was stored, its keys and their size.
#[derive(Debug)]
struct Uploaded {
    id: wire::KeyId,
    stored: Instant,
    keys: Arc<KeySet>,
    bytes: usize,
}

/// Uploaded keys by key id, oldest upload first, within a [`KeyPolicy`].
#[derive(Debug, Default)]
pub(crate) struct KeyCache {
    state: Mutex<CacheState>,
}

#[derive(Debug, Default)]
struct CacheState {
    policy: KeyPolicy,
    entries: VecDeque<Uploaded>,
    bytes: usize,
}

impl CacheState {
    /// Forgets the uploads expired at `now` under the current policy (oldest first).
    fn expire(&mut self, now: Instant) {
        let expiry = self.policy.expiry;
        while self
            .entries
            .front()
            .is_some_and(|e| e.stored + expiry <= now)
        {
            self.pop_oldest();
        }
    }

    fn pop_oldest(&mut self) {
        if let Some(old) = self.entries.pop_front() {
            self.bytes -= old.bytes;
        }
    }

    fn remove(&mut self, id: &wire::KeyId) {
        if let Some(at) = self.entries.iter().position(|e| e.id == *id) {
            if let Some(old) = self.entries.remove(at) {
                self.bytes -= old.bytes;
            }
        }
    }
}

fn poisoned<T>(_: T) -> Error {
    Error::InvalidParameter("key store poisoned".into())
}

impl KeyCache {
    /// Sets the expiry and budget; uploads already kept beyond the new budget are forgotten,
    /// oldest first.
    pub(crate) fn set_policy(&self, policy: KeyPolicy) -> Result<(), Error> {
        let mut state = self.state.lock().map_err(poisoned)?;
        state.policy = policy;
        while state.bytes > policy.budget_bytes {
            state.pop_oldest();
        }
        Ok(())
    }

    /// Keeps `keys` under `id` until `now + expiry`, forgetting expired and then the oldest
    /// uploads to stay within the budget; refuses keys larger than the whole budget.
    pub(crate) fn insert(
        &self,
        id: wire::KeyId,
        keys: Arc<KeySet>,
        now: Instant,
    ) -> Result<(), Error> {
        let bytes = bytes_of(&keys);
        let mut state = self.state.lock().map_err(poisoned)?;
        let budget = state.policy.budget_bytes;
        if bytes > budget {
            return Err(Error::OutOfRange {
                field: "bytes of uploaded keys; this server's key budget",
                found: bytes as u64,
                limit: budget as u64,
            });
        }
        state.expire(now);
        state.remove(&id);
        while state.bytes + bytes > budget {
            state.pop_oldest();
        }
        state.bytes += bytes;
        state.entries.push_back(Uploaded {
            id,
            stored: now,
            keys,
            bytes,
        });
        Ok(())
    }

    /// The keys uploaded under `id`, if still kept at `now`.
    pub(crate) fn get(&self, id: &wire::KeyId, now: Instant) -> Result<Arc<KeySet>, Error> {
        let mut state = self.state.lock().map_err(poisoned)?;
        state.expire(now);
        state
            .entries
            .iter()
            .find(|e| e.id == *id)
            .map(|e| Arc::clone(&e.keys))
            .ok_or_else(|| {
                Error::UnknownKey(
                    "this server holds no keys under that key id (expired, evicted, or never \
                     uploaded here): upload them again"
                        .into(),
                )
            })
    }

    /// Bytes of uploaded keys kept now.
    #[cfg(test)]
    pub(crate) fn bytes(&self) -> usize {
        self.state.lock().map_or(0, |s| s.bytes)
    }
}

/// Key bodies as sent (coefficients mod `q2`) in NTT form, one residue vector per prime.
fn to_ntt(ring: &Ring, bodies: &wire::KeyBodies) -> KeySet {
    bodies
        .iter()
        .map(|level| {
            level
                .iter()
                .map(|part| {
                    let mut r: Rns = [
                        part.iter()
                            .map(|&x| (x % u64::from(rns::q(0))) as u32)
                            .collect(),
                        part.iter()
                            .map(|&x| (x % u64::from(rns::q(1))) as u32)
                            .collect(),
                    ];
                    rns::forward(ring, &mut r);
                    r
                })
                .collect()
        })
        .collect()
}

impl KeyStore {
    /// Sets the expiry and budget of uploaded keys.
    pub(crate) fn set_policy(&self, policy: KeyPolicy) -> Result<(), Error> {
        self.uploaded.set_policy(policy)
    }

    /// The query's keys in NTT form: converted from the query (and kept under its key id, if
    /// any), or the ones kept under its key id. Errors name no key id.
    pub(crate) fn keys_of(&self, ring: &Ring, query: &wire::Query) -> Result<Arc<KeySet>, Error> {
        match &query.keys {
            wire::Keys::Inline(bodies) => {
                // Converted outside the lock: other queries' lookups do not wait for it.
                let keys = Arc::new(to_ntt(ring, bodies));
                if query.key_id != [0; wire::KEY_ID_LEN] {
                    let mut store = self.sets.lock().map_err(poisoned)?;
                    store.retain(|(id, _)| *id != query.key_id);
                    if store.len() >= MAX_KEY_SETS {
                        store.pop_front();
                    }
                    store.push_back((query.key_id, Arc::clone(&keys)));
                }
                Ok(keys)
            }
            wire::Keys::ById => {
                let mut store = self.sets.lock().map_err(poisoned)?;
                let at = store
                    .iter()
                    .position(|(id, _)| *id == query.key_id)
                    .ok_or_else(|| {
                        Error::InvalidParameter(
                            "this server no longer holds the keys of that key id (too many \
                             clients or a restart): send the request again"
                                .into(),
                        )
                    })?;
                let entry = store.remove(at).ok_or_else(|| {
                    Error::InvalidParameter("key store changed under the lock".into())
                })?;
                let keys = Arc::clone(&entry.1);
                store.push_back(entry);
                Ok(keys)
            }
            wire::Keys::Upload(bodies) => {
                // The decoder checked that the key id is the bodies' digest.
                let keys = Arc::new(to_ntt(ring, bodies));
                self.uploaded
                    .insert(query.key_id, Arc::clone(&keys), Instant::now())?;
                Ok(keys)
            }
            wire::Keys::Cached => self.uploaded.get(&query.key_id, Instant::now()),
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use std::time::Duration;

    fn set(fill: u32, polys: usize) -> Arc<KeySet> {
        Arc::new(vec![vec![[vec![fill; 8], vec![fill; 8]]; polys]])
    }

    fn policy(expiry_s: u64, budget_bytes: usize) -> KeyPolicy {
        KeyPolicy {
            expiry: Duration::from_secs(expiry_s),
            budget_bytes,
        }
    }

    #[test]
    fn uploads_expire() {
        let cache = KeyCache::default();
        cache.set_policy(policy(60, 1 << 20)).unwrap();
        let t0 = Instant::now();
        cache.insert([1; 16], set(1, 1), t0).unwrap();
        assert_eq!(
            cache.get(&[1; 16], t0 + Duration::from_secs(59)).unwrap()[0][0][0][0],
            1
        );
        let late = cache
            .get(&[1; 16], t0 + Duration::from_secs(60))
            .unwrap_err();
        assert!(matches!(late, Error::UnknownKey(_)), "{late}");
        assert!(late.to_string().contains("upload them again"));
        assert_eq!(cache.bytes(), 0, "the expired upload's memory is freed");
        let never = cache.get(&[2; 16], t0).unwrap_err();
        assert!(matches!(never, Error::UnknownKey(_)));
    }

    #[test]
    fn the_budget_forgets_the_oldest_and_refuses_what_never_fits() {
        // Each set of one polynomial is 2 · 8 words = 64 bytes.
        let cache = KeyCache::default();
        cache.set_policy(policy(60, 128)).unwrap();
        let t0 = Instant::now();
        for id in 1..=3u8 {
            cache.insert([id; 16], set(u32::from(id), 1), t0).unwrap();
        }
        assert_eq!(cache.bytes(), 128);
        assert!(matches!(cache.get(&[1; 16], t0), Err(Error::UnknownKey(_))));
        assert!(cache.get(&[2; 16], t0).is_ok() && cache.get(&[3; 16], t0).is_ok());
        // Uploading the same id again replaces it instead of counting it twice.
        cache.insert([3; 16], set(9, 1), t0).unwrap();
        assert_eq!(cache.bytes(), 128);
        assert_eq!(cache.get(&[3; 16], t0).unwrap()[0][0][0][0], 9);
        let huge = cache.insert([4; 16], set(4, 3), t0).unwrap_err();
        assert!(matches!(huge, Error::OutOfRange { .. }), "{huge}");
        assert!(huge.to_string().contains("key budget"));
        assert!(
            cache.get(&[2; 16], t0).is_ok(),
            "a refused upload evicts nothing"
        );
        // Shrinking the budget forgets the oldest; a budget of 0 turns uploads off.
        cache.set_policy(policy(60, 64)).unwrap();
        assert!(cache.get(&[2; 16], t0).is_err() && cache.get(&[3; 16], t0).is_ok());
        cache.set_policy(policy(60, 0)).unwrap();
        assert_eq!(cache.bytes(), 0);
        assert!(cache.insert([5; 16], set(5, 1), t0).is_err());
    }
}
