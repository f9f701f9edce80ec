//! Fuzz target: Query batches and signed answer batches.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pir_core::protocol::decode_query_batch(data);
    let _ = pir_core::protocol::decode_answer_batch(data, 4096);
});
