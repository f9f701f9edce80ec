//! A sharded breach database behind its front end answers exactly as a whole breach server:
//! with the same signing key, seed key and seed counter, every seed response, QDP answer,
//! info and blinded point is byte for byte the whole server's, over the number of shards
//! and the bucket boundaries, whether the shards precomputed the seed's partial answer
//! (QDP's offline half, `pir_xor::qdp_shard`) or scan in full (an unknown seed, a restarted
//! shard); with two replicas per shard, every replica takes the orders, and a round with a
//! replica down still queues its seeds; a part from another shard or another database is
//! refused.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::{Arc, Mutex};

use pir_breach::blind::BlindingKey;
use pir_breach::corpus::{CorpusFormat, CorpusStats, Sha1Entry};
use pir_breach::database::{build_pairs, build_sha1, BreachDatabase, CredentialEntry, Sha1Layout};
use pir_breach::front::{BreachFront, FrontConfig};
use pir_breach::info::TAG_BLIND;
use pir_breach::{BreachBackend, BreachConfig, BreachService};
use pir_core::{Database, DbShape, MultiServerScheme, SchemeId};
use pir_keys::{PublicKey, SecretKey};
use pir_service::qdp::BoxedSeedStore;
use pir_service::shard::{Done, Fanout, ShardMap};
use pir_service::{Backend, Handler, Mirror, MirrorService, SignedService};
use pir_xor::qdp::{MemorySeedStore, PausePolicy, QdpClient, QdpConfig, SeedKey};
use pir_xor::shard::ShardRows;
use pir_xor::{Engine, EngineOptions};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

type Front = SignedService<BreachFront<Local>>;

fn copy(key: &SecretKey) -> SecretKey {
    SecretKey::from_pkcs8(key.pkcs8()).unwrap()
}

/// A shard replica in process and its key.
type Replica = (Arc<MirrorService>, PublicKey);

/// Shard replicas in process; replica `r` of shard `k` is `shards[route[k][r]]`, unless
/// that one is down.
#[derive(Clone)]
struct Local {
    shards: Arc<Mutex<Vec<Replica>>>,
    route: Vec<Vec<usize>>,
    down: Arc<Mutex<Vec<usize>>>,
}

impl Local {
    /// One replica per shard: shard `k`'s is `shards[route[k]]`.
    fn new(shards: Vec<Replica>, route: Vec<usize>) -> Self {
        Self::replicated(shards, route.into_iter().map(|i| vec![i]).collect())
    }

    fn replicated(shards: Vec<Replica>, route: Vec<Vec<usize>>) -> Self {
        Self {
            shards: Arc::new(Mutex::new(shards)),
            route,
            down: Arc::new(Mutex::new(Vec::new())),
        }
    }

    /// Takes `shards[i]` down (it fails every request) or brings it back.
    fn set_down(&self, i: usize, down: bool) {
        let mut set = self.down.lock().unwrap();
        set.retain(|&d| d != i);
        if down {
            set.push(i);
        }
    }

    /// The shard services, in order.
    fn services(&self) -> Vec<Arc<MirrorService>> {
        let shards = self.shards.lock().unwrap();
        shards.iter().map(|(service, _)| service.clone()).collect()
    }

    /// Replaces `shards[k]`'s service (a restart: its partial answers are gone).
    fn restart(&self, k: usize, service: Arc<MirrorService>) {
        self.shards.lock().unwrap()[k].0 = service;
    }

    /// `(precomputed, full scans)` summed over the shards (and their replicas).
    fn counts(&self) -> (u64, u64) {
        self.services().iter().fold((0, 0), |(p, f), service| {
            let (dp, df) = service.backend().qdp_counts();
            (p + dp, f + df)
        })
    }
}

impl Fanout for Local {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        let index = self.route.get(shard).and_then(|r| r.get(replica)).copied();
        let up = index.filter(|i| !self.down.lock().unwrap().contains(i));
        let target = up.and_then(|i| self.shards.lock().unwrap().get(i).cloned());
        done(match target {
            Some((service, key)) => Ok((service.handle(&request).body, key)),
            None => Err("no replica".into()),
        });
    }
}

