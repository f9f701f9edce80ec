//! The server's offline work, kept next to the database: `DB.SCHEME.offline`.
//!
//! Computing a hint is one pass of `n` multiply-adds per database entry (`n = 1280` for
//! SimplePIR and DoublePIR; about two and a half minutes per GiB on one core); a restart should not redo it. `pir serve` writes this file
//! after computing the hint and reads it at the next start; a file for another database,
//! seed or version, or a damaged one, is ignored with a message and recomputed.
//!
//! ```text
//! file = prologue "PIRoffl1" | version u16 = 1 | SHA-256 of the body [32] | body
//! body = scheme u8 (its wire id) | database version [32]
//!      | hint length u64 | the hint message | extra words u64 | extra (u32 LE each)
//! ```
//! The extra words are DoublePIR's and YPIR's `H1`, YPIR+SP's packing masks
//! (`pir_lattice::Saved`). A start maps the file read-only and checks its digest.

use std::path::{Path, PathBuf};

use pir_core::wire::{Prologue, Reader, Writer};
use pir_core::{Codec, Error};
use pir_lattice::{DbVersion, Saved, Scheme};
use sha2::{Digest, Sha256};

use crate::format::RecordsError;

/// Prologue of an offline file.
pub const OFFLINE: Prologue = Prologue {
    magic: b"PIRoffl1",
    version: 1,
};
/// Largest hint accepted.
const MAX_HINT: u64 = pir_lattice::wire::MAX_HINT_BODY as u64 + 1024;
/// Most extra words accepted.
const MAX_EXTRA: u64 = pir_lattice::params::MAX_ROWS as u64 * pir_lattice::params::LWE_N as u64;

/// Where the offline work of `db` for `scheme` is kept.
pub fn path_for(db: &Path, scheme: Scheme) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(format!(".{}.offline", scheme.id().name()));
    PathBuf::from(name)
}

/// The offline file (module documentation). Context: the scheme and the database version it
/// must be for; a file for another is refused ([`pir_core::Error::WrongScheme`],
/// [`pir_core::Error::DatabaseMismatch`]), a damaged one by its checksum.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OfflineFile {
    /// The scheme the work is for.
    pub scheme: Scheme,
    /// The database version the work is for.
    pub version: DbVersion,
    /// The work.
    pub saved: Saved,
}

impl Codec<'_> for OfflineFile {
    type Context = (Scheme, DbVersion);

    fn encode(&self, w: &mut Writer) {
        write_offline(w, self.scheme, &self.version, &self.saved);
    }

    fn decode(r: &mut Reader<'_>, (scheme, version): &(Scheme, DbVersion)) -> Result<Self, Error> {
        OFFLINE.read(r)?;
        let digest = r.take(32)?;
        let body = r.take(r.remaining())?;
        if Sha256::digest(body).as_slice() != digest {
            return Err(Error::Malformed(
                "its checksum does not match: the file is damaged".into(),
            ));
        }
        let mut r = Reader::new(body);
        let found = r.u8()?;
        if found != scheme.id() as u8 {
            return Err(Error::WrongScheme {
                found,
                expected: scheme.id() as u8,
            });
        }
        if r.take(32)? != version.as_slice() {
            return Err(Error::DatabaseMismatch(
                "it is for another version of the database".into(),
            ));
        }
        let hint_len = r.u64()?;
        if hint_len > MAX_HINT {
            return Err(Error::Oversized {
                len: usize::try_from(hint_len).unwrap_or(usize::MAX),
                limit: MAX_HINT as usize,
            });
        }
        let hint = r.take(hint_len as usize)?.to_vec();
        let words = r.u64()?;
        if words > MAX_EXTRA {
            return Err(Error::OutOfRange {
                field: "server state words",
                found: words,
                limit: MAX_EXTRA,
            });
        }
        if words * 4 != r.remaining() as u64 {
            return Err(Error::WrongLength(format!(
                "{words} server state words, {} bytes follow",
                r.remaining()
            )));
        }
        let extra = r
            .take(words as usize * 4)?
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect();
        Ok(Self {
            scheme: *scheme,
            version: *version,
            saved: Saved { hint, extra },
        })
    }
}

fn write_offline(out: &mut Writer, scheme: Scheme, version: &DbVersion, saved: &Saved) {
    let mut body = Writer::with_capacity(64 + saved.hint.len() + 4 * saved.extra.len());
    body.u8(scheme.id() as u8);
    body.bytes(version);
    body.u64(saved.hint.len() as u64);
    body.bytes(&saved.hint);
    body.u64(saved.extra.len() as u64);
    for &w in &saved.extra {
        body.u32(w);
    }
    let body = body.into_bytes();
    OFFLINE.write(out);
    out.bytes(&Sha256::digest(&body));
    out.bytes(&body);
}

