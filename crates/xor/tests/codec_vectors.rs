//! `tests/vectors/chor_query/fail_*.hex`: the Chor query body refuses damaged bytes for its
//! stated reason, through the shared runner of `pir_core::codec` (the same damage as the older
//! `tests/vectors/fail_chor_*.hex`, which `kat.rs` reads through a mirror's answer path).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::bits::BitVec;
use pir_core::codec::testing::{check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector};
use pir_core::{Codec, DbShape};
use pir_xor::chor::ChorQueryBody;
use pir_xor::ChorQuery;

#[test]
fn chor_query() {
    // B = 20 blocks of b = 64 bytes: 12 header bytes, then 3 bytes of bits.
    let shape = DbShape::new(20, 64).unwrap();
    // Blocks 0, 5 and 18 selected, as in the older vectors.
    let bits = BitVec::from_wire(20, &[0x21, 0x00, 0x04]).unwrap();
    let body = ChorQueryBody {
        shape,
        query: ChorQuery { bits },
    };
    let good = body.to_bytes();
    assert_eq!(good.len(), 15);
    assert_eq!(ChorQueryBody::from_bytes(&good, &shape).unwrap(), body);
    let vectors = [
        FailVector::new("empty", "Truncated", "no header", Vec::new()),
        FailVector::new(
            "truncated",
            "Truncated",
            "last bits byte missing",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the bits",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_block_count",
            "DatabaseMismatch",
            "block_count 19 instead of 20",
            patch(&good, 0, 8, 19),
        ),
        FailVector::new(
            "wrong_block_size",
            "DatabaseMismatch",
            "block_size 192 instead of 64",
            patch(&good, 8, 4, 192),
        ),
        FailVector::new(
            "tail_bit_set",
            "Malformed",
            "B = 20: bit 23 of the last byte is set",
            patch(&good, 14, 1, u64::from(good[14] | 0x80)),
        ),
    ];
    check_fail_vectors::<ChorQueryBody>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "chor_query"),
        &vectors,
        &shape,
    );
}

/// `tests/vectors/singlepass_changes/`: a SinglePass changes body (`wire::Body<Changes>`).
#[test]
fn singlepass_changes() {
    use pir_xor::singlepass::wire::{Body, SHAPE_LEN};
    use pir_xor::singlepass::{Changes, Params};
    // B = 100 records of 8 bytes in 10 rows of m = 10 columns; two changes.
    let params = Params::with_rows(100, 8, 10).unwrap();
    let mut changes = Changes::new(8);
    changes.push_delta(3, &[1; 8]).unwrap();
    changes.push_delta(99, &[2; 8]).unwrap();
    let body = Body {
        params,
        value: changes,
    };
    let good = body.to_bytes();
    assert_eq!(good.len(), SHAPE_LEN + 4 + 2 * 16);
    assert_eq!(Body::<Changes>::from_bytes(&good, &params).unwrap(), body);
    let vectors = [
        FailVector::new("empty", "Truncated", "no shape", Vec::new()),
        FailVector::new(
            "truncated",
            "Truncated",
            "last delta byte missing",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the changes",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_records",
            "DatabaseMismatch",
            "101 records instead of 100",
            patch(&good, 0, 8, 101),
        ),
        FailVector::new(
            "wrong_columns",
            "DatabaseMismatch",
            "11 columns instead of 10",
            patch(&good, 12, 4, 11),
        ),
        FailVector::new(
            "count_above_limit",
            "OutOfRange",
            "2^24 + 1 changes",
            patch(&good, SHAPE_LEN, 4, (1 << 24) + 1),
        ),
        FailVector::new(
            "count_above_bytes",
            "Truncated",
            "3 changes, two follow",
            patch(&good, SHAPE_LEN, 4, 3),
        ),
        FailVector::new(
            "index_out_of_range",
            "OutOfRange",
            "a change of record 100 of 100",
            patch(&good, SHAPE_LEN + 4, 8, 100),
        ),
    ];
    check_fail_vectors::<Body<Changes>>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "singlepass_changes"),
        &vectors,
        &params,
    );
}

/// `tests/vectors/singlepass_state/`: a saved SinglePass client (`singlepass::Client`).
#[test]
fn singlepass_state() {
    use pir_xor::singlepass::{Client, OfflineRequest, Params};
    // B = 6 records of 2 bytes in 2 rows of m = 3 columns.
    let params = Params::with_rows(6, 2, 2).unwrap();
    let request = OfflineRequest { master: [5; 16] };
    let client = Client::new(params, &request, &[0; 6]).unwrap();
    let good = client.encode_state();
    let magic = pir_xor::singlepass::client::STATE_MAGIC.len();
    assert_eq!(good.len(), magic + 16 + 12 + 6 + 3);
    let offsets = magic + 16;
    let pending = good.len() - 3;
    let vectors = [
        FailVector::new(
            "truncated",
            "WrongLength",
            "a pending flag missing",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after the state",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_magic",
            "WrongMagic",
            "pir-singlepass-state-v2",
            patch(&good, magic - 1, 1, u64::from(b'2')),
        ),
        FailVector::new(
            "wrong_records",
            "DatabaseMismatch",
            "7 records instead of 6",
            patch(&good, magic, 8, 7),
        ),
        FailVector::new(
            "not_a_permutation",
            "Malformed",
            "row 0 holds offset 0 twice",
            patch(&patch(&good, offsets, 2, 0), offsets + 2, 2, 0),
        ),
        FailVector::new(
            "bad_pending_flag",
            "Malformed",
            "a pending flag of 2",
            patch(&good, pending, 1, 2),
        ),
    ];
    check_fail_vectors::<Client>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "singlepass_state"),
        &vectors,
        &params,
    );
}

/// `tests/vectors/checklist_state/`: a saved Checklist client (`checklist::Client`).
#[test]
fn checklist_state() {
    use pir_xor::checklist::{Client, OfflineRequest, Params};
    // B = 16 records of 2 bytes in sets of 4: m = 28 * 16 / 4 = 112 hints.
    let params = Params::with_set_size(16, 2, 4).unwrap();
    let request = OfflineRequest { master: [6; 16] };
    let client = Client::new(params, &request, &vec![0; params.hint_bytes()]).unwrap();
    let good = client.encode_state();
    let magic = pir_xor::checklist::client::STATE_MAGIC.len();
    let m = params.hints();
    assert_eq!(good.len(), magic + 20 + m * 25 + params.hint_bytes());
    let first_key = magic + 20;
    let vectors = [
        FailVector::new(
            "truncated",
            "WrongLength",
            "a parity byte missing",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after the state",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_magic",
            "WrongMagic",
            "pir-checklist-state-v2",
            patch(&good, magic - 1, 1, u64::from(b'2')),
        ),
        FailVector::new(
            "wrong_set_size",
            "DatabaseMismatch",
            "sets of 5 instead of 4",
            patch(&good, magic + 12, 4, 5),
        ),
        FailVector::new(
            "bad_present_flag",
            "Malformed",
            "set 0's present flag is 2",
            patch(&good, first_key, 1, 2),
        ),
        FailVector::new(
            "shift_out_of_range",
            "Malformed",
            "set 0's shift is 16 of 16 records",
            patch(&good, first_key + 17, 8, 16),
        ),
    ];
    check_fail_vectors::<Client>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "checklist_state"),
        &vectors,
        &params,
    );
}