/// The QDP partial answers `service` holds, from its `/metrics` gauge.
fn partials(service: &MirrorService) -> u64 {
    let gauges = service.backend().gauges();
    let gauge = gauges.iter().find(|g| g.0 == "pir_qdp_shard_partials");
    gauge.expect("a breach shard's gauge").2
}

/// Cuts `0..count` at `shards - 1` distinct random places.
fn boundaries(rng: &mut ChaCha20Rng, count: u64, shards: usize) -> Vec<std::ops::Range<u64>> {
    let mut cuts: Vec<u64> = Vec::new();
    while cuts.len() + 1 < shards {
        let cut = rng.random_range(1..count);
        if !cuts.contains(&cut) {
            cuts.push(cut);
        }
    }
    cuts.sort_unstable();
    let mut first = 0;
    cuts.into_iter()
        .chain([count])
        .map(|cut| {
            let range = first..cut;
            first = cut;
            range
        })
        .collect()
}

fn sha1_db(rng: &mut ChaCha20Rng, k: u32, entries: usize) -> BreachDatabase {
    let mut list: Vec<Sha1Entry> = (0..entries)
        .map(|_| Sha1Entry {
            hash: rng.random(),
            count: rng.random_range(1..1000),
        })
        .collect();
    list.sort_by_key(|e| e.hash);
    list.dedup_by_key(|e| e.hash);
    let layout = Sha1Layout {
        prefix_bits: Some(k),
        entry_bits: 160,
    };
    build_sha1(CorpusFormat::Hibp, &list, &layout, &CorpusStats::default())
        .unwrap()
        .0
}

fn seed_store() -> BoxedSeedStore {
    BoxedSeedStore(Box::new(MemorySeedStore::new()))
}

/// Shard `k` of `map` over `db`'s rows: a mirror of its buckets alone, with a fresh key.
fn shard_of(db: &Database, map: &ShardMap, k: usize) -> (Arc<MirrorService>, PublicKey) {
    shard_keyed(db, map, k, &SecretKey::generate().unwrap())
}

/// Shard `k` of `map` over `db`'s rows, signing with `key`, taking QDP precompute orders.
fn shard_keyed(
    db: &Database,
    map: &ShardMap,
    k: usize,
    key: &SecretKey,
) -> (Arc<MirrorService>, PublicKey) {
    let shape = db.shape();
    let b = shape.block_size();
    let entry = map.shards[k];
    let (from, to) = (
        entry.first_row as usize,
        (entry.first_row + entry.rows) as usize,
    );
    let part = Database::from_bytes(
        DbShape::new((to - from) as u64, b).unwrap(),
        &db.bytes()[from * b..to * b],
    )
    .unwrap();
    let rows = ShardRows {
        whole: shape,
        first: from,
    };
    let engine = Engine::shard(part, rows, EngineOptions::default(), &|_, _| {}).unwrap();
    let public = key.public();
    let id = map.part_id(k).unwrap();
    let mirror = Mirror::new(engine, id, Vec::new()).with_qdp_partials(100);
    (Arc::new(mirror.serve(copy(key))), public)
}

/// Server `server` of `db`, whole and sharded at `ranges`, with the same keys and seeds.
fn pair(
    db: &BreachDatabase,
    ranges: &[std::ops::Range<u64>],
    server: usize,
    blinding: Option<&BlindingKey>,
) -> (BreachService, Front) {
    let (whole, front, _) = pair_with(db, ranges, server, blinding);
    (whole, front)
}

/// [`pair`], with the shards' fan-out and secret keys (to restart a shard).
fn pair_with(
    db: &BreachDatabase,
    ranges: &[std::ops::Range<u64>],
    server: usize,
    blinding: Option<&BlindingKey>,
) -> (BreachService, Front, (Local, Vec<SecretKey>)) {
    pair_replicated(db, ranges, server, blinding, 1)
}

