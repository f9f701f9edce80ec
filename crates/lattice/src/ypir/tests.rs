//! End-to-end YPIR tests on small databases: server and client through the wire messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::params::ypir::D1;
use crate::params::{Params, Scheme};
use crate::records::record;
use crate::single::{BuildInput, Saved, SingleClient, SingleServer};

fn database(records: u64, bits: u32, seed: u64) -> (Params, Vec<u8>) {
    database_for(Scheme::Ypir, records, bits, seed)
}

fn ypir(
    params: Params,
    bytes: &[u8],
    seeds: [crate::prg::Seed; 2],
) -> (YpirServer, YpirClient, Vec<u32>) {
    serve(params, bytes, seeds, YpirServer::build, YpirClient::new)
}

/// Random records of `bits` bits for `scheme` (YPIR+SP's tests too).
pub(super) fn database_for(
    scheme: Scheme,
    records: u64,
    bits: u32,
    seed: u64,
) -> (Params, Vec<u8>) {
    let params = Params::new(scheme, records, bits).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut bytes = vec![0u8; params.database_bytes() as usize];
    rng.fill(&mut bytes[..]);
    // Clear the bits past the last record.
    let total = records * u64::from(bits);
    if !total.is_multiple_of(8) {
        let last = bytes.len() - 1;
        bytes[last] &= (1u8 << (total % 8)) - 1;
    }
    (params, bytes)
}

