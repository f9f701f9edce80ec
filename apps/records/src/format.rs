//! The record database file and its header.
//!
//! ```text
//! file        = header (HEADER_LEN = 128 bytes) | payload (records × record_size bytes)
//! header      = magic        8 B   "PIRrecs1"
//!             | format       u16   1
//!             | kind         u8    1 = records, 2 = key-value
//!             | reserved     u8    0
//!             | record_size  u32   bytes per record (key-value: cuckoo::SLOT_OVERHEAD + value_max)
//!             | records      u64   records in the payload (key-value: cuckoo slots)
//!             | last_len     u32   records: bytes of the last record before zero padding;
//!                                  key-value: 0
//!             | entries      u64   records: = records; key-value: keys stored
//!             | cuckoo_seed  16 B  key-value: public seed of the two hash functions; else 0
//!             | matrix_seeds 32 B  seeds of the public LWE matrices A and A2, random at build
//!                                  (so a restarted server computes the same hint)
//!             | payload_hash 32 B  SHA-256 of the payload
//!             | zero         12 B
//! ```
//!
//! All integers little-endian. Everything in the header is public: the server hands it to
//! clients unchanged next to the hint. The database version a client caches its hint under is
//! `SHA-256("pir-records version 1" | header | scheme name)` ([`DbHeader::version`]).

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use pir_core::wire::{Prologue, Reader, Writer};
use pir_core::Codec;
use rand::CryptoRng;
use sha2::{Digest, Sha256};

/// Length of the header.
pub const HEADER_LEN: usize = 128;
/// Bytes of a key-value slot before the value: fingerprint and length (layout in
/// [`crate::cuckoo`]).
pub const SLOT_OVERHEAD: usize = FINGERPRINT_LEN + 4;
/// Bytes of a key fingerprint in a key-value slot.
pub const FINGERPRINT_LEN: usize = 8;
/// First bytes of a database file.
pub const MAGIC: [u8; 8] = *b"PIRrecs1";
/// The file format version this build reads and writes.
pub const FORMAT: u16 = 1;
/// Prologue of a records database file.
pub const PROLOGUE: Prologue = Prologue {
    magic: &MAGIC,
    version: FORMAT,
};
/// Largest record: 2^21 bits, the most a lattice database record may have
/// (`pir_lattice::params::MAX_RECORD_BITS`).
pub const MAX_RECORD_SIZE: usize = 1 << 18;

/// What went wrong with a database or its input.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum RecordsError {
    /// The input (records file, key-value lines) is not usable; says where and why.
    #[error("{0}")]
    Input(String),
    /// A database file or header is damaged or not a database.
    #[error("not a valid record database: {0}")]
    Malformed(String),
    /// Cuckoo placement kept failing (only with adversarial or duplicate-heavy input).
    #[error("could not place the keys after {0} seeds; check the input for near-duplicates")]
    Placement(usize),
    /// Reading or writing a file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

/// What the records are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DbKind {
    /// Records fetched by index.
    Records,
    /// Key-value slots placed by cuckoo hashing, fetched by key.
    KeyValue,
}

/// The database header (see the module documentation for the layout).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DbHeader {
    /// Records or key-value.
    pub kind: DbKind,
    /// Bytes per record.
    pub record_size: usize,
    /// Records in the payload.
    pub records: u64,
    /// Records: bytes of the last record before its zero padding.
    pub last_len: usize,
    /// Records: the record count; key-value: keys stored.
    pub entries: u64,
    /// Key-value: seed of the cuckoo hash functions.
    pub cuckoo_seed: [u8; 16],
    /// Seeds of the LWE matrices `A` and `A2`.
    pub matrix_seeds: [[u8; 16]; 2],
    /// SHA-256 of the payload.
    pub payload_hash: [u8; 32],
}

/// Whether `scheme` can serve a database of this header's shape, and if not why: the limits
/// are checked when the database is built, not first when it is served.
pub fn scheme_fits(header: &DbHeader, scheme: pir_lattice::Scheme) -> Result<(), String> {
    let bits = u32::try_from(header.record_size.saturating_mul(8)).unwrap_or(u32::MAX);
    pir_lattice::params::Params::new(scheme, header.records, bits)
        .map(|_| ())
        .map_err(|e| e.to_string())
}

