//! `pir bench --oram --oram-nodes N`: the oblivious disk over N `pir oram node` processes
//! behind the balancer (this process), optionally through a user-space relay that delays
//! every chunk between balancer and nodes by `--oram-delay-ms` each way.
//!
//! Method: as `pir bench --oram` (fill every block once, then rounds of random 4 KiB reads and
//! writes, half each, 32 in flight), over [`Balanced`]. CPU time is read from
//! `/proc/PID/stat` for this process and every node process before and after each round and
//! summed; the bandwidth overhead is node-blocks moved (read and written) per logical block.

use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{bail, Context, Result};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

use crate::balanced::Balanced;
use crate::device::BlockDevice;
use crate::{Disk, StoreSpec};

/// What `pir bench --oram --oram-nodes N` is asked for.
#[derive(Debug, Clone)]
pub struct NodesBenchPlan {
    /// Logical size, e.g. `64MiB`.
    pub size: String,
    /// Nodes.
    pub nodes: usize,
    /// Added delay each way between balancer and nodes, in milliseconds (0: none, no relay).
    pub delay_ms: u64,
    /// Operations per timed round.
    pub ops: u64,
    /// Timed rounds.
    pub runs: usize,
    /// Print one JSON object instead of text.
    pub json: bool,
    /// Scratch directory parent.
    pub scratch: Option<std::path::PathBuf>,
    /// The line describing this machine.
    pub machine: String,
}

/// Kernel clock ticks per second of `/proc/PID/stat` (`USER_HZ`, 100 on Linux).
const TICKS: f64 = 100.0;

/// User plus system CPU seconds of process `pid` (`self` for this one).
fn cpu_seconds(pid: &str) -> f64 {
    let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return 0.0;
    };
    // The command name (field 2) may hold spaces: count from after its ')'.
    let Some(after) = stat.rfind(')').map(|i| &stat[i + 1..]) else {
        return 0.0;
    };
    let fields: Vec<&str> = after.split_whitespace().collect();
    let tick = |i: usize| {
        fields
            .get(i)
            .and_then(|f| f.parse::<f64>().ok())
            .unwrap_or(0.0)
    };
    (tick(11) + tick(12)) / TICKS
}

struct NodeProcess {
    child: std::process::Child,
    addr: String,
}

impl Drop for NodeProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Starts `pir oram node` on a node disk of `node_bytes` in `dir`.
fn start_node(dir: &Path, i: usize, node_bytes: u64, owner_pub: &Path) -> Result<NodeProcess> {
    use std::io::BufRead;
    let state = dir.join(format!("node{i}"));
    Disk::init(
        &state,
        node_bytes,
        4096,
        &[StoreSpec::Dir(dir.join(format!("store{i}")))],
        None,
    )?;
    let key = pir_keys::SecretKey::generate()?;
    let key_file = dir.join(format!("n{i}.key"));
    key.save(&key_file)?;
    key.public().save(&dir.join(format!("n{i}.pub")))?;
    let exe = std::env::current_exe().context("cannot find the pir binary")?;
    let mut child = std::process::Command::new(exe)
        .args(["oram", "node", "--listen", "127.0.0.1:0", "--state"])
        .arg(&state)
        .arg("--key")
        .arg(&key_file)
        .arg("--owner")
        .arg(owner_pub)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .context("cannot start pir oram node")?;
    let stdout = child.stdout.take().context("no node output")?;
    let mut first = String::new();
    std::io::BufReader::new(stdout).read_line(&mut first)?;
    let Some(addr) = first
        .split_whitespace()
        .find_map(|w| w.strip_prefix("https://"))
    else {
        bail!("node {i} did not start: {first:?}");
    };
    Ok(NodeProcess {
        addr: addr.to_string(),
        child,
    })
}

/// A relay from a local port to `to` that holds every chunk `delay` before passing it on,
/// both ways, in order. Returns the local address.
async fn relay(to: String, delay: Duration) -> Result<String> {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?.to_string();
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let Ok(outbound) = tokio::net::TcpStream::connect(&to).await else {
                continue;
            };
            let (ri, wi) = inbound.into_split();
            let (ro, wo) = outbound.into_split();
            tokio::spawn(delayed_copy(ri, wo, delay));
            tokio::spawn(delayed_copy(ro, wi, delay));
        }
    });
    Ok(addr)
}

async fn delayed_copy(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    delay: Duration,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let (send, mut receive) = tokio::sync::mpsc::unbounded_channel::<(Instant, Vec<u8>)>();
    let writer = tokio::spawn(async move {
        while let Some((due, chunk)) = receive.recv().await {
            tokio::time::sleep_until(tokio::time::Instant::from_std(due)).await;
            if to.write_all(&chunk).await.is_err() {
                break;
            }
        }
    });
    let mut buffer = vec![0u8; 64 << 10];
    while let Ok(n) = from.read(&mut buffer).await {
        if n == 0
            || send
                .send((Instant::now() + delay, buffer[..n].to_vec()))
                .is_err()
        {
            break;
        }
    }
    drop(send);
    let _ = writer.await;
}

struct Measured {
    elapsed: Duration,
    latencies: Vec<Duration>,
    cpu: f64,
    node_blocks: u64,
}

