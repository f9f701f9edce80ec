//! Every registered scheme through the one conformance harness, on every kernel backend this
//! CPU has (portable, AVX2, AVX-512).

use pir_kernels::Backend;
use pir_service::{conformance, registry};

#[test]
fn every_registered_scheme_conforms_on_every_backend() {
    let schemes = registry::standard();
    assert_eq!(schemes.len(), 11, "the registry gained or lost schemes");
    for backend in Backend::available() {
        assert_eq!(backend.force(), backend);
        for entry in schemes {
            conformance::check(entry.id, entry.deploy)
                .unwrap_or_else(|e| panic!("backend {}: {e}", backend.name()));
        }
    }
    Backend::best().force();
}

#[test]
fn lookup_finds_registered_schemes_only() {
    assert!(registry::lookup(pir_core::SchemeId::RaidPir).is_some());
    assert!(registry::lookup(pir_core::SchemeId::Ypir).is_some());
    assert!(registry::lookup(pir_core::SchemeId::Control).is_none());
    assert!(registry::lookup(pir_core::SchemeId::OramStore).is_none());
    assert!(registry::lookup(pir_core::SchemeId::Experimental).is_none());
}
