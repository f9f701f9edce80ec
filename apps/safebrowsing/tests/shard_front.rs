//! A Safe Browsing database in shards behind its front end answers exactly as a whole Safe
//! Browsing server: with the same signing key, in both roles, every reply (releases list,
//! each bucket's info, the list index download, Checklist lookups, refreshes and hint
//! requests, SinglePass lookups and hints, DPF lookups, and the refusals: hints asked of the
//! online role, a malformed query) is byte for byte the whole server's, over the number of
//! shards (1 to 4) and random row boundaries (crossing buckets); a part of another shard or of
//! another database is refused.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::ops::Range;
use std::sync::Arc;

use pir_core::{DbShape, MultiServerScheme, SchemeId};
use pir_keys::{PublicKey, SecretKey};
use pir_safebrowsing::command::bucket_release;
use pir_safebrowsing::shard::{front_backends, shard_backends, split};
use pir_safebrowsing::ListDatabase;
use pir_service::checklist::{self as ck, download_envelope, Role};
use pir_service::shard::{Done, Fanout, ShardMap, XorFront};
use pir_service::{Handler, Metrics, ReleaseSet, ServedRelease, SignedService};
use pir_xor::checklist::pset::Ggm;
use pir_xor::checklist::Params;
use pir_xor::offline::OfflineRequest;
use pir_xor::DpfPir;
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn copy(key: &SecretKey) -> SecretKey {
    SecretKey::from_pkcs8(key.pkcs8()).unwrap()
}

fn hosts(range: Range<usize>) -> String {
    range.map(|i| format!("host{i}.example\n")).collect()
}

/// A list of several buckets: one large (hinted), and small ones from two updates.
fn list(first: usize) -> ListDatabase {
    let (v0, _) = ListDatabase::build_with("sb", &hosts(first..first + 300), Some(16)).unwrap();
    let (v1, _, _) = v0.update(&hosts(first + 5..first + 340)).unwrap();
    let (v2, _, _) = v1.update(&hosts(first + 9..first + 351)).unwrap();
    assert!(v2.buckets().len() >= 2, "{}", v2.buckets().len());
    v2
}

/// Shard replicas in process; shard `k`'s requests go to `shards[route[k]]`.
struct Local {
    shards: Vec<(
        Arc<ReleaseSet<pir_service::shard::checklist::ChecklistShard>>,
        PublicKey,
    )>,
    route: Vec<usize>,
}

impl Fanout for Local {
    fn send(&self, shard: usize, replica: usize, request: Arc<Vec<u8>>, done: Done) {
        done(match (replica, self.shards.get(self.route[shard])) {
            (0, Some((set, key))) => Ok((set.handle_many(&[&request])[0].body.clone(), *key)),
            _ => Err("no replica".into()),
        });
    }
}

