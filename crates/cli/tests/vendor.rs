//! The vendor service through the real binary: `pir vendor serve`, `pir mirror register`
//! (refused until `pir vendor approve`), `pir fetch --vendor` and `pir evidence submit`.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::time::{Duration, Instant};

use pir_keys::PublicKey;
use support::{ok, run, Mirror, Proc, World};

/// The keys of the vendor service's current list.
fn listed(service: &pir_updates::MirrorEntry) -> Vec<PublicKey> {
    let runtime = tokio::runtime::Runtime::new().unwrap();
    match runtime.block_on(pir_updates::command::vendor_client::list_from_vendor(
        service,
    )) {
        Ok(list) => list.list.mirrors.iter().map(|m| m.key).collect(),
        Err(_) => Vec::new(),
    }
}

/// Polls the list until `done` holds (the bound only turns a hang into a failure).
fn wait_for(service: &pir_updates::MirrorEntry, what: &str, done: impl Fn(&[PublicKey]) -> bool) {
    let started = Instant::now();
    loop {
        let keys = listed(service);
        if done(&keys) {
            return;
        }
        assert!(
            started.elapsed() < Duration::from_secs(120),
            "never {what}: {keys:?}"
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

#[test]
fn a_registration_waits_for_approval_and_fetch_takes_the_list_from_the_vendor() {
    let world = World::new(2);
    let release = world.path("release");
    let m0 = Mirror::start(&release, &world.path("m0.key"), &[]);
    let m1 = Mirror::start(&release, &world.path("m1.key"), &[]);
    let state = world.path("vendor-state");
    let vendor = Proc::start(
        &[
            "vendor",
            "serve",
            "--key",
            &world.path("vendor.key"),
            "--release",
            &release,
            "--listen",
            "127.0.0.1:0",
            "--allow",
            &world.path("m0.pub"),
            "--probe-seconds",
            "1",
            "--list-valid-hours",
            "1",
            "--state",
            &state,
        ],
        "https://",
    );
    let vendor_arg = format!("{}={}", vendor.url(), world.path("vendor.pub"));
    let register = |key: &str, url: &str| {
        ok(&[
            "mirror",
            "register",
            "--vendor",
            &vendor_arg,
            "--key",
            &world.path(key),
            "--public-url",
            url,
        ])
    };
    let said = register("m0.key", &m0.url);
    assert!(said.contains("admitted"), "{said}");
    let said = register("m1.key", &m1.url);
    assert!(
        said.contains("pending") && said.contains("pir vendor approve"),
        "{said}"
    );

    let service = pir_updates::MirrorEntry::new(
        vendor.url(),
        PublicKey::load(std::path::Path::new(&world.path("vendor.pub"))).unwrap(),
    );
    let k0 = PublicKey::load(std::path::Path::new(&world.path("m0.pub"))).unwrap();
    let k1 = PublicKey::load(std::path::Path::new(&world.path("m1.pub"))).unwrap();
    wait_for(&service, "listed m0", |keys| keys.contains(&k0));
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(listed(&service), [k0], "m1 waits for approval");

    let said = ok(&[
        "vendor",
        "approve",
        "--state",
        &state,
        &world.path("m1.pub"),
    ]);
    assert!(said.contains("approved mirror key"), "{said}");
    wait_for(&service, "listed m1", |keys| keys.contains(&k1));

    let (name, bytes) = &world.files[4];
    let out = world.path("fetched");
    let said = ok(&["fetch", name, "--vendor", &vendor_arg, "--out", &out]);
    assert!(said.contains("privacy: RAID-PIR"), "{said}");
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);

    // Evidence that is no evidence is refused with the reason, exit code 1.
    let bogus = world.path("bogus.pir");
    std::fs::write(&bogus, b"not evidence").unwrap();
    let result = run(&["evidence", "submit", &bogus, "--vendor", &vendor_arg]);
    assert_eq!(result.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&result.stdout).contains("not an evidence file"));
    vendor.stop();
}

/// Chunk-only mirrors (`pir mirror serve --chunks`) at n = 4, r = 2 registered with the
/// vendor: the published list states each one's chunks and release, and `pir fetch --vendor`
/// over them gets the right bytes.
#[test]
fn chunk_only_mirrors_are_listed_with_their_chunks_and_fetch_at_n4_r2_is_correct() {
    let world = World::new(4);
    let release = world.path("release");
    // Position s processes chunks s - 1 and s (mod 4).
    let holds = ["0,3/4", "0,1/4", "1,2/4", "2,3/4"];
    let mirrors: Vec<Mirror> = holds
        .iter()
        .enumerate()
        .map(|(i, h)| {
            Mirror::start(
                &release,
                &world.path(&format!("m{i}.key")),
                &["--chunks", *h],
            )
        })
        .collect();
    let (key, state) = (world.path("vendor.key"), world.path("vendor-state"));
    let base: [&str; 14] = [
        "vendor",
        "serve",
        "--key",
        &key,
        "--release",
        &release,
        "--listen",
        "127.0.0.1:0",
        "--probe-seconds",
        "1",
        "--list-valid-hours",
        "1",
        "--state",
        &state,
    ];
    let mut args: Vec<String> = base.map(String::from).to_vec();
    for i in 0..holds.len() {
        args.push("--allow".into());
        args.push(world.path(&format!("m{i}.pub")));
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let vendor = Proc::start(&args, "https://");
    let vendor_arg = format!("{}={}", vendor.url(), world.path("vendor.pub"));
    let keys: Vec<PublicKey> = (0..holds.len())
        .map(|i| {
            let pub_path = world.path(&format!("m{i}.pub"));
            PublicKey::load(std::path::Path::new(&pub_path)).unwrap()
        })
        .collect();
    for (i, m) in mirrors.iter().enumerate() {
        let said = ok(&[
            "mirror",
            "register",
            "--vendor",
            &vendor_arg,
            "--key",
            &world.path(&format!("m{i}.key")),
            "--public-url",
            &m.url,
        ]);
        assert!(said.contains("admitted"), "{said}");
    }
    let service = pir_updates::MirrorEntry::new(
        vendor.url(),
        PublicKey::load(std::path::Path::new(&world.path("vendor.pub"))).unwrap(),
    );
    wait_for(&service, "all four listed", |listed| {
        keys.iter().all(|k| listed.contains(k))
    });
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let list = runtime
        .block_on(pir_updates::command::vendor_client::list_from_vendor(
            &service,
        ))
        .unwrap()
        .list;
    for (key, h) in keys.iter().zip(holds) {
        let entry = list.mirrors.iter().find(|e| e.key == *key).unwrap();
        let chunks = entry.chunks.as_ref().expect("the list states its chunks");
        assert_eq!(pir_updates::mirrors::format_chunks(chunks), h);
        assert!(entry.release.is_some(), "and the release it serves");
    }

    let (name, bytes) = &world.files[4];
    let out = world.path("fetched");
    let said = ok(&[
        "fetch",
        name,
        "--vendor",
        &vendor_arg,
        "--servers",
        "4",
        "--redundancy",
        "2",
        "--out",
        &out,
    ]);
    assert!(said.contains("privacy: RAID-PIR"), "{said}");
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);
    vendor.stop();
}
