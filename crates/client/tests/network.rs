//! Client and server over real HTTPS on 127.0.0.1, in one process: malformed requests are
//! refused without harming other clients, answers are signed, replies have index-independent
//! sizes, and the retrieval isolates a cheating mirror with a fault-injecting transport.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::Arc;

use pir_client::{
    retrieve, HttpsTransport, MirrorInfo, RetrieveOptions, Tap, Transport, TransportError,
};
use pir_core::protocol;
use pir_core::wire::{self, MessageKind};
use pir_core::{Database, DbShape, MultiServerScheme, SchemeId};
use pir_keys::SecretKey;
use pir_server::{RunningServer, ServerOptions};
use pir_service::Mirror;
use pir_xor::{AnswerMode, Chor, RaidPir};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

const RELEASE: [u8; 32] = [7; 32];

fn database() -> Database {
    let shape = DbShape::new(37, 128).unwrap();
    Database::random(shape, &mut ChaCha20Rng::seed_from_u64(1))
}

async fn start_mirror() -> (RunningServer, MirrorInfo) {
    let key = SecretKey::generate().unwrap();
    let service = Mirror::plain(database(), RELEASE, b"manifest bytes".to_vec())
        .serve(SecretKey::from_pkcs8(key.pkcs8()).unwrap());
    let tls = pir_keys::tls::server_config(&key).unwrap();
    let server = pir_server::start(
        Arc::new(service),
        tls,
        ServerOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await
    .unwrap();
    let info = MirrorInfo {
        url: format!("https://{}", server.addr),
        key: key.public(),
    };
    (server, info)
}

fn transport(mirrors: &[MirrorInfo]) -> Arc<HttpsTransport> {
    let pins: Vec<_> = mirrors.iter().map(|m| (m.url.clone(), m.key)).collect();
    Arc::new(HttpsTransport::new(&pins).unwrap())
}

fn error_message(reply: &[u8]) -> String {
    let envelope = wire::decode_envelope(reply, reply.len()).unwrap();
    assert_eq!(envelope.kind, MessageKind::Error);
    wire::decode_error(envelope.body).unwrap().1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_errors_and_the_server_keeps_serving() {
    let (server, info) = start_mirror().await;
    let t = transport(std::slice::from_ref(&info));
    let db = database();
    let chor = Chor::new(db.shape(), 2).unwrap();
    let (queries, _) = chor
        .query(&[3], &mut ChaCha20Rng::seed_from_u64(2))
        .unwrap();
    let body = protocol::encode_query_batch(&RELEASE, &[chor.encode_query(&queries[0])]);
    let good = wire::encode_envelope(SchemeId::Chor, MessageKind::Query, &body);

    let mut wrong_magic = good.clone();
    wrong_magic[0] = b'X';
    let mut wrong_version = good.clone();
    wrong_version[4] = 9;
    let wrong_scheme = wire::encode_envelope(SchemeId::Control, MessageKind::Query, &body);
    let truncated = good[..good.len() - 3].to_vec();
    let mut wrong_release = good.clone();
    wrong_release[wire::HEADER_LEN] ^= 1;
    let cases: Vec<(Vec<u8>, &str)> = vec![
        (wrong_magic, "magic"),
        (wrong_version, "version"),
        (wrong_scheme, "not served"),
        (truncated, "truncated"),
        (wrong_release, "release"),
        (b"garbage".to_vec(), "magic"),
    ];
    for (request, expect) in cases {
        let reply = t.exchange(0, request, 1 << 20).await.unwrap();
        let message = error_message(&reply);
        assert!(
            message.contains(expect),
            "{message:?} should mention {expect:?}"
        );
    }
    // A request far above the size limit is refused without being read into an answer.
    let huge = wire::encode_envelope(SchemeId::Chor, MessageKind::Query, &vec![0u8; 4 << 20]);
    // (An accepted body would come back as an error envelope, i.e. `Ok`.)
    assert!(t.exchange(0, huge, 1 << 20).await.is_err());

    // After all that, a good request is answered and signed.
    let reply = t.exchange(0, good.clone(), 1 << 20).await.unwrap();
    let envelope = wire::decode_envelope(&reply, reply.len()).unwrap();
    assert_eq!(envelope.kind, MessageKind::Answer);
    let batch = protocol::decode_answer_batch(envelope.body, 128).unwrap();
    let statement = pir_keys::answer_statement(&RELEASE, &good, batch.payload);
    info.key.verify(&statement, &batch.signature).unwrap();
    assert_eq!(
        batch.answers[0],
        &pir_xor::serve::answer_body(&db, SchemeId::Chor, &chor.encode_query(&queries[0])).unwrap()
            [..]
    );

    // The manifest is served as is.
    let manifest = pir_client::fetch_manifest(t.as_ref(), 0, 1024)
        .await
        .unwrap();
    assert_eq!(manifest, b"manifest bytes");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reply_size_does_not_depend_on_the_index() {
    let (server, info) = start_mirror().await;
    let t = transport(std::slice::from_ref(&info));
    let shape = database().shape();
    let raid = RaidPir::new(shape, 3, 2, 3, AnswerMode::PerChunk).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let mut sizes = std::collections::BTreeSet::new();
    for index in [0usize, 5, 17, 36] {
        let (queries, _) = raid.query(&[index], &mut rng).unwrap();
        for query in &queries {
            let body = protocol::encode_query_batch(&RELEASE, &[raid.encode_query(query)]);
            let request = wire::encode_envelope(SchemeId::RaidPir, MessageKind::Query, &body);
            let reply = t.exchange(0, request.clone(), 1 << 20).await.unwrap();
            sizes.insert((query.server, request.len(), reply.len()));
        }
    }
    // One (request size, reply size) per server position, whatever the index.
    assert_eq!(sizes.len(), 3, "{sizes:?}");
    server.shutdown().await;
}

/// A transport that flips one bit in every answer from mirror `bad`, as a broken mirror or
/// anything between it and TLS would: the client must attribute it to that mirror, replace it
/// by the spare, and still return the right blocks.
fn flip_bits(inner: Arc<HttpsTransport>, bad: usize) -> Tap<HttpsTransport> {
    Tap::new(inner, move |mirror, _, _, reply| {
        if mirror == bad {
            let at = wire::HEADER_LEN + protocol::RELEASE_ID_LEN + 2 + 4 + 1;
            reply[at] ^= 0x10;
        }
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tampered_answers_are_attributed_to_their_mirror() {
    let mut servers = Vec::new();
    let mut mirrors = Vec::new();
    for _ in 0..4 {
        let (server, info) = start_mirror().await;
        servers.push(server);
        mirrors.push(info);
    }
    let db = database();
    let raid = RaidPir::new(db.shape(), 3, 2, 3, AnswerMode::Single).unwrap();
    let options = RetrieveOptions {
        release_id: RELEASE,
        max_answer: db.shape().block_size(),
    };
    let verify = |index: usize, block: &[u8]| block == db.block(index);
    let rounds = vec![vec![11usize], vec![12]];
    let t = Arc::new(flip_bits(transport(&mirrors), 1));
    let got = retrieve(
        &raid,
        t,
        &mirrors,
        &options,
        &rounds,
        &verify,
        &mut ChaCha20Rng::seed_from_u64(4),
    )
    .await
    .unwrap();
    assert_eq!(
        got.blocks,
        vec![(11, db.block(11).to_vec()), (12, db.block(12).to_vec())]
    );
    assert_eq!(got.incidents.len(), 1);
    assert_eq!(got.incidents[0].mirror, 1);
    assert!(
        got.incidents[0].what.contains("signature"),
        "{}",
        got.incidents[0].what
    );
    assert_eq!(got.assignment, vec![0, 3, 2]);
    for server in servers {
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_clients_at_once_all_get_their_blocks() {
    let mut servers = Vec::new();
    let mut mirrors = Vec::new();
    for _ in 0..3 {
        let (server, info) = start_mirror().await;
        servers.push(server);
        mirrors.push(info);
    }
    let db = Arc::new(database());
    let mut clients = tokio::task::JoinSet::new();
    for client in 0..16usize {
        let mirrors = mirrors.clone();
        let db = db.clone();
        clients.spawn(async move {
            let raid = RaidPir::new(db.shape(), 3, 2, 3, AnswerMode::PerChunk).unwrap();
            let options = RetrieveOptions {
                release_id: RELEASE,
                max_answer: 3 * db.shape().block_size(),
            };
            let verify = |index: usize, block: &[u8]| block == db.block(index);
            let wanted: Vec<usize> = (0..5).map(|k| (client * 7 + k) % 37).collect();
            let rounds = pir_client::retrieve::plan_rounds(&wanted, 3, |i| raid.chunk_of(i));
            let mut rng = ChaCha20Rng::seed_from_u64(100 + client as u64);
            let got = retrieve(
                &raid,
                transport(&mirrors),
                &mirrors,
                &options,
                &rounds,
                &verify,
                &mut rng,
            )
            .await
            .unwrap();
            assert!(got.incidents.is_empty());
            let mut indices: Vec<usize> = got.blocks.iter().map(|(i, _)| *i).collect();
            indices.sort();
            let mut expected = wanted.clone();
            expected.sort();
            assert_eq!(indices, expected);
        });
    }
    while let Some(result) = clients.join_next().await {
        result.unwrap();
    }
    for server in servers {
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn evidence_check_tells_correct_forged_and_wrong_answers_apart() {
    use pir_client::evidence::{check, Verdict};
    use pir_client::Evidence;

    let (server, info) = start_mirror().await;
    let t = transport(std::slice::from_ref(&info));
    let db = database();
    let chor = Chor::new(db.shape(), 2).unwrap();
    let (queries, _) = chor
        .query(&[9], &mut ChaCha20Rng::seed_from_u64(5))
        .unwrap();
    let body = protocol::encode_query_batch(&RELEASE, &[chor.encode_query(&queries[1])]);
    let request = wire::encode_envelope(SchemeId::Chor, MessageKind::Query, &body);
    let reply = t.exchange(0, request.clone(), 1 << 20).await.unwrap();

    let honest = Evidence::new(&info, RELEASE, request.clone(), reply.clone());
    assert_eq!(check(&honest, &db).unwrap(), Verdict::Correct);

    // Changing the answer after the fact breaks the mirror's signature: proves nothing.
    let mut forged_reply = reply.clone();
    forged_reply[wire::HEADER_LEN + protocol::RELEASE_ID_LEN + 2 + 4] ^= 1;
    let forged = Evidence::new(&info, RELEASE, request.clone(), forged_reply);
    assert_eq!(check(&forged, &db).unwrap(), Verdict::NotSigned);

    // A mirror that signs an answer computed from other data is caught.
    let key = SecretKey::generate().unwrap();
    let other = Database::random(db.shape(), &mut ChaCha20Rng::seed_from_u64(99));
    let liar = Mirror::plain(other, RELEASE, Vec::new())
        .serve(SecretKey::from_pkcs8(key.pkcs8()).unwrap());
    let lie = liar.handle(&request);
    assert_eq!(lie.status, 200);
    let liar_info = MirrorInfo {
        url: "https://liar:1".into(),
        key: key.public(),
    };
    let caught = Evidence::new(&liar_info, RELEASE, request, lie.body);
    assert_eq!(check(&caught, &db).unwrap(), Verdict::Cheated { query: 0 });
    server.shutdown().await;
}

/// A "mirror" that completes the TLS handshake with the right key and then never answers:
/// it reads whatever is sent and holds each connection for `hold` (bounded, so the test ends).
async fn start_silent_mirror(hold: std::time::Duration) -> MirrorInfo {
    let key = SecretKey::generate().unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(pir_keys::tls::server_config(&key).unwrap());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((tcp, _)) = listener.accept().await {
            let acceptor = acceptor.clone();
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(tcp).await else {
                    return;
                };
                let _ = tokio::time::timeout(hold, async {
                    use tokio::io::AsyncReadExt;
                    let mut sink = [0u8; 4096];
                    while tls.read(&mut sink).await.is_ok_and(|n| n > 0) {}
                })
                .await;
            });
        }
    });
    MirrorInfo {
        url: format!("https://{addr}"),
        key: key.public(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_that_never_answers_costs_the_reply_deadline_then_the_spare_is_asked() {
    // The silent mirror would hold the request for the old fixed bound (120 s); the reply
    // deadline must end the wait long before.
    let old_bound = std::time::Duration::from_secs(120);
    let silent = start_silent_mirror(old_bound).await;
    let mut servers = Vec::new();
    let mut mirrors = vec![silent];
    for _ in 0..2 {
        let (server, info) = start_mirror().await;
        servers.push(server);
        mirrors.push(info);
    }
    let pins: Vec<_> = mirrors.iter().map(|m| (m.url.clone(), m.key)).collect();
    let reply_start = std::time::Duration::from_millis(700);
    let timeouts = pir_client::Timeouts {
        reply_start,
        ..pir_client::Timeouts::default()
    };
    let t = Arc::new(HttpsTransport::with_timeouts(&pins, timeouts).unwrap());
    assert_eq!(t.timeouts().reply_start, reply_start);

    // One exchange alone: it is the reply deadline that ends it.
    let started = std::time::Instant::now();
    let error = t.exchange(0, b"anything".to_vec(), 1024).await.unwrap_err();
    assert!(
        matches!(
            error,
            TransportError::TimedOut { waiting_for: "reply start", after } if after == reply_start
        ),
        "{error:?}"
    );
    assert!(started.elapsed() < old_bound);

    // A retrieval over [silent, good, good] with Chor on 2 mirrors: the silent one is
    // replaced by the spare and the block arrives.
    let db = database();
    let chor = Chor::new(db.shape(), 2).unwrap();
    let options = RetrieveOptions {
        release_id: RELEASE,
        max_answer: db.shape().block_size(),
    };
    let verify = |index: usize, block: &[u8]| block == db.block(index);
    let started = std::time::Instant::now();
    let got = retrieve(
        &chor,
        t,
        &mirrors,
        &options,
        &[vec![6usize]],
        &verify,
        &mut ChaCha20Rng::seed_from_u64(8),
    )
    .await
    .unwrap();
    assert!(started.elapsed() < old_bound);
    assert_eq!(got.blocks, vec![(6, db.block(6).to_vec())]);
    assert_eq!(got.incidents.len(), 1, "{:?}", got.incidents);
    assert_eq!(got.incidents[0].mirror, 0);
    let expected = TransportError::TimedOut {
        waiting_for: "reply start",
        after: reply_start,
    }
    .to_string();
    assert!(
        got.incidents[0].what.contains(&expected),
        "{} should say {expected}",
        got.incidents[0].what
    );
    assert_eq!(got.assignment, vec![2, 1]);
    for server in servers {
        server.shutdown().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_pin_is_named_for_any_server_not_only_mirrors() {
    let (server, info) = start_mirror().await;
    let other = SecretKey::generate().unwrap().public();
    let t = HttpsTransport::new(&[(info.url.clone(), other)]).unwrap();
    let error = t.exchange(0, b"x".to_vec(), 1024).await.unwrap_err();
    let text = error.to_string();
    assert!(matches!(error, TransportError::Tls(_)), "{error:?}");
    assert!(
        text.contains(&format!(
            "not the pinned server key {}",
            other.fingerprint()
        )),
        "{text}"
    );
    assert!(!text.contains("mirror"), "{text}");
    server.shutdown().await;
}
