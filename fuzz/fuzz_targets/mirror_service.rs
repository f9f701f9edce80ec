//! Fuzz target: A mirror's whole request path: any bytes get a reply envelope, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

use pir_core::{Database, DbShape};
use pir_service::{Mirror, MirrorService};

fn service() -> &'static MirrorService {
    static SERVICE: OnceLock<MirrorService> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let shape = DbShape::new(21, 64).expect("a valid shape");
        let bytes: Vec<u8> = (0..21 * 64).map(|i| (i * 7) as u8).collect();
        let db = Database::from_bytes(shape, &bytes).expect("bytes of the shape");
        let key = pir_keys::SecretKey::generate().expect("a key");
        Mirror::plain(db, [5; 32], b"manifest".to_vec()).serve(key)
    })
}

fuzz_target!(|data: &[u8]| {
    let service = service();
    if data.len() <= service.max_request_bytes() {
        let reply = service.handle(data);
        assert!(reply.body.starts_with(b"PIRw"));
    }
});
