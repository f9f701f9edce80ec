//! The `pir bench --oram --oram-nodes N` measurement without the CLI around it, for
//! before/after comparisons on one machine: a release build of this example is far cheaper
//! than one of `pir`. It is also the node binary the benchmark starts (`nodes_bench oram node
//! ...`, as `pir oram node`). Prints one JSON row (the fields of the `pir` command's `--json`).
//!
//! `cargo run --release -p pir-blockstore --example nodes_bench -- SIZE NODES IN_FLIGHT OPS
//! RUNS [DELAY_MS [SCRATCH]]`

use clap::{Parser, Subcommand};
use pir_blockstore::command::nodes_bench::{run, NodesBenchPlan};
use pir_blockstore::command::OramCommand;

#[derive(Parser)]
struct Cli {
    #[command(subcommand)]
    command: Top,
}

#[derive(Subcommand)]
enum Top {
    /// `pir oram ...` (the benchmark starts `oram node`).
    #[command(subcommand)]
    Oram(Box<OramCommand>),
    /// The benchmark.
    Bench {
        size: String,
        nodes: usize,
        in_flight: usize,
        ops: u64,
        runs: usize,
        #[arg(default_value_t = 0)]
        delay_ms: u64,
        scratch: Option<std::path::PathBuf>,
    },
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let cli = Cli::parse();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    match cli.command {
        Top::Oram(command) => runtime.block_on(pir_blockstore::command::run(*command))?,
        Top::Bench {
            size,
            nodes,
            in_flight,
            ops,
            runs,
            delay_ms,
            scratch,
        } => runtime.block_on(run(NodesBenchPlan {
            size,
            nodes,
            delay_ms,
            in_flight,
            ops,
            runs,
            json: true,
            scratch,
            machine: "nodes_bench example".into(),
        }))?,
    }
    Ok(())
}
