//! `pir bench --shards 1,2,4`: sharded SimplePIR serving as real processes on 127.0.0.1, at
//! one fixed total size, for each shard count S.
//!
//! Per S it builds the database with `pir db build --shards S`, starts one `pir shard serve`
//! per shard and one `pir front serve`, records the real client's queries through the front
//! end, then sends `--shard-queries` of them one after another and reads, from `/proc`, the
//! CPU time each process spent meanwhile and its resident memory. Then it does the same with
//! a delaying relay ([`Relay`]) between the front end and each shard, adding `--relay-ms` to
//! every chunk in each direction (a user-space stand-in for netem, which needs privileges).
//!
//! Reported per query: CPU time of every shard and the front end together (and its ratio to
//! S = 1: sharding costs throughput only if this grows), the front end's alone, latency p50
//! and p99 as the client saw it, and each shard process's resident memory.
//!
//! What it does not do: no concurrency (one query at a time, so a shard's batch is one
//! query), no replicas (one per shard); the processes share this machine's cores.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use pir_client::transport::{HttpsTransport, Transport};
use pir_keys::{PublicKey, SecretKey};
use rand::{RngCore, SeedableRng};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use crate::loadtest;

/// What to run.
#[derive(Debug, Clone)]
pub struct Plan {
    /// Shard counts, one row (two with the relay) each.
    pub shards: Vec<usize>,
    /// Records in the whole database.
    pub records: u64,
    /// Bytes per record.
    pub record_bytes: usize,
    /// Queries timed per row.
    pub queries: usize,
    /// Milliseconds the relay adds per chunk and direction (0: no relay rows).
    pub relay_ms: u64,
    /// Answering threads of every shard and front end (`--workers`; default: cores).
    pub workers: Option<usize>,
}

/// One row: S shards, with or without the relay.
#[derive(Debug, Clone, serde::Serialize)]
pub struct Row {
    /// Shards.
    pub shards: usize,
    /// Milliseconds added by the relay each way (0: none).
    pub relay_ms: u64,
    /// Queries timed.
    pub queries: usize,
    /// CPU milliseconds per query, every shard and the front end together.
    pub server_cpu_ms: f64,
    /// CPU milliseconds per query of the front end alone.
    pub front_cpu_ms: f64,
    /// CPU milliseconds per query of each shard.
    pub shard_cpu_ms: Vec<f64>,
    /// Client-side latency, median, milliseconds.
    pub p50_ms: f64,
    /// Client-side latency, 99th percentile, milliseconds.
    pub p99_ms: f64,
    /// Resident memory of each shard process after the run, MiB.
    pub shard_rss_mib: Vec<f64>,
    /// Resident memory of the front end after the run, MiB.
    pub front_rss_mib: f64,
    /// Bytes of each shard's part file.
    pub part_bytes: Vec<u64>,
}

