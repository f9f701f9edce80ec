//! `pir oram ...`: create, inspect, fill and read an oblivious store, serve a store directory
//! to its owner, and export the store over NBD; and the driver of `pir bench --oram`.
//!
//! The flags ([`args`]) and what each command does with them. The NBD export itself is
//! [`crate::nbd::export`]; this module opens the store, binds the socket, maps signals and
//! errors, and prints what the command reports. It is not the store: [`crate::Disk`] is.

mod args;
pub mod bench;
mod node_args;
mod nodes;
pub mod nodes_bench;
mod serve;

use std::path::Path;

use anyhow::{bail, Context, Result};
use pir_host::log::human;

use crate::size::parse_size;
use crate::{Disk, StoreSpec};

pub use args::{
    OramCommand, OramGetArgs, OramInitArgs, OramNbdArgs, OramPutArgs, OramStateArgs, OramStoreArgs,
    OramStoreSettings,
};
pub use node_args::{OramBalancerArgs, OramNodeArgs, OramNodeSettings, OramNodeSizeArgs};

/// Runs one `pir oram` command.
pub async fn run(command: OramCommand) -> Result<()> {
    match command {
        OramCommand::Init(args) => blocking(move |rt| init(&args, rt)).await,
        OramCommand::Info(args) => blocking(move |rt| info(&args.state, rt)).await,
        OramCommand::Owner(args) => owner(&args.state),
        OramCommand::Put(args) => blocking(move |rt| put(&args, rt)).await,
        OramCommand::Get(args) => blocking(move |rt| get(&args, rt)).await,
        OramCommand::Nbd(args) => serve::serve_nbd(&args).await,
        OramCommand::Store(args) => serve::serve_store(&args).await,
        OramCommand::Node(args) => nodes::serve_node(&args).await,
        OramCommand::Balancer(args) => blocking(move |rt| nodes::balancer(&args, rt)).await,
        OramCommand::NodeSize(args) => nodes::node_size(&args),
    }
}

/// Runs disk work on a blocking thread, where remote stores may block on the runtime.
async fn blocking<T: Send + 'static>(
    work: impl FnOnce(&tokio::runtime::Handle) -> Result<T> + Send + 'static,
) -> Result<T> {
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || work(&runtime))
        .await
        .context("the disk worker panicked")?
}

fn open(state: &Path, runtime: &tokio::runtime::Handle) -> Result<Disk> {
    let disk = Disk::open(state, Some(runtime))
        .with_context(|| format!("cannot open the store {}", state.display()))?;
    if disk.recovered() {
        eprintln!(
            "{}: the last session did not close cleanly; every partition was rebuilt, and the data of the last flush is intact",
            state.display()
        );
    }
    Ok(disk)
}

fn init(args: &OramInitArgs, runtime: &tokio::runtime::Handle) -> Result<()> {
    let size = parse_size(&args.size).map_err(anyhow::Error::msg)?;
    let block = parse_size(&args.block).map_err(anyhow::Error::msg)?;
    let block = u32::try_from(block).context("the block size is too large")?;
    let stores: Vec<StoreSpec> = args
        .store
        .iter()
        .map(|s| StoreSpec::parse(s))
        .collect::<Result<_, _>>()?;
    let g = Disk::init(&args.state, size, block, &stores, Some(runtime))?;
    println!(
        "created an oblivious store of {} ({} blocks of {} bytes, {} partitions of {} levels) on {} store(s)",
        human(g.logical_bytes()),
        g.blocks,
        g.block_size,
        g.partitions,
        g.levels(),
        g.stores
    );
    println!(
        "state {} and key {} (keep both on a disk you trust; without the key the data is lost)",
        args.state.display(),
        crate::key_path(&args.state).display()
    );
    Ok(())
}

