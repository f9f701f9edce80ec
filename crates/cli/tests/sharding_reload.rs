//! Sharded databases upgraded in place under steady queries: new files in the shards' and
//! the front end's directory, SIGHUP to each shard replica, then to the front end; every
//! query running meanwhile succeeds with the old or the new version's answer, and queries
//! after the upgrade get the new one; a damaged map's reload is refused and serving goes on.
//! A release (`pir fetch`, a whole mirror beside the front end), a SimplePIR database and a
//! YPIR and a YPIR+SP one (`pir get`; the YPIR front end reads the shards' offline parts of
//! the new parts and builds a new packing plan at its reload); the breach front end's upgrade
//! is in `sharding_breach.rs`. Real processes over HTTPS on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::path::Path;

use support::{
    get_record, install, ok, release_build, reload_sharded, run, start_front, Mirror, Proc,
    Scratch, Steady, World,
};

const FILE: &str = "docs/README";

/// `pir release build` of the world's source into `out` as release `version`.
fn build(world: &World, out: &str, version: &str, extra: &[&str]) {
    release_build(world.dir.path(), out, version, extra);
}

fn shard(dir: &str, k: usize, key: &str) -> Proc {
    let k = k.to_string();
    let args = ["shard", "serve", "--db", dir, "--shard", &k, "--key", key];
    Proc::start(
        &[&args[..], &["--listen", "127.0.0.1:0"]].concat(),
        "https://",
    )
}

/// Shards 0 and 1 of the sharded database in `dir` (keys `s0` and `s1` of `scratch`) and a
/// front end over them (key `front`, the map's key `map`).
fn serve_two_shards(scratch: &Scratch, dir: &str) -> ([Proc; 2], Proc) {
    let p = |n: &str| scratch.path(n);
    let shards = [shard(dir, 0, &p("s0.key")), shard(dir, 1, &p("s1.key"))];
    let replicas: Vec<_> = (shards.iter().enumerate())
        .map(|(k, s)| (k, s.url(), p(&format!("s{k}.pub"))))
        .collect();
    let front = start_front(dir, &p("map.pub"), &replicas, &p("front.key"), &[]);
    (shards, front)
}

#[test]
fn a_sharded_release_reloads_on_sighup_without_failed_fetches() {
    let world = World::new(1);
    let p = |n: &str| world.path(n);
    for name in ["front", "s0", "s1"] {
        ok(&["keygen", "--out", &p(name)]);
    }
    let old = world
        .files
        .iter()
        .find(|(n, _)| n == FILE)
        .unwrap()
        .1
        .clone();
    let (sharded, whole) = (p("sharded"), p("whole"));
    build(&world, &sharded, "1", &["--shards", "2"]);
    build(&world, &whole, "1", &[]);

    let shards = [
        shard(&sharded, 0, &p("s0.key")),
        shard(&sharded, 1, &p("s1.key")),
    ];
    let vendor_pub = p("vendor.pub");
    let replicas: Vec<_> = (shards.iter().enumerate())
        .map(|(k, s)| (k, s.url(), p(&format!("s{k}.pub"))))
        .collect();
    let front = start_front(&sharded, &vendor_pub, &replicas, &p("front.key"), &[]);
    let mirror = Mirror::start(&whole, &p("m0.key"), &[]);
    let list = world.mirror_list(
        "mirrors.pir",
        &[
            (front.url(), "front".into()),
            (mirror.url.clone(), "m0".into()),
        ],
    );
    let fetch = {
        let (list, vendor_pub) = (list.clone(), vendor_pub.clone());
        move |out: &str| {
            let args = [
                "fetch",
                FILE,
                "--mirrors",
                &list,
                "--vendor-pub",
                &vendor_pub,
            ];
            let result = run(&[&args[..], &["--out", out]].concat());
            assert!(result.status.success(), "{result:?}");
            std::fs::read(out).unwrap()
        }
    };
    assert_eq!(fetch(&p("first")), old);

    // Release 2: the file changed.
    let new = b"release two's README\n".to_vec();
    std::fs::write(Path::new(&p("src")).join(FILE), &new).unwrap();
    build(&world, &p("sharded2"), "2", &["--shards", "2"]);
    build(&world, &p("whole2"), "2", &[]);

    // Steady fetches while the release changes under them.
    let steady = {
        let (fetch, out) = (fetch.clone(), p("steady"));
        let (old, new) = (old.clone(), new.clone());
        Steady::start(move |_| {
            let got = fetch(&out);
            assert!(got == old || got == new, "neither release's file");
        })
    };
    install(&p("sharded2"), &sharded);
    reload_sharded(&shards, &front, "release(s)");
    install(&p("whole2"), &whole);
    let line = mirror.hangup();
    assert!(line.starts_with("reloaded"), "{line}");
    let line = shards[0].hangup();
    assert!(line.contains("0 part(s) added, 1 retired"), "{line}");
    assert_eq!(fetch(&p("after")), new);
    steady.stop();

    // A damaged map: the reload fails, the shard serves on.
    std::fs::write(Path::new(&sharded).join("shard-map.bin"), b"damaged").unwrap();
    let line = shards[1].hangup();
    assert!(line.starts_with("reload failed"), "{line}");
    assert_eq!(fetch(&p("still")), new);
}