/// [`pair_with`] with `replicas` replicas per shard, each with its own key: replica `r` of
/// shard `k` is the fan-out's `shards[k * replicas + r]`.
fn pair_replicated(
    db: &BreachDatabase,
    ranges: &[std::ops::Range<u64>],
    server: usize,
    blinding: Option<&BlindingKey>,
    replicas: usize,
) -> (BreachService, Front, (Local, Vec<SecretKey>)) {
    let key = SecretKey::generate().unwrap();
    let seed_key = [server as u8 + 9; 16];
    let whole = BreachBackend::start(BreachConfig {
        database: Database::from_bytes(db.database().shape(), db.database().bytes()).unwrap(),
        header: db.header().encode().to_vec(),
        server,
        key: copy(&key),
        blinding: blinding.cloned(),
        // Seeds issued in counter order, as the front end's queue issues them.
        qdp: QdpConfig {
            queue_capacity: 0,
            ..QdpConfig::default()
        },
        policy: PausePolicy::Always,
        seed_key: SeedKey::from_bytes(seed_key),
        seed_store: seed_store(),
        flip_table: None,
    })
    .unwrap();
    let map = pir_breach::shard::map_of(db, ranges);
    let secrets: Vec<SecretKey> = (0..ranges.len() * replicas)
        .map(|_| SecretKey::generate().unwrap())
        .collect();
    let shards: Vec<_> = (0..ranges.len() * replicas)
        .map(|i| shard_keyed(db.database(), &map, i / replicas, &secrets[i]))
        .collect();
    let route: Vec<Vec<usize>> = (0..ranges.len())
        .map(|k| (k * replicas..(k + 1) * replicas).collect())
        .collect();
    let keys = route
        .iter()
        .map(|of_shard| of_shard.iter().map(|&i| shards[i].1).collect())
        .collect();
    let local = Local::replicated(shards, route);
    let front = front(map, server, &key, blinding, seed_key, keys, local.clone());
    (whole, front, (local, secrets))
}

fn front(
    map: ShardMap,
    server: usize,
    key: &SecretKey,
    blinding: Option<&BlindingKey>,
    seed_key: [u8; 16],
    keys: Vec<Vec<PublicKey>>,
    local: Local,
) -> Front {
    let config = FrontConfig {
        map,
        server,
        key: copy(key),
        blinding: blinding.cloned(),
        qdp: QdpConfig::default(),
        seed_key: SeedKey::from_bytes(seed_key),
        seed_store: seed_store(),
    };
    SignedService::new(BreachFront::new(config, keys, local).unwrap(), copy(key))
}

fn request(db: &BreachDatabase, message: &[u8]) -> Vec<u8> {
    pir_service::reply::request(
        SchemeId::Qdp,
        &db.header().database_id(),
        &[message.to_vec()],
    )
}

fn payload(body: &[u8]) -> Vec<u8> {
    let envelope = pir_core::wire::decode_envelope(body, usize::MAX >> 1).unwrap();
    let batch = pir_core::protocol::decode_answer_batch(envelope.body, 1 << 20).unwrap();
    batch.answers[0].to_vec()
}

