//! The vendor service with a fleet of real HTTPS mirrors on 127.0.0.1: mirrors that die or
//! answer wrong leave the list within a probe period while fetches go on succeeding; a
//! mirror that lies too rarely for the probes is dropped at once on a client's evidence; a
//! registration waits for the operator's approval; a client takes its list from the service
//! and falls back to the kept list when the service is down.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use pir_core::wire::{self, MessageKind};
use pir_keys::{PublicKey, SecretKey};
use pir_server::RunningServer;
use pir_service::{Handler, Metrics, ReleaseSet, Reply};
use pir_updates::command::vendor_client::{self, ask, list_from_vendor};
use pir_updates::command::vendor_serve::{self, RunningVendor};
use pir_updates::command::{VendorServeArgs, VendorSettings};
use pir_updates::fetch::{fetch_listed_to_file, SchemeChoice};
use pir_updates::freshness::now_unix;
use pir_updates::mirrors::parse_chunks;
use pir_updates::release;
use pir_updates::vendor::wire::{Outcome, Registration, VendorRequest};
use pir_updates::MirrorEntry;

/// How a test mirror answers.
const HONEST: u8 = 0;
/// Every request from the corrupted copy (some blocks wrong).
const ALWAYS_LIES: u8 = 1;
/// Only requests of two queries or more (a client's batch; probes ask one): too rarely for
/// the probes to see.
const LIES_ON_BATCHES: u8 = 2;

/// A mirror that answers from the good copy or from a corrupted one, as `mode` says; both
/// sign with the mirror's key, so its wrong answers are evidence.
struct TestMirror {
    honest: Arc<ReleaseSet>,
    corrupt: Arc<ReleaseSet>,
    mode: AtomicU8,
    /// A health line to say instead of the real one (a mirror claiming chunks it lacks).
    claims: Option<String>,
}

fn query_count(request: &[u8]) -> usize {
    wire::decode_envelope(request, usize::MAX)
        .ok()
        .filter(|e| e.kind == MessageKind::Query)
        .and_then(|e| pir_core::protocol::decode_query_batch(e.body).ok())
        .map_or(0, |batch| batch.queries.len())
}

impl Handler for TestMirror {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        let mode = self.mode.load(Ordering::SeqCst);
        requests
            .iter()
            .map(|r| {
                let lie = mode == ALWAYS_LIES || (mode == LIES_ON_BATCHES && query_count(r) >= 2);
                let set = if lie { &self.corrupt } else { &self.honest };
                set.handle_many(&[r]).remove(0)
            })
            .collect()
    }
    fn max_request_bytes(&self) -> usize {
        self.honest.max_request_bytes()
    }
    fn health(&self) -> String {
        self.claims.clone().unwrap_or_else(|| self.honest.health())
    }
    fn metrics(&self) -> &Metrics {
        self.honest.metrics()
    }
}

struct Fleet {
    dir: tempfile::TempDir,
    vendor: SecretKey,
    release: PathBuf,
    corrupt: PathBuf,
    /// The largest file of the release and its bytes.
    name: String,
    payload: Vec<u8>,
}

fn fleet() -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let (src, out) = (dir.path().join("src"), dir.path().join("release"));
    let files = pir_updates::sample::write_sample_release(&src, 6, 11).unwrap();
    let (name, _) = files.iter().max_by_key(|(_, size)| *size).unwrap().clone();
    let payload = std::fs::read(src.join(&name)).unwrap();
    let vendor = SecretKey::generate().unwrap();
    vendor.save(&dir.path().join("vendor.key")).unwrap();
    let small_blocks = release::BuildOptions {
        block_size: Some(1024),
        ..release::BuildOptions::default()
    };
    release::build(&src, &vendor, &out, &small_blocks).unwrap();
    // The corrupted copy: every fourth block wrong, the manifest (so the release id) the same.
    let corrupt = dir.path().join("corrupt");
    std::fs::create_dir(&corrupt).unwrap();
    for entry in std::fs::read_dir(&out).unwrap() {
        let entry = entry.unwrap();
        std::fs::copy(entry.path(), corrupt.join(entry.file_name())).unwrap();
    }
    let db = corrupt.join("database.bin");
    let mut bytes = std::fs::read(&db).unwrap();
    for (i, block) in bytes.chunks_mut(1024).enumerate() {
        if i % 4 == 0 {
            block[0] ^= 0x5a;
        }
    }
    std::fs::write(&db, bytes).unwrap();
    Fleet {
        dir,
        vendor,
        release: out,
        corrupt,
        name,
        payload,
    }
}

