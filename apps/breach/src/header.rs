//! The database header: everything a server or a client must know about a breach database,
//! in a fixed 256-byte, little-endian layout that precedes the blocks in the database file.
//!
//! ```text
//! offset size  field
//!   0     8    magic "PIRbreDB"
//!   8     2    version u16 (= 1)
//!  10     2    header length u16 (= 256; the blocks start here, 64-byte aligned)
//!  12     1    corpus format (1 hibp, 2 passwords, 3 pairs)
//!  13     1    hash kind (1 SHA-1, 2 Argon2id, 3 SHA-256)
//!  14     1    k, prefix bits (bucket count = 2^k)
//!  15     1    counts stored (0 or 1)
//!  16     2    w, value bits stored per entry
//!  18     2    reserved (0)
//!  20    12    Argon2id m (KiB), t, p: u32 each (0 unless the hash is Argon2id)
//!  32     8    bucket count u64 (= 2^k)
//!  40     4    block size u32 (a multiple of 64)
//!  44     4    reserved (0)
//!  48    16    blinding key id (pairs; 0 otherwise), see `BlindingKey::key_id`
//!  64    32    SHA-256 of the blocks
//!  96    64    build statistics, u64 each: entries, input lines, skipped lines, bad lines,
//!              total count, smallest bucket, largest bucket, creation time (Unix seconds)
//! 160    96    reserved (0)
//! ```
//!
//! For SHA-1 corpora an entry keeps the first `k + w` bits of the hash (`k + w = 160` unless
//! a truncated build was asked for); for pairs corpora it is a `w = 128`-bit tag. The
//! database id ([`DbHeader::database_id`]) is the SHA-256 of these 256 bytes, and so covers
//! the blocks: two servers of one deployment must report the same id.

use pir_core::database::MAX_BLOCK_SIZE;
use pir_core::wire::{Prologue, Reader, Writer};
use pir_core::Codec;
use pir_core::{DbShape, LINE};
use sha2::{Digest, Sha256};

use crate::bits::{extract_value, Value};
use crate::blind::{KEY_ID_BYTES, TAG_BITS};
use crate::bucket::{Bucket, BucketCodec, BLOCK_HEADER_BYTES};
use crate::corpus::CorpusFormat;
use crate::credential::{Argon2Params, HashKind, CREDENTIAL_HASH_BYTES};
use crate::BreachError;

/// First bytes of a database file.
pub const MAGIC: [u8; 8] = *b"PIRbreDB";
/// The only header version this build reads and writes.
pub const VERSION: u16 = 1;
/// Prologue of a breach database file.
pub const PROLOGUE: Prologue = Prologue {
    magic: &MAGIC,
    version: VERSION,
};
/// Bytes of the header; the blocks start at this (64-byte aligned) offset.
pub const HEADER_LEN: usize = 256;

/// Most prefix bits of a SHA-1 database: 20, so that one HIBP range prefix (5 hex digits,
/// 20 bits) lies in exactly one bucket.
pub const MAX_SHA1_PREFIX_BITS: u32 = 20;
/// Most prefix bits of a credential database (16 Mi buckets; the PIR query grows with the
/// bucket count).
pub const MAX_PAIRS_PREFIX_BITS: u32 = 24;
/// Fewest hash bits a (truncated) SHA-1 database keeps per entry.
pub const MIN_SHA1_ENTRY_BITS: u32 = 32;
/// Bytes of a count in the fixed-width layout that [`DbHeader::compression_ratio`] compares
/// against (HIBP's largest counts are below 2^32).
pub const FIXED_COUNT_BYTES: usize = 4;

/// Statistics of the build, kept in the header for operators (not used by the protocol).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct BuildStats {
    /// Distinct entries stored.
    pub entries: u64,
    /// Lines read from the corpus.
    pub input_lines: u64,
    /// Blank lines, comments and HIBP padding lines.
    pub skipped_lines: u64,
    /// Malformed lines skipped.
    pub bad_lines: u64,
    /// Sum of the counts (SHA-1 corpora) or number of credentials (pairs).
    pub total_count: u64,
    /// Entries in the smallest bucket.
    pub min_bucket: u64,
    /// Entries in the largest bucket.
    pub max_bucket: u64,
    /// When the database was built, Unix seconds.
    pub created_unix: u64,
}

