//! Keyword PIR from a distributed point function: look up a value by its key (a domain name,
//! a hash) among sparse keys, privately, from two servers (BGI 2016; the DPF baseline of
//! Checklist, Kogan and Corrigan-Gibbs 2021, section 7.1, for sparse keys).
//!
//! Each key is mapped to a point of a large domain, `x = SHA-256(key)` truncated to
//! [`DOMAIN_BITS`] bits; a server stores `(x, fingerprint | value)` for its keys. The client
//! sends each server one DPF key for the point of the key it wants; each server evaluates its
//! DPF key only at its stored points ([`DpfKey::eval_sorted`]: `O(n (d - log n))` AES blocks
//! for `n` keys in a depth-`d` tree, never the `2^47` domain) and XORs the payloads of the
//! points where its share is 1. The two answers XOR to the payload at the client's point, or
//! to zero when no key lies there; a 16-byte fingerprint (another part of the key's SHA-256)
//! tells a stored key from an absent one.
//!
//! Privacy: each server sees one DPF key, pseudorandom whatever the key (128-bit security,
//! fixed-key AES), as long as the two servers do not collude. Work and answer size depend only
//! on the database.
//!
//! Two of `n` keys share a point with probability about `n^2 / 2^48` (`3 x 10^-3` at a
//! million keys, `3 x 10^-2` at three million): [`KeywordDatabase::build`] refuses such a set
//! rather than serve one of the two.

use pir_core::Error;
use rand::CryptoRng;

use crate::dpf::{self, DpfKey};

/// Bits of the key domain: `2^47` points, the largest a DPF key takes (a tree of depth
/// [`dpf::MAX_DEPTH`] = 40 over leaves of 128 points; keys of 714 bytes).
pub const DOMAIN_BITS: u32 = 47;
/// Bytes of the fingerprint stored in front of every value.
pub const FINGERPRINT: usize = 16;
/// Points of the domain.
pub const POINTS: usize = 1 << DOMAIN_BITS;

/// A key's point and fingerprint: the low 47 bits of its SHA-256's first 8 bytes
/// (little-endian), and bytes 16..32.
pub fn locate(key: &[u8]) -> (u64, [u8; FINGERPRINT]) {
    let digest = pir_keys::sha256(key);
    let mut point = [0u8; 8];
    point.copy_from_slice(&digest[..8]);
    let mut fingerprint = [0u8; FINGERPRINT];
    fingerprint.copy_from_slice(&digest[16..]);
    (u64::from_le_bytes(point) & (POINTS as u64 - 1), fingerprint)
}

/// What a server holds: points in ascending order and their payloads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeywordDatabase {
    points: Vec<u64>,
    /// `fingerprint | value` per point, `FINGERPRINT + value_bytes` each.
    payloads: Vec<u8>,
    value_bytes: usize,
}

impl KeywordDatabase {
    /// Builds the database of `(key, value)` pairs; every value is `value_bytes` long. Errors
    /// on a wrong value length or two keys on one point.
    pub fn build(entries: &[(Vec<u8>, Vec<u8>)], value_bytes: usize) -> Result<Self, Error> {
        let mut located: Vec<(u64, [u8; FINGERPRINT], &[u8])> = Vec::with_capacity(entries.len());
        for (key, value) in entries {
            if value.len() != value_bytes {
                return Err(Error::InvalidParameter(format!(
                    "a value of {} bytes among values of {value_bytes}",
                    value.len()
                )));
            }
            let (point, fingerprint) = locate(key);
            located.push((point, fingerprint, value));
        }
        located.sort_unstable_by_key(|e| e.0);
        if located.windows(2).any(|w| w[0].0 == w[1].0) {
            return Err(Error::InvalidParameter(
                "two keys share a point of the 2^47 domain (or a key is repeated): split the \
                 keys into smaller databases"
                    .into(),
            ));
        }
        let stride = FINGERPRINT + value_bytes;
        let mut payloads = Vec::with_capacity(located.len() * stride);
        for (_, fingerprint, value) in &located {
            payloads.extend_from_slice(fingerprint);
            payloads.extend_from_slice(value);
        }
        Ok(Self {
            points: located.iter().map(|e| e.0).collect(),
            payloads,
            value_bytes,
        })
    }

