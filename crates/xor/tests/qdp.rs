//! RAID-PIR with query-dependent preprocessing (`pir_xor::qdp`): QDP answers equal plain
//! RAID-PIR answers, retrieval end to end through the wire bodies, single use of seeds and
//! ids, expiry, uniqueness across restarts, the pause policies, malformed bodies, and a
//! chi-square check that one server's view does not depend on the index.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashSet;

use pir_core::bits::BitVec;
use pir_core::{Database, DbShape, Error, MultiServerScheme};
use pir_xor::qdp::{
    self, should_pause, MemorySeedStore, PausePolicy, QdpClient, QdpConfig, QdpError, QdpQuery,
    QdpServer, SeedGrant, SeedKey, SeedSource, SeedStore, StoreError,
};
use pir_xor::{AnswerMode, RaidPir, RaidQuery};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

type Server = QdpServer<MemorySeedStore>;

fn config(queue_capacity: usize) -> QdpConfig {
    QdpConfig {
        queue_capacity,
        issued_capacity: 64,
        issued_ticks: 10,
        reserve_batch: 16,
    }
}

/// One QDP server per position, each with its own random key and store.
fn servers(raid: RaidPir, config: QdpConfig, rng: &mut ChaCha20Rng) -> Vec<Server> {
    (0..raid.servers())
        .map(|s| {
            let key = SeedKey::random(rng);
            QdpServer::new(raid, s, config, &key, MemorySeedStore::new()).unwrap()
        })
        .collect()
}

fn fill_queues(servers: &mut [Server], db: &Database) {
    for server in servers {
        let worker = server.precomputer();
        while worker.step(server, db).unwrap() {}
        assert_eq!(server.queue_len(), server.config().queue_capacity);
    }
}

/// Every seed grant through the wire bodies.
fn grants(client: &QdpClient, servers: &mut [Server]) -> Vec<SeedGrant> {
    servers
        .iter_mut()
        .enumerate()
        .map(|(s, server)| {
            let response = server
                .handle_seed_request(&client.seed_request(s).unwrap())
                .unwrap();
            assert_eq!(response.len(), qdp::SEED_RESPONSE_LEN);
            client.read_seed_response(s, &response).unwrap()
        })
        .collect()
}

/// One retrieval through the wire bodies.
fn retrieve(
    db: &Database,
    client: &QdpClient,
    servers: &mut [Server],
    indices: &[usize],
) -> Vec<Vec<u8>> {
    let grants = grants(client, servers);
    let (queries, state) = client.query(indices, &grants).unwrap();
    let answers: Vec<_> = queries
        .iter()
        .zip(servers.iter_mut())
        .map(|(query, server)| {
            let body = client.encode_query(query);
            assert_eq!(
                body.len(),
                qdp::query_body_len(client.scheme(), query.server)
            );
            let answer = server.answer_body(db, &body).unwrap();
            client.decode_answer(query.server, &answer).unwrap()
        })
        .collect();
    client.decode(&state, &answers).unwrap()
}

#[test]
fn seed_derivation_known_answers() {
    // AES-128 of "QDP seed" || counter (u64 BE) and "QDP id\0\0" || counter under the key
    // 000102..0f, computed with `openssl enc -aes-128-ecb -nopad`.
    let key = SeedKey::from_bytes(
        hex::decode("000102030405060708090a0b0c0d0e0f")
            .unwrap()
            .try_into()
            .unwrap(),
    );
    let mut source = SeedSource::open(&key, MemorySeedStore::new(), 4).unwrap();
    let seeds: Vec<_> = (0..6).map(|_| source.next_seed().unwrap()).collect();
    assert_eq!(seeds[0].counter, 0);
    assert_eq!(
        hex::encode(seeds[0].seed),
        "e5e6c322e6fb244da147fe0f124fc4c0"
    );
    assert_eq!(
        seeds[0].id,
        u64::from_le_bytes(hex::decode("0affe46281377efd").unwrap().try_into().unwrap())
    );
    assert_eq!(seeds[5].counter, 5);
    assert_eq!(
        hex::encode(seeds[5].seed),
        "2bec6ecf283c49aad5e65af7dd594ab9"
    );
    assert_eq!(
        seeds[5].id,
        u64::from_le_bytes(hex::decode("c5865fb6bbab0b09").unwrap().try_into().unwrap())
    );
}

