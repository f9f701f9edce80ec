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
