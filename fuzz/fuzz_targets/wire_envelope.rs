//! Fuzz target: The message envelope and error bodies.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pir_core::wire::decode_envelope(data, 1 << 20);
    let _ = pir_core::wire::decode_error(data);
});
