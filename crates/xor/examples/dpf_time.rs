//! Times DPF PIR's server step at one shape (default 2^20 blocks of 32 bytes): the key's
//! full-domain expansion, the scan it selects, and a plain read of the same database in the
//! same run. One thread. `cargo run --release -p pir-xor --example dpf_time [BLOCKS] [BYTES]`.

use std::time::{Duration, Instant};

use pir_core::{Database, DbShape, MultiServerScheme};
use pir_xor::DpfPir;
use rand::SeedableRng;

fn median(mut times: Vec<Duration>) -> f64 {
    times.sort();
    times[times.len() / 2].as_secs_f64() * 1e3
}

fn main() -> Result<(), String> {
    let mut args = std::env::args().skip(1);
    let blocks: u64 = args
        .next()
        .map_or(Ok(1 << 20), |a| a.parse())
        .map_err(|e| format!("{e}"))?;
    let bytes: usize = args
        .next()
        .map_or(Ok(32), |a| a.parse())
        .map_err(|e| format!("{e}"))?;
    let shape = DbShape::new(blocks, bytes).map_err(|e| e.to_string())?;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    let db = Database::random(shape, &mut rng);
    let scheme = DpfPir::new(shape);
    let (mut expand, mut answer, mut read) = (Vec::new(), Vec::new(), Vec::new());
    for run in 0..11 {
        let (queries, _) = scheme
            .query(&[run * 7919 % blocks as usize], &mut rng)
            .map_err(|e| e.to_string())?;
        let t = Instant::now();
        let bits = scheme.selection(&queries[0]).map_err(|e| e.to_string())?;
        expand.push(t.elapsed());
        std::hint::black_box(bits);
        let t = Instant::now();
        std::hint::black_box(scheme.answer(&db, &queries[0]).map_err(|e| e.to_string())?);
        answer.push(t.elapsed());
        let t = Instant::now();
        std::hint::black_box(pir_kernels::memory::read(db.bytes()));
        read.push(t.elapsed());
    }
    println!(
        "DPF PIR {blocks} x {bytes} B ({} MB), one thread, backend {}, median of 11: key {} B; \
         expansion {:.3} ms; server answer (expansion + scan) {:.3} ms; plain read {:.3} ms \
         (answer = {:.2}x the read)",
        shape.total_bytes() / 1_000_000,
        pir_kernels::Backend::current().name(),
        DpfPir::query_body_len(shape),
        median(expand),
        median(answer.clone()),
        median(read.clone()),
        median(answer) / median(read)
    );
    Ok(())
}
