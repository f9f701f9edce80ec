//! `pir demo`: the whole system on one machine with no set-up.
//!
//! Generates a deterministic sample release, builds and signs it, starts three mirrors on
//! 127.0.0.1 (real HTTPS servers, each with its own key), signs a mirror list, fetches one
//! file privately through the real client, checks it against the original, and shows what
//! each mirror received: seeds and bits that look random and are the same size whichever file
//! was asked for.
//!
//! [`run`] is the command (a temporary directory, standard output); [`run_in`] is the same
//! flow in a given directory, writing to any [`Write`], for tests.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use anyhow::{bail, Context, Result};
use clap::Args;
use pir_client::{HttpsTransport, Tap};
use pir_core::protocol;
use pir_core::wire::{self, MessageKind};
use pir_host::log::human;
use pir_keys::SecretKey;

use super::SchemeArg;
use crate::fetch::{self, FetchedMany, SchemeChoice};
use crate::{release, sample, MirrorEntry, MirrorList};

/// Mirrors the demo starts (and asks, for Chor and RAID-PIR).
pub const MIRRORS: usize = 3;

/// `pir demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// Files in the generated sample release.
    #[arg(long, default_value_t = 300)]
    pub files: usize,
    /// Seed of the sample release (same seed, same bytes).
    #[arg(long, default_value_t = 2026)]
    pub seed: u64,
    /// File to fetch (default: a mid-sized one).
    #[arg(long)]
    pub file: Option<String>,
    /// Scheme to fetch with.
    #[arg(long, value_enum, default_value_t = SchemeArg::RaidPir)]
    pub scheme: SchemeArg,
}

/// What the demo fetched, for checking it.
#[derive(Debug)]
pub struct Outcome {
    /// The file's name in the release.
    pub name: String,
    /// The file as the client wrote it, after every check.
    pub fetched: Vec<u8>,
    /// Where the original file lies (in the directory the demo ran in).
    pub original: PathBuf,
}

/// Runs the demo in a temporary directory, printing to standard output.
pub async fn run(args: DemoArgs) -> Result<()> {
    let work = tempfile::tempdir().context("creating a temporary directory")?;
    run_in(work.path(), &args, &mut std::io::stdout().lock()).await?;
    Ok(())
}

/// Runs the demo in `work` (an empty directory it fills: the sample files under `pool`, the
/// release, the mirror list), writing what it does to `out`.
pub async fn run_in(work: &Path, args: &DemoArgs, out: &mut impl Write) -> Result<Outcome> {
    let started = Instant::now();
    let source = work.join("pool");
    let release_dir = work.join("release");
    let files = write_sample(&source, args, out)?;
    let vendor = build_release(&source, &release_dir, out)?;
    writeln!(
        out,
        "[3/5] starting {MIRRORS} mirrors on 127.0.0.1 (HTTPS, each with its own Ed25519 key)"
    )?;
    let mut servers = Vec::new();
    let mut entries = Vec::new();
    let mut outcome = Ok(());
    for _ in 0..MIRRORS {
        match start_mirror(&release_dir, &vendor).await {
            Ok((running, entry)) => {
                writeln!(
                    out,
                    "      mirror {} at {} key {}",
                    servers.len() + 1,
                    entry.url,
                    entry.key.fingerprint()
                )?;
                servers.push(running);
                entries.push(entry);
            }
            Err(e) => {
                outcome = Err(e);
                break;
            }
        }
    }
    let outcome = match outcome {
        Ok(()) => client(work, &source, &vendor, entries, &files, args, out).await,
        Err(e) => Err(e),
    };
    // The mirrors stop whether the fetch worked or not.
    for server in servers {
        server.shutdown().await;
    }
    let outcome = outcome?;
    writeln!(out, "done in {:.2} s", started.elapsed().as_secs_f64())?;
    Ok(outcome)
}

/// Step 1: the sample files under `source`; returns their names and sizes.
fn write_sample(
    source: &Path,
    args: &DemoArgs,
    out: &mut impl Write,
) -> Result<Vec<(String, u64)>> {
    writeln!(
        out,
        "[1/5] generating a sample release: {} files (seed {})",
        args.files, args.seed
    )?;
    let files = sample::write_sample_release(source, args.files, args.seed)?;
    let total: u64 = files.iter().map(|(_, size)| size).sum();
    writeln!(
        out,
        "      {} files, {:.1} MiB in all, {} to {} bytes each",
        files.len(),
        total as f64 / 1048576.0,
        files.iter().map(|f| f.1).min().unwrap_or(0),
        files.iter().map(|f| f.1).max().unwrap_or(0)
    )?;
    Ok(files)
}

