//! Fuzz target: the oblivious store's decoders of untrusted bytes: NBD options and request
//! headers (from any local process), slot-store requests (from any network client, served
//! by a real `StoreService` on a scratch directory), and the client state decoder.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pir_blockstore::nbd::{Negotiation, RequestHeader};
use pir_blockstore::remote::StoreService;
use pir_service::Handler;

fn store() -> &'static StoreService {
    static STORE: OnceLock<StoreService> = OnceLock::new();
    STORE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("pir-fuzz-store-{}", std::process::id()));
        let service = StoreService::open(&dir).expect("scratch store");
        // FORMAT: 64 slots of 540 bytes.
        let mut body = vec![1u8];
        body.extend_from_slice(&540u32.to_le_bytes());
        body.extend_from_slice(&64u64.to_le_bytes());
        let request = pir_core::wire::encode_envelope(
            pir_core::scheme::SchemeId::OramStore,
            pir_core::wire::MessageKind::Query,
            &body,
        );
        service.handle_many(&[&request]);
        service
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    match selector % 4 {
        0 => {
            if let Ok(mut n) = Negotiation::new([0, 0, 0, 3], 1 << 20, 4096) {
                for chunk in rest.chunks(24) {
                    let option = u32::from(chunk.first().copied().unwrap_or(0) % 12);
                    let _ = n.option(option, chunk);
                }
            }
            if rest.len() >= 16 {
                let mut header = [0u8; 16];
                header.copy_from_slice(&rest[..16]);
                let _ = Negotiation::header(header);
            }
        }
        1 => {
            if rest.len() >= 28 {
                let mut header = [0u8; 28];
                header.copy_from_slice(&rest[..28]);
                let _ = RequestHeader::parse(header);
            }
        }
        2 => {
            // A slot-store request body inside a valid envelope, and the raw bytes as they come.
            let request = pir_core::wire::encode_envelope(
                pir_core::scheme::SchemeId::OramStore,
                pir_core::wire::MessageKind::Query,
                rest,
            );
            let replies = store().handle_many(&[&request, rest]);
            assert_eq!(replies.len(), 2);
        }
        _ => {
            let _ = pir_oram::state::decode(rest);
        }
    }
});
