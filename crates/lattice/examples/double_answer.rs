//! Times DoublePIR's answer on random records, for profiling:
//! `cargo run --release -p pir-lattice --example double_answer -- RECORDS BYTES RUNS`.

use std::time::Instant;

use pir_lattice::{BuildInput, DoublePirClient, DoublePirServer, Params, Scheme};
use rand::{RngCore, SeedableRng};

fn main() -> Result<(), pir_core::Error> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (records, bytes, runs) = match args[..] {
        [r, b, n] => (r, b as u32, n as usize),
        _ => (1 << 22, 32, 10),
    };
    let params = Params::new(Scheme::DoublePir, records, bytes * 8)?;
    println!(
        "rows {} columns {} p {} kappa {} entries/record {}",
        params.rows,
        params.columns,
        params.p,
        params.digits(),
        params.entries_per_record()
    );
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(7);
    let mut data = vec![0u8; params.database_bytes() as usize];
    rng.fill_bytes(&mut data);
    let t = Instant::now();
    let (server, saved) = DoublePirServer::build(BuildInput {
        params,
        records: &data,
        seeds: [[1; 16], [3; 16]],
        version: [2; 32],
        saved: None,
        progress: &mut |_, _| {},
    })?;
    println!("setup {:.1} s", t.elapsed().as_secs_f64());
    let client = DoublePirClient::new(&saved.hint)?;
    let index = rng.next_u64() % records;
    let (state, query) = client.query(index, &mut rng)?;
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let answer = server.answer(&query)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if times.len() == 1 {
            let record = client.decode(&state, &answer)?;
            let start = (index * u64::from(bytes)) as usize;
            assert_eq!(record, data[start..start + bytes as usize]);
        }
    }
    times.sort_by(f64::total_cmp);
    println!(
        "answer median {:.2} ms (min {:.2})",
        times[times.len() / 2],
        times[0]
    );
    Ok(())
}
