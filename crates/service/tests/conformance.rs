//! Every registered scheme through the one conformance harness.

use pir_service::{conformance, registry};

#[test]
fn every_registered_scheme_conforms() {
    let schemes = registry::standard();
    assert!(schemes.len() >= 5, "the registry lost schemes");
    for entry in &schemes {
        conformance::check(entry).unwrap_or_else(|e| panic!("{e}"));
        assert!(!entry.assumption.is_empty());
    }
}

#[test]
fn lookup_finds_registered_schemes_only() {
    assert!(registry::lookup(pir_core::SchemeId::RaidPir).is_some());
    assert!(registry::lookup(pir_core::SchemeId::Control).is_none());
}
