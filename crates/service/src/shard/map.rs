//! The signed shard map: which rows of which database each shard holds.
//!
//! ```text
//! signed map = map | signer public key [32] | signature [64]
//!              signature = Ed25519 over SHA-256("pir shard map v1" | map)
//! map        = magic "PIRshmap" | version u16 = 1
//!            | scheme u8 | reserved u8 = 0
//!            | database id [32]        what every query batch to the front end names
//!            | rows u64 | row bytes u32 the whole database: rows (records) of row bytes each
//!            | about len u16 | about    opaque to this layer (at most MAX_ABOUT bytes):
//!                                     pir-records puts the whole database's header there
//!            | count u16                1..=MAX_SHARDS
//!            | count x (shard id u16 | first row u64 | rows u64 | part hash [32])
//! ```
//!
//! Shard `k` has id `k`, and the shards cover rows `0..rows` in order without gap or overlap:
//! a map that breaks this is refused when decoded (`Malformed`), so every decoded map
//! describes a whole database. The part hash is the SHA-256 of the shard's rows as stored, so
//! a shard refuses a file that is not its part.

use pir_core::codec::{Codec, Reader, Writer};
use pir_core::wire::Prologue;
use pir_core::{Error, SchemeId};
use pir_keys::{PublicKey, SecretKey, PUBLIC_KEY_LEN, SIGNATURE_LEN};

use super::ShardError;

/// The map's file name in a sharded database directory (records, releases, breach).
pub const MAP_FILE: &str = "shard-map.bin";

/// The file of shard `k`'s rows, back to back, in the directory `dir`.
pub fn part_path(dir: &std::path::Path, k: usize) -> std::path::PathBuf {
    dir.join(format!("shard-{k}.part"))
}

/// What a sharded build writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardOptions {
    /// `S`, the number of shards (1 to [`MAX_SHARDS`]).
    pub shards: usize,
    /// Write only this shard's part (and the map); `None` writes every part.
    pub only: Option<usize>,
}

/// Most shards in one map.
pub const MAX_SHARDS: usize = 256;
/// Largest `about` a map carries.
pub const MAX_ABOUT: usize = 4096;
/// First bytes of a shard map.
pub const PROLOGUE: Prologue = Prologue {
    magic: b"PIRshmap",
    version: 1,
};
/// Domain of the map's signature.
const SIGNATURE_DOMAIN: &[u8] = b"pir shard map v1";
/// Domain of a shard's part id ([`ShardMap::part_id`]).
const PART_DOMAIN: &[u8] = b"pir shard part v1";

/// One shard's rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShardEntry {
    /// Its id (its position in the map).
    pub id: u16,
    /// Its first row.
    pub first_row: u64,
    /// How many rows it holds.
    pub rows: u64,
    /// SHA-256 of its rows as stored.
    pub part_hash: [u8; 32],
}

impl ShardEntry {
    /// Its rows as a range.
    pub fn range(&self) -> std::ops::Range<u64> {
        self.first_row..self.first_row + self.rows
    }
}

/// A database split into shards by rows.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardMap {
    /// The scheme the shards answer.
    pub scheme: SchemeId,
    /// The whole database's id (what clients' query batches name).
    pub database_id: [u8; 32],
    /// Rows of the whole database.
    pub rows: u64,
    /// Bytes per row.
    pub row_bytes: u32,
    /// What the application says about the database (opaque here).
    pub about: Vec<u8>,
    /// The shards, in row order.
    pub shards: Vec<ShardEntry>,
}

impl ShardMap {
    /// The id a query batch to shard `k` names, and its answers name: it binds the database,
    /// the shard and its rows, so a part from another shard or another database is refused
    /// by the shard and caught by the front end, whatever keys the shards sign with.
    pub fn part_id(&self, k: usize) -> Option<[u8; 32]> {
        let shard = self.shards.get(k)?;
        Some(pir_keys::sha256_parts(&[
            PART_DOMAIN,
            &self.database_id,
            &shard.id.to_le_bytes(),
            &shard.first_row.to_le_bytes(),
            &shard.rows.to_le_bytes(),
        ]))
    }

    /// Signs the map with `key`.
    pub fn sign(self, key: &SecretKey) -> SignedShardMap {
        let digest = pir_keys::sha256_parts(&[SIGNATURE_DOMAIN, &self.to_bytes()]);
        let signature = key.sign(&digest);
        SignedShardMap {
            map: self,
            signer: key.public(),
            signature,
        }
    }

    /// Checks the shard layout a decoded map must have.
    fn check(&self) -> Result<(), Error> {
        let bad = |why: String| Err(Error::Malformed(why));
        let mut next = 0u64;
        for (k, shard) in self.shards.iter().enumerate() {
            if usize::from(shard.id) != k {
                return bad(format!("shard {k} has id {}", shard.id));
            }
            if shard.first_row != next || shard.rows == 0 {
                return bad(format!("shard {k} does not start where shard {k} - 1 ends"));
            }
            next = next
                .checked_add(shard.rows)
                .ok_or_else(|| Error::Malformed("shard rows overflow".into()))?;
        }
        if next != self.rows {
            return bad(format!(
                "the shards cover {next} rows, the database has {}",
                self.rows
            ));
        }
        Ok(())
    }
}

