//! `pir bench` without `--oram`: parses the choices, runs the rows of this crate and prints
//! each as it finishes (XOR modes, QDP, the lattice schemes, Checklist).

use std::io::Write;

use anyhow::{anyhow, bail, Context, Result};
use serde::Serialize;

use super::BenchArgs;
use crate::{BenchOptions, Mode, Shape};

/// Which benchmark `--modes` asks for. Checklist and QDP run alone; the lattice modes run
/// apart from the XOR modes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Choice {
    /// `checklist` (`updates: false`) or `checklist-updates`.
    Checklist {
        /// `checklist-updates`: the waterfall steps against re-hinting.
        updates: bool,
    },
    /// Some of `singlepass`, `checklist`, `dpf` with `singlepass` among them: one row per
    /// scheme, side by side ([`crate::schemes`]).
    Schemes(Vec<String>),
    /// `qdp`.
    Qdp,
    /// Some of `simplepir`, `doublepir`, `ypir`, `inspire`, in the order given.
    Lattice(Vec<String>),
    /// Some of `plain`, `four-russians`, `batched` (checked when they are parsed).
    Xor,
}

/// The benchmark `modes` (the `--modes` list) asks for, or why they cannot run together.
pub fn choose(modes: &[String]) -> Result<Choice> {
    if modes.iter().any(|m| m == "singlepass") {
        if let Some(other) = modes
            .iter()
            .find(|m| !matches!(m.as_str(), "singlepass" | "checklist" | "dpf"))
        {
            bail!("run {other} apart from singlepass (which runs with checklist and dpf)");
        }
        return Ok(Choice::Schemes(modes.to_vec()));
    }
    if let Some(mode) = modes
        .iter()
        .find(|m| matches!(m.as_str(), "checklist" | "checklist-updates"))
    {
        if modes.len() != 1 {
            bail!("run {mode} apart from the other modes");
        }
        return Ok(Choice::Checklist {
            updates: mode == "checklist-updates",
        });
    }
    if modes.iter().any(|m| m == "qdp") {
        if modes.len() != 1 {
            bail!("run the qdp mode apart from the other modes");
        }
        return Ok(Choice::Qdp);
    }
    let lattice: Vec<String> = modes
        .iter()
        .filter(|m| matches!(m.as_str(), "simplepir" | "doublepir" | "ypir" | "inspire"))
        .cloned()
        .collect();
    if lattice.is_empty() {
        return Ok(Choice::Xor);
    }
    if lattice.len() != modes.len() {
        bail!(
            "run the lattice modes (simplepir, doublepir, ypir, inspire) apart from the XOR modes"
        );
    }
    Ok(Choice::Lattice(lattice))
}

/// `pir bench` without `--oram`: the backend first, then the benchmark `--modes` asks for.
pub fn run(args: &BenchArgs) -> Result<()> {
    if let Some(name) = &args.backend {
        let backend = pir_kernels::Backend::from_name(name)
            .ok_or_else(|| anyhow!("unknown backend {name:?}: use portable, avx2 or avx512"))?;
        if !backend.is_available() {
            bail!("this CPU cannot run the {name} backend");
        }
        backend.force();
    }
    match choose(&args.modes)? {
        Choice::Checklist { updates } => bench_checklist(args, updates),
        Choice::Schemes(schemes) => bench_schemes(args, &schemes),
        Choice::Qdp => bench_qdp(args),
        Choice::Lattice(modes) => bench_lattice(args, &modes),
        Choice::Xor => bench_xor(args),
    }
}

/// The XOR modes: plain, four-russians, batched.
fn bench_xor(args: &BenchArgs) -> Result<()> {
    let shapes = args.shape.as_deref().map(xor_shape).transpose()?;
    check_group(args.group)?;
    if args.batch == 0 {
        bail!("--batch must be at least 1");
    }
    let modes = args
        .modes
        .iter()
        .map(|m| match m.as_str() {
            "plain" => Ok(Mode::Plain),
            "four-russians" => Ok(Mode::FourRussians(args.group)),
            "batched" => Ok(Mode::Batched(args.batch)),
            other => Err(anyhow!(
                "unknown mode {other:?}: use plain, four-russians or batched"
            )),
        })
        .collect::<Result<Vec<_>>>()?;
    let cores = cores();
    let default = if cores > 1 { vec![1, cores] } else { vec![1] };
    let options = BenchOptions {
        shapes: shapes.into_iter().collect(),
        modes,
        threads: threads(&args.threads, default)?,
        runs: args.runs.max(1),
    };
    print_header(args.json, options.runs, "", &[crate::table_header()]);
    crate::run(&options, &mut |row| {
        print_row(args.json, row, crate::table_line)
    });
    Ok(())
}