/// Reads `index` privately through the whole servers and the front ends, in lockstep,
/// checking every reply is the same bytes; returns the block read.
fn read_both(db: &BreachDatabase, servers: &[(BreachService, Front); 2], index: usize) -> Vec<u8> {
    let client = QdpClient::new(*servers[0].0.backend().qdp().scheme());
    let mut grants = Vec::new();
    for (s, (whole, front)) in servers.iter().enumerate() {
        let req = request(db, &client.seed_request(s).unwrap());
        let (a, b) = (whole.handle(&req), front.handle(&req));
        assert_eq!((a.status, &a.body), (b.status, &b.body), "seed response");
        grants.push(client.read_seed_response(s, &payload(&a.body)).unwrap());
    }
    let (queries, state) = client.query(&[index], &grants).unwrap();
    let mut answers = Vec::new();
    for (s, (whole, front)) in servers.iter().enumerate() {
        let req = request(db, &client.encode_query(&queries[s]));
        let (a, b) = (whole.handle(&req), front.handle(&req));
        assert_eq!(a.status, 200);
        assert_eq!(a.body, b.body, "answer of server {s}");
        answers.push(client.decode_answer(s, &payload(&b.body)).unwrap());
        // The seed is spent at the front end too.
        assert_eq!(front.handle(&req).status, 400);
    }
    client.decode(&state, &answers).unwrap().remove(0)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(12))]
    #[test]
    fn sharded_answers_are_the_whole_servers(seed in any::<u64>(), k in 2u32..6, shards in 1usize..5) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let db = sha1_db(&mut rng, k, 40);
        let buckets = db.header().bucket_count() as u64;
        let shards = shards.min(buckets as usize);
        let ranges = boundaries(&mut rng, buckets, shards);
        let servers = [pair(&db, &ranges, 0, None), pair(&db, &ranges, 1, None)];
        for (whole, front) in &servers {
            assert_eq!(Handler::hint(whole), Handler::hint(front), "the info");
        }
        for _ in 0..3 {
            let index = rng.random_range(0..buckets as usize);
            let block = read_both(&db, &servers, index);
            prop_assert_eq!(&block[..], db.database().block(index));
        }
    }
}

#[test]
fn blinded_requests_and_pairs_buckets_match_the_whole_server() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let key = BlindingKey::generate(&mut rng);
    let entries = (0..50)
        .map(|_| CredentialEntry::new(&key, &rng.random()))
        .collect();
    let (db, _) = build_pairs(
        entries,
        pir_breach::credential::HashKind::Sha256,
        key.key_id(),
        Some(3),
        &CorpusStats::default(),
    )
    .unwrap();
    let ranges = boundaries(&mut rng, 8, 3);
    let servers = [
        pair(&db, &ranges, 0, Some(&key)),
        pair(&db, &ranges, 1, None),
    ];
    for index in [0, 5, 7] {
        assert_eq!(read_both(&db, &servers, index), db.database().block(index));
    }
    let point = curve25519_dalek::ristretto::RistrettoPoint::hash_from_bytes::<sha2::Sha512>(b"x");
    let mut message = vec![TAG_BLIND];
    message.extend_from_slice(&point.compress().to_bytes());
    let req = request(&db, &message);
    let (whole, front) = &servers[0];
    assert_eq!(whole.handle(&req).body, front.handle(&req).body);
    // The other position holds no key and says so, as a whole server does.
    assert_eq!(servers[1].1.handle(&req).status, 400);
    // A blinding key of another database is refused at start.
    let other = BlindingKey::generate(&mut rng);
    let map = pir_breach::shard::map_of(&db, &ranges);
    let config = FrontConfig {
        map,
        server: 0,
        key: SecretKey::generate().unwrap(),
        blinding: Some(other),
        qdp: QdpConfig::default(),
        seed_key: SeedKey::from_bytes([1; 16]),
        seed_store: seed_store(),
    };
    let local = Local::new(Vec::new(), Vec::new());
    let error = BreachFront::new(config, vec![vec![PublicKey([0; 32])]; 3], local).unwrap_err();
    assert!(error.to_string().contains("blinding key"), "{error}");
}

