//! Limits of the HTTPS runtime beyond the basic timeouts (`abuse.rs`): a `100 Continue` whose
//! body never comes is cut off at the body timeout, and a request whose client hung up while it
//! waited for the batcher is dropped, not answered.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pir_client::{HttpsTransport, Transport};
use pir_service::{Handler, Metrics, Reply};
use support::{replies, request, Server};
use tokio::io::AsyncWriteExt;

/// Counts the requests it answers; the first pass waits until `open` is set.
#[derive(Default)]
struct Gate {
    metrics: Metrics,
    answered: AtomicUsize,
    entered: AtomicBool,
    open: AtomicBool,
}

impl Handler for Gate {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        self.entered.store(true, Ordering::SeqCst);
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.open.load(Ordering::SeqCst) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
        self.answered.fetch_add(requests.len(), Ordering::SeqCst);
        replies(requests.len(), b"ok")
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

async fn start(handler: Arc<Gate>) -> Server {
    let mut options = support::options();
    options.header_timeout = Duration::from_millis(800);
    options.body_timeout = Duration::from_millis(800);
    options.batch_window = Duration::ZERO;
    support::start(handler, options).await
}

fn post(body: &[u8]) -> Vec<u8> {
    let mut out = format!(
        "POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n",
        body.len()
    )
    .into_bytes();
    out.extend_from_slice(body);
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_100_continue_without_a_body_is_cut_off_at_the_body_timeout() {
    let gate = Arc::new(Gate::default());
    gate.open.store(true, Ordering::SeqCst);
    let server = start(gate).await;
    let (reply, after) = server
        .send_raw(b"POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\nExpect: 100-continue\r\n\r\n")
        .await;
    assert!(reply.starts_with("HTTP/1.1 100 Continue"), "{reply}");
    assert!(reply.contains("HTTP/1.1 408"), "{reply}");
    assert!(after < Duration::from_secs(5));
    server.running.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_whose_client_hung_up_is_not_answered() {
    let gate = Arc::new(Gate::default());
    let server = start(gate.clone()).await;
    let client: Arc<HttpsTransport> = Arc::new(server.client());
    // The first request holds the batcher.
    let first = {
        let client = client.clone();
        tokio::spawn(async move { client.exchange(0, request(), 4096).await })
    };
    for _ in 0..200 {
        if gate.entered.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        gate.entered.load(Ordering::SeqCst),
        "the first pass started"
    );
    // The second waits in the queue, and its client hangs up.
    let mut quitter = server.raw().await;
    quitter.write_all(&post(&request())).await.unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await;
    drop(quitter);
    tokio::time::sleep(Duration::from_millis(300)).await;
    gate.open.store(true, Ordering::SeqCst);
    first.await.unwrap().unwrap();
    // A third request after the pass: answered.
    client.exchange(0, request(), 4096).await.unwrap();
    assert_eq!(
        gate.answered.load(Ordering::SeqCst),
        2,
        "the request of the client that left was answered"
    );
    server.running.shutdown().await;
}
