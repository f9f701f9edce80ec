//! `pir loadtest`: many concurrent clients against one server, with abusive ones mixed in.
//!
//! Each client is its own HTTPS connection pinned to the server's key, sending valid queries
//! back to back for the whole run. The queries are made once, at the start, by the real
//! client code (a mirror: Chor queries over the release its manifest describes; a
//! single-server `pir serve`: the lattice client's own queries, recorded as they leave), then
//! replayed: the server cannot tell a replay from a new query, and the load tool spends its
//! CPU on the network, not on making queries. A reply counts as served when it is a signed
//! answer envelope (not an error).
//!
//! With `--abuse`, alongside the clients: connections that send headers one byte a second
//! (slowloris), connections that send nothing, requests announcing 100 MB bodies, requests
//! whose body trickles, and malformed envelopes. The report says how the server dealt with
//! each and whether the valid clients were served meanwhile.
//!
//! The server's resident memory comes from its `/metrics` (`process_resident_memory_bytes`):
//! before the run, its peak during it (sampled every 250 ms) and after it, once the abusive
//! connections are gone.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use pir_client::{HttpsTransport, Transport, TransportError};
use pir_core::wire::{self, MessageKind};
use pir_core::{DbShape, MultiServerScheme, SchemeId};
use pir_keys::PublicKey;
use pir_service::framing;
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

use crate::cli::{LoadKind, LoadtestArgs};

/// Distinct queries made at the start and replayed.
const DISTINCT_QUERIES: usize = 32;

/// Valid queries to replay and the largest reply they may get.
struct Source {
    requests: Vec<Vec<u8>>,
    max_reply: usize,
    what: String,
}

/// Records the query envelopes a client session sends.
struct Recording {
    inner: HttpsTransport,
    queries: Mutex<Vec<Vec<u8>>>,
}

impl Transport for Recording {
    async fn exchange(
        &self,
        mirror: usize,
        request: Vec<u8>,
        max_reply: usize,
    ) -> Result<Vec<u8>, TransportError> {
        let is_query = wire::decode_envelope(&request, request.len())
            .is_ok_and(|e| e.kind == MessageKind::Query);
        if is_query {
            self.queries
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(request.clone());
        }
        self.inner.exchange(mirror, request, max_reply).await
    }

    async fn hint(&self, mirror: usize, max_reply: usize) -> Result<Vec<u8>, TransportError> {
        self.inner.hint(mirror, max_reply).await
    }
}

/// Chor queries (the first server's share) over the release the mirror serves.
async fn mirror_source(server: &(String, PublicKey)) -> Result<Source> {
    let transport = HttpsTransport::new(std::slice::from_ref(server))?;
    let manifest =
        pir_client::fetch_manifest(&transport, 0, pir_updates::fetch::MAX_MANIFEST_BYTES)
            .await
            .context("fetching the mirror's manifest")?;
    let decoded = pir_updates::manifest::Manifest::decode_unverified(&manifest)
        .context("the mirror's manifest")?;
    let shape = DbShape::new(decoded.block_count, decoded.block_size as usize)?;
    let id = pir_keys::sha256(&manifest);
    let scheme = pir_xor::Chor::new(shape, 2)?;
    let mut rng = rand::rng();
    let mut requests = Vec::with_capacity(DISTINCT_QUERIES);
    for _ in 0..DISTINCT_QUERIES {
        let index = rng.random_range(0..decoded.block_count) as usize;
        let (queries, _) = scheme.query(&[index], &mut rng)?;
        requests.push(pir_service::reply::request(
            SchemeId::Chor,
            &id,
            &[scheme.encode_query(&queries[0])],
        ));
    }
    Ok(Source {
        requests,
        max_reply: framing::reply_bytes(1, scheme.max_answer_body()),
        what: format!(
            "mirror, release {}: {} blocks of {} B, Chor queries ({} B each)",
            hex::encode(&id[..8]),
            decoded.block_count,
            decoded.block_size,
            scheme
                .encode_query(&scheme.query(&[0], &mut rng)?.0[0])
                .len()
        ),
    })
}

/// The lattice client's own queries (SimplePIR, DoublePIR or YPIR, whatever the server runs).
async fn lattice_source(server: &(String, PublicKey)) -> Result<Source> {
    let recording = Recording {
        inner: HttpsTransport::new(std::slice::from_ref(server))?,
        queries: Mutex::new(Vec::new()),
    };
    let session = pir_client::lattice::LatticeSession::open_with(recording, server.1, None)
        .await
        .context("opening a session with the server")?;
    let records = session.header().params.records;
    let mut rng = rand::rng();
    let mut max_reply = 0;
    for _ in 0..DISTINCT_QUERIES.min(8) {
        let index = rng.random_range(0..records);
        let fetched = session
            .fetch(&[index])
            .await
            .context("a lookup to record the queries")?;
        max_reply = max_reply.max(fetched.reply_bytes);
    }
    let requests = session
        .transport()
        .queries
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    if requests.is_empty() {
        bail!("the session sent no query to record");
    }
    Ok(Source {
        what: format!(
            "single-server PIR ({:?}), {records} records, queries of {} B",
            session.header().params.scheme,
            requests[0].len()
        ),
        requests,
        max_reply: max_reply.max(1) * 2 + 4096,
    })
}

