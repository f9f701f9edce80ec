//! The flags of `pir oram node|balancer|node-size` and the settings of `pir oram node` (flags
//! and `--config` merged by `pir-host`).

use std::path::PathBuf;

use clap::Args;
use serde::{Deserialize, Serialize};

/// `pir oram node`. Every setting can also come from a TOML file (`--config`).
#[derive(Debug, Args, Serialize)]
#[command(mut_arg("config", |arg| arg.help(
    "TOML file with any of: state, owner and the settings every server takes (key, \
     listen, grace_seconds, admin_listen, max_connections, header_timeout_seconds, \
     body_timeout_seconds, memory_budget_mib, ...: the flag names with `_`; flags \
     win)"
)))]
pub struct OramNodeArgs {
    // `--config` (its help is set above: the keys of this command) and `--print-config`.
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(skip)]
    pub config: pir_host::ConfigArgs,
    /// The node's disk: a state made by `pir oram init` (its key is STATE.key), of at least
    /// the size `pir oram node-size` prints.
    #[arg(long, value_name = "STATE")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub state: Option<PathBuf>,
    /// The public key of the one balancer this node serves (`pir oram owner --state BSTATE`
    /// makes it as BSTATE.client.pub). Default: STATE.owner.pub.
    #[arg(long, value_name = "BALANCER.pub")]
    #[serde(skip_serializing_if = "Option::is_none")]
    pub owner: Option<PathBuf>,
    // Documented flag by flag in `CommonArgs` (a doc comment here would be clap's help text).
    #[allow(missing_docs)]
    #[command(flatten)]
    #[serde(flatten)]
    pub common: pir_host::settings::CommonArgs,
}

/// The settings of `pir oram node` after defaults, file and flags are merged.
#[derive(Debug, Serialize, Deserialize)]
pub struct OramNodeSettings {
    /// The node's disk state.
    pub state: PathBuf,
    /// The balancer's public key file (default: STATE.owner.pub).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub owner: Option<PathBuf>,
    /// The settings every server takes.
    #[serde(flatten)]
    pub common: pir_host::settings::Common,
}

/// Why `workers` and `batch_window_ms` are refused.
const ONE_BALANCER: &str = "pir oram node serves one balancer whose batches come in order: it \
     always answers on one worker with no batching window, so --workers and \
     --batch-window-ms (workers, batch_window_ms in --config) do not apply; remove them";

impl pir_host::Settings for OramNodeSettings {
    const KEYS: &'static [&'static str] = &["state", "owner"];
    const PATHS: &'static [&'static str] = &["state", "owner"];

    fn defaults() -> toml::Table {
        let mut defaults =
            pir_host::settings::Common::defaults(pir_host::settings::DEFAULT_RETIRE_SECONDS);
        defaults.insert(
            "listen".into(),
            toml::Value::String("127.0.0.1:8470".into()),
        );
        defaults.insert("batch_window_ms".into(), toml::Value::Integer(0));
        defaults
    }

    fn validate(&self) -> anyhow::Result<()> {
        if self.common.workers.is_some() || self.common.batch_window_ms != 0 {
            anyhow::bail!("{ONE_BALANCER}");
        }
        Ok(())
    }

    fn common(&self) -> &pir_host::settings::Common {
        &self.common
    }
}

/// `pir oram balancer`.
#[derive(Debug, Args)]
pub struct OramBalancerArgs {
    /// The balancer state to create (its key goes to BSTATE.key; the nodes' owner key
    /// BSTATE.client.key must exist: `pir oram owner --state BSTATE`).
    #[arg(long, value_name = "BSTATE")]
    pub state: PathBuf,
    /// Logical size, e.g. 64MiB or 1GiB.
    #[arg(long, value_name = "SIZE")]
    pub size: String,
    /// Block size (the nodes' block size).
    #[arg(long, value_name = "SIZE", default_value = "4KiB")]
    pub block: String,
    /// A node: https://HOST:PORT=NODE.pub (its public key file). Repeat for every node.
    #[arg(long, value_name = "NODE", required = true)]
    pub node: Vec<String>,
}

/// `pir oram node-size`.
#[derive(Debug, Args)]
pub struct OramNodeSizeArgs {
    /// The balancer's logical size, e.g. 64MiB or 1GiB.
    #[arg(long, value_name = "SIZE")]
    pub size: String,
    /// Block size.
    #[arg(long, value_name = "SIZE", default_value = "4KiB")]
    pub block: String,
    /// Nodes.
    #[arg(long, value_name = "N")]
    pub nodes: usize,
}
