//! Sharded XOR databases (a release's Chor, RAID-PIR and DPF; the breach database's RAID-PIR
//! answers): shards holding only their rows (`pir_xor::Engine::shard`), combined by the XOR
//! front end, give byte for byte the reply of one mirror of the whole database (same key),
//! over the number of shards and the row boundaries; a part of another shard or database is
//! refused, never combined.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::Arc;

use pir_core::wire::{self, MessageKind};
use pir_core::{Database, DbShape, MultiServerScheme, SchemeId};
use pir_keys::{PublicKey, SecretKey};
use pir_service::shard::{Done, Fanout, ShardEntry, ShardMap, XorFront};
use pir_service::{Mirror, MirrorService, SignedService};
use pir_xor::shard::ShardRows;
use pir_xor::{AnswerMode, Engine, EngineOptions, RaidPir, Russians};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const RELEASE: [u8; 32] = [5; 32];

fn copy(key: &SecretKey) -> SecretKey {
    SecretKey::from_pkcs8(key.pkcs8()).unwrap()
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
    let mut ranges = Vec::new();
    let mut first = 0;
    for cut in cuts.into_iter().chain([count]) {
        ranges.push(first..cut);
        first = cut;
    }
    ranges
}

/// Shard replicas in process; reply `k` comes from shard `swap[k]`.
struct Local {
    shards: Vec<(Arc<MirrorService>, PublicKey)>,
    swap: Vec<usize>,
}

impl Fanout for Local {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        // One replica per shard here.
        done(match (replica, self.shards.get(self.swap[shard])) {
            (0, Some((service, key))) => Ok((service.handle(&request).body, *key)),
            _ => Err("no replica".into()),
        });
    }
}

struct Built {
    whole: MirrorService,
    map: ShardMap,
    shards: Vec<(Arc<MirrorService>, PublicKey)>,
}

fn options(russians: Russians) -> EngineOptions {
    EngineOptions {
        russians,
        ..EngineOptions::default()
    }
}

fn build(
    db: &Database,
    ranges: &[std::ops::Range<u64>],
    russians: Russians,
    key: &SecretKey,
) -> Built {
    let shape = db.shape();
    let b = shape.block_size();
    let whole = Mirror::new(
        Engine::new(
            Database::from_bytes(shape, db.bytes()).unwrap(),
            options(russians),
            &|_, _| {},
        ),
        RELEASE,
        b"manifest".to_vec(),
    )
    .serve(copy(key));
    let map = ShardMap {
        scheme: SchemeId::Chor,
        database_id: RELEASE,
        rows: shape.block_count() as u64,
        row_bytes: b as u32,
        about: Vec::new(),
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
    let shards = ranges
        .iter()
        .enumerate()
        .map(|(k, rows)| {
            let (from, to) = (rows.start as usize, rows.end as usize);
            let part = Database::from_bytes(
                DbShape::new((to - from) as u64, b).unwrap(),
                &db.bytes()[from * b..to * b],
            )
            .unwrap();
            let engine = Engine::shard(
                part,
                ShardRows {
                    whole: shape,
                    first: from,
                },
                options(russians),
                &|_, _| {},
            )
            .unwrap();
            let shard_key = SecretKey::generate().unwrap();
            let public = shard_key.public();
            let id = map.part_id(k).unwrap();
            (
                Arc::new(Mirror::new(engine, id, Vec::new()).serve(shard_key)),
                public,
            )
        })
        .collect();
    Built { whole, map, shards }
}

fn front(built: &Built, swap: Vec<usize>, key: &SecretKey) -> SignedService<XorFront<Local>> {
    let keys = built.shards.iter().map(|s| vec![s.1]).collect();
    let local = Local {
        shards: built.shards.clone(),
        swap,
    };
    SignedService::new(
        XorFront::new(built.map.clone(), keys, b"manifest".to_vec(), local).unwrap(),
        copy(key),
    )
}

/// Requests for `index` (one per server of each scheme), several queries per request.
fn requests(shape: DbShape, index: usize, rng: &mut ChaCha20Rng) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut push = |scheme: SchemeId, bodies: Vec<Vec<u8>>| {
        for body in bodies {
            out.push(pir_service::reply::request(
                scheme,
                &RELEASE,
                &[body.clone(), body],
            ));
        }
    };
    let chor = pir_xor::Chor::new(shape, 2).unwrap();
    let (qs, _) = chor.query(&[index], rng).unwrap();
    push(
        SchemeId::Chor,
        qs.iter().map(|q| chor.encode_query(q)).collect(),
    );
    let dpf = pir_xor::DpfPir::new(shape);
    let (qs, _) = dpf.query(&[index], rng).unwrap();
    push(
        SchemeId::Dpf,
        qs.iter().map(|q| dpf.encode_query(q)).collect(),
    );
    for (c, mode) in [
        (1, AnswerMode::Single),
        (2, AnswerMode::Single),
        (3, AnswerMode::PerChunk),
        (4, AnswerMode::PerChunk),
        (5, AnswerMode::PerChunk),
    ] {
        let raid = RaidPir::new(shape, 3, 2, c.min(shape.block_count()), mode).unwrap();
        let (qs, _) = raid.query(&[index], rng).unwrap();
        push(
            SchemeId::RaidPir,
            qs.iter().map(|q| raid.encode_query(q)).collect(),
        );
    }
    out
}