impl DbHeader {
    /// The 128-byte encoding.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut w = Writer::with_capacity(HEADER_LEN);
        PROLOGUE.write(&mut w);
        w.u8(match self.kind {
            DbKind::Records => 1,
            DbKind::KeyValue => 2,
        });
        w.u8(0);
        w.u32(self.record_size as u32);
        w.u64(self.records);
        w.u32(self.last_len as u32);
        w.u64(self.entries);
        w.bytes(&self.cuckoo_seed);
        w.bytes(&self.matrix_seeds[0]);
        w.bytes(&self.matrix_seeds[1]);
        w.bytes(&self.payload_hash);
        let mut out = [0u8; HEADER_LEN];
        let bytes = w.into_bytes();
        out[..bytes.len()].copy_from_slice(&bytes);
        out
    }

    /// Parses a header, checking every field (never panics on bad bytes; [`Codec`]).
    pub fn decode(bytes: &[u8]) -> Result<DbHeader, RecordsError> {
        let bad = |what: &str| RecordsError::Malformed(what.to_string());
        <Self as Codec>::from_bytes(bytes, &()).map_err(|e| match e {
            pir_core::Error::Truncated { .. } | pir_core::Error::TrailingBytes { .. } => {
                bad("the header must be 128 bytes")
            }
            pir_core::Error::WrongVersion { .. } => bad("unknown format version; upgrade pir"),
            pir_core::Error::WrongMagic => bad("wrong magic (not made by `pir db build`)"),
            pir_core::Error::Malformed(why) => RecordsError::Malformed(why),
            other => RecordsError::Malformed(other.to_string()),
        })
    }

    /// Bytes of the payload: `records × record_size`.
    pub fn payload_bytes(&self) -> u64 {
        self.records * self.record_size as u64
    }

    /// The version a server announces for this database served with `scheme` (`"simplepir"`
    /// or `"doublepir"`): it changes whenever the records, the seeds or the scheme change.
    pub fn version(&self, scheme: &str) -> [u8; 32] {
        let mut h = Sha256::new();
        h.update(b"pir-records version 1");
        h.update(self.encode());
        h.update(scheme.as_bytes());
        h.finalize().into()
    }

    /// Record `index` without the zero padding of the last record.
    pub fn trim_record<'a>(&self, index: u64, record: &'a [u8]) -> &'a [u8] {
        if self.kind == DbKind::Records && index + 1 == self.records {
            &record[..self.last_len.min(record.len())]
        } else {
            record
        }
    }
}

/// The 128-byte header: [`Codec::decode`] takes exactly [`HEADER_LEN`] bytes and checks every
/// field; an inconsistent one is [`pir_core::Error::Malformed`] with the reason.
impl Codec<'_> for DbHeader {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.bytes(&DbHeader::encode(self));
    }

    fn decode(reader: &mut Reader<'_>, _: &()) -> Result<Self, pir_core::Error> {
        let bad = |what: &str| pir_core::Error::Malformed(what.to_string());
        let bytes = reader.take(HEADER_LEN)?;
        let mut r = Reader::new(bytes);
        PROLOGUE.read(&mut r)?;
        // Every read below is inside the HEADER_LEN bytes just taken.
        let kind = match r.u8()? {
            1 => DbKind::Records,
            2 => DbKind::KeyValue,
            other => {
                return Err(pir_core::Error::UnknownValue {
                    field: "database kind",
                    found: u64::from(other),
                })
            }
        };
        r.skip(1)?;
        // Fields in wire order (a struct expression evaluates its fields in the order written).
        let header = DbHeader {
            kind,
            record_size: r.u32()? as usize,
            records: r.u64()?,
            last_len: r.u32()? as usize,
            entries: r.u64()?,
            cuckoo_seed: r.array()?,
            matrix_seeds: [r.array()?, r.array()?],
            payload_hash: r.array()?,
        };
        let DbHeader {
            record_size,
            records,
            last_len,
            entries,
            ..
        } = header;
        if record_size == 0 || record_size > MAX_RECORD_SIZE || records == 0 {
            return Err(bad("record size or count out of range"));
        }
        match kind {
            DbKind::Records if last_len == 0 || last_len > record_size || entries != records => {
                Err(bad("inconsistent record counts"))
            }
            DbKind::KeyValue if record_size <= SLOT_OVERHEAD || entries > records => {
                Err(bad("inconsistent key-value layout"))
            }
            _ if header.encode()[..] != bytes[..] => Err(bad("nonzero reserved bytes")),
            _ => Ok(header),
        }
    }
}

/// A database opened for serving: header and memory-mapped payload.
#[derive(Debug)]
pub struct RecordDb {
    header: DbHeader,
    map: memmap2::Mmap,
}