/// Cuts `0..count` at `shards - 1` distinct random places.
fn boundaries(rng: &mut ChaCha20Rng, count: u64, shards: usize) -> Vec<Range<u64>> {
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

type Shards = Vec<(
    Arc<ReleaseSet<pir_service::shard::checklist::ChecklistShard>>,
    PublicKey,
)>;

/// Every shard of `list` cut at `ranges` as a release set of its per-bucket parts, each
/// signing with `key(k)`.
fn shards(
    list: &ListDatabase,
    ranges: &[Range<u64>],
    key: impl Fn(usize) -> SecretKey,
) -> (ShardMap, Shards) {
    let (map, parts) = split(list, ranges).unwrap();
    let index = list.index();
    let shards = parts
        .iter()
        .enumerate()
        .map(|(k, part)| {
            let metrics = Arc::new(Metrics::default());
            let key = key(k);
            let public = key.public();
            let releases = shard_backends(&index, &map, k, part)
                .unwrap()
                .into_iter()
                .map(|(info, backend)| {
                    let service =
                        SignedService::new(backend, copy(&key)).with_metrics(metrics.clone());
                    ServedRelease::new(info, Arc::new(service))
                })
                .collect();
            (
                Arc::new(ReleaseSet::new(releases, metrics).unwrap()),
                public,
            )
        })
        .collect();
    (map, shards)
}

/// The whole server of `role` and the front end over `shards` (routed by `route`), both
/// signing with `key`.
fn servers(
    list: &ListDatabase,
    role: Role,
    key: &SecretKey,
    map: &ShardMap,
    shards: Shards,
    route: Vec<usize>,
) -> (Arc<dyn Handler>, Arc<dyn Handler>) {
    let metrics = Arc::new(Metrics::default());
    let whole: Vec<_> = list
        .buckets()
        .iter()
        .map(|b| bucket_release(list, b, role, copy(key), metrics.clone()).unwrap())
        .collect();
    let whole = ReleaseSet::new(whole, metrics).unwrap();
    let keys = shards.iter().map(|(_, key)| vec![*key]).collect();
    let fanout = Local { shards, route };
    let xor = Arc::new(XorFront::new(map.clone(), keys, Vec::new(), fanout).unwrap());
    let metrics = Arc::new(Metrics::default());
    let front: Vec<_> = front_backends(&list.index(), map, role, &xor)
        .unwrap()
        .into_iter()
        .map(|(info, backend)| {
            let service = SignedService::new(backend, copy(key)).with_metrics(metrics.clone());
            ServedRelease::new(info, Arc::new(service))
        })
        .collect();
    let front = ReleaseSet::new(front, metrics).unwrap();
    if role == Role::Offline {
        let download = Some(download_envelope(&list.index().encode()));
        whole.set_download(download.clone());
        front.set_download(download);
    }
    (Arc::new(whole), Arc::new(front))
}

/// Every request a Safe Browsing server answers, for every bucket of `list`.
fn requests(list: &ListDatabase, rng: &mut ChaCha20Rng) -> Vec<Vec<u8>> {
    use pir_core::wire::{encode_envelope, MessageKind};
    let mut out = vec![encode_envelope(
        SchemeId::Control,
        MessageKind::ReleasesRequest,
        &[],
    )];
    for bucket in list.buckets() {
        let id = bucket.database_id;
        let records = bucket.len() as u64;
        out.push(encode_envelope(
            SchemeId::Control,
            MessageKind::ManifestRequest,
            &id,
        ));
        let params = Params::new(records, 32).unwrap();
        let sets = params.sets();
        let lookups: Vec<Vec<u8>> = (0..2)
            .map(|_| {
                let set = sets.random(rng);
                let key = sets.puncture(&Ggm::new(), &set, rng.random_range(0..sets.size()));
                ck::lookup_query(&params, &key)
            })
            .collect();
        out.push(pir_service::reply::request(
            SchemeId::Checklist,
            &id,
            &lookups,
        ));
        let request = OfflineRequest::random(rng);
        let count = ck::hints_per_request(&params).min(params.hints() as u32);
        out.push(pir_service::reply::request(
            SchemeId::Checklist,
            &id,
            &[ck::hints_query(&params, &request, 0, count)],
        ));
        let sp = pir_xor::singlepass::Params::new(records, 32).unwrap();
        let offsets: Vec<u16> = (0..sp.rows())
            .map(|_| rng.random_range(0..sp.columns()) as u16)
            .collect();
        out.push(pir_service::reply::request(
            SchemeId::SinglePass,
            &id,
            &[pir_service::singlepass::lookup_query(&sp, &offsets)],
        ));
        out.push(pir_service::reply::request(
            SchemeId::SinglePass,
            &id,
            &[pir_service::singlepass::hints_query(&sp, &request)],
        ));
        let dpf = DpfPir::new(DbShape::new(records, 32).unwrap());
        let index = rng.random_range(0..records as usize);
        let (keys, _) = dpf.query(&[index], rng).unwrap();
        let bodies: Vec<Vec<u8>> = keys.iter().map(|k| dpf.encode_query(k)).collect();
        out.push(pir_service::reply::request(SchemeId::Dpf, &id, &bodies));
        out.push(pir_service::reply::request(
            SchemeId::Checklist,
            &id,
            &[vec![9, 9, 9]],
        ));
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(6))]

    #[test]
    fn a_front_end_answers_as_a_whole_server(seed in any::<u64>(), count in 1usize..=4) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let list = list(0);
        let rows: u64 = list.buckets().iter().map(|b| b.len() as u64).sum();
        let ranges = boundaries(&mut rng, rows, count);
        let keys: Vec<SecretKey> = (0..count).map(|_| SecretKey::generate().unwrap()).collect();
        for role in [Role::Offline, Role::Online] {
            let (map, shards) = shards(&list, &ranges, |k| copy(&keys[k]));
            let key = SecretKey::generate().unwrap();
            let (whole, front) = servers(&list, role, &key, &map, shards, (0..count).collect());
            prop_assert_eq!(whole.hint(), front.hint(), "download, {:?}", role);
            for request in requests(&list, &mut rng) {
                let a = whole.handle_many(&[&request]).remove(0);
                let b = front.handle_many(&[&request]).remove(0);
                prop_assert_eq!(a.status, b.status, "{:?} {:?}", role, &ranges);
                prop_assert_eq!(a.body, b.body, "{:?} {:?}", role, &ranges);
            }
            prop_assert!(front.ready());
        }
    }
}