#[test]
fn a_sharded_lattice_database_reloads_on_sighup_without_failed_gets() {
    let scratch = Scratch::with_keys(&["front", "s0", "s1", "map"]);
    let p = |n: &str| scratch.path(n);
    // 300 records of 5 bytes; version 2 has other bytes in every record.
    let records = |salt: u8| -> Vec<u8> {
        (0..300 * 5)
            .map(|i: usize| (i * 37 % 251) as u8 ^ salt)
            .collect()
    };
    let (old, new) = (records(0), records(0x5a));
    let build = |out: &str, data: &[u8]| {
        std::fs::write(p("records.bin"), data).unwrap();
        let (records, key) = (p("records.bin"), p("map.key"));
        let args = ["db", "build", "--records", &records, "--record-size", "5"];
        ok(&[&args[..], &["--shards", "2", "--key", &key, "--out", out]].concat());
    };
    let dir = p("sharded");
    build(&dir, &old);
    let (shards, front) = serve_two_shards(&scratch, &dir);
    let (server, cache) = (format!("{}={}", front.url(), p("front.pub")), p("cache"));
    let get = move |index: usize| {
        let out = get_record(&server, &cache, index);
        assert!(out.status.success(), "record {index}: {out:?}");
        out.stdout
    };
    let record = |data: &[u8], index: usize| data[index * 5..(index + 1) * 5].to_vec();
    assert_eq!(get(7), record(&old, 7));

    let steady = {
        let (get, old, new) = (get.clone(), old.clone(), new.clone());
        Steady::start(move |n| {
            let index = 1 + n % 298;
            let answer = get(index);
            assert!(
                answer == record(&old, index) || answer == record(&new, index),
                "record {index}: neither version's bytes"
            );
        })
    };
    build(&p("sharded2"), &new);
    install(&p("sharded2"), &dir);
    reload_sharded(&shards, &front, "version(s)");
    assert_eq!(get(7), record(&new, 7));
    steady.stop();

    // A damaged map: a shard's reload fails and it serves on.
    std::fs::write(Path::new(&dir).join("shard-map.bin"), b"damaged").unwrap();
    let line = shards[0].hangup();
    assert!(line.starts_with("reload failed"), "{line}");
    assert_eq!(get(8), record(&new, 8));
}

/// YPIR (records of 1 byte) and YPIR+SP (records of 24 bytes) shards and their front end
/// upgraded under steady `pir get`s: the front end's reload reads the shards' offline parts
/// of the new version's parts and builds a new packing plan, and keeps the old version's
/// (its queries still go to the shards' old parts) while it is retired. No get fails; each
/// gets the old or the new record, and the new one after the upgrade. The smallest YPIR
/// layout (any database this small is padded to it): most of the time is the shards'
/// offline parts and the front end's plans, built at start and again at the reload.
fn a_sharded_ypir_database_reloads(record_size: usize, records: usize, served_by: &str) {
    let scratch = Scratch::with_keys(&["front", "s0", "s1", "map"]);
    let p = |n: &str| scratch.path(n);
    let data = |salt: u8| -> Vec<u8> {
        (0..records * record_size)
            .map(|i: usize| (i * 37 % 251) as u8 ^ salt)
            .collect()
    };
    let (old, new) = (data(0), data(0x5a));
    let size = record_size.to_string();
    let build = |out: &str, data: &[u8]| {
        std::fs::write(p("records.bin"), data).unwrap();
        let (records, key) = (p("records.bin"), p("map.key"));
        let args = ["db", "build", "--records", &records, "--record-size", &size];
        let rest = [
            "--shards", "2", "--scheme", "ypir", "--key", &key, "--out", out,
        ];
        let built = ok(&[&args[..], &rest[..]].concat());
        assert!(
            built.contains(&format!("served by: {served_by}")),
            "{built}"
        );
    };
    let dir = p("sharded");
    build(&dir, &old);
    let (shards, front) = serve_two_shards(&scratch, &dir);
    let (server, cache) = (format!("{}={}", front.url(), p("front.pub")), p("cache"));
    let get = move |index: usize| {
        let out = get_record(&server, &cache, index);
        assert!(out.status.success(), "record {index}: {out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("ypir"), "{err}");
        out.stdout
    };
    let record = move |data: &[u8], index: usize| {
        data[index * record_size..(index + 1) * record_size].to_vec()
    };
    let last = records - 1;
    assert_eq!(get(last), record(&old, last));

    let steady = {
        let (get, old, new) = (get.clone(), old.clone(), new.clone());
        Steady::start(move |n| {
            let index = n * 7 % records;
            let answer = get(index);
            assert!(
                answer == record(&old, index) || answer == record(&new, index),
                "record {index}: neither version's bytes"
            );
        })
    };
    build(&p("sharded2"), &new);
    install(&p("sharded2"), &dir);
    reload_sharded(&shards, &front, "version(s)");
    steady.stop();
    for index in [0, last] {
        assert_eq!(
            get(index),
            record(&new, index),
            "record {index} after the upgrade"
        );
    }
}

#[test]
fn a_sharded_ypir_database_reloads_on_sighup_without_failed_gets() {
    a_sharded_ypir_database_reloads(1, 500, "ypir");
}

#[test]
fn a_sharded_ypir_sp_database_reloads_on_sighup_without_failed_gets() {
    a_sharded_ypir_database_reloads(24, 60, "ypir-sp");
}
