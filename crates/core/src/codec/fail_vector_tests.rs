//! The refusal vectors of the formats defined in this crate (`tests/vectors/<format>/`).

use super::testing::{check_fail_vectors, patch, trailing, vectors_dir, FailVector};
use super::Codec;
use crate::protocol::{AnswerBatch, QueryBatch, MAX_BATCH};
use crate::wire::{encode_envelope, Envelope, ErrorBody, ErrorCode, MessageKind};
use crate::SchemeId;

fn dir(format: &str) -> std::path::PathBuf {
    vectors_dir(env!("CARGO_MANIFEST_DIR"), format)
}

/// A query or answer batch (its count a `u16` after the 32-byte release id) claiming one
/// entry more than [`MAX_BATCH`].
fn count_above_limit(good: &[u8]) -> FailVector {
    let count = patch(good, 32, 2, MAX_BATCH as u64 + 1);
    FailVector::new("count_above_limit", "OutOfRange", "count 65 > 64", count)
}

#[test]
fn envelope() {
    let good = encode_envelope(SchemeId::RaidPir, MessageKind::Query, &[7; 8]);
    let vectors = [
        FailVector::truncated(&good, "body one byte short"),
        FailVector::new(
            "truncated_header",
            "Truncated",
            "header cut",
            good[..9].to_vec(),
        ),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after the body",
            trailing(&good),
        ),
        FailVector::new(
            "oversized",
            "Oversized",
            "length above the 64-byte limit",
            patch(&good, 8, 4, 65),
        ),
        FailVector::new(
            "length_above_bytes",
            "Truncated",
            "length 9, 8 bytes follow",
            patch(&good, 8, 4, 9),
        ),
        FailVector::new(
            "unknown_scheme",
            "WrongScheme",
            "scheme 99",
            patch(&good, 6, 1, 99),
        ),
        FailVector::new(
            "unknown_kind",
            "UnknownValue",
            "kind 42",
            patch(&good, 7, 1, 42),
        ),
        FailVector::wrong_magic(&good, 3, b'x', "PIRx"),
        FailVector::next_version(&good, 4, 2),
    ];
    assert!(check_fail_vectors::<Envelope<'static>>(&dir("envelope"), &vectors, &64) >= 9);
}

#[test]
fn error_body() {
    let good = ErrorBody::new(ErrorCode::WrongDatabase, "stale").to_bytes();
    let vectors = [
        FailVector::truncated(&good, "message one byte short"),
        FailVector::trailing(&good, "a byte after the message"),
        FailVector::new(
            "oversized",
            "Oversized",
            "message length 1025 > 1024",
            patch(&good, 2, 2, 1025),
        ),
        FailVector::new(
            "length_above_bytes",
            "Truncated",
            "length 6, 5 bytes follow",
            patch(&good, 2, 2, 6),
        ),
        FailVector::new(
            "not_utf8",
            "Malformed",
            "message byte 0xff",
            patch(&good, 4, 1, 0xff),
        ),
    ];
    check_fail_vectors::<ErrorBody>(&dir("error_body"), &vectors, &());
}

#[test]
fn query_batch() {
    let good = QueryBatch {
        release_id: [9; 32],
        queries: vec![&[1, 2], &[3]],
    }
    .to_bytes();
    let vectors = [
        FailVector::truncated(&good, "last query one byte short"),
        FailVector::trailing(&good, "a byte after the last query"),
        FailVector::new(
            "empty",
            "OutOfRange",
            "count 0",
            patch(&good, 32, 2, 0)[..34].to_vec(),
        ),
        count_above_limit(&good),
        FailVector::new(
            "count_above_bytes",
            "Truncated",
            "count 3, two queries follow",
            patch(&good, 32, 2, 3),
        ),
        FailVector::new(
            "length_above_bytes",
            "Truncated",
            "first query length 2^32-1",
            patch(&good, 34, 4, u64::from(u32::MAX)),
        ),
    ];
    check_fail_vectors::<QueryBatch<'static>>(&dir("query_batch"), &vectors, &());
}

#[test]
fn answer_batch() {
    let answers: Vec<&[u8]> = vec![&[5; 16]];
    let batch = AnswerBatch {
        payload: &[],
        release_id: [3; 32],
        answers,
        signature: [7; 64],
    };
    let good = batch.to_bytes();
    let payload_end = good.len() - 64;
    let vectors = [
        FailVector::new(
            "truncated",
            "Truncated",
            "signature only",
            good[payload_end - 1..].to_vec(),
        ),
        FailVector::new(
            "short_of_signature",
            "Truncated",
            "fewer than 64 bytes",
            good[..63].to_vec(),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "payload longer than its one answer",
            [&good[..payload_end], &[0], &good[payload_end..]].concat(),
        ),
        FailVector::new(
            "empty",
            "OutOfRange",
            "count 0",
            [&good[..32], &[0, 0][..], &good[payload_end..]].concat(),
        ),
        count_above_limit(&good),
        FailVector::new(
            "oversized_answer",
            "Oversized",
            "answer length 17 > 16",
            patch(&good, 34, 4, 17),
        ),
    ];
    check_fail_vectors::<AnswerBatch<'static>>(&dir("answer_batch"), &vectors, &16);
    let decoded = AnswerBatch::from_bytes(&good, &16).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(decoded.to_bytes(), good);
    assert_eq!(decoded.payload, &good[..payload_end]);
}
