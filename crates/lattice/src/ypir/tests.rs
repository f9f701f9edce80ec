//! End-to-end YPIR tests on small databases: server and client through the wire messages.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::params::Params;

fn database(records: u64, bits: u32, seed: u64) -> (Params, Vec<u8>) {
    let params = Params::new(Scheme::Ypir, records, bits).unwrap();
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

fn record(bytes: &[u8], index: u64, bits: u32) -> Vec<u8> {
    let mut out = vec![0u8; (bits as usize).div_ceil(8)];
    for b in 0..u64::from(bits) {
        let at = index * u64::from(bits) + b;
        if bytes[(at / 8) as usize] >> (at % 8) & 1 == 1 {
            out[(b / 8) as usize] |= 1 << (b % 8);
        }
    }
    out
}

#[test]
fn records_of_several_sizes_come_back_through_the_wire() {
    for (records, bits, seed) in [(5000u64, 8u32, 1u64), (3000, 1, 2), (700, 24, 3)] {
        let (params, bytes) = database(records, bits, seed);
        let (server, hint, h1) = YpirServer::build(
            params,
            &bytes,
            [[1; 16], [2; 16]],
            [9; 32],
            None,
            &mut |_, _| {},
        )
        .unwrap();
        assert_eq!(h1.len(), params.rows() * LWE_N);
        let client = YpirClient::new(&hint).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(seed + 100);
        for _ in 0..3 {
            let index = rng.random_range(0..records);
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