/// A child process killed when dropped.
struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Server {
    /// Runs `pir ARGS`, waiting for the line that names its `https://` address.
    fn start(pir: &Path, args: &[&str]) -> Result<Server> {
        use std::io::BufRead;
        let mut child = Command::new(pir)
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .with_context(|| format!("starting pir {}", args.join(" ")))?;
        let stdout = child.stdout.take().context("the child's stdout")?;
        let mut lines = std::io::BufReader::new(stdout).lines();
        let server = |url| Server { child, url };
        loop {
            let Some(line) = lines.next() else {
                bail!("pir {} exited before serving", args.join(" "));
            };
            let line = line?;
            if let Some((_, rest)) = line.split_once("https://") {
                let addr = rest.split_whitespace().next().unwrap_or_default();
                let url = format!("https://{addr}");
                // Keep draining its output so that it never blocks on a full pipe.
                std::thread::spawn(move || lines.for_each(drop));
                return Ok(server(url));
            }
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }
}

/// CPU seconds (user + system) the process `pid` has used, from `/proc/PID/stat`.
fn cpu_seconds(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = stat.rsplit_once(')').map(|(_, r)| r).unwrap_or_default();
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| -> Result<f64> {
        Ok(fields
            .get(i)
            .context("a short /proc stat line")?
            .parse::<f64>()?)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name and state;
    // Linux counts them in USER_HZ, 100 per second on every architecture it exports.
    Ok((ticks(11)? + ticks(12)?) / 100.0)
}

/// Resident memory of `pid` in MiB, from `/proc/PID/status`.
fn rss_mib(pid: u32) -> Result<f64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kib: f64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .context("no VmRSS")?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()?;
    Ok(kib / 1024.0)
}

/// A TCP forwarder on 127.0.0.1 that delays every chunk it reads by a fixed time before
/// writing it on, in both directions (a propagation delay: chunks in flight overlap, so it
/// adds latency and no bandwidth limit). Dropping it stops accepting.
pub struct Relay {
    /// Where it listens.
    pub addr: std::net::SocketAddr,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Relay {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Relay {
    /// A relay to `upstream` adding `delay` each way.
    pub async fn start(upstream: std::net::SocketAddr, delay: Duration) -> Result<Relay> {
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let task = tokio::spawn(async move {
            while let Ok((inbound, _)) = listener.accept().await {
                tokio::spawn(async move {
                    let Ok(outbound) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    let _ = inbound.set_nodelay(true);
                    let _ = outbound.set_nodelay(true);
                    let (in_read, in_write) = inbound.into_split();
                    let (out_read, out_write) = outbound.into_split();
                    tokio::join!(
                        delayed_copy(in_read, out_write, delay),
                        delayed_copy(out_read, in_write, delay)
                    );
                });
            }
        });
        Ok(Relay { addr, task })
    }
}

/// Copies `from` to `to`, each chunk written `delay` after it was read.
async fn delayed_copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<(tokio::time::Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, chunk)) = rx.recv().await {
            tokio::time::sleep_until(due).await;
            if to.write_all(&chunk).await.is_err() {
                return;
            }
        }
        let _ = to.shutdown().await;
    });
    let mut buffer = vec![0u8; 64 << 10];
    loop {
        match from.read(&mut buffer).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                let due = tokio::time::Instant::now() + delay;
                if tx.send((due, buffer[..n].to_vec())).is_err() {
                    break;
                }
            }
        }
    }
    drop(tx);
    let _ = writer.await;
}

/// The `host:port` of an `https://host:port` URL.
fn socket_of(url: &str) -> Result<std::net::SocketAddr> {
    let authority = url.trim_start_matches("https://").trim_end_matches('/');
    authority
        .parse()
        .with_context(|| format!("{url} is not https://IP:PORT"))
}

/// Writes a fresh key pair `dir/NAME.key`, `dir/NAME.pub`; returns the public key's path.
fn keypair(dir: &Path, name: &str) -> Result<(PathBuf, PathBuf)> {
    let key = SecretKey::generate()?;
    let secret = dir.join(format!("{name}.key"));
    let public = dir.join(format!("{name}.pub"));
    key.save(&secret)?;
    key.public().save(&public)?;
    Ok((secret, public))
}

fn text(path: &Path) -> &str {
    path.to_str().unwrap_or_default()
}

