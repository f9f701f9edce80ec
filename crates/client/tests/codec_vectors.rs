//! `tests/vectors/evidence/fail_*.hex`: the evidence file codec refuses each damaged file for
//! its stated reason, through the shared runner of `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_client::Evidence;
use pir_core::codec::testing::{check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector};
use pir_core::Codec;
use pir_keys::PublicKey;

#[test]
fn damaged_evidence_is_refused() {
    let evidence = Evidence {
        url: "https://m".into(),
        key: PublicKey([1; 32]),
        release_id: [2; 32],
        request: vec![3; 3],
        reply: vec![4; 2],
    };
    let good = evidence.to_bytes();
    // Offsets: url length 6, url 8..17, key, release id, request length 81, reply length 88.
    assert_eq!(good.len(), 94);
    assert_eq!(Evidence::decode(&good).unwrap(), evidence);
    let vectors = [
        FailVector::new("truncated", "Truncated", "reply one byte short", cut(&good)),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the reply",
            trailing(&good),
        ),
        FailVector::new(
            "url_oversized",
            "Oversized",
            "URL length 4097 > 4096",
            patch(&good, 6, 2, 4097),
        ),
        FailVector::new(
            "url_not_utf8",
            "Malformed",
            "URL byte 0xff",
            patch(&good, 8, 1, 0xff),
        ),
        FailVector::new(
            "request_oversized",
            "Oversized",
            "request length 2^30 + 1",
            patch(&good, 81, 4, (1 << 30) + 1),
        ),
        FailVector::new(
            "reply_above_bytes",
            "Truncated",
            "reply length 3, 2 bytes follow",
            patch(&good, 88, 4, 3),
        ),
    ];
    check_fail_vectors::<Evidence>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "evidence"),
        &vectors,
        &(),
    );
}
