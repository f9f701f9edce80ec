//! The signed release manifest (upPIR, Cappos 2013, section 4.1).
//!
//! The vendor cuts a release into equally sized blocks and publishes a manifest that says, for
//! every file, where its blocks lie, and for every block, its SHA-256. Clients use it to decide
//! which blocks to fetch privately and to check each answer; mirrors use it to check the copy
//! of the release they serve (section 4.2). The manifest is signed with the vendor's Ed25519
//! key, so a malicious mirror cannot hand a client a forged release.
//!
//! # Format (version 2, all integers little-endian)
//!
//! | field            | size            | meaning                                              |
//! |------------------|-----------------|------------------------------------------------------|
//! | magic            | 4               | `PIRM`                                               |
//! | version          | u16             | [`MANIFEST_FORMAT_VERSION`] (= 2)                    |
//! | block_size       | u32             | `b`, bytes per block, a multiple of 64               |
//! | block_count      | u64             | `B`, blocks in the release database                  |
//! | created_unix     | u64             | seconds since 1970 when the release was built        |
//! | release_version  | u64             | the vendor's release counter; clients refuse a lower one than they have seen |
//! | expires_unix     | u64             | seconds since 1970 after which clients refuse the manifest |
//! | file_count       | u32             | number of file entries that follow (at least 1)      |
//! | per file: name   | u16 + bytes     | UTF-8 relative path, 1 to [`MAX_NAME_LEN`] bytes     |
//! | per file: size   | u64             | bytes of the file (without padding)                  |
//! | per file: first_block | u64        | index of its first block                             |
//! | per file: block_count | u64        | blocks it occupies (at least 1, padding included)    |
//! | per file: sha256 | 32              | SHA-256 of the file's bytes                          |
//! | block hashes     | `B` x 32        | SHA-256 of every block, in order                     |
//! | signature        | 64              | Ed25519 over `"pir-manifest-v1"` followed by every preceding byte |
//!
//! # Decoding rules
//!
//! [`Manifest::decode_verified`] checks the signature *before* it parses anything, so an
//! attacker's bytes never reach the parser unless the vendor signed them. The parser then
//! checks every count against the bytes that remain before it allocates, and the decoded
//! manifest must be consistent: a valid database shape, files in increasing, non-overlapping
//! block ranges inside `B`, each file's size within its blocks, one hash per block, and unique
//! file names that are safe relative paths (see [`check_file_name`]). Malformed input is an
//! error, never a panic.

use std::collections::HashSet;

use pir_core::codec::{check_count, Codec};
use pir_core::wire::{Prologue, Reader, Writer};
use pir_core::DbShape;
use pir_keys::{PublicKey, SecretKey, SIGNATURE_LEN};

use crate::UpdateError;

/// The manifest format version this build writes and reads.
pub const MANIFEST_FORMAT_VERSION: u16 = 2;

/// Largest manifest a client accepts from a mirror (256 MiB: 8 M block hashes).
pub const MAX_MANIFEST_BYTES: usize = 256 << 20;

/// First bytes of every manifest.
pub const MANIFEST_MAGIC: [u8; 4] = *b"PIRM";
/// Prologue of a manifest.
pub const MANIFEST: Prologue = Prologue {
    magic: &MANIFEST_MAGIC,
    version: MANIFEST_FORMAT_VERSION,
};

/// Domain-separation prefix of the signed message, so a manifest signature can never be
/// replayed as a signature on another kind of document (mirror list, mirror answer).
pub const MANIFEST_SIGNING_CONTEXT: &[u8] = b"pir-manifest-v1";

/// Longest file name, in bytes (the Linux `PATH_MAX`).
pub const MAX_NAME_LEN: usize = 4096;

/// Length of a SHA-256 digest.
const HASH_LEN: usize = 32;

/// Fixed header: magic, version, block size, block count, creation time, release version,
/// expiry, file count.
const HEADER_LEN: usize = 4 + 2 + 4 + 8 + 8 + 8 + 8 + 4;

