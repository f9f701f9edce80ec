//! Fuzz target: Manifests, mirror lists, evidence files and a mirror's releases list.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pir_updates::manifest::Manifest::decode_unverified(data);
    let _ = pir_updates::mirrors::MirrorList::decode_unverified(data);
    let _ = pir_client::Evidence::decode(data);
    let _ = pir_service::releases::decode_releases(data);
});
