//! A connection cap above the open-file limit is lowered to what the limit allows, with a
//! reserve, for the HTTPS runtime and the local listener alike. Its own test binary: it lowers
//! the process's soft `RLIMIT_NOFILE`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::sync::Arc;

use pir_client::Transport;
use pir_server::limits::FD_RESERVE;
use rustix::process::{getrlimit, setrlimit, Resource, Rlimit};
use support::{request, Fixed};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn caps_above_the_open_file_limit_are_lowered() {
    let original = getrlimit(Resource::Nofile);
    let open = std::fs::read_dir("/proc/self/fd").unwrap().count();
    let soft = open + 300;
    setrlimit(
        Resource::Nofile,
        Rlimit {
            current: Some(soft as u64),
            maximum: original.maximum,
        },
    )
    .expect("lower the soft open-file limit");

    let options = support::options();
    assert_eq!(options.max_connections, pir_server::DEFAULT_MAX_CONNECTIONS);
    let server = support::start(Arc::new(Fixed::new(4096)), options).await;
    let cap = server.running.max_connections();
    assert!(cap <= 300 - FD_RESERVE, "cap {cap} under a limit of {soft}");
    assert!(cap >= 100, "cap {cap}: the room left is used");
    // It still serves.
    server.client().exchange(0, request(), 4096).await.unwrap();

    let mut local = pir_server::local::LocalOptions::new("127.0.0.1:0".parse().unwrap());
    local.max_connections = 100_000;
    let proxy = pir_server::local::start(local, |_request| async {
        http::Response::new(bytes::Bytes::from_static(b"ok"))
    })
    .await
    .unwrap();
    assert!(proxy.max_connections() <= 300 - FD_RESERVE);
    assert!(proxy.max_connections() >= 1);

    proxy.shutdown().await;
    server.running.shutdown().await;
    setrlimit(Resource::Nofile, original).unwrap();
}