    /// Keys stored.
    pub fn len(&self) -> usize {
        self.points.len()
    }

    /// True when no key is stored.
    pub fn is_empty(&self) -> bool {
        self.points.is_empty()
    }

    /// Bytes of an answer: `FINGERPRINT + value_bytes`.
    pub fn answer_bytes(&self) -> usize {
        FINGERPRINT + self.value_bytes
    }

    /// One server's answer to `key`.
    pub fn answer(&self, key: &DpfKey) -> Result<Vec<u8>, Error> {
        let bits = key.eval_sorted(POINTS, &self.points)?;
        let stride = self.answer_bytes();
        let mut out = vec![0u8; stride];
        for (k, bit) in bits.into_iter().enumerate() {
            if bit {
                for (o, p) in out
                    .iter_mut()
                    .zip(&self.payloads[k * stride..(k + 1) * stride])
                {
                    *o ^= p;
                }
            }
        }
        Ok(out)
    }
}

/// The client's half of a lookup: the fingerprint to check.
#[derive(Clone)]
pub struct KeywordState {
    fingerprint: [u8; FINGERPRINT],
}

impl std::fmt::Debug for KeywordState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KeywordState").finish_non_exhaustive()
    }
}

/// The DPF keys for servers 0 and 1 to look `key` up.
pub fn query(
    key: &[u8],
    rng: &mut (impl CryptoRng + ?Sized),
) -> Result<([DpfKey; 2], KeywordState), Error> {
    let (point, fingerprint) = locate(key);
    let mut seeds = [[0u8; 16]; 2];
    for seed in &mut seeds {
        rng.fill_bytes(seed);
    }
    let keys = dpf::generate_from_seeds(point as usize, POINTS, seeds)?;
    Ok((keys, KeywordState { fingerprint }))
}

/// The value, if the key is stored, from both servers' answers.
pub fn decode(state: &KeywordState, answers: [&[u8]; 2]) -> Result<Option<Vec<u8>>, Error> {
    if answers[0].len() != answers[1].len() || answers[0].len() < FINGERPRINT {
        return Err(Error::WrongLength(format!(
            "keyword answers of {} and {} bytes",
            answers[0].len(),
            answers[1].len()
        )));
    }
    let payload: Vec<u8> = answers[0]
        .iter()
        .zip(answers[1])
        .map(|(a, b)| a ^ b)
        .collect();
    Ok((payload[..FINGERPRINT] == state.fingerprint).then(|| payload[FINGERPRINT..].to_vec()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn stored_keys_are_found_and_absent_ones_are_not() {
        let entries: Vec<(Vec<u8>, Vec<u8>)> = (0..2000u32)
            .map(|k| {
                (
                    format!("host{k}.example").into_bytes(),
                    k.to_le_bytes().repeat(8),
                )
            })
            .collect();
        let db = KeywordDatabase::build(&entries, 32).unwrap();
        assert_eq!(db.len(), 2000);
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        for k in [0u32, 1, 999, 1999] {
            let (keys, state) = query(format!("host{k}.example").as_bytes(), &mut rng).unwrap();
            let a = db.answer(&keys[0]).unwrap();
            let b = db.answer(&keys[1]).unwrap();
            assert_eq!(a.len(), db.answer_bytes());
            assert_eq!(
                decode(&state, [&a, &b]).unwrap(),
                Some(k.to_le_bytes().repeat(8))
            );
        }
        let (keys, state) = query(b"absent.example", &mut rng).unwrap();
        let a = db.answer(&keys[0]).unwrap();
        let b = db.answer(&keys[1]).unwrap();
        assert_eq!(decode(&state, [&a, &b]).unwrap(), None);
        assert!(decode(&state, [&a, &b[1..]]).is_err());
    }

    #[test]
    fn bad_databases_are_refused() {
        let twice = vec![(b"k".to_vec(), vec![0; 4]), (b"k".to_vec(), vec![1; 4])];
        assert!(KeywordDatabase::build(&twice, 4).is_err());
        assert!(KeywordDatabase::build(&[(b"k".to_vec(), vec![0; 3])], 4).is_err());
    }
}
