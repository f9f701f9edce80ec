//! The key-switching keys a YPIR or YPIR+SP server keeps for its clients.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex};

use pir_core::Error;

use super::rns::{self, Rns};
use super::server::KeySet;
use super::wire;
use crate::ring::Ring;

/// Key-switching keys clients sent under a key id, most recently used last (YPIR and
/// YPIR+SP).
#[derive(Debug, Default)]
pub(crate) struct KeyStore {
    sets: Mutex<VecDeque<(wire::KeyId, Arc<KeySet>)>>,
}

/// Key sets a server keeps for later queries of the same request (about 590 KB each): enough
/// for the requests of one batch; an evicted key id gets an error that says to send again.
pub const MAX_KEY_SETS: usize = 32;

impl KeyStore {
    /// The query's keys in NTT form: converted from the query (and kept under its key id, if
    /// any), or the ones kept under its key id.
    pub(crate) fn keys_of(&self, ring: &Ring, query: &wire::Query) -> Result<Arc<KeySet>, Error> {
        let poisoned = |_| Error::InvalidParameter("key store poisoned".into());
        match &query.keys {
            wire::Keys::Inline(bodies) => {
                // Converted outside the lock: other queries' lookups do not wait for it.
                let keys: KeySet = bodies
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
                    .collect();
                let keys = Arc::new(keys);
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
        }
    }
}
