//! Fuzz target: Key files, the breach servers file, the seed state file and HIBP range prefixes.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = pir_keys::PublicKey::from_text(text);
        let _ = pir_keys::SecretKey::from_text(text);
        let _ = pir_breach::blind::BlindingKey::from_text(text);
        let _ = pir_breach::servers::parse(text);
        let _ = pir_service::qdp::parse_seed_state(text);
        let _ = pir_breach::range::RangePrefix::parse(text);
    }
});