impl BuildStats {
    /// Mean entries per bucket.
    pub fn mean_bucket(&self, bucket_count: usize) -> f64 {
        self.entries as f64 / bucket_count.max(1) as f64
    }
}

/// The header of a breach database.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DbHeader {
    /// What the corpus was.
    pub corpus: CorpusFormat,
    /// The hash entries are keyed by.
    pub hash: HashKind,
    /// `k`: buckets are chosen by the first `k` bits of the hash.
    pub prefix_bits: u32,
    /// `w`: bits stored per entry.
    pub value_bits: u32,
    /// Whether entries carry counts (SHA-1 corpora).
    pub counts: bool,
    /// Bytes per block (bucket), a multiple of 64.
    pub block_size: usize,
    /// The blinding key's id (pairs corpora); zero otherwise.
    pub key_id: [u8; KEY_ID_BYTES],
    /// SHA-256 of the blocks.
    pub blocks_sha256: [u8; 32],
    /// Build statistics.
    pub stats: BuildStats,
}

impl DbHeader {
    /// `B = 2^k`, the number of buckets (blocks).
    pub fn bucket_count(&self) -> usize {
        1usize << self.prefix_bits.min(MAX_PAIRS_PREFIX_BITS)
    }

    /// The PIR database shape `(B, b)`.
    pub fn shape(&self) -> Result<DbShape, BreachError> {
        Ok(DbShape::new(self.bucket_count() as u64, self.block_size)?)
    }

    /// The bucket code of this database.
    pub fn codec(&self) -> Result<BucketCodec, BreachError> {
        BucketCodec::new(self.value_bits, self.counts)
    }

    /// Bits of the hash each entry keeps: `k + w` for SHA-1 corpora, `w` (the tag) for pairs.
    pub fn entry_bits(&self) -> u32 {
        if self.corpus.is_sha1() {
            self.prefix_bits + self.value_bits
        } else {
            self.value_bits
        }
    }

    /// Decodes block `bytes` (exactly one block) into its bucket.
    pub fn decode_bucket(&self, block: &[u8]) -> Result<Bucket, BreachError> {
        if block.len() != self.block_size {
            return Err(BreachError::malformed(
                "bucket block",
                format!(
                    "{} bytes, the database's blocks are {}",
                    block.len(),
                    self.block_size
                ),
            ));
        }
        self.codec()?.decode(block)
    }

    /// Where a SHA-1 hash would be stored: its bucket (first `k` bits) and its value (the
    /// next `w` bits).
    pub fn sha1_location(&self, hash: &[u8; 20]) -> Result<(usize, Value), BreachError> {
        if !self.corpus.is_sha1() {
            return Err(BreachError::Input(
                "this is a username:password database; check credentials with BlindedCheck".into(),
            ));
        }
        if self.prefix_bits > MAX_SHA1_PREFIX_BITS || self.prefix_bits + self.value_bits > 160 {
            return Err(BreachError::Input(
                "invalid header: call validate first".into(),
            ));
        }
        let bucket = crate::bits::bits_u64(hash, 0, self.prefix_bits as usize) as usize;
        let value = extract_value(hash, self.prefix_bits as usize, self.value_bits as usize);
        Ok((bucket, value))
    }

    /// The bucket of credential hash `h` (its first `k` bits).
    pub fn credential_bucket(&self, h: &[u8; CREDENTIAL_HASH_BYTES]) -> Result<usize, BreachError> {
        if self.corpus.is_sha1() {
            return Err(BreachError::Input(
                "this is a password database; look up SHA-1 hashes with sha1_location".into(),
            ));
        }
        if self.prefix_bits > MAX_PAIRS_PREFIX_BITS {
            return Err(BreachError::Input(
                "invalid header: call validate first".into(),
            ));
        }
        Ok(crate::bits::bits_u64(h, 0, self.prefix_bits as usize) as usize)
    }

    /// Bytes of one entry in a plain fixed-width layout: the kept hash bits rounded up to
    /// bytes (20 for full SHA-1, 16 for tags) plus a 4-byte count where counts are stored.
    pub fn fixed_entry_bytes(&self) -> usize {
        (self.entry_bits() as usize).div_ceil(8) + if self.counts { FIXED_COUNT_BYTES } else { 0 }
    }

