//! The abusive connections of a load run: slowloris, idle, and bad bodies (100 MB announced,
//! trickling, malformed), each counting how the server dealt with it.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pir_core::wire;
use pir_keys::PublicKey;
use rand::Rng;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// What the abusive connections saw.
#[derive(Default)]
pub(super) struct AbuseTally {
    slow_closed: AtomicU64,
    slow_open_at_end: AtomicU64,
    idle_closed: AtomicU64,
    idle_open_at_end: AtomicU64,
    big_refused: AtomicU64,
    big_other: AtomicU64,
    trickle_refused: AtomicU64,
    trickle_other: AtomicU64,
    malformed_refused: AtomicU64,
    malformed_other: AtomicU64,
    close_seconds_max: Mutex<f64>,
}

type Tls = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

async fn raw_connection(addr: &str, key: PublicKey) -> Option<Tls> {
    let config = pir_keys::tls::client_config(key).ok()?;
    let connector = tokio_rustls::TlsConnector::from(config);
    let tcp = tokio::time::timeout(
        Duration::from_secs(10),
        tokio::net::TcpStream::connect(addr),
    )
    .await
    .ok()?
    .ok()?;
    tokio::time::timeout(
        Duration::from_secs(10),
        connector.connect(pir_keys::tls::server_name(), tcp),
    )
    .await
    .ok()?
    .ok()
}

/// Waits until the server closes `stream` or `stop` is set; true when the server closed it.
async fn closed_by_server(stream: &mut Tls, stop: &AtomicBool, trickle: bool) -> bool {
    let mut buf = [0u8; 1024];
    loop {
        if stop.load(Ordering::Relaxed) {
            return false;
        }
        match tokio::time::timeout(Duration::from_secs(1), stream.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return true,
            Ok(Ok(_)) => {}
            Err(_) => {
                if trickle && stream.write_all(b"X").await.is_err() {
                    return true;
                }
            }
        }
    }
}

/// The HTTP status line of whatever the server replies on `stream`, if any, within 30 s.
async fn status_of(stream: &mut Tls) -> Option<u16> {
    let mut reply = Vec::new();
    let mut buf = [0u8; 1024];
    let deadline = Instant::now() + Duration::from_secs(30);
    while !reply.windows(2).any(|w| w == b"\r\n") && Instant::now() < deadline {
        match tokio::time::timeout(Duration::from_secs(30), stream.read(&mut buf)).await {
            Ok(Ok(n)) if n > 0 => reply.extend_from_slice(&buf[..n]),
            _ => break,
        }
    }
    let line = String::from_utf8_lossy(&reply);
    line.split_whitespace().nth(1)?.parse().ok()
}

/// Notes how long the server took to close a connection opened at `since`.
fn note_close(tally: &AbuseTally, since: Instant) {
    let mut max = tally
        .close_seconds_max
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    *max = max.max(since.elapsed().as_secs_f64());
}

/// One abusive connection after another until `stop`: each sends `prefix`, then one byte a
/// second if `trickle` (else nothing), and is counted in the first of `counters` when the
/// server closes it, in the second when it is still open at the end.
async fn hold_connections(
    (addr, key, stop, tally): (String, PublicKey, Arc<AtomicBool>, Arc<AbuseTally>),
    prefix: &'static [u8],
    trickle: bool,
    counters: fn(&AbuseTally) -> (&AtomicU64, &AtomicU64),
) {
    while !stop.load(Ordering::Relaxed) {
        let Some(mut s) = raw_connection(&addr, key).await else {
            tokio::time::sleep(Duration::from_millis(200)).await;
            continue;
        };
        let since = Instant::now();
        let _ = s.write_all(prefix).await;
        let (closed, open) = counters(&tally);
        if closed_by_server(&mut s, &stop, trickle).await {
            closed.fetch_add(1, Ordering::Relaxed);
            note_close(&tally, since);
        } else {
            open.fetch_add(1, Ordering::Relaxed);
        }
    }
}

