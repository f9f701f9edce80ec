//! `pir oram ...`: create, inspect, fill and read an oblivious store, and export it over NBD.
//!
//! The NBD export: one worker thread owns the [`Disk`] (the ORAM is a sequential state
//! machine); connections are tokio tasks that parse requests with `pir_blockstore::nbd`, send
//! jobs to the worker and write replies as they come back (NBD allows any order). The worker
//! takes every job queued so far (up to a flush), runs them as ORAM batches of up to 32
//! requests, and answers each job only after all of its block reads completed.

use std::collections::HashMap;
use std::path::Path;
use std::sync::mpsc;

use anyhow::{bail, Context, Result};
use pir_blockstore::nbd::{self, command, errno, Negotiation, Next, Replies, RequestHeader};
use pir_blockstore::size::parse_size;
use pir_blockstore::{Disk, DiskError};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::oneshot;

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

/// A reply to a job: bytes read (possibly none), or an NBD error number and message.
type JobResult = std::result::Result<Vec<u8>, (u32, String)>;

enum Job {
    Read {
        offset: u64,
        length: u32,
        reply: oneshot::Sender<JobResult>,
    },
    Write {
        offset: u64,
        data: Vec<u8>,
        fua: bool,
        reply: oneshot::Sender<JobResult>,
    },
    Zero {
        offset: u64,
        length: u64,
        fua: bool,
        reply: oneshot::Sender<JobResult>,
    },
    Flush {
        reply: oneshot::Sender<JobResult>,
    },
    Stop,
}

fn error_of(e: &DiskError) -> (u32, String) {
    match e {
        DiskError::Usage(m) => (errno::EINVAL, m.clone()),
        other => (errno::EIO, other.to_string()),
    }
}

/// The worker: owns the disk, runs queued jobs as ORAM batches.
fn worker(mut disk: Disk, jobs: mpsc::Receiver<Job>) -> Result<()> {
    let mut broken: Option<String> = None;
    loop {
        let Ok(first) = jobs.recv() else { break };
        let mut batch = vec![first];
        while !matches!(batch.last(), Some(Job::Flush { .. } | Job::Stop)) {
            match jobs.try_recv() {
                Ok(job) => batch.push(job),
                Err(_) => break,
            }
        }
        let stop = matches!(batch.last(), Some(Job::Stop));
        if let Some(why) = &broken {
            for job in batch {
                reply_to(job, Err((errno::EIO, why.clone())));
            }
            if stop {
                break;
            }
            continue;
        }
        // Queue every job's block requests, then run the ORAM until all are answered.
        enum Ticket {
            Read(Vec<(u64, u32, u32)>),
            Done,
            Failed((u32, String)),
        }
        let mut answers = HashMap::new();
        let mut tickets = Vec::with_capacity(batch.len());
        for job in &batch {
            if let Job::Zero { offset, length, .. } = job {
                tickets.push(
                    match write_zeroes(&mut disk, *offset, *length, &mut answers) {
                        Ok(()) => Ticket::Done,
                        Err(DiskError::Usage(m)) => Ticket::Failed((errno::ENOSPC, m)),
                        Err(e) => {
                            broken = Some(e.to_string());
                            Ticket::Failed(error_of(&e))
                        }
                    },
                );
                continue;
            }
            tickets.push(match job {
                Job::Read { offset, length, .. } => {
                    match disk.submit_read(*offset, u64::from(*length)) {
                        Ok(ids) => Ticket::Read(ids),
                        Err(e) => Ticket::Failed(error_of(&e)),
                    }
                }
                Job::Write { offset, data, .. } => match disk.submit_write(*offset, data) {
                    Ok(_) => Ticket::Done,
                    Err(DiskError::Usage(m)) => Ticket::Failed((errno::ENOSPC, m)),
                    Err(e) => Ticket::Failed(error_of(&e)),
                },
                Job::Flush { .. } | Job::Stop | Job::Zero { .. } => Ticket::Done,
            });
        }
        while broken.is_none() && disk.pending() > 0 {
            match disk.step() {
                Ok(done) => answers.extend(done.into_iter().map(|a| (a.id, a.data))),
                Err(e) => {
                    eprintln!("pir oram nbd: {e}; refusing further requests");
                    broken = Some(e.to_string());
                    break;
                }
            }
        }
        let durable = batch.iter().any(|j| {
            matches!(
                j,
                Job::Flush { .. }
                    | Job::Write { fua: true, .. }
                    | Job::Zero { fua: true, .. }
                    | Job::Stop
            )
        });
        let mut flush_error = None;
        if broken.is_none() && durable {
            if let Err(e) = disk.flush() {
                eprintln!("pir oram nbd: flush failed: {e}; refusing further requests");
                broken = Some(e.to_string());
                flush_error = Some(e.to_string());
            }
        }
        for (job, ticket) in batch.into_iter().zip(tickets) {
            let result = match (&broken, ticket) {
                (_, Ticket::Failed(e)) => Err(e),
                (Some(why), _) => Err((errno::EIO, why.clone())),
                (None, Ticket::Read(ids)) => {
                    let mut out = Vec::new();
                    let mut missing = false;
                    for (id, within, take) in ids {
                        match answers.get(&id) {
                            Some(block) => out.extend_from_slice(
                                &block[within as usize..(within + take) as usize],
                            ),
                            None => missing = true,
                        }
                    }
                    if missing {
                        Err((
                            errno::EIO,
                            "internal: a block read was not answered".to_string(),
                        ))
                    } else {
                        Ok(out)
                    }
                }
                (None, Ticket::Done) => Ok(Vec::new()),
            };
            let result = match (&flush_error, result) {
                (Some(e), Ok(_)) => Err((errno::EIO, e.clone())),
                (_, r) => r,
            };
            reply_to(job, result);
        }
        if stop {
            break;
        }
    }
    if broken.is_none() {
        disk.close().context("closing the store")?;
    }
    Ok(())
}