#[test]
fn seeds_never_repeat_across_restarts() {
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let shape = DbShape::new(30, 32).unwrap();
    let db = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, 2, 2, 2, AnswerMode::Single).unwrap();
    let key = SeedKey::random(&mut rng);
    let mut store = MemorySeedStore::new();
    let mut seen_seeds = HashSet::new();
    let mut seen_ids = HashSet::new();
    let mut high_water = 0;
    for run in 0..3 {
        // Same key and same store each run: a restart after a crash.
        let mut server = QdpServer::new(raid, 0, config(5), &key, &mut store).unwrap();
        assert_eq!(server.seed_source().next_counter(), high_water, "run {run}");
        let worker = server.precomputer();
        for round in 0..25 {
            if round % 3 == 0 {
                worker.step(&mut server, &db).unwrap();
            }
            let grant = server.issue().unwrap();
            assert!(seen_seeds.insert(grant.seed), "seed repeated in run {run}");
            assert!(seen_ids.insert(grant.id), "id repeated in run {run}");
        }
        let used = server.seed_source().next_counter();
        drop(server);
        assert!(store.high_water() >= used);
        assert!(store.high_water() - used < 16, "at most one batch wasted");
        high_water = store.high_water();
    }
}

struct FailingStore;

impl SeedStore for FailingStore {
    fn load(&mut self) -> Result<u64, StoreError> {
        Ok(7)
    }
    fn reserve(&mut self, _upto: u64) -> Result<(), StoreError> {
        Err("disk full".into())
    }
}

#[test]
fn a_failing_store_issues_nothing() {
    let shape = DbShape::new(8, 32).unwrap();
    let raid = RaidPir::new(shape, 2, 2, 2, AnswerMode::Single).unwrap();
    let key = SeedKey::from_bytes([3; 16]);
    let mut server = QdpServer::new(raid, 1, config(2), &key, FailingStore).unwrap();
    let error = server.issue().unwrap_err();
    assert!(matches!(error, QdpError::Store(_)) && !error.is_peer_error());
    assert!(error.to_string().contains("disk full"));
    assert!(matches!(server.begin_precompute(), Err(QdpError::Store(_))));
    assert_eq!(
        (server.issued_len(), server.seed_source().next_counter()),
        (0, 7)
    );
}

#[test]
fn retrieval_with_full_and_empty_queues() {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let shape = DbShape::new(23, 64).unwrap();
    let db = Database::random(shape, &mut rng);
    for (n, r, c) in [(2, 2, 2), (2, 2, 5), (3, 2, 3), (3, 3, 4), (3, 2, 1)] {
        for capacity in [0, 4] {
            let raid = RaidPir::new(shape, n, r, c, AnswerMode::Single).unwrap();
            let client = QdpClient::new(raid);
            let mut servers = servers(raid, config(capacity), &mut rng);
            for index in 0..23 {
                if index % 4 == 0 {
                    fill_queues(&mut servers, &db);
                }
                let blocks = retrieve(&db, &client, &mut servers, &[index]);
                assert_eq!(blocks, vec![db.block(index).to_vec()], "n {n} r {r} c {c}");
            }
            assert!(servers.iter().all(|server| server.issued_len() == 0));
        }
    }
}

