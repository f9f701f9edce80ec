//! The NBD export as a library, over real sockets: who can connect (Unix socket mode, TLS
//! with a pre-shared key), the limits (handshake and idle timeouts, the connection cap), and
//! honest failure when the store breaks.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use common::*;
use openssl::ssl::{Ssl, SslContext, SslMethod, SslVerifyMode};
use pir_blockstore::nbd::export::{ExportError, ExportOptions};
use pir_blockstore::nbd::listen::Listener;
use pir_blockstore::nbd::psk::{self, PskKeys};
use tokio::io::AsyncReadExt;
use tokio::net::{TcpStream, UnixStream};
use tokio_openssl::SslStream;

/// Set by `a_second_local_user_cannot_open_the_socket` when it re-runs this binary as another
/// user: the socket to try.
const CONNECT_AS_OTHER: &str = "PIR_TEST_NBD_CONNECT";

/// Not a test of its own: the child half of the second-user test. Exits 0 if it could
/// connect, 3 if the kernel said "permission denied", 4 otherwise.
#[test]
fn connect_as_other_user_helper() {
    let Ok(path) = std::env::var(CONNECT_AS_OTHER) else {
        return;
    };
    match std::os::unix::net::UnixStream::connect(path) {
        Ok(_) => std::process::exit(0),
        Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => std::process::exit(3),
        Err(_) => std::process::exit(4),
    }
}