/// A server of `params` for `bytes` with these public seeds, a client from its hint, and the
/// offline work to save (YPIR+SP's tests too: `build` and `open` pick the scheme).
pub(super) fn serve<S, C>(
    params: Params,
    bytes: &[u8],
    seeds: [crate::prg::Seed; 2],
    build: fn(BuildInput<'_>) -> Result<(S, Saved), pir_core::Error>,
    open: fn(&[u8]) -> Result<C, pir_core::Error>,
) -> (S, C, Vec<u32>) {
    let (server, saved) = build(BuildInput {
        params,
        records: bytes,
        seeds,
        version: [9; 32],
        saved: None,
        progress: &mut |_, _| {},
    })
    .unwrap();
    let client = open(&saved.hint).unwrap();
    (server, client, saved.extra)
}

/// Asks for the first, the last and a random record of `bytes` in one request (the first
/// query uploads the keys, the others name them by key id), answered in one batch; checks that
/// each answer decodes to its record and returns the (query, answer) messages.
pub(super) fn ask_in_one_batch(
    server: &dyn SingleServer,
    client: &dyn SingleClient,
    bytes: &[u8],
    rng: &mut ChaCha20Rng,
) -> Vec<(Vec<u8>, Vec<u8>)> {
    let params = client.header().params;
    let (records, bits) = (params.records, params.record_bits);
    client.keys_lost();
    let indices = [0, records - 1, rng.random_range(0..records)];
    let made: Vec<_> = indices
        .iter()
        .map(|&i| client.query(i, rng).unwrap())
        .collect();
    let queries: Vec<&[u8]> = made.iter().map(|(_, q)| q.as_slice()).collect();
    let answers = server.answer_batch(&queries);
    indices
        .iter()
        .zip(made)
        .zip(answers)
        .map(|((&i, (state, query)), answer)| {
            let answer = answer.unwrap();
            assert_eq!(
                client.decode(&state, &answer).unwrap(),
                record(bytes, i, bits),
                "record {i} of {records} x {bits} bits"
            );
            (query, answer)
        })
        .collect()
}

#[test]
fn records_of_several_sizes_come_back_through_the_wire() {
    for (records, bits, seed) in [
        (5000u64, 8u32, 1u64),
        (3000, 1, 2),
        (700, 24, 3),
        (300, 64, 4),
    ] {
        let (params, bytes) = database(records, bits, seed);
        let (server, client, h1) = ypir(params, &bytes, [[1; 16], [2; 16]]);
        assert_eq!(h1.len(), params.rows() * D1);
        let mut rng = ChaCha20Rng::seed_from_u64(seed + 100);
        for _ in 0..3 {
            let index = rng.random_range(0..records);
            client.keys_lost();
            let (state, query) = client.query(index, &mut rng).unwrap();
            let shape = Shape::of(&params).unwrap();
            assert_eq!(
                query.len(),
                pir_core::wire::HEADER_LEN + shape.query_bytes()
            );
            let answer = server.answer(&query).unwrap();
            assert_eq!(
                answer.len(),
                pir_core::wire::HEADER_LEN + shape.answer_bytes()
            );
            assert_eq!(
                client.decode(&state, &answer).unwrap(),
                record(&bytes, index, bits),
                "record {index} of {records} x {bits} bits"
            );
        }
    }
}

/// Measures the noise of both decoding steps over many queries against the analysis in the
/// module documentation (units of the decoded phase; each step decodes correctly below 512):
/// - packed layer: the subgaussian part (packing, second pass, mask switching) at most
///   `2^33.6` of `q2` = 50 units of `2^-28`, plus the body's switching error, uniform in
///   `±2^6` (standard deviation 37);
/// - first layer after rescaling: about 59 units of `2^-18`.
///
/// Fails if a measured deviation is above its analysed value, or a sample is past the margin
/// the `2^-40` argument leaves to the subgaussian part.
#[test]
fn ypir_decoding_noise_is_within_the_bounds() {
    let (params, bytes) = database(4096, 8, 7);
    let (server, client, _) = ypir(params, &bytes, [[4; 16], [5; 16]]);
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let (mut packed, mut first) = (Vec::new(), Vec::new());
    for _ in 0..12 {
        let index = rng.random_range(0..4096);
        let (state, query) = client.query(index, &mut rng).unwrap();
        let answer = server.answer(&query).unwrap();
        assert_eq!(
            client.decode(&state, &answer).unwrap(),
            record(&bytes, index, 8)
        );
        let (p, f) = client.noise(&state, &answer).unwrap();
        packed.extend(p);
        first.extend(f);
    }
    let deviation =
        |v: &[i64]| (v.iter().map(|&x| (x * x) as f64).sum::<f64>() / v.len() as f64).sqrt();
    let (packed_sd, first_sd) = (deviation(&packed), deviation(&first));
    let body_rounding_sd = 64.0 * 2.0 / 12f64.sqrt();
    let subgaussian_sd = (packed_sd * packed_sd - body_rounding_sd * body_rounding_sd)
        .max(0.0)
        .sqrt();
    let worst = |v: &[i64]| v.iter().map(|x| x.abs()).max().unwrap_or(0);
    eprintln!(
        "packed layer: sd {packed_sd:.1} (subgaussian part {subgaussian_sd:.1}), worst {} of 512; \
         first layer: sd {first_sd:.1}, worst {} of 512",
        worst(&packed),
        worst(&first)
    );
    assert!(subgaussian_sd < 50.0, "packed-layer sd {packed_sd}");
    assert!(worst(&packed) < 448, "a packed coefficient near failure");
    assert!(
        first_sd < 62.0 && worst(&first) < 448,
        "first-layer sd {first_sd}"
    );
}

/// Malformed queries and keys are refused with an error, never a panic, and the server goes on
/// answering good queries.
#[test]
fn malformed_queries_and_keys_are_refused() {
    let (params, bytes) = database(2000, 8, 21);
    let (server, client, _) = ypir(params, &bytes, [[6; 16], [7; 16]]);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let (state, good) = client.query(1234, &mut rng).unwrap();
    let header = pir_core::wire::HEADER_LEN;
    let shape = Shape::of(&params).unwrap();
    let c2_start =
        header + crate::wire::VERSION_LEN + 1 + wire::KEY_ID_LEN + 4 * shape.padded_columns;
    let key_start = c2_start + ELEMENT_BYTES * shape.groups;
    let mut bad: Vec<(&str, Vec<u8>)> = Vec::new();
    bad.push(("truncated", good[..good.len() - 1].to_vec()));
    let mut longer = good.clone();
    longer.push(0);
    bad.push(("extended", longer));
    for (what, at) in [
        ("c2 element", c2_start),
        ("key element", key_start + 7 * 999),
    ] {
        let mut q = good.clone();
        q[at..at + ELEMENT_BYTES].fill(0xff);
        bad.push((what, q));
    }
    let mut other_version = good.clone();
    other_version[header] ^= 1;
    bad.push(("version", other_version));
    let mut other_scheme = good.clone();
    other_scheme[6] = crate::Scheme::DoublePir.id() as u8;
    bad.push(("scheme", other_scheme));
    bad.push(("empty", Vec::new()));
    let mut mode = good.clone();
    mode[header + crate::wire::VERSION_LEN] = 5;
    bad.push(("key mode", mode));
    let mut cached = good.clone();
    cached[header + crate::wire::VERSION_LEN] = 4;
    bad.push((
        "cached keys with keys inline (a length for another mode)",
        cached,
    ));
    for (what, q) in &bad {
        assert!(server.answer(q).is_err(), "{what} accepted");
    }
    // The length fields of the envelope are fixed up for the two length cases, so those
    // are refused by the YPIR decoder's own checks too.
    for (what, q) in &bad[..2] {
        let mut fixed = q.clone();
        if fixed.len() >= header {
            let body = (fixed.len() - header) as u32;
            fixed[8..12].copy_from_slice(&body.to_le_bytes());
            assert!(
                server.answer(&fixed).is_err(),
                "{what} with a consistent length"
            );
        }
    }
    let answer = server.answer(&good).unwrap();
    assert_eq!(
        client.decode(&state, &answer).unwrap(),
        record(&bytes, 1234, 8)
    );
    // A wrong or truncated answer is an error at the client, never a panic.
    assert!(client.decode(&state, &answer[..answer.len() - 3]).is_err());
    assert!(YpirClient::new(&answer).is_err());
}

/// The first query uploads the keys under their digest, later ones (in later requests too)
/// name them by key id (516 KB smaller); a server that does not hold them answers
/// `UnknownKey`, and after `keys_lost` the next query uploads them again.
#[test]
fn later_queries_name_the_uploaded_keys_by_id() {
    let (params, bytes) = database(3000, 8, 31);
    let seeds = [[8; 16], [9; 16]];
    let (server, client, _) = ypir(params, &bytes, seeds);
    let shape = Shape::of(&params).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let (first_state, first) = client.query(10, &mut rng).unwrap();
    client.begin_request();
    let (second_state, second) = client.query(2999, &mut rng).unwrap();
    let header = pir_core::wire::HEADER_LEN;
    assert_eq!(first.len(), header + shape.query_bytes());
    assert_eq!(second.len(), header + shape.query_bytes_by_id());
    assert_eq!(
        shape.query_bytes() - shape.query_bytes_by_id(),
        ELEMENT_BYTES * tree::key_parts() * crate::ring::RING_D
    );
    assert_eq!(
        client.key_bytes(),
        shape.query_bytes() - shape.query_bytes_by_id()
    );
    let decoded = |q: &[u8]| wire::decode_query(q, &shape.lengths(), &[9; 32]).unwrap();
    let (up, later) = (decoded(&first), decoded(&second));
    let wire::Keys::Upload(bodies) = &up.keys else {
        panic!("the first query uploads")
    };
    assert_eq!(
        up.key_id,
        wire::key_id_of(bodies),
        "the key id is the digest"
    );
    assert_eq!((later.key_id, later.keys), (up.key_id, wire::Keys::Cached));
    // In one batch, in order: the second finds the keys the first uploaded.
    let answers = server.answer_batch(&[&first, &second]);
    let answers: Vec<Vec<u8>> = answers.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        answers[0].len(),
        answers[1].len(),
        "the reply size is the same"
    );
    assert_eq!(
        client.decode(&first_state, &answers[0]).unwrap(),
        record(&bytes, 10, 8)
    );
    assert_eq!(
        client.decode(&second_state, &answers[1]).unwrap(),
        record(&bytes, 2999, 8)
    );
    // A server that never saw the keys answers UnknownKey, and keeps serving.
    let (fresh, _, _) = ypir(params, &bytes, seeds);
    let err = fresh.answer(&second).unwrap_err();
    assert!(matches!(err, Error::UnknownKey(_)), "{err}");
    client.keys_lost();
    let (state, again) = client.query(1500, &mut rng).unwrap();
    assert_eq!(again.len(), header + shape.query_bytes(), "uploaded again");
    let answer = fresh.answer(&again).unwrap();
    assert_eq!(
        client.decode(&state, &answer).unwrap(),
        record(&bytes, 1500, 8)
    );
    let (state, cached) = client.query(7, &mut rng).unwrap();
    let answer = fresh.answer(&cached).unwrap();
    assert_eq!(
        client.decode(&state, &answer).unwrap(),
        record(&bytes, 7, 8)
    );
    // Expired keys: a server that keeps nothing (an expiry of 0) answers UnknownKey.
    fresh
        .set_key_policy(crate::KeyPolicy {
            expiry: std::time::Duration::ZERO,
            ..crate::KeyPolicy::default()
        })
        .unwrap();
    assert!(fresh.answer(&again).is_ok(), "an upload is still answered");
    let err = fresh.answer(&cached).unwrap_err();
    assert!(matches!(err, Error::UnknownKey(_)), "{err}");
}

