//! Fuzz target: Lattice hints, queries, answers and hint downloads (SimplePIR, DoublePIR,
//! YPIR, YPIR+SP, InsPIRe).

#![no_main]

use libfuzzer_sys::fuzz_target;
use pir_lattice::{Params, Scheme};

fuzz_target!(|data: &[u8]| {
    for scheme in [
        Scheme::SimplePir,
        Scheme::DoublePir,
        Scheme::Ypir,
        Scheme::YpirSp,
        Scheme::Inspire,
    ] {
        let _ = pir_lattice::wire::decode_hint(data, scheme);
        if let Ok(params) = Params::new(scheme, 64, 64) {
            let _ = pir_lattice::wire::decode_query(data, &params, &[9; 32]);
            let _ = pir_lattice::wire::decode_answer(data, &params);
        }
    }
    // YPIR (8-byte records) and YPIR+SP (100-byte records).
    for bits in [64, 800] {
        if let Ok(params) = Params::new(Scheme::Ypir, 64, bits) {
            if let Ok(lengths) = pir_lattice::ypir::lengths_of(&params) {
                let _ = pir_lattice::ypir::wire::decode_query(data, &lengths, &[9; 32]);
                let _ = pir_lattice::ypir::wire::decode_answer(data, &lengths);
            }
        }
    }
    // InsPIRe (1-bit and 100-byte records).
    for bits in [1, 800] {
        if let Ok(params) = Params::new(Scheme::Inspire, 64, bits) {
            if let Ok(shape) = pir_lattice::inspire::Shape::of(&params) {
                let _ = pir_lattice::inspire::wire::decode_query(data, &shape, &[9; 32]);
                let _ = pir_lattice::inspire::wire::decode_answer(data, &shape);
            }
        }
    }
    let _ = pir_service::lattice::parse_download(data);
});
