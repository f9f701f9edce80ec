//! `pir demo`: the whole system on one machine with no set-up.
//!
//! Generates a deterministic sample release, builds and signs it, starts three mirrors on
//! 127.0.0.1 (real HTTPS servers, each with its own key), signs a mirror list, fetches one
//! file privately through the real client, checks it against the original, and shows what
//! each mirror received: seeds and bits that look random and are the same size whichever file
//! was asked for.

use std::sync::{Arc, Mutex};
use std::time::Instant;

use anyhow::{bail, Context, Result};
use pir_client::{HttpsTransport, Transport, TransportError};
use pir_core::protocol;
use pir_core::wire::{self, MessageKind};
use pir_keys::SecretKey;
use pir_updates::fetch::{self, SchemeChoice};
use pir_updates::{release, sample, MirrorEntry, MirrorList};

use crate::cli::{DemoArgs, SchemeArg};

const MIRRORS: usize = 3;

/// Wraps a transport and keeps a copy of every request, as a mirror would see it.
struct Recording<T> {
    inner: T,
    seen: Mutex<Vec<(usize, Vec<u8>)>>,
}

impl<T: Transport> Transport for Recording<T> {
    async fn exchange(
        &self,
        mirror: usize,
        request: Vec<u8>,
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((mirror, request.clone()));
        self.inner.exchange(mirror, request, max_reply).await
    }
}

