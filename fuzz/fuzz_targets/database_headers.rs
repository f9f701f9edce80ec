//! Fuzz target: The breach server info, the breach and records database headers.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let _ = pir_breach::info::Info::decode(data);
    let _ = pir_breach::header::DbHeader::decode(data);
    let _ = pir_records::DbHeader::decode(data);
});
