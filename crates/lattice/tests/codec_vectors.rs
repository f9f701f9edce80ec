//! `tests/vectors/{lattice_hint,lattice_query,lattice_answer,ypir_query,ypir_answer,inspire_query,
//! inspire_answer}/fail_*.hex`:
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

/// Encodes `body`, checks that it decodes back to itself and (where given) that it is the
/// body of `message` (a whole message, after the 12-byte envelope), and returns the encoding.
fn round_trip<T, C>(body: &T, context: &C, message: Option<&[u8]>) -> Vec<u8>
where
    T: for<'a> Codec<'a, Context = C> + PartialEq + std::fmt::Debug,
{
    let good = body.to_bytes();
    assert_eq!(&T::from_bytes(&good, context).unwrap(), body);
    if let Some(message) = message {
        assert_eq!(message[12..], good[..]);
    }
    good
}

/// The length refusals every body has: no bytes at all, `good` one byte short (where
/// `truncated` is given) and one byte after `good`; each `[expected variant, what is wrong]`.
fn length_vectors(
    good: &[u8],
    empty: [&str; 2],
    truncated: Option<[&str; 2]>,
    long: [&str; 2],
) -> Vec<FailVector> {
    let mut vectors = vec![FailVector::new("empty", empty[0], empty[1], Vec::new())];
    if let Some([expect, note]) = truncated {
        vectors.push(FailVector::new("truncated", expect, note, cut(good)));
    }
    vectors.push(FailVector::new(
        "trailing",
        long[0],
        long[1],
        trailing(good),
    ));
    vectors
}

/// A query body whose version (its first bytes) is not the database's.
fn other_version(good: &[u8]) -> FailVector {
    FailVector::new(
        "other_version",
        "DatabaseMismatch",
        "made for another database version",
        patch(good, 0, 1, 0),
    )
}

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
    // The body is the one the header-only message carries.
    let good = round_trip(&hint, &Scheme::SimplePir, Some(&header.encode()));
    // contents 0 | n 1 | p 3 | rows 7 | columns 11 | record bits 15 | records 19 | seed 27 |
    // version 43..75.
    assert_eq!(good.len(), 75);
    let full = HintBody {
        header,
        matrix: Some((0..header.matrix_words() as u32).collect()),
    };
    let message = wire::encode_hint(&header, full.matrix.as_deref().unwrap());
    round_trip(&full, &Scheme::SimplePir, Some(&message));
    let mut vectors = length_vectors(
        &good,
        ["Truncated", "no contents byte"],
        Some(["Truncated", "version one byte short"]),
        ["TrailingBytes", "a byte after a header-only hint"],
    );
    vectors.extend([
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
    ]);
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
    let message = wire::encode_query(Scheme::SimplePir, &VERSION, &[&query.words]);
    let good = round_trip(&query, &context, Some(&message));
    // version 0..32 | 5 words.
    assert_eq!(good.len(), 52);
    let mut vectors = length_vectors(
        &good,
        ["Truncated", "no version"],
        Some(["WrongLength", "a word one byte short"]),
        ["WrongLength", "a byte after the words"],
    );
    vectors.push(other_version(&good));
    check_fail_vectors::<QueryBody>(&dir("lattice_query"), &vectors, &context);
}

#[test]
fn lattice_answer() {
    let answer = AnswerBody(vec![9, 8, 7, 6]);
    let message = wire::encode_answer(Scheme::SimplePir, &answer.0);
    let good = round_trip(&answer, &params(), Some(&message));
    // ℓ = 4 words.
    assert_eq!(good.len(), 16);
    let vectors = length_vectors(
        &good,
        ["WrongLength", "no words"],
        Some(["WrongLength", "a word one byte short"]),
        ["WrongLength", "a byte after the words"],
    );
    check_fail_vectors::<AnswerBody>(&dir("lattice_answer"), &vectors, &params());
}