/// Smallest encoding of one file entry: a 1-byte name plus its length, three u64 and a hash.
const MIN_ENTRY_LEN: usize = 2 + 1 + 8 + 8 + 8 + HASH_LEN;

/// One file of the release: where its blocks lie and what its bytes hash to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FileEntry {
    /// Relative path, `/`-separated (for example `pool/main/z/zlib/zlib1g_1.3_amd64.deb`).
    pub name: String,
    /// Size in bytes, without padding.
    pub size: u64,
    /// Index of the file's first block in the release database.
    pub first_block: u64,
    /// Blocks the file occupies, padding included (a size class may add whole blocks).
    pub block_count: u64,
    /// SHA-256 of the file's `size` bytes.
    pub sha256: [u8; 32],
}

/// The vendor's description of a release: the database shape, the files and the block hashes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manifest {
    /// `b`, bytes per block.
    pub block_size: u32,
    /// `B`, blocks in the database.
    pub block_count: u64,
    /// When the release was built, in seconds since 1970.
    pub created_unix: u64,
    /// The vendor's release counter: a client refuses a manifest with a lower one than the
    /// newest it has seen (rollback), see [`crate::freshness`].
    pub release_version: u64,
    /// Seconds since 1970 after which clients refuse this manifest (freeze: a mirror replaying
    /// an old, signed manifest forever), like apt's `Valid-Until`.
    pub expires_unix: u64,
    /// The files, in database order.
    pub files: Vec<FileEntry>,
    /// SHA-256 of every block, `B` of them.
    pub block_hashes: Vec<[u8; 32]>,
}

impl Manifest {
    /// The bytes of the manifest file: the encoding above, signed by `vendor`.
    ///
    /// Encoding does not validate; callers build manifests with [`crate::release::build`],
    /// which produces consistent ones, and every decoder validates.
    pub fn encode_signed(&self, vendor: &SecretKey) -> Vec<u8> {
        let mut bytes = self.encode_body();
        let signature = vendor.sign(&signing_message(MANIFEST_SIGNING_CONTEXT, &bytes));
        bytes.extend_from_slice(&signature);
        bytes
    }

    /// Checks the vendor's signature, then parses and validates the manifest.
    pub fn decode_verified(bytes: &[u8], vendor: &PublicKey) -> Result<Manifest, UpdateError> {
        let (body, signature) = split_signature(bytes, "manifest")?;
        if vendor
            .verify(&signing_message(MANIFEST_SIGNING_CONTEXT, body), signature)
            .is_err()
        {
            if !body.starts_with(&MANIFEST_MAGIC) {
                return Err(not_a_manifest());
            }
            return Err(UpdateError::Signature(format!(
                "the manifest's signature does not verify under vendor key {}: it was modified \
                 after signing or signed by another vendor; fetch it again and check that you \
                 use this vendor's public key",
                vendor.fingerprint()
            )));
        }
        parse_body(body)
    }

    /// Parses and validates the manifest without checking its signature.
    ///
    /// For mirrors, which may not hold the vendor key: they check every block against the
    /// manifest's hashes instead (section 4.2). Clients must use [`Manifest::decode_verified`].
    pub fn decode_unverified(bytes: &[u8]) -> Result<Manifest, UpdateError> {
        let (body, _signature) = split_signature(bytes, "manifest")?;
        parse_body(body)
    }

    /// The release id: SHA-256 of the signed manifest bytes. Queries name the release they
    /// were made for by this id, so a mirror serving another release refuses them.
    pub fn release_id(signed_bytes: &[u8]) -> [u8; 32] {
        pir_keys::sha256(signed_bytes)
    }

    /// The database shape `B` x `b`.
    pub fn shape(&self) -> Result<DbShape, UpdateError> {
        Ok(DbShape::new(self.block_count, self.block_size as usize)?)
    }

    /// The entry for the file called `name`, if the release has one.
    pub fn file(&self, name: &str) -> Option<&FileEntry> {
        self.files.iter().find(|entry| entry.name == name)
    }

