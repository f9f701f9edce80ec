//! Times the matvec kernel against a plain read of the same packed matrix, alternating in one
//! process (medians), for tuning without building a lattice database:
//! `RAYON_NUM_THREADS=1 cargo run --release -p pir-kernels --example matvec_ab -- [MiB] [bits] [runs] [words per row, 0 = square] [K]`
//! (defaults 1024, 8, 9, a matrix square in entries, and K = 1 vector per pass).
use std::time::Instant;

use pir_kernels::bench_support::{median, Args, XorShift};
use pir_kernels::{matvec, memory, Backend};

fn main() -> Result<(), String> {
    let args = Args::from_env()?;
    let mib = args.get(0, 1024);
    let bits = args.get(1, 8) as u32;
    let runs = args.get(2, 9);
    let packing = matvec::Packing::new(bits).ok_or("bits must be 1 to 16")?;
    let total_words = mib << 18;
    let width = args
        .given(3)
        .filter(|&w| w > 0)
        .unwrap_or_else(|| total_words / ((total_words * packing.slots()) as f64).sqrt() as usize);
    let rows = total_words / width;
    let mut rng = XorShift::new(1);
    let words: Vec<u32> = (0..rows * width).map(|_| rng.next() as u32).collect();
    let matrix = matvec::PackedMatrix::new(&words, rows, width, packing).ok_or("shape mismatch")?;
    let x: Vec<u32> = (0..matrix.columns())
        .map(|i| (i as u32).wrapping_mul(0x9e37_79b9))
        .collect();
    // SAFETY: the bytes of a live `Vec<u32>`, read-only, for as long as `words` is borrowed.
    let bytes: &[u8] =
        unsafe { std::slice::from_raw_parts(words.as_ptr().cast(), words.len() * 4) };
    let k = args.get(4, 1).max(1);
    let xs: Vec<Vec<u32>> = (0..k as u32)
        .map(|v| x.iter().map(|e| e ^ v.wrapping_mul(0x0101_0101)).collect())
        .collect();
    let refs: Vec<&[u32]> = xs.iter().map(Vec::as_slice).collect();
    let mut out = vec![0u32; rows * k];
    println!(
        "{rows} rows x {width} words, {} MiB, bits {bits}",
        (words.len() * 4) >> 20
    );
    let mut read = Vec::new();
    let mut mv = Vec::new();
    for _ in 0..runs {
        let t = Instant::now();
        std::hint::black_box(memory::read_with(Backend::current(), bytes));
        read.push(t.elapsed().as_secs_f64());
        let t = Instant::now();
        matvec::matvec_batch_with(Backend::current(), matrix, &refs, &mut out);
        std::hint::black_box(&out);
        mv.push(t.elapsed().as_secs_f64());
    }
    let (r, m) = (median(&mut read), median(&mut mv));
    let gb = bytes.len() as f64 / 1e9;
    println!(
        "read {:.2} ms {:.1} GB/s | matvec x{k} {:.2} ms {:.1} GB/s effective | ratio {:.3}",
        r * 1e3,
        gb / r,
        m * 1e3,
        k as f64 * gb / m,
        k as f64 * r / m
    );
    Ok(())
}
