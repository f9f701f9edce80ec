//! `pir oram ...`: create, inspect, fill and read an oblivious store, and export it over NBD.
//!
//! The NBD export itself is `pir_blockstore::nbd::export`; this module opens the store, binds
//! the socket and maps signals and errors.

use std::path::Path;

use anyhow::{bail, Context, Result};
use pir_blockstore::nbd::export::{self, ExportOptions, ExportStats};
use pir_blockstore::nbd::listen::{self, Listener};
use pir_blockstore::nbd::psk::{self, PskKeys};
use pir_blockstore::size::parse_size;
use pir_blockstore::Disk;

use pir_blockstore::remote::StoreService;
use pir_blockstore::StoreSpec;

use crate::cli::{
    OramCommand, OramGetArgs, OramInitArgs, OramNbdArgs, OramPutArgs, OramStoreArgs,
    OramStoreSettings,
};

/// Runs one `pir oram` command.
pub async fn run(command: OramCommand) -> Result<()> {
    match command {
        OramCommand::Init(args) => blocking(move |rt| init(&args, rt)).await,
        OramCommand::Info(args) => blocking(move |rt| info(&args.state, rt)).await,
        OramCommand::Owner(args) => owner(&args.state),
        OramCommand::Put(args) => blocking(move |rt| put(&args, rt)).await,
        OramCommand::Get(args) => blocking(move |rt| get(&args, rt)).await,
        OramCommand::Nbd(args) => serve_nbd(&args).await,
        OramCommand::Store(args) => serve_store(&args).await,
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
        crate::human(g.logical_bytes()),
        g.blocks,
        g.block_size,
        g.partitions,
        g.levels(),
        g.stores
    );
    println!(
        "state {} and key {} (keep both on a disk you trust; without the key the data is lost)",
        args.state.display(),
        pir_blockstore::key_path(&args.state).display()
    );
    Ok(())
}