#[test]
fn multi_block_retrieval_per_chunk() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let shape = DbShape::new(31, 32).unwrap();
    let db = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, 3, 2, 5, AnswerMode::PerChunk).unwrap();
    let client = QdpClient::new(raid);
    let mut servers = servers(raid, config(3), &mut rng);
    fill_queues(&mut servers, &db);
    for indices in [vec![0], vec![30, 1, 7, 13, 4], vec![9, 12]] {
        let expected: Vec<Vec<u8>> = indices.iter().map(|&i| db.block(i).to_vec()).collect();
        assert_eq!(retrieve(&db, &client, &mut servers, &indices), expected);
    }
    let grants = grants(&client, &mut servers);
    assert!(client.query(&[0, 5], &grants).is_err(), "same chunk");
    assert!(client.query(&[31], &grants).is_err(), "out of range");
    assert!(client.query(&[], &grants).is_err());
    assert!(
        client.query(&[0], &grants[..2]).is_err(),
        "one grant missing"
    );
    let mut same = grants.clone();
    same[1].seed = same[0].seed;
    assert!(
        client.query(&[0], &same).is_err(),
        "two servers with one seed"
    );
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// For the same seed and flip chunks, the QDP answer (precomputed or not) is the plain
    /// RAID-PIR answer.
    #[test]
    fn qdp_answer_equals_raidpir_answer(
        n in 2usize..=3,
        r_offset in 0usize..2,
        blocks in 1u64..40,
        c_wish in 1usize..9,
        per_chunk in any::<bool>(),
        precompute in any::<bool>(),
        seed in any::<u64>(),
    ) {
        let r = (2 + r_offset).min(n);
        let c = c_wish.min(blocks as usize);
        let mode = if per_chunk { AnswerMode::PerChunk } else { AnswerMode::Single };
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let shape = DbShape::new(blocks, 32).unwrap();
        let db = Database::random(shape, &mut rng);
        let raid = RaidPir::new(shape, n, r, c, mode).unwrap();
        let mut servers = servers(raid, config(usize::from(precompute)), &mut rng);
        for (s, server) in servers.iter_mut().enumerate() {
            if precompute {
                prop_assert!(server.precomputer().step(server, &db).unwrap());
            }
            let grant = server.issue().unwrap();
            let flips: Vec<BitVec> = raid
                .flip_chunks(s)
                .map(|chunk| BitVec::random(raid.chunk_len(chunk), &mut rng))
                .collect();
            let plain = raid.answer(&db, &RaidQuery { server: s, seed: grant.seed, flips: flips.clone() }).unwrap();
            let query = QdpQuery { server: s, seed_id: grant.id, flips };
            let pending = server.take(&query).unwrap();
            prop_assert_eq!(pending.is_precomputed(), precompute);
            prop_assert_eq!(pending.answer(&db).unwrap(), plain);
        }
    }

    #[test]
    fn decoders_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..80), tag in 1u8..=3) {
        let shape = DbShape::new(21, 32).unwrap();
        let raid = RaidPir::new(shape, 3, 2, 4, AnswerMode::Single).unwrap();
        let mut body = bytes;
        if let Some(first) = body.first_mut() {
            *first = tag;
        }
        let _ = qdp::decode_seed_request(&raid, &body);
        let _ = qdp::decode_query(&raid, &body);
        let _ = QdpClient::new(raid).read_seed_response(1, &body);
    }
}

#[test]
fn an_id_is_answered_once() {
    let mut rng = ChaCha20Rng::seed_from_u64(4);
    let shape = DbShape::new(12, 32).unwrap();
    let db = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, 2, 2, 2, AnswerMode::Single).unwrap();
    let client = QdpClient::new(raid);
    let mut servers = servers(raid, config(2), &mut rng);
    fill_queues(&mut servers, &db);
    let grants = grants(&client, &mut servers);
    let (queries, _) = client.query(&[3], &grants).unwrap();
    let body = client.encode_query(&queries[0]);
    assert!(servers[0].answer_body(&db, &body).is_ok());
    let replay = servers[0].answer_body(&db, &body).unwrap_err();
    assert!(matches!(replay, QdpError::UnknownSeed) && replay.is_peer_error());
    // An id issued by another server is unknown here.
    let mut foreign = queries[0].clone();
    foreign.seed_id = grants[1].id;
    assert!(matches!(
        servers[0].take(&foreign),
        Err(QdpError::UnknownSeed)
    ));
    // A query for the other position is refused without consuming the seed.
    let body1 = client.encode_query(&queries[1]);
    assert!(matches!(
        servers[0].answer_body(&db, &body1),
        Err(QdpError::Scheme(Error::Malformed(_)))
    ));
    assert!(servers[1].answer_body(&db, &body1).is_ok());
}