/// A small made-up YPIR shape: the bodies' lengths depend only on these numbers.
fn shape() -> ywire::Lengths {
    ywire::Lengths {
        scheme: Scheme::Ypir,
        c1: 2,
        c2: 3,
        trees: 1,
        body_bits: 18,
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
    let message = ywire::encode_query(Scheme::Ypir, &VERSION, &query.query);
    let good = round_trip(&query, &context, Some(&message));
    // Mode 4 (one-time keys, cached) has mode 2's layout.
    let mut cached = query.clone();
    cached.query.keys = ywire::Keys::Cached;
    assert_eq!(round_trip(&cached, &context, None), patch(&good, 32, 1, 4));
    // version 0 | mode 32 | key id 33 | c1 49 | c2 57..78.
    assert_eq!(good.len(), 78);
    assert_eq!(good.len(), shape().query_bytes_by_id());
    let mut vectors = length_vectors(
        &good,
        ["Truncated", "no version"],
        Some(["WrongLength", "c2 one byte short"]),
        ["WrongLength", "a byte after c2"],
    );
    vectors.extend([
        other_version(&good),
        FailVector::new(
            "unknown_mode",
            "UnknownValue",
            "key mode 5",
            patch(&good, 32, 1, 5),
        ),
        FailVector::new(
            "upload_without_keys",
            "WrongLength",
            "key mode 3 (keys uploaded, follow), none do",
            patch(&good, 32, 1, 3),
        ),
        FailVector::new(
            "cached_zero_key_id",
            "Malformed",
            "key mode 4 (keys cached), key id all zero",
            patch(&patch(&patch(&good, 32, 1, 4), 33, 8, 0), 41, 8, 0),
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
    ]);
    check_fail_vectors::<ywire::QueryBody>(&dir("ypir_query"), &vectors, &context);
}

#[test]
fn ypir_answer() {
    let answer = ywire::AnswerBody {
        body_bits: 18,
        ciphertexts: vec![(
            (0..4096).map(|i| i * 1009 % (1 << 26)).collect(),
            (0..4096).map(|i| i * 7 % (1 << 18)).collect(),
        )],
    };
    // The message switches moduli first ([`ywire::encode_answer`]): only the body is checked.
    let good = round_trip(&answer, &shape(), None);
    // One packed ciphertext: 4096 × 26 bits, then 4096 × 18 bits.
    assert_eq!(good.len(), shape().answer_bytes());
    assert_eq!(good.len(), 22528);
    let mut vectors = length_vectors(
        &good,
        ["WrongLength", "no ciphertext"],
        None,
        ["WrongLength", "a byte after the ciphertext"],
    );
    vectors.push(FailVector::new(
        "one_byte",
        "WrongLength",
        "one byte of 22528",
        good[..1].to_vec(),
    ));
    check_fail_vectors::<ywire::AnswerBody>(&dir("ypir_answer"), &vectors, &shape());
}

/// A small made-up InsPIRe shape: the bodies' lengths depend only on these numbers.
fn inspire_shape() -> pir_lattice::inspire::Shape {
    pir_lattice::inspire::Shape {
        rows: 1,
        columns: 4,
        padded_columns: 4,
    }
}

#[test]
fn inspire_query() {
    use pir_lattice::inspire::wire as iwire;
    let context = iwire::QueryContext {
        shape: inspire_shape(),
        version: VERSION,
    };
    let query = iwire::QueryBody {
        version: VERSION,
        query: iwire::Query {
            key_id: [5; 16],
            c: vec![1, 2, 3, (1 << 41) + 7],
            keys: None,
        },
    };
    let message = iwire::encode_query(&VERSION, &query.query);
    let good = round_trip(&query, &context, Some(&message));
    // version 0 | mode 32 | key id 33 | c 49..70 (4 × 42 bits).
    assert_eq!(good.len(), 70);
    assert_eq!(good.len(), inspire_shape().query_bytes_cached());
    let mut vectors = length_vectors(
        &good,
        ["Truncated", "no version"],
        Some(["WrongLength", "c one byte short"]),
        ["WrongLength", "a byte after c"],
    );
    vectors.extend([
        other_version(&good),
        FailVector::new(
            "unknown_mode",
            "UnknownValue",
            "key mode 1 (InsPIRe has modes 3 and 4)",
            patch(&good, 32, 1, 1),
        ),
        FailVector::new(
            "upload_without_keys",
            "WrongLength",
            "key mode 3 (keys uploaded, follow), none do",
            patch(&good, 32, 1, 3),
        ),
        FailVector::new(
            "zero_key_id",
            "Malformed",
            "keys cached, key id all zero",
            patch(&patch(&good, 33, 8, 0), 41, 8, 0),
        ),
        FailVector::new(
            "element_above_q",
            "Malformed",
            "first c element 2^42 - 1 (stands for a value past q)",
            // c[1] = 2 keeps its low 6 bits in the same bytes.
            patch(&good, 49, 6, ((1 << 42) - 1) | (2 << 42)),
        ),
    ]);
    check_fail_vectors::<iwire::QueryBody>(&dir("inspire_query"), &vectors, &context);
}

#[test]
fn inspire_answer() {
    use pir_lattice::inspire::wire as iwire;
    let answer = iwire::AnswerBody {
        ciphertexts: vec![((0..4096).map(|i| i * 1009 % (1 << 25)).collect(), vec![7])],
    };
    let good = round_trip(&answer, &inspire_shape(), None);
    // One packed ciphertext: 4096 × 25 bits, then one row's body of 18 bits.
    assert_eq!(good.len(), inspire_shape().answer_bytes());
    assert_eq!(good.len(), 12_803);
    let mut vectors = length_vectors(
        &good,
        ["WrongLength", "no ciphertext"],
        None,
        ["WrongLength", "a byte after the ciphertext"],
    );
    vectors.extend([
        FailVector::new(
            "one_byte",
            "WrongLength",
            "one byte of 12803",
            good[..1].to_vec(),
        ),
        FailVector::new(
            "body_padding_set",
            "Malformed",
            "a bit set past the body's 18 bits in its last byte",
            patch(&good, 12_802, 1, 0x04),
        ),
    ]);
    check_fail_vectors::<iwire::AnswerBody>(&dir("inspire_answer"), &vectors, &inspire_shape());
}
