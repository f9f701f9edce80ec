//! Abusive clients do not stop others from being served: slow headers (slowloris), idle
//! connections, slow and oversized bodies are cut off by the runtime's bounds, and a full
//! connection table makes new clients wait instead of failing.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::Arc;
use std::time::{Duration, Instant};

use pir_client::{HttpsTransport, Transport};
use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::{PublicKey, SecretKey};
use pir_server::ServerOptions;
use pir_service::{Handler, Metrics, Reply};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Answers every request at once.
struct Echo {
    metrics: Metrics,
}

impl Handler for Echo {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        requests
            .iter()
            .map(|_| Reply {
                status: 200,
                body: wire::encode_envelope(SchemeId::Control, MessageKind::Manifest, b"ok"),
            })
            .collect()
    }
    fn max_request_bytes(&self) -> usize {
        64 * 1024
    }
    fn health(&self) -> String {
        "ok\n".into()
    }
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

struct Server {
    running: pir_server::RunningServer,
    key: PublicKey,
}

async fn start(tune: impl FnOnce(&mut ServerOptions)) -> Server {
    let key = SecretKey::generate().unwrap();
    let mut options = ServerOptions::new("127.0.0.1:0".parse().unwrap());
    options.header_timeout = Duration::from_millis(800);
    options.body_timeout = Duration::from_millis(800);
    tune(&mut options);
    let tls = pir_keys::tls::server_config(&key).unwrap();
    let handler = Echo {
        metrics: Metrics::default(),
    };
    let running = pir_server::start(Arc::new(handler), tls, options)
        .await
        .unwrap();
    Server {
        running,
        key: key.public(),
    }
}

impl Server {
    fn client(&self) -> HttpsTransport {
        HttpsTransport::new(&[(format!("https://{}", self.running.addr), self.key)]).unwrap()
    }

    /// A TLS connection on which the test writes raw HTTP.
    async fn raw(&self) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
        let config = pir_keys::tls::client_config(self.key).unwrap();
        let connector = tokio_rustls::TlsConnector::from(config);
        let tcp = tokio::net::TcpStream::connect(self.running.addr)
            .await
            .unwrap();
        connector
            .connect(pir_keys::tls::server_name(), tcp)
            .await
            .unwrap()
    }
}

fn request() -> Vec<u8> {
    wire::encode_envelope(SchemeId::Control, MessageKind::ManifestRequest, &[])
}

/// Reads until the server closes (or 10 s pass); returns what it sent and when it closed.
async fn read_until_closed(
    stream: &mut tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
) -> (String, Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the server kept the connection open for 10 s"),
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
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
    let mut big = server.raw().await;
    big.write_all(
        b"POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\nConnection: close\r\n\r\n",
    )
    .await
    .unwrap();
    let (reply, _) = read_until_closed(&mut big).await;
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");

    // A body that trickles: 408 after the body timeout.
    let mut trickle = server.raw().await;
    trickle
        .write_all(
            b"POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\nConnection: close\r\n\r\n0123456789",
        )
        .await
        .unwrap();
    let (reply, after) = read_until_closed(&mut trickle).await;
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
