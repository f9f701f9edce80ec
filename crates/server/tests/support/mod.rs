//! Shared set-up of the runtime's integration tests: a handler that answers every request with
//! one fixed envelope, a server of it on a free port of 127.0.0.1 with a fresh key, its clients
//! (the real one and raw TLS), and reading a connection until it is closed.

#![allow(dead_code)] // each test binary uses its own part

use std::sync::Arc;
use std::time::{Duration, Instant};

use pir_client::HttpsTransport;
use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::{PublicKey, SecretKey};
use pir_server::ServerOptions;
use pir_service::{Handler, Metrics, Reply};
use tokio::io::{AsyncRead, AsyncReadExt};

/// Answers every request with a manifest envelope of `body`, after `delay` (a slow scan).
pub struct Fixed {
    pub body: &'static [u8],
    pub max_request_bytes: usize,
    pub delay: Duration,
    pub metrics: Metrics,
}

impl Fixed {
    /// Answers "ok" at once to requests of at most `max_request_bytes`.
    pub fn new(max_request_bytes: usize) -> Fixed {
        Fixed {
            body: b"ok",
            max_request_bytes,
            delay: Duration::ZERO,
            metrics: Metrics::default(),
        }
    }
}

impl Handler for Fixed {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        std::thread::sleep(self.delay);
        replies(requests.len(), self.body)
    }
    fn max_request_bytes(&self) -> usize {
        self.max_request_bytes
    }
    fn health(&self) -> String {
        "ok\n".into()
    }
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

/// `count` replies of status 200, each a manifest envelope of `body`.
pub fn replies(count: usize, body: &[u8]) -> Vec<Reply> {
    (0..count)
        .map(|_| Reply {
            status: 200,
            body: wire::encode_envelope(SchemeId::Control, MessageKind::Manifest, body),
        })
        .collect()
}

/// Options for a server on a free port of 127.0.0.1.
pub fn options() -> ServerOptions {
    ServerOptions::new("127.0.0.1:0".parse().unwrap())
}

/// A running server and the public key its clients pin.
pub struct Server {
    pub running: pir_server::RunningServer,
    pub key: PublicKey,
}

/// Starts `handler` with `options` and a fresh key.
pub async fn start<H: Handler>(handler: Arc<H>, options: ServerOptions) -> Server {
    let key = SecretKey::generate().unwrap();
    let tls = pir_keys::tls::server_config(&key).unwrap();
    let running = pir_server::start(handler, tls, options).await.unwrap();
    Server {
        running,
        key: key.public(),
    }
}

impl Server {
    /// The real client of this one server.
    pub fn client(&self) -> HttpsTransport {
        HttpsTransport::new(&[(format!("https://{}", self.running.addr), self.key)]).unwrap()
    }

    /// Writes `bytes` on a new raw TLS connection and reads until the server closes it; what
    /// it sent and when it closed (as [`read_until_closed`]).
    pub async fn send_raw(&self, bytes: &[u8]) -> (String, Duration) {
        let mut stream = self.raw().await;
        tokio::io::AsyncWriteExt::write_all(&mut stream, bytes)
            .await
            .unwrap();
        read_until_closed(&mut stream).await
    }

    /// A TLS connection on which the test writes raw HTTP.
    pub async fn raw(&self) -> tokio_rustls::client::TlsStream<tokio::net::TcpStream> {
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

/// A manifest request: the smallest valid request.
pub fn request() -> Vec<u8> {
    wire::encode_envelope(SchemeId::Control, MessageKind::ManifestRequest, &[])
}

/// Reads until the peer closes `stream` (or 10 s pass, which fails the test); returns what it
/// sent and when it closed.
pub async fn read_until_closed<S: AsyncRead + Unpin>(stream: &mut S) -> (String, Duration) {
    let start = Instant::now();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match tokio::time::timeout(Duration::from_secs(10), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => break,
            Ok(Ok(n)) => out.extend_from_slice(&buf[..n]),
            Err(_) => panic!("the connection was kept open for 10 s"),
        }
    }
    (String::from_utf8_lossy(&out).into_owned(), start.elapsed())
}
