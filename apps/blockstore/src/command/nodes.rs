//! `pir oram node` (a disk served to a balancer, a server kind on `pir-host`), `pir oram
//! balancer` (creates the balancer over running nodes), `pir oram node-size`, and the opening
//! of a balancer for `pir oram nbd --balancer`.

use std::path::Path;

use anyhow::{bail, Context, Result};
use pir_host::log::human;

use super::node_args::{OramBalancerArgs, OramNodeArgs, OramNodeSettings, OramNodeSizeArgs};
use super::{blocking, open, OramNbdArgs};
use crate::balanced::{parse_node, Balanced};
use crate::node::NodeService;
use crate::size::parse_size;

/// The owner key a node serves by default: `STATE.owner.pub`.
fn default_owner(state: &Path) -> std::path::PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".owner.pub");
    std::path::PathBuf::from(name)
}

pub(super) async fn serve_node(flags: &OramNodeArgs) -> Result<()> {
    let Some(settings) = flags.config.load::<OramNodeSettings, _>(flags)? else {
        return Ok(());
    };
    let owner_file = settings
        .owner
        .clone()
        .unwrap_or_else(|| default_owner(&settings.state));
    let owner = pir_keys::PublicKey::load(&owner_file).with_context(|| {
        format!(
            "cannot read the balancer's key {} (pass --owner BSTATE.client.pub, made by `pir \
             oram owner --state BSTATE` beside the balancer's state)",
            owner_file.display()
        )
    })?;
    let mut host = pir_host::Host::new(&settings.common)
        .with_context(|| format!("cannot read the node key {}", settings.common.key.display()))?;
    host.owner = Some(owner);
    super::one_client(&mut host.options);
    let state = settings.state.clone();
    let disk = blocking(move |rt| open(&state, rt)).await?;
    let service = NodeService::new(&settings.state, disk).with_context(|| {
        format!(
            "cannot read or make the node's identity {}",
            crate::node::id_path(&settings.state).display()
        )
    })?;
    let service = std::sync::Arc::new(service);
    let shown = settings.state.display().to_string();
    pir_host::serve_static(host, service.clone(), "the node", |running, key| {
        vec![format!(
            "serving the ORAM node {shown} at https://{} with key {} to its balancer {} only \
             (Ctrl-C or SIGTERM flushes and stops)",
            running.addr,
            key.public().fingerprint(),
            owner.fingerprint()
        )]
    })
    .await?;
    tokio::task::spawn_blocking(move || service.flush())
        .await
        .context("the node's flush panicked")??;
    println!("flushed and stopped");
    Ok(())
}

pub(super) fn balancer(args: &OramBalancerArgs, runtime: &tokio::runtime::Handle) -> Result<()> {
    let size = parse_size(&args.size).map_err(anyhow::Error::msg)?;
    let block = parse_size(&args.block).map_err(anyhow::Error::msg)?;
    let block = u32::try_from(block).context("the block size is too large")?;
    let nodes = args
        .node
        .iter()
        .map(|n| parse_node(n))
        .collect::<Result<Vec<_>, _>>()?;
    let smallest = Balanced::init(&args.state, size, block, &nodes, runtime)?;
    println!(
        "created a balancer of {} over {} node(s) (each holds {} blocks of {block} bytes)",
        human(size),
        nodes.len(),
        smallest
    );
    println!(
        "state {} and key {} (keep both on a disk you trust); export it with `pir oram nbd \
         --balancer {}`",
        args.state.display(),
        crate::key_path(&args.state).display(),
        args.state.display()
    );
    Ok(())
}

pub(super) fn node_size(args: &OramNodeSizeArgs) -> Result<()> {
    let size = parse_size(&args.size).map_err(anyhow::Error::msg)?;
    let block = parse_size(&args.block).map_err(anyhow::Error::msg)?;
    if block == 0 || !size.is_multiple_of(block) || args.nodes == 0 {
        bail!("--size must be a multiple of --block, and --nodes at least 1");
    }
    let blocks = pir_oram::balance::node_blocks_needed(size / block, args.nodes);
    println!("{}", blocks * block);
    Ok(())
}

/// The state `pir oram nbd` serves: --state or --balancer (clap requires one).
pub(super) fn nbd_state(args: &OramNbdArgs) -> &Path {
    args.state
        .as_deref()
        .or(args.balancer.as_deref())
        .unwrap_or(Path::new("state"))
}

/// Opens the balancer of `pir oram nbd --balancer BSTATE [--node ...]`.
pub(super) async fn open_balanced(args: &OramNbdArgs) -> Result<Balanced> {
    let state = nbd_state(args).to_path_buf();
    let nodes = if args.node.is_empty() {
        None
    } else {
        Some(
            args.node
                .iter()
                .map(|n| parse_node(n))
                .collect::<Result<Vec<_>, _>>()?,
        )
    };
    blocking(move |rt| {
        Balanced::open(&state, nodes, rt)
            .with_context(|| format!("cannot open the balancer {}", state.display()))
    })
    .await
}