/// The status and body of `front`'s reply to `list`'s first Checklist lookup.
fn lookup(list: &ListDatabase, front: &dyn Handler) -> (u16, String) {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let request = requests(list, &mut rng).swap_remove(2);
    let reply = front.handle_many(&[&request]).remove(0);
    (
        reply.status,
        String::from_utf8_lossy(&reply.body).into_owned(),
    )
}

#[test]
fn a_part_of_another_shard_or_database_is_refused() {
    let list = list(0);
    let rows: u64 = list.buckets().iter().map(|b| b.len() as u64).sum();
    let ranges = vec![0..rows / 2, rows / 2..rows];
    // One key for every shard: only the part ids can tell the parts apart.
    let shard_key = SecretKey::generate().unwrap();
    let key = SecretKey::generate().unwrap();
    let (map, right) = shards(&list, &ranges, |_| copy(&shard_key));
    let (_, front) = servers(&list, Role::Online, &key, &map, right.clone(), vec![0, 1]);
    assert_eq!(lookup(&list, front.as_ref()).0, 200);

    // Shard 0's requests answered by shard 1.
    let (_, front) = servers(&list, Role::Online, &key, &map, right.clone(), vec![1, 1]);
    refused(&list, front.as_ref(), 0);

    // Shard 1 of another list (another database) of the same shape.
    let other = list_other();
    let (_, wrong) = shards(&other, &ranges, |_| copy(&shard_key));
    let mixed = vec![right[0].clone(), wrong[1].clone()];
    let (_, front) = servers(&list, Role::Online, &key, &map, mixed, vec![0, 1]);
    refused(&list, front.as_ref(), 1);
}

/// `front` refuses a lookup (the client is told only that the server failed; its log names
/// the shard) and counts shard `k`'s part as a failure, never combining it.
fn refused(list: &ListDatabase, front: &dyn Handler, k: usize) {
    let (status, body) = lookup(list, front);
    assert_ne!(status, 200);
    assert!(body.contains("failed to answer"), "{body}");
    let metrics = front.render_metrics();
    assert!(
        metrics.contains(&format!("pir_shard_failures_total{{shard=\"{k}\"}} 1")),
        "{metrics}"
    );
}

/// A list with the same bucket sizes as `list(0)` and other records.
fn list_other() -> ListDatabase {
    let other = list(10_000);
    let sizes = |l: &ListDatabase| l.buckets().iter().map(|b| b.len()).collect::<Vec<_>>();
    assert_eq!(sizes(&other), sizes(&list(0)));
    other
}
