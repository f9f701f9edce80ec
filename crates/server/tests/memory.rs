//! A flood of large request bodies held open does not grow the server's memory past its
//! budget: twelve clients each announce an 8 MiB body (the handler's limit) and send all but
//! its last byte, against a budget of 16 MiB. Measured two ways: the runtime's own accounting
//! (`RunningServer::memory`) and the process's resident memory (`VmRSS`). Its own test binary,
//! so that no other test's allocations move the resident memory.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::sync::Arc;
use std::time::Duration;

use pir_client::Transport;
use support::{request, Fixed};
use tokio::io::AsyncWriteExt;

const BODY: usize = 8 << 20;
const BUDGET: usize = 16 << 20;
const HOLDERS: usize = 12;

fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// One payload for every holder: the clients' bytes are not counted twelve times.
static PAYLOAD: [u8; 64 * 1024] = [0x5a; 64 * 1024];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn held_large_bodies_stay_within_the_memory_budget() {
    let mut options = support::options();
    options.memory_budget = BUDGET;
    options.body_timeout = Duration::from_secs(30);
    options.header_timeout = Duration::from_secs(30);
    options.grace = Duration::from_millis(100);
    let server = support::start(Arc::new(Fixed::new(BODY)), options).await;
    let running = &server.running;
    let client = server.client();
    client.exchange(0, request(), 4096).await.unwrap();
    let before = resident_kib();

    let config = pir_keys::tls::client_config(server.key).unwrap();
    let mut holders = Vec::new();
    for _ in 0..HOLDERS {
        let connector = tokio_rustls::TlsConnector::from(config.clone());
        let addr = running.addr;
        holders.push(tokio::spawn(async move {
            let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
            let mut tls = connector
                .connect(pir_keys::tls::server_name(), tcp)
                .await
                .unwrap();
            let head =
                format!("POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: {BODY}\r\n\r\n");
            tls.write_all(head.as_bytes()).await.unwrap();
            let mut left = BODY - 1;
            while left > 0 {
                let n = left.min(PAYLOAD.len());
                if tls.write_all(&PAYLOAD[..n]).await.is_err() {
                    return;
                }
                left -= n;
            }
            let _ = tls.flush().await;
            // Hold the connection, the body one byte short.
            tokio::time::sleep(Duration::from_secs(60)).await;
        }));
    }
    // Let every holder send what the server takes.
    let mut peak_resident = 0;
    for _ in 0..30 {
        tokio::time::sleep(Duration::from_millis(100)).await;
        peak_resident = peak_resident.max(resident_kib());
    }
    let usage = running.memory();
    let grown_mib = peak_resident.saturating_sub(before) as f64 / 1024.0;
    eprintln!(
        "{HOLDERS} held bodies of {} MiB, budget {} MiB: runtime holds {} MiB (peak {} MiB); \
         resident {:.1} -> {:.1} MiB (+{grown_mib:.1} MiB)",
        BODY >> 20,
        BUDGET >> 20,
        usage.in_use >> 20,
        usage.peak >> 20,
        before as f64 / 1024.0,
        peak_resident as f64 / 1024.0,
    );
    assert_eq!(usage.budget, BUDGET);
    assert!(usage.peak <= BUDGET, "{usage:?}");
    assert!(
        usage.in_use >= BODY,
        "the budget's room is used, not left idle: {usage:?}"
    );
    // Twelve bodies would be 96 MiB; the budget lets 16 MiB in, plus the buffers of TLS,
    // sockets and allocator.
    assert!(
        grown_mib < (BUDGET >> 20) as f64 + 24.0,
        "resident memory grew by {grown_mib:.1} MiB"
    );
    for holder in &holders {
        holder.abort();
    }
    server.running.shutdown().await;
}
