//! Key-value databases: cuckoo hashing with two hash functions, no stash.
//!
//! Every key has two candidate slots; it is stored in one of them (Pagh and Rodler, "Cuckoo
//! hashing", 2004). A client fetches *both* candidates with two PIR queries in one request, so
//! the server sees the same thing for every key, present or not: two LWE queries. No bucket or
//! shard id ever leaves the client.
//!
//! ```text
//! d            = SHA-256("pir-records cuckoo v1" | cuckoo_seed (16 B) | key)
//! h1(key)      = u64 LE of d[0..8]  mod slots
//! h2(key)      = u64 LE of d[8..16] mod slots
//! fingerprint  = d[16..24] with its lowest bit set (so it is never 8 zero bytes)
//! slot         = fingerprint (8 B) | value length u32 LE | value | zero padding   ([`Slot`])
//!                (every slot SLOT_OVERHEAD + value_max bytes; an empty slot is all zeros)
//! slots        = ceil(keys × SLOTS_PER_KEY) + 1
//! ```
//!
//! Building: keys are inserted one by one, evicting residents to their other slot for at most
//! [`MAX_KICKS`] moves; if one insertion fails, the whole table is rebuilt with a fresh random
//! seed (at most [`MAX_SEEDS`] times). With two hash functions and load `1 / SLOTS_PER_KEY`
//! = 0.4 (below the 0.5 threshold) a build fails with probability `O(1 / keys)`, so the retries
//! practically never go past the second seed. The seed is public: it only spreads the keys.
//!
//! A lookup says "not found" when neither candidate slot holds the key's fingerprint; a
//! different key with the same 64-bit fingerprint at one of the two slots (probability about
//! `2^-63` per lookup) would be returned instead.

use pir_core::codec::{Codec, Reader, Writer};
use rand::{CryptoRng, RngCore};
use sha2::{Digest, Sha256};

use crate::format::{finish_header, DbHeader, DbKind, RecordsError, MAX_RECORD_SIZE};
pub use crate::format::{FINGERPRINT_LEN, SLOT_OVERHEAD};

/// Slots per key: load factor 0.4, below the 0.5 threshold of two-choice cuckoo hashing.
pub const SLOTS_PER_KEY: f64 = 2.5;
/// Evictions tried for one insertion before starting over with a new seed.
pub const MAX_KICKS: usize = 1000;
/// Seeds tried before giving up.
pub const MAX_SEEDS: usize = 32;
/// Longest key accepted.
pub const MAX_KEY_LEN: usize = 4096;

/// The two candidate slots and the fingerprint of `key` under `seed` in a table of `slots`.
pub fn hash_key(seed: &[u8; 16], slots: u64, key: &[u8]) -> ([u64; 2], [u8; FINGERPRINT_LEN]) {
    let d = Sha256::new()
        .chain_update(b"pir-records cuckoo v1")
        .chain_update(seed)
        .chain_update(key)
        .finalize();
    let word = |i: usize| {
        let mut b = [0u8; 8];
        b.copy_from_slice(&d[i..i + 8]);
        u64::from_le_bytes(b)
    };
    let mut fingerprint = [0u8; FINGERPRINT_LEN];
    fingerprint.copy_from_slice(&d[16..16 + FINGERPRINT_LEN]);
    fingerprint[0] |= 1;
    ([word(0) % slots, word(8) % slots], fingerprint)
}

impl DbHeader {
    /// The two record indices a lookup of `key` fetches (possibly equal; fetch both anyway).
    pub fn candidates(&self, key: &[u8]) -> [u64; 2] {
        hash_key(&self.cuckoo_seed, self.records, key).0
    }

    /// The value of `key` if one of the fetched candidate slots holds it, `None` if not.
    /// Errors if a slot holding the key is malformed.
    pub fn find_value(&self, key: &[u8], slots: &[&[u8]]) -> Result<Option<Vec<u8>>, RecordsError> {
        let (_, fingerprint) = hash_key(&self.cuckoo_seed, self.records, key);
        for &slot in slots {
            if slot.get(..FINGERPRINT_LEN) != Some(&fingerprint[..]) {
                continue;
            }
            return match Slot::from_bytes(slot, &self.record_size) {
                Ok(slot) => Ok(Some(slot.value.to_vec())),
                Err(e) => Err(RecordsError::Malformed(format!(
                    "the slot holding the key: {e}"
                ))),
            };
        }
        Ok(None)
    }
}

/// One cuckoo slot: `fingerprint (8 B) | value length u32 LE | value | zero padding`, exactly
/// the record size of the database. Context: that size (so the value is at most
/// `size - SLOT_OVERHEAD` bytes, checked before the value is read). An empty slot is all zeros:
/// a zero fingerprint, which no key has, and no value. The padding is not checked on decoding
/// (older readers never did); it is always written as zeros.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Slot<'a> {
    /// The key's fingerprint ([`hash_key`]); all zeros in an empty slot.
    pub fingerprint: [u8; FINGERPRINT_LEN],
    /// The value, borrowed.
    pub value: &'a [u8],
    /// Bytes of the whole slot (the database's record size).
    size: usize,
}

