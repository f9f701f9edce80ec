//! What bounds a sparse XOR scan: times, on one core, in one process, alternating (medians),
//! a plain read of the whole region, a read of only the selected rows (no XOR), the sparse
//! scan itself, and random whole-row reads from a region several times larger (the access
//! pattern of four-Russians lookups), each in ordinary and in huge pages:
//! `cargo run --release -p pir-kernels --example xor_limits -- [MiB] [row bytes] [runs]`
//! (defaults 1024, 4096, 7). `PIR_KERNEL=avx2` for the AVX2 kernels.
use std::time::Instant;

use pir_kernels::{memory, Backend, Selection};

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn main() -> Result<(), String> {
    let args = std::env::args()
        .skip(1)
        .map(|a| a.parse().map_err(|e| format!("{a}: {e}")))
        .collect::<Result<Vec<usize>, _>>()?;
    let mib = args.first().copied().unwrap_or(1024);
    let b = args.get(1).copied().unwrap_or(4096);
    let runs = args.get(2).copied().unwrap_or(7);
    let rows = (mib << 20) / b;
    let backend = Backend::current();
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    let mut next = move || {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        state
    };
    let mut heap = vec![0u8; rows * b];
    heap.iter_mut().for_each(|x| *x = next() as u8);
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
        let bits: Vec<u8> = (0..rows.div_ceil(8)).map(|_| next() as u8).collect();
        let half = rows.div_ceil(2).div_ceil(8);
        let c2: Vec<Vec<u8>> = vec![
            (0..half).map(|_| next() as u8).collect(),
            (0..half).map(|_| next() as u8).collect(),
        ];
        let selected: Vec<usize> = (0..rows)
            .filter(|&r| (bits[r / 8] >> (r % 8)) & 1 == 1)
            .collect();
        let random: Vec<usize> = (0..selected.len() / 2)
            .map(|_| (next() as usize) % big_rows)
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
                    let mut acc = vec![0u8; b];
                    let refs = [bits.as_slice()];
                    pir_kernels::scan_with(
                        backend,
                        Selection::new(&refs),
                        region,
                        b,
                        0..rows,
                        &mut acc,
                    );
                    std::hint::black_box(&acc);
                    selected.len() * b
                }
                3 => {
                    let mut acc = vec![0u8; 2 * b];
                    let refs = [c2[0].as_slice(), c2[1].as_slice()];
                    pir_kernels::scan_with(
                        backend,
                        Selection::new(&refs),
                        region,
                        b,
                        0..rows,
                        &mut acc,
                    );
                    std::hint::black_box(&acc);
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
    let read_all = median(times[0].clone());
    let read_bw = (rows * b) as f64 / read_all;
    for (k, name) in names.iter().enumerate() {
        let t = median(times[k].clone());
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
