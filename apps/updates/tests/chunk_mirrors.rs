//! Chunk-only mirrors (`pir mirror serve --chunks`): at n = 4, r = 2 every mirror keeps about
//! half the release, fetches through them are correct, a mirror asked for a position whose
//! chunks it lacks refuses cleanly, a client whose mirrors cannot cover every chunk gets a
//! clear error, and a client learns the release from the signed list without asking mirrors.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use pir_client::{LocalTransport, Tap};
use pir_core::wire::{self, MessageKind};
use pir_core::{MultiServerScheme, SchemeId};
use pir_keys::SecretKey;
use pir_service::{Handler, Metrics, ReleaseSet};
use pir_updates::fetch::{SchemeChoice, UpdateSession};
use pir_updates::mirrors::{parse_chunks, ListedRelease};
use pir_updates::{release, sample, MirrorEntry};
use pir_xor::{AnswerMode, EngineOptions, RaidPir};
use rand::SeedableRng;

/// n = 4, r = 2, c = 4: position s processes chunks s - 1 and s (mod 4). Two spares.
const HOLDS: [&str; 6] = ["0,3/4", "0,1/4", "1,2/4", "2,3/4", "0,1/4", "2,3/4"];

const CHOICE: SchemeChoice = SchemeChoice::RaidPir {
    servers: 4,
    redundancy: 2,
    chunks: 4,
};

struct Fleet {
    _dir: tempfile::TempDir,
    vendor: SecretKey,
    servers: Vec<Arc<dyn Handler>>,
    entries: Vec<MirrorEntry>,
    payload: Vec<u8>,
    release_id: [u8; 32],
    /// ((mapped bytes, table bytes) of each mirror, the release's shape).
    mapped: (Vec<(usize, usize)>, pir_core::DbShape),
}

