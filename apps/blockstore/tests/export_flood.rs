//! The probe's flood, bounded: 400 pipelined 1 MiB reads and a hang-up. The export runs at
//! most a connection's credit of them, a second client waits behind no more than that, and
//! memory stays bounded. Its own test binary, so the process's RSS is this test's alone.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::atomic::Ordering;
use std::time::Duration;

use common::*;
use pir_blockstore::nbd::export::ExportOptions;
use pir_blockstore::nbd::listen::Listener;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

const FLOOD: u64 = 400;
const READ: u32 = 1 << 20;
const MAX_REQUESTS: usize = 8;

fn rss_bytes() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    let kib: u64 = line.split_whitespace().nth(1).unwrap().parse().unwrap();
    kib * 1024
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_pipelined_flood_then_hang_up_costs_bounded_work_and_memory() {
    let dir = tempfile::tempdir().unwrap();
    let disk = disk(dir.path(), 16 << 20, 64 << 10);
    let options = ExportOptions {
        max_requests: MAX_REQUESTS,
        max_bytes: 8 << 20,
        ..ExportOptions::default()
    };
    let listener = Listener::tcp("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let running = Running::start(disk, listener, options);
    let before = rss_bytes();

    // Client A: 400 reads of 1 MiB in one write of a few KB, then gone without reading.
    let mut a = TcpStream::connect(addr).await.unwrap();
    greet(&mut a).await.unwrap();
    go(&mut a).await.unwrap();
    let mut flood = Vec::new();
    for i in 0..FLOOD {
        flood.extend_from_slice(&0x2560_9513u32.to_be_bytes());
        flood.extend_from_slice(&[0, 0, 0, 0]);
        flood.extend_from_slice(&i.to_be_bytes());
        flood.extend_from_slice(&((i % 15) * u64::from(READ)).to_be_bytes());
        flood.extend_from_slice(&READ.to_be_bytes());
    }
    a.write_all(&flood).await.unwrap();
    drop(a);

    // Client B is served; the work done before its answer is bounded by A's credit.
    let mut b = TcpStream::connect(addr).await.unwrap();
    greet(&mut b).await.unwrap();
    go(&mut b).await.unwrap();
    send(&mut b, 0, 1, 0, 4096, &[]).await.unwrap();
    let (error, _, _) = tokio::time::timeout(Duration::from_secs(300), reply(&mut b, 4096))
        .await
        .expect("client B was not answered")
        .unwrap();
    assert_eq!(error, 0);
    // A connection's credit (8) can run, plus what it refills while replies still reach the
    // socket before the hang-up is seen; far from the 400 asked for.
    let bound = 4 * MAX_REQUESTS as u64;
    let before_b = running.stats.jobs_run.load(Ordering::Relaxed);
    assert!(
        before_b <= bound + 1,
        "{before_b} jobs ran before client B's (bound {bound})"
    );

    // Once quiet, A's total stays bounded too: the rest of its queue was dropped or never read.
    let mut last = u64::MAX;
    for _ in 0..600 {
        let now = running.stats.jobs_run.load(Ordering::Relaxed);
        if now == last {
            break;
        }
        last = now;
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(last <= bound + 1, "{last} jobs ran in all (bound {bound})");
    let grown = rss_bytes().saturating_sub(before);
    assert!(
        grown < 96 << 20,
        "RSS grew by {} MiB (400 MiB if every read were buffered)",
        grown >> 20
    );
    drop(b);
    running.stop().await.unwrap();
}
