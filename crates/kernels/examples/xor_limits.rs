//! What bounds a sparse XOR scan: times, on one core, in one process, alternating (medians),
//! a plain read of the whole region, a read of only the selected rows (no XOR), the sparse
//! scan itself, and random whole-row reads from a region several times larger (the access
//! pattern of four-Russians lookups), each in ordinary and in huge pages:
//! `cargo run --release -p pir-kernels --example xor_limits -- [MiB] [row bytes] [runs]`
//! (defaults 1024, 4096, 7). `PIR_KERNEL=avx2` for the AVX2 kernels.
use std::time::Instant;

use pir_kernels::bench_support::{median, Args, XorShift};
use pir_kernels::{memory, Backend, Selection};

/// The sparse scan of all `rows` rows of `region` for a query of `chunks` (one per chunk).
fn scan(backend: Backend, chunks: &[&[u8]], region: &[u8], b: usize, rows: usize) {
    let mut acc = vec![0u8; chunks.len() * b];
    pir_kernels::scan_with(
        backend,
        Selection::new(chunks),
        region,
        b,
        0..rows,
        &mut acc,
    );
    std::hint::black_box(&acc);
}

fn main() -> Result<(), String> {
    let args = Args::from_env()?;
    let mib = args.get(0, 1024);
    let b = args.get(1, 4096);
    let runs = args.get(2, 7);
    let rows = (mib << 20) / b;
    let backend = Backend::current();
    let mut rng = XorShift::new(1);
    let heap = rng.bytes(rows * b);
    let mut huge = memory::HugeBuffer::zeroed(rows * b);
    huge.copy_from_slice(&heap);
    // A region 4x larger for random row reads (a t = 4 table is 3.75x).
    let big_rows = rows * 4;
    let mut big_huge = memory::HugeBuffer::zeroed(big_rows * b);
    big_huge
        .iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = i as u8);
    let mut big_heap = vec![0u8; big_rows * b];
    big_heap
        .iter_mut()
        .enumerate()
        .for_each(|(i, x)| *x = i as u8);
    println!(
        "{rows} rows x {b} B ({} MB), backend {}",
        rows * b / 1_000_000,
        backend.name()
    );
    let names = [
        "read all (heap)",
        "read all (huge)",
        "read selected (heap)",
        "read selected (huge)",
        "scan c=1 (heap)",
        "scan c=1 (huge)",
        "scan c=2 (heap)",
        "scan c=2 (huge)",
        "random rows 4x region (heap)",
        "random rows 4x region (huge)",
    ];
    let mut times: Vec<Vec<f64>> = vec![Vec::new(); names.len()];
    let mut touched = vec![0usize; names.len()];
    for _ in 0..runs {
        let bits = rng.bytes(rows.div_ceil(8));
        let half = rows.div_ceil(2).div_ceil(8);
        let c2 = [rng.bytes(half), rng.bytes(half)];
        let selected: Vec<usize> = (0..rows)
            .filter(|&r| (bits[r / 8] >> (r % 8)) & 1 == 1)
            .collect();
        let random: Vec<usize> = (0..selected.len() / 2)
            .map(|_| (rng.next() as usize) % big_rows)
            .collect();
        for (k, time) in times.iter_mut().enumerate() {
            let region: &[u8] = if k % 2 == 0 { &heap } else { &huge };
            let t0 = Instant::now();
            let bytes = match k / 2 {
                0 => {
                    std::hint::black_box(memory::read_with(backend, region));
                    region.len()
                }
                1 => {
                    std::hint::black_box(memory::read_rows_with(backend, region, b, &selected));
                    selected.len() * b
                }
                2 => {
                    scan(backend, &[&bits], region, b, rows);
                    selected.len() * b
                }
                3 => {
                    scan(backend, &[&c2[0], &c2[1]], region, b, rows);
                    rows / 2 * b
                }
                _ => {
                    let big: &[u8] = if k % 2 == 0 { &big_heap } else { &big_huge };
                    std::hint::black_box(memory::read_rows_with(backend, big, b, &random));
                    random.len() * b
                }
            };
            time.push(t0.elapsed().as_secs_f64());
            touched[k] = bytes;
        }
    }
    let read_all = median(&mut times[0]);
    let read_bw = (rows * b) as f64 / read_all;
    for (k, name) in names.iter().enumerate() {
        let t = median(&mut times[k]);
        let bw = touched[k] as f64 / t;
        println!(
            "{name:<30} {:>8.2} ms {:>7.1} GB/s touched {:>5} MB  x read {:.2}",
            t * 1e3,
            bw / 1e9,
            touched[k] / 1_000_000,
            bw / read_bw
        );
    }
    Ok(())
}