    /// The unsigned encoding (every field before the signature; [`Codec::to_bytes`]).
    fn encode_body(&self) -> Vec<u8> {
        let names: usize = self.files.iter().map(|f| f.name.len()).sum();
        let capacity = HEADER_LEN
            + self.files.len() * (MIN_ENTRY_LEN - 1)
            + names
            + self.block_hashes.len() * HASH_LEN
            + SIGNATURE_LEN;
        let mut w = Writer::with_capacity(capacity);
        Codec::encode(self, &mut w);
        w.into_bytes()
    }

    /// The consistency rules of the module documentation.
    pub(crate) fn validate(&self) -> Result<(), UpdateError> {
        let bad = |what: String| Err(UpdateError::Format(format!("manifest: {what}")));
        let shape = DbShape::new(self.block_count, self.block_size as usize)
            .map_err(|e| UpdateError::Format(format!("manifest: {e}")))?;
        if self.block_hashes.len() != shape.block_count() {
            return bad(format!(
                "{} block hashes for {} blocks",
                self.block_hashes.len(),
                self.block_count
            ));
        }
        if self.files.is_empty() {
            return bad("the release lists no files".into());
        }
        let mut names = HashSet::with_capacity(self.files.len());
        let mut next_free = 0u64;
        for file in &self.files {
            if let Err(why) = check_file_name(&file.name) {
                return bad(format!("file name {:?}: {why}", file.name));
            }
            if !names.insert(file.name.as_str()) {
                return bad(format!("file {:?} is listed twice", file.name));
            }
            if file.block_count == 0 {
                return bad(format!("file {:?} occupies no blocks", file.name));
            }
            if file.first_block < next_free {
                return bad(format!(
                    "file {:?} starts at block {}, inside the previous file (blocks must be \
                     increasing and not overlap)",
                    file.name, file.first_block
                ));
            }
            let end = file.first_block.checked_add(file.block_count);
            match end {
                Some(end) if end <= self.block_count => next_free = end,
                _ => {
                    return bad(format!(
                        "file {:?} (blocks {} + {}) runs past the {} blocks of the release",
                        file.name, file.first_block, file.block_count, self.block_count
                    ))
                }
            }
            if u128::from(file.size) > u128::from(file.block_count) * u128::from(self.block_size) {
                return bad(format!(
                    "file {:?} has {} bytes, more than its {} blocks of {} bytes hold",
                    file.name, file.size, file.block_count, self.block_size
                ));
            }
        }
        Ok(())
    }
}

/// Checks that `name` is a safe relative path: 1 to [`MAX_NAME_LEN`] bytes, `/`-separated
/// components that are neither empty, `.` nor `..` (so no leading or trailing `/` and no way
/// to climb out of a directory when a client saves the file), and no NUL, backslash or
/// control character.
pub fn check_file_name(name: &str) -> Result<(), String> {
    if name.is_empty() {
        return Err("the name is empty".into());
    }
    if name.len() > MAX_NAME_LEN {
        return Err(format!("the name is longer than {MAX_NAME_LEN} bytes"));
    }
    if let Some(c) = name.chars().find(|&c| c == '\\' || c.is_control()) {
        return Err(format!("the name contains the character {c:?}"));
    }
    for component in name.split('/') {
        match component {
            "" => {
                return Err(
                    "the name has an empty path component (leading, trailing or double '/')".into(),
                )
            }
            "." | ".." => return Err(format!("the name has a {component:?} path component")),
            _ => {}
        }
    }
    Ok(())
}

/// `context || body`: the message a vendor signs.
pub(crate) fn signing_message(context: &[u8], body: &[u8]) -> Vec<u8> {
    let mut message = Vec::with_capacity(context.len() + body.len());
    message.extend_from_slice(context);
    message.extend_from_slice(body);
    message
}

