//! Graceful shutdown: a request in flight when the server is told to stop still gets its
//! reply; the server then refuses new connections; a request that outlives the grace period
//! is cut off instead of holding the shutdown forever.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::Arc;
use std::time::Duration;

use pir_client::{HttpsTransport, Transport};
use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::SecretKey;
use pir_server::ServerOptions;
use pir_service::{Handler, Metrics, Reply};

/// Answers every request after `delay`, as a slow scan would.
struct Slow {
    delay: Duration,
    metrics: Metrics,
}

impl Handler for Slow {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        std::thread::sleep(self.delay);
        requests
            .iter()
            .map(|_| Reply {
                status: 200,
                body: wire::encode_envelope(SchemeId::Control, MessageKind::Manifest, b"done"),
            })
            .collect()
    }
    fn max_request_bytes(&self) -> usize {
        1024
    }
    fn health(&self) -> String {
        "ok\n".into()
    }
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
}

async fn start(delay: Duration, grace: Duration) -> (pir_server::RunningServer, HttpsTransport) {
    let key = SecretKey::generate().unwrap();
    let handler = Slow {
        delay,
        metrics: Metrics::default(),
    };
    let mut options = ServerOptions::new("127.0.0.1:0".parse().unwrap());
    options.grace = grace;
    let tls = pir_keys::tls::server_config(&key).unwrap();
    let running = pir_server::start(Arc::new(handler), tls, options)
        .await
        .unwrap();
    let url = format!("https://{}", running.addr);
    let transport = HttpsTransport::new(&[(url, key.public())]).unwrap();
    (running, transport)
}

fn request() -> Vec<u8> {
    wire::encode_envelope(SchemeId::Control, MessageKind::ManifestRequest, &[])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_in_flight_is_answered_before_the_server_stops() {
    let (running, transport) = start(Duration::from_millis(600), Duration::from_secs(20)).await;
    let addr = running.addr;
    let transport = Arc::new(transport);
    let client = transport.clone();
    let in_flight = tokio::spawn(async move { client.exchange(0, request(), 4096).await });
    // Let the request reach the server, then stop it while the request is being answered.
    tokio::time::sleep(Duration::from_millis(200)).await;
    running.shutdown().await;
    let reply = in_flight
        .await
        .unwrap()
        .expect("the request in flight was answered");
    let envelope = wire::decode_envelope(&reply, reply.len()).unwrap();
    assert_eq!(envelope.body, b"done");
    assert!(
        tokio::net::TcpStream::connect(addr).await.is_err(),
        "a stopped server accepts no new connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_longer_than_the_grace_period_is_cut_off() {
    let (running, transport) = start(Duration::from_secs(3), Duration::from_millis(100)).await;
    let transport = Arc::new(transport);
    let client = transport.clone();
    let in_flight = tokio::spawn(async move { client.exchange(0, request(), 4096).await });
    tokio::time::sleep(Duration::from_millis(200)).await;
    running.shutdown().await;
    assert!(
        in_flight.await.unwrap().is_err(),
        "the connection was closed at the end of the grace period"
    );
}
