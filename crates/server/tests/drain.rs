//! Graceful shutdown: a request in flight when the server is told to stop still gets its
//! reply; the server then refuses new connections; a request that outlives the grace period
//! is cut off instead of holding the shutdown forever.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::sync::Arc;
use std::time::Duration;

use pir_client::{HttpsTransport, Transport};
use pir_core::wire;
use support::{request, Fixed};

/// A server that answers "done" to every request after `delay`, as a slow scan would, and
/// stops within `grace`; and its client.
async fn start(delay: Duration, grace: Duration) -> (pir_server::RunningServer, HttpsTransport) {
    let handler = Fixed {
        body: b"done",
        delay,
        ..Fixed::new(1024)
    };
    let mut options = support::options();
    options.grace = grace;
    let server = support::start(Arc::new(handler), options).await;
    let transport = server.client();
    (server.running, transport)
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
