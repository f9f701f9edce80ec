//! YPIR row shards through the front end (`YpirFront`), on random row boundaries: the signed
//! replies (a key upload, then a query naming the keys by id) are byte for byte a whole YPIR
//! server's with the same key, and the hint download too; a shard is sent the query without
//! the client's keys; a part of another shard or another database is refused, and a shard
//! without replicas is named. One front end for all of it: its packing plan is most of a YPIR
//! front end's start (S = 1..4 against the whole server: `pir_lattice::ypir::shard`'s tests).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::{Arc, Mutex};

use pir_keys::{PublicKey, SecretKey};
use pir_lattice::ypir::shard::SHARD_KEY_ID;
use pir_lattice::{Params, Scheme, SingleClient};
use pir_service::shard::{split, Done, Fanout, ShardEntry, ShardMap, YpirFront};
use pir_service::{Handler, Lattice, LatticeDatabase, LatticeService, SignedService};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

/// One-byte records: the smallest YPIR layout (4096 row groups of one row).
const RECORDS: u64 = 3000;

fn copy(key: &SecretKey) -> SecretKey {
    SecretKey::from_pkcs8(key.pkcs8()).unwrap()
}

/// Shard services in process; `swap[k]` answers for shard `k`. Records the bytes of every
/// query each shard was sent.
struct Local {
    shards: Vec<Vec<(Arc<LatticeService>, PublicKey)>>,
    /// Which shard answers for each shard, and whether shard 1 has lost its replicas.
    mode: Arc<Mutex<(Vec<usize>, bool)>>,
    seen: Arc<Mutex<Vec<Vec<u8>>>>,
}

impl Fanout for Local {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        let envelope = pir_core::wire::decode_envelope(&request, request.len()).unwrap();
        let batch = pir_core::protocol::decode_query_batch(envelope.body).unwrap();
        let queries = batch.queries.iter().map(|q| q.to_vec());
        self.seen.lock().unwrap().extend(queries);
        let (swap, down) = self.mode.lock().unwrap().clone();
        if down && shard == 1 {
            return done(Err("no replica".into()));
        }
        done(match self.shards[swap[shard]].get(replica) {
            Some((service, key)) => Ok((service.handle(&request).body, *key)),
            None => Err("no replica".into()),
        });
    }
}

struct Built {
    whole: LatticeService,
    map: ShardMap,
    shards: Vec<Vec<(Arc<LatticeService>, PublicKey)>>,
    downloads: Vec<Vec<u8>>,
}

fn database(records: &[u8], version: u8) -> LatticeDatabase<'_> {
    LatticeDatabase {
        scheme: Scheme::Ypir,
        records,
        record_count: records.len() as u64,
        record_bytes: 1,
        seeds: [[3; 16], [4; 16]],
        version: [version; 32],
        about: b"the records".to_vec(),
    }
}

/// The whole server and `shards` shard services on random row group boundaries.
fn build(seed: u64, shards: usize, version: u8, key: &SecretKey) -> Built {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut records = vec![0u8; RECORDS as usize];
    rng.fill_bytes(&mut records);
    let whole = Lattice::new(database(&records, version), &mut |_, _| {})
        .unwrap()
        .serve(copy(key));
    let params = Params::new(Scheme::Ypir, RECORDS, 8).unwrap();
    let rows = params.rows() as u64;
    let mut cuts = vec![0, rows];
    while cuts.len() < shards + 1 {
        let cut = rng.random_range(1..rows);
        if !cuts.contains(&cut) {
            cuts.push(cut);
        }
    }
    cuts.sort_unstable();
    let map = ShardMap {
        scheme: Scheme::Ypir.id(),
        database_id: [version; 32],
        rows,
        row_bytes: 1,
        about: b"the records".to_vec(),
        shards: cuts
            .windows(2)
            .enumerate()
            .map(|(k, w)| ShardEntry {
                id: k as u16,
                first_row: w[0],
                rows: w[1] - w[0],
                part_hash: [0; 32],
            })
            .collect(),
    };
    let mut services = Vec::new();
    let mut downloads = Vec::new();
    for (k, entry) in map.shards.iter().enumerate() {
        let slice = split::double_pir_rows(&params, &entry.range()).unwrap();
        let part = pir_lattice::double_rows::row_part(&params, &records, &slice).unwrap();
        let mut db = database(&part, version);
        db.record_count = RECORDS;
        let (lattice, _) =
            Lattice::shard(db, slice, map.part_id(k).unwrap(), None, &mut |_, _| {}).unwrap();
        downloads.push(lattice.download().to_vec());
        let shard_key = SecretKey::generate().unwrap();
        let public = shard_key.public();
        services.push(vec![(Arc::new(lattice.serve(shard_key)), public)]);
    }
    Built {
        whole,
        map,
        shards: services,
        downloads,
    }
}

type Seen = Arc<Mutex<Vec<Vec<u8>>>>;
type Mode = Arc<Mutex<(Vec<usize>, bool)>>;

