//! Times DoublePIR's answer at full size without the offline work: the server takes a random
//! `H1` and a random hint as if saved (its answers then do not decode, but the server does the
//! same work), so a 1 GiB shape starts in seconds instead of minutes, for profiling:
//! `cargo run --release -p pir-lattice --example double_fake -- RECORDS BITS RUNS [K]`
//! (`8589934592 1 20` is the authors' 1 GiB of 1-bit records).

use std::time::Instant;

use pir_lattice::params::LWE_N;
use pir_lattice::wire::{self, HintHeader};
use pir_lattice::{BuildInput, DoublePirClient, DoublePirServer, Params, Saved, Scheme};
use rand::{RngCore, SeedableRng};

fn main() -> Result<(), pir_core::Error> {
    let args: Vec<u64> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let (records, bits, runs, k) = match args[..] {
        [r, b, n] => (r, b as u32, n as usize, 1),
        [r, b, n, k] => (r, b as u32, n as usize, k as usize),
        _ => (1 << 33, 1, 20, 1),
    };
    let params = Params::new(Scheme::DoublePir, records, bits)?;
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
    let header = HintHeader {
        params,
        seed: [1; 16],
        seed2: Some([3; 16]),
        version: [2; 32],
    };
    let mut words = |n: usize| (0..n).map(|_| rng.next_u32()).collect::<Vec<u32>>();
    let kappa_n = params.digits() * LWE_N;
    let saved = Saved {
        hint: wire::encode_hint(&header, &words(kappa_n * LWE_N)),
        extra: words(params.rows as usize * LWE_N),
    };
    let t = Instant::now();
    let (server, saved) = DoublePirServer::build(BuildInput {
        params,
        records: &data,
        seeds: [[1; 16], [3; 16]],
        version: [2; 32],
        saved: Some(saved),
        progress: &mut |_, _| {},
    })?;
    println!("setup {:.1} s", t.elapsed().as_secs_f64());
    drop(data);
    let client = DoublePirClient::new(&saved.hint)?;
    let queries: Vec<Vec<u8>> = (0..k)
        .map(|_| {
            client
                .query(rng.next_u64() % records, &mut rng)
                .map(|q| q.1)
        })
        .collect::<Result<_, _>>()?;
    let refs: Vec<&[u8]> = queries.iter().map(Vec::as_slice).collect();
    let mut times = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        let answers = server.answer_batch(&refs);
        times.push(t.elapsed().as_secs_f64() * 1e3);
        std::hint::black_box(answers);
    }
    times.sort_by(f64::total_cmp);
    println!(
        "answer x{k} median {:.2} ms (min {:.2})",
        times[times.len() / 2],
        times[0]
    );
    Ok(())
}