fn round(disk: &mut Balanced, ops: u64, pids: &[String], seed: u64) -> Result<Measured> {
    let b = u64::from(disk.block_size());
    let blocks = disk.size() / b;
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let cpu_before: f64 = pids.iter().map(|p| cpu_seconds(p)).sum();
    let moved = |d: &Balanced| d.core().traffic().blocks_read + d.core().traffic().blocks_written;
    let moved_before = moved(disk);
    let mut started = std::collections::HashMap::new();
    let mut latencies = Vec::with_capacity(ops as usize);
    let mut next = 0u64;
    let begin = Instant::now();
    while (latencies.len() as u64) < ops {
        while started.len() < pir_oram::MAX_BATCH && next < ops {
            let at = rng.random_range(0..blocks) * b;
            let ids: Vec<u64> = if next.is_multiple_of(2) {
                let mut data = vec![0u8; b as usize];
                rng.fill_bytes(&mut data);
                disk.submit_write(at, &data)?
            } else {
                disk.submit_read(at, b)?
                    .into_iter()
                    .map(|(id, _, _)| id)
                    .collect()
            };
            for id in ids {
                started.insert(id, Instant::now());
            }
            next += 1;
        }
        for answer in disk.step()? {
            if let Some(t) = started.remove(&answer.id) {
                latencies.push(t.elapsed());
            }
        }
    }
    let elapsed = begin.elapsed();
    let cpu = pids.iter().map(|p| cpu_seconds(p)).sum::<f64>() - cpu_before;
    latencies.sort_unstable();
    Ok(Measured {
        elapsed,
        latencies,
        cpu,
        node_blocks: moved(disk) - moved_before,
    })
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// `pir bench --oram --oram-nodes N`.
pub async fn run(plan: NodesBenchPlan) -> Result<()> {
    let size = crate::size::parse_size(&plan.size).map_err(anyhow::Error::msg)?;
    let scratch = match &plan.scratch {
        Some(dir) => tempfile::tempdir_in(dir),
        None => tempfile::tempdir(),
    }
    .context("cannot make a scratch directory")?;
    let dir = scratch.path().to_path_buf();
    let bstate = dir.join("bstate");
    crate::disk::make_client_key(&bstate)?;
    let owner_pub = crate::disk::client_pub_path(&bstate);
    let node_bytes = pir_oram::balance::node_blocks_needed(size / 4096, plan.nodes) * 4096;
    let mut nodes = Vec::new();
    let mut specs = Vec::new();
    for i in 0..plan.nodes.max(1) {
        let node = start_node(&dir, i, node_bytes, &owner_pub)?;
        let addr = if plan.delay_ms > 0 {
            relay(node.addr.clone(), Duration::from_millis(plan.delay_ms)).await?
        } else {
            node.addr.clone()
        };
        let key = pir_keys::PublicKey::load(&dir.join(format!("n{i}.pub")))?;
        specs.push((format!("https://{addr}"), key));
        nodes.push(node);
    }
    let mut pids = vec!["self".to_string()];
    pids.extend(nodes.iter().map(|n| n.child.id().to_string()));
    let runtime = tokio::runtime::Handle::current();
    let (runs, ops) = (plan.runs.max(1), plan.ops.max(1));
    let measured = tokio::task::spawn_blocking(move || -> Result<Vec<Measured>> {
        Balanced::init(&bstate, size, 4096, &specs, &runtime)?;
        let mut disk = Balanced::open(&bstate, None, &runtime)?;
        let fill = vec![7u8; 1 << 20];
        let mut at = 0;
        while at < size {
            let take = (size - at).min(fill.len() as u64);
            disk.submit_write(at, &fill[..take as usize])?;
            while disk.pending() > 0 {
                disk.step()?;
            }
            at += take;
        }
        disk.flush()?;
        let out = (0..runs)
            .map(|r| round(&mut disk, ops, &pids, 100 + r as u64))
            .collect::<Result<Vec<_>>>()?;
        disk.close()?;
        Ok(out)
    })
    .await
    .context("the benchmark panicked")??;
    report(&plan, &measured, ops);
    drop(nodes);
    Ok(())
}

fn report(plan: &NodesBenchPlan, measured: &[Measured], ops: u64) {
    let ops_f = ops as f64;
    let ops_per_s = median(
        measured
            .iter()
            .map(|m| ops_f / m.elapsed.as_secs_f64())
            .collect(),
    );
    let mut all: Vec<Duration> = measured.iter().flat_map(|m| m.latencies.clone()).collect();
    all.sort_unstable();
    let pct = |f: f64| all[((all.len() - 1) as f64 * f) as usize].as_secs_f64() * 1e3;
    let cpu = median(measured.iter().map(|m| m.cpu / ops_f).collect());
    let blocks = median(
        measured
            .iter()
            .map(|m| m.node_blocks as f64 / ops_f)
            .collect(),
    );
    if plan.json {
        println!(
            "{{\"mode\":\"oram-nodes\",\"nodes\":{},\"size\":\"{}\",\"delay_ms\":{},\"ops\":{ops},\"runs\":{},\"ops_per_s\":{ops_per_s:.1},\"p50_ms\":{:.3},\"p99_ms\":{:.3},\"cpu_s_per_op\":{cpu:.6},\"node_blocks_per_op\":{blocks:.3},\"machine\":{:?}}}",
            plan.nodes,
            plan.size,
            plan.delay_ms,
            measured.len(),
            pct(0.5),
            pct(0.99),
            plan.machine
        );
        return;
    }
    println!("{}", plan.machine);
    println!(
        "oblivious disk of {} over {} `pir oram node` process(es){}, random 4 KiB, half reads, 32 in flight, median of {} rounds of {ops} ops:",
        plan.size,
        plan.nodes,
        if plan.delay_ms > 0 {
            format!(" behind a relay adding {} ms each way", plan.delay_ms)
        } else {
            String::new()
        },
        measured.len()
    );
    println!(
        "  {ops_per_s:.0} ops/s; latency p50 {:.2} ms, p99 {:.2} ms",
        pct(0.5),
        pct(0.99)
    );
    println!(
        "  CPU {:.3} ms per op (balancer and nodes summed)",
        cpu * 1e3
    );
    println!("  balancer-to-node traffic: {blocks:.2} node-blocks per logical block");
}
