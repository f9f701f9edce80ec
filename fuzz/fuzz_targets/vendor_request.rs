//! Fuzz target: the vendor service's request decoder (`pir vendor serve` decodes it from any
//! client or mirror): no panic, and what decodes encodes back to the same bytes.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pir_core::Codec;
use pir_updates::vendor::wire::VendorRequest;

fuzz_target!(|data: &[u8]| {
    if let Ok(request) = VendorRequest::from_bytes(data, &()) {
        assert_eq!(request.to_bytes(), data, "one encoding per request");
        if let VendorRequest::Register(signed) = &request {
            let _ = signed.verify();
        }
    }
});
