//! A front end's operations: a slow replica is hedged around and the answer is still the
//! whole database's; a failing one is retried; `/health` reports shard coverage (full,
//! partial, none) and readiness; the per-shard metrics move.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::{Arc, Mutex};
use std::time::Duration;

use pir_core::SchemeId;
use pir_keys::{PublicKey, SecretKey};
use pir_lattice::{Params, Scheme};
use pir_service::shard::{split, Done, Fanout, Front, Hedge, ShardEntry, ShardMap};
use pir_service::{Handler, Lattice, LatticeDatabase, LatticeService, SignedService};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn copy(key: &SecretKey) -> SecretKey {
    SecretKey::from_pkcs8(key.pkcs8()).unwrap()
}

/// What a test replica does with a request.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Acts {
    Answers,
    /// Answers after sleeping this long.
    Sleeps(Duration),
    /// Fails at once (connection refused, say).
    Fails,
}

type Replica = (Arc<LatticeService>, PublicKey);

/// Replicas in process, each on its own thread, each acting as `acts[k][r]` says.
struct Threads {
    replicas: Vec<Vec<Replica>>,
    acts: Arc<Mutex<Vec<Vec<Acts>>>>,
}

impl Fanout for Threads {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        let (service, key) = self.replicas[shard][replica].clone();
        let acts = self.acts.lock().unwrap()[shard][replica];
        std::thread::spawn(move || match acts {
            Acts::Fails => done(Err("connection refused".into())),
            Acts::Answers => done(Ok((service.handle(&request).body, key))),
            Acts::Sleeps(time) => {
                std::thread::sleep(time);
                done(Ok((service.handle(&request).body, key)));
            }
        });
    }
}

fn database(records: &[u8], record_bytes: usize, count: u64) -> LatticeDatabase<'_> {
    LatticeDatabase {
        scheme: Scheme::SimplePir,
        records,
        record_count: count,
        record_bytes,
        seeds: [[3; 16], [4; 16]],
        version: [5; 32],
        about: b"the records".to_vec(),
    }
}

struct Setup {
    whole: LatticeService,
    front: SignedService<Front<Threads>>,
    acts: Arc<Mutex<Vec<Vec<Acts>>>>,
}

/// 2 shards of 2 replicas over 900 records of 3 bytes; the front end signs with `key`.
fn setup(key: &SecretKey, hedge: Hedge, deadline: Duration) -> Setup {
    let (count, record_bytes) = (900u64, 3usize);
    let mut records = vec![0u8; count as usize * record_bytes];
    ChaCha20Rng::seed_from_u64(7).fill_bytes(&mut records);
    let whole = Lattice::new(database(&records, record_bytes, count), &mut |_, _| {})
        .unwrap()
        .serve(copy(key));
    let params = Params::new(Scheme::SimplePir, count, record_bytes as u32 * 8).unwrap();
    let ranges = split::split_rows(count, 2, split::simple_pir_unit(&params)).unwrap();
    let map = ShardMap {
        scheme: SchemeId::SimplePir,
        database_id: [5; 32],
        rows: count,
        row_bytes: record_bytes as u32,
        about: b"the records".to_vec(),
        shards: ranges
            .iter()
            .enumerate()
            .map(|(k, rows)| ShardEntry {
                id: k as u16,
                first_row: rows.start,
                rows: rows.end - rows.start,
                part_hash: [0; 32],
            })
            .collect(),
    };
    let (mut replicas, mut keys, mut downloads) = (Vec::new(), Vec::new(), Vec::new());
    for (k, rows) in ranges.iter().enumerate() {
        let columns = split::simple_pir_columns(&params, rows).unwrap();
        let bytes = pir_lattice::simple::column_bytes(&params, columns.clone()).unwrap();
        let part = &records[bytes.start as usize..bytes.end as usize];
        let mut of_shard = Vec::new();
        for _ in 0..2 {
            let db = database(part, record_bytes, count);
            let (lattice, _) = Lattice::shard(
                db,
                columns.clone(),
                map.part_id(k).unwrap(),
                None,
                &mut |_, _| {},
            )
            .unwrap();
            if of_shard.is_empty() {
                downloads.push(lattice.download().to_vec());
            }
            let shard_key = SecretKey::generate().unwrap();
            let public = shard_key.public();
            of_shard.push((Arc::new(lattice.serve(shard_key)), public));
        }
        keys.push(of_shard.iter().map(|(_, key)| *key).collect());
        replicas.push(of_shard);
    }
    let acts = Arc::new(Mutex::new(vec![vec![Acts::Answers; 2]; 2]));
    let fanout = Threads {
        replicas,
        acts: acts.clone(),
    };
    let front = Front::new(map, keys, &downloads, fanout)
        .unwrap()
        .with_hedge(hedge)
        .with_deadline(deadline);
    Setup {
        whole,
        front: SignedService::new(front, copy(key)),
        acts,
    }
}

