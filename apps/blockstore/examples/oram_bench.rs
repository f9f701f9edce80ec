//! The `pir bench --oram` measurement without the CLI around it, for before/after
//! comparisons on one machine: a release build of this example is far cheaper than one of
//! `pir`. Prints one JSON row (the fields of `pir bench --oram --json`).
//!
//! `cargo run --release -p pir-blockstore --example oram_bench -- SIZE_MIB OPS RUNS [SCRATCH]`

use std::path::PathBuf;

use pir_blockstore::bench::{run, OramBenchOptions};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let number = |i: usize, default: u64| -> Result<u64, Box<dyn std::error::Error>> {
        Ok(args
            .get(i)
            .map(|a| a.parse())
            .transpose()?
            .unwrap_or(default))
    };
    let size = number(0, 1024)? << 20;
    let ops = number(1, 20_000)?;
    let runs = number(2, 3)? as usize;
    let parent = args
        .get(3)
        .map(PathBuf::from)
        .unwrap_or_else(std::env::temp_dir);
    let scratch = tempfile::tempdir_in(parent)?;
    let options = OramBenchOptions {
        size,
        block: 4096,
        stores: Vec::new(),
        runtime: None,
        ops,
        runs,
        in_flight: pir_oram::MAX_BATCH,
        dir: scratch.path().to_path_buf(),
    };
    let report = run(&options, &mut |_, _| {})?;
    println!(
        "{{\"size\":{size},\"ops\":{ops},\"runs\":{runs},\"ops_per_s\":{:.1},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"max_ms\":{:.3},\"cpu_s_per_op\":{:.7},\"peak_cache\":{},\"cache_p99\":{}}}",
        report.ops_per_second(),
        report.latency(0.5).as_secs_f64() * 1e3,
        report.latency(0.99).as_secs_f64() * 1e3,
        report.latency(1.0).as_secs_f64() * 1e3,
        report.cpu_s_per_op(),
        report.peak_cache,
        report.cache_percentile(0.99),
    );
    Ok(())
}
