//! The device benchmark's stores ([`pir_blockstore::direct`]): an oblivious disk whose store
//! is reopened with `O_DIRECT` reads back what was written (sealed slots are not aligned to
//! the device's blocks, so every request is widened and patched), across a flush and a
//! reopen with ordinary files; the counting wrapper counts requests and seeks. Runs in a
//! directory under the target directory (`/tmp` may be tmpfs, which refuses `O_DIRECT`);
//! asserts nothing about speed.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::PathBuf;

use pir_blockstore::direct::{probe, Counted, DirectStores};
use pir_blockstore::{Disk, StoreSpec};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

fn scratch() -> tempfile::TempDir {
    tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap()
}

#[test]
fn an_o_direct_store_reads_back_what_was_written() {
    let dir = scratch();
    if let Err(why) = probe(dir.path()) {
        assert!(
            std::env::var_os("CI").is_none(),
            "CI runs this on a disk that takes O_DIRECT: {why}"
        );
        eprintln!("skipped: {why}");
        return;
    }
    let state = dir.path().join("state");
    let size = 256 * 4096;
    Disk::init(
        &state,
        size,
        4096,
        &[StoreSpec::Dir(dir.path().join("store"))],
        None,
    )
    .unwrap();
    let mut disk = Disk::open(&state, None).unwrap();
    let mut handles = None;
    disk.map_stores(|old, specs, geometry| {
        drop(old);
        let dirs: Vec<PathBuf> = specs
            .iter()
            .map(|s| match s {
                StoreSpec::Dir(d) => d.clone(),
                other => panic!("not a directory: {other:?}"),
            })
            .collect();
        let direct = DirectStores::open(&dirs, geometry)?;
        let (store, counts, latency) = Counted::new(direct, geometry.sealed_slot(), 1);
        handles = Some((counts, latency));
        Ok(Box::new(store))
    })
    .unwrap();
    let (counts, _latency) = handles.unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut image = vec![0u8; size as usize];
    rng.fill_bytes(&mut image);
    disk.write_at(0, &image).unwrap();
    // Unaligned pieces, then a read of everything back through O_DIRECT.
    disk.write_at(4096 * 7 + 100, &[0xAB; 5000]).unwrap();
    image[4096 * 7 + 100..4096 * 7 + 5100].fill(0xAB);
    assert_eq!(disk.read_at(0, size).unwrap(), image);
    disk.close().unwrap();
    let io = counts.snapshot();
    assert!(io.reads > 0 && io.writes > 0 && io.syncs > 0, "{io:?}");
    assert!(io.seeks > 0 && io.seeks <= io.reads + io.writes, "{io:?}");
    assert!(io.bytes_read >= io.reads * (4096 + 28), "{io:?}");
    // The files kept their size, and the ordinary stores read the same data.
    let mut disk = Disk::open(&state, None).unwrap();
    assert_eq!(disk.read_at(0, size).unwrap(), image);
    disk.close().unwrap();
}

#[test]
fn the_latency_knob_delays_every_store_call() {
    let dir = scratch();
    let state = dir.path().join("state");
    Disk::init(
        &state,
        64 * 4096,
        4096,
        &[StoreSpec::Dir(dir.path().join("store"))],
        None,
    )
    .unwrap();
    let mut disk = Disk::open(&state, None).unwrap();
    let mut handles = None;
    disk.map_stores(|old, _, geometry| {
        let (store, counts, latency) = Counted::new(old, geometry.sealed_slot(), 1);
        handles = Some((counts, latency));
        Ok(Box::new(store))
    })
    .unwrap();
    let (counts, latency) = handles.unwrap();
    latency.store(20_000, std::sync::atomic::Ordering::Relaxed);
    let before = counts.snapshot();
    let t = std::time::Instant::now();
    disk.write_at(0, &[1u8; 4096]).unwrap();
    disk.flush().unwrap();
    let calls = {
        let io = counts.snapshot() - before;
        // Every read and write call is at least one request; the sync is one more.
        io.syncs + u64::from(io.reads > 0) + u64::from(io.writes > 0)
    };
    // Each call waited at least its 20 ms (a lower bound, not a speed).
    assert!(t.elapsed() >= std::time::Duration::from_millis(20 * calls));
    assert_eq!(disk.read_at(0, 4096).unwrap(), vec![1u8; 4096]);
    disk.close().unwrap();
}