fn try_as_nobody(socket: &std::path::Path) -> i32 {
    // A copy of this test binary beside the socket: the build directory may be one that
    // uid 65534 cannot enter (a checkout under /root).
    let helper = socket.with_file_name("helper");
    if !helper.exists() {
        std::fs::copy(std::env::current_exe().unwrap(), &helper).unwrap();
        std::fs::set_permissions(&helper, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let status = std::process::Command::new("setpriv")
        .args(["--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(&helper)
        .args(["--exact", "connect_as_other_user_helper", "--nocapture"])
        .env(CONNECT_AS_OTHER, socket)
        .status()
        .expect("setpriv (util-linux) runs");
    status.code().unwrap_or(-1)
}

#[tokio::test]
async fn a_second_local_user_cannot_open_the_socket() {
    let dir = tempfile::tempdir().unwrap();
    let disk = disk(dir.path(), 1 << 20, 4096);
    // A directory anyone may enter: only the socket's own mode keeps others out.
    let public = dir.path().join("public");
    std::fs::create_dir(&public).unwrap();
    for p in [dir.path(), public.as_path()] {
        std::fs::set_permissions(p, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
    let socket = public.join("nbd.sock");
    let running = Running::start(
        disk,
        Listener::unix(&socket).unwrap(),
        ExportOptions::default(),
    );
    let mode = std::fs::metadata(&socket).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    // The owner connects and moves data.
    let mut s = UnixStream::connect(&socket).await.unwrap();
    greet(&mut s).await.unwrap();
    go(&mut s).await.unwrap();
    let data: Vec<u8> = (0..9000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(write_flush_read(&mut s, 1000, &data).await, data);
    drop(s);
    if !is_root() {
        assert!(
            std::env::var_os("CI").is_none(),
            "in CI this test runs as root, to act as uid 65534"
        );
        eprintln!("skipping the second-user half: it needs root (setpriv to uid 65534)");
    } else {
        assert_eq!(try_as_nobody(&socket), 3, "uid 65534 must get EACCES");
        // The control: with the mode opened up, the same child connects, so the refusal
        // above is the socket's mode and nothing else.
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666)).unwrap();
        assert_eq!(try_as_nobody(&socket), 0, "the control could not connect");
    }
    running.stop().await.unwrap();
    assert!(!socket.exists(), "the socket is removed on stop");
}

fn psk_server(keys: &str) -> SslContext {
    psk::server_context(Arc::new(PskKeys::parse(keys).map_err(|e| e.1).unwrap())).unwrap()
}

/// A TLS client: with `Some((identity, key))` it offers that PSK, with `None` it expects a
/// certificate like an ordinary TLS client.
fn tls_client(psk: Option<(&'static str, Vec<u8>)>) -> Ssl {
    let mut b = SslContext::builder(SslMethod::tls_client()).unwrap();
    b.set_verify(SslVerifyMode::NONE);
    if let Some((identity, key)) = psk {
        b.set_psk_client_callback(move |_, _, id_out, key_out| {
            id_out[..identity.len()].copy_from_slice(identity.as_bytes());
            id_out[identity.len()] = 0;
            key_out[..key.len()].copy_from_slice(&key);
            Ok(key.len())
        });
    }
    Ssl::new(&b.build()).unwrap()
}

/// Connects, asks for STARTTLS and runs the handshake; the stream if TLS came up.
async fn starttls(
    addr: std::net::SocketAddr,
    psk: Option<(&'static str, Vec<u8>)>,
) -> Option<SslStream<TcpStream>> {
    let mut s = TcpStream::connect(addr).await.unwrap();
    greet(&mut s).await.unwrap();
    option(&mut s, OPT_STARTTLS, &[]).await;
    assert_eq!(option_reply(&mut s).await.unwrap().0, REP_ACK);
    let mut tls = SslStream::new(tls_client(psk), s).unwrap();
    let up = Pin::new(&mut tls).connect().await.is_ok();
    if !up {
        return None;
    }
    // TLS 1.3: the server checks the binder before its Finished, so a wrong key cannot get
    // this far; still, prove the export answers only now.
    go(&mut tls).await.ok().map(|()| tls)
}

#[tokio::test]
async fn tls_psk_refuses_clients_without_the_key_before_any_block() {
    let dir = tempfile::tempdir().unwrap();
    let disk = disk(dir.path(), 1 << 20, 4096);
    let key = vec![0x5a; 32];
    let options = ExportOptions {
        tls: Some(psk_server(&format!("alice:{}\n", hex::encode(&key)))),
        ..ExportOptions::default()
    };
    let listener = Listener::tcp("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let running = Running::start(disk, listener, options);

    // Plaintext: every option but STARTTLS is refused with TLS_REQD; nothing is served.
    let mut plain = TcpStream::connect(addr).await.unwrap();
    greet(&mut plain).await.unwrap();
    assert_eq!(go(&mut plain).await, Err(REP_ERR_TLS_REQD));
    // Wrong key, unknown user, no PSK at all: the handshake fails.
    assert!(starttls(addr, Some(("alice", vec![0x5b; 32])))
        .await
        .is_none());
    assert!(starttls(addr, Some(("mallory", key.clone())))
        .await
        .is_none());
    assert!(starttls(addr, None).await.is_none());
    assert_eq!(running.stats.jobs_run.load(Ordering::Relaxed), 0);
    // The right key: data goes in and out.
    let mut tls = starttls(addr, Some(("alice", key)))
        .await
        .expect("TLS with the key");
    let data = vec![7u8; 5000];
    assert_eq!(write_flush_read(&mut tls, 4096, &data).await, data);
    drop(tls);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn slow_handshakes_idle_connections_and_extra_connections_are_closed() {
    let dir = tempfile::tempdir().unwrap();
    let disk = disk(dir.path(), 1 << 20, 4096);
    let options = ExportOptions {
        max_connections: 2,
        handshake_timeout: Duration::from_millis(300),
        idle_timeout: Some(Duration::from_millis(300)),
        ..ExportOptions::default()
    };
    let listener = Listener::tcp("127.0.0.1:0".parse().unwrap()).await.unwrap();
    let addr = listener.local_addr().unwrap();
    let running = Running::start(disk, listener, options);
    // Generous bound so a broken timeout fails the test instead of hanging it.
    let closed = |mut s: TcpStream| async move {
        let mut rest = Vec::new();
        tokio::time::timeout(Duration::from_secs(60), s.read_to_end(&mut rest))
            .await
            .expect("the server must close the connection")
            .is_ok()
    };
    // A client that never finishes the handshake is dropped.
    let mut slow = TcpStream::connect(addr).await.unwrap();
    let mut greeting = [0u8; 18];
    slow.read_exact(&mut greeting).await.unwrap();
    assert!(closed(slow).await);
    // An idle client in transmission is dropped.
    let mut idle = TcpStream::connect(addr).await.unwrap();
    greet(&mut idle).await.unwrap();
    go(&mut idle).await.unwrap();
    assert!(closed(idle).await);
    // Two connections held open; a third is closed at once, without a greeting.
    let mut held = Vec::new();
    for _ in 0..2 {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.read_exact(&mut greeting).await.unwrap();
        held.push(s);
    }
    let mut third = TcpStream::connect(addr).await.unwrap();
    let mut first = [0u8; 1];
    let got = tokio::time::timeout(Duration::from_secs(60), third.read(&mut first))
        .await
        .unwrap();
    assert!(
        matches!(got, Ok(0) | Err(_)),
        "the third connection was served"
    );
    assert_eq!(running.stats.connections_refused.load(Ordering::Relaxed), 1);
    drop(held);
    running.stop().await.unwrap();
}

#[tokio::test]
async fn a_failed_store_stops_the_export_and_says_so() {
    let dir = tempfile::tempdir().unwrap();
    let disk = disk(dir.path(), 1 << 20, 4096);
    let socket = dir.path().join("nbd.sock");
    let running = Running::start(
        disk,
        Listener::unix(&socket).unwrap(),
        ExportOptions::default(),
    );
    let mut s = UnixStream::connect(&socket).await.unwrap();
    greet(&mut s).await.unwrap();
    go(&mut s).await.unwrap();
    let data = vec![3u8; 1 << 20];
    assert_eq!(write_flush_read(&mut s, 0, &data).await, data);
    // The store loses its slots under the running export.
    let slots = dir.path().join("store").join("slots");
    std::fs::OpenOptions::new()
        .write(true)
        .open(&slots)
        .unwrap()
        .set_len(0)
        .unwrap();
    // Reading the whole disk must touch the store (no cache holds it all): EIO, unless the
    // export's idle background shuffling met the failed store first and already closed
    // the connection (then no reply comes; the export must still stop as below).
    if send(&mut s, 0, 9, 0, 1 << 20, &[]).await.is_ok() {
        if let Ok((error, cookie, _)) = reply(&mut s, 1 << 20).await {
            assert_eq!((error, cookie), (5, 9), "EIO for the failed read");
        }
    }
    // The export stops on its own, reports the failure instead of a clean close, and takes
    // no new handshakes.
    let ended = tokio::time::timeout(Duration::from_secs(60), running.task)
        .await
        .expect("the export must stop after the store failed")
        .unwrap();
    assert!(matches!(ended, Err(ExportError::Failed(_))), "{ended:?}");
    assert!(UnixStream::connect(&socket).await.is_err());
}

#[tokio::test]
async fn a_shutdown_past_the_grace_period_is_reported_not_called_clean() {
    let dir = tempfile::tempdir().unwrap();
    let disk = disk(dir.path(), 16 << 20, 4096);
    let socket = dir.path().join("nbd.sock");
    let options = ExportOptions {
        grace: Duration::from_millis(1),
        ..ExportOptions::default()
    };
    let running = Running::start(disk, Listener::unix(&socket).unwrap(), options);
    let mut s = UnixStream::connect(&socket).await.unwrap();
    greet(&mut s).await.unwrap();
    go(&mut s).await.unwrap();
    // Zero the whole disk (4,096 block writes), then a flush: far more than 1 ms of work.
    send(&mut s, 6, 1, 0, 16 << 20, &[]).await.unwrap();
    send(&mut s, 3, 2, 0, 0, &[]).await.unwrap();
    while running.stats.jobs_run.load(Ordering::Relaxed) == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let ended = running.stop().await;
    assert!(matches!(ended, Err(ExportError::Grace(_))), "{ended:?}");
}
