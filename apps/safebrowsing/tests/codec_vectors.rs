//! `tests/vectors/safebrowsing_db/` and `tests/vectors/safebrowsing_index/`: the database file
//! and the list index refuse each damaged file for its stated reason, through the shared runner
//! of `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector};
use pir_core::Codec;
use pir_safebrowsing::list::{ListDatabase, ListIndex, Threat};

/// A database of two one-entry lists in one bucket of two records (148 bytes; its index 111).
fn database() -> ListDatabase {
    let sources = [
        (Threat::Malware, "a.example\n"),
        (Threat::Phishing, "b.example\n"),
    ];
    ListDatabase::build_lists("t", &sources, Some(2)).unwrap().0
}

/// One damage: (file, reason, error expected, what is wrong, offset, width, value written).
type Damage = (
    &'static str,
    &'static str,
    &'static str,
    &'static str,
    usize,
    usize,
    u64,
);

/// Database offsets: name length 10, ratio 33, sources 35, bucket count 36, record count 46,
/// the records' lists 114, the digest 116 (its first byte is 0xe3). Index offsets: sources 54,
/// bucket count 55, record count 97, prefixes 101, lists 109.
const DAMAGES: [Damage; 18] = [
    (
        "db",
        "wrong_magic",
        "WrongMagic",
        "PIRsbrDX",
        7,
        1,
        b'X' as u64,
    ),
    (
        "db",
        "next_version",
        "WrongVersion",
        "format version 4",
        8,
        2,
        4,
    ),
    (
        "db",
        "name_oversized",
        "Oversized",
        "a name of 201 bytes",
        10,
        2,
        201,
    ),
    ("db", "merge_ratio", "Malformed", "merge ratio 1", 33, 1, 1),
    (
        "db",
        "unknown_source",
        "UnknownValue",
        "sources bit 5",
        35,
        1,
        0x23,
    ),
    ("db", "no_buckets", "OutOfRange", "0 buckets", 36, 2, 0),
    (
        "db",
        "too_many_buckets",
        "OutOfRange",
        "65 buckets",
        36,
        2,
        65,
    ),
    (
        "db",
        "records_above_bytes",
        "Truncated",
        "1000 records",
        46,
        4,
        1000,
    ),
    (
        "db",
        "list_without_source",
        "UnknownValue",
        "on unwanted, no source",
        114,
        1,
        4,
    ),
    (
        "db",
        "digest",
        "Malformed",
        "one digest bit flipped",
        116,
        1,
        0xe2,
    ),
    (
        "index",
        "wrong_magic",
        "WrongMagic",
        "PIRsbrIY",
        7,
        1,
        b'Y' as u64,
    ),
    (
        "index",
        "next_version",
        "WrongVersion",
        "format version 3",
        8,
        2,
        3,
    ),
    ("index", "no_source", "UnknownValue", "sources 0", 54, 1, 0),
    ("index", "no_buckets", "OutOfRange", "0 buckets", 55, 2, 0),
    (
        "index",
        "records_above_bytes",
        "Truncated",
        "1000 records",
        97,
        4,
        1000,
    ),
    (
        "index",
        "prefixes_out_of_order",
        "Malformed",
        "prefix ffffffff first",
        101,
        4,
        0xffff_ffff,
    ),
    (
        "index",
        "unknown_list",
        "UnknownValue",
        "lists bit 7",
        109,
        1,
        0x81,
    ),
    (
        "index",
        "all_dead",
        "Malformed",
        "no live record",
        109,
        2,
        0,
    ),
];

/// The refusal vectors of `file`, made from its valid bytes `good`.
fn vectors(file: &str, good: &[u8]) -> Vec<FailVector> {
    let mut out = vec![
        FailVector::new("truncated", "Truncated", "the last byte cut", cut(good)),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the end",
            trailing(good),
        ),
    ];
    for &(of, reason, expect, note, at, width, value) in &DAMAGES {
        if of == file {
            out.push(FailVector::new(
                reason,
                expect,
                note,
                patch(good, at, width, value),
            ));
        }
    }
    out
}

#[test]
fn damaged_files_are_refused() {
    let db = database();
    let (file, index) = (db.to_bytes(), db.index().to_bytes());
    assert_eq!((file.len(), index.len(), file[116]), (148, 111, 0xe3));
    let dir = |format| vectors_dir(env!("CARGO_MANIFEST_DIR"), format);
    let checked =
        check_fail_vectors::<ListDatabase>(&dir("safebrowsing_db"), &vectors("db", &file), &())
            + check_fail_vectors::<ListIndex>(
                &dir("safebrowsing_index"),
                &vectors("index", &index),
                &(),
            );
    assert_eq!(checked, DAMAGES.len() + 4);
    assert_eq!(ListDatabase::decode(&file).unwrap(), db);
    assert_eq!(ListIndex::decode(&index).unwrap(), db.index());
}