/// Splits a signed document into its body and its trailing Ed25519 signature.
pub(crate) fn split_signature<'a>(
    bytes: &'a [u8],
    what: &str,
) -> Result<(&'a [u8], &'a [u8]), UpdateError> {
    if bytes.len() < SIGNATURE_LEN {
        return Err(UpdateError::Format(format!(
            "{what} is {} bytes, too short to hold even its signature; the file is truncated, \
             fetch it again",
            bytes.len()
        )));
    }
    Ok(bytes.split_at(bytes.len() - SIGNATURE_LEN))
}

fn not_a_manifest() -> UpdateError {
    UpdateError::Format("this is not a pir manifest (it does not start with PIRM)".into())
}

/// Turns a codec error into a manifest format error.
fn wire(e: pir_core::Error) -> UpdateError {
    UpdateError::Format(format!("manifest: {e}"))
}

/// Parses the unsigned body ([`Codec`]), naming what a user must do about each refusal.
fn parse_body(body: &[u8]) -> Result<Manifest, UpdateError> {
    <Manifest as Codec>::from_bytes(body, &()).map_err(|e| match e {
        pir_core::Error::WrongVersion { found, supported } if found < supported => {
            UpdateError::Format(format!(
                "manifest format version {found} is older than this build reads ({supported}: \
                 it adds the release version and expiry clients check); the vendor must \
                 rebuild the release with `pir release build`"
            ))
        }
        pir_core::Error::WrongVersion { found, supported } => UpdateError::Format(format!(
            "manifest format version {found} is not supported (this build reads version \
             {supported}); upgrade pir"
        )),
        pir_core::Error::WrongMagic => not_a_manifest(),
        // The consistency rules already say "manifest: ...".
        pir_core::Error::Malformed(why) => UpdateError::Format(why),
        other => wire(other),
    })
}

