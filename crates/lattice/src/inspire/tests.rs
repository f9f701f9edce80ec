//! End-to-end InsPIRe tests on small databases: server and client through the wire messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::params::{Params, Scheme};
use crate::records::record;
use crate::single::{BuildInput, SingleClient, SingleServer};

fn database(records: u64, bits: u32, seed: u64) -> (Params, Vec<u8>) {
    let params = Params::new(Scheme::Inspire, records, bits).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut bytes = vec![0u8; params.database_bytes() as usize];
    rng.fill_bytes(&mut bytes);
    (params, bytes)
}

fn build(params: Params, bytes: &[u8], seed: u8) -> (InspireServer, InspireClient) {
    let mut last = (0, 0);
    let (server, saved) = InspireServer::build(BuildInput {
        params,
        records: bytes,
        seeds: [[seed; 16]; 2],
        version: [seed; 32],
        saved: None,
        progress: &mut |done, total| last = (done, total),
    })
    .unwrap();
    assert!(last.0 == last.1 && last.1 > 0, "progress ends at total");
    let client = InspireClient::new(&saved.hint).unwrap();
    (server, client)
}

/// Records of 1 bit and of 9000 bytes (two packed ciphertexts; 64-byte records are in the
/// noise test), the first query uploading the keys and the later ones naming them.
#[test]
fn records_of_several_sizes_come_back_through_the_wire() {
    for (records, bits, seed) in [(20_000u64, 1u32, 1u64), (9, 72_000, 3)] {
        let (params, bytes) = database(records, bits, seed);
        assert_eq!(params.scheme, Scheme::Inspire);
        let shape = Shape::of(&params).unwrap();
        let (server, client) = build(params, &bytes, seed as u8);
        let mut rng = ChaCha20Rng::seed_from_u64(seed + 100);
        let header = pir_core::wire::HEADER_LEN;
        for i in 0..3 {
            let index = rng.random_range(0..records);
            let (state, query) = client.query(index, &mut rng).unwrap();
            let expected = if i == 0 {
                shape.query_bytes_upload()
            } else {
                shape.query_bytes_cached()
            };
            assert_eq!(query.len(), header + expected, "query {i}");
            let answer = server.answer(&query).unwrap();
            assert_eq!(answer.len(), header + shape.answer_bytes());
            assert_eq!(
                client.decode(&state, &answer).unwrap(),
                record(&bytes, index, bits),
                "{records} records of {bits} bits, record {index}"
            );
        }
    }
}

/// The packed values' noise against the bound in [`super`]'s documentation, in units of
/// `2^-25` (decoding tolerates `2^8 = 256`): subgaussian parts at most `2^35.2` of `q`
/// (`2^35.2 / 2^30.9 = 20` units) plus the body's rounding, uniform in `±2^6` (sd 37).
#[test]
fn inspire_noise_is_within_the_bound() {
    // 64-byte records: 32 entries each.
    let (params, bytes) = database(4000, 512, 7);
    let (server, client) = build(params, &bytes, 5);
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let mut noise = Vec::new();
    for _ in 0..6 {
        let index = rng.random_range(0..4000);
        let (state, query) = client.query(index, &mut rng).unwrap();
        let answer = server.answer(&query).unwrap();
        assert_eq!(
            client.decode(&state, &answer).unwrap(),
            record(&bytes, index, 512)
        );
        noise.extend(client.noise(&state, &answer).unwrap());
    }
    let sd = (noise.iter().map(|&x| (x * x) as f64).sum::<f64>() / noise.len() as f64).sqrt();
    let worst = noise.iter().map(|x| x.abs()).max().unwrap();
    let analysed = (20f64 * 20.0 + 37.0 * 37.0).sqrt();
    eprintln!("InsPIRe packed noise: sd {sd:.1} (analysed {analysed:.1}), worst {worst} of 256");
    assert!(
        sd <= analysed,
        "sd {sd:.1} above the analysed {analysed:.1}"
    );
    assert!(sd > 1.0, "some noise must be there: the measurement works");
    assert!(worst < 256, "a value decoded wrongly");
}

