//! `pir loadtest`: flags to a [`crate::loadtest::Plan`], the run (or the knee search), the
//! printed report.

use anyhow::{bail, Context, Result};
use pir_client::LookupScheme;

use super::{LoadKind, LoadScheme, LoadtestArgs};
use crate::loadtest::{self, Kind, KneeRule, Load, Plan, Report};

/// `pir loadtest`.
pub async fn run(args: LoadtestArgs) -> Result<()> {
    let plan = plan(&args)?;
    let kind = match args.kind {
        LoadKind::Mirror => Kind::Mirror,
        LoadKind::Lattice => Kind::Lattice,
        LoadKind::Safebrowsing => Kind::SafeBrowsing(match args.scheme {
            LoadScheme::Checklist => LookupScheme::Checklist,
            LoadScheme::Singlepass => LookupScheme::SinglePass,
            LoadScheme::Dpf => LookupScheme::Dpf,
        }),
        LoadKind::Breach => Kind::Breach,
    };
    let source = loadtest::source(&plan.servers, kind).await?;
    if !args.json {
        for line in plan.intro(&source) {
            println!("{line}");
        }
    }
    let report = if args.knee {
        knee(&args, &plan, &source).await?
    } else {
        let report = loadtest::run(&plan, source).await?;
        if args.json {
            println!("{}", serde_json::to_string_pretty(&report.to_json())?);
        } else {
            report.lines().iter().for_each(|line| println!("{line}"));
        }
        report
    };
    if let Some(path) = &args.csv {
        std::fs::write(path, report.csv())
            .with_context(|| format!("writing {}", path.display()))?;
    }
    if let Some(path) = &args.plot {
        let title = args.title.as_deref().unwrap_or(&report.target);
        loadtest::chart::plot(&report, title, path)?;
    }
    if report.served() == 0 {
        bail!("no query was served");
    }
    Ok(())
}

/// The plan of `args`, checked.
fn plan(args: &LoadtestArgs) -> Result<Plan> {
    let servers = (args.servers.iter())
        .map(|s| Ok(pir_client::servers_file::parse_arg(s)?))
        .collect::<Result<Vec<_>>>()?;
    let plan = Plan {
        servers,
        load: match args.rate {
            Some(rate) => Load::Open { rate },
            None => Load::Closed {
                clients: args.clients,
            },
        },
        seconds: args.seconds,
        abusers: args.abuse.then(|| args.abusers()),
        interval_ms: args.interval_ms,
        server_pids: args.server_pids.clone(),
    };
    plan.check()?;
    Ok(plan)
}

/// The knee search: one line (or JSON object) per step, then the knee; returns the knee step's
/// report (the first step's when even that broke).
async fn knee(args: &LoadtestArgs, plan: &Plan, source: &loadtest::Source) -> Result<Report> {
    let rule = KneeRule {
        max_error_share: 0.01,
        max_p99_ms: args.knee_p99_ms,
        min_served_share: 0.9,
    };
    let json = args.json;
    let mut print = |report: &Report| {
        if !json {
            println!(
                "step at {:.1}/s: {}",
                report.rate.unwrap_or(0.0),
                report.lines()[0]
            );
        }
    };
    let found = loadtest::knee(
        plan,
        source,
        args.knee_factor,
        args.knee_steps,
        rule,
        &mut print,
    )
    .await?;
    let at = found.knee.and_then(|k| found.steps.get(k));
    if json {
        let value = serde_json::json!({
            "knee": at.map(Report::to_json),
            "broke": found.broke,
            "steps": found.steps.iter().map(Report::to_json).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        match at {
            Some(report) => {
                println!(
                    "knee: {:.1}/s offered ({})",
                    report.rate.unwrap_or(0.0),
                    found
                        .broke
                        .as_deref()
                        .map_or("every step held".into(), |b| {
                            format!("the next step broke: {b}")
                        })
                );
                report.lines().iter().for_each(|line| println!("{line}"));
            }
            None => println!(
                "no knee: the first step broke ({})",
                found.broke.as_deref().unwrap_or("?")
            ),
        }
    }
    at.or(found.steps.first())
        .cloned()
        .context("the knee search ran no step")
}
