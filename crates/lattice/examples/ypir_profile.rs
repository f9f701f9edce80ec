//! Times YPIR's offline work and answers on one-byte records
//! (`cargo run --release --example ypir_profile -- RECORDS [ANSWERS]`).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pir_lattice::params::Params;
use pir_lattice::ypir::{YpirClient, YpirServer};
use pir_lattice::Scheme;
use std::time::Instant;

fn main() {
    let records: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1 << 24);
    let params = Params::new(Scheme::Ypir, records, 8).unwrap();
    let bytes = vec![7u8; params.database_bytes() as usize];
    let t = Instant::now();
    let (server, hint, _) = YpirServer::build(
        params,
        &bytes,
        [[1; 16], [2; 16]],
        [0; 32],
        None,
        &mut |_, _| {},
    )
    .unwrap();
    eprintln!("offline {:?} for {params:?}", t.elapsed());
    let client = YpirClient::new(&hint).unwrap();
    let mut rng = rand::rng();
    let answers: usize = std::env::args()
        .nth(2)
        .and_then(|a| a.parse().ok())
        .unwrap_or(5);
    for _ in 0..answers {
        let (state, query) = client.query(123, &mut rng).unwrap();
        let t = Instant::now();
        let answer = server.answer(&query).unwrap();
        if answers <= 10 {
            eprintln!("answer {:?}", t.elapsed());
        }
        assert_eq!(client.decode(&state, &answer).unwrap(), vec![7]);
    }
}