struct Mirror {
    key: SecretKey,
    entry: MirrorEntry,
    handler: Arc<TestMirror>,
    server: Option<RunningServer>,
}

impl Fleet {
    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    async fn mirror(&self) -> Mirror {
        let key = SecretKey::generate().unwrap();
        let honest = release::open(&self.release, None, true).unwrap();
        let corrupt = release::open(&self.corrupt, None, false).unwrap();
        let handler = TestMirror {
            honest: Arc::new(pir_updates::serve::single(honest, &key).unwrap()),
            corrupt: Arc::new(pir_updates::serve::single(corrupt, &key).unwrap()),
            mode: AtomicU8::new(HONEST),
            claims: None,
        };
        Self::start(key, handler).await
    }

    /// A chunk-only mirror (`pir mirror serve --chunks HOLDS`), whose health line says
    /// `claims` instead of its real chunks if given.
    async fn chunk_mirror(&self, holds: &str, claims: Option<&str>) -> Mirror {
        let key = SecretKey::generate().unwrap();
        let set = |dir: &Path, check: bool| {
            let opened = release::open(dir, None, check).unwrap();
            let metrics = Arc::new(Metrics::default());
            let served = pir_updates::serve::served_chunks(
                opened,
                parse_chunks(holds).unwrap(),
                pir_xor::EngineOptions::default(),
                1,
                &key,
                metrics.clone(),
            )
            .unwrap();
            Arc::new(ReleaseSet::new(vec![served], metrics).unwrap())
        };
        let handler = TestMirror {
            honest: set(&self.release, true),
            corrupt: set(&self.corrupt, false),
            mode: AtomicU8::new(HONEST),
            claims: claims.map(|c| format!("ok chunks={c}\n")),
        };
        Self::start(key, handler).await
    }

    async fn start(key: SecretKey, handler: TestMirror) -> Mirror {
        let handler = Arc::new(handler);
        let tls = pir_keys::tls::server_config(&key).unwrap();
        let options = pir_server::ServerOptions::new("127.0.0.1:0".parse().unwrap());
        let server = pir_server::start(handler.clone(), tls, options)
            .await
            .unwrap();
        let entry = MirrorEntry::new(format!("https://{}", server.addr), key.public());
        Mirror {
            key,
            entry,
            handler,
            server: Some(server),
        }
    }

    /// The vendor service probing every `probe_seconds`, with the keys in `allow` approved in
    /// advance.
    async fn vendor(&self, probe_seconds: u64, allow: &[&Mirror]) -> RunningVendor {
        let mut allowed = Vec::new();
        for (i, m) in allow.iter().enumerate() {
            let path = self.path(&format!("allow-{i}.pub"));
            m.key.public().save(&path).unwrap();
            allowed.push(format!("{:?}", path.to_str().unwrap()));
        }
        let config = format!(
            "key = {:?}\nlisten = \"127.0.0.1:0\"\nrelease = {:?}\nstate = {:?}\n\
             probe_seconds = {probe_seconds}\nlist_valid_hours = {}\nallow = [{}]\n",
            self.path("vendor.key").to_str().unwrap(),
            self.release.to_str().unwrap(),
            self.path("vendor-state").to_str().unwrap(),
            // At least two probe periods.
            (probe_seconds as f64 * 2.0 / 3600.0).max(1.0),
            allowed.join(", ")
        );
        let settings: VendorSettings = pir_host::settings::resolve_text(
            Some((&config, &self.path("vendor.toml"))),
            &VendorServeArgs::default(),
        )
        .unwrap();
        vendor_serve::start(&settings).await.unwrap()
    }

    fn approve(&self, mirror: &Mirror) {
        vendor_serve::approve_key(&self.path("vendor-state"), &mirror.key.public()).unwrap();
    }
}

fn service_of(vendor: &RunningVendor, key: &SecretKey) -> MirrorEntry {
    MirrorEntry::new(format!("https://{}", vendor.server.addr), key.public())
}

