//! `tests/vectors/oram_state/fail_*.hex`: the client state's plaintext codec refuses each
//! damaged state for its stated reason, through the shared runner of `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_fail_vectors, cut, patch, vectors_dir, FailVector};
use pir_core::Codec;
use pir_oram::{state, Geometry, Oram};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// A fresh state of 4 blocks: 2 partitions of 2 levels, all empty (181 bytes).
fn fresh() -> Vec<u8> {
    let g = Geometry::new(512, 4, 1).unwrap();
    let oram = Oram::create(g, &mut ChaCha20Rng::seed_from_u64(1)).unwrap();
    state::encode(&oram, true)
}

#[test]
fn damaged_states_are_refused() {
    let good = fresh();
    assert_eq!(good.len(), 181);
    // Offsets: sweep 76, loc 97 (after 4 homes at 81), partition 0's cache count 117,
    // its level 0 region 122, the two client-side block counts at the end.
    let end = good.len();
    let vectors = [
        FailVector::truncated(&good, "the last count cut"),
        FailVector::trailing(&good, "a byte after the state"),
        FailVector::wrong_magic(&good, 7, b'X', "PIRORAMX"),
        FailVector::next_version(&good, 8, 4),
        FailVector::new(
            "bad_geometry",
            "Malformed",
            "block size 3",
            patch(&good, 12, 4, 3),
        ),
        FailVector::new(
            "sweep_out_of_range",
            "OutOfRange",
            "sweep 2 of 2 partitions",
            patch(&good, 76, 4, 2),
        ),
        FailVector::new(
            "cache_count_above_blocks",
            "OutOfRange",
            "5 cached ids, 4 blocks",
            patch(&good, 117, 4, 5),
        ),
        FailVector::new(
            "region_tag",
            "UnknownValue",
            "region 2",
            patch(&good, 122, 1, 2),
        ),
        FailVector::new(
            "cached_blocks_above_blocks",
            "OutOfRange",
            "5 cached blocks, 4 blocks",
            patch(&good, end - 8, 4, 5),
        ),
        FailVector::new(
            "local_blocks_above_bytes",
            "Truncated",
            "1 client-side block, no bytes",
            patch(&good, end - 4, 4, 1),
        ),
        FailVector::new(
            "inconsistent_position_map",
            "Malformed",
            "block 0 placed in an empty level",
            patch(&good, 97, 4, 0),
        ),
    ];
    check_fail_vectors::<Oram>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "oram_state"),
        &vectors,
        &(),
    );
    // The same bytes through the crate's own entry point: wrapped, with the reason kept.
    let err = state::decode(&cut(&good)).err().unwrap();
    assert!(err.to_string().contains("truncated"), "{err}");
}

#[test]
fn the_codec_and_encode_write_the_same_bytes() {
    let good = fresh();
    let oram = Oram::from_bytes(&good, &()).unwrap();
    assert!(oram.was_clean());
    assert_eq!(oram.to_bytes(), good);
}