impl<'a> Slot<'a> {
    /// A slot of `size` bytes holding `value` under `fingerprint`; `None` if the value does not
    /// fit (more than `size - SLOT_OVERHEAD` bytes, or above `u32::MAX`).
    pub fn new(fingerprint: [u8; FINGERPRINT_LEN], value: &'a [u8], size: usize) -> Option<Self> {
        let fits =
            value.len() <= size.checked_sub(SLOT_OVERHEAD)? && u32::try_from(value.len()).is_ok();
        fits.then_some(Self {
            fingerprint,
            value,
            size,
        })
    }

    /// An empty slot of `size` bytes (all zeros).
    pub fn empty(size: usize) -> Self {
        Self {
            fingerprint: [0; FINGERPRINT_LEN],
            value: &[],
            size,
        }
    }

    /// Bytes of the whole slot.
    pub fn size(&self) -> usize {
        self.size
    }
}

impl<'a> Codec<'a> for Slot<'a> {
    type Context = usize;

    fn encode(&self, w: &mut Writer) {
        const ZEROS: [u8; 256] = [0; 256];
        w.bytes(&self.fingerprint);
        // Fits: `Slot::new` checked the value against u32 and the size.
        w.u32(self.value.len() as u32);
        w.bytes(self.value);
        let mut padding = self.size.saturating_sub(SLOT_OVERHEAD + self.value.len());
        while padding > 0 {
            let n = padding.min(ZEROS.len());
            w.bytes(&ZEROS[..n]);
            padding -= n;
        }
    }

    fn decode(r: &mut Reader<'a>, size: &usize) -> Result<Self, pir_core::Error> {
        let size = *size;
        if size < SLOT_OVERHEAD {
            return Err(pir_core::Error::InvalidParameter(format!(
                "a slot of {size} bytes (at least {SLOT_OVERHEAD})"
            )));
        }
        let fingerprint = r.array()?;
        let len = r.u32()? as usize;
        let value_max = size - SLOT_OVERHEAD;
        if len > value_max {
            return Err(pir_core::Error::OutOfRange {
                field: "slot value length",
                found: len as u64,
                limit: value_max as u64,
            });
        }
        let value = r.take(len)?;
        r.skip(value_max - len)?;
        Ok(Self {
            fingerprint,
            value,
            size,
        })
    }
}

/// A key and its value.
pub type Pair = (Vec<u8>, Vec<u8>);

/// Parses `key,value` lines: the key is everything before the first comma, the value the rest
/// of the line (a trailing `\r` is dropped). Empty lines are skipped; empty keys, lines
/// without a comma and repeated keys are errors naming the line.
pub fn parse_key_values(text: &[u8]) -> Result<Vec<Pair>, RecordsError> {
    let mut pairs = Vec::new();
    let mut seen = std::collections::HashSet::new();
    for (number, line) in text.split(|&b| b == b'\n').enumerate() {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() {
            continue;
        }
        let bad = |why: &str| RecordsError::Input(format!("line {}: {why}", number + 1));
        let comma = line
            .iter()
            .position(|&b| b == b',')
            .ok_or_else(|| bad("expected key,value"))?;
        let (key, value) = (&line[..comma], &line[comma + 1..]);
        if key.is_empty() || key.len() > MAX_KEY_LEN {
            return Err(bad("the key must be 1 to 4096 bytes"));
        }
        if !seen.insert(key) {
            return Err(bad("this key appeared before"));
        }
        pairs.push((key.to_vec(), value.to_vec()));
    }
    if pairs.is_empty() {
        return Err(RecordsError::Input("no key,value lines".into()));
    }
    Ok(pairs)
}

/// A key-value database: every value padded into a slot of `SLOT_OVERHEAD + longest value`
/// bytes, the slots placed by cuckoo hashing. Returns the header and the payload.
pub fn build_key_values(
    pairs: &[(Vec<u8>, Vec<u8>)],
    rng: &mut impl CryptoRng,
) -> Result<(DbHeader, Vec<u8>), RecordsError> {
    let value_max = pairs.iter().map(|(_, v)| v.len()).max().unwrap_or(0);
    let record_size = SLOT_OVERHEAD + value_max.max(1);
    if record_size > MAX_RECORD_SIZE {
        return Err(RecordsError::Input(format!(
            "values may be at most {} bytes",
            MAX_RECORD_SIZE - SLOT_OVERHEAD
        )));
    }
    let slots = (pairs.len() as f64 * SLOTS_PER_KEY).ceil() as u64 + 1;
    for _ in 0..MAX_SEEDS {
        let mut seed = [0u8; 16];
        rng.fill_bytes(&mut seed);
        if let Some(table) = place(pairs, &seed, slots, rng) {
            let mut w = Writer::with_capacity(slots as usize * record_size);
            for entry in &table {
                let slot = match entry {
                    // Fits: record_size is SLOT_OVERHEAD + the longest value, under
                    // MAX_RECORD_SIZE.
                    Some((fingerprint, pair)) => {
                        Slot::new(*fingerprint, &pairs[*pair].1, record_size).ok_or_else(|| {
                            RecordsError::Input("a value longer than its slot".into())
                        })?
                    }
                    None => Slot::empty(record_size),
                };
                slot.encode(&mut w);
            }
            let payload = w.into_bytes();
            let header = finish_header(
                DbKind::KeyValue,
                record_size,
                slots,
                0,
                pairs.len() as u64,
                seed,
                &payload,
                rng,
            );
            return Ok((header, payload));
        }
    }
    Err(RecordsError::Placement(MAX_SEEDS))
}