/// Encodes the offline work ([`OfflineFile`]).
pub fn encode(scheme: Scheme, version: &DbVersion, saved: &Saved) -> Vec<u8> {
    let mut out =
        Writer::with_capacity(OFFLINE.len() + 96 + saved.hint.len() + 4 * saved.extra.len());
    write_offline(&mut out, scheme, version, saved);
    out.into_bytes()
}

/// Decodes offline work saved for `scheme` and `version`; any mismatch or damage is an error
/// ([`OfflineFile`]).
pub fn decode(bytes: &[u8], scheme: Scheme, version: &DbVersion) -> Result<Saved, RecordsError> {
    OfflineFile::from_bytes(bytes, &(scheme, *version))
        .map(|file| file.saved)
        .map_err(|e| {
            let why = match e {
                Error::Malformed(why) | Error::DatabaseMismatch(why) => why,
                Error::WrongScheme { .. } => "it is for another scheme".into(),
                other => other.to_string(),
            };
            RecordsError::Input(format!("the saved offline work is unusable ({why})"))
        })
}

/// Reads the offline work of `db` for `scheme` through a read-only memory map (checked and
/// decoded from the mapped pages, no read buffer): `Ok(None)` when there is none yet.
pub fn load(db: &Path, scheme: Scheme, version: &DbVersion) -> Result<Option<Saved>, RecordsError> {
    let path = path_for(db, scheme);
    let failed = |e: std::io::Error| RecordsError::Input(format!("{}: {e}", path.display()));
    let file = match std::fs::File::open(&path) {
        Ok(file) => file,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(failed(e)),
    };
    if file.metadata().map_err(failed)?.len() == 0 {
        // An empty file cannot be mapped; it is damaged all the same.
        return decode(&[], scheme, version).map(Some);
    }
    let map = pir_kernels::map::map_readonly(&file).map_err(failed)?;
    decode(&map, scheme, version).map(Some)
}

/// Writes the offline work of `db` for `scheme` (atomically and durably).
pub fn save(
    db: &Path,
    scheme: Scheme,
    version: &DbVersion,
    saved: &Saved,
) -> Result<PathBuf, RecordsError> {
    let path = path_for(db, scheme);
    pir_fs::write_atomic_bytes(&path, &encode(scheme, version, saved))
        .map_err(|e| RecordsError::Input(format!("{}: {e}", path.display())))?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn round_trip_and_refusals() {
        let saved = Saved {
            hint: vec![1, 2, 3],
            extra: vec![7, 8],
        };
        let bytes = encode(Scheme::DoublePir, &[5; 32], &saved);
        assert_eq!(decode(&bytes, Scheme::DoublePir, &[5; 32]).unwrap(), saved);
        assert!(decode(&bytes, Scheme::SimplePir, &[5; 32]).is_err());
        assert!(decode(&bytes, Scheme::DoublePir, &[6; 32]).is_err());
        for at in 0..bytes.len() {
            let mut damaged = bytes.clone();
            damaged[at] ^= 1;
            assert!(
                decode(&damaged, Scheme::DoublePir, &[5; 32]).is_err(),
                "byte {at}"
            );
            assert!(decode(&bytes[..at], Scheme::DoublePir, &[5; 32]).is_err());
        }
    }

    #[test]
    fn saved_work_is_loaded_from_the_map_and_damage_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("r.db");
        let saved = Saved {
            hint: vec![9; 100],
            extra: (0..5000).collect(),
        };
        assert_eq!(load(&db, Scheme::Ypir, &[1; 32]).unwrap(), None);
        let path = save(&db, Scheme::Ypir, &[1; 32], &saved).unwrap();
        assert_eq!(path, path_for(&db, Scheme::Ypir));
        assert_eq!(load(&db, Scheme::Ypir, &[1; 32]).unwrap(), Some(saved));
        assert!(load(&db, Scheme::Ypir, &[2; 32]).is_err());
        let mut bytes = std::fs::read(&path).unwrap();
        bytes[200] ^= 4;
        std::fs::write(&path, &bytes).unwrap();
        assert!(load(&db, Scheme::Ypir, &[1; 32]).is_err());
        std::fs::write(&path, b"").unwrap();
        assert!(load(&db, Scheme::Ypir, &[1; 32]).is_err());
    }
}
