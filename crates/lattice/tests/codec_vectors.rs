//! `tests/vectors/{lattice_hint,lattice_query,lattice_answer,ypir_query,ypir_answer}/fail_*.hex`:
//! the lattice message bodies (inside the envelope) refuse damaged bytes for their stated
//! reason, through the shared runner of `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector};
use pir_core::Codec;
use pir_lattice::wire::{self, AnswerBody, HintBody, QueryBody, QueryContext};
use pir_lattice::ypir::wire as ywire;
use pir_lattice::{HintHeader, Params, Scheme};

fn dir(format: &str) -> std::path::PathBuf {
    vectors_dir(env!("CARGO_MANIFEST_DIR"), format)
}

/// 20 one-byte records: 4 rows × 5 columns, p = 256 (as in the crate's query known answer).
fn params() -> Params {
    Params::new(Scheme::SimplePir, 20, 8).unwrap()
}

const VERSION: [u8; 32] = [0xab; 32];

#[test]
fn lattice_hint() {
    let header = HintHeader {
        params: params(),
        seed: [0x11; 16],
        seed2: None,
        version: VERSION,
    };
    let hint = HintBody {
        header,
        matrix: None,
    };
    let good = hint.to_bytes();
    // contents 0 | n 1 | p 3 | rows 7 | columns 11 | record bits 15 | records 19 | seed 27 |
    // version 43..75.
    assert_eq!(good.len(), 75);
    assert_eq!(
        HintBody::from_bytes(&good, &Scheme::SimplePir).unwrap(),
        hint
    );
    // The body is the one the header-only message carries.
    assert_eq!(header.encode()[12..], good[..]);
    let full = HintBody {
        header,
        matrix: Some((0..header.matrix_words() as u32).collect()),
    };
    let full_bytes = full.to_bytes();
    assert_eq!(
        HintBody::from_bytes(&full_bytes, &Scheme::SimplePir).unwrap(),
        full
    );
    assert_eq!(
        wire::encode_hint(&header, full.matrix.as_deref().unwrap())[12..],
        full_bytes[..]
    );
    let vectors = [
        FailVector::new("empty", "Truncated", "no contents byte", Vec::new()),
        FailVector::new(
            "truncated",
            "Truncated",
            "version one byte short",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after a header-only hint",
            trailing(&good),
        ),
        FailVector::new(
            "unknown_contents",
            "UnknownValue",
            "contents 3",
            patch(&good, 0, 1, 3),
        ),
        FailVector::new(
            "wrong_dimension",
            "Malformed",
            "n = 512",
            patch(&good, 1, 2, 512),
        ),
        FailVector::new("zero_rows", "Malformed", "0 rows", patch(&good, 7, 4, 0)),
        FailVector::new(
            "matrix_missing",
            "WrongLength",
            "contents 2 without the matrix",
            patch(&good, 0, 1, 2),
        ),
    ];
    check_fail_vectors::<HintBody>(&dir("lattice_hint"), &vectors, &Scheme::SimplePir);
}

#[test]
fn lattice_query() {
    let context = QueryContext {
        params: params(),
        version: VERSION,
    };
    let query = QueryBody {
        version: VERSION,
        words: vec![1, 0x0102_0304, u32::MAX, 0, 7],
    };
    let good = query.to_bytes();
    // version 0..32 | 5 words.
    assert_eq!(good.len(), 52);
    assert_eq!(QueryBody::from_bytes(&good, &context).unwrap(), query);
    assert_eq!(
        wire::encode_query(Scheme::SimplePir, &VERSION, &[&query.words])[12..],
        good[..]
    );
    let vectors = [
        FailVector::new("empty", "Truncated", "no version", Vec::new()),
        FailVector::new(
            "truncated",
            "WrongLength",
            "a word one byte short",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after the words",
            trailing(&good),
        ),
        FailVector::new(
            "other_version",
            "DatabaseMismatch",
            "made for another database version",
            patch(&good, 0, 1, 0),
        ),
    ];
    check_fail_vectors::<QueryBody>(&dir("lattice_query"), &vectors, &context);
}