/// Writes zeroes over a range of any length, 1 MiB at a time (`NBD_CMD_WRITE_ZEROES` may
/// cover the whole disk), answering other queued requests on the way.
fn write_zeroes(
    disk: &mut Disk,
    offset: u64,
    length: u64,
    answers: &mut HashMap<u64, Vec<u8>>,
) -> Result<(), DiskError> {
    const STEP: u64 = 1 << 20;
    if offset
        .checked_add(length)
        .is_none_or(|end| end > disk.size())
    {
        return Err(DiskError::Usage(format!(
            "zeroes at {offset}+{length} are past the end of the disk"
        )));
    }
    let zeros = vec![0u8; STEP as usize];
    let mut at = offset;
    while at < offset + length {
        let take = STEP.min(offset + length - at);
        disk.submit_write(at, &zeros[..take as usize])?;
        while disk.pending() > 0 {
            answers.extend(disk.step()?.into_iter().map(|a| (a.id, a.data)));
        }
        at += take;
    }
    Ok(())
}

async fn serve_store(flags: &OramStoreArgs) -> Result<()> {
    let paths = OramStoreSettings::PATHS;
    let args: OramStoreSettings = crate::server_config::merge(
        OramStoreSettings::defaults(),
        flags.config.as_deref(),
        flags,
        &paths,
    )?;
    if flags.print_config {
        print!("{}", crate::server_config::print(&args, &paths)?);
        return Ok(());
    }
    let key = pir_keys::SecretKey::load(&args.key)
        .with_context(|| format!("cannot read the store key {}", args.key.display()))?;
    let tls = pir_keys::tls::server_config(&key)?;
    let service = std::sync::Arc::new(
        StoreService::open(&args.dir)
            .with_context(|| format!("cannot open the store {}", args.dir.display()))?,
    );
    let mut options = pir_server::ServerOptions::new(args.listen);
    // Slot I/O is sequential per client; no batching window.
    options.batch_window = std::time::Duration::ZERO;
    options.workers = 1;
    options.grace = std::time::Duration::from_secs(args.grace_seconds);
    options.admin_listen = args.admin_listen;
    crate::server_config::apply_limits(
        &mut options,
        args.max_connections,
        args.header_timeout_seconds,
        args.body_timeout_seconds,
    )?;
    let running = pir_server::start(service, tls, options)
        .await
        .context("starting the store")?;
    println!(
        "serving an oblivious slot store from {} at https://{} with key {} (Ctrl-C or SIGTERM stops)",
        args.dir.display(),
        running.addr,
        key.public().fingerprint()
    );
    running.run_until_signal().await;
    Ok(())
}

fn reply_to(job: Job, result: JobResult) {
    let reply = match job {
        Job::Read { reply, .. }
        | Job::Write { reply, .. }
        | Job::Zero { reply, .. }
        | Job::Flush { reply } => reply,
        Job::Stop => return,
    };
    let _ = reply.send(result);
}

async fn serve_nbd(args: &OramNbdArgs) -> Result<()> {
    let state = args.state.state.clone();
    let disk = blocking(move |rt| open(&state, rt)).await?;
    let (size, block_size) = (disk.size(), disk.geometry().block_size);
    let listener = TcpListener::bind(args.listen)
        .await
        .with_context(|| format!("cannot listen on {}", args.listen))?;
    let addr = listener.local_addr()?;
    let (jobs, inbox) = mpsc::channel::<Job>();
    let worker = std::thread::spawn(move || worker(disk, inbox));
    println!("serving an oblivious store of {size} bytes at nbd://{addr} (Ctrl-C or SIGTERM flushes and stops)");
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("cannot watch SIGTERM")?;
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let jobs = jobs.clone();
                tokio::spawn(async move {
                    if let Err(e) = connection(stream, jobs, size, block_size).await {
                        tracing::info!("NBD connection closed: {e}");
                    }
                });
            }
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
        }
    }
    let _ = jobs.send(Job::Stop);
    drop(jobs);
    match worker.join() {
        Ok(result) => result?,
        Err(_) => bail!("the ORAM worker panicked"),
    }
    println!("flushed and closed cleanly");
    Ok(())
}

