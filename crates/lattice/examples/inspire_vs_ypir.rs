//! InsPIRe beside YPIR on the same records, one core, answers alternating between the two
//! (so a loaded machine slows both alike), medians reported:
//! `cargo run --release --example inspire_vs_ypir -- RECORDS RECORD_BITS [ROUNDS]`
//! (for 1 GiB of 1-bit records: `8589934592 1`; of 64-byte records: `16777216 512`).
//! Prints the bytes of a first query (with the one-time keys), a later query and an answer,
//! the server's offline time, the first query's client time (it makes the keys), the first
//! (key-uploading) answer's time, and the median of the later answers. Run it with `RAYON_NUM_THREADS=1` for one core.
#![allow(clippy::unwrap_used, clippy::expect_used)]
use pir_lattice::params::Params;
use pir_lattice::{build_server, open_client, Scheme, SingleClient, SingleServer};
use rand::RngCore;
use std::time::{Duration, Instant};

struct Side {
    name: &'static str,
    server: Box<dyn SingleServer>,
    client: Box<dyn SingleClient>,
    records: u64,
    times: Vec<Duration>,
}

fn median(mut v: Vec<Duration>) -> f64 {
    v.sort_unstable();
    v[v.len() / 2].as_secs_f64() * 1e3
}

fn main() {
    let num = |i: usize| std::env::args().nth(i).and_then(|a| a.parse::<u64>().ok());
    let records = num(1).unwrap_or(1 << 33);
    let bits = num(2).unwrap_or(1) as u32;
    let rounds = num(3).unwrap_or(7) as usize;
    let mut rng = rand::rng();
    let mut sides = Vec::new();
    for (name, scheme) in [("inspire", Scheme::Inspire), ("ypir", Scheme::Ypir)] {
        let params = Params::new(scheme, records, bits).unwrap();
        let mut bytes = vec![0u8; params.database_bytes() as usize];
        rng.fill_bytes(&mut bytes);
        let t = Instant::now();
        let (server, hint) =
            build_server(params, &bytes, [[1; 16], [2; 16]], [0; 32], &mut |_, _| {}).unwrap();
        let offline = t.elapsed();
        drop(bytes);
        let client = open_client(params.scheme, &hint).unwrap();
        let t = Instant::now();
        let (_, first) = client.query(1, &mut rng).unwrap();
        let keygen = t.elapsed();
        let t = Instant::now();
        let answer = server.answer_batch(&[&first]).pop().unwrap().unwrap();
        let first_time = t.elapsed();
        let (_, later) = client.query(2, &mut rng).unwrap();
        println!(
            "{name} ({}): rows {} columns {}; offline {:.1} s; server memory {} MiB; first query \
             {} B (keys {} B), later query {} B, answer {} B; first query (client, key \
             generation) {:.0} ms; first answer (key upload) {:.0} ms",
            params.scheme.id().name(),
            params.rows,
            params.columns,
            offline.as_secs_f64(),
            server.memory_bytes() >> 20,
            first.len(),
            client.key_bytes(),
            later.len(),
            answer.len(),
            keygen.as_secs_f64() * 1e3,
            first_time.as_secs_f64() * 1e3
        );
        sides.push(Side {
            name,
            server,
            client,
            records: params.records,
            times: Vec::new(),
        });
    }
    for _ in 0..rounds {
        for side in &mut sides {
            let index = rng.next_u64() % side.records;
            let (state, query) = side.client.query(index, &mut rng).unwrap();
            let t = Instant::now();
            let answer = side.server.answer_batch(&[&query]).pop().unwrap().unwrap();
            side.times.push(t.elapsed());
            side.client.decode(&state, &answer).unwrap();
        }
    }
    let medians: Vec<f64> = sides.iter().map(|s| median(s.times.clone())).collect();
    for (side, m) in sides.iter().zip(&medians) {
        println!("{}: median answer {m:.1} ms over {rounds}", side.name);
    }
    println!("inspire / ypir server time: {:.2}", medians[0] / medians[1]);
}