/// Runs `plan` with the `pir` binary at `pir`; `report` gets each row as it is measured.
pub async fn run(pir: &Path, plan: &Plan, report: &mut dyn FnMut(&Row)) -> Result<Vec<Row>> {
    if plan.shards.is_empty() || plan.shards.contains(&0) || plan.queries == 0 {
        bail!("--shards needs counts of at least 1, and --shard-queries at least 1");
    }
    let dir = tempfile::tempdir()?;
    let records = dir.path().join("records.bin");
    let mut data = vec![0u8; plan.records as usize * plan.record_bytes];
    rand_chacha::ChaCha20Rng::seed_from_u64(32).fill_bytes(&mut data);
    std::fs::write(&records, &data)?;
    drop(data);
    let mut rows = Vec::new();
    for &shards in &plan.shards {
        let out = dir.path().join(format!("s{shards}"));
        let (map_key, _) = keypair(dir.path(), &format!("map{shards}"))?;
        let built = Command::new(pir)
            .args(["db", "build", "--records", text(&records), "--record-size"])
            .arg(plan.record_bytes.to_string())
            .args(["--shards", &shards.to_string(), "--key", text(&map_key)])
            .args(["--out", text(&out)])
            .output()?;
        if !built.status.success() {
            bail!(
                "pir db build --shards {shards}: {}",
                String::from_utf8_lossy(&built.stderr)
            );
        }
        // Started together: each computes its part of the hint before it serves.
        let started: Vec<Result<(Server, PathBuf)>> = std::thread::scope(|scope| {
            let tasks: Vec<_> = (0..shards)
                .map(|k| {
                    let (out, dir) = (&out, dir.path());
                    scope.spawn(move || start_shard(pir, dir, out, shards, k, plan.workers))
                })
                .collect();
            tasks
                .into_iter()
                .map(|t| {
                    t.join()
                        .unwrap_or_else(|_| Err(anyhow::anyhow!("a start panicked")))
                })
                .collect()
        });
        let servers: Vec<(Server, PathBuf)> = started.into_iter().collect::<Result<_>>()?;
        let parts: Vec<u64> = (0..shards)
            .map(|k| Ok(std::fs::metadata(out.join(format!("shard-{k}.part")))?.len()))
            .collect::<Result<_>>()?;
        let delays = if plan.relay_ms > 0 {
            vec![0, plan.relay_ms]
        } else {
            vec![0]
        };
        for relay_ms in delays {
            let row = measure(pir, dir.path(), &out, &servers, relay_ms, plan, &parts).await?;
            report(&row);
            rows.push(row);
        }
    }
    Ok(rows)
}

/// `pir shard serve` of shard `k` of the `shards` in `db`, with a fresh key in `dir`.
fn start_shard(
    pir: &Path,
    dir: &Path,
    db: &Path,
    shards: usize,
    k: usize,
    workers: Option<usize>,
) -> Result<(Server, PathBuf)> {
    let (secret, public) = keypair(dir, &format!("s{shards}-{k}"))?;
    let k = k.to_string();
    let mut args = vec![
        "shard",
        "serve",
        "--db",
        text(db),
        "--shard",
        &k,
        "--key",
        text(&secret),
        "--listen",
        "127.0.0.1:0",
    ];
    let workers = workers.map(|w| w.to_string());
    if let Some(workers) = &workers {
        args.extend(["--workers", workers]);
    }
    Ok((Server::start(pir, &args)?, public))
}

