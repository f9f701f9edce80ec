//! Abusive clients do not stop others from being served: slow headers (slowloris), idle
//! connections, slow and oversized bodies are cut off by the runtime's bounds, and a full
//! connection table makes new clients wait instead of failing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use pir_client::Transport;
use pir_server::ServerOptions;
use support::{read_until_closed, request, Fixed, Server};
use tokio::io::AsyncWriteExt;

/// A server answering "ok" to requests of up to 64 KiB, with 800 ms header and body
/// timeouts, then `tune`d.
async fn start(tune: impl FnOnce(&mut ServerOptions)) -> Server {
    let mut options = support::options();
    options.header_timeout = Duration::from_millis(800);
    options.body_timeout = Duration::from_millis(800);
    tune(&mut options);
    support::start(Arc::new(Fixed::new(64 * 1024)), options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_headers_and_idle_connections_are_closed_while_others_are_served() {
    let server = start(|_| {}).await;
    let mut slow = server.raw().await;
    slow.write_all(b"POST /pir/v1 HTTP/1.1\r\nHost: x\r\n")
        .await
        .unwrap();
    let mut idle = server.raw().await;
    // Others are served meanwhile.
    let client = server.client();
    for _ in 0..5 {
        client.exchange(0, request(), 4096).await.unwrap();
    }
    let (_, slow_after) = read_until_closed(&mut slow).await;
    let (_, idle_after) = read_until_closed(&mut idle).await;
    assert!(slow_after < Duration::from_secs(5), "{slow_after:?}");
    assert!(idle_after < Duration::from_secs(5), "{idle_after:?}");
    client.exchange(0, request(), 4096).await.unwrap();
    server.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_and_slow_bodies_are_refused() {
    let server = start(|_| {}).await;
    // 100 MB announced: 413 before a byte of the body is read.
    let (reply, _) = server
        .send_raw(b"POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\nConnection: close\r\n\r\n")
        .await;
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");

    // A body that trickles: 408 after the body timeout.
    let (reply, after) = server
        .send_raw(b"POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n0123456789")
        .await;
    assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
    assert!(after < Duration::from_secs(5), "{after:?}");

    // A chunked body that grows past the limit: 413 too.
    let mut chunked = server.raw().await;
    chunked
        .write_all(b"POST /pir/v1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
        .await
        .unwrap();
    let chunk = vec![b'a'; 16 * 1024];
    for _ in 0..8 {
        let mut piece = format!("{:x}\r\n", chunk.len()).into_bytes();
        piece.extend_from_slice(&chunk);
        piece.extend_from_slice(b"\r\n");
        if chunked.write_all(&piece).await.is_err() {
            break;
        }
    }
    let (reply, _) = read_until_closed(&mut chunked).await;
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");

    // The server goes on serving.
    server.client().exchange(0, request(), 4096).await.unwrap();
    server.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_full_connection_table_makes_new_clients_wait_not_fail() {
    let server = start(|options| {
        options.max_connections = 2;
        options.header_timeout = Duration::from_millis(1500);
    })
    .await;
    let _a = server.raw().await;
    let _b = server.raw().await;
    // Both slots are held by idle connections: a third client waits until the header timeout
    // frees one, then is served.
    let start = Instant::now();
    let client = server.client();
    client.exchange(0, request(), 4096).await.unwrap();
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(1000), "{waited:?}");
    assert!(waited < Duration::from_secs(8), "{waited:?}");
    server.running.shutdown().await;
}
