//! `pir bench --shards 1,2,4`: its flags to a [`crate::shards::Plan`], the rows printed.

use anyhow::{anyhow, Result};

use super::BenchArgs;
use crate::shards::{self, Plan};

/// The default total size: 2^20 records of 32 bytes (32 MiB), small enough for a loaded
/// machine, large enough that a query's scan outweighs its fixed costs.
const DEFAULT_SHAPE: (u64, usize) = (1 << 20, 32);

/// Runs the sharding benchmark `args` asks for.
pub async fn run(args: &BenchArgs) -> Result<()> {
    let (records, record_bytes) = match &args.shape {
        Some(name) => {
            let (r, b) = name
                .split_once('x')
                .ok_or_else(|| anyhow!("--shards takes --shape RECORDSxBYTES, e.g. 1048576x32"))?;
            (r.parse::<u64>()?, b.trim_end_matches('B').parse::<usize>()?)
        }
        None => DEFAULT_SHAPE,
    };
    let plan = Plan {
        shards: args.shards.clone(),
        records,
        record_bytes,
        queries: args.shard_queries,
        relay_ms: args.relay_ms,
        workers: args.threads.first().copied(),
    };
    let pir = std::env::current_exe()?;
    if !args.json {
        println!("{}", crate::machine_line());
        println!(
            "sharded SimplePIR, {records} records of {record_bytes} B ({:.1} MiB in all), {} \
             queries one at a time per row; relay rows add {} ms each way between front end \
             and shards",
            (records as f64 * record_bytes as f64) / f64::from(1 << 20),
            plan.queries,
            plan.relay_ms
        );
    }
    let mut base: Vec<(u64, f64)> = Vec::new();
    let json = args.json;
    shards::run(&pir, &plan, &mut |row| {
        let of_base = base
            .iter()
            .find(|(relay, _)| *relay == row.relay_ms)
            .map(|(_, cpu)| *cpu);
        if row.shards == 1 && of_base.is_none() {
            base.push((row.relay_ms, row.server_cpu_ms));
        }
        if json {
            println!("{}", serde_json::to_string(row).unwrap_or_default());
        } else {
            println!("{}", shards::line(row, of_base));
        }
    })
    .await?;
    Ok(())
}