/// The unsigned manifest body (the module documentation's table); the signature over it is
/// added by [`Manifest::encode_signed`]. [`Codec::decode`] checks every count against the bytes
/// left before allocating and then the consistency rules ([`pir_core::Error::Malformed`]).
impl Codec<'_> for Manifest {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        MANIFEST.write(w);
        w.u32(self.block_size);
        w.u64(self.block_count);
        w.u64(self.created_unix);
        w.u64(self.release_version);
        w.u64(self.expires_unix);
        // A valid manifest has at most 2^32 blocks and so at most 2^32 - 1 files + 1; a larger
        // list is refused by every decoder anyway.
        w.u32(u32::try_from(self.files.len()).unwrap_or(u32::MAX));
        for file in &self.files {
            w.short_bytes(file.name.as_bytes());
            w.u64(file.size);
            w.u64(file.first_block);
            w.u64(file.block_count);
            w.bytes(&file.sha256);
        }
        for hash in &self.block_hashes {
            w.bytes(hash);
        }
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, pir_core::Error> {
        let bad = |why: String| pir_core::Error::Malformed(format!("manifest: {why}"));
        MANIFEST.read(r)?;
        let block_size = r.u32()?;
        let block_count = r.u64()?;
        let created_unix = r.u64()?;
        let release_version = r.u64()?;
        let expires_unix = r.u64()?;
        let file_count = r.u32()? as usize;
        // The shape bounds B (at most 2^32, B * b addressable) before anything is sized from it.
        let shape =
            DbShape::new(block_count, block_size as usize).map_err(|e| bad(e.to_string()))?;
        if file_count == 0 {
            return Err(bad("the release lists no files".into()));
        }
        // Each file takes at least one block.
        check_count(r, "files", file_count, shape.block_count(), MIN_ENTRY_LEN)?;
        let mut files = Vec::with_capacity(file_count);
        for _ in 0..file_count {
            let name = std::str::from_utf8(r.short_bytes(MAX_NAME_LEN)?)
                .map_err(|_| bad("a file name is not UTF-8".into()))?
                .to_owned();
            files.push(FileEntry {
                name,
                size: r.u64()?,
                first_block: r.u64()?,
                block_count: r.u64()?,
                sha256: r.array()?,
            });
        }
        // Cannot overflow: B * b is addressable and b >= 64 > 32.
        let hash_bytes = shape.block_count() * HASH_LEN;
        let block_hashes = r
            .take(hash_bytes)?
            .chunks_exact(HASH_LEN)
            .map(|chunk| {
                let mut hash = [0u8; HASH_LEN];
                hash.copy_from_slice(chunk);
                hash
            })
            .collect();
        let manifest = Manifest {
            block_size,
            block_count,
            created_unix,
            release_version,
            expires_unix,
            files,
            block_hashes,
        };
        manifest.validate().map_err(|e| match e {
            UpdateError::Format(why) => pir_core::Error::Malformed(why),
            other => pir_core::Error::Malformed(other.to_string()),
        })?;
        Ok(manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{other_key, vendor_key};
    use proptest::prelude::*;

    /// A small consistent manifest: two files in four 64-byte blocks.
    fn sample() -> Manifest {
        Manifest {
            block_size: 64,
            block_count: 4,
            created_unix: 1_700_000_000,
            release_version: 7,
            expires_unix: 1_800_000_000,
            files: vec![
                FileEntry {
                    name: "pool/main/a.deb".into(),
                    size: 100,
                    first_block: 0,
                    block_count: 2,
                    sha256: [0xaa; 32],
                },
                FileEntry {
                    name: "pool/main/b.deb".into(),
                    size: 0,
                    first_block: 2,
                    block_count: 2,
                    sha256: [0xbb; 32],
                },
            ],
            block_hashes: (0..4u8).map(|i| [i; 32]).collect(),
        }
    }

    /// Signs an arbitrary body, so malformed bodies get past the signature check.
    fn sign_raw(body: &[u8]) -> Vec<u8> {
        let mut bytes = body.to_vec();
        bytes.extend_from_slice(
            &vendor_key().sign(&signing_message(MANIFEST_SIGNING_CONTEXT, body)),
        );
        bytes
    }

    #[test]
    fn round_trip_verified_and_unverified() {
        let m = sample();
        let bytes = m.encode_signed(&vendor_key());
        assert_eq!(
            Manifest::decode_verified(&bytes, &vendor_key().public()).unwrap(),
            m
        );
        assert_eq!(Manifest::decode_unverified(&bytes).unwrap(), m);
        assert_eq!(m.shape().unwrap(), DbShape::new(4, 64).unwrap());
        assert_eq!(m.file("pool/main/b.deb").unwrap().first_block, 2);
        assert!(m.file("pool/main/c.deb").is_none());
    }

    #[test]
    fn known_answer() {
        let bytes = sample().encode_signed(&vendor_key());
        // Header: magic, version 2, b = 64, B = 4, created, release version 7, expiry, 2 files,
        // then the first name's length.
        assert_eq!(
            hex::encode(&bytes[..HEADER_LEN + 2]),
            "5049524d0200400000000400000000000000\
             00f15365000000000700000000000000\
             00d2496b00000000020000000f00"
        );
        assert_eq!(
            bytes.len(),
            HEADER_LEN + 2 * (MIN_ENTRY_LEN - 1) + 30 + 4 * 32 + 64
        );
        // Ed25519 is deterministic, so the whole signed file (and the release id) is fixed.
        assert_eq!(
            hex::encode(Manifest::release_id(&bytes)),
            crate::testutil::MANIFEST_KAT_RELEASE_ID
        );
    }

    #[test]
    fn every_flipped_byte_fails_verification() {
        let bytes = sample().encode_signed(&vendor_key());
        let public = vendor_key().public();
        for i in 0..bytes.len() {
            let mut bad = bytes.clone();
            bad[i] ^= 0x01;
            assert!(
                Manifest::decode_verified(&bad, &public).is_err(),
                "flip at byte {i} accepted"
            );
        }
    }

    #[test]
    fn wrong_vendor_key_names_the_key() {
        let bytes = sample().encode_signed(&vendor_key());
        let other = other_key().public();
        let err = Manifest::decode_verified(&bytes, &other).unwrap_err();
        assert!(matches!(err, UpdateError::Signature(_)), "{err}");
        assert!(err.to_string().contains(&other.fingerprint()), "{err}");
    }

    #[test]
    fn not_a_manifest_is_a_format_error() {
        let err = Manifest::decode_verified(&[0u8; 200], &vendor_key().public()).unwrap_err();
        assert!(matches!(err, UpdateError::Format(_)), "{err}");
        assert!(err.to_string().contains("not a pir manifest"));
    }

    #[test]
    fn every_truncation_fails() {
        let bytes = sample().encode_signed(&vendor_key());
        let public = vendor_key().public();
        for len in 0..bytes.len() {
            assert!(
                Manifest::decode_verified(&bytes[..len], &public).is_err(),
                "len {len}"
            );
            assert!(
                Manifest::decode_unverified(&bytes[..len]).is_err(),
                "len {len}"
            );
        }
    }

    /// Malformed manifests that are correctly signed: the parser and the consistency checks
    /// must reject each one, not the signature check.
    #[test]
    fn fail_cases_are_rejected() {
        let good = sample().encode_body();
        let patched = |offset: usize, value: &[u8]| {
            let mut body = good.clone();
            body[offset..offset + value.len()].copy_from_slice(value);
            body
        };
        let with = |change: fn(&mut Manifest)| {
            let mut m = sample();
            change(&mut m);
            m.encode_body()
        };
        let mut trailing = good.clone();
        trailing.push(0);
        let cases: Vec<(&str, Vec<u8>)> = vec![
            ("fail_empty", vec![]),
            ("fail_bad_magic", patched(0, b"PIRL")),
            ("fail_version_1", patched(4, &1u16.to_le_bytes())),
            ("fail_version_3", patched(4, &3u16.to_le_bytes())),
            (
                "fail_block_size_not_multiple_of_64",
                patched(6, &65u32.to_le_bytes()),
            ),
            ("fail_block_size_zero", patched(6, &0u32.to_le_bytes())),
            ("fail_block_count_zero", patched(10, &0u64.to_le_bytes())),
            (
                "fail_block_count_huge",
                patched(10, &u64::MAX.to_le_bytes()),
            ),
            (
                "fail_block_count_more_than_hashes",
                patched(10, &5u64.to_le_bytes()),
            ),
            ("fail_file_count_zero", patched(42, &0u32.to_le_bytes())),
            ("fail_file_count_huge", patched(42, &u32::MAX.to_le_bytes())),
            ("fail_file_count_three", patched(42, &3u32.to_le_bytes())),
            (
                "fail_name_length_huge",
                patched(46, &u16::MAX.to_le_bytes()),
            ),
            ("fail_name_not_utf8", patched(48, &[0xff])),
            ("fail_trailing_byte", trailing),
            ("fail_truncated_hashes", good[..good.len() - 1].to_vec()),
            ("fail_no_files", with(|m| m.files.clear())),
            (
                "fail_duplicate_name",
                with(|m| m.files[1].name = m.files[0].name.clone()),
            ),
            ("fail_empty_name", with(|m| m.files[0].name.clear())),
            (
                "fail_absolute_name",
                with(|m| m.files[0].name = "/etc/passwd".into()),
            ),
            (
                "fail_dotdot_name",
                with(|m| m.files[0].name = "pool/../../x".into()),
            ),
            ("fail_dot_name", with(|m| m.files[0].name = "./x".into())),
            (
                "fail_trailing_slash_name",
                with(|m| m.files[0].name = "pool/".into()),
            ),
            (
                "fail_nul_in_name",
                with(|m| m.files[0].name = "a\0b".into()),
            ),
            (
                "fail_backslash_in_name",
                with(|m| m.files[0].name = "a\\b".into()),
            ),
            (
                "fail_newline_in_name",
                with(|m| m.files[0].name = "a\nb".into()),
            ),
            (
                "fail_overlapping_files",
                with(|m| m.files[1].first_block = 1),
            ),
            ("fail_decreasing_files", with(|m| m.files.swap(0, 1))),
            ("fail_zero_block_file", with(|m| m.files[0].block_count = 0)),
            ("fail_file_past_end", with(|m| m.files[1].block_count = 3)),
            (
                "fail_file_range_overflows",
                with(|m| m.files[1].first_block = u64::MAX),
            ),
            ("fail_size_over_blocks", with(|m| m.files[0].size = 129)),
            (
                "fail_hash_count_mismatch",
                with(|m| {
                    m.block_hashes.pop();
                }),
            ),
        ];
        let public = vendor_key().public();
        for (name, body) in cases {
            let signed = sign_raw(&body);
            let err = Manifest::decode_verified(&signed, &public)
                .expect_err(name)
                .to_string();
            assert!(Manifest::decode_unverified(&signed).is_err(), "{name}");
            assert!(!err.is_empty(), "{name}");
        }
        // The unpatched body really is accepted, so the cases above fail for their own reason.
        Manifest::decode_verified(&sign_raw(&good), &public).unwrap();
    }

    #[test]
    fn file_names() {
        for ok in [
            "a",
            "pool/main/z/zlib/zlib1g_1.3_amd64.deb",
            "a..b",
            ".hidden",
            "ü/ñ",
        ] {
            check_file_name(ok).unwrap();
        }
        for bad in [
            "", "/a", "a/", "a//b", ".", "..", "a/../b", "a/./b", "a\0", "a\\b", "\u{7f}",
        ] {
            assert!(check_file_name(bad).is_err(), "{bad:?}");
        }
        assert!(check_file_name(&"x".repeat(MAX_NAME_LEN + 1)).is_err());
        check_file_name(&"x".repeat(MAX_NAME_LEN)).unwrap();
    }

    proptest! {
        #[test]
        fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..512)) {
            let _ = Manifest::decode_unverified(&bytes);
            let _ = Manifest::decode_verified(&bytes, &vendor_key().public());
        }

        #[test]
        fn random_bodies_after_a_valid_header_never_panic(
            tail in proptest::collection::vec(any::<u8>(), 0..512),
            block_count in 1u64..64,
            file_count in 0u32..8,
        ) {
            let mut w = Writer::with_capacity(HEADER_LEN + tail.len() + 64);
            MANIFEST.write(&mut w);
            w.u32(64);
            w.u64(block_count);
            w.u64(0);
            w.u32(file_count);
            w.bytes(&tail);
            w.bytes(&[0; SIGNATURE_LEN]);
            let _ = Manifest::decode_unverified(&w.into_bytes());
        }

        #[test]
        fn mutated_manifests_never_panic(at in any::<prop::sample::Index>(), value in any::<u8>()) {
            let mut bytes = sample().encode_signed(&vendor_key());
            let i = at.index(bytes.len());
            bytes[i] = value;
            let _ = Manifest::decode_unverified(&bytes);
        }

        #[test]
        fn consistent_manifests_round_trip(
            sizes in proptest::collection::vec((0u64..300, 0u64..3), 1..6),
            created in any::<u64>(),
        ) {
            let mut files = Vec::new();
            let mut next = 0;
            for (i, (size, extra)) in sizes.iter().enumerate() {
                let blocks = size.div_ceil(64).max(1) + extra;
                files.push(FileEntry { name: format!("f{i}"), size: *size, first_block: next, block_count: blocks, sha256: [i as u8; 32] });
                next += blocks;
            }
            let m = Manifest { block_size: 64, block_count: next, created_unix: created, release_version: 1, expires_unix: u64::MAX, files, block_hashes: vec![[7; 32]; next as usize] };
            let bytes = m.encode_signed(&vendor_key());
            prop_assert_eq!(Manifest::decode_verified(&bytes, &vendor_key().public()).unwrap(), m);
        }
    }
}