/// `--shape RECORDSxBYTES` of the offline/online schemes (default 3000000x32), the pool of
/// `--threads` (default one thread), and the header line (without `--json`).
fn offline_online_setup(args: &BenchArgs) -> Result<(u64, usize, rayon::ThreadPool)> {
    let (records, record_bytes) = match &args.shape {
        Some(name) => {
            let (r, b) = name
                .split_once('x')
                .ok_or_else(|| anyhow!("--shape RECORDSxBYTES, e.g. 3000000x32"))?;
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
            crate::machine_line(),
            args.runs.max(1)
        );
    }
    Ok((records, record_bytes, pool))
}

/// `pir bench --modes singlepass,checklist,dpf`: one row per scheme, then the comparisons.
fn bench_schemes(args: &BenchArgs, schemes: &[String]) -> Result<()> {
    let (records, record_bytes, pool) = offline_online_setup(args)?;
    let mut rows = Vec::new();
    for scheme in schemes {
        let row =
            pool.install(|| crate::schemes::run(scheme, records, record_bytes, args.runs, 1000))?;
        if args.json {
            println!("{}", serde_json::to_string(&row)?);
        } else {
            println!("{}", row.line());
        }
        std::io::stdout().flush()?;
        rows.push(row);
    }
    if !args.json {
        for line in crate::schemes::comparisons(&rows) {
            println!("{line}");
        }
    }
    Ok(())
}

/// `pir bench --modes checklist|checklist-updates`.
fn bench_checklist(args: &BenchArgs, updates: bool) -> Result<()> {
    use crate::checklist::run_checklist;
    let (records, record_bytes, pool) = offline_online_setup(args)?;
    if updates {
        return bench_checklist_updates(args, records, &pool);
    }
    let row = pool.install(|| run_checklist(records, record_bytes, args.runs, 1000))?;
    if args.json {
        println!("{}", serde_json::to_string(&row)?);
    } else {
        for line in row.lines() {
            println!("{line}");
        }
    }
    Ok(())
}