impl RecordDb {
    /// Opens `path`, checks the header, the file length and (if `verify`) the payload hash.
    pub fn open(path: &Path, verify: bool) -> Result<RecordDb, RecordsError> {
        let io = |source| RecordsError::Io {
            path: path.to_path_buf(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let map = pir_kernels::map::map_readonly(&file).map_err(io)?;
        let header = DbHeader::decode(map.get(..HEADER_LEN).unwrap_or(&[]))?;
        if (map.len() - HEADER_LEN) as u64 != header.payload_bytes() {
            return Err(RecordsError::Malformed(format!(
                "{} holds {} payload bytes; its header says {}",
                path.display(),
                map.len() - HEADER_LEN,
                header.payload_bytes()
            )));
        }
        let db = RecordDb { header, map };
        if verify && Sha256::digest(db.payload())[..] != header.payload_hash[..] {
            return Err(RecordsError::Malformed(format!(
                "{}: the records do not match the header's hash (damaged file)",
                path.display()
            )));
        }
        Ok(db)
    }

    /// The header.
    pub fn header(&self) -> &DbHeader {
        &self.header
    }

    /// The records, back to back.
    pub fn payload(&self) -> &[u8] {
        &self.map[HEADER_LEN..]
    }
}

/// A database of the records of `data`, `record_size` bytes each; the last record is
/// zero-padded to full size (the header remembers its real length). Returns the header and the
/// payload.
pub fn build_records(
    data: &[u8],
    record_size: usize,
    rng: &mut impl CryptoRng,
) -> Result<(DbHeader, Vec<u8>), RecordsError> {
    let mut matrix_seeds = [[0u8; 16]; 2];
    for seed in &mut matrix_seeds {
        rng.fill_bytes(seed);
    }
    // The header checks the size and the record size before the payload is allocated.
    let shape = records_header(data.len() as u64, record_size, [0; 32], matrix_seeds)?;
    let mut payload = data.to_vec();
    payload.resize(shape.records as usize * record_size, 0);
    let header = DbHeader {
        payload_hash: Sha256::digest(&payload).into(),
        ..shape
    };
    Ok((header, payload))
}

/// The header [`build_records`] gives a records file of `len` bytes, `record_size` bytes per
/// record (the last one zero-padded), whose zero-padded payload hashes to `payload_hash`, with
/// the LWE matrices' seeds `matrix_seeds`: what a build that streams the file rather than
/// reading it whole ([`crate::shards_build`]) needs. An error for an empty file or a record
/// size out of range.
pub fn records_header(
    len: u64,
    record_size: usize,
    payload_hash: [u8; 32],
    matrix_seeds: [[u8; 16]; 2],
) -> Result<DbHeader, RecordsError> {
    if record_size == 0 || record_size > MAX_RECORD_SIZE {
        return Err(RecordsError::Input(format!(
            "record size must be 1 to {MAX_RECORD_SIZE} bytes"
        )));
    }
    if len == 0 {
        return Err(RecordsError::Input("the records file is empty".into()));
    }
    let records = len.div_ceil(record_size as u64);
    let last_len = (len - (records - 1) * record_size as u64) as usize;
    Ok(DbHeader {
        kind: DbKind::Records,
        record_size,
        records,
        last_len,
        entries: records,
        cuckoo_seed: [0; 16],
        matrix_seeds,
        payload_hash,
    })
}

/// Fills in the random matrix seeds and the payload hash.
#[allow(clippy::too_many_arguments)]
pub(crate) fn finish_header(
    kind: DbKind,
    record_size: usize,
    records: u64,
    last_len: usize,
    entries: u64,
    cuckoo_seed: [u8; 16],
    payload: &[u8],
    rng: &mut impl CryptoRng,
) -> DbHeader {
    let mut matrix_seeds = [[0u8; 16]; 2];
    for seed in &mut matrix_seeds {
        rng.fill_bytes(seed);
    }
    DbHeader {
        kind,
        record_size,
        records,
        last_len,
        entries,
        cuckoo_seed,
        matrix_seeds,
        payload_hash: Sha256::digest(payload).into(),
    }
}

/// Writes header and payload to `path` atomically and durably ([`pir_fs::write_atomic`]).
pub fn write(path: &Path, header: &DbHeader, payload: &[u8]) -> Result<(), RecordsError> {
    pir_fs::write_atomic(path, |file| {
        file.write_all(&header.encode())?;
        file.write_all(payload)
    })
    .map_err(|source| RecordsError::Io {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn records_round_trip_through_a_file_and_pad_the_last() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let data: Vec<u8> = (0..100u8).collect();
        let (header, payload) = build_records(&data, 32, &mut rng).unwrap();
        assert_eq!(
            (header.records, header.last_len, payload.len()),
            (4, 4, 128)
        );
        assert_eq!(header.trim_record(3, &payload[96..]), &data[96..]);
        assert_eq!(header.trim_record(2, &payload[64..96]), &data[64..96]);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("db");
        write(&path, &header, &payload).unwrap();
        let db = RecordDb::open(&path, true).unwrap();
        assert_eq!((db.header(), db.payload()), (&header, &payload[..]));
        assert_ne!(header.version("simplepir"), header.version("doublepir"));
        // A damaged payload is caught when verifying.
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[HEADER_LEN + 5] ^= 1;
        std::fs::write(&path, &bytes).unwrap();
        assert!(RecordDb::open(&path, true).is_err());
        bytes.pop();
        std::fs::write(&path, &bytes).unwrap();
        assert!(RecordDb::open(&path, false).is_err());
        assert!(build_records(&[], 32, &mut rng).is_err());
        assert!(build_records(&data, 0, &mut rng).is_err());
    }

    proptest::proptest! {
        #[test]
        fn header_decoding_never_panics(bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..140), at in 0usize..128, value: u8) {
            let _ = DbHeader::decode(&bytes);
            let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
            let (header, _) = build_records(&[1; 50], 8, &mut rng).unwrap();
            let mut encoded = header.encode();
            encoded[at] = value;
            if let Ok(back) = DbHeader::decode(&encoded) {
                proptest::prop_assert_eq!(back.encode(), encoded);
            }
        }
    }
}