/// One row: a front end over `servers` (through relays when `relay_ms` > 0), timed.
async fn measure(
    pir: &Path,
    dir: &Path,
    db: &Path,
    servers: &[(Server, PathBuf)],
    relay_ms: u64,
    plan: &Plan,
    parts: &[u64],
) -> Result<Row> {
    let mut relays = Vec::new();
    let mut args: Vec<String> = ["front", "serve", "--db", text(db)]
        .map(String::from)
        .to_vec();
    for (k, (server, public)) in servers.iter().enumerate() {
        let url = if relay_ms > 0 {
            let relay =
                Relay::start(socket_of(&server.url)?, Duration::from_millis(relay_ms)).await?;
            let url = format!("https://{}", relay.addr);
            relays.push(relay);
            url
        } else {
            server.url.clone()
        };
        args.push("--shard".into());
        args.push(format!("{k}={url}={}", text(public)));
    }
    let (secret, public) = keypair(dir, &format!("front-{}-{relay_ms}", servers.len()))?;
    args.extend(["--key", text(&secret), "--listen", "127.0.0.1:0"].map(String::from));
    if let Some(workers) = plan.workers {
        args.extend(["--workers".into(), workers.to_string()]);
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let front = Server::start(pir, &args)?;
    let target = (front.url.clone(), PublicKey::load(&public)?);
    // The real client's queries, recorded; this also warms every process up.
    let source = loadtest::source(std::slice::from_ref(&target), loadtest::Kind::Lattice).await?;
    let transport = HttpsTransport::new(std::slice::from_ref(&target))?;
    let pids: Vec<u32> = servers
        .iter()
        .map(|(s, _)| s.pid())
        .chain([front.pid()])
        .collect();
    let before: Vec<f64> = pids
        .iter()
        .map(|&p| cpu_seconds(p))
        .collect::<Result<_>>()?;
    let mut latencies = Vec::with_capacity(plan.queries);
    for i in 0..plan.queries {
        let request = source.requests()[i % source.requests().len()].clone();
        let began = Instant::now();
        let reply = transport.exchange(0, request, source.max_reply()).await?;
        latencies.push(began.elapsed().as_micros() as u64);
        let envelope = pir_core::wire::decode_envelope(&reply, reply.len())?;
        if envelope.kind != pir_core::wire::MessageKind::Answer {
            bail!("the front end refused a query (S = {})", servers.len());
        }
    }
    let after: Vec<f64> = pids
        .iter()
        .map(|&p| cpu_seconds(p))
        .collect::<Result<_>>()?;
    let per_query: Vec<f64> = before
        .iter()
        .zip(&after)
        .map(|(b, a)| (a - b) * 1000.0 / plan.queries as f64)
        .collect();
    latencies.sort_unstable();
    let (shard_cpu, front_cpu) = per_query.split_at(servers.len());
    Ok(Row {
        shards: servers.len(),
        relay_ms,
        queries: plan.queries,
        server_cpu_ms: per_query.iter().sum(),
        front_cpu_ms: front_cpu.iter().sum(),
        shard_cpu_ms: shard_cpu.to_vec(),
        p50_ms: loadtest::percentile(&latencies, 0.5),
        p99_ms: loadtest::percentile(&latencies, 0.99),
        shard_rss_mib: servers
            .iter()
            .map(|(s, _)| rss_mib(s.pid()))
            .collect::<Result<_>>()?,
        front_rss_mib: rss_mib(front.pid())?,
        part_bytes: parts.to_vec(),
    })
}

/// The table line of `row`, its CPU time next to `base` (the S = 1 row's, same relay).
pub fn line(row: &Row, base: Option<f64>) -> String {
    let list = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.1}"))
            .collect::<Vec<_>>()
            .join("/")
    };
    format!(
        "S={} relay={}ms  server CPU {:.2} ms/query ({})  front {:.2} ms  shards {} ms  \
         p50 {:.2} ms  p99 {:.2} ms  RSS per shard {} MiB  front {:.1} MiB",
        row.shards,
        row.relay_ms,
        row.server_cpu_ms,
        base.map_or("x1 base".into(), |b| format!(
            "x{:.3} of S=1",
            row.server_cpu_ms / b
        )),
        row.front_cpu_ms,
        list(&row.shard_cpu_ms),
        row.p50_ms,
        row.p99_ms,
        list(&row.shard_rss_mib),
        row.front_rss_mib,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_relay_forwards_both_ways_and_delays() {
        let echo = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let upstream = echo.local_addr().unwrap();
        tokio::spawn(async move {
            let (mut socket, _) = echo.accept().await.unwrap();
            let mut buffer = [0u8; 5];
            socket.read_exact(&mut buffer).await.unwrap();
            socket.write_all(&buffer).await.unwrap();
        });
        let relay = Relay::start(upstream, Duration::from_millis(30))
            .await
            .unwrap();
        let mut client = TcpStream::connect(relay.addr).await.unwrap();
        let began = Instant::now();
        client.write_all(b"hello").await.unwrap();
        let mut back = [0u8; 5];
        client.read_exact(&mut back).await.unwrap();
        assert_eq!(&back, b"hello");
        // Once each way: a lower bound, never an upper one (the machine may be slow).
        assert!(began.elapsed() >= Duration::from_millis(60));
    }

    #[test]
    fn cpu_and_memory_of_this_process_read() {
        let pid = std::process::id();
        assert!(cpu_seconds(pid).unwrap() >= 0.0);
        assert!(rss_mib(pid).unwrap() > 0.0);
    }
}