    /// The block size the same database would need without compression: the largest bucket
    /// in the fixed-width layout, after the same 4-byte entry count, rounded up to 64 bytes.
    pub fn uncompressed_block_size(&self) -> usize {
        let bytes =
            BLOCK_HEADER_BYTES as u64 + self.stats.max_bucket * self.fixed_entry_bytes() as u64;
        (bytes.div_ceil(LINE as u64) * LINE as u64) as usize
    }

    /// Uncompressed padded size / compressed padded size (both `B` blocks, so the ratio of
    /// the block sizes). Section 3.4 of Günther 2019 reports about 1.13 for its setting.
    pub fn compression_ratio(&self) -> f64 {
        self.uncompressed_block_size() as f64 / self.block_size.max(1) as f64
    }

    /// Upper bound on the chance that a hash which is *not* in the corpus is reported found,
    /// per check: `max_bucket / 2^(stored bits)`. For full SHA-1 hashes this is 0 up to
    /// SHA-1 collisions; for 128-bit tags it is below 2^-100 for any realistic bucket.
    pub fn false_positive_bound(&self) -> f64 {
        if self.corpus.is_sha1() && self.entry_bits() == 160 {
            return 0.0;
        }
        self.stats.max_bucket as f64 * 2f64.powi(-(self.value_bits as i32))
    }

    /// Checks that `key` is the blinding key this database was built with.
    pub fn check_key(&self, key: &crate::blind::BlindingKey) -> Result<(), BreachError> {
        if self.corpus != CorpusFormat::Pairs {
            return Err(BreachError::Input(
                "this database has no blinding key".into(),
            ));
        }
        if key.key_id() != self.key_id {
            return Err(BreachError::Input(format!(
                "the blinding key has id {} but the database was built with key {}; give the \
                 key file written with this database",
                hex::encode(key.key_id()),
                hex::encode(self.key_id)
            )));
        }
        Ok(())
    }

    /// SHA-256 of the encoded header: names this exact database (blocks included).
    pub fn database_id(&self) -> [u8; 32] {
        Sha256::digest(self.encode()).into()
    }

    /// Checks that the fields are consistent (see the module docs).
    pub fn validate(&self) -> Result<(), String> {
        let k = self.prefix_bits;
        match self.corpus {
            CorpusFormat::Hibp | CorpusFormat::Passwords => {
                if self.hash != HashKind::Sha1 {
                    return Err("a hibp or passwords database must be keyed by SHA-1".into());
                }
                if !self.counts {
                    return Err("a hibp or passwords database must store counts".into());
                }
                if k > MAX_SHA1_PREFIX_BITS {
                    return Err(format!(
                        "{k} prefix bits; a SHA-1 database uses at most {MAX_SHA1_PREFIX_BITS}"
                    ));
                }
                let bits = k + self.value_bits;
                if !(MIN_SHA1_ENTRY_BITS..=160).contains(&bits) || self.value_bits == 0 {
                    return Err(format!(
                        "{bits} kept hash bits; expected {MIN_SHA1_ENTRY_BITS} to 160"
                    ));
                }
                if self.key_id != [0; KEY_ID_BYTES] {
                    return Err("a SHA-1 database has no blinding key".into());
                }
            }
            CorpusFormat::Pairs => {
                match self.hash {
                    HashKind::Sha256 => {}
                    HashKind::Argon2id(params) => params.validate()?,
                    HashKind::Sha1 => {
                        return Err("a pairs database is keyed by a credential hash".into())
                    }
                }
                if self.counts {
                    return Err("a pairs database stores no counts".into());
                }
                if k > MAX_PAIRS_PREFIX_BITS {
                    return Err(format!(
                        "{k} prefix bits; a pairs database uses at most {MAX_PAIRS_PREFIX_BITS}"
                    ));
                }
                if self.value_bits != TAG_BITS {
                    return Err(format!("{}-bit tags; expected {TAG_BITS}", self.value_bits));
                }
                if self.key_id == [0; KEY_ID_BYTES] {
                    return Err("a pairs database must name its blinding key".into());
                }
            }
        }
        if self.block_size < LINE
            || !self.block_size.is_multiple_of(LINE)
            || self.block_size > MAX_BLOCK_SIZE
        {
            return Err(format!(
                "block size {} is not a multiple of {LINE} from {LINE} to {MAX_BLOCK_SIZE}",
                self.block_size
            ));
        }
        if self.stats.min_bucket > self.stats.max_bucket {
            return Err("smallest bucket larger than the largest".into());
        }
        Ok(())
    }

