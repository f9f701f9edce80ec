//! `tests/vectors/{oram_store_request,oram_store_info}/fail_*.hex`: the slot-store protocol's
//! bodies refuse damaged bytes for their stated reason, through the shared runner of
//! `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_format, FailVector, Patch};
use pir_core::Codec;
use pir_oram::protocol::{SlotRun, StoreInfo, StoreRequest};

const DIR: &str = env!("CARGO_MANIFEST_DIR");

/// Extents one request may carry in these vectors.
const MAX_RUNS: usize = 16;

fn format(slot_bytes: u32, slots: u64) -> Vec<u8> {
    StoreRequest::Format { slot_bytes, slots }.to_bytes()
}

#[test]
fn store_request() {
    let runs = vec![
        SlotRun { first: 5, slots: 3 },
        SlotRun {
            first: 100,
            slots: 1,
        },
    ];
    let good = StoreRequest::Read(runs).to_bytes();
    // op 0, count 1, runs from 5.
    assert_eq!(good.len(), 29);
    let fields: &[Patch<'_>] = &[
        ("unknown_op", "UnknownValue", "operation 9", 0, 1, 9),
        (
            "count_above_limit",
            "OutOfRange",
            "17 extents > 16",
            1,
            4,
            17,
        ),
        (
            "count_above_bytes",
            "Truncated",
            "3 extents, 2 follow",
            1,
            4,
            3,
        ),
    ];
    let extra = vec![
        FailVector::new(
            "slot_bytes_zero",
            "OutOfRange",
            "FORMAT 0-byte slots",
            format(0, 8),
        ),
        FailVector::new(
            "slot_bytes_above_limit",
            "OutOfRange",
            "FORMAT 1 MiB + 1 slots",
            format((1 << 20) + 1, 8),
        ),
        FailVector::new(
            "store_above_limit",
            "OutOfRange",
            "FORMAT 2^40 slots of 4 KiB > 2^50 bytes",
            format(4096, 1 << 40),
        ),
        FailVector::new("sync_trailing", "TrailingBytes", "SYNC | 0", vec![4, 0]),
    ];
    check_format::<StoreRequest>(DIR, "oram_store_request", &good, &MAX_RUNS, fields, extra);
    // A write's data is the rest of the body, whatever its pieces were.
    let data = [&[1u8; 4][..], &[2u8; 4][..]];
    let write = StoreRequest::Write {
        runs: vec![SlotRun { first: 0, slots: 2 }],
        data: data.to_vec(),
    };
    let bytes = write.to_bytes();
    let StoreRequest::Write { data, .. } = StoreRequest::from_bytes(&bytes, &MAX_RUNS).unwrap()
    else {
        panic!("not a write");
    };
    assert_eq!(data, vec![&[1, 1, 1, 1, 2, 2, 2, 2][..]]);
}

#[test]
fn store_info() {
    let good = StoreInfo {
        slot_bytes: 4124,
        slots: 1000,
    }
    .to_bytes();
    assert_eq!(good.len(), 12);
    check_format::<StoreInfo>(DIR, "oram_store_info", &good, &(), &[], Vec::new());
}