fn owner(state: &Path) -> Result<()> {
    let (public, made) = pir_blockstore::disk::make_client_key(state)?;
    let secret = pir_blockstore::disk::client_key_path(state);
    let public_file = pir_blockstore::disk::client_pub_path(state);
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
        crate::human(g.logical_bytes()),
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
        crate::human(stored),
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

async fn serve_store(flags: &OramStoreArgs) -> Result<()> {
    let Some(settings) = pir_host::settings::load::<OramStoreSettings, _>(
        flags.config.as_deref(),
        flags,
        flags.print_config,
    )?
    else {
        return Ok(());
    };
    let Some(owner_file) = &settings.owner else {
        bail!(
            "pir oram store needs --owner CLIENT.pub: the store serves only the client holding \
             that key (`pir oram owner --state STATE` makes it beside the client's state, as \
             STATE.client.pub)"
        );
    };
    let owner = pir_keys::PublicKey::load(owner_file)
        .with_context(|| format!("cannot read the owner key {}", owner_file.display()))?;
    let mut host = pir_host::Host::new(&settings.common).with_context(|| {
        format!(
            "cannot read the store key {}",
            settings.common.key.display()
        )
    })?;
    host.owner = Some(owner);
    // Slot I/O is sequential per client: one worker, no batching window.
    host.options.batch_window = std::time::Duration::ZERO;
    host.options.workers = 1;
    let service = std::sync::Arc::new(
        StoreService::open(&settings.dir)
            .with_context(|| format!("cannot open the store {}", settings.dir.display()))?,
    );
    let dir = settings.dir.display().to_string();
    pir_host::serve_static(host, service, "the store", |running, key| {
        vec![format!(
            "serving an oblivious slot store from {dir} at https://{} with key {} to its owner {} \
             only (Ctrl-C or SIGTERM stops)",
            running.addr,
            key.public().fingerprint(),
            owner.fingerprint()
        )]
    })
    .await
}

/// The listener and TLS of `pir oram nbd`, checked against the address policy.
async fn nbd_listener(args: &OramNbdArgs) -> Result<(Listener, ExportOptions)> {
    let mut options = ExportOptions {
        max_connections: args.max_connections,
        idle_timeout: (args.idle_timeout_seconds > 0)
            .then(|| std::time::Duration::from_secs(args.idle_timeout_seconds)),
        grace: std::time::Duration::from_secs(args.grace_seconds),
        ..ExportOptions::default()
    };
    if let Some(file) = &args.tls_psk {
        let keys = PskKeys::load(file)?;
        options.tls = Some(psk::server_context(std::sync::Arc::new(keys))?);
    }
    let listener = match args.listen {
        Some(addr) => {
            let policy = listen::Policy {
                allow_remote: args.allow_remote,
                tls: options.tls.is_some(),
            };
            if let Some(warning) = listen::check_tcp(addr, policy).map_err(anyhow::Error::msg)? {
                eprintln!("{warning}");
            } else if options.tls.is_none() {
                eprintln!(
                    "note: every local user can connect to {addr}; the default Unix socket (or --tls-psk) admits only you"
                );
            }
            Listener::tcp(addr)
                .await
                .with_context(|| format!("cannot listen on {addr}"))?
        }
        None => {
            let path = args
                .socket
                .clone()
                .unwrap_or_else(|| socket_path(&args.state.state));
            Listener::unix(&path).with_context(|| format!("cannot listen on {}", path.display()))?
        }
    };
    Ok((listener, options))
}

/// The default socket beside the state: `STATE.sock`, absolute so the printed URI works
/// from any directory.
fn socket_path(state: &Path) -> std::path::PathBuf {
    let mut name = state.as_os_str().to_owned();
    name.push(".sock");
    std::path::absolute(&name).unwrap_or_else(|_| name.into())
}

async fn serve_nbd(args: &OramNbdArgs) -> Result<()> {
    let (listener, options) = nbd_listener(args).await?;
    let state = args.state.state.clone();
    let disk = blocking(move |rt| open(&state, rt)).await?;
    let uri = listener.uri(options.tls.is_some());
    println!(
        "serving an oblivious store of {} bytes at {uri} (Ctrl-C or SIGTERM flushes and stops)",
        disk.size()
    );
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    let shutdown = async move {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => {}
            _ = terminate.recv() => {}
        }
    };
    let stats = std::sync::Arc::new(ExportStats::default());
    match export::serve(disk, listener, options, stats, shutdown).await {
        Ok(()) => {
            println!("flushed and closed cleanly");
            Ok(())
        }
        Err(e) => Err(anyhow::Error::new(e).context(
            "the store was NOT closed cleanly: writes after the last acknowledged flush may be lost; the next open recovers the last flushed state",
        )),
    }
}

/// The benchmark's stores: directories, or `pir oram store` servers on 127.0.0.1 in this
/// process (one per store, owned by a key saved where `pir oram` looks for it).
async fn bench_stores(
    args: &crate::cli::BenchArgs,
    scratch: &Path,
) -> Result<(Vec<pir_server::RunningServer>, Vec<StoreSpec>)> {
    let mut servers = Vec::new();
    let mut stores = Vec::new();
    let owner = pir_keys::SecretKey::generate()?;
    if args.oram_remote {
        owner.save(&pir_blockstore::disk::client_key_path(
            &scratch.join("state"),
        ))?;
    }
    for i in 0..args.oram_stores.max(1) {
        let dir = scratch.join(format!("store{i}"));
        if !args.oram_remote {
            stores.push(StoreSpec::Dir(dir));
            continue;
        }
        let key = pir_keys::SecretKey::generate()?;
        let service = std::sync::Arc::new(StoreService::open(&dir)?);
        let mut options = pir_server::ServerOptions::new("127.0.0.1:0".parse()?);
        options.batch_window = std::time::Duration::ZERO;
        options.workers = 1;
        let tls = pir_keys::tls::server_config_for_client(&key, owner.public())?;
        let running = pir_server::start(service, tls, options).await?;
        stores.push(StoreSpec::Remote {
            url: format!("https://{}", running.addr),
            key: key.public(),
        });
        servers.push(running);
    }
    Ok((servers, stores))
}

