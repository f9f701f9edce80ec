//! Fuzz target: A single-server (SimplePIR) request path: any bytes get a reply envelope, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

use pir_service::{Lattice, LatticeDatabase, LatticeService};

fn service() -> &'static LatticeService {
    static SERVICE: OnceLock<LatticeService> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let records: Vec<u8> = (0..64u32 * 8).map(|i| i as u8).collect();
        let database = LatticeDatabase {
            scheme: pir_lattice::Scheme::SimplePir,
            records: &records,
            record_count: 64,
            record_bytes: 8,
            seeds: [[1; 16], [2; 16]],
            version: [9; 32],
            about: Vec::new(),
        };
        let key = pir_keys::SecretKey::generate().expect("a key");
        Lattice::new(database, &mut |_, _| {})
            .expect("a database")
            .serve(key)
    })
}

fuzz_target!(|data: &[u8]| {
    let service = service();
    if data.len() <= service.max_request_bytes() {
        let reply = service.handle(data);
        assert!(reply.body.starts_with(b"PIRw"));
    }
});