#[test]
fn lattice_answer() {
    let answer = AnswerBody(vec![9, 8, 7, 6]);
    let good = answer.to_bytes();
    // ℓ = 4 words.
    assert_eq!(good.len(), 16);
    assert_eq!(AnswerBody::from_bytes(&good, &params()).unwrap(), answer);
    assert_eq!(
        wire::encode_answer(Scheme::SimplePir, &answer.0)[12..],
        good[..]
    );
    let vectors = [
        FailVector::new("empty", "WrongLength", "no words", Vec::new()),
        FailVector::new(
            "truncated",
            "WrongLength",
            "a word one byte short",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after the words",
            trailing(&good),
        ),
    ];
    check_fail_vectors::<AnswerBody>(&dir("lattice_answer"), &vectors, &params());
}

/// A small made-up YPIR shape: the bodies' lengths depend only on these numbers.
fn shape() -> ywire::Lengths {
    ywire::Lengths {
        scheme: Scheme::Ypir,
        c1: 2,
        c2: 3,
        trees: 1,
        body_bits: 21,
    }
}

#[test]
fn ypir_query() {
    let context = ywire::QueryContext {
        shape: shape(),
        version: VERSION,
    };
    let query = ywire::QueryBody {
        version: VERSION,
        query: ywire::Query {
            key_id: [5; 16],
            c1: vec![1, 2],
            c2: vec![3, 4, 5],
            keys: ywire::Keys::ById,
        },
    };
    let good = query.to_bytes();
    // version 0 | mode 32 | key id 33 | c1 49 | c2 57..78.
    assert_eq!(good.len(), 78);
    assert_eq!(good.len(), shape().query_bytes_by_id());
    assert_eq!(
        ywire::QueryBody::from_bytes(&good, &context).unwrap(),
        query
    );
    assert_eq!(
        ywire::encode_query(Scheme::Ypir, &VERSION, &query.query)[12..],
        good[..]
    );
    let vectors = [
        FailVector::new("empty", "Truncated", "no version", Vec::new()),
        FailVector::new("truncated", "WrongLength", "c2 one byte short", cut(&good)),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after c2",
            trailing(&good),
        ),
        FailVector::new(
            "other_version",
            "DatabaseMismatch",
            "made for another database version",
            patch(&good, 0, 1, 0),
        ),
        FailVector::new(
            "unknown_mode",
            "UnknownValue",
            "key mode 3",
            patch(&good, 32, 1, 3),
        ),
        FailVector::new(
            "inline_without_keys",
            "WrongLength",
            "key mode 1 (keys follow), none do",
            patch(&good, 32, 1, 1),
        ),
        FailVector::new(
            "zero_key_id",
            "Malformed",
            "keys by id, key id all zero",
            patch(&patch(&good, 33, 8, 0), 41, 8, 0),
        ),
        FailVector::new(
            "element_above_q2",
            "Malformed",
            "first c2 element 2^56 - 1",
            patch(&good, 57, 7, (1 << 56) - 1),
        ),
    ];
    check_fail_vectors::<ywire::QueryBody>(&dir("ypir_query"), &vectors, &context);
}

#[test]
fn ypir_answer() {
    let answer = ywire::AnswerBody {
        body_bits: 21,
        ciphertexts: vec![(
            (0..2048).map(|i| i * 1009 % (1 << 28)).collect(),
            (0..2048).map(|i| i * 7 % (1 << 21)).collect(),
        )],
    };
    let good = answer.to_bytes();
    // One packed ciphertext: 2048 × 28 bits, then 2048 × 21 bits.
    assert_eq!(good.len(), shape().answer_bytes());
    assert_eq!(good.len(), 12544);
    assert_eq!(
        ywire::AnswerBody::from_bytes(&good, &shape()).unwrap(),
        answer
    );
    let vectors = [
        FailVector::new("empty", "WrongLength", "no ciphertext", Vec::new()),
        FailVector::new(
            "one_byte",
            "WrongLength",
            "one byte of 12544",
            good[..1].to_vec(),
        ),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after the ciphertext",
            trailing(&good),
        ),
    ];
    check_fail_vectors::<ywire::AnswerBody>(&dir("ypir_answer"), &vectors, &shape());
}
