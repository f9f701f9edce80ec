//! Blame only the mirror that lied: one of three mirrors serves a copy of the database with ONE
//! flipped byte in a random row, a spare is listed, and 50 retrievals (Chor and RAID-PIR, random
//! blocks, random culprit position) must each return the right blocks, name the corrupt mirror
//! every time one of its answers was wrong (with evidence that `evidence::check` confirms), and
//! never name an honest mirror.
//!
//! A corrupt row spoils an answer only when the random query selects it, so a retry with fresh
//! randomness that happens to verify proves nothing; this test is what caught that.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use pir_client::{evidence, retrieve, LocalTransport, MirrorInfo, RetrieveOptions, Tap, Verdict};
use pir_core::{Database, DbShape, MultiServerScheme};
use pir_keys::SecretKey;
use pir_service::reply;
use pir_service::{Handler, Mirror};
use pir_xor::{AnswerMode, Chor, RaidPir};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const RELEASE: [u8; 32] = [9; 32];

/// The local servers, plus an honest twin of the corrupt one: every reply of the corrupt mirror
/// is compared with the honest answer to the same request, and `lied` set when it differs.
fn watch(
    inner: LocalTransport,
    corrupt: usize,
    honest_twin: Arc<dyn Handler>,
    twin_key: pir_keys::PublicKey,
    corrupt_key: pir_keys::PublicKey,
    lied: Arc<AtomicBool>,
) -> Tap<LocalTransport> {
    Tap::new(Arc::new(inner), move |mirror, request, max_reply, reply| {
        if mirror == corrupt {
            let honest = honest_twin.handle_many(&[request]).remove(0);
            let said =
                reply::open_signed(reply, request, &RELEASE, &corrupt_key, max_reply).unwrap();
            let truth =
                reply::open_signed(&honest.body, request, &RELEASE, &twin_key, max_reply).unwrap();
            if said.answers != truth.answers {
                lied.store(true, Ordering::SeqCst);
            }
        }
    })
}

fn service(db: Database, key: &SecretKey) -> Arc<dyn Handler> {
    Arc::new(
        Mirror::plain(db, RELEASE, b"manifest".to_vec())
            .serve(SecretKey::from_pkcs8(key.pkcs8()).unwrap()),
    )
}

/// One retrieval's fixed parts: the watched transport, the mirror list, the block check.
struct Fetch<'a> {
    watch: Arc<Tap<LocalTransport>>,
    mirrors: &'a [MirrorInfo],
    verify: &'a (dyn Fn(usize, &[u8]) -> bool + Sync),
}

impl Fetch<'_> {
    /// Retrieves the blocks of `rounds` with `scheme`.
    async fn run<S: MultiServerScheme>(
        &self,
        scheme: &S,
        rounds: &[Vec<usize>],
        rng: &mut ChaCha20Rng,
    ) -> Result<pir_client::Retrieval, pir_client::FetchError> {
        let options = RetrieveOptions {
            release_id: RELEASE,
            max_answer: scheme.max_answer_body(),
        };
        let (watch, mirrors) = (self.watch.clone(), self.mirrors);
        retrieve(scheme, watch, mirrors, &options, rounds, self.verify, rng).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn only_the_corrupt_mirror_is_named_over_50_fetches() {
    let shape = DbShape::new(64, 256).unwrap();
    let db = Database::random(shape, &mut ChaCha20Rng::seed_from_u64(50));
    let keys: Vec<SecretKey> = (0..5).map(|_| SecretKey::generate().unwrap()).collect();
    let mirrors = LocalTransport::mirrors(keys[..4].iter().map(SecretKey::public));
    let verify = |index: usize, block: &[u8]| block == db.block(index);
    let mut rng = ChaCha20Rng::seed_from_u64(2026);
    let mut lied_fetches = 0;
    for trial in 0..50 {
        // One flipped byte in one random row of the culprit's copy.
        let culprit = rng.random_range(0..3);
        let mut bytes = db.bytes().to_vec();
        let at = rng.random_range(0..bytes.len());
        bytes[at] ^= 1 << rng.random_range(0..8);
        let servers: Vec<Arc<dyn Handler>> = (0..4)
            .map(|i| {
                let copy = if i == culprit { &bytes } else { db.bytes() };
                service(Database::from_bytes(shape, copy).unwrap(), &keys[i])
            })
            .collect();
        let lied = Arc::new(AtomicBool::new(false));
        let watch = Arc::new(watch(
            LocalTransport::new(servers),
            culprit,
            service(Database::from_bytes(shape, db.bytes()).unwrap(), &keys[4]),
            keys[4].public(),
            keys[culprit].public(),
            lied.clone(),
        ));
        let wanted: Vec<usize> = (0..6).map(|_| rng.random_range(0..64)).collect();
        let mut query_rng = ChaCha20Rng::seed_from_u64(trial);
        // RAID-PIR's per-chunk answers carry parts of chunks the round does not use; a lie
        // confined to one of those changes nothing the client decodes and cannot be seen.
        let lies_are_used = trial % 3 != 2;
        let fetch = Fetch {
            watch: watch.clone(),
            mirrors: &mirrors,
            verify: &verify,
        };
        let got = if trial % 3 == 0 {
            let chor = Chor::new(shape, 3).unwrap();
            let rounds = pir_client::retrieve::plan_rounds(&wanted, 1, |i| i);
            fetch.run(&chor, &rounds, &mut query_rng).await
        } else {
            let (mode, per_round) = if lies_are_used {
                (AnswerMode::Single, 1)
            } else {
                (AnswerMode::PerChunk, 3)
            };
            let raid = RaidPir::new(shape, 3, 2, 3, mode).unwrap();
            let rounds =
                pir_client::retrieve::plan_rounds(&wanted, per_round, |i| raid.chunk_of(i));
            fetch.run(&raid, &rounds, &mut query_rng).await
        };
        let got = got.unwrap_or_else(|e| panic!("trial {trial}: {e}"));
        for (index, block) in &got.blocks {
            assert_eq!(block.as_slice(), db.block(*index), "trial {trial}");
        }
        for incident in &got.incidents {
            assert_eq!(
                incident.mirror, culprit,
                "trial {trial}: honest mirror {} blamed: {}",
                incident.url, incident.what
            );
        }
        if !got.incidents.is_empty() || (lies_are_used && lied.load(Ordering::SeqCst)) {
            lied_fetches += 1;
            assert_eq!(got.incidents.len(), 1, "trial {trial}: {:?}", got.incidents);
            let proof = got.incidents[0].evidence.as_ref().expect("evidence kept");
            assert!(matches!(
                evidence::check(proof, &db).unwrap(),
                Verdict::Cheated { .. }
            ));
            assert!(!got.assignment.contains(&culprit), "trial {trial}");
        } else if !lied.load(Ordering::SeqCst) {
            assert!(
                got.incidents.is_empty(),
                "trial {trial}: {:?}",
                got.incidents
            );
        }
    }
    // The culprit's answers were wrong in most fetches (six blocks, each query selecting the
    // corrupt row with probability about one half, when its chunk is one the mirror covers):
    // the assertions above did run.
    assert!(
        lied_fetches >= 20,
        "only {lied_fetches} fetches had a wrong answer"
    );
}