/// An upload whose key id is not the digest of its keys is refused (a client cannot choose
/// an id that names another client's keys), and so is an upload over the server's budget;
/// queries of version 1 clients (keys inline, then by a random id) are still answered.
#[test]
fn chosen_ids_and_oversized_uploads_are_refused_and_old_clients_still_work() {
    let (params, bytes) = database(3000, 8, 32);
    let (server, client, _) = ypir(params, &bytes, [[6; 16], [7; 16]]);
    let shape = Shape::of(&params).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let (state, first) = client.query(42, &mut rng).unwrap();
    let mut query = wire::decode_query(&first, &shape.lengths(), &[9; 32]).unwrap();
    let encode = |q: &wire::Query| wire::encode_query(Scheme::Ypir, &[9; 32], q);
    let chosen = wire::Query {
        key_id: [5; 16],
        ..query.clone()
    };
    let err = server.answer(&encode(&chosen)).unwrap_err().to_string();
    assert!(err.contains("must be their digest"), "{err}");
    let wire::Keys::Upload(bodies) = query.keys.clone() else {
        panic!("the first query uploads")
    };
    query.key_id = [3; 16];
    query.keys = wire::Keys::Inline(bodies);
    let inline = server.answer(&encode(&query)).unwrap();
    assert_eq!(
        client.decode(&state, &inline).unwrap(),
        record(&bytes, 42, 8)
    );
    query.keys = wire::Keys::ById;
    let by_id = server.answer(&encode(&query)).unwrap();
    assert_eq!(
        client.decode(&state, &by_id).unwrap(),
        record(&bytes, 42, 8)
    );
    server
        .set_key_policy(crate::KeyPolicy {
            budget_bytes: 1000,
            ..crate::KeyPolicy::default()
        })
        .unwrap();
    let err = server.answer(&first).unwrap_err().to_string();
    assert!(err.contains("key budget"), "{err}");
}

#[test]
fn records_over_eight_bytes_are_laid_out_for_ypir_sp() {
    assert_eq!(
        Params::new(Scheme::Ypir, 10, 64).unwrap().scheme,
        Scheme::Ypir
    );
    assert_eq!(
        Params::new(Scheme::Ypir, 10, 72).unwrap().scheme,
        Scheme::YpirSp
    );
    let params = Params {
        record_bits: 72,
        ..Params::new(Scheme::Ypir, 10, 64).unwrap()
    };
    let err = Shape::of(&params).unwrap_err().to_string();
    assert!(err.contains("too large for YPIR"), "{err}");
}

proptest::proptest! {
    #![proptest_config(proptest::prelude::ProptestConfig::with_cases(3))]
    /// Random databases of random shapes (records of 1 to 64 bits) decode every record asked.
    #[test]
    fn random_databases_decode(records in 1u64..4000, bits in 1u32..=64, seed in proptest::prelude::any::<u64>()) {
        let (params, bytes) = database(records, bits, seed);
        let (server, client, _) = ypir(params, &bytes, [[3; 16], [4; 16]]);
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        ask_in_one_batch(&server, &client, &bytes, &mut rng);
    }
}