#[test]
fn issued_seeds_expire_by_count_and_by_ticks() {
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let shape = DbShape::new(12, 32).unwrap();
    let db = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, 2, 2, 2, AnswerMode::Single).unwrap();
    let key = SeedKey::random(&mut rng);
    let limits = QdpConfig {
        issued_capacity: 3,
        issued_ticks: 2,
        ..config(0)
    };
    let mut server = QdpServer::new(raid, 0, limits, &key, MemorySeedStore::new()).unwrap();
    let query = |grant: &SeedGrant| QdpQuery {
        server: 0,
        seed_id: grant.id,
        flips: vec![BitVec::zeros(6)],
    };
    // By count: the first of four grants has three newer ones and is gone.
    let issued: Vec<SeedGrant> = (0..4).map(|_| server.issue().unwrap()).collect();
    assert_eq!(server.issued_len(), 3);
    assert!(matches!(
        server.take(&query(&issued[0])),
        Err(QdpError::UnknownSeed)
    ));
    assert!(server.take(&query(&issued[2])).is_ok());
    assert_eq!(server.issued_len(), 2);
    // By ticks: two ticks expire everything issued before them.
    server.tick();
    assert!(server.take(&query(&issued[1])).unwrap().answer(&db).is_ok());
    let late = server.issue().unwrap();
    assert_eq!(server.issued_len(), 2);
    server.tick();
    assert_eq!(server.issued_len(), 1);
    assert!(matches!(
        server.take(&query(&issued[3])),
        Err(QdpError::UnknownSeed)
    ));
    server.tick();
    assert_eq!(server.issued_len(), 0);
    assert!(matches!(
        server.take(&query(&late)),
        Err(QdpError::UnknownSeed)
    ));
    // Many unanswered issues never grow the map past its capacity.
    for _ in 0..100 {
        server.issue().unwrap();
        assert!(server.issued_len() <= 3);
    }
}

#[test]
fn precomputation_fills_the_queue_and_is_issued_first_in_first_out() {
    let mut rng = ChaCha20Rng::seed_from_u64(6);
    let shape = DbShape::new(20, 32).unwrap();
    let db = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, 3, 3, 3, AnswerMode::Single).unwrap();
    let mut all = servers(raid, config(3), &mut rng);
    let server = &mut all[2];
    let worker = server.precomputer();
    // The split form a threaded runtime uses.
    let job = server.begin_precompute().unwrap().unwrap();
    let first = worker.compute(job, &db).unwrap();
    assert!(server.finish_precompute(first));
    while worker.step(server, &db).unwrap() {}
    assert_eq!(server.queue_len(), 3);
    assert!(server.begin_precompute().unwrap().is_none());
    assert!(
        server.should_pause(PausePolicy::Never, false),
        "full queue pauses"
    );
    // An entry computed for another position is refused.
    let other = &mut all[0];
    let job = other.begin_precompute().unwrap().unwrap();
    let foreign = other.precomputer().compute(job, &db).unwrap();
    let server = &mut all[2];
    server.issue().unwrap();
    assert!(!server.finish_precompute(foreign));
    // A job of one server cannot be computed by another's worker.
    let job = server.begin_precompute().unwrap().unwrap();
    assert!(all[1].precomputer().compute(job, &db).is_err());
    // Three precomputed issues, then fresh ones.
    let server = &mut all[1];
    while server.precomputer().step(server, &db).unwrap() {}
    let flips = vec![BitVec::zeros(7)];
    for round in 0..5 {
        let grant = server.issue().unwrap();
        let pending = server
            .take(&QdpQuery {
                server: 1,
                seed_id: grant.id,
                flips: flips.clone(),
            })
            .unwrap();
        assert_eq!(pending.is_precomputed(), round < 3, "round {round}");
    }
    // A database of another shape is refused.
    let grant = server.issue().unwrap();
    let pending = server
        .take(&QdpQuery {
            server: 1,
            seed_id: grant.id,
            flips,
        })
        .unwrap();
    let wrong = Database::zeroed(DbShape::new(21, 32).unwrap());
    assert!(matches!(
        pending.answer(&wrong),
        Err(Error::DatabaseMismatch(_))
    ));
}

