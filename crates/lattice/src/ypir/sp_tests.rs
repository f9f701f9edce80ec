//! End-to-end YPIR+SP tests on small databases: server and client through the wire messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::sp::{self, SpShape};
use super::tests::{ask_in_one_batch, database_for, serve};
use super::*;
use crate::params::{Params, Scheme};
use crate::records::record;

fn database(records: u64, bits: u32, seed: u64) -> (Params, Vec<u8>) {
    database_for(Scheme::YpirSp, records, bits, seed)
}

fn build(params: Params, bytes: &[u8], seed: u8) -> (YpirSpServer, YpirSpClient, Vec<u32>) {
    serve(
        params,
        bytes,
        [[seed; 16]; 2],
        YpirSpServer::build,
        YpirSpClient::new,
    )
}

/// Records from 3 bits to 5000 bytes (two packed ciphertexts), in one batch per database,
/// the second query of a request referring to the keys by id.
#[test]
fn sp_records_of_several_sizes_come_back_through_the_wire() {
    for (records, bits, seed) in [
        (40u64, 40_000u32, 1u64),
        (300, 800, 2),
        (5000, 3, 3),
        (9, 72, 4),
    ] {
        let (params, bytes) = database(records, bits, seed);
        assert_eq!(params.scheme, Scheme::YpirSp);
        let (server, client, masks) = build(params, &bytes, seed as u8);
        let shape = SpShape::of(&params).unwrap();
        assert_eq!(masks.len(), shape.rows * 2 * RING_D);
        let mut rng = ChaCha20Rng::seed_from_u64(seed + 100);
        let asked = ask_in_one_batch(&server, &client, &bytes, &mut rng);
        let (header, lengths) = (pir_core::wire::HEADER_LEN, shape.lengths());
        assert_eq!(asked[0].0.len(), header + lengths.query_bytes());
        assert_eq!(asked[1].0.len(), header + lengths.query_bytes_by_id());
        for (_, answer) in &asked {
            assert_eq!(answer.len(), header + lengths.answer_bytes());
        }
    }
}

/// The packed values' noise over many queries against the analysis in [`sp`]'s
/// documentation, in units of `2^-28` (decoding tolerates `2^11`): the subgaussian part
/// (packing, first pass, mask switching) at most `2^33.6` of `q2`, 50 units, plus the body's
/// switching error, uniform in `±2^7` (standard deviation 74).
#[test]
fn sp_decoding_noise_is_within_the_bounds() {
    let (params, bytes) = database(64, 32_768, 7);
    let (server, client, _) = build(params, &bytes, 5);
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let mut noise = Vec::new();
    for _ in 0..4 {
        let index = rng.random_range(0..64);
        let (state, query) = client.query(index, &mut rng).unwrap();
        let answer = server.answer(&query).unwrap();
        assert_eq!(
            client.decode(&state, &answer).unwrap(),
            record(&bytes, index, 32_768)
        );
        noise.extend(client.noise(&state, &answer).unwrap());
    }
    let sd = (noise.iter().map(|&x| (x * x) as f64).sum::<f64>() / noise.len() as f64).sqrt();
    let worst = noise.iter().map(|x| x.abs()).max().unwrap();
    let analysed = (50f64 * 50.0 + 74.0 * 74.0).sqrt();
    eprintln!("YPIR+SP packed noise: sd {sd:.1} (analysed {analysed:.1}), worst {worst} of 2048");
    assert!(
        sd <= analysed,
        "standard deviation {sd:.1} above the analysed {analysed:.1}"
    );
    assert!(worst < 1 << 10, "worst {worst} past half the margin");
}

#[test]
fn sp_layout_matches_the_paper_for_large_records() {
    // 2^15 records of 32 KiB: one record per column, 16,384 rows = 8 packed ciphertexts.
    let params = Params::new(Scheme::Ypir, 1 << 15, 32 * 1024 * 8).unwrap();
    assert_eq!(params.scheme, Scheme::YpirSp);
    let shape = SpShape::of(&params).unwrap();
    assert_eq!(
        (shape.rows, shape.columns, shape.trees()),
        (16_384, 1 << 15, 8)
    );
    assert_eq!(shape.lengths().answer_bytes(), 8 * 12_288);
    // Small records share columns; the layout keeps to a few ciphertexts.
    let small = SpShape::of(&Params::new(Scheme::Ypir, 1 << 25, 256).unwrap()).unwrap();
    assert!(small.trees() <= sp::LAYOUT_TREES, "{small:?}");
    assert!(Params::new(Scheme::YpirSp, 4, 129 * 1024 * 8).is_err());
}

#[test]
fn sp_malformed_queries_are_refused() {
    let (params, bytes) = database(300, 800, 2);
    let (server, client, _) = build(params, &bytes, 2);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let (state, query) = client.query(5, &mut rng).unwrap();
    // Too short, too long, a YPIR envelope, an element at q2.
    assert!(server.answer(&query[..query.len() - 1]).is_err());
    let mut long = query.clone();
    long.push(0);
    assert!(server.answer(&long).is_err());
    let other = pir_core::wire::encode_envelope(
        pir_core::SchemeId::Ypir,
        pir_core::wire::MessageKind::Query,
        &query[pir_core::wire::HEADER_LEN..],
    );
    assert!(matches!(
        server.answer(&other),
        Err(pir_core::Error::WrongScheme { .. })
    ));
    let mut high = query.clone();
    let at = pir_core::wire::HEADER_LEN + crate::wire::VERSION_LEN + 1 + wire::KEY_ID_LEN;
    high[at..at + ELEMENT_BYTES].copy_from_slice(&rns::modulus().to_le_bytes()[..ELEMENT_BYTES]);
    assert!(server.answer(&high).is_err());
    // A query by key id to a server that never saw the keys.
    let (_, by_id) = client.query(6, &mut rng).unwrap();
    let (fresh, _, _) = build(params, &bytes, 2);
    let err = fresh.answer(&by_id).unwrap_err().to_string();
    assert!(err.contains("upload them again"), "{err}");
    // The server still answers the good query.
    let answer = server.answer(&query).unwrap();
    assert_eq!(
        client.decode(&state, &answer).unwrap(),
        record(&bytes, 5, 800)
    );
    // In one batch (one pass, one packing of every tree for all), a malformed query gets its
    // own error and the others their records.
    let (state7, by_id7) = client.query(7, &mut rng).unwrap();
    let answers = server.answer_batch(&[&query, &long, &by_id7]);
    assert_eq!(answers.len(), 3);
    assert!(answers[1].is_err());
    let decoded: Vec<Vec<u8>> = [(&state, &answers[0]), (&state7, &answers[2])]
        .iter()
        .map(|(state, answer)| client.decode(state, answer.as_ref().unwrap()).unwrap())
        .collect();
    assert_eq!(decoded, [record(&bytes, 5, 800), record(&bytes, 7, 800)]);
}