/// One cuckoo placement attempt: slot → (fingerprint, pair index), or `None` if a key could
/// not be placed within [`MAX_KICKS`] evictions.
type Table = Vec<Option<([u8; FINGERPRINT_LEN], usize)>>;

fn place(
    pairs: &[(Vec<u8>, Vec<u8>)],
    seed: &[u8; 16],
    slots: u64,
    rng: &mut impl RngCore,
) -> Option<Table> {
    let mut table: Table = vec![None; slots as usize];
    let hashes: Vec<([u64; 2], [u8; FINGERPRINT_LEN])> = pairs
        .iter()
        .map(|(key, _)| hash_key(seed, slots, key))
        .collect();
    for start in 0..pairs.len() {
        let mut item = start;
        let [a, b] = hashes[item].0;
        let mut at = if table[b as usize].is_none() { b } else { a };
        let mut placed = false;
        for _ in 0..MAX_KICKS {
            let resident = table[at as usize].replace((hashes[item].1, item));
            match resident {
                None => {
                    placed = true;
                    break;
                }
                Some((_, evicted)) => {
                    item = evicted;
                    let [a, b] = hashes[item].0;
                    // Move the evicted key to its other slot (a random one if both are equal).
                    at = if a == at {
                        b
                    } else if b == at || rng.next_u32() & 1 == 0 {
                        a
                    } else {
                        b
                    };
                }
            }
        }
        if !placed {
            return None;
        }
    }
    Some(table)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    fn pairs(count: usize) -> Vec<(Vec<u8>, Vec<u8>)> {
        (0..count)
            .map(|i| {
                (
                    format!("key-{i}").into_bytes(),
                    format!("value {}", "x".repeat(i % 13)).into_bytes(),
                )
            })
            .collect()
    }

    #[test]
    fn every_key_is_at_one_of_its_candidates_and_missing_keys_are_not_found() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
        for count in [1, 2, 10, 1000] {
            let pairs = pairs(count);
            let (header, payload) = build_key_values(&pairs, &mut rng).unwrap();
            assert_eq!(header.entries, count as u64);
            let slot = |i: u64| {
                let i = i as usize;
                &payload[i * header.record_size..(i + 1) * header.record_size]
            };
            for (key, value) in &pairs {
                let [a, b] = header.candidates(key);
                let found = header.find_value(key, &[slot(a), slot(b)]).unwrap();
                assert_eq!(found.as_ref(), Some(value));
            }
            for missing in [&b"key-x"[..], b"", b"nope"] {
                let [a, b] = header.candidates(missing);
                assert_eq!(
                    header.find_value(missing, &[slot(a), slot(b)]).unwrap(),
                    None
                );
            }
        }
    }

    #[test]
    fn parsing_reports_lines() {
        let parsed = parse_key_values(b"a,1\r\n\nb,with,commas\nc,\n").unwrap();
        assert_eq!(parsed[1], (b"b".to_vec(), b"with,commas".to_vec()));
        assert_eq!(parsed[2].1, b"");
        for (text, line) in [
            (&b"a,1\nno comma\n"[..], "line 2"),
            (b"a,1\na,2", "line 2"),
            (b",x", "line 1"),
        ] {
            let error = parse_key_values(text).unwrap_err().to_string();
            assert!(error.contains(line), "{error}");
        }
        assert!(parse_key_values(b"\n\n").is_err());
    }

    #[test]
    fn a_damaged_slot_is_an_error_not_a_panic() {
        let header = DbHeader {
            kind: DbKind::KeyValue,
            record_size: 20,
            records: 5,
            last_len: 0,
            entries: 1,
            cuckoo_seed: [4; 16],
            matrix_seeds: [[0; 16]; 2],
            payload_hash: [0; 32],
        };
        let (_, fingerprint) = hash_key(&header.cuckoo_seed, 5, b"k");
        let mut slot = vec![0u8; 20];
        slot[..8].copy_from_slice(&fingerprint);
        slot[8..12].copy_from_slice(&100u32.to_le_bytes());
        assert!(header.find_value(b"k", &[&slot]).is_err());
        assert_eq!(header.find_value(b"k", &[&slot[..3]]).unwrap(), None);
    }
}
