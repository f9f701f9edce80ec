//! The disk over ORAM nodes as a library: two `NodeService`s on 127.0.0.1 over HTTPS, the
//! balancer created, written, flushed, dropped without a flush (a crash), reopened: every
//! flushed write is there; and node lists that do not match are refused.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;

use pir_blockstore::balanced::{Balanced, NodeSpec};
use pir_blockstore::device::BlockDevice;
use pir_blockstore::node::NodeService;
use pir_blockstore::{Disk, StoreSpec};
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

const SIZE: u64 = 1 << 20;
const B: u64 = 4096;

async fn start_node(
    dir: &Path,
    i: usize,
    owner: &pir_keys::PublicKey,
) -> (pir_server::RunningServer, NodeSpec) {
    let state = dir.join(format!("node{i}"));
    let bytes = pir_oram::balance::node_blocks_needed(SIZE / B, 2) * B;
    let stores = [StoreSpec::Dir(dir.join(format!("store{i}")))];
    Disk::init(&state, bytes, B as u32, &stores, None).unwrap();
    let disk = Disk::open(&state, None).unwrap();
    let service = Arc::new(NodeService::new(&state, disk).unwrap());
    let key = pir_keys::SecretKey::generate().unwrap();
    let tls = pir_keys::tls::server_config_for_client(&key, *owner).unwrap();
    let mut options = pir_server::ServerOptions::new("127.0.0.1:0".parse().unwrap());
    options.workers = 1;
    options.batch_window = std::time::Duration::ZERO;
    let running = pir_server::start(service, tls, options).await.unwrap();
    let spec = (format!("https://{}", running.addr), key.public());
    (running, spec)
}

fn write(disk: &mut Balanced, at: u64, data: &[u8]) {
    disk.submit_write(at, data).unwrap();
    while disk.pending() > 0 {
        disk.step().unwrap();
    }
}

fn read(disk: &mut Balanced, at: u64, len: u64) -> Vec<u8> {
    let ids = disk.submit_read(at, len).unwrap();
    let mut answers = HashMap::new();
    while disk.pending() > 0 {
        for a in disk.step().unwrap() {
            answers.insert(a.id, a.data);
        }
    }
    let mut out = Vec::new();
    for (id, within, take) in ids {
        out.extend_from_slice(&answers[&id][within as usize..(within + take) as usize]);
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_disk_over_two_nodes_keeps_every_flushed_write() {
    let dir = tempfile::tempdir().unwrap();
    let bstate = dir.path().join("bstate");
    let (owner, _) = pir_blockstore::disk::make_client_key(&bstate).unwrap();
    let mut servers = Vec::new();
    let mut specs = Vec::new();
    for i in 0..2 {
        let (running, spec) = start_node(dir.path(), i, &owner).await;
        servers.push(running);
        specs.push(spec);
    }
    let runtime = tokio::runtime::Handle::current();
    tokio::task::spawn_blocking(move || {
        Balanced::init(&bstate, SIZE, B as u32, &specs, &runtime).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(1);
        let mut model = vec![0u8; SIZE as usize];
        let mut disk = Balanced::open(&bstate, None, &runtime).unwrap();
        assert_eq!(disk.size(), SIZE);
        for round in 0..6 {
            // Writes of any length at any offset (whole blocks and patches), then a flush.
            for _ in 0..40 {
                let at = rng.random_range(0..SIZE - 1);
                let len = rng.random_range(1..=(SIZE - at).min(3 * B));
                let mut data = vec![0u8; len as usize];
                rng.fill_bytes(&mut data);
                write(&mut disk, at, &data);
                model[at as usize..(at + len) as usize].copy_from_slice(&data);
            }
            disk.flush().unwrap();
            // Unflushed writes, then the balancer is dropped without a flush (a crash).
            for _ in 0..20 {
                let at = rng.random_range(0..SIZE / B) * B;
                write(&mut disk, at, &[round as u8; B as usize]);
            }
            drop(disk);
            disk = Balanced::open(&bstate, None, &runtime).unwrap();
            assert!(
                read(&mut disk, 0, SIZE) == model,
                "round {round}: a flushed write was lost"
            );
        }
        disk.close().unwrap();
        // The wrong number of nodes, or the nodes swapped, is refused.
        let mut swapped = Balanced::open(&bstate, None, &runtime)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert!(swapped.is_ok(), "{swapped:?}");
        let one = Some(vec![specs_of(&bstate, &runtime)[0].clone()]);
        assert!(Balanced::open(&bstate, one, &runtime).is_err());
        let mut reversed = specs_of(&bstate, &runtime);
        reversed.reverse();
        swapped = Balanced::open(&bstate, Some(reversed), &runtime)
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert!(swapped.is_err(), "swapped nodes were accepted");
    })
    .await
    .unwrap();
    for server in servers {
        server.shutdown().await;
    }
}

/// The node list recorded in a balancer's state (what `open` with `None` uses).
fn specs_of(bstate: &Path, runtime: &tokio::runtime::Handle) -> Vec<NodeSpec> {
    Balanced::open(bstate, None, runtime)
        .unwrap()
        .nodes()
        .to_vec()
}
