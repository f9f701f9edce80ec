//! `tests/vectors/{manifest,mirror_list}/fail_*.hex`: the unsigned bodies of the release
//! manifest and the mirror list refuse damaged bytes for their stated reason, through the
//! shared runner of `pir_core::codec` (the signature around them is checked before, by
//! `decode_verified`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector};
use pir_core::Codec;
use pir_keys::PublicKey;
use pir_updates::manifest::{FileEntry, Manifest};
use pir_updates::mirrors::{MirrorEntry, MirrorList};

fn dir(format: &str) -> std::path::PathBuf {
    vectors_dir(env!("CARGO_MANIFEST_DIR"), format)
}

#[test]
fn manifest() {
    let manifest = Manifest {
        block_size: 64,
        block_count: 1,
        created_unix: 1,
        release_version: 2,
        expires_unix: 3,
        files: vec![FileEntry {
            name: "a".into(),
            size: 10,
            first_block: 0,
            block_count: 1,
            sha256: [4; 32],
        }],
        block_hashes: vec![[5; 32]],
    };
    let good = manifest.to_bytes();
    assert_eq!(Manifest::from_bytes(&good, &()).unwrap(), manifest);
    // Offsets: file count 42, name length 46, name 48, size 49, first block 57, blocks 65.
    assert_eq!(good.len(), 137);
    let vectors = [
        FailVector::new(
            "truncated",
            "Truncated",
            "the block hash one byte short",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the block hashes",
            trailing(&good),
        ),
        FailVector::new(
            "no_files",
            "Malformed",
            "file count 0",
            patch(&good, 42, 4, 0),
        ),
        FailVector::new(
            "files_above_blocks",
            "OutOfRange",
            "2 files in 1 block",
            patch(&good, 42, 4, 2),
        ),
        FailVector::new(
            "name_oversized",
            "Oversized",
            "name length 4097",
            patch(&good, 46, 2, 4097),
        ),
        FailVector::new(
            "name_not_utf8",
            "Malformed",
            "name byte 0xff",
            patch(&good, 48, 1, 0xff),
        ),
        FailVector::new(
            "file_past_end",
            "Malformed",
            "first block 1 of 1",
            patch(&good, 57, 8, 1),
        ),
        FailVector::new(
            "bad_shape",
            "Malformed",
            "block size 65",
            patch(&good, 6, 4, 65),
        ),
    ];
    check_fail_vectors::<Manifest>(&dir("manifest"), &vectors, &());
}

#[test]
fn mirror_list() {
    let list = MirrorList {
        created_unix: 1,
        list_version: 2,
        expires_unix: 3,
        mirrors: vec![MirrorEntry::new("https://a:1".into(), PublicKey([6; 32]))],
    };
    let good = list.to_bytes();
    assert_eq!(MirrorList::from_bytes(&good, &()).unwrap(), list);
    // Offsets: list version 14, expiry 22, count 30, URL length 32, URL 34..45, key 45..77.
    assert_eq!(good.len(), 77);
    let vectors = [
        FailVector::new(
            "format_version_1",
            "WrongVersion",
            "version 1: the old format, without a list version and an expiry",
            patch(&good, 4, 2, 1),
        ),
        FailVector::new(
            "truncated",
            "Truncated",
            "the key one byte short",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the last mirror",
            trailing(&good),
        ),
        FailVector::new("no_mirrors", "Malformed", "count 0", patch(&good, 30, 2, 0)),
        FailVector::new(
            "count_above_bytes",
            "Truncated",
            "2 mirrors, one follows",
            patch(&good, 30, 2, 2),
        ),
        FailVector::new(
            "url_above_bytes",
            "Truncated",
            "URL length 200",
            patch(&good, 32, 2, 200),
        ),
        FailVector::new(
            "url_scheme",
            "Malformed",
            "http:// instead of https://",
            patch(&good, 38, 1, u64::from(b':')),
        ),
    ];
    check_fail_vectors::<MirrorList>(&dir("mirror_list"), &vectors, &());
}

/// Format 3: a mirror stating the chunks it holds (`pir mirror serve --chunks 0,2/4`).
#[test]
fn mirror_list_format_3() {
    let mut entry = MirrorEntry::new("https://a:1".into(), PublicKey([6; 32]));
    entry.chunks = Some(pir_updates::mirrors::parse_chunks("0,2/4").unwrap());
    let list = MirrorList {
        created_unix: 1,
        list_version: 2,
        expires_unix: 3,
        mirrors: vec![entry],
    };
    let good = list.to_bytes();
    assert_eq!(MirrorList::from_bytes(&good, &()).unwrap(), list);
    // Version 3 at 4; flags at 77, chunk count 78..80, the chunks held at 80.
    assert_eq!(good.len(), 81);
    assert_eq!(&good[4..6], &[3, 0]);
    assert_eq!(&good[77..81], &[2, 4, 0, 0b101]);
    let vectors = [
        FailVector::new(
            "v3_unknown_flag",
            "UnknownValue",
            "flags 4: no such field",
            patch(&good, 77, 1, 4),
        ),
        FailVector::new(
            "v3_chunk_count_zero",
            "OutOfRange",
            "chunk count 0",
            patch(&good, 78, 2, 0),
        ),
        FailVector::new(
            "v3_chunk_count_above_256",
            "OutOfRange",
            "chunk count 257",
            patch(&good, 78, 2, 257),
        ),
        FailVector::new(
            "v3_no_chunk_held",
            "Malformed",
            "the chunks held: none",
            patch(&good, 80, 1, 0),
        ),
        FailVector::new(
            "v3_chunk_past_count",
            "Malformed",
            "chunk 4 of 4 held",
            patch(&good, 80, 1, 0b1_0101),
        ),
        FailVector::new(
            "v3_truncated",
            "Truncated",
            "the chunks held missing",
            cut(&good),
        ),
    ];
    check_fail_vectors::<MirrorList>(&dir("mirror_list_v3"), &vectors, &());
}
