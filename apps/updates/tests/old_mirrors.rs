//! Mirrors from before releases lists (a plain signed mirror service, which refuses the
//! request) still serve clients: the client takes the manifest they send as the one release
//! they serve, next to mirrors that answer with a releases list.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::Arc;

use pir_client::LocalTransport;
use pir_keys::SecretKey;
use pir_service::Handler;
use pir_updates::fetch::{SchemeChoice, UpdateSession};
use pir_updates::freshness::Freshness;
use pir_updates::{release, sample};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_and_new_mirrors_serve_one_fetch() {
    let dir = tempfile::tempdir().unwrap();
    let payload: Vec<u8> = (0..20_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let files = [
        ("pool/a.deb", &payload[..]),
        ("Packages", &b"Package: a\n"[..]),
    ];
    let (vendor, out) = sample::small_release(dir.path(), &files, 1024).unwrap();

    let keys: Vec<SecretKey> = (0..3).map(|_| SecretKey::generate().unwrap()).collect();
    let mut servers: Vec<Arc<dyn Handler>> = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let opened = release::open(&out, None, true).unwrap();
        if i < 2 {
            // An old mirror: one release behind the signed service, no releases list.
            let service = pir_service::Mirror::plain(
                opened.database,
                opened.release_id,
                opened.manifest_bytes,
            )
            .serve(SecretKey::from_pkcs8(key.pkcs8()).unwrap());
            servers.push(Arc::new(service));
        } else {
            servers.push(Arc::new(pir_updates::serve::single(opened, key).unwrap()));
        }
    }
    let mirrors = LocalTransport::mirrors(keys.iter().map(SecretKey::public));
    let state = dir.path().join("state");
    let freshness = Freshness::new(&state, &vendor.public());
    let session = UpdateSession::open_with(
        Arc::new(LocalTransport::new(servers)),
        mirrors,
        &vendor.public(),
        Some(&freshness),
        3,
    )
    .await
    .unwrap();
    // All three serve the release.
    let mut serving = session.release.mirrors.serving.clone();
    serving.sort_unstable();
    assert_eq!(serving, vec![0, 1, 2]);
    let choice = SchemeChoice::RaidPir {
        servers: 3,
        redundancy: 2,
        chunks: 3,
    };
    let mut got = session
        .fetch(&["pool/a.deb", "Packages"], choice)
        .await
        .unwrap();
    assert!(got.incidents.is_empty(), "{:?}", got.incidents);
    assert_eq!(got.files.pop().unwrap().1, b"Package: a\n");
    assert_eq!(got.files.pop().unwrap().1, payload);
}

/// `lock_in_ram` reads the database into locked huge pages instead of mapping the file: the
/// bytes served are the file's, and a damaged block is still refused at open.
#[test]
fn a_release_locked_in_ram_serves_the_files_bytes() {
    let dir = tempfile::tempdir().unwrap();
    let payload: Vec<u8> = (0..50_000u32).map(|i| (i * 7 % 253) as u8).collect();
    let (_, out) = sample::small_release(dir.path(), &[("a.bin", &payload[..])], 4096).unwrap();
    let mapped = release::open_with(&out, None, true, false).unwrap();
    match release::open_with(&out, None, true, true) {
        Ok(locked) => {
            assert_eq!(locked.database.bytes(), mapped.database.bytes());
            assert_eq!(locked.release_id, mapped.release_id);
        }
        // mlock refused (a low `ulimit -l`): an error naming the database file, not a panic.
        Err(e) => assert!(e.to_string().contains(release::DATABASE_FILE), "{e}"),
    }
    // One flipped byte: refused whether mapped or read into memory.
    let db_path = out.join(release::DATABASE_FILE);
    let mut bytes = std::fs::read(&db_path).unwrap();
    bytes[100] ^= 1;
    std::fs::write(&db_path, &bytes).unwrap();
    assert!(release::open_with(&out, None, true, false).is_err());
    assert!(release::open_with(&out, None, true, true).is_err());
}