#[test]
fn pause_policies_of_section_5_1() {
    use PausePolicy::{Always, Half, Never};
    let half = Half {
        threshold_percent: 50,
    };
    // (policy, queue length, capacity, busy, pause?)
    let table = [
        (Always, 10, 10, false, true),
        (Never, 10, 10, false, true),
        (half, 10, 10, true, true),
        (Always, 0, 10, false, false),
        (Never, 3, 10, false, false),
        (half, 9, 10, false, false),
        (Always, 0, 10, true, true),
        (Always, 9, 10, true, true),
        (Never, 0, 10, true, false),
        (Never, 9, 10, true, false),
        (half, 4, 10, true, false),
        (half, 5, 10, true, true),
        (half, 9, 10, true, true),
        (half, 2, 5, true, false),
        (half, 3, 5, true, true),
        (
            Half {
                threshold_percent: 0,
            },
            0,
            10,
            true,
            true,
        ),
        (
            Half {
                threshold_percent: 200,
            },
            9,
            10,
            true,
            false,
        ),
        (Never, 0, 0, false, true),
    ];
    for (policy, len, capacity, busy, pause) in table {
        assert_eq!(
            should_pause(policy, len, capacity, busy),
            pause,
            "{policy:?} {len}/{capacity} busy {busy}"
        );
    }
}

#[test]
fn malformed_bodies_are_rejected() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let shape = DbShape::new(21, 32).unwrap();
    let db = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, 3, 2, 4, AnswerMode::Single).unwrap();
    let client = QdpClient::new(raid);
    let mut servers = servers(raid, config(1), &mut rng);
    // Seed requests.
    let request = client.seed_request(1).unwrap();
    assert_eq!(request.len(), qdp::SEED_REQUEST_LEN);
    let refused = |server: &mut Server, body: &[u8]| match server.handle_seed_request(body) {
        Err(QdpError::Scheme(error)) => error,
        other => panic!("accepted a bad seed request: {other:?}"),
    };
    assert!(
        matches!(refused(&mut servers[0], &request), Error::Malformed(_)),
        "wrong position"
    );
    assert!(matches!(
        refused(&mut servers[1], &request[..10]),
        Error::Truncated { .. }
    ));
    assert!(matches!(
        refused(&mut servers[1], &[request.clone(), vec![0]].concat()),
        Error::TrailingBytes { count: 1 }
    ));
    let mut bad = request.clone();
    bad[0] = qdp::TAG_QUERY;
    assert!(
        matches!(refused(&mut servers[1], &bad), Error::UnknownValue { .. }),
        "wrong tag"
    );
    let mut bad = request.clone();
    bad[1] = 22; // block count
    assert!(matches!(
        refused(&mut servers[1], &bad),
        Error::DatabaseMismatch(_)
    ));
    for (at, value) in [(13, 4u8), (15, 3), (17, 5), (21, 3), (23, 2)] {
        // n, r, c, server position >= n, mode
        let mut bad = request.clone();
        bad[at] = value;
        assert!(refused(&mut servers[1], &bad).is_peer_error(), "byte {at}");
    }
    let other = RaidPir::new(shape, 3, 3, 4, AnswerMode::Single).unwrap();
    let other_request = QdpClient::new(other).seed_request(1).unwrap();
    assert!(matches!(
        refused(&mut servers[1], &other_request),
        Error::Malformed(_)
    ));
    assert_eq!(
        servers[1].issued_len(),
        0,
        "nothing issued for bad requests"
    );
    assert!(client.seed_request(3).is_err());
    // Seed responses, checked by the client.
    let response = servers[1].handle_seed_request(&request).unwrap();
    assert!(client.read_seed_response(1, &response).is_ok());
    assert!(
        client.read_seed_response(2, &response).is_err(),
        "other position"
    );
    assert!(matches!(
        client.read_seed_response(1, &response[..40]),
        Err(Error::Truncated { .. })
    ));
    assert!(QdpClient::new(other)
        .read_seed_response(1, &response)
        .is_err());
    // Queries.
    let grants = grants(&client, &mut servers);
    let (queries, _) = client.query(&[6], &grants).unwrap();
    let body = client.encode_query(&queries[1]);
    let refused = |server: &mut Server, body: &[u8]| match server.answer_body(&db, body) {
        Err(QdpError::Scheme(error)) => error,
        other => panic!("accepted a bad query: {other:?}"),
    };
    assert!(matches!(
        refused(&mut servers[1], &body[..body.len() - 1]),
        Error::Truncated { .. }
    ));
    assert!(matches!(
        refused(&mut servers[1], &[body.clone(), vec![0]].concat()),
        Error::TrailingBytes { count: 1 }
    ));
    let huge = vec![qdp::TAG_QUERY; qdp::max_query_body(&raid) + 1];
    assert!(matches!(
        refused(&mut servers[1], &huge),
        Error::Oversized { .. }
    ));
    // Server 1 flips chunk 1 of k = 5 bits: its one byte must have the top three bits clear.
    let mut bad = body.clone();
    *bad.last_mut().unwrap() |= 0x80;
    assert!(matches!(
        refused(&mut servers[1], &bad),
        Error::Malformed(_) | Error::WrongLength(_)
    ));
    let mut bad = body.clone();
    bad[0] = qdp::TAG_SEED_REQUEST;
    assert!(matches!(
        refused(&mut servers[1], &bad),
        Error::UnknownValue { .. }
    ));
    // After all the refusals the seed is still there, and is answered once.
    assert!(servers[1].answer_body(&db, &body).is_ok());
    let built = QdpQuery {
        flips: vec![BitVec::zeros(4)],
        ..queries[1].clone()
    };
    assert!(matches!(
        servers[1].take(&built),
        Err(QdpError::Scheme(Error::WrongLength(_)))
    ));
    // Answers.
    assert!(client.decode_answer(1, &[0; 31]).is_err());
    assert!(client.decode_answer(1, &[0; 33]).is_err());
}

