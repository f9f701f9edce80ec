//! The breach server's side of the registry's completeness test
//! (`crates/service/tests/registry.rs`, which cannot name this crate): every scheme
//! `BreachBackend` accepts is registered as served by `pir breach serve`, the registry's list
//! for that command is the backend's own, and the backend accepts exactly what it lists.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use pir_breach::corpus::{password_sha1, CorpusFormat, CorpusStats, Sha1Entry};
use pir_breach::database::{build_sha1, Sha1Layout};
use pir_breach::{BreachBackend, BreachConfig};
use pir_core::SchemeId;
use pir_service::registry::{self, ServerKind};
use pir_service::Backend;

#[test]
fn the_registry_lists_exactly_the_breach_backends_schemes() {
    assert!(!BreachBackend::SCHEMES.is_empty());
    assert_eq!(ServerKind::Breach.schemes(), BreachBackend::SCHEMES);
    for id in BreachBackend::SCHEMES {
        let entry = registry::lookup(*id).unwrap_or_else(|| {
            panic!(
                "`pir breach serve` serves {}, which the registry lacks",
                id.name()
            )
        });
        assert!(
            entry.served_by.contains(&ServerKind::Breach),
            "`pir breach serve` serves {}, but its registry entry does not say so",
            entry.name
        );
    }
    for entry in registry::standard() {
        if entry.served_by.contains(&ServerKind::Breach) {
            assert!(
                BreachBackend::SCHEMES.contains(&entry.id),
                "the registry says `pir breach serve` serves {}, but BreachBackend refuses it",
                entry.name
            );
        }
    }
}

#[test]
fn a_breach_backend_accepts_exactly_the_schemes_it_lists() {
    let entries = [Sha1Entry {
        hash: password_sha1(b"hunter2"),
        count: 1,
    }];
    let layout = Sha1Layout::default();
    let (db, _) = build_sha1(
        CorpusFormat::Passwords,
        &entries,
        &layout,
        &CorpusStats::default(),
    )
    .unwrap();
    let (header, database) = db.into_parts();
    let key = pir_keys::SecretKey::generate().unwrap();
    let config = BreachConfig::in_memory(database, header.encode().to_vec(), 0, key);
    let service = BreachBackend::start(config).unwrap();
    let backend = service.backend();
    for id in (0..=u8::MAX).filter_map(|byte| SchemeId::from_byte(byte).ok()) {
        assert_eq!(
            backend.accepts(id),
            BreachBackend::SCHEMES.contains(&id),
            "{}",
            id.name()
        );
    }
}
