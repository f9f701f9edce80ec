//! `pir loadtest`: flags to a [`crate::loadtest::Plan`], the run, the printed report.

use anyhow::{bail, Result};

use super::{LoadKind, LoadtestArgs};
use crate::loadtest::{self, Kind, Plan};

/// `pir loadtest`.
pub async fn run(args: LoadtestArgs) -> Result<()> {
    if args.clients == 0 || args.seconds == 0 {
        bail!("--clients and --seconds must be at least 1");
    }
    let plan = Plan {
        server: pir_client::servers_file::parse_arg(&args.server)?,
        clients: args.clients,
        seconds: args.seconds,
        abusers: args.abuse.then(|| args.abusers()),
    };
    let kind = match args.kind {
        LoadKind::Mirror => Kind::Mirror,
        LoadKind::Lattice => Kind::Lattice,
    };
    let source = loadtest::source(&plan.server, kind).await?;
    if !args.json {
        for line in plan.intro(&source) {
            println!("{line}");
        }
    }
    let report = loadtest::run(&plan, source).await?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&report.to_json())?);
    } else {
        for line in report.lines() {
            println!("{line}");
        }
    }
    if report.served() == 0 {
        bail!("no query was served");
    }
    Ok(())
}