/// `pir bench --modes checklist-updates`: the waterfall's steps, each printed (`--json`) and
/// written to `--csv` as it finishes, then the summary.
fn bench_checklist_updates(args: &BenchArgs, records: u64, pool: &rayon::ThreadPool) -> Result<()> {
    use crate::checklist::{run_updates, TARGET_UPDATE_GAIN};
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
             mean step {:.4} s = {:.1}x cheaper (target >= {TARGET_UPDATE_GAIN}x, the Checklist \
             paper's gain over 200 steps of 1 % at 3000000x32B: {}); at most {} buckets (a lookup \
             asks each)",
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
fn bench_qdp(args: &BenchArgs) -> Result<()> {
    use crate::qdp::{run_qdp, QdpBenchOptions, TARGET_RATIO};
    let shapes = match args.shape.as_deref() {
        Some(name) => vec![xor_shape(name)?],
        None => crate::SHAPES.to_vec(),
    };
    check_group(args.group)?;
    let options = QdpBenchOptions {
        shapes,
        group: args.group,
        threads: threads(&args.threads, vec![cores()])?,
        runs: args.runs.max(1),
    };
    print_header(
        args.json,
        options.runs,
        "; RAID-PIR n = 2 and 3, r = 2, c = n, one block per query; qdp rows time the online \
         step only (entry precomputed first)",
        &[
            format!(
                "target (issue 4): QDP online time <= {TARGET_RATIO} x RAID-PIR with four \
                 Russians, n = 2"
            ),
            crate::table_header(),
        ],
    );
    let mut summaries = Vec::new();
    run_qdp(
        &options,
        &mut |row| print_row(args.json, row, crate::table_line),
        &mut |summary| summaries.push(summary.clone()),
    );
    for summary in &summaries {
        print_row(args.json, summary, |s| s.line());
    }
    Ok(())
}

/// `pir bench --modes simplepir,doublepir`: answer time of the single-server schemes.
fn bench_lattice(args: &BenchArgs, modes: &[String]) -> Result<()> {
    use crate::lattice::{lattice_shape_named, lattice_table_header, lattice_table_line};
    let shapes = match &args.shape {
        Some(name) => vec![lattice_shape_named(name).ok_or_else(|| {
            anyhow!(
                "unknown lattice shape {name:?}: use 1GiB-1bit, 8GiB-1bit, 1GiB-32B, 1GiB-32KiB \
                 or RECORDSxBYTES"
            )
        })?],
        None => ["1GiB-1bit", "1GiB-32B"]
            .iter()
            .filter_map(|n| lattice_shape_named(n))
            .collect(),
    };
    let threads = threads(&args.threads, vec![cores()])?;
    print_header(
        args.json,
        args.runs.max(1),
        "; answer time only (the hint is built first)",
        &[lattice_table_header()],
    );
    let batches = if args.lattice_batch.is_empty() {
        vec![1]
    } else {
        args.lattice_batch.clone()
    };
    for shape in &shapes {
        for mode in modes {
            let scheme = match mode.as_str() {
                "simplepir" => pir_lattice::Scheme::SimplePir,
                "doublepir" => pir_lattice::Scheme::DoublePir,
                "inspire" => pir_lattice::Scheme::Inspire,
                _ => pir_lattice::Scheme::Ypir,
            };
            if batches.contains(&0) {
                bail!("--lattice-batch sizes must be at least 1");
            }
            crate::lattice::run_lattice(shape, scheme, &threads, &batches, args.runs, &mut |row| {
                print_row(args.json, row, lattice_table_line)
            })
            .with_context(|| format!("{mode} on {}", shape.name))?;
        }
    }
    Ok(())
}

/// One of the standard XOR shapes, by name.
fn xor_shape(name: &str) -> Result<Shape> {
    crate::shape_named(name).ok_or_else(|| {
        anyhow!(
            "unknown shape {name:?}; shapes: {}",
            crate::SHAPES.map(|s| s.name).join(", ")
        )
    })
}

fn check_group(group: usize) -> Result<()> {
    if !pir_kernels::russians::GROUP_SIZES.contains(&group) {
        bail!("--group must be 1 to 8");
    }
    Ok(())
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The thread counts `--threads` asks for (`default` when it is not given).
fn threads(asked: &[usize], default: Vec<usize>) -> Result<Vec<usize>> {
    let threads = if asked.is_empty() {
        default
    } else {
        asked.to_vec()
    };
    if threads.contains(&0) {
        bail!("--threads must be at least 1");
    }
    Ok(threads)
}

/// The lines before the rows: with `--json` the machine as one JSON object, else the machine,
/// the runs and `note` on one line, then `lines` (the table's header).
fn print_header(json: bool, runs: usize, note: &str, lines: &[String]) {
    if json {
        println!(
            "{}",
            serde_json::json!({ "machine": crate::machine_line() })
        );
        return;
    }
    println!("{}; median of {runs} runs{note}", crate::machine_line());
    for line in lines {
        println!("{line}");
    }
}

/// One finished row: a JSON object with `--json`, else `table`'s line.
fn print_row<R: Serialize>(json: bool, row: &R, table: impl Fn(&R) -> String) {
    if json {
        println!("{}", serde_json::to_string(row).unwrap_or_default());
    } else {
        println!("{}", table(row));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn modes(list: &str) -> Vec<String> {
        list.split(',').map(String::from).collect()
    }

    #[test]
    fn modes_that_cannot_share_a_run_are_refused() {
        assert_eq!(choose(&modes("plain,batched")).unwrap(), Choice::Xor);
        assert_eq!(choose(&modes("qdp")).unwrap(), Choice::Qdp);
        assert_eq!(
            choose(&modes("checklist-updates")).unwrap(),
            Choice::Checklist { updates: true }
        );
        assert_eq!(
            choose(&modes("ypir,simplepir")).unwrap(),
            Choice::Lattice(modes("ypir,simplepir"))
        );
        for (list, why) in [
            ("checklist,plain", "run checklist apart"),
            ("qdp,plain", "run the qdp mode apart"),
            ("simplepir,plain", "apart from the XOR modes"),
        ] {
            let refused = choose(&modes(list)).unwrap_err().to_string();
            assert!(refused.contains(why), "{list}: {refused}");
        }
    }

    #[test]
    fn thread_counts_default_and_refuse_zero() {
        assert_eq!(threads(&[], vec![1, 4]).unwrap(), vec![1, 4]);
        assert_eq!(threads(&[2, 3], vec![1]).unwrap(), vec![2, 3]);
        assert!(threads(&[0], vec![1]).is_err());
        assert!(xor_shape("2^20x32B").is_ok());
        assert!(xor_shape("no-such-shape").is_err());
        assert!(check_group(9).is_err());
    }
}