async fn connection(
    mut stream: TcpStream,
    jobs: mpsc::Sender<Job>,
    size: u64,
    block_size: u32,
) -> Result<()> {
    stream.set_nodelay(true)?;
    stream.write_all(&nbd::greeting()).await?;
    let mut flags = [0u8; 4];
    stream.read_exact(&mut flags).await?;
    let mut negotiation = Negotiation::new(flags, size, block_size)?;
    loop {
        let mut header = [0u8; 16];
        stream.read_exact(&mut header).await?;
        let (option, len) = Negotiation::header(header)?;
        let mut data = vec![0u8; len as usize];
        stream.read_exact(&mut data).await?;
        match negotiation.option(option, &data) {
            Next::Reply(bytes) => stream.write_all(&bytes).await?,
            Next::Transmit(bytes) => {
                stream.write_all(&bytes).await?;
                break;
            }
            Next::Close(bytes) => {
                stream.write_all(&bytes).await?;
                return Ok(());
            }
        }
    }
    let replies = Replies {
        structured: negotiation.structured,
    };
    let (mut reader, mut writer) = stream.into_split();
    let (out, mut outbox) = tokio::sync::mpsc::unbounded_channel::<Vec<u8>>();
    let writer_task = tokio::spawn(async move {
        while let Some(bytes) = outbox.recv().await {
            if writer.write_all(&bytes).await.is_err() {
                break;
            }
        }
    });
    loop {
        let mut header = [0u8; 28];
        if reader.read_exact(&mut header).await.is_err() {
            break;
        }
        let request = RequestHeader::parse(header)?;
        let mut payload = vec![0u8; request.payload().min(nbd::MAX_PAYLOAD) as usize];
        if request.payload() > nbd::MAX_PAYLOAD {
            // The connection cannot be resynchronised after an oversized write.
            bail!(
                "a write of {} bytes (the limit is {})",
                request.payload(),
                nbd::MAX_PAYLOAD
            );
        }
        reader.read_exact(&mut payload).await?;
        let fua = request.flags & command::FLAG_FUA != 0;
        let (reply, answer) = oneshot::channel();
        let job = match request.command {
            command::READ if request.length <= nbd::MAX_PAYLOAD => Some(Job::Read {
                offset: request.offset,
                length: request.length,
                reply,
            }),
            command::WRITE => Some(Job::Write {
                offset: request.offset,
                data: payload,
                fua,
                reply,
            }),
            command::WRITE_ZEROES => Some(Job::Zero {
                offset: request.offset,
                length: u64::from(request.length),
                fua,
                reply,
            }),
            command::FLUSH => Some(Job::Flush { reply }),
            // Trim and cache are hints; doing nothing is allowed and reveals nothing.
            command::TRIM | command::CACHE => {
                let _ = out.send(replies.done(request.cookie));
                None
            }
            command::DISC => break,
            command::READ => {
                let _ =
                    out.send(replies.error(request.cookie, errno::EOVERFLOW, "request too large"));
                None
            }
            _ => {
                let _ =
                    out.send(replies.error(request.cookie, errno::EINVAL, "unsupported command"));
                None
            }
        };
        let Some(job) = job else { continue };
        if jobs.send(job).is_err() {
            let _ =
                out.send(replies.error(request.cookie, errno::ESHUTDOWN, "the store is closing"));
            continue;
        }
        let out = out.clone();
        tokio::spawn(async move {
            let bytes = match answer.await {
                Ok(Ok(data)) if request.command == command::READ => {
                    replies.data(request.cookie, request.offset, &data)
                }
                Ok(Ok(_)) => replies.done(request.cookie),
                Ok(Err((code, message))) => replies.error(request.cookie, code, &message),
                Err(_) => replies.error(request.cookie, errno::ESHUTDOWN, "the store is closing"),
            };
            let _ = out.send(bytes);
        });
    }
    drop(out);
    let _ = writer_task.await;
    Ok(())
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
    // Directories, or `pir oram store` servers on 127.0.0.1 in this process, one per store.
    let mut servers = Vec::new();
    let mut stores = Vec::new();
    for i in 0..args.oram_stores.max(1) {
        let dir = scratch.path().join(format!("store{i}"));
        if args.oram_remote {
            let key = pir_keys::SecretKey::generate()?;
            let service = std::sync::Arc::new(StoreService::open(&dir)?);
            let mut options = pir_server::ServerOptions::new("127.0.0.1:0".parse()?);
            options.batch_window = std::time::Duration::ZERO;
            options.workers = 1;
            let running =
                pir_server::start(service, pir_keys::tls::server_config(&key)?, options).await?;
            stores.push(StoreSpec::Remote {
                url: format!("https://{}", running.addr),
                key: key.public(),
            });
            servers.push(running);
        } else {
            stores.push(StoreSpec::Dir(dir));
        }
    }
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
    Ok(())
}