async fn register(service: &MirrorEntry, mirror: &Mirror) -> Outcome {
    let signed = Registration {
        url: mirror.entry.url.clone(),
        mirror: mirror.key.public(),
        vendor: service.key,
        created_unix: now_unix(),
    }
    .sign(&mirror.key);
    ask(service, &VendorRequest::Register(signed))
        .await
        .unwrap()
        .outcome
}

/// The keys of the vendor service's current list (empty when none is published yet).
async fn listed(service: &MirrorEntry) -> Vec<PublicKey> {
    match list_from_vendor(service).await {
        Ok(list) => list.list.mirrors.iter().map(|m| m.key).collect(),
        Err(e) => {
            eprintln!("no list yet: {e:#}");
            Vec::new()
        }
    }
}

/// Polls the service's list until `done` holds of it; a generous bound only turns a hang
/// into a failure (nothing here measures speed).
async fn wait_for(service: &MirrorEntry, what: &str, done: impl Fn(&[PublicKey]) -> bool) {
    let started = Instant::now();
    loop {
        let keys = listed(service).await;
        if done(&keys) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "the list never came to {what}: {keys:?}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

async fn fetch(
    fleet: &Fleet,
    service: &MirrorEntry,
    state: &Path,
    out: &str,
    choice: SchemeChoice,
) -> Vec<PathBuf> {
    let list = vendor_client::starting_list(service, state).await.unwrap();
    let out = fleet.path(out);
    let (_, evidence) = fetch_listed_to_file(&fleet.name, list, &service.key, state, &out, choice)
        .await
        .unwrap();
    assert_eq!(std::fs::read(&out).unwrap(), fleet.payload);
    evidence
}

const RAID: SchemeChoice = SchemeChoice::RaidPir {
    servers: 3,
    redundancy: 2,
    chunks: 3,
};

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_dead_and_a_lying_mirror_leave_the_list_within_a_probe_period_while_fetches_succeed() {
    let fleet = fleet();
    let mut mirrors = Vec::new();
    for _ in 0..6 {
        mirrors.push(fleet.mirror().await);
    }
    let vendor = fleet.vendor(1, &[]).await;
    let service = service_of(&vendor, &fleet.vendor);
    for m in &mirrors {
        assert_eq!(register(&service, m).await, Outcome::Pending);
        fleet.approve(m);
    }
    let all: Vec<PublicKey> = mirrors.iter().map(|m| m.key.public()).collect();
    wait_for(&service, "all six", |keys| {
        all.iter().all(|k| keys.contains(k))
    })
    .await;
    let before = list_from_vendor(&service).await.unwrap().list.list_version;

    // Mirror 4 dies; mirror 5 starts serving wrong data for a quarter of the blocks.
    let dead = mirrors[4].key.public();
    let liar = mirrors[5].key.public();
    mirrors[4].server.take().unwrap().shutdown().await;
    mirrors[5].handler.mode.store(ALWAYS_LIES, Ordering::SeqCst);

    // Fetches go on succeeding (spares replace the dead, isolation names the liar) until
    // the vendor has dropped both.
    let state = tempfile::tempdir().unwrap();
    let mut fetches = 0;
    loop {
        fetch(&fleet, &service, state.path(), "during.deb", RAID).await;
        fetches += 1;
        let keys = listed(&service).await;
        if !keys.contains(&dead) && !keys.contains(&liar) {
            assert_eq!(keys.len(), 4, "the four good mirrors stay: {keys:?}");
            break;
        }
        assert!(fetches < 2000, "the vendor never dropped them: {keys:?}");
    }
    let after = list_from_vendor(&service).await.unwrap().list.list_version;
    assert!(after > before, "a new list version: {before} -> {after}");
    let metrics = vendor.service.render_metrics();
    assert!(
        metrics.contains("pir_vendor_decisions_total{action=\"dropped\",reason=\"unreachable\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics
            .contains("pir_vendor_decisions_total{action=\"dropped\",reason=\"wrong_answer\"} 1"),
        "{metrics}"
    );
    assert!(metrics.contains("pir_vendor_mirrors_listed 4"), "{metrics}");

    // The liar comes back once it passes again.
    mirrors[5].handler.mode.store(HONEST, Ordering::SeqCst);
    wait_for(&service, "the liar back", |keys| keys.contains(&liar)).await;
    vendor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_clients_evidence_drops_a_mirror_that_lies_too_rarely_for_the_probes() {
    let fleet = fleet();
    let mut mirrors = Vec::new();
    for _ in 0..5 {
        mirrors.push(fleet.mirror().await);
    }
    mirrors[0]
        .handler
        .mode
        .store(LIES_ON_BATCHES, Ordering::SeqCst);
    let allow: Vec<&Mirror> = mirrors.iter().collect();
    let vendor = fleet.vendor(1, &allow).await;
    let service = service_of(&vendor, &fleet.vendor);
    for m in &mirrors {
        assert_eq!(register(&service, m).await, Outcome::Admitted);
    }
    let all: Vec<PublicKey> = mirrors.iter().map(|m| m.key.public()).collect();
    wait_for(&service, "all five, the rare liar too", |keys| {
        all.iter().all(|k| keys.contains(k))
    })
    .await;
    // Its probes keep passing: still listed after several more rounds.
    tokio::time::sleep(Duration::from_secs(3)).await;
    let liar = mirrors[0].key.public();
    assert!(listed(&service).await.contains(&liar), "probes see no lie");

    // A client's Chor fetch sends a batch (one query per block); once the liar is among the
    // two mirrors asked, its signed wrong answer is kept as evidence.
    let state = tempfile::tempdir().unwrap();
    let chor = SchemeChoice::Chor { servers: 2 };
    let mut evidence = Vec::new();
    for _ in 0..60 {
        evidence = fetch(&fleet, &service, state.path(), "fetched.deb", chor).await;
        if !evidence.is_empty() {
            break;
        }
    }
    assert_eq!(evidence.len(), 1, "60 fetches never asked the liar");
    let before = list_from_vendor(&service).await.unwrap().list.list_version;
    let reply = ask(
        &service,
        &VendorRequest::Evidence(std::fs::read(&evidence[0]).unwrap()),
    )
    .await
    .unwrap();
    assert_eq!(reply.outcome, Outcome::Proven, "{}", reply.message);
    assert!(reply.message.contains("CHEATED"), "{}", reply.message);
    // Dropped at once, not at the next probe.
    let list = list_from_vendor(&service).await.unwrap();
    assert!(list.list.list_version > before);
    let keys: Vec<PublicKey> = list.list.mirrors.iter().map(|m| m.key).collect();
    assert!(!keys.contains(&liar) && keys.len() == 4, "{keys:?}");
    assert!(vendor
        .service
        .render_metrics()
        .contains("pir_vendor_decisions_total{action=\"dropped\",reason=\"proven_liar\"} 1"));
    // A proven liar stays off whatever its probes say (it passes them), and cannot register
    // again, until the operator approves it again.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(!listed(&service).await.contains(&liar));
    assert_eq!(register(&service, &mirrors[0]).await, Outcome::Refused);
    // Evidence of an honest answer proves nothing.
    let mut honest = pir_client::Evidence::decode(&std::fs::read(&evidence[0]).unwrap()).unwrap();
    honest.reply[20] ^= 1;
    let reply = ask(&service, &VendorRequest::Evidence(honest.encode()))
        .await
        .unwrap();
    assert_eq!(reply.outcome, Outcome::NotProven, "{}", reply.message);
    fleet.approve(&mirrors[0]);
    wait_for(&service, "the liar re-admitted by the operator", |keys| {
        keys.contains(&liar)
    })
    .await;
    vendor.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_registration_waits_for_approval_and_fetch_falls_back_to_the_kept_list() {
    let fleet = fleet();
    let mut mirrors = Vec::new();
    for _ in 0..3 {
        mirrors.push(fleet.mirror().await);
    }
    // A long period: the first round runs at start, the test drives the others.
    let vendor = fleet.vendor(3600, &[&mirrors[0], &mirrors[1]]).await;
    let service = service_of(&vendor, &fleet.vendor);
    assert_eq!(register(&service, &mirrors[0]).await, Outcome::Admitted);
    assert_eq!(register(&service, &mirrors[1]).await, Outcome::Admitted);
    assert_eq!(register(&service, &mirrors[2]).await, Outcome::Pending);
    // A registration signed by another key is refused.
    let forged = Registration {
        url: "https://127.0.0.1:1".into(),
        mirror: mirrors[2].key.public(),
        vendor: service.key,
        created_unix: now_unix(),
    }
    .sign(&mirrors[0].key);
    let reply = ask(&service, &VendorRequest::Register(forged))
        .await
        .unwrap();
    assert_eq!(reply.outcome, Outcome::Refused);
    assert_eq!(reply.release_id, vendor.service.release_id());

    for _ in 0..3 {
        vendor.service.probe_round().await;
    }
    let pending = mirrors[2].key.public();
    let keys = listed(&service).await;
    assert_eq!(keys.len(), 2, "{keys:?}");
    assert!(!keys.contains(&pending), "not listed before approval");

    // A fetch with the vendor's list (two mirrors: RAID-PIR over both).
    let state = tempfile::tempdir().unwrap();
    let two = SchemeChoice::RaidPir {
        servers: 2,
        redundancy: 2,
        chunks: 2,
    };
    fetch(&fleet, &service, state.path(), "first.deb", two).await;

    fleet.approve(&mirrors[2]);
    vendor.service.probe_round().await;
    assert!(
        listed(&service).await.contains(&pending),
        "approved and probed: listed"
    );
    fetch(&fleet, &service, state.path(), "second.deb", RAID).await;

    // The vendor service goes away: the client fetches with the list it kept.
    let kept_from = service.clone();
    vendor.shutdown().await;
    fetch(&fleet, &kept_from, state.path(), "third.deb", RAID).await;
    // A client that never saw a list cannot start without the service.
    let fresh = tempfile::tempdir().unwrap();
    let error = vendor_client::starting_list(&kept_from, fresh.path())
        .await
        .unwrap_err()
        .to_string();
    assert!(error.contains("no mirror list is kept"), "{error}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_list_states_each_chunk_only_mirrors_release_and_chunks_and_fetches_at_n4_r2_succeed() {
    let fleet = fleet();
    // n = 4, r = 2, c = 4: position s processes chunks s - 1 and s (mod 4).
    let holds = ["0,3/4", "0,1/4", "1,2/4", "2,3/4"];
    let mut mirrors = Vec::new();
    for h in holds {
        mirrors.push(fleet.chunk_mirror(h, None).await);
    }
    // A fifth says it holds chunks 0 and 1 but keeps 2 and 3: its probe is refused.
    mirrors.push(fleet.chunk_mirror("2,3/4", Some("0,1/4")).await);
    let allow: Vec<&Mirror> = mirrors.iter().collect();
    let vendor = fleet.vendor(1, &allow).await;
    let service = service_of(&vendor, &fleet.vendor);
    for m in &mirrors {
        assert_eq!(register(&service, m).await, Outcome::Admitted);
    }
    let honest: Vec<PublicKey> = mirrors[..4].iter().map(|m| m.key.public()).collect();
    wait_for(&service, "the four chunk-only mirrors", |keys| {
        honest.iter().all(|k| keys.contains(k))
    })
    .await;
    // Two more probe rounds: the claimer stays off.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let list = list_from_vendor(&service).await.unwrap().list;
    let claimer = mirrors[4].key.public();
    assert!(
        list.mirrors.iter().all(|m| m.key != claimer),
        "a mirror lacking the chunks it claims is not listed"
    );
    let current = release::open(&fleet.release, None, false).unwrap();
    for (m, h) in mirrors.iter().zip(holds) {
        let entry = list
            .mirrors
            .iter()
            .find(|e| e.key == m.key.public())
            .unwrap();
        assert_eq!(
            entry.chunks,
            Some(parse_chunks(h).unwrap()),
            "{}",
            entry.url
        );
        let stated = entry.release.as_ref().expect("the list states its release");
        assert_eq!(stated.id, current.release_id);
        assert_eq!(stated.version, current.manifest.release_version);
    }
    assert!(vendor
        .service
        .render_metrics()
        .contains("pir_vendor_mirrors_listed 4"));

    // What `pir fetch --vendor` does, at n = 4, r = 2: one mirror per position.
    let state = tempfile::tempdir().unwrap();
    let raid = SchemeChoice::RaidPir {
        servers: 4,
        redundancy: 2,
        chunks: 4,
    };
    for i in 0..3 {
        fetch(
            &fleet,
            &service,
            state.path(),
            &format!("chunked-{i}.deb"),
            raid,
        )
        .await;
    }
    vendor.shutdown().await;
}
