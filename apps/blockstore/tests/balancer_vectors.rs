//! `tests/vectors/oram_balancer_file/fail_*.hex`: the sealed `BSTATE` file of the oblivious
//! load balancer refuses damaged bytes for their stated reason, through the shared runner of
//! `pir_core::codec` (its plaintext's balancer state is `oram_balancer_state/`, checked in
//! `pir-oram`).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_blockstore::balanced::BalancerFile;
use pir_core::codec::testing::{check_fail_vectors, cut, patches, vectors_dir, FailVector, Patch};
use pir_core::Codec;

#[test]
fn balancer_file() {
    // The smallest sealed state: a nonce and a tag around nothing. The sealed part runs to the
    // end of the file, so a longer file is for the key to refuse: no `trailing` vector.
    let sealed = [7u8; 12 + 16];
    let good = BalancerFile { sealed: &sealed }.to_bytes();
    // magic 0..8, version 8, sealed from 10.
    assert_eq!(good.len(), 10 + 28);
    assert_eq!(BalancerFile::from_bytes(&good, &()).unwrap().sealed, sealed);
    let fields: &[Patch<'_>] = &[
        (
            "wrong_magic",
            "WrongMagic",
            "PIRoBal2",
            7,
            1,
            u64::from(b'2'),
        ),
        ("next_version", "WrongVersion", "version 2", 8, 2, 2),
    ];
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
    let dir = vectors_dir(env!("CARGO_MANIFEST_DIR"), "oram_balancer_file");
    check_fail_vectors::<BalancerFile<'_>>(&dir, &vectors, &());
}
