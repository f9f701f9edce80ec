//! Fuzz target: Lattice hints, queries, answers and hint downloads.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pir_lattice::{Params, Scheme};

fuzz_target!(|data: &[u8]| {
    for scheme in [Scheme::SimplePir, Scheme::DoublePir] {
        let _ = pir_lattice::wire::decode_hint(data, scheme);
        if let Ok(params) = Params::new(scheme, 64, 64) {
            let _ = pir_lattice::wire::decode_query(data, &params, &[9; 32]);
            let _ = pir_lattice::wire::decode_answer(data, &params);
        }
    }
    let _ = pir_service::lattice::parse_download(data);
});