/// Queries per index set in the privacy test.
const SAMPLES: usize = 2000;
/// Chi-square (1 degree of freedom) rejection threshold, as in `tests/privacy.rs`:
/// P(X > 45) ~ 2e-11 per position under independence.
const THRESHOLD: f64 = 45.0;

fn bits_of(bytes: &[u8]) -> Vec<bool> {
    bytes
        .iter()
        .flat_map(|&byte| (0..8).map(move |bit| byte >> bit & 1 == 1))
        .collect()
}

/// Per-position ones over `SAMPLES` views.
fn ones(views: impl Iterator<Item = Vec<bool>>) -> Vec<u32> {
    let mut counts: Vec<u32> = Vec::new();
    for view in views {
        counts.resize(view.len(), 0);
        for (count, bit) in counts.iter_mut().zip(view) {
            *count += u32::from(bit);
        }
    }
    counts
}

/// The largest 2x2 chi-square statistic over all positions (0 for a constant bit).
fn max_chi_square(x: &[u32], y: &[u32]) -> f64 {
    let n = SAMPLES as f64;
    x.iter()
        .zip(y)
        .map(|(&a, &c)| {
            let (a, c) = (f64::from(a), f64::from(c));
            let (one, zero) = (a + c, 2.0 * n - a - c);
            if one == 0.0 || zero == 0.0 {
                0.0
            } else {
                2.0 * n * (a - c).powi(2) / (one * zero)
            }
        })
        .fold(0.0, f64::max)
}

