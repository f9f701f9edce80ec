//! `pir bench`: parses the choices, runs the rows of `pir-bench` and prints each as it
//! finishes (XOR modes, QDP, the lattice schemes, Checklist).

use anyhow::{Context, Result};

use crate::cli;

/// `pir bench`: parses the choices, runs the rows and prints each as it finishes.
pub fn bench(args: &cli::BenchArgs) -> anyhow::Result<()> {
    use pir_bench::{BenchOptions, Mode};

    let lattice: Vec<&str> = args
        .modes
        .iter()
        .map(String::as_str)
        .filter(|m| matches!(*m, "simplepir" | "doublepir" | "ypir"))
        .collect();
    if let Some(name) = &args.backend {
        let backend = pir_kernels::Backend::from_name(name).ok_or_else(|| {
            anyhow::anyhow!("unknown backend {name:?}: use portable, avx2 or avx512")
        })?;
        if !backend.is_available() {
            anyhow::bail!("this CPU cannot run the {name} backend");
        }
        backend.force();
    }
    if let Some(mode) = args
        .modes
        .iter()
        .find(|m| matches!(m.as_str(), "checklist" | "checklist-updates"))
    {
        if args.modes.len() != 1 {
            anyhow::bail!("run {mode} apart from the other modes");
        }
        return bench_checklist(args, mode == "checklist-updates");
    }
    if args.modes.iter().any(|m| m == "qdp") {
        if args.modes.len() != 1 {
            anyhow::bail!("run the qdp mode apart from the other modes");
        }
        return bench_qdp(args);
    }
    if !lattice.is_empty() {
        if lattice.len() != args.modes.len() {
            anyhow::bail!(
                "run the lattice modes (simplepir, doublepir, ypir) apart from the XOR modes"
            );
        }
        return bench_lattice(args, &lattice);
    }
    let shapes = match &args.shape {
        Some(name) => vec![pir_bench::shape_named(name).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown shape {name:?}; shapes: {}",
                pir_bench::SHAPES.map(|s| s.name).join(", ")
            )
        })?],
        None => Vec::new(),
    };
    if !pir_kernels::russians::GROUP_SIZES.contains(&args.group) {
        anyhow::bail!("--group must be 1 to 8");
    }
    if args.batch == 0 {
        anyhow::bail!("--batch must be at least 1");
    }
    let modes = args
        .modes
        .iter()
        .map(|m| match m.as_str() {
            "plain" => Ok(Mode::Plain),
            "four-russians" => Ok(Mode::FourRussians(args.group)),
            "batched" => Ok(Mode::Batched(args.batch)),
            other => Err(anyhow::anyhow!(
                "unknown mode {other:?}: use plain, four-russians or batched"
            )),
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut threads = args.threads.clone();
    if threads.is_empty() {
        threads = if cores > 1 { vec![1, cores] } else { vec![1] };
    }
    if threads.contains(&0) {
        anyhow::bail!("--threads must be at least 1");
    }
    let options = BenchOptions {
        shapes,
        modes,
        threads,
        runs: args.runs.max(1),
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "machine": pir_bench::machine_line() })
        );
    } else {
        println!(
            "{}; median of {} runs",
            pir_bench::machine_line(),
            options.runs
        );
        println!("{}", pir_bench::table_header());
    }
    let json = args.json;
    pir_bench::run(&options, &mut |row| {
        if json {
            println!("{}", serde_json::to_string(row).unwrap_or_default());
        } else {
            println!("{}", pir_bench::table_line(row));
        }
    });
    Ok(())
}

/// `pir bench --modes checklist|checklist-updates`.
fn bench_checklist(args: &cli::BenchArgs, updates: bool) -> anyhow::Result<()> {
    use pir_bench::checklist::{run_checklist, run_updates, TARGET_UPDATE_GAIN};
    use std::io::Write;
    let (records, record_bytes) = match &args.shape {
        Some(name) => {
            let (r, b) = name
                .split_once('x')
                .ok_or_else(|| anyhow::anyhow!("--shape RECORDSxBYTES, e.g. 3000000x32"))?;
            (r.parse::<u64>()?, b.trim_end_matches('B').parse::<usize>()?)
        }
        None => (3_000_000, 32),
    };
    let threads = args.threads.first().copied().unwrap_or(1).max(1);
    let pool = rayon::ThreadPoolBuilder::new()
        .num_threads(threads)
        .build()
        .context("starting the benchmark's threads")?;
    if !args.json {
        println!(
            "{}; {threads} thread(s); median of {} runs",
            pir_bench::machine_line(),
            args.runs.max(1)
        );
    }
    if !updates {
        let row = pool.install(|| run_checklist(records, record_bytes, args.runs, 1000))?;
        if args.json {
            println!("{}", serde_json::to_string(&row)?);
        } else {
            for line in row.lines() {
                println!("{line}");
            }
        }
        return Ok(());
    }
    let mut csv = match &args.csv {
        Some(path) => {
            let mut file = std::fs::File::create(path)
                .with_context(|| format!("creating {}", path.display()))?;
            writeln!(file, "step,hinted_records,buckets,seconds")?;
            Some(file)
        }
        None => None,
    };
    let json = args.json;
    let mut failure = None;
    let summary = pool.install(|| {
        run_updates(
            records,
            args.steps,
            args.runs,
            args.waterfall_ratio,
            &mut |step| {
                if let Some(file) = &mut csv {
                    if let Err(e) = writeln!(
                        file,
                        "{},{},{},{:.6}",
                        step.step, step.hinted_records, step.buckets, step.seconds
                    ) {
                        failure = Some(e);
                    }
                }
                if json {
                    println!("{}", serde_json::to_string(step).unwrap_or_default());
                }
            },
        )
    })?;
    if let Some(e) = failure {
        return Err(anyhow::Error::new(e).context("writing the CSV"));
    }
    if json {
        println!("{}", serde_json::to_string(&summary)?);
    } else {
        println!(
            "checklist-updates {}x32B, {} steps of {} changed records, r = {}: re-hinting {:.3} s, \
             mean step {:.4} s = {:.1}x cheaper (target >= {TARGET_UPDATE_GAIN}x: {}); at most {} \
             buckets (a lookup asks each)",
            summary.records,
            args.steps,
            summary.changed_per_step,
            summary.ratio,
            summary.rehint_s,
            summary.mean_step_s,
            summary.gain,
            if summary.gain >= TARGET_UPDATE_GAIN { "met" } else { "NOT met" },
            summary.max_buckets
        );
    }
    Ok(())
}

