//! Mirror lists as clients use them: freshness (expired and rolled-back lists refused), the
//! old format refused with how to rebuild it, a newer list learned from the mirrors, and
//! mirrors drawn at random for every fetch (spread checked with a chi-square test).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use pir_client::{LocalTransport, MirrorInfo};
use pir_keys::{PublicKey, SecretKey};
use pir_service::{Handler, ReleaseSet};
use pir_updates::current_list::{self, SignedList};
use pir_updates::fetch::{SchemeChoice, UpdateSession};
use pir_updates::freshness::{now_unix, Freshness};
use pir_updates::{release, MirrorEntry, MirrorList, UpdateError};
use rand::SeedableRng;

const HOUR: u64 = 3600;

fn list(vendor: &SecretKey, version: u64, expires_unix: u64, keys: &[PublicKey]) -> SignedList {
    let list = MirrorList {
        created_unix: now_unix(),
        list_version: version,
        expires_unix,
        mirrors: keys
            .iter()
            .enumerate()
            .map(|(i, key)| MirrorEntry::new(url_of(key, i), *key))
            .collect(),
    };
    SignedList::verify(list.encode_signed(vendor), &vendor.public()).unwrap()
}

/// A URL naming the key, so that a list's position does not matter.
fn url_of(key: &PublicKey, _position: usize) -> String {
    format!("https://m{}.test:443", key.fingerprint())
}

fn stale(result: Result<(), UpdateError>) -> String {
    match result {
        Err(UpdateError::Stale(why)) => why,
        other => panic!("expected a stale-list refusal, got {other:?}"),
    }
}

#[test]
fn expired_and_rolled_back_lists_are_refused_and_a_fresh_client_accepts_the_current_one() {
    let dir = tempfile::tempdir().unwrap();
    let vendor = SecretKey::generate().unwrap();
    let keys = [SecretKey::generate().unwrap().public()];
    let now = now_unix();
    let lists = Freshness::for_mirror_lists(dir.path(), &vendor.public());
    let current = list(&vendor, 5, now + HOUR, &keys);
    current_list::accept(&current, &lists, now).unwrap();
    assert_eq!(lists.newest_seen().unwrap(), Some(5));
    assert_eq!(lists.kept_list(), Some(current.bytes.clone()));

    let older = list(&vendor, 4, now + HOUR, &keys);
    let why = stale(current_list::accept(&older, &lists, now));
    assert!(
        why.contains("rollback attack") && why.contains("version 4"),
        "{why}"
    );
    let expired = list(&vendor, 6, now - 1, &keys);
    let why = stale(current_list::accept(&expired, &lists, now));
    assert!(
        why.contains("freeze attack") && why.contains("mirror list"),
        "{why}"
    );
    assert_eq!(
        lists.newest_seen().unwrap(),
        Some(5),
        "nothing refused is recorded"
    );
    // The same list again is fine, and the kept newer list wins over an older file.
    current_list::accept(&current, &lists, now).unwrap();
    assert_eq!(
        current_list::newest_known(older, &lists, &vendor.public()),
        current
    );

    // A client that has seen nothing accepts the current list; another vendor's record is
    // its own.
    let fresh_dir = tempfile::tempdir().unwrap();
    let fresh = Freshness::for_mirror_lists(fresh_dir.path(), &vendor.public());
    current_list::accept(&list(&vendor, 4, now + HOUR, &keys), &fresh, now).unwrap();
    let other = SecretKey::generate().unwrap();
    let theirs = Freshness::for_mirror_lists(dir.path(), &other.public());
    current_list::accept(&list(&other, 1, now + HOUR, &keys), &theirs, now).unwrap();
}

#[test]
fn an_old_format_list_is_refused_with_how_to_rebuild_it() {
    let vendor = SecretKey::generate().unwrap();
    let entry = MirrorEntry::new("https://127.0.0.1:8443".into(), PublicKey([1; 32]));
    // Format 1: magic, version 1, created_unix, count, entries; then the signature.
    let mut body = b"PIRL".to_vec();
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&1_700_000_000u64.to_le_bytes());
    body.extend_from_slice(&1u16.to_le_bytes());
    body.extend_from_slice(&(entry.url.len() as u16).to_le_bytes());
    body.extend_from_slice(entry.url.as_bytes());
    body.extend_from_slice(&entry.key.0);
    let mut message = pir_updates::mirrors::MIRROR_LIST_SIGNING_CONTEXT.to_vec();
    message.extend_from_slice(&body);
    body.extend_from_slice(&vendor.sign(&message));

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("mirrors.pir");
    std::fs::write(&path, &body).unwrap();
    let error = SignedList::load(&path, &vendor.public())
        .unwrap_err()
        .to_string();
    assert!(error.contains("format version 1"), "{error}");
    assert!(
        error.contains("pir mirror-list build")
            && error.contains("--list-version")
            && error.contains("--valid-hours"),
        "{error}"
    );
}

