//! Fuzz target: Manifests, mirror lists and evidence files.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pir_updates::manifest::Manifest::decode_unverified(data);
    let _ = pir_updates::mirrors::MirrorList::decode_unverified(data);
    let _ = pir_client::Evidence::decode(data);
});