#[test]
fn one_servers_view_is_independent_of_the_index() {
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let shape = DbShape::new(40, 32).unwrap();
    for (n, r, c) in [(2, 2, 2), (3, 2, 6)] {
        let raid = RaidPir::new(shape, n, r, c, AnswerMode::Single).unwrap();
        let client = QdpClient::new(raid);
        let mut servers = servers(raid, config(0), &mut rng);
        // Both indices lie in chunk 0 of server 0, at different positions.
        let (first, second) = (0, 38 - 38 % c);
        for server in 0..n {
            // What server `server` sees: the seed response it sent and the query it receives.
            let mut views = |index: usize, colluders: &[usize]| {
                let samples = (0..SAMPLES).map(|_| {
                    let grants = grants(&client, &mut servers);
                    let (mut queries, _) = client.query(&[index], &grants).unwrap();
                    for &other in colluders {
                        // A colluding server hands over its seed: strip its pad.
                        let query = RaidQuery {
                            server: other,
                            seed: grants[other].seed,
                            flips: zero(&raid, other),
                        };
                        let pads = raid.selection(&query).unwrap();
                        for (chunk, flip) in
                            raid.flip_chunks(server).zip(&mut queries[server].flips)
                        {
                            if raid.processes(other, chunk) {
                                flip.xor_assign(&pads[chunk]);
                            }
                        }
                    }
                    let response = qdp::encode_seed_response(&raid, &grants[server]);
                    bits_of(&[response, client.encode_query(&queries[server])].concat())
                });
                ones(samples)
            };
            let statistic = max_chi_square(&views(first, &[]), &views(second, &[]));
            assert!(
                statistic < THRESHOLD,
                "n {n} server {server}: chi-square {statistic}"
            );
            if server == 0 && r == n {
                // Negative control: with every other server of chunk 0 colluding, the flip
                // chunk is the unit vector of the index, and the test sees it.
                let others: Vec<usize> = (1..n).collect();
                let statistic = max_chi_square(&views(first, &others), &views(second, &others));
                assert!(statistic > THRESHOLD, "the test detects a revealing view");
            }
        }
    }
}

fn zero(raid: &RaidPir, server: usize) -> Vec<BitVec> {
    raid.flip_chunks(server)
        .map(|chunk| BitVec::zeros(raid.chunk_len(chunk)))
        .collect()
}

#[test]
fn answers_from_a_per_chunk_four_russians_table_equal_the_scan() {
    let mut rng = ChaCha20Rng::seed_from_u64(41);
    for (blocks, n, t) in [(37usize, 2usize, 4usize), (50, 3, 2), (9, 2, 8)] {
        let shape = DbShape::new(blocks as u64, 64).unwrap();
        let db = Database::random(shape, &mut rng);
        let raid = RaidPir::new(shape, n, 2, n, AnswerMode::Single).unwrap();
        let layout = pir_kernels::russians::RussiansLayout::new(blocks, 64, n, t).unwrap();
        let table = pir_kernels::russians::build_parallel(layout, db.bytes(), &|_, _| {});
        let mut servers = servers(raid, config(4), &mut rng);
        fill_queues(&mut servers, &db);
        let client = QdpClient::new(raid);
        for index in [0, blocks / 2, blocks - 1] {
            let grants = grants(&client, &mut servers);
            let (queries, state) = client.query(&[index], &grants).unwrap();
            let answers: Vec<_> = queries
                .iter()
                .zip(servers.iter_mut())
                .map(|(query, server)| {
                    let body = client.encode_query(query);
                    let pending = server.take_query(&body).unwrap();
                    assert!(pending.is_precomputed());
                    let from_table = pending
                        .clone()
                        .answer_from_table(&db, layout, &table)
                        .unwrap();
                    assert_eq!(
                        from_table,
                        pending.clone().answer(&db).unwrap(),
                        "n={n} t={t}"
                    );
                    // The same from a table of this server's flip chunks only, at t and t + 1.
                    for t in [t, t % 8 + 1] {
                        let flips = qdp::flip_table_layout(&raid, server.server(), t).unwrap();
                        let flip_table =
                            pir_kernels::russians::build_parallel(flips, db.bytes(), &|_, _| {});
                        // one chunk of n: one group per super-group
                        assert_eq!(
                            flip_table.len(),
                            flips.super_groups() * flips.entries() * 64
                        );
                        let answer = pending.clone().answer_from_table(&db, flips, &flip_table);
                        assert_eq!(answer.unwrap(), from_table, "flip table, n={n} t={t}");
                    }
                    from_table
                })
                .collect();
            let records = client.decode(&state, &answers).unwrap();
            assert_eq!(records[0], db.block(index), "n={n} t={t} index={index}");
        }
        // a table over consecutive rows (c = 1) or of another database shape is refused
        let grants = grants(&client, &mut servers);
        let (queries, _) = client.query(&[0], &grants).unwrap();
        let pending = servers[0]
            .take_query(&client.encode_query(&queries[0]))
            .unwrap();
        // another server's flip-chunk table is refused
        let other = qdp::flip_table_layout(&raid, 1, t).unwrap();
        let other_table = vec![0u8; other.table_bytes()];
        assert!(matches!(
            pending.clone().answer_from_table(&db, other, &other_table),
            Err(Error::DatabaseMismatch(_))
        ));
        assert!(qdp::flip_table_layout(&raid, n, t).is_none());
        let flat = pir_kernels::russians::RussiansLayout::new(blocks, 64, 1, t).unwrap();
        let flat_table = vec![0u8; flat.table_bytes()];
        assert!(matches!(
            pending.clone().answer_from_table(&db, flat, &flat_table),
            Err(Error::DatabaseMismatch(_))
        ));
        assert!(matches!(
            pending.answer_from_table(&db, layout, &table[1..]),
            Err(Error::DatabaseMismatch(_))
        ));
    }
}