/// Starts the abusive connections; they run until `stop`.
pub(super) fn start_abuse(
    addr: String,
    key: PublicKey,
    count: usize,
    stop: Arc<AtomicBool>,
    tally: Arc<AbuseTally>,
) -> tokio::task::JoinSet<()> {
    let mut tasks = tokio::task::JoinSet::new();
    for k in 0..count {
        // Slowloris: a header that never ends, one byte a second.
        tasks.spawn(hold_connections(
            (addr.clone(), key, stop.clone(), tally.clone()),
            b"POST /pir/v1 HTTP/1.1\r\nHost: x\r\n",
            true,
            |t| (&t.slow_closed, &t.slow_open_at_end),
        ));
        // Idle: a connection that says nothing.
        tasks.spawn(hold_connections(
            (addr.clone(), key, stop.clone(), tally.clone()),
            b"",
            false,
            |t| (&t.idle_closed, &t.idle_open_at_end),
        ));
        // Bodies: 100 MB announced, or a body that trickles; every other one malformed.
        let (addr2, stop2, tally2) = (addr.clone(), stop.clone(), tally.clone());
        tasks.spawn(async move {
            let mut round = k;
            while !stop2.load(Ordering::Relaxed) {
                round += 1;
                let Some(mut s) = raw_connection(&addr2, key).await else {
                    tokio::time::sleep(Duration::from_millis(200)).await;
                    continue;
                };
                match round % 3 {
                    0 => {
                        let head = "POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: \
                                    100000000\r\nConnection: close\r\n\r\n";
                        let _ = s.write_all(head.as_bytes()).await;
                        // Push body bytes until the server answers or closes.
                        let chunk = vec![0u8; 64 * 1024];
                        let _ = tokio::time::timeout(Duration::from_millis(500), async {
                            while s.write_all(&chunk).await.is_ok() {}
                        })
                        .await;
                        match status_of(&mut s).await {
                            Some(413) => tally2.big_refused.fetch_add(1, Ordering::Relaxed),
                            _ => tally2.big_other.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    1 => {
                        let head = "POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: \
                                    1000\r\nConnection: close\r\n\r\n0123";
                        let _ = s.write_all(head.as_bytes()).await;
                        match status_of(&mut s).await {
                            Some(408) => tally2.trickle_refused.fetch_add(1, Ordering::Relaxed),
                            _ => tally2.trickle_other.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                    _ => {
                        let mut body = vec![0u8; 200 + round % 700];
                        rand::rng().fill(&mut body[..]);
                        if round % 2 == 0 {
                            body[..4].copy_from_slice(&wire::MAGIC);
                        }
                        let head = format!(
                            "POST /pir/v1 HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\
                             Connection: close\r\n\r\n",
                            body.len()
                        );
                        let _ = s.write_all(head.as_bytes()).await;
                        let _ = s.write_all(&body).await;
                        match status_of(&mut s).await {
                            Some(400..=499) => {
                                tally2.malformed_refused.fetch_add(1, Ordering::Relaxed)
                            }
                            _ => tally2.malformed_other.fetch_add(1, Ordering::Relaxed),
                        };
                    }
                }
            }
        });
    }
    tasks
}

/// What the abusive connections saw, once they are gone.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct AbuseCounts {
    /// Slowloris connections the server closed.
    pub slow_closed: u64,
    /// Slowloris connections still open when the run ended.
    pub slow_open_at_end: u64,
    /// Idle connections the server closed.
    pub idle_closed: u64,
    /// Idle connections still open when the run ended.
    pub idle_open_at_end: u64,
    /// 100 MB bodies refused with 413.
    pub big_refused: u64,
    /// 100 MB bodies that got anything else.
    pub big_other: u64,
    /// Trickling bodies refused with 408.
    pub trickle_refused: u64,
    /// Trickling bodies that got anything else.
    pub trickle_other: u64,
    /// Malformed envelopes refused with a 4xx.
    pub malformed_refused: u64,
    /// Malformed envelopes that got anything else.
    pub malformed_other: u64,
    /// Longest time a slow or idle connection stayed open before the server closed it.
    pub longest_until_closed_s: f64,
}

impl AbuseTally {
    pub(super) fn counts(&self) -> AbuseCounts {
        let load = |c: &AtomicU64| c.load(Ordering::Relaxed);
        AbuseCounts {
            slow_closed: load(&self.slow_closed),
            slow_open_at_end: load(&self.slow_open_at_end),
            idle_closed: load(&self.idle_closed),
            idle_open_at_end: load(&self.idle_open_at_end),
            big_refused: load(&self.big_refused),
            big_other: load(&self.big_other),
            trickle_refused: load(&self.trickle_refused),
            trickle_other: load(&self.trickle_other),
            malformed_refused: load(&self.malformed_refused),
            malformed_other: load(&self.malformed_other),
            longest_until_closed_s: *self
                .close_seconds_max
                .lock()
                .unwrap_or_else(|p| p.into_inner()),
        }
    }
}