#[test]
fn parts_of_another_shard_or_database_are_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let db = sha1_db(&mut rng, 3, 30);
    let other = sha1_db(&mut rng, 3, 30);
    let ranges = boundaries(&mut rng, 8, 2);
    let map = pir_breach::shard::map_of(&db, &ranges);
    let other_map = pir_breach::shard::map_of(&other, &ranges);
    let key = SecretKey::generate().unwrap();
    let client_query = |front: &Front| {
        let client =
            QdpClient::new(pir_breach::service::scheme_for(db.database().shape()).unwrap());
        let seed = front.handle(&request(&db, &client.seed_request(0).unwrap()));
        assert_eq!(seed.status, 200);
        let mine = client.read_seed_response(0, &payload(&seed.body)).unwrap();
        let theirs = client
            .read_seed_response(
                1,
                &pir_xor::qdp::encode_seed_response(
                    client.scheme(),
                    &pir_xor::qdp::SeedGrant {
                        server: 1,
                        id: 1,
                        seed: [4; 16],
                    },
                ),
            )
            .unwrap();
        let (queries, _) = client.query(&[3], &[mine, theirs]).unwrap();
        front.handle(&request(&db, &client.encode_query(&queries[0])))
    };
    // Shard 1 of another database, and shard 0 answering for shard 1.
    for (shards, route) in [
        (
            vec![
                shard_of(db.database(), &map, 0),
                shard_of(other.database(), &other_map, 1),
            ],
            vec![0, 1],
        ),
        (
            vec![
                shard_of(db.database(), &map, 0),
                shard_of(db.database(), &map, 1),
            ],
            vec![0, 0],
        ),
    ] {
        let keys = shards.iter().map(|(_, key)| vec![*key]).collect();
        let front = front(
            map.clone(),
            0,
            &key,
            None,
            [2; 16],
            keys,
            Local::new(shards, route),
        );
        // The precompute orders' acknowledgements are checked as parts are: nothing queued.
        assert!(front.backend().precompute().is_err());
        assert_eq!(front.backend().queue_len(), 0);
        // Refused as a server error (the front end's log names the shard), never combined.
        let reply = client_query(&front);
        assert_eq!(reply.status, 500);
        let envelope = pir_core::wire::decode_envelope(&reply.body, 1 << 16).unwrap();
        assert_eq!(envelope.kind, pir_core::wire::MessageKind::Error);
        assert!(!front.backend().xor().ops().ready(), "shard 1 is not live");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]
    /// QDP's offline half on the shards: answers of precomputed seeds, of seeds issued before
    /// any order (full scans) and of a restarted shard (its partial answers lost) are all the
    /// whole server's, over S = 1, 2, 3 and the bucket boundaries.
    #[test]
    fn precomputed_and_fallback_answers_are_the_whole_servers(
        seed in any::<u64>(),
        k in 2u32..6,
        shards in 1usize..4,
    ) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let db = sha1_db(&mut rng, k, 40);
        let buckets = db.header().bucket_count() as u64;
        let shards = shards.min(buckets as usize);
        let ranges = boundaries(&mut rng, buckets, shards);
        let (w0, f0, (l0, _)) = pair_with(&db, &ranges, 0, None);
        let (w1, f1, (l1, secrets1)) = pair_with(&db, &ranges, 1, None);
        let servers = [(w0, f0), (w1, f1)];
        let mut index = || rng.random_range(0..buckets as usize);
        // No orders yet: the first seeds are full scans on every shard.
        let i = index();
        prop_assert_eq!(&read_both(&db, &servers, i)[..], db.database().block(i));
        prop_assert_eq!(l0.counts(), (0, shards as u64));
        // Orders sent: the next seeds come from the queue, precomputed on every shard.
        for (_, front) in &servers {
            let queued = front.backend().precompute().unwrap();
            prop_assert_eq!(queued, 64, "one round: a full batch of orders");
            prop_assert_eq!(front.backend().queue_len(), 64);
        }
        for _ in 0..2 {
            let i = index();
            prop_assert_eq!(&read_both(&db, &servers, i)[..], db.database().block(i));
        }
        prop_assert_eq!(l0.counts(), (2 * shards as u64, shards as u64));
        // Position 1's last shard restarts: its partial answers are gone, it scans in full.
        let last = shards - 1;
        let map = pir_breach::shard::map_of(&db, &ranges);
        l1.restart(last, shard_keyed(db.database(), &map, last, &secrets1[last]).0);
        let i = index();
        prop_assert_eq!(&read_both(&db, &servers, i)[..], db.database().block(i));
        let s = shards as u64;
        // The other shards finished from their partial answers; the new one scanned in full.
        prop_assert_eq!(l1.counts(), (2 * (s - 1) + (s - 1), (s - 1) + 1));
        prop_assert_eq!(l0.counts(), (3 * s, s));
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]
    /// With two replicas per shard, every replica takes every precompute order, so a query of
    /// a queued seed is finished from a partial answer whichever replica it reaches (the
    /// replicas take turns), and the answers stay the whole servers'.
    #[test]
    fn every_replica_takes_the_orders(seed in any::<u64>(), k in 2u32..5, shards in 1usize..4) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let db = sha1_db(&mut rng, k, 40);
        let buckets = db.header().bucket_count() as u64;
        let shards = shards.min(buckets as usize);
        let ranges = boundaries(&mut rng, buckets, shards);
        let (w0, f0, (l0, _)) = pair_replicated(&db, &ranges, 0, None, 2);
        let (w1, f1, (l1, _)) = pair_replicated(&db, &ranges, 1, None, 2);
        let servers = [(w0, f0), (w1, f1)];
        for ((_, front), local) in servers.iter().zip([&l0, &l1]) {
            prop_assert_eq!(front.backend().precompute().unwrap(), 64);
            prop_assert_eq!(front.backend().queue_len(), 64);
            // Every replica of every shard holds every seed's partial answer, so the front
            // end records no preference.
            for service in local.services() {
                prop_assert_eq!(partials(&service), 64);
            }
            prop_assert_eq!(front.backend().holders_len(), 0);
        }
        for _ in 0..4 {
            let i = rng.random_range(0..buckets as usize);
            prop_assert_eq!(&read_both(&db, &servers, i)[..], db.database().block(i));
        }
        let s = shards as u64;
        for local in [&l0, &l1] {
            prop_assert_eq!(local.counts(), (4 * s, 0), "no full scan");
            // Both replicas of each shard were used (turns), each from its own orders.
            for service in local.services() {
                prop_assert!(service.backend().qdp_counts().0 > 0);
            }
        }
    }
}

