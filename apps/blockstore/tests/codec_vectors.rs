//! `tests/vectors/{oram_state_file,oram_store_list}/fail_*.hex`: the sealed `STATE` file and
//! the store list at the head of its plaintext refuse damaged bytes for their stated reason,
//! through the shared runner of `pir_core::codec` (the ORAM state after the list is
//! `oram_state/`, checked in `pir-oram`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use pir_blockstore::disk::{StateFile, StoreList, StoreSpec, STATE_FILE_OBJECTS};
use pir_core::codec::testing::{
    check_fail_vectors, check_format, cut, patches, vectors_dir, FailVector, Patch,
};
use pir_core::Codec;

const DIR: &str = env!("CARGO_MANIFEST_DIR");

#[test]
fn state_file() {
    // The smallest sealed state: a nonce and a tag around nothing. The sealed part has no
    // length of its own (it runs to the end of the file), so a longer file is for the key to
    // refuse, and there is no `trailing` vector.
    let sealed = [7u8; 12 + 16];
    let good = StateFile {
        version: 1,
        sealed: &sealed,
    }
    .to_bytes();
    // magic 0..8, version 8, sealed from 10.
    assert_eq!(good.len(), 10 + 28);
    assert_eq!(StateFile::from_bytes(&good, &()).unwrap().sealed, sealed);
    let fields: &[Patch<'_>] = &[
        (
            "wrong_magic",
            "WrongMagic",
            "PIRoram2",
            7,
            1,
            u64::from(b'2'),
        ),
        ("next_version", "WrongVersion", "version 3", 8, 2, 3),
    ];
    // Version 2 (a store list naming an object store) is the same layout.
    let objects = StateFile {
        version: STATE_FILE_OBJECTS,
        sealed: &sealed,
    }
    .to_bytes();
    assert_eq!(&objects[8..10], &2u16.to_le_bytes());
    assert_eq!(StateFile::from_bytes(&objects, &()).unwrap().version, 2);
    let mut vectors = patches(&good, fields);
    vectors.push(FailVector::new(
        "empty",
        "Truncated",
        "no bytes",
        Vec::new(),
    ));
    vectors.push(FailVector::new(
        "no_tag",
        "Truncated",
        "the tag one byte short",
        cut(&good),
    ));
    let dir = vectors_dir(DIR, "oram_state_file");
    check_fail_vectors::<StateFile>(&dir, &vectors, &());
}

#[test]
fn store_list() {
    let list = StoreList(vec![
        StoreSpec::Dir(PathBuf::from("/srv/a")),
        StoreSpec::Dir(PathBuf::from("/srv/b")),
    ]);
    let good = list.to_bytes();
    // count 0, first length 4, first path 8..14, second length 14, second path 18..24.
    assert_eq!(good.len(), 24);
    let fields: &[Patch<'_>] = &[
        ("no_store", "Malformed", "count 0", 0, 4, 0),
        (
            "count_above_limit",
            "OutOfRange",
            "65 stores > 64",
            0,
            4,
            65,
        ),
        (
            "count_above_bytes",
            "Truncated",
            "3 stores, 2 follow",
            0,
            4,
            3,
        ),
        ("path_oversized", "Oversized", "4097 > 4096", 4, 4, 4097),
        ("path_above_bytes", "Truncated", "path length 99", 14, 4, 99),
        ("not_utf8", "Malformed", "0xff in a path", 8, 1, 0xff),
    ];
    let bad_key = StoreList(vec![StoreSpec::Dir(PathBuf::from("https://h:1 nokey"))]).to_bytes();
    let bad_bucket = StoreList(vec![StoreSpec::Dir(PathBuf::from("s3://ab/prefix"))]).to_bytes();
    let extra = vec![
        FailVector::new(
            "remote_bad_key",
            "Malformed",
            "a remote store whose key does not parse",
            bad_key,
        ),
        FailVector::new(
            "s3_bad_bucket",
            "Malformed",
            "an object store whose bucket name is too short",
            bad_bucket,
        ),
    ];
    check_format::<StoreList>(DIR, "oram_store_list", &good, &(), fields, extra);
}
