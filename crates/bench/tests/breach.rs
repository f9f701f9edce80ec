//! The breach bench driver without the binary: the corpus it generates, and a small run of
//! [`pir_bench::breach::build`] and [`pir_bench::breach::measure`] against two breach servers
//! in this process (over `LocalTransport`).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::Arc;

use pir_bench::breach::{self, BenchServer, Options};
use pir_breach::database::BreachDatabase;
use pir_breach::service::{BreachBackend, BreachConfig};
use pir_breach::{BreachService, BreachSession};
use pir_client::LocalTransport;
use pir_keys::{PublicKey, SecretKey};

#[test]
fn the_corpus_is_deterministic_sorted_and_distinct() {
    let a = breach::generate(5000, 7);
    assert_eq!(a.len(), 5000);
    assert!(
        a.windows(2).all(|w| w[0].hash < w[1].hash),
        "not sorted or not distinct"
    );
    assert!(a.iter().all(|e| (1..=1000).contains(&e.count)));
    assert!(a.iter().any(|e| e.count > 1), "every count is 1");
    let b = breach::generate(5000, 7);
    assert!(a
        .iter()
        .zip(&b)
        .all(|(x, y)| x.hash == y.hash && x.count == y.count));
    let c = breach::generate(5000, 8);
    assert_ne!(a[0].hash, c[0].hash, "the seed changes nothing");
}

#[test]
fn misses_are_fresh_hashes() {
    let mut state = 11;
    let first = breach::generate_one(&mut state);
    assert_eq!(state, 12);
    let second = breach::generate_one(&mut state);
    assert_ne!(first, second);
    assert_eq!(breach::generate_one(&mut 11), first);
}

#[test]
fn a_build_needs_entries_and_checks() {
    let mut out = |_: String| {};
    let options = |entries, checks| Options {
        entries,
        seed: 1,
        checks,
        qdp_queue: 4,
        dir: None,
    };
    let e = breach::build(&options(0, 1), &mut out).unwrap_err();
    assert!(e.to_string().contains("--entries"), "{e}");
    let e = breach::build(&options(10, 0), &mut out).unwrap_err();
    assert!(e.to_string().contains("--checks"), "{e}");
}

struct Server {
    service: Arc<BreachService>,
    key: PublicKey,
}

impl BenchServer for Server {
    fn service(&self) -> Arc<BreachService> {
        self.service.clone()
    }

    fn public_key(&self) -> PublicKey {
        self.key
    }
}

fn server(built: &breach::Built, server: usize) -> Server {
    let (header, database) = BreachDatabase::open(built.db_path(), true)
        .unwrap()
        .into_parts();
    let key = SecretKey::generate().unwrap();
    let public = key.public();
    let config = BreachConfig::in_memory(database, header.encode().to_vec(), server, key);
    let service = BreachBackend::start(config).unwrap();
    Server {
        service: Arc::new(service),
        key: public,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_run_finds_every_hit_and_no_miss() {
    let work = tempfile::tempdir().unwrap();
    let options = Options {
        entries: 3000,
        seed: 5,
        checks: 3,
        qdp_queue: 4,
        dir: Some(work.path().to_path_buf()),
    };
    let mut lines = Vec::new();
    let built = breach::build(&options, &mut |line| lines.push(line)).unwrap();
    assert_eq!(built.hits().len(), 3);
    assert!(built.db_path().starts_with(work.path()));
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(
        lines[0].starts_with("3000 random SHA-1 hashes (seed 5) generated"),
        "{}",
        lines[0]
    );

    let servers = [server(&built, 0), server(&built, 1)];
    let handlers: Vec<Arc<dyn pir_service::Handler>> = servers
        .iter()
        .map(|s| s.service.clone() as Arc<dyn pir_service::Handler>)
        .collect();
    let keys: Vec<PublicKey> = servers.iter().map(|s| s.key).collect();
    let session = BreachSession::open_with(LocalTransport::new(handlers), &keys)
        .await
        .unwrap();
    let mut lines = Vec::new();
    breach::measure(&options, &built, &servers, &session, &mut |line| {
        lines.push(line)
    })
    .await
    .unwrap();
    assert_eq!(lines.len(), 5, "{lines:?}");
    assert!(lines[0].starts_with("QDP queues hold ["), "{}", lines[0]);
    assert!(
        lines[1].contains("over 6 checks (3 hits found with their counts, 3 misses not found)"),
        "{}",
        lines[1]
    );
    assert!(
        lines[3].starts_with("bytes per check (both servers"),
        "{}",
        lines[3]
    );
    assert!(
        lines[4].starts_with("memory per server: database "),
        "{}",
        lines[4]
    );
    // The directory goes with the run.
    let dir = built.db_path().parent().unwrap().to_path_buf();
    drop(built);
    assert!(!dir.exists());
}
