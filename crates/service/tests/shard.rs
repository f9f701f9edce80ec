//! Sharded answers combined equal the unsharded answer, for every scheme family that shards
//! (XOR schemes: Chor and DPF; lattice: SimplePIR and DoublePIR through the front end), with
//! the row boundaries at random places; a part from a wrong shard, another database or an
//! unlisted key is refused. A SimplePIR shard is sent only its columns of each query.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::{Arc, Mutex};

use pir_core::{Database, DbShape, MultiServerScheme, SchemeId};
use pir_keys::{PublicKey, SecretKey};
use pir_lattice::{Params, Scheme};
use pir_service::shard::{split, Combine, Done, Fanout, Front, ShardEntry, ShardError, ShardMap};
use pir_service::{registry, Handler, Lattice, LatticeDatabase, LatticeService, SignedService};
use proptest::prelude::*;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn copy(key: &SecretKey) -> SecretKey {
    SecretKey::from_pkcs8(key.pkcs8()).unwrap()
}

/// Cuts `0..count` at `shards - 1` distinct random places (multiples of `unit`).
fn boundaries(
    rng: &mut ChaCha20Rng,
    count: u64,
    unit: u64,
    shards: usize,
) -> Vec<std::ops::Range<u64>> {
    let units = count.div_ceil(unit);
    let mut cuts: Vec<u64> = Vec::new();
    while cuts.len() + 1 < shards {
        let cut = rng.random_range(1..units) * unit;
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

/// `db` with every block outside `rows` zeroed: the answer of a shard holding `rows` (a
/// XOR shard's answer over its own rows equals this one's, the zero rows adding nothing).
fn only(db: &Database, rows: &std::ops::Range<u64>) -> Database {
    let size = db.shape().block_size();
    let mut bytes = vec![0u8; db.bytes().len()];
    let (from, to) = (rows.start as usize * size, rows.end as usize * size);
    bytes[from..to].copy_from_slice(&db.bytes()[from..to]);
    Database::from_bytes(db.shape(), &bytes).unwrap()
}

fn xor_family<S: MultiServerScheme>(scheme: &S, db: &Database, seed: u64, shards: usize) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let count = db.shape().block_count() as u64;
    let ranges = boundaries(&mut rng, count, 1, shards);
    let combine = registry::lookup(scheme.id()).unwrap().combine;
    assert_eq!(combine, Combine::Xor);
    let index = rng.random_range(0..count as usize);
    let (queries, _) = scheme.query(&[index], &mut rng).unwrap();
    for query in &queries {
        let whole = scheme.encode_answer(&scheme.answer(db, query).unwrap());
        let parts: Vec<Vec<u8>> = ranges
            .iter()
            .map(|rows| scheme.encode_answer(&scheme.answer(&only(db, rows), query).unwrap()))
            .collect();
        let parts: Vec<&[u8]> = parts.iter().map(Vec::as_slice).collect();
        assert_eq!(combine.answers(&parts, None).unwrap(), whole, "{ranges:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn xor_parts_combine_to_the_whole_answer(seed in any::<u64>(), shards in 1usize..=4, blocks in 5u64..40) {
        let shape = DbShape::new(blocks, 32).unwrap();
        let db = Database::random(shape, &mut ChaCha20Rng::seed_from_u64(seed));
        xor_family(&pir_xor::Chor::new(shape, 2).unwrap(), &db, seed, shards);
        xor_family(&pir_xor::DpfPir::new(shape), &db, seed, shards);
    }
}

/// A shard's replicas, in process: each reply is its service's.
struct Local {
    shards: Vec<Vec<(Arc<LatticeService>, PublicKey)>>,
    /// Reply `k` comes from shard `swap[k]` (a misrouted or malicious fan-out).
    swap: Vec<usize>,
    /// What was sent.
    seen: Seen,
}

/// `(shard, bytes of each query in the batch)` of every request a fan-out sent.
type Seen = Arc<Mutex<Vec<(usize, Vec<usize>)>>>;

impl Local {
    fn new(shards: Vec<Vec<(Arc<LatticeService>, PublicKey)>>, swap: Vec<usize>) -> Self {
        Self {
            shards,
            swap,
            seen: Arc::default(),
        }
    }
}

impl Fanout for Local {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        let envelope = pir_core::wire::decode_envelope(&request, request.len()).unwrap();
        let batch = pir_core::protocol::decode_query_batch(envelope.body).unwrap();
        let lengths = batch.queries.iter().map(|q| q.len()).collect();
        self.seen.lock().unwrap().push((shard, lengths));
        done(match self.shards[self.swap[shard]].get(replica) {
            Some((service, key)) => Ok((service.handle(&request).body, *key)),
            None => Err("no replica".into()),
        });
    }
}

struct Built {
    whole: LatticeService,
    params: Params,
    map: ShardMap,
    shards: Vec<Vec<(Arc<LatticeService>, PublicKey)>>,
    downloads: Vec<Vec<u8>>,
}

fn database(scheme: Scheme, records: &[u8], record_bytes: usize) -> LatticeDatabase<'_> {
    LatticeDatabase {
        scheme,
        records,
        record_count: (records.len() / record_bytes) as u64,
        record_bytes,
        seeds: [[3; 16], [4; 16]],
        version: [5; 32],
        about: b"the records".to_vec(),
    }
}

