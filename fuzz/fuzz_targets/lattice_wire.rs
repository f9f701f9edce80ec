//! Fuzz target: Lattice hints, queries, answers and hint downloads (SimplePIR, DoublePIR,
//! YPIR).

#![no_main]

use libfuzzer_sys::fuzz_target;
use pir_lattice::{Params, Scheme};

fuzz_target!(|data: &[u8]| {
    for scheme in [Scheme::SimplePir, Scheme::DoublePir, Scheme::Ypir] {
        let _ = pir_lattice::wire::decode_hint(data, scheme);
        if let Ok(params) = Params::new(scheme, 64, 64) {
            let _ = pir_lattice::wire::decode_query(data, &params, &[9; 32]);
            let _ = pir_lattice::wire::decode_answer(data, &params);
        }
    }
    if let Ok(params) = Params::new(Scheme::Ypir, 64, 64) {
        if let Ok(shape) = pir_lattice::ypir::Shape::of(&params) {
            let _ = pir_lattice::ypir::wire::decode_query(data, &shape, &[9; 32]);
            let _ = pir_lattice::ypir::wire::decode_answer(data, &shape);
        }
    }
    let _ = pir_service::lattice::parse_download(data);
});