    /// The 256 header bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut w = Writer::with_capacity(HEADER_LEN);
        PROLOGUE.write(&mut w);
        w.u16(HEADER_LEN as u16);
        w.u8(corpus_id(self.corpus));
        w.u8(self.hash.id());
        w.u8(self.prefix_bits as u8);
        w.u8(u8::from(self.counts));
        w.u16(self.value_bits as u16);
        w.u16(0);
        let argon = match self.hash {
            HashKind::Argon2id(p) => [p.memory_kib, p.iterations, p.parallelism],
            _ => [0; 3],
        };
        argon.iter().for_each(|&v| w.u32(v));
        w.u64(self.bucket_count() as u64);
        w.u32(self.block_size as u32);
        w.u32(0);
        w.bytes(&self.key_id);
        w.bytes(&self.blocks_sha256);
        let s = &self.stats;
        for v in [
            s.entries,
            s.input_lines,
            s.skipped_lines,
            s.bad_lines,
            s.total_count,
            s.min_bucket,
            s.max_bucket,
            s.created_unix,
        ] {
            w.u64(v);
        }
        let mut out = [0u8; HEADER_LEN];
        let bytes = w.into_bytes();
        out[..bytes.len()].copy_from_slice(&bytes);
        out
    }

    /// Parses and validates a header from the start of `bytes` (untrusted; the bucket blocks
    /// may follow it).
    pub fn decode(bytes: &[u8]) -> Result<Self, BreachError> {
        let bad = |m: String| BreachError::malformed("database header", m);
        <Self as Codec>::decode(&mut Reader::new(bytes), &()).map_err(|e| match e {
            pir_core::Error::WrongVersion { found, supported } => bad(format!(
                "version {found}; this build reads version {supported}"
            )),
            pir_core::Error::WrongMagic => {
                bad("wrong magic bytes: this is not a pir breach database".into())
            }
            pir_core::Error::Truncated { .. } => bad(format!(
                "truncated: {} bytes, a header is {HEADER_LEN}",
                bytes.len()
            )),
            pir_core::Error::Malformed(message) => bad(message),
            other => bad(other.to_string()),
        })
    }
}

/// The 256-byte header: [`Codec::decode`] takes exactly [`HEADER_LEN`] bytes and validates
/// them (every field, the reserved bytes zero); a refusal of the content is
/// [`pir_core::Error::Malformed`] with the reason.
impl Codec<'_> for DbHeader {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.bytes(&DbHeader::encode(self));
    }

    fn decode(reader: &mut Reader<'_>, _: &()) -> Result<Self, pir_core::Error> {
        let bad = pir_core::Error::Malformed;
        let mut r = Reader::new(reader.take(HEADER_LEN)?);
        PROLOGUE.read(&mut r)?;
        let header_len = r.u16()?;
        if usize::from(header_len) != HEADER_LEN {
            return Err(bad(format!(
                "header length {header_len}; expected {HEADER_LEN}"
            )));
        }
        let corpus = match r.u8()? {
            1 => CorpusFormat::Hibp,
            2 => CorpusFormat::Passwords,
            3 => CorpusFormat::Pairs,
            other => {
                return Err(pir_core::Error::UnknownValue {
                    field: "corpus format",
                    found: u64::from(other),
                })
            }
        };
        let hash_id = r.u8()?;
        let prefix_bits = u32::from(r.u8()?);
        let counts = match r.u8()? {
            0 => false,
            1 => true,
            other => {
                return Err(pir_core::Error::UnknownValue {
                    field: "counts flag",
                    found: u64::from(other),
                })
            }
        };
        let value_bits = u32::from(r.u16()?);
        let reserved_a = r.u16()?;
        let argon = Argon2Params {
            memory_kib: r.u32()?,
            iterations: r.u32()?,
            parallelism: r.u32()?,
        };
        let hash = match hash_id {
            1 => HashKind::Sha1,
            2 => HashKind::Argon2id(argon),
            3 => HashKind::Sha256,
            other => {
                return Err(pir_core::Error::UnknownValue {
                    field: "hash kind",
                    found: u64::from(other),
                })
            }
        };
        if !matches!(hash, HashKind::Argon2id(_))
            && (argon.memory_kib, argon.iterations, argon.parallelism) != (0, 0, 0)
        {
            return Err(bad(
                "Argon2 parameters set for a hash that is not Argon2id".into()
            ));
        }
        let bucket_count = r.u64()?;
        let block_size = r.u32()? as usize;
        let reserved_b = r.u32()?;
        let key_id: [u8; KEY_ID_BYTES] = r.array()?;
        let blocks_sha256: [u8; 32] = r.array()?;
        let mut stats = [0u64; 8];
        for v in &mut stats {
            *v = r.u64()?;
        }
        let rest = r.take(r.remaining())?;
        if reserved_a != 0 || reserved_b != 0 || rest.iter().any(|&b| b != 0) {
            return Err(bad("reserved bytes are not zero".into()));
        }
        let [entries, input_lines, skipped_lines, bad_lines, total_count, min_bucket, max_bucket, created_unix] =
            stats;
        let header = Self {
            corpus,
            hash,
            prefix_bits,
            value_bits,
            counts,
            block_size,
            key_id,
            blocks_sha256,
            stats: BuildStats {
                entries,
                input_lines,
                skipped_lines,
                bad_lines,
                total_count,
                min_bucket,
                max_bucket,
                created_unix,
            },
        };
        header.validate().map_err(bad)?;
        if bucket_count != header.bucket_count() as u64 {
            return Err(bad(format!(
                "bucket count {bucket_count} is not 2^{}",
                header.prefix_bits
            )));
        }
        Ok(header)
    }
}

