//! Fuzz target: the decoders of the ORAM nodes and their balancer: node requests (from the
//! balancer's connection, served by a real `NodeService` over a small disk on a scratch
//! directory) and replies, the balancer's state (its plaintext codec) and its sealed `BSTATE`
//! file's prologue.

#![no_main]

use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use pir_blockstore::balanced::BalancerFile;
use pir_blockstore::node::{NodeService, MAX_SLOTS};
use pir_blockstore::{Disk, StoreSpec};
use pir_core::Codec;
use pir_oram::balance::Balancer;
use pir_oram::node_protocol::{NodeInfo, NodeRequest};
use pir_service::Handler;

fn node() -> &'static NodeService {
    static NODE: OnceLock<NodeService> = OnceLock::new();
    NODE.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("pir-fuzz-node-{}", std::process::id()));
        let state = dir.join("node");
        // 64 node-blocks of 512 bytes.
        Disk::init(&state, 64 * 512, 512, &[StoreSpec::Dir(dir.join("store"))], None)
            .expect("scratch node disk");
        let disk = Disk::open(&state, None).expect("scratch node disk");
        NodeService::new(&state, disk).expect("scratch node")
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, rest)) = data.split_first() else { return };
    match selector % 5 {
        0 => {
            // A node request body inside a valid envelope, and the raw bytes as they come.
            let request = pir_core::wire::encode_envelope(
                pir_core::scheme::SchemeId::OramStore,
                pir_core::wire::MessageKind::Query,
                rest,
            );
            let replies = node().handle_many(&[&request, rest]);
            assert_eq!(replies.len(), 2);
        }
        1 => {
            if let Ok(request) = NodeRequest::from_bytes(rest, &MAX_SLOTS) {
                // What decodes encodes back to the same bytes.
                assert_eq!(request.to_bytes(), rest);
            }
        }
        2 => {
            let _ = NodeInfo::from_bytes(rest, &());
        }
        3 => {
            // (No round trip: a valid state may list its cached blocks in another order.)
            let _ = Balancer::from_bytes(rest, &());
        }
        _ => {
            let _ = BalancerFile::from_bytes(rest, &());
        }
    }
});