fn owner(state: &Path) -> Result<()> {
    let (public, made) = crate::disk::make_client_key(state)?;
    let secret = crate::disk::client_key_path(state);
    let public_file = crate::disk::client_pub_path(state);
    let what = if made { "made" } else { "already had" };
    println!(
        "{what} the owner key {} (secret, 0600) and {} (fingerprint {})",
        secret.display(),
        public_file.display(),
        public.fingerprint()
    );
    println!(
        "start every remote store of this state with: pir oram store ... --owner {}",
        public_file.display()
    );
    Ok(())
}

fn info(state: &Path, runtime: &tokio::runtime::Handle) -> Result<()> {
    let disk = open(state, runtime)?;
    let g = disk.geometry().clone();
    let stored: u64 = (0..g.stores).map(|s| g.store_bytes(s)).sum();
    println!(
        "size:        {} ({} blocks of {} bytes)",
        human(g.logical_bytes()),
        g.blocks,
        g.block_size
    );
    println!(
        "partitions:  {} of {} levels (top level: {} slots)",
        g.partitions,
        g.levels(),
        g.slots(g.levels() - 1)
    );
    println!(
        "stores:      {} holding {} ({:.1}x the size)",
        g.stores,
        human(stored),
        stored as f64 / g.logical_bytes() as f64
    );
    println!("cache:       {} blocks", disk.oram().cache_len());
    println!("session:     {}", disk.oram().session());
    disk.close()?;
    Ok(())
}

fn bar(total: u64) -> indicatif::ProgressBar {
    let bar = indicatif::ProgressBar::new(total);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} {eta} left",
        )
        .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
    );
    bar
}

/// Bytes moved per step of put/get: 256 blocks, so progress moves and batches stay full.
const CHUNK_BLOCKS: u64 = 256;

fn put(args: &OramPutArgs, runtime: &tokio::runtime::Handle) -> Result<()> {
    let data = std::fs::read(&args.file)
        .with_context(|| format!("cannot read {}", args.file.display()))?;
    let mut disk = open(&args.state.state, runtime)?;
    let end = args
        .at
        .checked_add(data.len() as u64)
        .context("offset too large")?;
    if end > disk.size() {
        bail!(
            "{} is {} bytes; at offset {} it does not fit in the store ({} bytes)",
            args.file.display(),
            data.len(),
            args.at,
            disk.size()
        );
    }
    let chunk = (CHUNK_BLOCKS * u64::from(disk.geometry().block_size)) as usize;
    let progress = bar(data.len() as u64);
    for (i, piece) in data.chunks(chunk).enumerate() {
        disk.write_at(args.at + (i * chunk) as u64, piece)?;
        progress.inc(piece.len() as u64);
    }
    progress.finish_and_clear();
    disk.close()?;
    println!("wrote {} bytes at offset {} (durable)", data.len(), args.at);
    Ok(())
}

fn get(args: &OramGetArgs, runtime: &tokio::runtime::Handle) -> Result<()> {
    let mut disk = open(&args.state.state, runtime)?;
    let size = disk.size();
    if args.at > size {
        bail!(
            "offset {} is past the end of the store ({size} bytes)",
            args.at
        );
    }
    let length = args.length.unwrap_or(size - args.at);
    let chunk = CHUNK_BLOCKS * u64::from(disk.geometry().block_size);
    let progress = bar(length);
    let mut out = Vec::with_capacity(length as usize);
    let mut at = args.at;
    while at < args.at + length {
        let take = chunk.min(args.at + length - at);
        out.extend(disk.read_at(at, take)?);
        progress.inc(take);
        at += take;
    }
    progress.finish_and_clear();
    disk.close()?;
    pir_fs::write_atomic_bytes(&args.file, &out)
        .with_context(|| format!("cannot write {}", args.file.display()))?;
    println!(
        "read {length} bytes at offset {} into {}",
        args.at,
        args.file.display()
    );
    Ok(())
}

/// A store (or node) serves one client whose slot I/O is sequential: one worker, no batching
/// window. (`--workers` and `--batch-window-ms` are refused rather than overridden: see
/// [`OramStoreSettings`].)
fn one_client(options: &mut pir_server::ServerOptions) {
    options.batch_window = std::time::Duration::ZERO;
    options.workers = 1;
}