fn xor_of(region: &[u8], b: usize, rows: &[usize]) -> Vec<u8> {
    let mut sum = vec![0u8; b];
    for &row in rows {
        pir_kernels::xor_into(&mut sum, &region[row * b..(row + 1) * b]);
    }
    sum
}

#[test]
fn rows_read_lists_the_flip_chunk_rows_the_online_step_xors() {
    let mut rng = ChaCha20Rng::seed_from_u64(43);
    let (blocks, b, n, t) = (45usize, 4096usize, 2usize, 4usize);
    let shape = DbShape::new(blocks as u64, b).unwrap();
    let db = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, n, 2, n, AnswerMode::Single).unwrap();
    let mut full = servers(raid, config(4), &mut rng);
    fill_queues(&mut full, &db);
    let client = QdpClient::new(raid);
    let layout = qdp::flip_table_layout(&raid, 0, t).unwrap();
    let table = pir_kernels::russians::build_parallel(layout, db.bytes(), &|_, _| {});
    let mut sizes = Vec::new();
    for index in [0, 17, blocks - 1] {
        let grants = grants(&client, &mut full);
        let (queries, _) = client.query(&[index], &grants).unwrap();
        let pending = full[0]
            .take_query(&client.encode_query(&queries[0]))
            .unwrap();
        assert_eq!(pending.precomputed_bytes(), b);
        let (size, rows) = pending.rows_read(None).unwrap();
        assert_eq!(size, b);
        let flips: Vec<usize> = raid.flip_chunks(0).collect();
        assert!(rows
            .iter()
            .all(|row| flips.contains(&(row % n)) && *row < blocks));
        assert!(rows.windows(2).all(|w| w[0] < w[1]));
        // The table entries it lists sum to the same rows' XOR.
        let (size, entries) = pending.rows_read(Some(layout)).unwrap();
        assert_eq!(size, b);
        assert!(entries.len() <= rows.len() && entries.len() <= layout.super_groups());
        assert_eq!(xor_of(&table, b, &entries), xor_of(db.bytes(), b, &rows));
        sizes.push(rows.len());
    }
    // Random selections: not every query reads the same rows.
    assert!(sizes.iter().any(|&s| s > 0));
    // Without a precomputed answer the step is a whole RAID-PIR scan.
    let mut empty = servers(raid, config(0), &mut rng);
    let grants = grants(&client, &mut empty);
    let (queries, _) = client.query(&[3], &grants).unwrap();
    let pending = empty[0]
        .take_query(&client.encode_query(&queries[0]))
        .unwrap();
    assert!(!pending.is_precomputed() && pending.rows_read(None).is_none());
    assert_eq!(pending.precomputed_bytes(), 0);
}
