//! Fuzz target: A mirror's whole request path, through the release set that routes requests to
//! one of two releases: any bytes get a reply envelope, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

use pir_core::{Database, DbShape};
use pir_service::{Handler, Metrics, Mirror, ReleaseInfo, ReleaseSet, ServedRelease};

fn service() -> &'static ReleaseSet {
    static SERVICE: OnceLock<ReleaseSet> = OnceLock::new();
    SERVICE.get_or_init(|| {
        let metrics = std::sync::Arc::new(Metrics::default());
        let releases = [(5u8, 21u64), (6, 9)]
            .iter()
            .map(|&(id, rows)| {
                let shape = DbShape::new(rows, 64).expect("a valid shape");
                let bytes: Vec<u8> = (0..rows as usize * 64).map(|i| (i * 7) as u8).collect();
                let db = Database::from_bytes(shape, &bytes).expect("bytes of the shape");
                let key = pir_keys::SecretKey::generate().expect("a key");
                let service = Mirror::plain(db, [id; 32], b"manifest".to_vec())
                    .serve(key)
                    .with_metrics(metrics.clone());
                let info = ReleaseInfo {
                    id: [id; 32],
                    version: u64::from(id),
                    expires_unix: u64::MAX,
                };
                ServedRelease::new(info, std::sync::Arc::new(service))
            })
            .collect();
        ReleaseSet::new(releases, metrics).expect("two releases")
    })
}

fuzz_target!(|data: &[u8]| {
    let service = service();
    if data.len() <= service.max_request_bytes() {
        let replies = service.handle_many(&[data, data]);
        assert_eq!(replies.len(), 2);
        for reply in replies {
            assert!(reply.body.starts_with(b"PIRw"));
        }
    }
});