impl Codec<'_> for ShardMap {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        PROLOGUE.write(w);
        w.u8(self.scheme as u8);
        w.u8(0);
        w.bytes(&self.database_id);
        w.u64(self.rows);
        w.u32(self.row_bytes);
        w.short_bytes(&self.about);
        w.u16(self.shards.len() as u16);
        for shard in &self.shards {
            w.u16(shard.id);
            w.u64(shard.first_row);
            w.u64(shard.rows);
            w.bytes(&shard.part_hash);
        }
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        PROLOGUE.read(r)?;
        let scheme = SchemeId::from_byte(r.u8()?)?;
        if r.u8()? != 0 {
            return Err(Error::Malformed("reserved byte is not 0".into()));
        }
        let database_id = r.array()?;
        let rows = r.u64()?;
        let row_bytes = r.u32()?;
        let about = r.short_bytes(MAX_ABOUT)?.to_vec();
        let count = usize::from(r.u16()?);
        if count == 0 || count > MAX_SHARDS {
            return Err(Error::OutOfRange {
                field: "shards in a map",
                found: count as u64,
                limit: MAX_SHARDS as u64,
            });
        }
        const ENTRY: usize = 2 + 8 + 8 + 32;
        if r.remaining() < count * ENTRY {
            return Err(Error::Truncated {
                needed: count * ENTRY - r.remaining(),
            });
        }
        let shards = (0..count)
            .map(|_| {
                Ok(ShardEntry {
                    id: r.u16()?,
                    first_row: r.u64()?,
                    rows: r.u64()?,
                    part_hash: r.array()?,
                })
            })
            .collect::<Result<Vec<_>, Error>>()?;
        let map = ShardMap {
            scheme,
            database_id,
            rows,
            row_bytes,
            about,
            shards,
        };
        map.check()?;
        Ok(map)
    }
}

/// A shard map and its signature.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedShardMap {
    /// The map.
    pub map: ShardMap,
    /// Who signed it.
    pub signer: PublicKey,
    /// Ed25519 over SHA-256("pir shard map v1" | map).
    pub signature: [u8; SIGNATURE_LEN],
}

impl SignedShardMap {
    /// The map, if its signature holds and (when given) its signer is `expected`.
    pub fn verify(&self, expected: Option<&PublicKey>) -> Result<&ShardMap, ShardError> {
        if let Some(expected) = expected {
            if expected.0 != self.signer.0 {
                return Err(ShardError::MapSignature(format!(
                    "signed by {}, expected {}",
                    self.signer.fingerprint(),
                    expected.fingerprint()
                )));
            }
        }
        let digest = pir_keys::sha256_parts(&[SIGNATURE_DOMAIN, &self.map.to_bytes()]);
        self.signer
            .verify(&digest, &self.signature)
            .map_err(|_| ShardError::MapSignature("the signature does not hold".into()))?;
        Ok(&self.map)
    }
}

impl Codec<'_> for SignedShardMap {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        self.map.encode(w);
        w.bytes(&self.signer.0);
        w.bytes(&self.signature);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        let map = ShardMap::decode(r, &())?;
        let signer = PublicKey(r.array::<PUBLIC_KEY_LEN>()?);
        let signature = r.array()?;
        Ok(SignedShardMap {
            map,
            signer,
            signature,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(shards: &[u64]) -> ShardMap {
        let mut first = 0;
        let shards = shards
            .iter()
            .enumerate()
            .map(|(k, &rows)| {
                let entry = ShardEntry {
                    id: k as u16,
                    first_row: first,
                    rows,
                    part_hash: [k as u8; 32],
                };
                first += rows;
                entry
            })
            .collect();
        ShardMap {
            scheme: SchemeId::SimplePir,
            database_id: [7; 32],
            rows: first,
            row_bytes: 16,
            about: b"about".to_vec(),
            shards,
        }
    }

    #[test]
    fn a_signed_map_round_trips_and_a_changed_byte_breaks_it() {
        let key = SecretKey::generate().unwrap();
        let signed = sample(&[3, 5, 1]).sign(&key);
        let bytes = signed.to_bytes();
        let back = SignedShardMap::from_bytes(&bytes, &()).unwrap();
        assert_eq!(back, signed);
        assert_eq!(back.verify(Some(&key.public())).unwrap(), &signed.map);
        let other = SecretKey::generate().unwrap().public();
        assert!(matches!(
            back.verify(Some(&other)),
            Err(ShardError::MapSignature(_))
        ));
        let mut changed = bytes.clone();
        changed[20] ^= 1;
        let changed = SignedShardMap::from_bytes(&changed, &()).unwrap();
        assert!(matches!(
            changed.verify(None),
            Err(ShardError::MapSignature(_))
        ));
    }

    #[test]
    fn part_ids_differ_by_shard_and_database() {
        let map = sample(&[3, 5]);
        let mut other = map.clone();
        other.database_id = [8; 32];
        assert_ne!(map.part_id(0), map.part_id(1));
        assert_ne!(map.part_id(0), other.part_id(0));
        assert_eq!(map.part_id(2), None);
    }
}