/// `pir bench --modes qdp`: online server time of RAID-PIR with query-dependent
/// preprocessing next to plain and four-Russians RAID-PIR on the same database.
fn bench_qdp(args: &cli::BenchArgs) -> anyhow::Result<()> {
    use pir_bench::qdp::{run_qdp, QdpBenchOptions, TARGET_RATIO};
    let shapes = match &args.shape {
        Some(name) => vec![pir_bench::shape_named(name).ok_or_else(|| {
            anyhow::anyhow!(
                "unknown shape {name:?}; shapes: {}",
                pir_bench::SHAPES.map(|s| s.name).join(", ")
            )
        })?],
        None => pir_bench::SHAPES.to_vec(),
    };
    if !pir_kernels::russians::GROUP_SIZES.contains(&args.group) {
        anyhow::bail!("--group must be 1 to 8");
    }
    let (_, threads) = bench_threads(&args.threads)?;
    let options = QdpBenchOptions {
        shapes,
        group: args.group,
        threads,
        runs: args.runs.max(1),
    };
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "machine": pir_bench::machine_line() })
        );
    } else {
        println!(
            "{}; median of {} runs; RAID-PIR n = 2 and 3, r = 2, c = n, one block per query; \
             qdp rows time the online step only (entry precomputed first)",
            pir_bench::machine_line(),
            options.runs
        );
        println!(
            "target (issue 4): QDP online time <= {TARGET_RATIO} x RAID-PIR with four Russians, \
             n = 2"
        );
        println!("{}", pir_bench::table_header());
    }
    let json = args.json;
    let mut summaries = Vec::new();
    run_qdp(
        &options,
        &mut |row| {
            if json {
                println!("{}", serde_json::to_string(row).unwrap_or_default());
            } else {
                println!("{}", pir_bench::table_line(row));
            }
        },
        &mut |summary| summaries.push(summary.clone()),
    );
    for summary in &summaries {
        if json {
            println!("{}", serde_json::to_string(summary).unwrap_or_default());
        } else {
            println!("{}", summary.line());
        }
    }
    Ok(())
}

/// `pir bench --modes simplepir,doublepir`: answer time of the single-server schemes.
fn bench_lattice(args: &cli::BenchArgs, modes: &[&str]) -> anyhow::Result<()> {
    let shapes = match &args.shape {
        Some(name) => vec![
            pir_bench::lattice::lattice_shape_named(name).ok_or_else(|| {
                anyhow::anyhow!(
                    "unknown lattice shape {name:?}: use 1GiB-1bit, 8GiB-1bit, 1GiB-32B, 1GiB-32KiB or RECORDSxBYTES"
                )
            })?,
        ],
        None => ["1GiB-1bit", "1GiB-32B"]
            .iter()
            .filter_map(|n| pir_bench::lattice::lattice_shape_named(n))
            .collect(),
    };
    let (_, threads) = bench_threads(&args.threads)?;
    if args.json {
        println!(
            "{}",
            serde_json::json!({ "machine": pir_bench::machine_line() })
        );
    } else {
        println!(
            "{}; median of {} runs; answer time only (the hint is built first)",
            pir_bench::machine_line(),
            args.runs.max(1)
        );
        println!("{}", pir_bench::lattice::lattice_table_header());
    }
    for shape in &shapes {
        for mode in modes {
            let scheme = match *mode {
                "simplepir" => pir_lattice::Scheme::SimplePir,
                "doublepir" => pir_lattice::Scheme::DoublePir,
                _ => pir_lattice::Scheme::Ypir,
            };
            let batches = if args.lattice_batch.is_empty() {
                vec![1]
            } else {
                args.lattice_batch.clone()
            };
            if batches.contains(&0) {
                anyhow::bail!("--lattice-batch sizes must be at least 1");
            }
            let run = pir_bench::lattice::run_lattice;
            run(shape, scheme, &threads, &batches, args.runs, &mut |row| {
                if args.json {
                    println!("{}", serde_json::to_string(row).unwrap_or_default());
                } else {
                    println!("{}", pir_bench::lattice::lattice_table_line(row));
                }
            })
            .with_context(|| format!("{mode} on {}", shape.name))?;
        }
    }
    Ok(())
}

/// The machine's cores, and the thread counts `--threads` asks for (default: every core).
fn bench_threads(asked: &[usize]) -> Result<(usize, Vec<usize>)> {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let threads = if asked.is_empty() {
        vec![cores]
    } else {
        asked.to_vec()
    };
    if threads.contains(&0) {
        anyhow::bail!("--threads must be at least 1");
    }
    Ok((cores, threads))
}