/// Step 2: a vendor key, and the release of `source` built into `release_dir`.
fn build_release(source: &Path, release_dir: &Path, out: &mut impl Write) -> Result<SecretKey> {
    writeln!(
        out,
        "[2/5] vendor: signing keys, packing and signing the release"
    )?;
    let vendor = SecretKey::generate()?;
    let options = release::BuildOptions {
        block_size: None,
        size_classes: false,
        progress: false,
        ..release::BuildOptions::default()
    };
    let report = release::build(source, &vendor, release_dir, &options)?;
    writeln!(
        out,
        "      {} blocks of {} bytes ({}); {}",
        report.block_count,
        report.block_size,
        human(report.database_bytes),
        report.block_size_reason
    )?;
    Ok(vendor)
}

/// Step 3, one mirror: the release (checked against the vendor's signature) behind a real
/// HTTPS server on 127.0.0.1 with a key of its own; returns it and its mirror-list entry.
async fn start_mirror(
    release_dir: &Path,
    vendor: &SecretKey,
) -> Result<(pir_server::RunningServer, MirrorEntry)> {
    let key = SecretKey::generate()?;
    let opened = release::open(release_dir, Some(&vendor.public()), true)?;
    let service = crate::serve::single(opened, &key)?;
    let tls = pir_keys::tls::server_config(&key)?;
    let options = pir_server::ServerOptions::new("127.0.0.1:0".parse()?);
    let running = pir_server::start(Arc::new(service), tls, options).await?;
    let entry = MirrorEntry::new(format!("https://{}", running.addr), key.public());
    Ok((running, entry))
}

/// Steps 4 and 5: the client's side, from the signed mirror list to the fetched file, then
/// what each mirror saw.
async fn client(
    work: &Path,
    source: &Path,
    vendor: &SecretKey,
    entries: Vec<MirrorEntry>,
    files: &[(String, u64)],
    args: &DemoArgs,
    out: &mut impl Write,
) -> Result<Outcome> {
    let list_path = work.join("mirrors.pir");
    // A fresh list, as a vendor signs it: clients refuse an expired one.
    let now = crate::freshness::now_unix();
    let list = MirrorList {
        created_unix: now,
        list_version: now,
        expires_unix: now + 86400,
        mirrors: entries,
    };
    std::fs::write(&list_path, list.encode_signed(vendor))
        .with_context(|| format!("writing {}", list_path.display()))?;
    let name = match &args.file {
        Some(name) => name.clone(),
        None => pick_file(files)?,
    };
    let choice = args.scheme.choice(MIRRORS, 2, MIRRORS);
    writeln!(
        out,
        "[4/5] client: verifying mirror list and manifest, fetching {name:?} privately"
    )?;
    let mirrors = fetch::load_mirror_list(&list_path, &vendor.public())?;
    let pins: Vec<_> = mirrors.iter().map(|m| (m.url.clone(), m.key)).collect();
    // Every request a mirror answered, as it saw it.
    let (transport, recorded) = Tap::recording(Arc::new(HttpsTransport::new(&pins)?));
    let session = fetch::UpdateSession::open_with(
        Arc::new(transport),
        mirrors,
        &vendor.public(),
        None,
        choice.servers(),
    )
    .await?;
    let mut fetched = session.fetch(&[name.as_str()], choice).await?;
    let (_, bytes) = fetched.files.pop().context("no file came back")?;
    let original = source.join(&name);
    let original_bytes =
        std::fs::read(&original).with_context(|| format!("reading the original {name}"))?;
    if bytes != original_bytes {
        bail!("the fetched file differs from the original");
    }
    writeln!(out, "      got {} bytes in {} blocks with {} {} per mirror, {:.1} ms; SHA-256 matches the manifest and the bytes match the original",
        bytes.len(), fetched.blocks, fetched.queries, if fetched.queries == 1 { "query" } else { "queries" },
        fetched.elapsed.as_secs_f64() * 1e3)?;
    let seen = recorded.lock().unwrap_or_else(|p| p.into_inner()).clone();
    let same_count = session
        .release
        .manifest
        .files
        .iter()
        .filter(|f| f.block_count == fetched.blocks)
        .count();
    let all = session.release.manifest.files.len();
    what_mirrors_saw(&fetched, &seen, (same_count, all), choice, out)?;
    Ok(Outcome {
        name,
        fetched: bytes,
        original,
    })
}