/// What the valid clients saw.
#[derive(Default)]
struct Tally {
    latencies_us: Vec<u64>,
    errors: u64,
    first_error: Option<String>,
}

/// One client: its own connection, queries back to back until `stop`.
async fn client(
    server: (String, PublicKey),
    source: Arc<Source>,
    stop: Arc<AtomicBool>,
    start_at: usize,
) -> Tally {
    let mut tally = Tally::default();
    let transport = match HttpsTransport::new(&[server]) {
        Ok(t) => t,
        Err(e) => {
            tally.errors += 1;
            tally.first_error = Some(e.to_string());
            return tally;
        }
    };
    let mut k = start_at;
    while !stop.load(Ordering::Relaxed) {
        let request = source.requests[k % source.requests.len()].clone();
        k += 1;
        let began = Instant::now();
        let outcome = transport.exchange(0, request, source.max_reply).await;
        let served = match &outcome {
            Ok(reply) => wire::decode_envelope(reply, reply.len())
                .map(|e| e.kind == MessageKind::Answer)
                .unwrap_or(false),
            Err(_) => false,
        };
        if served {
            tally.latencies_us.push(began.elapsed().as_micros() as u64);
        } else {
            tally.errors += 1;
            if tally.first_error.is_none() {
                tally.first_error = Some(match outcome {
                    Ok(reply) => match wire::decode_envelope(&reply, reply.len()) {
                        Ok(e) if e.kind == MessageKind::Error => wire::decode_error(e.body)
                            .map(|(_, m)| format!("refused: {m}"))
                            .unwrap_or_else(|_| "an error envelope".into()),
                        _ => "a reply that is not an answer".into(),
                    },
                    Err(e) => e.to_string(),
                });
            }
            // A refused or dropped request: back off a little, as a real client would.
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    tally
}

/// The server's resident memory in bytes, from its `/metrics`.
async fn server_rss(metrics: &HttpsTransport) -> Option<u64> {
    let text = metrics.get_plain(0, "/metrics", 4 << 20).await.ok()?;
    let text = String::from_utf8(text).ok()?;
    text.lines()
        .find_map(|l| l.strip_prefix("process_resident_memory_bytes "))
        .and_then(|v| v.trim().parse().ok())
}

/// What the abusive connections saw.
#[derive(Default)]
struct AbuseTally {
    slow_closed: AtomicU64,
    slow_open_at_end: AtomicU64,
    idle_closed: AtomicU64,
    idle_open_at_end: AtomicU64,
    big_refused: AtomicU64,
    big_other: AtomicU64,
    trickle_refused: AtomicU64,
    trickle_other: AtomicU64,
    malformed_refused: AtomicU64,
    malformed_other: AtomicU64,
    close_seconds_max: Mutex<f64>,
}

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn raw_connection(addr: &str, key: PublicKey) -> Option<Tls> {
    let config = pir_keys::tls::client_config(key).ok()?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let tcp = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    .ok()?
    .ok()?;
    tokio::time::timeout(
        Duration::from_secs(10),
        connector.connect(pir_keys::tls::server_name(), tcp),
    )
    .await
    .ok()?
    .ok()
}

/// Waits until the server closes `stream` or `stop` is set; true when the server closed it.
async fn closed_by_server(stream: &mut Tls, stop: &AtomicBool, trickle: bool) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        match tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => {
                if trickle && stream.write_all(b"X").await.is_err() {
                    return true;
                }
            }
        }
    }
}

