//! Times a lattice scheme's offline work and answers (YPIR by default; for records over 8
//! bytes YPIR runs as YPIR+SP), for `perf record`:
//! `cargo run --release --example ypir_profile -- RECORDS [ANSWERS] [RECORD_BYTES] [SCHEME] [K]`
//! (one-byte records, 5 answers, scheme `ypir`, one query per pass by default; SCHEME is
//! `simplepir`, `doublepir` or `ypir`, K the queries answered in one pass). Besides each
//! answer's wall time it prints the CPU time per answer (Linux: `/proc/self/stat`), which a
//! loaded machine inflates far less than the wall time (that includes waiting for the core).
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pir_lattice::params::Params;
use pir_lattice::Scheme;
use pir_lattice::{build_server, open_client};
use std::time::Instant;

fn main() {
    let arg = |i: usize| std::env::args().nth(i);
    let num = |i: usize| arg(i).and_then(|a| a.parse::<u64>().ok());
    let records = num(1).unwrap_or(1 << 24);
    let answers = num(2).unwrap_or(5) as usize;
    let record_bytes = num(3).unwrap_or(1);
    let scheme = match arg(4).as_deref() {
        None | Some("ypir") => Scheme::Ypir,
        Some("simplepir") => Scheme::SimplePir,
        Some("doublepir") => Scheme::DoublePir,
        Some(other) => panic!("unknown scheme {other}"),
    };
    let k = num(5).unwrap_or(1) as usize;
    let params = Params::new(scheme, records, (record_bytes * 8) as u32).unwrap();
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
    // The same queries every time, so a profile of the loop is the server's work.
    let (states, queries): (Vec<_>, Vec<_>) =
        (0..k).map(|_| client.query(123, &mut rng).unwrap()).unzip();
    let refs: Vec<&[u8]> = queries.iter().map(Vec::as_slice).collect();
    let mut cpu = 0.0;
    for round in 0..answers {
        let (t, before) = (Instant::now(), cpu_seconds());
        let replies = server.answer_batch(&refs);
        cpu += cpu_seconds().zip(before).map_or(0.0, |(a, b)| a - b);
        if answers <= 10 {
            eprintln!(
                "{k} answer(s) {:?} ({} bytes up, {} down each)",
                t.elapsed(),
                queries[0].len(),
                replies[0].as_ref().unwrap().len()
            );
        }
        for (state, reply) in states.iter().zip(replies) {
            let reply = reply.unwrap();
            // Decoding (client work) once is the check; later rounds time the server alone.
            if round == 0 {
                assert_eq!(
                    client.decode(state, &reply).unwrap(),
                    vec![7; record_bytes as usize]
                );
            }
        }
    }
    if answers > 0 && cpu_seconds().is_some() {
        eprintln!(
            "cpu per answer pass {:.1} ms over {answers} passes",
            cpu * 1000.0 / answers as f64
        );
    }
}

/// CPU seconds (user and system) this process has used, from `/proc/self/stat` in ticks of
/// 1/100 s (`None` where there is no such file).
fn cpu_seconds() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // After the command name in parentheses: state is field 3 of stat(5), utime 14, stime 15.
    let fields: Vec<&str> = stat[stat.rfind(')')? + 1..].split_whitespace().collect();
    let ticks = |i: usize| fields.get(i)?.parse::<f64>().ok();
    Some((ticks(11)? + ticks(12)?) / 100.0)
}
