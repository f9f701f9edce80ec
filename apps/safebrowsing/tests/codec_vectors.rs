//! `tests/vectors/safebrowsing_db/` and `tests/vectors/safebrowsing_index/`: the database file
//! and the list index refuse each damaged file for its stated reason, through the shared runner
//! of `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector};
use pir_core::Codec;
use pir_safebrowsing::list::{ListDatabase, ListIndex, Threat};

/// A database of two one-entry lists in one bucket of two records (148 bytes).
fn database() -> ListDatabase {
    let sources = [
        (Threat::Malware, "a.example\n"),
        (Threat::Phishing, "b.example\n"),
    ];
    ListDatabase::build_lists("t", &sources, Some(2)).unwrap().0
}

#[test]
fn damaged_databases_are_refused() {
    let good = database().to_bytes();
    assert_eq!(good.len(), 148);
    // Offsets: name length 10, ratio 33, sources 35, bucket count 36, record count 46,
    // the records' lists 114, the digest 116.
    let vectors = [
        FailVector::new("truncated", "Truncated", "the digest cut", cut(&good)),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the digest",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_magic",
            "WrongMagic",
            "PIRsbrDX",
            patch(&good, 7, 1, u64::from(b'X')),
        ),
        FailVector::new(
            "next_version",
            "WrongVersion",
            "format version 4",
            patch(&good, 8, 2, 4),
        ),
        FailVector::new(
            "name_oversized",
            "Oversized",
            "a name of 201 bytes",
            patch(&good, 10, 2, 201),
        ),
        FailVector::new(
            "merge_ratio",
            "Malformed",
            "merge ratio 1",
            patch(&good, 33, 1, 1),
        ),
        FailVector::new(
            "unknown_source",
            "UnknownValue",
            "sources bit 5",
            patch(&good, 35, 1, 0x23),
        ),
        FailVector::new(
            "no_buckets",
            "OutOfRange",
            "0 buckets",
            patch(&good, 36, 2, 0),
        ),
        FailVector::new(
            "too_many_buckets",
            "OutOfRange",
            "65 buckets",
            patch(&good, 36, 2, 65),
        ),
        FailVector::new(
            "records_above_bytes",
            "Truncated",
            "1000 records announced",
            patch(&good, 46, 4, 1000),
        ),
        FailVector::new(
            "list_without_source",
            "UnknownValue",
            "a record on the unwanted list, which has no source",
            patch(&good, 114, 1, 0x04),
        ),
        FailVector::new(
            "digest",
            "Malformed",
            "one digest bit flipped",
            patch(&good, 116, 1, u64::from(good[116] ^ 1)),
        ),
    ];
    check_fail_vectors::<ListDatabase>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "safebrowsing_db"),
        &vectors,
        &(),
    );
    assert_eq!(ListDatabase::decode(&good).unwrap(), database());
}

#[test]
fn damaged_indexes_are_refused() {
    let good = database().index().to_bytes();
    assert_eq!(good.len(), 111);
    // Offsets: sources 54, bucket count 55, record count 97, prefixes 101, lists 109.
    let vectors = [
        FailVector::new(
            "truncated",
            "Truncated",
            "the last lists byte cut",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the index",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_magic",
            "WrongMagic",
            "PIRsbrIY",
            patch(&good, 7, 1, u64::from(b'Y')),
        ),
        FailVector::new(
            "next_version",
            "WrongVersion",
            "format version 3",
            patch(&good, 8, 2, 3),
        ),
        FailVector::new(
            "no_source",
            "UnknownValue",
            "sources 0",
            patch(&good, 54, 1, 0),
        ),
        FailVector::new(
            "no_buckets",
            "OutOfRange",
            "0 buckets",
            patch(&good, 55, 2, 0),
        ),
        FailVector::new(
            "records_above_bytes",
            "Truncated",
            "1000 records announced",
            patch(&good, 97, 4, 1000),
        ),
        FailVector::new(
            "prefixes_out_of_order",
            "Malformed",
            "first prefix ffffffff",
            patch(&good, 101, 4, 0xffff_ffff),
        ),
        FailVector::new(
            "unknown_list",
            "UnknownValue",
            "lists bit 7",
            patch(&good, 109, 1, 0x81),
        ),
        FailVector::new(
            "all_dead",
            "Malformed",
            "no live record",
            patch(&good, 109, 2, 0),
        ),
    ];
    check_fail_vectors::<ListIndex>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "safebrowsing_index"),
        &vectors,
        &(),
    );
    assert_eq!(ListIndex::decode(&good).unwrap(), database().index());
}
