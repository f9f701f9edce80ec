//! Times YPIR's (or, for records over 8 bytes, YPIR+SP's) offline work and answers
//! (`cargo run --release --example ypir_profile -- RECORDS [ANSWERS] [RECORD_BYTES]`;
//! one-byte records by default).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pir_lattice::params::Params;
use pir_lattice::single::{build_server, open_client};
use pir_lattice::Scheme;
use std::time::Instant;

fn main() {
    let arg = |i: usize| std::env::args().nth(i).and_then(|a| a.parse::<u64>().ok());
    let records = arg(1).unwrap_or(1 << 24);
    let answers = arg(2).unwrap_or(5) as usize;
    let record_bytes = arg(3).unwrap_or(1);
    let params = Params::new(Scheme::Ypir, records, (record_bytes * 8) as u32).unwrap();
    let bytes = vec![7u8; params.database_bytes() as usize];
    let t = Instant::now();
    let (server, hint) =
        build_server(params, &bytes, [[1; 16], [2; 16]], [0; 32], &mut |_, _| {}).unwrap();
    eprintln!(
        "offline {:?} for {params:?}; server memory {} MB",
        t.elapsed(),
        server.memory_bytes() >> 20
    );
    let client = open_client(params.scheme, &hint).unwrap();
    let mut rng = rand::rng();
    for _ in 0..answers {
        let (state, query) = client.query(123, &mut rng).unwrap();
        let t = Instant::now();
        let answer = server.answer_batch(&[&query]).pop().unwrap().unwrap();
        if answers <= 10 {
            eprintln!(
                "answer {:?} ({} bytes up, {} down)",
                t.elapsed(),
                query.len(),
                answer.len()
            );
        }
        assert_eq!(
            client.decode(&state, &answer).unwrap(),
            vec![7; record_bytes as usize]
        );
    }
}