/// A query naming keys the server does not hold (expired here) is refused with
/// `UnknownKey`; after `keys_lost` the client uploads again and is answered; a budget too
/// small for one key set refuses the upload with a clear error.
#[test]
fn unknown_keys_are_refused_and_uploaded_again() {
    let (params, bytes) = database(5000, 1, 9);
    let (server, client) = build(params, &bytes, 9);
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let (state, first) = client.query(17, &mut rng).unwrap();
    let answer = server.answer(&first).unwrap();
    assert_eq!(
        client.decode(&state, &answer).unwrap(),
        record(&bytes, 17, 1)
    );
    let policy = |expiry_s: u64, budget_bytes: usize| crate::single::KeyPolicy {
        expiry: std::time::Duration::from_secs(expiry_s),
        budget_bytes,
    };
    // Expiry 0: every upload is forgotten at once.
    server.set_key_policy(policy(0, 1 << 30)).unwrap();
    let (_, later) = client.query(18, &mut rng).unwrap();
    let refused = server.answer(&later).unwrap_err();
    assert!(
        matches!(refused, pir_core::Error::UnknownKey(_)),
        "{refused}"
    );
    SingleClient::keys_lost(&client);
    let (state, again) = client.query(18, &mut rng).unwrap();
    assert_eq!(again.len(), first.len(), "the keys travel again");
    let answer = server.answer(&again).unwrap();
    assert_eq!(
        client.decode(&state, &answer).unwrap(),
        record(&bytes, 18, 1)
    );
    assert_eq!(SingleClient::key_bytes(&client), wire::KEY_BYTES);
    // A zero budget keeps nothing: the upload itself is refused with a clear error.
    server.set_key_policy(policy(60, 0)).unwrap();
    let refused = server.answer(&again).unwrap_err();
    assert!(refused.to_string().contains("key budget"), "{refused}");
}

/// Malformed queries get errors, never panics; answers are the same length for every index.
#[test]
fn malformed_queries_are_refused_and_answers_do_not_depend_on_the_index() {
    let (params, bytes) = database(3000, 1, 4);
    let shape = Shape::of(&params).unwrap();
    let (server, client) = build(params, &bytes, 4);
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let (_, upload) = client.query(0, &mut rng).unwrap();
    server.answer(&upload).unwrap();
    let mut lengths = std::collections::BTreeSet::new();
    for index in [0, 1, 2999] {
        let (_, query) = client.query(index, &mut rng).unwrap();
        lengths.insert(server.answer(&query).unwrap().len());
    }
    assert_eq!(lengths.len(), 1);
    let header = pir_core::wire::HEADER_LEN;
    // Truncated, extended, another mode, a zero key id, an element above q, a wrong version.
    let mut bad: Vec<Vec<u8>> = vec![
        upload[..upload.len() - 1].to_vec(),
        [upload.clone(), vec![0]].concat(),
    ];
    let mut mode = upload.clone();
    mode[header + 32] = 7;
    bad.push(mode);
    let mut cached_long = upload.clone();
    cached_long[header + 32] = 4;
    bad.push(cached_long);
    let mut zero_id = upload.clone();
    zero_id[header + 33..header + 49].fill(0);
    bad.push(zero_id);
    let mut high = upload.clone();
    high[header + 49..header + 55].fill(0xff);
    bad.push(high);
    let mut version = upload.clone();
    version[header] ^= 1;
    bad.push(version);
    let mut key = upload.clone();
    let last = key.len() - 1;
    key[last] ^= 1; // the keys no longer match their id
    bad.push(key);
    for (i, query) in bad.iter().enumerate() {
        assert!(
            server.answer(query).is_err(),
            "malformed query {i} answered"
        );
    }
    assert_eq!(
        upload.len(),
        header + shape.query_bytes_upload(),
        "the good query is the right length"
    );
    // Random bytes of every length up to a little over a query's: errors only.
    for len in (0..upload.len() + 8).step_by(4099) {
        let mut noise = vec![0u8; len];
        rng.fill_bytes(&mut noise);
        let _ = server.answer(&noise);
        let _ = wire::decode_answer(&noise, &shape);
    }
}

/// The byte targets at 1 GiB (with the envelope of each message): a later query and
/// its answer within 250 KB for 1-bit records and 300 KB for 64-byte ones.
#[test]
fn the_layout_at_1_gib_of_1_bit_records_is_the_byte_optimum() {
    let envelope = pir_core::wire::HEADER_LEN;
    let params = Params::new(Scheme::Inspire, 1 << 33, 1).unwrap();
    let shape = Shape::of(&params).unwrap();
    assert_eq!(shape.packed(), 5);
    assert_eq!((shape.rows, shape.columns), (5 * D, 26_215));
    let total = shape.query_bytes_cached() + shape.answer_bytes() + 2 * envelope;
    assert!(total <= 250_000, "{total}");
    let params = Params::new(Scheme::Inspire, 1 << 24, 512).unwrap();
    let shape = Shape::of(&params).unwrap();
    let total = shape.query_bytes_cached() + shape.answer_bytes() + 2 * envelope;
    assert!(total <= 300_000, "{total}");
    assert!(
        Params::new(Scheme::Inspire, 4, 1 << 20).is_err(),
        "128 KiB records"
    );
}

/// A database whose rows do not fill the last packed ciphertext sends only their body
/// coefficients, and one whose columns do not fill the last block sends only theirs.
#[test]
fn partial_blocks_send_only_what_is_used() {
    let shape = Shape {
        rows: D + 3,
        columns: 5,
        padded_columns: D,
    };
    assert_eq!(shape.answer_bytes(), 2 * MASK_BYTES + D * 18 / 8 + 7);
    assert_eq!(shape.query_bytes_cached(), HEADER_BYTES + 27);
}