fn corpus_id(format: CorpusFormat) -> u8 {
    match format {
        CorpusFormat::Hibp => 1,
        CorpusFormat::Passwords => 2,
        CorpusFormat::Pairs => 3,
    }
}

/// Servers assumed by the prefix rule: the two non-colluding servers of Günther 2019, section 4.3.
pub const SERVERS: f64 = 2.0;

/// The bucketing rule: `k`, the number of prefix bits, for `entries` entries of about
/// `entry_bytes` bytes each, at most `max_bits`.
///
/// Seed 001, section 3.4 (eq. 3.2): the communication of a block-based PIR query is lowest
/// with blocks of `b = sqrt(|D| / n)` bytes for a database of `|D|` bytes and `n` servers
/// (chunks), so there should be `|D| / b = sqrt(n |D|)` blocks. With `2^k` buckets that gives
/// `k = round(log2(n |D|) / 2)`, clamped to `0..=max_bits`. Buckets of a uniform hash then
/// hold `N / 2^k` entries on average; every bucket is padded to the largest one's size (the
/// header reports the smallest, largest and mean).
pub fn choose_prefix_bits(entries: u64, entry_bytes: usize, max_bits: u32) -> (u32, String) {
    let bytes = entries as f64 * entry_bytes as f64;
    if entries == 0 {
        return (0, "no entries: one bucket".into());
    }
    let ideal = ((SERVERS * bytes).log2() / 2.0).round().max(0.0);
    let k = (ideal as u32).min(max_bits);
    let target_block = (bytes / SERVERS).sqrt();
    let capped = if (ideal as u32) > max_bits {
        format!(" (capped at {max_bits} bits)")
    } else {
        String::new()
    };
    (
        k,
        format!(
            "{k} prefix bits{capped}: {} buckets of {:.1} entries on average, near the \
             communication optimum b = sqrt(|D|/{SERVERS}) = {target_block:.0} bytes for \
             |D| = {bytes:.0} bytes (Günther 2019, section 3.4)",
            1u64 << k,
            entries as f64 / (1u64 << k) as f64,
        ),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn sample(corpus: CorpusFormat) -> DbHeader {
        let pairs = corpus == CorpusFormat::Pairs;
        DbHeader {
            corpus,
            hash: if pairs {
                HashKind::Argon2id(Argon2Params::DEFAULT)
            } else {
                HashKind::Sha1
            },
            prefix_bits: 9,
            value_bits: if pairs { TAG_BITS } else { 151 },
            counts: !pairs,
            block_size: 320,
            key_id: if pairs {
                [3; KEY_ID_BYTES]
            } else {
                [0; KEY_ID_BYTES]
            },
            blocks_sha256: [9; 32],
            stats: BuildStats {
                entries: 3546,
                input_lines: 3559,
                skipped_lines: 13,
                bad_lines: 0,
                total_count: 3546,
                min_bucket: 1,
                max_bucket: 17,
                created_unix: 1_700_000_000,
            },
        }
    }

    #[test]
    fn header_round_trip() {
        for corpus in [
            CorpusFormat::Hibp,
            CorpusFormat::Passwords,
            CorpusFormat::Pairs,
        ] {
            let h = sample(corpus);
            let bytes = h.encode();
            assert_eq!(DbHeader::decode(&bytes).unwrap(), h);
            assert_eq!(h.shape().unwrap().block_count(), 512);
        }
    }

    #[test]
    fn header_rejects_damage() {
        let good = sample(CorpusFormat::Hibp).encode();
        let cases: Vec<(usize, u8, &str)> = vec![
            (0, b'X', "magic"),
            (8, 2, "version"),
            (11, 0, "header length"),
            (12, 9, "corpus format"),
            (13, 2, "keyed by SHA-1"),
            (13, 7, "hash kind"),
            (14, 21, "prefix bits"),
            (15, 2, "counts flag"),
            (15, 0, "store counts"),
            (18, 1, "reserved"),
            (20, 1, "Argon2 parameters set"),
            (33, 1, "bucket count"),
            (40, 65, "block size"),
            (48, 1, "no blinding key"),
            (200, 1, "reserved"),
        ];
        for (at, byte, why) in cases {
            let mut bytes = good;
            bytes[at] = byte;
            let err = DbHeader::decode(&bytes).unwrap_err().to_string();
            assert!(err.contains(why), "byte {at}: {err} should mention {why}");
        }
        assert!(DbHeader::decode(&good[..255]).is_err());
        let mut pairs = sample(CorpusFormat::Pairs).encode();
        pairs[20..24].copy_from_slice(&(u32::MAX).to_le_bytes());
        assert!(DbHeader::decode(&pairs)
            .unwrap_err()
            .to_string()
            .contains("Argon2 memory"));
    }

    #[test]
    fn fail_vectors_are_refused() {
        use pir_core::codec::testing::{
            check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector,
        };
        let good = sample(CorpusFormat::Hibp).encode();
        let vectors = [
            FailVector::new("truncated", "Truncated", "255 bytes", cut(&good)),
            FailVector::new("trailing", "TrailingBytes", "257 bytes", trailing(&good)),
            FailVector::new(
                "header_length",
                "Malformed",
                "header length 0",
                patch(&good, 10, 2, 0),
            ),
            FailVector::new(
                "unknown_corpus",
                "UnknownValue",
                "corpus format 9",
                patch(&good, 12, 1, 9),
            ),
            FailVector::new(
                "unknown_hash",
                "UnknownValue",
                "hash kind 7",
                patch(&good, 13, 1, 7),
            ),
            FailVector::new(
                "counts_flag",
                "UnknownValue",
                "counts flag 2",
                patch(&good, 15, 1, 2),
            ),
            FailVector::new(
                "bucket_count",
                "Malformed",
                "bucket count not 2^k",
                patch(&good, 32, 8, 513),
            ),
            FailVector::new(
                "reserved",
                "Malformed",
                "a reserved byte set",
                patch(&good, 200, 1, 1),
            ),
        ];
        let dir = vectors_dir(env!("CARGO_MANIFEST_DIR"), "breach_db_header");
        check_fail_vectors::<DbHeader>(&dir, &vectors, &());
    }

    #[test]
    fn prefix_rule() {
        assert_eq!(choose_prefix_bits(0, 24, 20).0, 0);
        assert_eq!(choose_prefix_bits(3546, 24, 20).0, 9);
        assert_eq!(choose_prefix_bits(1_000_000, 24, 20).0, 13);
        let (k, why) = choose_prefix_bits(1 << 50, 24, 20);
        assert_eq!(k, 20);
        assert!(why.contains("capped"));
    }

    #[test]
    fn locations_and_ratio() {
        let h = sample(CorpusFormat::Hibp);
        let mut hash = [0u8; 20];
        hash[0] = 0b1010_1010;
        hash[1] = 0b1100_0000;
        let (bucket, value) = h.sha1_location(&hash).unwrap();
        assert_eq!(bucket, 0b1_0101_0101);
        assert_eq!(value[0], 0b1000_0000);
        assert!(h.credential_bucket(&[0; 32]).is_err());
        assert_eq!(h.fixed_entry_bytes(), 24);
        assert_eq!(h.uncompressed_block_size(), 448);
        assert!((h.compression_ratio() - 1.4).abs() < 1e-9);
        assert_eq!(h.false_positive_bound(), 0.0);
        assert!(sample(CorpusFormat::Pairs).sha1_location(&hash).is_err());
    }
}