/// Runs the demo.
pub async fn run(args: DemoArgs) -> Result<()> {
    let started = Instant::now();
    let work = tempfile::tempdir().context("creating a temporary directory")?;
    let source = work.path().join("pool");
    let release_dir = work.path().join("release");

    println!(
        "[1/5] generating a sample release: {} files (seed {})",
        args.files, args.seed
    );
    let files = sample::write_sample_release(&source, args.files, args.seed)?;
    let total: u64 = files.iter().map(|(_, size)| size).sum();
    println!(
        "      {} files, {:.1} MiB in all, {} to {} bytes each",
        files.len(),
        total as f64 / 1048576.0,
        files.iter().map(|f| f.1).min().unwrap_or(0),
        files.iter().map(|f| f.1).max().unwrap_or(0)
    );

    println!("[2/5] vendor: signing keys, packing and signing the release");
    let vendor = SecretKey::generate()?;
    let options = release::BuildOptions {
        block_size: None,
        size_classes: false,
        progress: false,
        ..release::BuildOptions::default()
    };
    let report = release::build(&source, &vendor, &release_dir, &options)?;
    println!(
        "      {} blocks of {} bytes ({}); {}",
        report.block_count,
        report.block_size,
        crate::human(report.database_bytes),
        report.block_size_reason
    );

    println!(
        "[3/5] starting {MIRRORS} mirrors on 127.0.0.1 (HTTPS, each with its own Ed25519 key)"
    );
    let mut servers = Vec::new();
    let mut entries = Vec::new();
    for _ in 0..MIRRORS {
        let key = SecretKey::generate()?;
        let opened = release::open(&release_dir, Some(&vendor.public()), true)?;
        let service = pir_updates::serve::single(opened, &key)?;
        let tls = pir_keys::tls::server_config(&key)?;
        let options = pir_server::ServerOptions::new("127.0.0.1:0".parse()?);
        let running = pir_server::start(Arc::new(service), tls, options).await?;
        println!(
            "      mirror {} at https://{} key {}",
            servers.len() + 1,
            running.addr,
            key.public().fingerprint()
        );
        entries.push(MirrorEntry {
            url: format!("https://{}", running.addr),
            key: key.public(),
        });
        servers.push(running);
    }
    let list_path = work.path().join("mirrors.pir");
    std::fs::write(
        &list_path,
        MirrorList {
            created_unix: 0,
            mirrors: entries,
        }
        .encode_signed(&vendor),
    )?;

    let name = match args.file {
        Some(name) => name,
        None => pick_file(&files)?,
    };
    let choice = match args.scheme {
        SchemeArg::RaidPir => SchemeChoice::RaidPir {
            servers: MIRRORS,
            redundancy: 2,
            chunks: MIRRORS,
        },
        SchemeArg::Chor => SchemeChoice::Chor { servers: MIRRORS },
        SchemeArg::Dpf => SchemeChoice::Dpf,
    };
    println!("[4/5] client: verifying mirror list and manifest, fetching {name:?} privately");
    let mirrors = fetch::load_mirror_list(&list_path, &vendor.public())?;
    let pins: Vec<_> = mirrors.iter().map(|m| (m.url.clone(), m.key)).collect();
    let transport = Arc::new(Recording {
        inner: HttpsTransport::new(&pins)?,
        seen: Mutex::new(Vec::new()),
    });
    let session = fetch::UpdateSession::open_with(
        transport.clone(),
        mirrors,
        &vendor.public(),
        None,
        choice.servers(),
    )
    .await?;
    let mut fetched = session.fetch(&[name.as_str()], choice).await?;
    let (_, bytes) = fetched.files.pop().context("no file came back")?;
    let original = std::fs::read(source.join(&name))
        .with_context(|| format!("reading the original {name}"))?;
    if bytes != original {
        bail!("the fetched file differs from the original");
    }
    println!("      got {} bytes in {} blocks with {} {} per mirror, {:.1} ms; SHA-256 matches the manifest and the bytes match the original",
        bytes.len(), fetched.blocks, fetched.queries, if fetched.queries == 1 { "query" } else { "queries" },
        fetched.elapsed.as_secs_f64() * 1e3);

    println!("[5/5] what each mirror saw:");
    let seen = transport
        .seen
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    for (mirror, stats) in fetched.stats.iter().enumerate() {
        let requests: Vec<&Vec<u8>> = seen
            .iter()
            .filter(|(m, _)| *m == mirror)
            .map(|(_, r)| r)
            .collect();
        println!(
            "      mirror {}: {} HTTPS request(s), sent {} / received {}",
            mirror + 1,
            stats.requests,
            crate::human(stats.bytes_sent),
            crate::human(stats.bytes_received)
        );
        describe_queries(&requests);
    }
    println!(
        "      each query is the same size, and its bits look uniformly random, whichever block is asked for;"
    );
    println!(
        "      the number of queries reveals only the file's block count ({} of the {} files have {} blocks)",
        session.release.manifest.files.iter().filter(|f| f.block_count == fetched.blocks).count(),
        session.release.manifest.files.len(),
        fetched.blocks
    );
    println!("      privacy: {}", choice.assumption());

    for server in servers {
        server.shutdown().await;
    }
    println!("done in {:.2} s", started.elapsed().as_secs_f64());
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

/// Prints the random part of the queries a mirror received.
fn describe_queries(requests: &[&Vec<u8>]) {
    let mut bodies: Vec<Vec<u8>> = Vec::new();
    for request in requests {
        let Ok(envelope) = wire::decode_envelope(request, request.len()) else {
            continue;
        };
        if envelope.kind != MessageKind::Query {
            continue;
        }
        let Ok(batch) = protocol::decode_query_batch(envelope.body) else {
            continue;
        };
        let header = match envelope.scheme {
            pir_core::SchemeId::RaidPir => pir_xor::raid::QUERY_HEADER_LEN - pir_xor::prg::SEED_LEN,
            // The shape header and the DPF key's depth byte (fixed by the block count).
            pir_core::SchemeId::Dpf => 13,
            _ => 12,
        };
        bodies.extend(
            batch
                .queries
                .iter()
                .map(|q| q.get(header..).unwrap_or_default().to_vec()),
        );
    }
    let Some(first) = bodies.first() else {
        println!("        (no queries)");
        return;
    };
    let bits: String = first.iter().take(6).map(|b| format!("{b:08b} ")).collect();
    let ones: u64 = bodies
        .iter()
        .flatten()
        .map(|b| u64::from(b.count_ones()))
        .sum();
    let total: u64 = bodies.iter().map(|b| b.len() as u64 * 8).sum();
    println!(
        "        {} {} of {} random bytes each; first begins {}...; {:.1}% of all their bits are 1",
        bodies.len(),
        if bodies.len() == 1 {
            "query"
        } else {
            "queries"
        },
        first.len(),
        bits.trim_end(),
        100.0 * ones as f64 / total.max(1) as f64
    );
}