fn same_replies(db: &Database, shards: usize, russians: Russians, seed: u64) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let count = db.shape().block_count() as u64;
    let ranges = boundaries(&mut rng, count, shards);
    let key = SecretKey::generate().unwrap();
    let built = build(db, &ranges, russians, &key);
    let front = front(&built, (0..shards).collect(), &key);
    let index = rng.random_range(0..count as usize);
    let requests = requests(db.shape(), index, &mut rng);
    for request in &requests {
        let reply = front.handle(request);
        assert_eq!(reply.status, 200, "{ranges:?}");
        // Ed25519 is deterministic: the same key over the same answers gives the same bytes.
        assert_eq!(reply.body, built.whole.handle(request).body, "{ranges:?}");
    }
    // Many requests at once, as the batcher hands them over, give the same replies.
    let refs: Vec<&[u8]> = requests.iter().map(Vec::as_slice).collect();
    let together = front.handle_many(&refs);
    assert_eq!(together, built.whole.handle_many(&refs));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(16))]

    #[test]
    fn sharded_xor_replies_equal_a_whole_mirrors(seed in any::<u64>(), shards in 1usize..=4, blocks in 5u64..70) {
        let shape = DbShape::new(blocks, 64).unwrap();
        let db = Database::random(shape, &mut ChaCha20Rng::seed_from_u64(seed));
        same_replies(&db, shards, Russians::Off, seed);
        same_replies(&db, shards, Russians::Group(2), seed ^ 1);
    }
}

#[test]
fn shards_with_48_chunk_tables_rotate_their_sums_back() {
    // Shards of 1536 rows and more get tables over 48 interleaved chunks; boundaries that are
    // not multiples of the chunk count exercise the rotation.
    let shape = DbShape::new(3 * 1536 + 7, 64).unwrap();
    let db = Database::random(shape, &mut ChaCha20Rng::seed_from_u64(4));
    same_replies(&db, 2, Russians::Group(2), 11);
}

#[test]
fn a_part_of_another_shard_or_database_is_refused() {
    let shape = DbShape::new(40, 64).unwrap();
    let db = Database::random(shape, &mut ChaCha20Rng::seed_from_u64(7));
    let key = SecretKey::generate().unwrap();
    let built = build(&db, &[0..17, 17..40], Russians::Off, &key);
    let mut rng = ChaCha20Rng::seed_from_u64(1);
    let request = requests(shape, 3, &mut rng).remove(0);
    let status = |front: &SignedService<XorFront<Local>>| {
        let reply = front.handle(&request);
        let envelope = wire::decode_envelope(&reply.body, 4096).unwrap();
        assert_eq!(envelope.kind, MessageKind::Error);
        reply.status
    };
    assert_eq!(
        status(&front(&built, vec![1, 0], &key)),
        500,
        "swapped parts"
    );
    // Shards of another map (another database or other rows): their part ids differ, so
    // they refuse the batch.
    let mut other = build(&db, &[0..20, 20..40], Russians::Off, &key);
    other.map = built.map.clone();
    assert_eq!(
        status(&front(&other, vec![0, 1], &key)),
        500,
        "another map's shards"
    );
    // A key that is not the shard's.
    let keys = vec![
        vec![SecretKey::generate().unwrap().public()],
        vec![built.shards[1].1],
    ];
    let strict = SignedService::new(
        XorFront::new(
            built.map.clone(),
            keys,
            Vec::new(),
            Local {
                shards: built.shards.clone(),
                swap: vec![0, 1],
            },
        )
        .unwrap(),
        copy(&key),
    );
    assert_eq!(status(&strict), 500, "an unlisted key");
}