/// A replica down during a precompute round: the round still queues the seeds (the other
/// replica of its shard took them), the front end records which replicas hold them and
/// sends their queries there even once the replica is back, and a query whose holder is down
/// goes to the other replica, which scans in full; every answer is the whole servers'. A
/// shard with no replica left fails the round and queues nothing.
#[test]
fn a_round_with_a_replica_down_queues_and_prefers_the_holders() {
    let mut rng = ChaCha20Rng::seed_from_u64(21);
    let db = sha1_db(&mut rng, 4, 40);
    let ranges = boundaries(&mut rng, 16, 2);
    let (w0, f0, (l0, _)) = pair_replicated(&db, &ranges, 0, None, 2);
    let (w1, f1, (_l1, _)) = pair_replicated(&db, &ranges, 1, None, 2);
    // Replica 1 of shard 0 of position 0 (`shards[1]`) is down for the round.
    l0.set_down(1, true);
    assert_eq!(f0.backend().precompute().unwrap(), 64);
    assert_eq!(f1.backend().precompute().unwrap(), 64);
    let partial_counts: Vec<u64> = l0.services().iter().map(|s| partials(s)).collect();
    assert_eq!(partial_counts, vec![64, 0, 64, 64]);
    assert_eq!(f0.backend().holders_len(), 64);
    assert_eq!(f1.backend().holders_len(), 0);
    let coverage = f0.backend().xor().ops().coverage();
    assert_eq!((coverage[0].live, coverage[1].live), (1, 2));
    // Back, and seen live again: still not asked for these seeds (turns would ask it for
    // every other batch).
    l0.set_down(1, false);
    f0.backend().xor().probe();
    assert_eq!(f0.backend().xor().ops().coverage()[0].live, 2);
    let servers = [(w0, f0), (w1, f1)];
    for i in [0, 5, 9, 15] {
        assert_eq!(read_both(&db, &servers, i), db.database().block(i));
    }
    let services = l0.services();
    assert_eq!(services[0].backend().qdp_counts(), (4, 0));
    assert_eq!(services[1].backend().qdp_counts(), (0, 0));
    assert_eq!(l0.counts(), (8, 0));
    assert_eq!(servers[0].1.backend().holders_len(), 60);
    // The holder down: the other replica answers, by a full scan, the same bytes.
    l0.set_down(0, true);
    servers[0].1.backend().xor().probe();
    assert_eq!(read_both(&db, &servers, 3), db.database().block(3));
    assert_eq!(services[1].backend().qdp_counts(), (0, 1));
    // Both replicas of shard 0 down: the round fails and queues nothing.
    l0.set_down(1, true);
    let queued = servers[0].1.backend().queue_len();
    assert!(servers[0].1.backend().precompute().is_err());
    assert_eq!(servers[0].1.backend().queue_len(), queued);
}

