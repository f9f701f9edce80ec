//! Server-chosen seeds: the secret seed key, unique seeds and ids from a counter, and the
//! counter's high-water mark reserved through a [`SeedStore`] before any seed is used.

use super::*;

/// The secret AES-128 key from which a server derives its seeds and seed ids.
#[derive(Clone)]
pub struct SeedKey([u8; 16]);

impl std::fmt::Debug for SeedKey {
    // The key determines every seed: keep it out of logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SeedKey(..)")
    }
}

impl SeedKey {
    /// A fresh key from a cryptographic RNG (one `fill_bytes` of 16 bytes).
    pub fn random(rng: &mut impl CryptoRng) -> SeedKey {
        let mut key = [0u8; 16];
        rng.fill_bytes(&mut key);
        SeedKey(key)
    }

    /// A key restored from its bytes.
    pub fn from_bytes(bytes: [u8; 16]) -> SeedKey {
        SeedKey(bytes)
    }

    /// The key's bytes, for a store that persists it.
    pub fn to_bytes(&self) -> [u8; 16] {
        self.0
    }
}

/// One seed from a [`SeedSource`].
#[derive(Clone, PartialEq, Eq)]
pub struct FreshSeed {
    /// The counter it was derived from (server-internal, never sent).
    pub counter: u64,
    /// Its public id.
    pub id: u64,
    /// The seed.
    pub seed: Seed,
}

impl std::fmt::Debug for FreshSeed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("FreshSeed")
            .field("counter", &self.counter)
            .field("id", &self.id)
            .finish_non_exhaustive()
    }
}

/// Derives unique seeds: `seed = AES-128_K(SEED_LABEL || counter)`, counters reserved in
/// batches through a [`SeedStore`] before any of them is used.
pub struct SeedSource<S> {
    cipher: Aes128,
    store: S,
    next: u64,
    reserved: u64,
    batch: u64,
}

impl<S> std::fmt::Debug for SeedSource<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SeedSource")
            .field("next", &self.next)
            .field("reserved", &self.reserved)
            .finish_non_exhaustive()
    }
}

impl<S: SeedStore> SeedSource<S> {
    /// Opens a source that continues above the store's high-water mark; `batch >= 1` counters
    /// are reserved per store write (a crash wastes at most `batch` counters).
    pub fn open(key: &SeedKey, mut store: S, batch: u64) -> Result<Self, QdpError> {
        if batch == 0 {
            return Err(
                Error::InvalidParameter("QDP reserve batch must be at least 1".into()).into(),
            );
        }
        let high_water = store.load().map_err(QdpError::Store)?;
        Ok(SeedSource {
            cipher: Aes128::new(&key.0.into()),
            store,
            next: high_water,
            reserved: high_water,
            batch,
        })
    }

    /// The next counter this source will use.
    pub fn next_counter(&self) -> u64 {
        self.next
    }

    /// The next seed; reserves a new range in the store first when the current one is used up.
    pub fn next_seed(&mut self) -> Result<FreshSeed, QdpError> {
        if self.next == self.reserved {
            let upto = self.reserved.saturating_add(self.batch);
            if upto == self.reserved {
                return Err(QdpError::CountersExhausted);
            }
            self.store.reserve(upto).map_err(QdpError::Store)?;
            self.reserved = upto;
        }
        let counter = self.next;
        self.next += 1;
        let id_block = self.prf(ID_LABEL, counter);
        let mut id = [0u8; 8];
        id.copy_from_slice(&id_block[..8]);
        Ok(FreshSeed {
            counter,
            id: u64::from_le_bytes(id),
            seed: self.prf(SEED_LABEL, counter),
        })
    }

    fn prf(&self, label: [u8; 8], counter: u64) -> [u8; 16] {
        let mut block = [0u8; 16];
        block[..8].copy_from_slice(&label);
        block[8..].copy_from_slice(&counter.to_be_bytes());
        let mut block = aes::Block::from(block);
        self.cipher.encrypt_block(&mut block);
        block.into()
    }
}