fn front(built: &Built, key: &SecretKey) -> (SignedService<YpirFront<Local>>, Seen, Mode) {
    let seen = Seen::default();
    let mode = Mode::new(Mutex::new(((0..built.shards.len()).collect(), false)));
    let fanout = Local {
        shards: built.shards.clone(),
        mode: mode.clone(),
        seen: seen.clone(),
    };
    let front = YpirFront::new(built.map.clone(), keys_of(built), &built.downloads, fanout);
    (SignedService::new(front.unwrap(), copy(key)), seen, mode)
}

fn keys_of(built: &Built) -> Vec<Vec<PublicKey>> {
    built.shards.iter().map(|s| vec![s[0].1]).collect()
}

/// A request for record `index` from `client`.
fn request(client: &dyn SingleClient, index: u64, rng: &mut ChaCha20Rng) -> Vec<u8> {
    let (_, query) = client.query(index, rng).unwrap();
    let batch = pir_core::protocol::encode_query_batch(&client.header().version, &[query]);
    pir_core::wire::encode_envelope(
        Scheme::Ypir.id(),
        pir_core::wire::MessageKind::Query,
        &batch,
    )
}

fn client_of(download: &[u8]) -> Box<dyn SingleClient> {
    let (scheme, _, hint) = pir_service::lattice::parse_download(download).unwrap();
    pir_lattice::open_client(scheme, hint).unwrap()
}

#[test]
fn ypir_parts_pack_to_the_whole_answer_and_wrong_parts_are_refused() {
    let key = SecretKey::generate().unwrap();
    let shards = 3;
    let built = build(7, shards, 5, &key);
    let (front, seen, mode) = front(&built, &key);
    let download = front.hint().unwrap();
    assert_eq!(&download[..], &built.whole.hint().unwrap()[..]);
    let client = client_of(&download);
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    // The first request uploads the keys, the second names them by id.
    for _ in 0..2 {
        let index = rng.random_range(0..RECORDS);
        let request = request(&*client, index, &mut rng);
        let reply = front.handle(&request);
        assert_eq!(reply.status, 200);
        // Ed25519 is deterministic: the same key over the same answer gives the same bytes.
        let whole = built.whole.handle(&request).body;
        assert_eq!(reply.body, whole, "{:?}", built.map.shards);
    }
    // Every shard was sent each query without keys, under the one shared key id.
    let lengths = pir_lattice::ypir::lengths_of(&client.header().params).unwrap();
    let id_at = pir_core::wire::HEADER_LEN + 32 + 1;
    let seen = std::mem::take(&mut *seen.lock().unwrap());
    assert_eq!(seen.len(), 2 * shards);
    for query in &seen {
        assert_eq!(
            query.len(),
            pir_core::wire::HEADER_LEN + lengths.query_bytes_by_id()
        );
        assert_eq!(&query[id_at..id_at + 16], &SHARD_KEY_ID[..]);
    }

    let message = |reply: pir_service::Reply| {
        let envelope = pir_core::wire::decode_envelope(&reply.body, 4096).unwrap();
        (
            reply.status,
            pir_core::wire::decode_error(envelope.body).unwrap(),
        )
    };
    // Shard 1's replica answers for shard 0 and the other way round: their part ids (and
    // keys) differ, so the parts are refused, never added.
    *mode.lock().unwrap() = (vec![1, 0, 2], false);
    let (status, _) = message(front.handle(&request(&*client, 17, &mut rng)));
    assert_eq!(status, 500, "a swapped part must not be combined");
    // No replica of shard 1: the refusal names the shard.
    *mode.lock().unwrap() = ((0..shards).collect(), true);
    let (status, (_, text)) = message(front.handle(&request(&*client, 17, &mut rng)));
    assert_eq!(status, 503);
    assert!(text.contains("shard 1 has no live replica"), "{text}");
    // Back to normal: the keys uploaded before still serve.
    *mode.lock().unwrap() = ((0..shards).collect(), false);
    assert_eq!(front.handle(&request(&*client, 17, &mut rng)).status, 200);

    // A map of another database: the shards' offline parts name another version (refused
    // before any plan is built), and so would their part ids.
    let mut other = built.map.clone();
    other.database_id = [6; 32];
    let fanout = Local {
        shards: built.shards.clone(),
        mode: Mode::new(Mutex::new(((0..shards).collect(), false))),
        seen: Seen::default(),
    };
    let refused = YpirFront::new(other, keys_of(&built), &built.downloads, fanout);
    assert!(refused.is_err());
    // A download of another shard in shard 0's place: its rows differ from the map's.
    let mut swapped = built.downloads.clone();
    swapped.swap(0, 1);
    let fanout = Local {
        shards: built.shards.clone(),
        mode: Mode::new(Mutex::new(((0..shards).collect(), false))),
        seen: Seen::default(),
    };
    assert!(YpirFront::new(built.map.clone(), keys_of(&built), &swapped, fanout).is_err());
}