#[test]
fn a_shard_takes_orders_once_and_scans_in_full_otherwise() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let db = sha1_db(&mut rng, 4, 40);
    let ranges = boundaries(&mut rng, 16, 2);
    let map = pir_breach::shard::map_of(&db, &ranges);
    let (shard, _) = shard_of(db.database(), &map, 1);
    let id = map.part_id(1).unwrap();
    let raid = pir_breach::service::scheme_for(db.database().shape()).unwrap();
    let batch = |scheme: SchemeId, bodies: &[Vec<u8>]| {
        let body = pir_core::protocol::encode_query_batch(&id, bodies);
        let request =
            pir_core::wire::encode_envelope(scheme, pir_core::wire::MessageKind::Query, &body);
        let reply = shard.handle(&request);
        let answers = if reply.status == 200 {
            payload_all(&reply.body)
        } else {
            Vec::new()
        };
        (reply.status, answers)
    };
    let seed = [7u8; 16];
    let query = raid.encode_query(&pir_xor::RaidQuery {
        server: 0,
        seed,
        flips: vec![pir_core::bits::BitVec::zeros(raid.chunk_len(0))],
    });
    let (status, full) = batch(SchemeId::RaidPir, std::slice::from_ref(&query));
    assert_eq!((status, shard.backend().qdp_counts()), (200, (0, 1)));
    let order = pir_xor::qdp_shard::encode_order(&raid, 0, &seed);
    let (status, acks) = batch(SchemeId::Qdp, std::slice::from_ref(&order));
    assert_eq!((status, acks), (200, vec![Vec::new()]));
    // Precomputed once, then (replayed) a full scan: the same bytes both times.
    for counts in [(1, 1), (1, 2)] {
        let (status, answer) = batch(SchemeId::RaidPir, std::slice::from_ref(&query));
        assert_eq!((status, &answer), (200, &full));
        assert_eq!(shard.backend().qdp_counts(), counts);
    }
    // A malformed order is refused, and a mirror without partial answers refuses orders.
    assert_eq!(batch(SchemeId::Qdp, &[order[..20].to_vec()]).0, 400);
    let plain = Mirror::plain(
        Database::from_bytes(db.database().shape(), db.database().bytes()).unwrap(),
        id,
        Vec::new(),
    )
    .serve(SecretKey::generate().unwrap());
    let body = pir_core::protocol::encode_query_batch(&id, &[order]);
    let request =
        pir_core::wire::encode_envelope(SchemeId::Qdp, pir_core::wire::MessageKind::Query, &body);
    assert_ne!(plain.handle(&request).status, 200);
}

/// Every answer of a reply's batch.
fn payload_all(body: &[u8]) -> Vec<Vec<u8>> {
    let envelope = pir_core::wire::decode_envelope(body, usize::MAX >> 1).unwrap();
    let batch = pir_core::protocol::decode_answer_batch(envelope.body, 1 << 20).unwrap();
    batch.answers.iter().map(|a| a.to_vec()).collect()
}