/// A small release and `count` mirrors serving it (each its own key), as handlers.
struct Fleet {
    _dir: tempfile::TempDir,
    vendor: SecretKey,
    keys: Vec<PublicKey>,
    sets: Vec<Arc<ReleaseSet>>,
    /// A file of the release, and its bytes.
    name: String,
    payload: Vec<u8>,
}

fn fleet(count: usize) -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let (src, out) = (dir.path().join("src"), dir.path().join("release"));
    let files = pir_updates::sample::write_sample_release(&src, 3, 5).unwrap();
    let name = files[0].0.clone();
    let payload = std::fs::read(src.join(&name)).unwrap();
    let vendor = SecretKey::generate().unwrap();
    let small_blocks = release::BuildOptions {
        block_size: Some(1024),
        ..release::BuildOptions::default()
    };
    release::build(&src, &vendor, &out, &small_blocks).unwrap();
    let mut keys = Vec::new();
    let mut sets = Vec::new();
    for _ in 0..count {
        let key = SecretKey::generate().unwrap();
        let opened = release::open(&out, None, true).unwrap();
        sets.push(Arc::new(pir_updates::serve::single(opened, &key).unwrap()));
        keys.push(key.public());
    }
    Fleet {
        _dir: dir,
        vendor,
        keys,
        sets,
        name,
        payload,
    }
}

impl Fleet {
    /// A transport to `mirrors` (by URL, in their order).
    fn connect(&self, mirrors: &[MirrorInfo]) -> Result<Arc<LocalTransport>, UpdateError> {
        let by_url: HashMap<String, Arc<dyn Handler>> = self
            .keys
            .iter()
            .zip(&self.sets)
            .enumerate()
            .map(|(i, (key, set))| (url_of(key, i), set.clone() as Arc<dyn Handler>))
            .collect();
        Ok(Arc::new(LocalTransport::new(
            mirrors.iter().map(|m| by_url[&m.url].clone()).collect(),
        )))
    }

    /// Every mirror serves `list` (or none).
    fn serve_list(&self, list: Option<&SignedList>) {
        for set in &self.sets {
            set.set_download(list.map(|l| bytes::Bytes::from(l.bytes.clone())));
        }
    }

    /// A session opened with the list file `given` and the state in `state`.
    async fn open(
        &self,
        given: &SignedList,
        state: &Path,
    ) -> Result<UpdateSession<LocalTransport>, UpdateError> {
        let vendor = self.vendor.public();
        UpdateSession::open_listed(given.clone(), &vendor, state, 2, |m| self.connect(m)).await
    }