/// The HTTP status line of whatever the server replies on `stream`, if any, within 30 s.
async fn status_of(stream: &mut Tls) -> Option<u16> {
    let mut reply = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + Duration::from_secs(30);
    while !reply.windows(2).any(|w| w == b"\r\n") && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => reply.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let line = String::from_utf8_lossy(&reply);
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Starts the abusive connections; they run until `stop`.
fn start_abuse(
    addr: String,
    key: PublicKey,
    count: usize,
    stop: Arc<AtomicBool>,
    tally: Arc<AbuseTally>,
) -> tokio::task::JoinSet<()> {
    let mut tasks = tokio::task::JoinSet::new();
    let note_close = |tally: &AbuseTally, since: Instant| {
        let mut max = tally
            .close_seconds_max
            .lock()
            .unwrap_or_else(|p| p.into_inner());
        *max = max.max(since.elapsed().as_secs_f64());
    };
    for k in 0..count {
        // Slowloris: a header that never ends, one byte a second.
        let (addr2, stop2, tally2) = (addr.clone(), stop.clone(), tally.clone());
        tasks.spawn(async move {
            while !stop2.load(Ordering::Relaxed) {
                let Some(mut s) = raw_connection(&addr2, key).await else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let since = Instant::now();
                let _ = s.write_all(b"POST /pir/v1 HTTP/1.1\r\nHost: x\r\n").await;
                if closed_by_server(&mut s, &stop2, true).await {
                    tally2.slow_closed.fetch_add(1, Ordering::Relaxed);
                    note_close(&tally2, since);
                } else {
                    tally2.slow_open_at_end.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        // Idle: a connection that says nothing.
        let (addr2, stop2, tally2) = (addr.clone(), stop.clone(), tally.clone());
        tasks.spawn(async move {
            while !stop2.load(Ordering::Relaxed) {
                let Some(mut s) = raw_connection(&addr2, key).await else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                let since = Instant::now();
                if closed_by_server(&mut s, &stop2, false).await {
                    tally2.idle_closed.fetch_add(1, Ordering::Relaxed);
                    note_close(&tally2, since);
                } else {
                    tally2.idle_open_at_end.fetch_add(1, Ordering::Relaxed);
                }
            }
        });
        // Bodies: 100 MB announced, or a body that trickles; every other one malformed.
        let (addr2, stop2, tally2) = (addr.clone(), stop.clone(), tally.clone());
        tasks.spawn(async move {
            let mut round = k;
            while !stop2.load(Ordering::Relaxed) {
                round += 1;
                let Some(mut s) = raw_connection(&addr2, key).await else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                match round % 3 {
                    0 => {
                        let head = "POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: \
                                    100000000\r\nConnection: close\r\n\r\n";
                        let _ = s.write_all(head.as_bytes()).await;
                        // Push body bytes until the server answers or closes.
                        let chunk = vec![0u8; 64 * 1024];
                        let _ = tokio::time::timeout(Duration::from_millis(500), async {
                            while s.write_all(&chunk).await.is_ok() {}
                        })
                        .await;
                        match status_of(&mut s).await {
                            Some(413) => tally2.big_refused.fetch_add(1, Ordering::Relaxed),
                            _ => tally2.big_other.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    1 => {
                        let head = "POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: \
                                    1000\r\nConnection: close\r\n\r\n0123";
                        let _ = s.write_all(head.as_bytes()).await;
                        match status_of(&mut s).await {
                            Some(408) => tally2.trickle_refused.fetch_add(1, Ordering::Relaxed),
                            _ => tally2.trickle_other.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    _ => {
                        let mut body = vec![0u8; 200 + round % 700];
                        rand::rng().fill(&mut body[..]);
                        if round % 2 == 0 {
                            body[..4].copy_from_slice(&wire::MAGIC);
                        }
                        let head = format!(
                            "POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\
                             Connection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = s.write_all(head.as_bytes()).await;
                        let _ = s.write_all(&body).await;
                        match status_of(&mut s).await {
                            Some(400..=499) => {
                                tally2.malformed_refused.fetch_add(1, Ordering::Relaxed)
                            }
                            _ => tally2.malformed_other.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                }
            }
        });
    }
    tasks
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p * sorted.len() as f64).ceil() as usize).clamp(1, sorted.len());
    sorted[rank - 1] as f64 / 1000.0
}

fn mib(bytes: Option<u64>) -> String {
    bytes.map_or("?".into(), |b| {
        format!("{:.1} MiB", b as f64 / (1u64 << 20) as f64)
    })
}

/// `pir loadtest`.
pub async fn run(args: &LoadtestArgs) -> Result<()> {
    if args.clients == 0 || args.seconds == 0 {
        bail!("--clients and --seconds must be at least 1");
    }
    let server = crate::cli::parse_server(&args.server)?;
    let (url, key) = (server.0.clone(), server.1);
    let addr = pir_client::transport::authority_of(&server.0)?;
    let source = Arc::new(match args.kind {
        LoadKind::Mirror => mirror_source(&server).await?,
        LoadKind::Lattice => lattice_source(&server).await?,
    });
    let metrics = HttpsTransport::new(std::slice::from_ref(&server))?;
    let rss_before = server_rss(&metrics).await;
    if !args.json {
        println!("target: {} at {url}", source.what);
        println!(
            "{} clients for {} s{}",
            args.clients,
            args.seconds,
            if args.abuse {
                format!(
                    ", with {} slowloris, {} idle and {} bad-body connections",
                    args.abusers(),
                    args.abusers(),
                    args.abusers()
                )
            } else {
                String::new()
            }
        );
    }

    let stop = Arc::new(AtomicBool::new(false));
    let abuse_stop = Arc::new(AtomicBool::new(false));
    let abuse = Arc::new(AbuseTally::default());
    let mut abusers = if args.abuse {
        start_abuse(
            addr.clone(),
            key,
            args.abusers(),
            abuse_stop.clone(),
            abuse.clone(),
        )
    } else {
        tokio::task::JoinSet::new()
    };
    let mut clients = tokio::task::JoinSet::new();
    for k in 0..args.clients {
        clients.spawn(client(server.clone(), source.clone(), stop.clone(), k * 7));
    }
    let began = Instant::now();
    let mut peak = rss_before;
    while began.elapsed() < Duration::from_secs(args.seconds) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        if let Some(rss) = server_rss(&metrics).await {
            peak = Some(peak.map_or(rss, |p| p.max(rss)));
        }
    }
    stop.store(true, Ordering::Relaxed);
    let mut tally = Tally::default();
    while let Some(done) = clients.join_next().await {
        let t = done.context("a client task")?;
        tally.latencies_us.extend(t.latencies_us);
        tally.errors += t.errors;
        if tally.first_error.is_none() {
            tally.first_error = t.first_error;
        }
    }
    let elapsed = began.elapsed().as_secs_f64();
    abuse_stop.store(true, Ordering::Relaxed);
    while abusers.join_next().await.is_some() {}
    // Let the server notice the closed connections, then read its memory again.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let rss_after = server_rss(&metrics).await;

    tally.latencies_us.sort_unstable();
    let served = tally.latencies_us.len();
    let throughput = served as f64 / elapsed;
    let (p50, p99, p999) = (
        percentile(&tally.latencies_us, 0.50),
        percentile(&tally.latencies_us, 0.99),
        percentile(&tally.latencies_us, 0.999),
    );
    let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
    if args.json {
        let value = serde_json::json!({
            "target": source.what,
            "clients": args.clients,
            "seconds": elapsed,
            "served": served,
            "errors": tally.errors,
            "first_error": tally.first_error,
            "throughput_per_s": throughput,
            "latency_ms": {"p50": p50, "p99": p99, "p999": p999},
            "server_rss_bytes": {"before": rss_before, "peak": peak, "after": rss_after},
            "abuse": args.abuse.then(|| serde_json::json!({
                "slowloris_closed": load(&abuse.slow_closed),
                "slowloris_open_at_end": load(&abuse.slow_open_at_end),
                "idle_closed": load(&abuse.idle_closed),
                "idle_open_at_end": load(&abuse.idle_open_at_end),
                "big_body_413": load(&abuse.big_refused),
                "big_body_other": load(&abuse.big_other),
                "trickle_408": load(&abuse.trickle_refused),
                "trickle_other": load(&abuse.trickle_other),
                "malformed_4xx": load(&abuse.malformed_refused),
                "malformed_other": load(&abuse.malformed_other),
                "longest_until_closed_s": *abuse.close_seconds_max.lock().unwrap_or_else(|p| p.into_inner()),
            })),
        });
        println!("{}", serde_json::to_string_pretty(&value)?);
    } else {
        println!(
            "served {served} queries in {elapsed:.1} s: {throughput:.1}/s; latency p50 \
             {p50:.2} ms, p99 {p99:.2} ms, p99.9 {p999:.2} ms; errors {}{}",
            tally.errors,
            tally
                .first_error
                .as_deref()
                .map(|e| format!(" (first: {e})"))
                .unwrap_or_default()
        );
        println!(
            "server memory: {} before, {} peak, {} after",
            mib(rss_before),
            mib(peak),
            mib(rss_after)
        );
        if args.abuse {
            println!(
                "abuse: slowloris {} closed by the server ({} still open at the end), idle {} \
                 closed ({} open at the end), longest until closed {:.1} s; 100 MB bodies {} \
                 refused with 413 ({} otherwise); trickling bodies {} refused with 408 ({} \
                 otherwise); malformed {} refused with 4xx ({} otherwise)",
                load(&abuse.slow_closed),
                load(&abuse.slow_open_at_end),
                load(&abuse.idle_closed),
                load(&abuse.idle_open_at_end),
                *abuse
                    .close_seconds_max
                    .lock()
                    .unwrap_or_else(|p| p.into_inner()),
                load(&abuse.big_refused),
                load(&abuse.big_other),
                load(&abuse.trickle_refused),
                load(&abuse.trickle_other),
                load(&abuse.malformed_refused),
                load(&abuse.malformed_other),
            );
        }
    }
    if served == 0 {
        bail!("no query was served");
    }
    Ok(())
}