fn fleet(holds: &[&str]) -> Fleet {
    let dir = tempfile::tempdir().unwrap();
    let payload: Vec<u8> = (0..60_000u32).map(|i| (i * 37 % 251) as u8).collect();
    let files = [
        ("pool/a.deb", &payload[..]),
        ("Packages", &b"Package: a\n"[..]),
    ];
    let (vendor, out) = sample::small_release(dir.path(), &files, 1024).unwrap();
    let mut servers: Vec<Arc<dyn Handler>> = Vec::new();
    let mut entries = Vec::new();
    let mut mapped = Vec::new();
    let mut release_shape = pir_core::DbShape::new(1, 64).unwrap();
    let mut release_id = [0; 32];
    for (i, holds) in holds.iter().enumerate() {
        let key = SecretKey::generate().unwrap();
        let opened = release::open(&out, None, true).unwrap();
        release_shape = opened.database.shape();
        release_id = opened.release_id;
        let listed = ListedRelease {
            id: opened.release_id,
            version: opened.manifest.release_version,
        };
        let set = parse_chunks(holds).unwrap();
        let metrics = Arc::new(Metrics::default());
        let served = pir_updates::serve::served_chunks(
            opened,
            set.clone(),
            EngineOptions::default(),
            1,
            &key,
            metrics.clone(),
        )
        .unwrap();
        let backend = served.service.backend();
        let tables = backend.held_chunks().unwrap().table_bytes();
        mapped.push((backend.mapped_bytes(), tables));
        servers.push(Arc::new(ReleaseSet::new(vec![served], metrics).unwrap()));
        let mut entry = MirrorEntry::new(format!("https://mirror-{i}.test"), key.public());
        entry.release = Some(listed);
        entry.chunks = Some(set);
        entries.push(entry);
    }
    Fleet {
        _dir: dir,
        vendor,
        servers,
        entries,
        payload,
        release_id,
        mapped: (mapped, release_shape),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fetches_from_chunk_only_mirrors_at_n4_r2_are_correct() {
    let fleet = fleet(&HOLDS);
    let (mapped, shape) = &fleet.mapped;
    let release_bytes = shape.total_bytes();
    // A whole-release mirror: the release plus its four-Russians table (t = 4, 1 KiB blocks).
    let whole = release_bytes
        + pir_xor::Engine::plan_russians(*shape, EngineOptions::default())
            .unwrap()
            .table_bytes();
    for &(m, tables) in mapped {
        // Half the rows (r / n = 2 / 4, up to one block per chunk held), and tables for them.
        let rows = m - tables;
        assert!(
            rows * 2 <= release_bytes + 2 * 1024,
            "{rows} of {release_bytes}"
        );
        assert!(tables > 0 && m * 10 <= whole * 6, "{m} of {whole}");
        eprintln!(
            "chunk-only mirror keeps {m} bytes ({rows} of rows) for a {release_bytes}-byte \
             release; a whole mirror keeps {whole}"
        );
    }
    let exchanges = Arc::new(AtomicUsize::new(0));
    let count = exchanges.clone();
    let transport = Tap::new(
        Arc::new(LocalTransport::new(fleet.servers.clone())),
        move |_, _, _, _| {
            count.fetch_add(1, Ordering::SeqCst);
        },
    );
    let session = UpdateSession::open_with_entries(
        Arc::new(transport),
        fleet.entries.clone(),
        &fleet.vendor.public(),
        None,
        4,
    )
    .await
    .unwrap();
    // The release came from the list: one exchange (its manifest), no releases lists.
    assert_eq!(exchanges.load(Ordering::SeqCst), 1);
    assert_eq!(session.release.release_id, fleet.release_id);
    assert_eq!(session.release.mirrors.serving.len(), 6);
    for _ in 0..6 {
        let mut got = session
            .fetch(&["pool/a.deb", "Packages"], CHOICE)
            .await
            .unwrap();
        assert!(got.incidents.is_empty(), "{:?}", got.incidents);
        assert_eq!(got.files.pop().unwrap().1, b"Package: a\n");
        assert_eq!(got.files.pop().unwrap().1, fleet.payload);
        // Position 1 (chunks 0 and 1) went to mirror 1 or its spare 4.
        assert!([1, 4].contains(&got.mirrors[1]), "{:?}", got.mirrors);
    }
    // A single-block fetch, answered in Single mode, works too.
    let got = session.fetch(&["Packages"], CHOICE).await.unwrap();
    assert_eq!(got.files[0].1, b"Package: a\n");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mirror_asked_for_chunks_it_lacks_refuses_cleanly() {
    let fleet = fleet(&HOLDS[..1]);
    // Mirror 0 holds chunks 0 and 3 of 4: position 0. Ask it for position 2 (chunks 1, 2).
    let opened_shape = {
        let exchanges = LocalTransport::new(fleet.servers.clone());
        let manifest = pir_client::fetch_manifest(&exchanges, 0, 1 << 20)
            .await
            .unwrap();
        pir_updates::Manifest::decode_unverified(&manifest)
            .unwrap()
            .shape()
            .unwrap()
    };
    let raid = RaidPir::new(opened_shape, 4, 2, 4, AnswerMode::Single).unwrap();
    let (queries, _) = raid
        .query(&[5], &mut rand_chacha::ChaCha20Rng::seed_from_u64(5))
        .unwrap();
    let ask = |position: usize| {
        let body = pir_core::protocol::encode_query_batch(
            &fleet.release_id,
            &[raid.encode_query(&queries[position])],
        );
        let request = wire::encode_envelope(SchemeId::RaidPir, MessageKind::Query, &body);
        fleet.servers[0].handle_many(&[&request]).remove(0)
    };
    assert_eq!(ask(0).status, 200);
    let refused = ask(2);
    assert_eq!(refused.status, 400);
    let envelope = wire::decode_envelope(&refused.body, refused.body.len()).unwrap();
    let (_, message) = wire::decode_error(envelope.body).unwrap();
    assert!(
        message.contains("holds only chunks 0, 3 of 4") && message.contains("chunk(s) 1, 2"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mirrors_that_cannot_cover_every_chunk_are_a_clear_error() {
    // Nobody holds chunks 1 and 2 together: position 2 has no mirror.
    let fleet = fleet(&["0,3/4", "0,1/4", "2,3/4", "0,1/4"]);
    let session = UpdateSession::open_with_entries(
        Arc::new(LocalTransport::new(fleet.servers.clone())),
        fleet.entries.clone(),
        &fleet.vendor.public(),
        None,
        4,
    )
    .await
    .unwrap();
    let error = session
        .fetch(&["Packages"], CHOICE)
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("cannot cover every chunk") && error.contains("position 2"),
        "{error}"
    );
}