/// `pir bench --oram`.
pub async fn bench(args: crate::cli::BenchArgs) -> Result<()> {
    use pir_blockstore::bench::{run, OramBenchOptions};
    let size = parse_size(&args.oram_size).map_err(anyhow::Error::msg)?;
    let scratch = match &args.scratch {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .context("cannot make a scratch directory")?;
    let (servers, stores) = bench_stores(&args, scratch.path()).await?;
    let kind = if args.oram_remote {
        "HTTPS store server(s) on 127.0.0.1"
    } else {
        "file store(s)"
    };
    let options = OramBenchOptions {
        size,
        block: 4096,
        stores,
        runtime: Some(tokio::runtime::Handle::current()),
        ops: args.ops,
        runs: args.runs.max(1),
        in_flight: pir_blockstore::pir_oram::MAX_BATCH,
        dir: scratch.path().to_path_buf(),
    };
    println!("{}", pir_bench::machine_line());
    println!(
        "oblivious store: {} logical, 4 KiB blocks, {} {kind} in {}; filling every block once...",
        crate::human(size),
        options.stores.len(),
        scratch.path().display()
    );
    let progress = bar(size);
    let block = u64::from(options.block);
    let bar = progress.clone();
    let report = tokio::task::spawn_blocking(move || {
        let report = run(&options, &mut |done, _| bar.set_position(done * block));
        (options, report)
    })
    .await
    .context("the benchmark panicked")?;
    let (options, report) = (report.0, report.1?);
    for server in servers {
        server.shutdown().await;
    }
    progress.finish_and_clear();
    print_report(&options, &report);
    Ok(())
}

fn print_report(
    options: &pir_blockstore::bench::OramBenchOptions,
    report: &pir_blockstore::bench::OramReport,
) {
    let (size, block) = (options.size, u64::from(options.block));
    let slot =
        u64::from(options.block) + u64::from(pir_blockstore::pir_oram::params::SEAL_OVERHEAD);
    let ops = report.ops_per_second();
    let mbps = ops * f64::from(options.block) / 1e6;
    let moved = report.bytes_per_op(slot);
    println!(
        "fill: {} blocks in {:.1} s ({:.0} writes/s)",
        size / block,
        report.fill.as_secs_f64(),
        (size / block) as f64 / report.fill.as_secs_f64()
    );
    println!(
        "random 4 KiB, half reads, 32 in flight, median of {} rounds of {} ops:",
        report.rounds.len(),
        report.ops
    );
    println!("  {ops:.0} ops/s = {mbps:.1} MB/s logical");
    println!(
        "  latency p50 {:.2} ms, p99 {:.2} ms",
        report.latency(0.5).as_secs_f64() * 1e3,
        report.latency(0.99).as_secs_f64() * 1e3
    );
    println!(
        "  storage per op: {:.0} KB moved ({:.1}x the block), {:.2} reads (seeks) + {:.2} level writes",
        moved / 1e3,
        moved / f64::from(options.block),
        report.seeks_per_op(),
        report.writes_per_op()
    );
    println!(
        "  storage bandwidth {:.2} GB/s = {:.2} x a plain sequential read of the same bytes ({:.2} GB/s, over the bytes touched)",
        ops * moved / 1e9,
        ops * moved / report.plain_read_bps,
        report.plain_read_bps / 1e9
    );
    println!(
        "  vs a plain (non-oblivious) disk: {:.0} random 4 KiB reads/s, ORAM = {:.3} x that",
        report.plain_random_ops,
        ops / report.plain_random_ops
    );
    println!(
        "  client memory: state {} = {} per GiB stored; eviction cache p50 {} / p99 {} / max {} blocks",
        crate::human(report.state_bytes as u64),
        crate::human((report.state_bytes as f64 / (size as f64 / (1u64 << 30) as f64)) as u64),
        report.cache_percentile(0.5),
        report.cache_percentile(0.99),
        report.peak_cache
    );
    let histogram: Vec<String> = report
        .cache_histogram()
        .iter()
        .map(|(bound, n)| format!("<{bound}: {n}"))
        .collect();
    println!(
        "  eviction cache histogram (batches): {}",
        histogram.join(", ")
    );
}