    fn queries(&self) -> Vec<u64> {
        self.sets
            .iter()
            .map(|set| set.shared_metrics().queries())
            .collect()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_learns_a_newer_list_from_a_mirror_without_the_vendor() {
    let fleet = fleet(4);
    let state = tempfile::tempdir().unwrap();
    let now = now_unix();
    let vendor = fleet.vendor.public();
    // The client was given list 1 (mirrors 0, 1, 2); the vendor has since signed list 2
    // without mirror 0 and with mirror 3, and the mirrors serve it. There is no vendor URL.
    let given = list(&fleet.vendor, 1, now + HOUR, &fleet.keys[..3]);
    let newer = list(&fleet.vendor, 2, now + HOUR, &fleet.keys[1..]);
    fleet.serve_list(Some(&newer));
    let session = fleet.open(&given, state.path()).await.unwrap();
    assert_eq!(session.mirrors, newer.mirrors());
    let lists = Freshness::for_mirror_lists(state.path(), &vendor);
    assert_eq!(lists.newest_seen().unwrap(), Some(2));
    assert_eq!(lists.kept_list(), Some(newer.bytes.clone()));
    let got = session
        .fetch(&[fleet.name.as_str()], SchemeChoice::Chor { servers: 2 })
        .await
        .unwrap();
    assert_eq!(got.files[0].1, fleet.payload);
    assert_eq!(fleet.queries()[0], 0, "the dropped mirror was asked");

    // Next session, given list 1 again: the kept list 2 is used.
    fleet.serve_list(None);
    let session = fleet.open(&given, state.path()).await.unwrap();
    assert_eq!(session.mirrors, newer.mirrors());

    // Mirrors cannot push an expired list, another vendor's, or an older one.
    let fresh = tempfile::tempdir().unwrap();
    let other = SecretKey::generate().unwrap();
    for bad in [
        list(&fleet.vendor, 3, now - 1, &fleet.keys[1..]),
        list(&other, 3, now + HOUR, &fleet.keys[1..]),
        list(&fleet.vendor, 0, now + HOUR, &fleet.keys[1..]),
    ] {
        fleet.serve_list(Some(&bad));
        let session = fleet.open(&given, fresh.path()).await.unwrap();
        assert_eq!(session.mirrors, given.mirrors());
    }

    // An expired list the client holds is refused when no mirror has a newer one.
    let expired = list(&fleet.vendor, 9, now - 1, &fleet.keys[..3]);
    let error = fleet.open(&expired, fresh.path()).await.unwrap_err();
    assert!(error.to_string().contains("freeze attack"), "{error}");
}

/// Pearson's chi-square statistic of `counts` against a uniform spread.
fn chi_square(counts: &[u64]) -> f64 {
    let total: u64 = counts.iter().sum();
    let expected = total as f64 / counts.len() as f64;
    counts
        .iter()
        .map(|&c| (c as f64 - expected).powi(2) / expected)
        .sum()
}

/// The 0.1% critical value of chi-square with 5 degrees of freedom (six mirrors): a uniform
/// choice exceeds it once in a thousand seeds, and the seed is fixed, so the test cannot flake;
/// a choice in list order gives hundreds.
const CHI_SQUARE_5_DF_0_001: f64 = 20.515;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_spread_evenly_over_six_mirrors() {
    let fleet = fleet(6);
    let now = now_unix();
    let state = tempfile::tempdir().unwrap();
    let signed = list(&fleet.vendor, 1, now + HOUR, &fleet.keys);
    let servers = 2;
    let session = fleet
        .open(&signed, state.path())
        .await
        .unwrap()
        .with_seed(33);
    // Every mirror serves the release, whichever were asked to learn it.
    let chosen = &session.release.mirrors;
    assert_eq!(
        chosen.serving.len(),
        servers,
        "only {servers} mirrors were asked"
    );
    assert_eq!(chosen.serving.len() + chosen.unasked.len(), 6);

    // 300 choices through the session's choice function: how often each mirror is asked.
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2026);
    let mut asked = [0u64; 6];
    for _ in 0..300 {
        let order = chosen.order(&mut rng);
        assert_eq!(order.len(), 6, "every mirror is in the order, spares too");
        for &m in &order[..servers] {
            asked[m] += 1;
        }
    }
    let statistic = chi_square(&asked);
    assert!(
        statistic < CHI_SQUARE_5_DF_0_001,
        "mirrors asked {asked:?}: chi-square {statistic:.1}"
    );
    // The same test rejects a choice in list order.
    assert!(chi_square(&[300, 300, 0, 0, 0, 0]) > CHI_SQUARE_5_DF_0_001);

    // Real fetches go to the mirrors drawn for each, and over a few fetches to all six.
    let mut before = fleet.queries();
    for _ in 0..12 {
        let got = session
            .fetch(&[fleet.name.as_str()], SchemeChoice::Chor { servers })
            .await
            .unwrap();
        assert_eq!(got.files[0].1, fleet.payload);
        let after = fleet.queries();
        let used: Vec<usize> = (0..6).filter(|&m| after[m] > before[m]).collect();
        let mut drawn = got.mirrors[..servers].to_vec();
        drawn.sort_unstable();
        assert_eq!(used, drawn);
        before = after;
    }
    assert!(
        before.iter().all(|&q| q > 0),
        "a mirror was never asked: {before:?}"
    );
}

#[test]
fn the_list_file_is_read_and_verified() {
    let dir = tempfile::tempdir().unwrap();
    let vendor = SecretKey::generate().unwrap();
    let keys = [SecretKey::generate().unwrap().public()];
    let signed = list(&vendor, 3, now_unix() + HOUR, &keys);
    let path = dir.path().join("m.pir");
    std::fs::write(&path, &signed.bytes).unwrap();
    assert_eq!(SignedList::load(&path, &vendor.public()).unwrap(), signed);
    assert!(SignedList::load(Path::new("/nonexistent/m.pir"), &vendor.public()).is_err());
}