/// The unsharded service and random shards of it as shard services: SimplePIR's on record
/// ranges of whole columns, DoublePIR's on matrix row ranges (any row).
fn build(
    scheme: Scheme,
    (seed, count, record_bytes): (u64, u64, usize),
    shards: usize,
    key: &SecretKey,
) -> Built {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut records = vec![0u8; count as usize * record_bytes];
    rng.fill_bytes(&mut records);
    let whole = Lattice::new(database(scheme, &records, record_bytes), &mut |_, _| {})
        .unwrap()
        .serve(copy(key));
    let params = Params::new(scheme, count, record_bytes as u32 * 8).unwrap();
    let (rows, ranges) = match scheme {
        Scheme::DoublePir => {
            let rows = params.rows() as u64;
            (rows, boundaries(&mut rng, rows, 1, shards))
        }
        _ => (
            count,
            boundaries(&mut rng, count, split::simple_pir_unit(&params), shards),
        ),
    };
    let map = ShardMap {
        scheme: scheme.id(),
        database_id: [5; 32],
        rows,
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
    let mut services = Vec::new();
    let mut downloads = Vec::new();
    for (k, rows) in ranges.iter().enumerate() {
        let (slice, part) = match scheme {
            Scheme::DoublePir => {
                let slice = split::double_pir_rows(&params, rows).unwrap();
                let part = pir_lattice::double_rows::row_part(&params, &records, &slice).unwrap();
                (slice, part)
            }
            _ => {
                let columns = split::simple_pir_columns(&params, rows).unwrap();
                let bytes = pir_lattice::simple::column_bytes(&params, columns.clone()).unwrap();
                (
                    columns,
                    records[bytes.start as usize..bytes.end as usize].to_vec(),
                )
            }
        };
        let mut db = database(scheme, &part, record_bytes);
        db.record_count = count;
        let (lattice, _) =
            Lattice::shard(db, slice, map.part_id(k).unwrap(), None, &mut |_, _| {}).unwrap();
        downloads.push(lattice.download().to_vec());
        let shard_key = SecretKey::generate().unwrap();
        let public = shard_key.public();
        services.push(vec![(Arc::new(lattice.serve(shard_key)), public)]);
    }
    Built {
        whole,
        params,
        map,
        shards: services,
        downloads,
    }
}

fn front(
    built: &Built,
    swap: Vec<usize>,
    key: &SecretKey,
) -> Result<SignedService<Front<Local>>, ShardError> {
    front_seeing(built, swap, key).map(|(front, _)| front)
}

/// [`front`], with what its fan-out sends each shard.
#[allow(clippy::type_complexity)]
fn front_seeing(
    built: &Built,
    swap: Vec<usize>,
    key: &SecretKey,
) -> Result<
    (
        SignedService<Front<Local>>,
        Arc<Mutex<Vec<(usize, Vec<usize>)>>>,
    ),
    ShardError,
> {
    let keys = built.shards.iter().map(|s| vec![s[0].1]).collect();
    let fanout = Local::new(built.shards.clone(), swap);
    let seen = fanout.seen.clone();
    let front = SignedService::new(
        Front::new(built.map.clone(), keys, &built.downloads, fanout)?,
        copy(key),
    );
    Ok((front, seen))
}

/// A request for record `index` made from `hint_download`.
fn request(hint_download: &[u8], index: u64, rng: &mut ChaCha20Rng) -> Vec<u8> {
    let (scheme, _, hint) = pir_service::lattice::parse_download(hint_download).unwrap();
    let client = pir_lattice::open_client(scheme, hint).unwrap();
    let (_, query) = client.query(index, rng).unwrap();
    let batch = pir_core::protocol::encode_query_batch(&client.header().version, &[query]);
    pir_core::wire::encode_envelope(scheme.id(), pir_core::wire::MessageKind::Query, &batch)
}

/// Through the front end of `built`'s shards, the signed reply to a query for a random
/// record is byte for byte the whole server's (same key), and its hint download too; returns
/// the bytes of each query every shard was sent.
fn same_as_whole(
    built: &Built,
    seed: u64,
    count: u64,
    key: &SecretKey,
) -> Vec<(usize, Vec<usize>)> {
    let shards = built.shards.len();
    let (front, seen) = front_seeing(built, (0..shards).collect(), key).unwrap();
    let download = front.hint().unwrap();
    assert_eq!(&download[..], &built.whole.hint().unwrap()[..]);
    let mut rng = ChaCha20Rng::seed_from_u64(seed ^ 1);
    let index = rng.random_range(0..count);
    let request = request(&download, index, &mut rng);
    let reply = front.handle(&request);
    assert_eq!(reply.status, 200);
    // Ed25519 is deterministic: the same key over the same answer gives the same bytes.
    assert_eq!(
        reply.body,
        built.whole.handle(&request).body,
        "{:?}",
        built.map.shards
    );
    let mut sent = seen.lock().unwrap();
    std::mem::take(&mut *sent)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    #[test]
    fn simple_pir_parts_add_up_to_the_whole_answer(seed in any::<u64>(), shards in 1usize..=4, count in 300u64..1200) {
        let key = SecretKey::generate().unwrap();
        let built = build(Scheme::SimplePir, (seed, count, 3), shards, &key);
        let seen = same_as_whole(&built, seed, count, &key);
        // Each shard was sent only its columns of the query: a query message of its width.
        prop_assert_eq!(seen.len(), shards);
        for (k, lengths) in seen {
            let columns = split::simple_pir_columns(&built.params, &built.map.shards[k].range()).unwrap();
            prop_assert_eq!(lengths, vec![pir_core::wire::HEADER_LEN + 32 + 4 * columns.len()]);
        }
    }

    #[test]
    fn double_pir_parts_add_up_to_the_whole_answer(seed in any::<u64>(), shards in 1usize..=4, count in 300u64..1200) {
        let key = SecretKey::generate().unwrap();
        // 8-byte records: 8 rows per column at least, so that 4 shards fit.
        let built = build(Scheme::DoublePir, (seed, count, 8), shards, &key);
        let seen = same_as_whole(&built, seed, count, &key);
        // DoublePIR's shards get the whole query (they all need `c1`).
        let whole = pir_core::wire::HEADER_LEN + pir_lattice::wire::query_body_bytes(&built.params);
        prop_assert!(seen.iter().all(|(_, lengths)| *lengths == vec![whole]));
    }
}

#[test]
fn a_part_of_another_shard_or_database_or_key_is_refused() {
    refused(Scheme::SimplePir, 3);
    refused(Scheme::DoublePir, 8);
}

fn refused(scheme: Scheme, record_bytes: usize) {
    let key = SecretKey::generate().unwrap();
    let built = build(scheme, (9, 900, record_bytes), 2, &key);
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let request = request(&built.whole.hint().unwrap(), 17, &mut rng);
    let message = |reply: pir_service::Reply| {
        let envelope = pir_core::wire::decode_envelope(&reply.body, 4096).unwrap();
        (
            reply.status,
            pir_core::wire::decode_error(envelope.body).unwrap(),
        )
    };
    // Shard 1's replica answers for shard 0 and the other way round.
    let swapped = front(&built, vec![1, 0], &key).unwrap();
    let (status, _) = message(swapped.handle(&request));
    assert_eq!(status, 500, "a swapped part must not be combined");
    // A shard of another database: its part id differs, so it refuses the batch.
    let mut other = build(scheme, (9, 900, record_bytes), 2, &key);
    other.map.database_id = [6; 32];
    let front_of_other = front(&other, vec![0, 1], &key);
    assert!(
        front_of_other.is_err(),
        "hints of another database are refused"
    );
    // An unlisted key: the replica's key is not among shard 0's.
    let stranger = SecretKey::generate().unwrap().public();
    let keys = vec![vec![stranger], vec![built.shards[1][0].1]];
    let fanout = Local::new(built.shards.clone(), vec![0, 1]);
    let strict = SignedService::new(
        Front::new(built.map.clone(), keys, &built.downloads, fanout).unwrap(),
        copy(&key),
    );
    assert_eq!(message(strict.handle(&request)).0, 500);
    // No replica of shard 1: the refusal names the shard.
    let mut down = built.shards.clone();
    down[1].clear();
    let keys = built.shards.iter().map(|s| vec![s[0].1]).collect();
    let gone = SignedService::new(
        Front::new(
            built.map.clone(),
            keys,
            &built.downloads,
            Local::new(down, vec![0, 1]),
        )
        .unwrap(),
        copy(&key),
    );
    let (status, (_, text)) = message(gone.handle(&request));
    assert_eq!(status, 503);
    assert!(text.contains("shard 1 has no live replica"), "{text}");
}

#[test]
fn shard_map_fail_vectors() {
    use pir_core::codec::testing::{
        check_fail_vectors, cut, patch, trailing, vectors_dir, FailVector,
    };
    use pir_core::Codec;
    use pir_service::shard::SignedShardMap;
    let key = SecretKey::generate().unwrap();
    let map = ShardMap {
        scheme: SchemeId::SimplePir,
        database_id: [5; 32],
        rows: 10,
        row_bytes: 3,
        about: b"ab".to_vec(),
        shards: vec![
            ShardEntry {
                id: 0,
                first_row: 0,
                rows: 4,
                part_hash: [1; 32],
            },
            ShardEntry {
                id: 1,
                first_row: 4,
                rows: 6,
                part_hash: [2; 32],
            },
        ],
    };
    // The vectors must not depend on a fresh key: the signature bytes are fixed.
    let mut signed = map.sign(&key);
    signed.signer = PublicKey([9; 32]);
    signed.signature = [8; 64];
    let good = signed.to_bytes();
    assert_eq!(SignedShardMap::from_bytes(&good, &()).unwrap(), signed);
    // Offsets: prologue 10, scheme 10, reserved 11, id 12..44, rows 44, row bytes 52,
    // about len 56 (2) + 2, count 60, shard 0 at 62 (id 62, first 64, rows 72), shard 1 at 112.
    let vectors = [
        FailVector::new(
            "truncated",
            "Truncated",
            "signature one byte short",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the signature",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_magic",
            "WrongMagic",
            "PIRshmaq",
            patch(&good, 7, 1, u64::from(b'q')),
        ),
        FailVector::new(
            "next_version",
            "WrongVersion",
            "version 2",
            patch(&good, 8, 2, 2),
        ),
        FailVector::new(
            "unknown_scheme",
            "WrongScheme",
            "scheme 99",
            patch(&good, 10, 1, 99),
        ),
        FailVector::new(
            "reserved",
            "Malformed",
            "reserved byte 1",
            patch(&good, 11, 1, 1),
        ),
        FailVector::new(
            "about_oversized",
            "Oversized",
            "about length 4097",
            patch(&good, 56, 2, 4097),
        ),
        FailVector::new(
            "no_shards",
            "OutOfRange",
            "0 shards",
            patch(&good, 60, 2, 0),
        ),
        FailVector::new(
            "too_many_shards",
            "OutOfRange",
            "257 shards",
            patch(&good, 60, 2, 257),
        ),
        FailVector::new(
            "shards_above_bytes",
            "Truncated",
            "4 shards, 2 present and the signature",
            patch(&good, 60, 2, 4),
        ),
        FailVector::new(
            "shard_id",
            "Malformed",
            "shard 1 has id 7",
            patch(&good, 112, 2, 7),
        ),
        FailVector::new(
            "gap",
            "Malformed",
            "shard 1 starts at row 5",
            patch(&good, 114, 8, 5),
        ),
        FailVector::new(
            "short_cover",
            "Malformed",
            "the shards cover 9 of 10 rows",
            patch(&good, 122, 8, 5),
        ),
        FailVector::new(
            "empty_shard",
            "Malformed",
            "shard 0 has no rows",
            patch(&good, 72, 8, 0),
        ),
    ];
    let dir = vectors_dir(env!("CARGO_MANIFEST_DIR"), "shard_map");
    assert!(check_fail_vectors::<SignedShardMap>(&dir, &vectors, &()) >= vectors.len());
}