/// Step 5: per mirror, its requests and traffic and the random part of its queries; then what
/// the query count reveals (`same_count` of `all` files have as many blocks).
fn what_mirrors_saw(
    fetched: &FetchedMany,
    seen: &[(usize, Vec<u8>)],
    (same_count, all): (usize, usize),
    choice: SchemeChoice,
    out: &mut impl Write,
) -> Result<()> {
    writeln!(out, "[5/5] what each mirror saw:")?;
    // Positions are in this fetch's random order; `seen` is by list index.
    let mut by_mirror: Vec<_> = fetched.mirrors.iter().zip(&fetched.stats).collect();
    by_mirror.sort_by_key(|(mirror, _)| **mirror);
    for (&mirror, stats) in by_mirror {
        let requests: Vec<&[u8]> = seen
            .iter()
            .filter(|(m, _)| *m == mirror)
            .map(|(_, r)| r.as_slice())
            .collect();
        writeln!(
            out,
            "      mirror {}: {} HTTPS request(s), sent {} / received {}",
            mirror + 1,
            stats.requests,
            human(stats.bytes_sent),
            human(stats.bytes_received)
        )?;
        writeln!(out, "        {}", describe_queries(&requests))?;
    }
    writeln!(
        out,
        "      each query is the same size, and its bits look uniformly random, whichever block is asked for;"
    )?;
    writeln!(
        out,
        "      the number of queries reveals only the file's block count ({same_count} of the {all} files have {} blocks)",
        fetched.blocks
    )?;
    writeln!(out, "      privacy: {}", choice.assumption())?;
    Ok(())
}

/// The file whose size is the median of the release (a typical package).
fn pick_file(files: &[(String, u64)]) -> Result<String> {
    let mut sorted: Vec<&(String, u64)> = files.iter().collect();
    sorted.sort_by_key(|(name, size)| (*size, name.clone()));
    sorted
        .get(sorted.len() / 2)
        .map(|(name, _)| name.clone())
        .context("the sample release is empty")
}

/// The random part of the queries in `requests` (request envelopes as a mirror received
/// them), in one line: how many, how long, how the first begins, the share of one bits.
pub fn describe_queries(requests: &[&[u8]]) -> String {
    let bodies: Vec<&[u8]> = requests
        .iter()
        .flat_map(|request| random_parts(request))
        .collect();
    let Some(first) = bodies.first() else {
        return "(no queries)".to_string();
    };
    let bits: String = first.iter().take(6).map(|b| format!("{b:08b} ")).collect();
    let ones: u64 = bodies
        .iter()
        .flat_map(|body| body.iter())
        .map(|b| u64::from(b.count_ones()))
        .sum();
    let total: u64 = bodies.iter().map(|b| b.len() as u64 * 8).sum();
    format!(
        "{} {} of {} random bytes each; first begins {}...; {:.1}% of all their bits are 1",
        bodies.len(),
        if bodies.len() == 1 {
            "query"
        } else {
            "queries"
        },
        first.len(),
        bits.trim_end(),
        100.0 * ones as f64 / total.max(1) as f64
    )
}

/// The queries of one request envelope without their fixed headers (nothing, if it is not a
/// well-formed query batch).
fn random_parts(request: &[u8]) -> Vec<&[u8]> {
    let Ok(envelope) = wire::decode_envelope(request, request.len()) else {
        return Vec::new();
    };
    if envelope.kind != MessageKind::Query {
        return Vec::new();
    }
    let Ok(batch) = protocol::decode_query_batch(envelope.body) else {
        return Vec::new();
    };
    let header = match envelope.scheme {
        pir_core::SchemeId::RaidPir => pir_xor::raid::QUERY_HEADER_LEN - pir_xor::prg::SEED_LEN,
        // The shape header and the DPF key's depth byte (fixed by the block count).
        pir_core::SchemeId::Dpf => 13,
        _ => 12,
    };
    batch
        .queries
        .iter()
        .map(|q| q.get(header..).unwrap_or_default())
        .collect()
}
