//! `tests/vectors/{records_header,offline,records_slot}/fail_*.hex`: the records database header,
//! the offline work file and a key-value slot refuse damaged bytes for their stated reason,
//! through the shared runner of `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector};
use pir_lattice::{Saved, Scheme};
use pir_records::offline::{self, OfflineFile};
use pir_records::{DbHeader, DbKind};
use sha2::{Digest, Sha256};

fn dir(format: &str) -> std::path::PathBuf {
    vectors_dir(env!("CARGO_MANIFEST_DIR"), format)
}

#[test]
fn records_header() {
    let header = DbHeader {
        kind: DbKind::Records,
        record_size: 16,
        records: 10,
        last_len: 5,
        entries: 10,
        cuckoo_seed: [0; 16],
        matrix_seeds: [[1; 16], [2; 16]],
        payload_hash: [3; 32],
    };
    let good = header.encode().to_vec();
    assert_eq!(DbHeader::decode(&good).unwrap(), header);
    // Offsets: kind 10, reserved 11, record size 12, records 16, last length 24, entries 28.
    let vectors = [
        FailVector::new("truncated", "Truncated", "127 bytes", cut(&good)),
        FailVector::new("trailing", "TrailingBytes", "129 bytes", trailing(&good)),
        FailVector::new(
            "unknown_kind",
            "UnknownValue",
            "kind 3",
            patch(&good, 10, 1, 3),
        ),
        FailVector::new(
            "reserved",
            "Malformed",
            "reserved byte 11 set",
            patch(&good, 11, 1, 1),
        ),
        FailVector::new(
            "record_size_above_limit",
            "Malformed",
            "record size 2^18 + 1",
            patch(&good, 12, 4, (1 << 18) + 1),
        ),
        FailVector::new(
            "last_length_above_record",
            "Malformed",
            "last record 17 bytes of 16",
            patch(&good, 24, 4, 17),
        ),
    ];
    check_fail_vectors::<DbHeader>(&dir("records_header"), &vectors, &());
}

/// `bytes` with its checksum recomputed, so the damage reaches the field decoders.
fn resealed(mut bytes: Vec<u8>) -> Vec<u8> {
    let digest = Sha256::digest(&bytes[42..]);
    bytes[10..42].copy_from_slice(&digest);
    bytes
}

#[test]
fn offline_file() {
    let saved = Saved {
        hint: vec![9; 4],
        extra: vec![7],
    };
    let version = [5u8; 32];
    let good = offline::encode(Scheme::SimplePir, &version, &saved);
    assert_eq!(
        offline::decode(&good, Scheme::SimplePir, &version).unwrap(),
        saved
    );
    // Offsets: digest 10, scheme 42, version 43, hint length 75, hint 83, words 87, extra 95.
    assert_eq!(good.len(), 99);
    let vectors = [
        FailVector::new(
            "truncated",
            "Truncated",
            "the digest cut",
            good[..30].to_vec(),
        ),
        FailVector::new(
            "checksum",
            "Malformed",
            "a body byte changed",
            patch(&good, 83, 1, 8),
        ),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after the words (resealed)",
            resealed(trailing(&good)),
        ),
        FailVector::new(
            "other_scheme",
            "WrongScheme",
            "DoublePIR's work",
            resealed(patch(&good, 42, 1, 4)),
        ),
        FailVector::new(
            "other_version",
            "DatabaseMismatch",
            "another database version",
            resealed(patch(&good, 43, 1, 6)),
        ),
        FailVector::new(
            "hint_oversized",
            "Oversized",
            "hint length 2^40",
            resealed(patch(&good, 75, 8, 1 << 40)),
        ),
        FailVector::new(
            "hint_above_bytes",
            "Truncated",
            "hint length 100",
            resealed(patch(&good, 75, 8, 100)),
        ),
        FailVector::new(
            "words_above_limit",
            "OutOfRange",
            "2^60 words",
            resealed(patch(&good, 87, 8, 1 << 60)),
        ),
    ];
    check_fail_vectors::<OfflineFile>(&dir("offline"), &vectors, &(Scheme::SimplePir, version));
}

/// `tests/vectors/records_slot/`: one cuckoo slot of a key-value database
/// (`pir_records::cuckoo::Slot`, context the record size).
#[test]
fn records_slot() {
    use pir_core::codec::testing::{check_format, Patch};
    use pir_core::Codec;
    use pir_records::cuckoo::{hash_key, Slot, SLOT_OVERHEAD};
    // Slots of 20 bytes: 12 of overhead, values of at most 8.
    let (_, fingerprint) = hash_key(&[4; 16], 5, b"k");
    let slot = Slot::new(fingerprint, b"hello", 20).unwrap();
    let good = slot.to_bytes();
    // The layout written by hand: fingerprint | length u32 LE | value | zero padding.
    let mut by_hand = fingerprint.to_vec();
    by_hand.extend_from_slice(&5u32.to_le_bytes());
    by_hand.extend_from_slice(b"hello");
    by_hand.resize(20, 0);
    assert_eq!(good, by_hand);
    assert_eq!(Slot::from_bytes(&good, &20).unwrap(), slot);
    assert_eq!(Slot::empty(20).to_bytes(), vec![0; 20]);
    assert!(Slot::new(fingerprint, b"123456789", 20).is_none());
    assert!(Slot::new(fingerprint, b"", SLOT_OVERHEAD - 1).is_none());
    // Offsets: fingerprint 0..8, length 8..12, value 12..17, padding 17..20.
    let fields: &[Patch<'_>] = &[
        (
            "length_out_of_range",
            "OutOfRange",
            "a 9-byte value in a slot of 20 (8 at most)",
            8,
            4,
            9,
        ),
        (
            "length_max",
            "OutOfRange",
            "a value of 2^32 - 1 bytes",
            8,
            4,
            u64::from(u32::MAX),
        ),
    ];
    let extra = vec![FailVector::new(
        "header_only",
        "Truncated",
        "fingerprint and length, no value",
        good[..SLOT_OVERHEAD].to_vec(),
    )];
    check_format::<Slot<'static>>(
        env!("CARGO_MANIFEST_DIR"),
        "records_slot",
        &good,
        &20,
        fields,
        extra,
    );
}
