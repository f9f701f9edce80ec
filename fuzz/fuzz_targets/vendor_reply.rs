//! Fuzz target: the vendor service's reply decoder (`pir mirror register`, `pir evidence
//! submit` and `pir fetch --vendor` decode it): no panic, and what decodes encodes back to
//! the same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pir_core::Codec;
use pir_updates::vendor::wire::VendorReply;

fuzz_target!(|data: &[u8]| {
    if let Ok(reply) = VendorReply::from_bytes(data, &()) {
        assert_eq!(reply.to_bytes(), data, "one encoding per reply");
    }
});
