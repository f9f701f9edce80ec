//! The local proxies' listener (`pir_server::local`): only loopback `Host` names reach the
//! handler (DNS rebinding), a `100 Continue` whose body never comes is cut off, idle
//! connections beyond the cap cannot lock out a client with a request, bodies are bounded,
//! and it binds only loopback addresses.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use pir_server::local::{LocalOptions, RunningLocal};
use tokio::io::AsyncWriteExt;
use tokio::net::TcpStream;

/// A listener whose handler answers "LEN BYTES" and counts its calls.
async fn start(tune: impl FnOnce(&mut LocalOptions)) -> (RunningLocal, Arc<AtomicUsize>) {
    let mut options = LocalOptions::new("127.0.0.1:0".parse().unwrap());
    options.header_timeout = Duration::from_millis(800);
    options.body_timeout = Duration::from_millis(800);
    options.max_body_bytes = 1024;
    tune(&mut options);
    let calls = Arc::new(AtomicUsize::new(0));
    let counted = calls.clone();
    let running = pir_server::local::start(options, move |request: http::Request<Bytes>| {
        let calls = counted.clone();
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            http::Response::new(Bytes::from(format!("{} bytes", request.body().len())))
        }
    })
    .await
    .unwrap();
    (running, calls)
}

/// Sends `request` and reads until the listener closes (at most 10 s).
async fn exchange(addr: std::net::SocketAddr, request: &str) -> String {
    let mut stream = TcpStream::connect(addr).await.unwrap();
    stream.write_all(request.as_bytes()).await.unwrap();
    read_until_closed(&mut stream).await
}

async fn read_until_closed(stream: &mut TcpStream) -> String {
    support::read_until_closed(stream).await.0
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_loopback_host_names_reach_the_handler() {
    let (running, calls) = start(|_| {}).await;
    let port = running.addr.port();
    for host in [
        "localhost".to_string(),
        format!("localhost:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::1]:{port}"),
    ] {
        let reply = exchange(
            running.addr,
            &format!("GET /status HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n"),
        )
        .await;
        assert!(reply.starts_with("HTTP/1.1 200"), "{host}: {reply}");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    // A page that rebound its own name to 127.0.0.1 sends that name.
    for request in [
        format!("GET /status HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n"),
        "GET /status HTTP/1.1\r\nHost: evil.example\r\nConnection: close\r\n\r\n".to_string(),
        "GET http://evil.example/status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n"
            .to_string(),
        "GET /status HTTP/1.1\r\nHost: localhost\r\nHost: evil.example\r\nConnection: close\r\n\r\n"
            .to_string(),
    ] {
        let reply = exchange(running.addr, &request).await;
        assert!(reply.starts_with("HTTP/1.1 421"), "{request}: {reply}");
    }
    let reply = exchange(running.addr, "GET /status HTTP/1.0\r\n\r\n").await;
    assert!(
        reply.starts_with("HTTP/1.0 400") || reply.starts_with("HTTP/1.1 400"),
        "{reply}"
    );
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "no refused request reached the handler"
    );
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_continue_without_a_body_is_cut_off() {
    let (running, calls) = start(|_| {}).await;
    let started = Instant::now();
    let reply = exchange(
        running.addr,
        "POST /v4/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n",
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 100 Continue"), "{reply}");
    assert!(reply.contains("HTTP/1.1 408"), "{reply}");
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!(calls.load(Ordering::SeqCst), 0);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_are_bounded() {
    let (running, calls) = start(|_| {}).await;
    let reply = exchange(
        running.addr,
        "POST /v4/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 5000\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 413"), "{reply}");
    let reply = exchange(
        running.addr,
        "POST /v4/x HTTP/1.1\r\nHost: localhost\r\nContent-Length: 3\r\nConnection: close\r\n\r\nabc",
    )
    .await;
    assert!(
        reply.starts_with("HTTP/1.1 200") && reply.ends_with("3 bytes"),
        "{reply}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_connections_beyond_the_cap_do_not_lock_out_a_request() {
    // Timeouts far longer than the test: only the cap's eviction can make room.
    let (running, calls) = start(|options| {
        options.max_connections = 8;
        options.header_timeout = Duration::from_secs(60);
    })
    .await;
    let mut idle = Vec::new();
    for _ in 0..40 {
        idle.push(TcpStream::connect(running.addr).await.unwrap());
    }
    tokio::time::sleep(Duration::from_millis(200)).await;
    let reply = exchange(
        running.addr,
        "GET /status HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n",
    )
    .await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert_eq!(calls.load(Ordering::SeqCst), 1);
    // The oldest idle connections were closed to make room.
    assert_eq!(read_until_closed(&mut idle[0]).await, "");
    running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_loopback_addresses_are_bound() {
    let options = LocalOptions::new("0.0.0.0:0".parse().unwrap());
    let refused = pir_server::local::start(options, |_request| async {
        http::Response::new(Bytes::new())
    })
    .await;
    assert!(refused.is_err());
}
