//! A sharded release upgraded in place under steady fetches: new files in the shards' and
//! the front end's directory, SIGHUP to each shard replica, then to the front end (and to
//! the whole mirror beside it); every `pir fetch` running meanwhile succeeds with the old or
//! the new file, and fetches after the upgrade get the new one. Real processes over HTTPS on
//! 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use support::{ok, run, Mirror, Proc, World};

const FILE: &str = "docs/README";

/// `pir release build` of the world's source into `out` as release `version`.
fn build(world: &World, out: &str, version: &str, extra: &[&str]) {
    let (src, key) = (world.path("src"), world.path("vendor.key"));
    let mut args = vec![
        "release",
        "build",
        &src,
        "--key",
        &key,
        "--out",
        out,
        "--block-size",
        "4096",
        "--release-version",
        version,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    ok(&args);
}

/// Puts every file of `from` into `to`, each by a rename (a server's memory map of the file
/// it replaces stays valid).
fn install(from: &str, to: &str) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let staged = Path::new(to).join(format!(".new-{}", entry.file_name().to_string_lossy()));
        std::fs::copy(entry.path(), &staged).unwrap();
        std::fs::rename(&staged, Path::new(to).join(entry.file_name())).unwrap();
    }
}

fn shard(dir: &str, k: usize, key: &str) -> Proc {
    let k = k.to_string();
    let args = ["shard", "serve", "--db", dir, "--shard", &k, "--key", key];
    Proc::start(
        &[&args[..], &["--listen", "127.0.0.1:0"]].concat(),
        "https://",
    )
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
    let mut args = vec!["front", "serve", "--db", &sharded, "--map-key"];
    let (vendor_pub, s0, s1) = (p("vendor.pub"), shards[0].url(), shards[1].url());
    let r0 = format!("0={s0}={}", p("s0.pub"));
    let r1 = format!("1={s1}={}", p("s1.pub"));
    let front_key = p("front.key");
    args.extend([
        &vendor_pub,
        "--shard",
        &r0,
        "--shard",
        &r1,
        "--key",
        &front_key,
    ]);
    args.extend(["--listen", "127.0.0.1:0"]);
    let front = Proc::start(&args, "https://");
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
    let stop = Arc::new(AtomicBool::new(false));
    let steady = {
        let (stop, fetch, out) = (stop.clone(), fetch.clone(), p("steady"));
        let (old, new) = (old.clone(), new.clone());
        std::thread::spawn(move || {
            let mut fetched = 0;
            while !stop.load(Ordering::SeqCst) {
                let got = fetch(&out);
                assert!(got == old || got == new, "neither release's file");
                fetched += 1;
            }
            fetched
        })
    };
    install(&p("sharded2"), &sharded);
    for s in &shards {
        let line = s.hangup();
        assert!(line.contains("1 part(s) added, 1 retired"), "{line}");
    }
    let line = front.hangup();
    assert!(line.contains("1 release(s) added, 1 retired"), "{line}");
    install(&p("whole2"), &whole);
    let line = mirror.hangup();
    assert!(line.starts_with("reloaded"), "{line}");
    let line = shards[0].hangup();
    assert!(line.contains("0 part(s) added, 1 retired"), "{line}");
    assert_eq!(fetch(&p("after")), new);
    stop.store(true, Ordering::SeqCst);
    let fetched = steady.join().expect("a fetch failed during the upgrade");
    assert!(fetched >= 1, "no fetch ran during the upgrade");

    // A damaged map: the reload fails, the shard serves on.
    std::fs::write(Path::new(&sharded).join("shard-map.bin"), b"damaged").unwrap();
    let line = shards[1].hangup();
    assert!(line.starts_with("reload failed"), "{line}");
    assert_eq!(fetch(&p("still")), new);
}
