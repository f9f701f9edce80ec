//! Fuzz target: Key files, the breach servers file, the seed state file, HIBP range prefixes
//! what apt sends the `pir` method (messages, URIs, expected hashes) and URLs as Safe Browsing
//! canonicalizes them.

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
        let lines: Vec<String> = text.lines().map(str::to_string).collect();
        if let Ok(message) = pir_updates::apt::parse(&lines) {
            let _ = pir_updates::apt::Config::from_message(&message);
            let _ = pir_updates::apt::Expected::from_message(&message);
            if let Some(uri) = message.get("URI") {
                let _ = pir_updates::apt::release_name(uri);
            }
            // What the method writes back never carries a second line in a value.
            let echoed = pir_updates::apt::failure(text, text, Some(text)).encode();
            assert_eq!(echoed.matches('\n').count(), 5);
        }
        let _ = pir_updates::apt::release_name(text);
        if let Ok(url) = pir_safebrowsing::canonicalize(text) {
            let expressions = pir_safebrowsing::expressions(&url);
            assert!(!expressions.is_empty() && expressions.len() <= 30);
            // Canonical is canonical: once more changes nothing.
            let again = pir_safebrowsing::canonicalize(&url.to_string());
            assert_eq!(again.map(|u| u.to_string()), Ok(url.to_string()));
        }
    }
});