/// A request for record `index` made from the front end's hint.
fn request(front: &SignedService<Front<Threads>>, index: u64, seed: u64) -> Vec<u8> {
    let download = front.hint().unwrap();
    let (_, _, hint) = pir_service::lattice::parse_download(&download).unwrap();
    let client = pir_lattice::open_client(Scheme::SimplePir, hint).unwrap();
    let (_, query) = client
        .query(index, &mut ChaCha20Rng::seed_from_u64(seed))
        .unwrap();
    let batch = pir_core::protocol::encode_query_batch(&client.header().version, &[query]);
    pir_core::wire::encode_envelope(
        SchemeId::SimplePir,
        pir_core::wire::MessageKind::Query,
        &batch,
    )
}

/// The probes' replies arrive on other threads, and a late reply to an earlier probe may land
/// after a newer one: probe again every 100 ms until `/health` says `line`, as the front end's
/// own probe loop does.
fn wait_for_health(front: &SignedService<Front<Threads>>, line: &str) -> String {
    for round in 0..1000 {
        let health = Handler::health(front);
        if health.contains(line) {
            return health;
        }
        if round % 10 == 9 {
            front.backend().probe();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("{line} never in {}", Handler::health(front));
}

#[test]
fn a_slow_replica_is_hedged_around_and_the_answer_is_right() {
    let key = SecretKey::generate().unwrap();
    // The first batch asks replica 0 of every shard first; replica 0 of shard 0 sleeps far
    // past the hedge delay, though well within the batch's deadline.
    let slow = Acts::Sleeps(Duration::from_secs(3));
    let hedged = setup(
        &key,
        Hedge::After(Duration::from_millis(20)),
        Duration::from_secs(60),
    );
    hedged.acts.lock().unwrap()[0][0] = slow;
    let request = request(&hedged.front, 123, 1);
    let reply = hedged.front.handle(&request);
    assert_eq!(reply.status, 200);
    assert_eq!(reply.body, hedged.whole.handle(&request).body);
    let metrics = Handler::render_metrics(&hedged.front);
    assert!(
        metrics.contains("pir_shard_hedges_total{shard=\"0\"} 1\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pir_shard_hedges_total{shard=\"1\"} 0\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pir_shard_hedge_delay_seconds{shard=\"0\"} 0.020000\n"),
        "{metrics}"
    );

    // Without hedging, the same slow replica makes the batch miss a deadline shorter than
    // its sleep: so it was the hedge that answered above.
    let unhedged = setup(&key, Hedge::Off, Duration::from_millis(500));
    unhedged.acts.lock().unwrap()[0][0] = slow;
    let reply = unhedged.front.handle(&request);
    assert_eq!(reply.status, 503);
    let metrics = Handler::render_metrics(&unhedged.front);
    assert!(
        metrics.contains("pir_shard_hedges_total{shard=\"0\"} 0\n"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pir_shard_unavailable_total{shard=\"0\"} 1\n"),
        "{metrics}"
    );
    assert!(
        !metrics.contains("pir_shard_hedge_delay_seconds{"),
        "{metrics}"
    );
}

#[test]
fn a_failing_replica_is_retried_and_counted() {
    let key = SecretKey::generate().unwrap();
    let s = setup(&key, Hedge::Auto, Duration::from_secs(60));
    s.acts.lock().unwrap()[1][0] = Acts::Fails;
    for (i, index) in [0u64, 450, 899].into_iter().enumerate() {
        let request = request(&s.front, index, i as u64);
        let reply = s.front.handle(&request);
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, s.whole.handle(&request).body, "record {index}");
    }
    let metrics = Handler::render_metrics(&s.front);
    // The first batch asks replica 0 of shard 1, which fails: one retry. It is then known to
    // be down and asked last, so the next batches go to replica 1 first.
    for line in [
        "pir_shard_retries_total{shard=\"1\"} 1\n",
        "pir_shard_failures_total{shard=\"1\"} 1\n",
        "pir_shard_retries_total{shard=\"0\"} 0\n",
        "pir_shard_failures_total{shard=\"0\"} 0\n",
        "pir_shard_seconds_count{shard=\"0\"} 3\n",
        "pir_shard_seconds_count{shard=\"1\"} 3\n",
        "pir_shard_live_replicas{shard=\"1\"} 1\n",
        "pir_shard_replicas{shard=\"1\"} 2\n",
        // Fewer than 32 answers timed: the starting delay.
        "pir_shard_hedge_delay_seconds{shard=\"1\"} 0.100000\n",
        // The front end's own request counters are there too.
        "pir_queries_total 3\n",
    ] {
        assert!(metrics.contains(line), "{line} missing from {metrics}");
    }
    // Every sample line parses as `name[{labels}] value`.
    for line in metrics.lines().filter(|l| !l.starts_with('#')) {
        let (_, value) = line.rsplit_once(' ').unwrap();
        assert!(value.parse::<f64>().is_ok(), "{line}");
    }
}

#[test]
fn health_reports_full_partial_and_no_coverage() {
    let key = SecretKey::generate().unwrap();
    let s = setup(&key, Hedge::Auto, Duration::from_secs(5));
    let backend = s.front.backend();

    backend.probe();
    let full = wait_for_health(&s.front, "covered=2/2");
    assert!(full.starts_with("ok front scheme=simplepir "), "{full}");
    assert!(
        full.contains("\nshard 0 live=2/2\nshard 1 live=2/2\n"),
        "{full}"
    );
    assert!(Handler::ready(&s.front));

    // One replica of shard 0 down: still ready, coverage partial.
    s.acts.lock().unwrap()[0][1] = Acts::Fails;
    backend.probe();
    let partial = wait_for_health(&s.front, "shard 0 live=1/2");
    assert!(partial.starts_with("ok front "), "{partial}");
    assert!(partial.contains("covered=2/2"), "{partial}");
    assert!(Handler::ready(&s.front));

    // Both replicas of shard 1 down: not ready, the shard named.
    s.acts.lock().unwrap()[1] = vec![Acts::Fails; 2];
    backend.probe();
    let none = wait_for_health(&s.front, "shard 1 live=0/2 (no live replica)");
    assert!(none.starts_with("unready front "), "{none}");
    assert!(none.contains("covered=1/2"), "{none}");
    assert!(!Handler::ready(&s.front));
    assert_eq!(
        backend
            .ops()
            .coverage()
            .iter()
            .map(|c| c.live)
            .collect::<Vec<_>>(),
        vec![1, 0]
    );

    // A query now fails naming the shard; once a replica is back, a probe makes it ready.
    let reply = s.front.handle(&request(&s.front, 5, 5));
    assert_eq!(reply.status, 503);
    s.acts.lock().unwrap()[1][0] = Acts::Answers;
    backend.probe();
    let back = wait_for_health(&s.front, "shard 1 live=1/2\n");
    assert!(back.starts_with("ok front "), "{back}");
    assert!(Handler::ready(&s.front));
}
