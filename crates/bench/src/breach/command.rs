//! `pir breach bench`: flags to [`super::build`] and [`super::measure`], the two servers
//! started in this process with the code of `pir breach serve`
//! ([`pir_breach::command::start_server`]), and the report printed as it comes.

use std::sync::Arc;

use anyhow::{Context, Result};
use pir_breach::command::{start_server, BreachBenchArgs, ServerPlan, StartedServer};
use pir_breach::BreachSession;
use pir_keys::SecretKey;

use crate::breach::{self, BenchServer, Options};

impl BenchServer for StartedServer {
    fn service(&self) -> Arc<pir_breach::BreachService> {
        StartedServer::service(self)
    }

    fn public_key(&self) -> pir_keys::PublicKey {
        self.public_key
    }
}

/// Runs the benchmark and prints its report.
pub async fn run(args: &BreachBenchArgs) -> Result<()> {
    run_with(args, &mut |line| println!("{line}")).await
}

/// The driver's options of `args`.
pub fn options(args: &BreachBenchArgs) -> Options {
    Options {
        entries: args.entries,
        seed: args.seed,
        checks: args.checks,
        qdp_queue: args.qdp_queue,
        dir: args.dir.clone(),
    }
}

/// Runs the benchmark, handing each line of its report to `out` as it comes.
pub async fn run_with(args: &BreachBenchArgs, out: &mut dyn FnMut(String)) -> Result<()> {
    let options = options(args);
    let built = breach::build(&options, out)?;
    let keys = [SecretKey::generate()?, SecretKey::generate()?];
    let seed_states = [built.seed_state(0), built.seed_state(1)];
    let mut servers = Vec::new();
    for (server, key) in keys.iter().enumerate() {
        let plan = plan(args, &built, key, server, &seed_states[server]);
        servers.push(start_server(&[plan]).await?);
    }
    let list: Vec<(String, pir_keys::PublicKey)> = servers
        .iter()
        .zip(&keys)
        .map(|(s, k)| (format!("https://{}", s.running.addr), k.public()))
        .collect();
    let session = BreachSession::open(&list)
        .await
        .context("connecting to the benchmark servers")?;
    breach::measure(&options, &built, &servers, &session, out).await?;
    for server in servers {
        server.running.shutdown().await;
    }
    Ok(())
}

/// Server `server` of the benchmark: `pir breach serve`'s defaults on 127.0.0.1, with the
/// precompute settings of `args`.
fn plan<'a>(
    args: &BreachBenchArgs,
    built: &'a breach::Built,
    key: &'a SecretKey,
    server: usize,
    seed_state: &'a std::path::Path,
) -> ServerPlan<'a> {
    let mut plan = ServerPlan::loopback(built.db_path(), key, server, seed_state);
    plan.policy = args.qdp_policy;
    plan.queue = args.qdp_queue;
    plan.four_russians = args.four_russians.map(usize::from);
    plan
}
