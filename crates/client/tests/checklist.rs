//! `ChecklistSession` against in-process offline and online servers: hints downloaded in
//! pieces with progress, records fetched, the state reloaded after a "restart" without a new
//! download (and refused for another database), misconfigured deployments refused.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;

use pir_client::{ChecklistSession, LocalTransport, SessionError};
use pir_core::{Database, DbShape};
use pir_keys::SecretKey;
use pir_service::checklist::{Checklist, Role};
use pir_service::Handler;
use pir_xor::checklist::Params;
use rand::SeedableRng;

/// Record size: 1 KiB, so that the hints come in several 4 MiB pieces.
const RECORD: usize = 1024;

fn deployment(
    records: u64,
    id: u8,
    roles: [Role; 2],
) -> (Vec<Arc<dyn Handler>>, [pir_keys::PublicKey; 2], Database) {
    let shape = DbShape::new(records, RECORD).unwrap();
    let db = Database::random(
        shape,
        &mut rand_chacha::ChaCha20Rng::seed_from_u64(u64::from(id)),
    );
    let params = Params::new(records, RECORD).unwrap();
    let mut servers: Vec<Arc<dyn Handler>> = Vec::new();
    let mut keys = Vec::new();
    for role in roles {
        let key = SecretKey::generate().unwrap();
        keys.push(key.public());
        let copy = Database::from_bytes(shape, db.bytes()).unwrap();
        let server = Checklist::new(params, copy, [id; 32], role, Vec::new()).unwrap();
        servers.push(Arc::new(server.serve(key)));
    }
    (servers, [keys[0], keys[1]], db)
}

#[tokio::test]
async fn records_come_back_and_the_state_survives_a_restart() {
    // 40,000 records of 1 KiB: m = 28 * 40000 / 200 = 5,600 hints (5.7 MB), two pieces.
    let (servers, keys, db) = deployment(40_000, 1, [Role::Offline, Role::Online]);
    let dir = std::env::temp_dir().join(format!("pir-checklist-session-{}", std::process::id()));
    let state = dir.join("state");
    let mut seen = Vec::new();
    let mut session = ChecklistSession::open_with(
        LocalTransport::new(servers.clone()),
        keys,
        Some(&state),
        &mut |done, total| seen.push((done, total)),
    )
    .await
    .unwrap();
    assert!(session.hints_downloaded());
    let total = session.info().params.hint_bytes() as u64;
    assert_eq!(seen.first(), Some(&(0, total)));
    assert_eq!(seen.last(), Some(&(total, total)));
    assert_eq!(seen.len(), 3, "{seen:?}");
    for index in [0u64, 77, 39_999] {
        assert_eq!(
            session.fetch(index).await.unwrap(),
            db.block(index as usize)
        );
    }
    assert!(matches!(
        session.fetch(40_000).await,
        Err(SessionError::Request(_))
    ));
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(&state).unwrap().permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }
    drop(session);
    // A restart: the saved sets are used, nothing is downloaded.
    let mut session = ChecklistSession::open_with(
        LocalTransport::new(servers),
        keys,
        Some(&state),
        &mut |_, _| panic!("no download expected"),
    )
    .await
    .unwrap();
    assert!(!session.hints_downloaded());
    assert_eq!(session.fetch(77).await.unwrap(), db.block(77));
    // Another database: the saved state does not fit, the hints are fetched again.
    let (other, other_keys, other_db) = deployment(40_000, 2, [Role::Offline, Role::Online]);
    let mut session = ChecklistSession::open_with(
        LocalTransport::new(other),
        other_keys,
        Some(&state),
        &mut |_, _| {},
    )
    .await
    .unwrap();
    assert!(session.hints_downloaded());
    assert_eq!(session.fetch(5).await.unwrap(), other_db.block(5));
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn dpf_lookups_need_no_hints() {
    let (servers, keys, db) = deployment(3000, 7, [Role::Offline, Role::Online]);
    let mut session = ChecklistSession::open_dpf_with(LocalTransport::new(servers), keys)
        .await
        .unwrap();
    for index in [0u64, 1234, 2999] {
        assert_eq!(
            session.fetch_dpf(index).await.unwrap(),
            db.block(index as usize)
        );
    }
    assert!(matches!(
        session.fetch_dpf(3000).await,
        Err(SessionError::Request(_))
    ));
    // No hints: Checklist lookups are refused, nothing is saved.
    assert!(matches!(
        session.fetch(5).await,
        Err(SessionError::Request(_))
    ));
    assert!(!session.hints_downloaded());
}

#[tokio::test]
async fn roles_and_databases_must_match() {
    let (swapped, keys, _) = deployment(1000, 3, [Role::Online, Role::Offline]);
    let err = ChecklistSession::open_with(LocalTransport::new(swapped), keys, None, &mut |_, _| {})
        .await
        .unwrap_err();
    assert!(matches!(err, SessionError::Setup(_)), "{err}");
    let (a, a_keys, _) = deployment(1000, 4, [Role::Offline, Role::Online]);
    let (b, b_keys, _) = deployment(1000, 5, [Role::Offline, Role::Online]);
    let mixed = LocalTransport::new(vec![a[0].clone(), b[1].clone()]);
    let err = ChecklistSession::open_with(mixed, [a_keys[0], b_keys[1]], None, &mut |_, _| {})
        .await
        .unwrap_err();
    assert!(matches!(err, SessionError::Setup(_)), "{err}");
    // A server signing with another key than the one given: refused as a bad reply.
    let (servers, _, _) = deployment(1000, 6, [Role::Offline, Role::Online]);
    let wrong = [
        SecretKey::generate().unwrap().public(),
        SecretKey::generate().unwrap().public(),
    ];
    let err =
        ChecklistSession::open_with(LocalTransport::new(servers), wrong, None, &mut |_, _| {})
            .await
            .unwrap_err();
    assert!(matches!(err, SessionError::BadReply { .. }), "{err}");
}
