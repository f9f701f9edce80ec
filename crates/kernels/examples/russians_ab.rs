//! Times a four-Russians table scan against a plain read of the database, alternating in one
//! process (medians), for tuning: `RAYON_NUM_THREADS=1 cargo run --release -p pir-kernels
//! --example russians_ab -- [MiB] [block bytes] [chunks c] [group t] [selected chunks] [runs]`
//! (defaults 1024, 4096, 1, 4, all, 9). With `c = 1` the selection still has
//! `selected chunks` chunks, gathered as RAID-PIR's engine does. `FLIP=j` builds a table of
//! chunk `j` only; `HUGE=0` builds it in ordinary pages.
use std::time::Instant;

use pir_kernels::bench_support::{median, Args, XorShift};
use pir_kernels::russians::{self, RussiansLayout};
use pir_kernels::{memory, Backend, Selection};

fn main() -> Result<(), String> {
    let args = Args::from_env()?;
    let mib = args.get(0, 1024);
    let b = args.get(1, 4096);
    let c = args.get(2, 1);
    let t = args.get(3, 4);
    let selected = args.get(4, c.max(2));
    let runs = args.get(5, 9);
    let rows = (mib << 20) / b;
    // FLIP=j holds only chunk j (as a QDP server's table of its flip chunk, step c).
    let layout = match std::env::var("FLIP").ok().and_then(|j| j.parse().ok()) {
        Some(first) => RussiansLayout::for_chunks(rows, b, c, t, first, c),
        None => RussiansLayout::new(rows, b, c, t),
    }
    .ok_or("bad layout")?;
    let mut rng = XorShift::new(1);
    let db = rng.bytes(rows * b);
    // HUGE=0 builds into an ordinary allocation, for an A/B of the huge-page advice.
    let plain = std::env::var("HUGE").is_ok_and(|v| v == "0");
    let mut table = if plain {
        memory::HugeBuffer::zeroed(0)
    } else {
        memory::HugeBuffer::zeroed(layout.table_bytes())
    };
    let mut heap = Vec::new();
    if plain {
        heap = vec![0u8; layout.table_bytes()];
        russians::build_parallel_into(layout, &db, &mut heap, &|_, _| {});
    } else {
        russians::build_parallel_into(layout, &db, &mut table, &|_, _| {});
    }
    let table: &[u8] = if plain { &heap } else { &table };
    // With c > 1 only the first `selected` chunks have bits; with c = 1 the selection is
    // gathered from `selected` chunks, every one random.
    let chunk_count = if c == 1 { selected } else { c };
    let per_chunk = rows.div_ceil(chunk_count).div_ceil(8);
    println!(
        "{rows} rows x {b} B, c {c}, t {t}, table {} MiB, {selected} of {chunk_count} chunks selected",
        table.len() >> 20
    );
    let mut read = Vec::new();
    let mut scan = Vec::new();
    for _ in 0..runs {
        let bits: Vec<Vec<u8>> = (0..chunk_count)
            .map(|j| {
                (0..per_chunk)
                    .map(|_| if j < selected { rng.byte() } else { 0 })
                    .collect()
            })
            .collect();
        let refs: Vec<&[u8]> = bits.iter().map(Vec::as_slice).collect();
        let t0 = Instant::now();
        std::hint::black_box(memory::read_with(Backend::current(), &db));
        read.push(t0.elapsed().as_secs_f64());
        let t0 = Instant::now();
        std::hint::black_box(russians::scan_parallel(
            layout,
            Selection::new(&refs),
            table,
        ));
        scan.push(t0.elapsed().as_secs_f64());
    }
    // How much of this process's memory the kernel actually gave huge pages (Linux).
    if let Ok(rollup) = std::fs::read_to_string("/proc/self/smaps_rollup") {
        for line in rollup.lines().filter(|l| l.starts_with("AnonHugePages")) {
            println!("{line}");
        }
    }
    let (r, s) = (median(&mut read), median(&mut scan));
    println!(
        "read {:.2} ms ({:.1} GB/s), scan {:.2} ms, scan/read {:.3}",
        r * 1e3,
        db.len() as f64 / r / 1e9,
        s * 1e3,
        s / r
    );
    Ok(())
}
