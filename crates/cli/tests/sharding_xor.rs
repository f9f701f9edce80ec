//! A sharded release end to end: `pir release build --shards 2` (and the same shards built
//! by one process each with `--shard K`), two replicas of each shard (`pir shard serve`), a
//! front end (`pir front serve`) named as a mirror in the signed mirror list, and the
//! unchanged `pir fetch` through it (Chor, RAID-PIR and DPF), as real processes over HTTPS on
//! 127.0.0.1; replicas killed one, then both of a shard.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use support::{ok, release_build, run, Mirror, Proc, World};

/// `pir shard serve` of shard `k` of `dir` with `key` on a free port.
fn shard(dir: &str, k: usize, key: &str) -> Proc {
    Proc::start(
        &[
            "shard",
            "serve",
            "--db",
            dir,
            "--shard",
            &k.to_string(),
            "--key",
            key,
            "--listen",
            "127.0.0.1:0",
        ],
        "https://",
    )
}

/// `pir release build` of the world's source into `out` with fixed version and creation
/// time (so that every build signs the same manifest), and `extra` flags.
fn build(world: &World, out: &str, created: &str, extra: &[&str]) -> String {
    let extra = [&["--created-unix", created][..], extra].concat();
    release_build(world.dir.path(), out, "7", &extra)
}

/// Builds the sharded release `sharded` and the same release whole (`whole`), checking the
/// parts, the per-shard builds and the limits; returns their directories.
fn build_both(world: &World) -> (String, String) {
    let p = |n: &str| world.path(n);
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let dir = p("sharded");
    let built = build(world, &dir, &created, &["--shards", "2"]);
    assert!(built.contains("2 shard parts"), "{built}");
    let whole = p("whole");
    build(world, &whole, &created, &[]);
    // The same manifest, so the front end and a whole mirror serve the same release.
    let read = |path: String| std::fs::read(path).unwrap();
    assert_eq!(
        read(format!("{dir}/manifest.pir")),
        read(format!("{whole}/manifest.pir"))
    );
    let database = read(format!("{whole}/database.bin"));
    let part0 = read(format!("{dir}/shard-0.part"));
    let part1 = read(format!("{dir}/shard-1.part"));
    assert_eq!([part0.clone(), part1.clone()].concat(), database);
    assert!(!std::path::Path::new(&format!("{dir}/database.bin")).exists());
    // Each shard built by its own process: the same part, manifest and map.
    for (k, part) in [(0, &part0), (1, &part1)] {
        let own = p(&format!("own{k}"));
        build(
            world,
            &own,
            &created,
            &["--shards", "2", "--shard", &k.to_string()],
        );
        assert_eq!(&read(format!("{own}/shard-{k}.part")), part);
        assert!(!std::path::Path::new(&format!("{own}/shard-{}.part", 1 - k)).exists());
        assert_eq!(
            read(format!("{own}/shard-map.bin")),
            read(format!("{dir}/shard-map.bin"))
        );
    }
    // --shard without a pinned creation time is refused (the processes would differ).
    let out = run(&[
        "release",
        "build",
        &p("src"),
        "--key",
        &p("vendor.key"),
        "--out",
        &p("loose"),
        "--shards",
        "2",
        "--shard",
        "0",
    ]);
    assert!(!out.status.success());
    // More shards than blocks is refused when the database is built.
    let out = run(&[
        "release",
        "build",
        &p("src"),
        "--key",
        &p("vendor.key"),
        "--out",
        &p("many"),
        "--block-size",
        "4096",
        "--shards",
        "256",
    ]);
    assert!(!out.status.success(), "{out:?}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("non-empty shards"),
        "{out:?}"
    );
    (dir, whole)
}

#[test]
fn a_sharded_release_behind_a_front_end_serves_pir_fetch() {
    let world = World::new(2);
    for name in ["front", "s0a", "s0b", "s1a", "s1b"] {
        ok(&["keygen", "--out", &world.path(name)]);
    }
    let p = |n: &str| world.path(n);
    let (dir, whole) = build_both(&world);

    let mut replicas = vec![
        (0, "s0a", shard(&dir, 0, &p("s0a.key"))),
        (0, "s0b", shard(&dir, 0, &p("s0b.key"))),
        (1, "s1a", shard(&dir, 1, &p("s1a.key"))),
        (1, "s1b", shard(&dir, 1, &p("s1b.key"))),
    ];
    let mut args: Vec<String> = [
        "front",
        "serve",
        "--db",
        &dir,
        "--map-key",
        &p("vendor.pub"),
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    for (k, name, process) in &replicas {
        args.push("--shard".into());
        args.push(format!(
            "{k}={}={}",
            process.url(),
            p(&format!("{name}.pub"))
        ));
    }
    args.extend(["--key", &p("front.key"), "--listen", "127.0.0.1:0"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let front = Proc::start(&args, "https://");
    // The other mirror of the list serves the whole release: a front end is one mirror
    // (one party), and PIR needs two that do not collude.
    let mirror = Mirror::start(&whole, &p("m1.key"), &[]);
    let list = world.mirror_list(
        "mirrors.pir",
        &[
            (front.url(), "front".into()),
            (mirror.url.clone(), "m1".into()),
        ],
    );
    let fetch = |name: &str, scheme: &str, out: &str| {
        run(&[
            "fetch",
            name,
            "--mirrors",
            &list,
            "--vendor-pub",
            &p("vendor.pub"),
            "--out",
            out,
            "--scheme",
            scheme,
        ])
    };
    let expect = |name: &str| {
        world
            .files
            .iter()
            .find(|(n, _)| n == name)
            .unwrap()
            .1
            .clone()
    };
    for (name, scheme) in [
        ("pool/main/l/libc6_2.36-9_amd64.deb", "raid-pir"),
        ("pool/main/b/bash_5.2.15_amd64.deb", "chor"),
        ("docs/README", "dpf"),
        ("block-plus-one.bin", "raid-pir"),
    ] {
        let out = p("fetched");
        let result = fetch(name, scheme, &out);
        assert!(result.status.success(), "{name} {scheme}: {result:?}");
        assert_eq!(
            std::fs::read(&out).unwrap(),
            expect(name),
            "{name} {scheme}"
        );
        std::fs::remove_file(&out).unwrap();
    }

    // One replica of shard 0 gone: fetches still work.
    drop(replicas.remove(0));
    let out = p("after-one");
    let result = fetch("pool/main/z/zlib1g_1.2.13_amd64.deb", "raid-pir", &out);
    assert!(result.status.success(), "{result:?}");
    assert_eq!(
        std::fs::read(&out).unwrap(),
        expect("pool/main/z/zlib1g_1.2.13_amd64.deb")
    );

    // Both replicas of shard 1 gone: the fetch fails naming the shard, and writes nothing.
    replicas.retain(|(k, _, _)| *k != 1);
    let out = p("after-two");
    let result = fetch("exact-block.bin", "chor", &out);
    assert!(!result.status.success(), "{result:?}");
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(stderr.contains("shard 1 has no live replica"), "{stderr}");
    assert!(!std::path::Path::new(&out).exists(), "no output file");
    drop(front);
}
