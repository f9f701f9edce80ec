//! Release rollover and freshness with the real `pir` binary: mirrors that move to the next
//! release one at a time (SIGHUP) keep every fetch working, and a client refuses a mirror that
//! replays an older release (rollback) or an expired manifest (freeze).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::path::Path;

use support::{ok, run, Mirror, World};

const CHANGED: &str = "pool/main/l/libc6_2.36-9_amd64.deb";

/// Builds the world's source (with `CHANGED` replaced by `changed`, if given) as release
/// `name` with release version `version`.
fn build(world: &World, name: &str, version: u64, changed: Option<&[u8]>, extra: &[&str]) {
    let src = world.dir.path().join(format!("src-{name}"));
    for (file, bytes) in &world.files {
        let path = src.join(file);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let bytes = match changed {
            Some(new) if file == CHANGED => new,
            _ => bytes.as_slice(),
        };
        std::fs::write(path, bytes).unwrap();
    }
    let version = version.to_string();
    let mut args = vec![
        "release".to_string(),
        "build".into(),
        src.to_string_lossy().into_owned(),
        "--key".into(),
        world.path("vendor.key"),
        "--out".into(),
        world.path(name),
        "--block-size".into(),
        "4096".into(),
        "--release-version".into(),
        version,
        "--quiet".into(),
    ];
    args.extend(extra.iter().map(|s| s.to_string()));
    ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
}

fn point(link: &Path, target: &str) {
    let _ = std::fs::remove_file(link);
    std::os::unix::fs::symlink(target, link).unwrap();
}

/// `pir fetch CHANGED` with its own state directory; the bytes, or the error text.
fn fetch(world: &World, list: &str, state: &str, out: &str) -> Result<Vec<u8>, String> {
    let result = run(&[
        "fetch",
        CHANGED,
        "--mirrors",
        list,
        "--vendor-pub",
        &world.path("vendor.pub"),
        "--state-dir",
        state,
        "--out",
        out,
    ]);
    if result.status.success() {
        Ok(std::fs::read(out).unwrap())
    } else {
        assert!(!Path::new(out).exists(), "a refused fetch wrote {out}");
        Err(String::from_utf8_lossy(&result.stderr).into_owned())
    }
}

#[test]
fn rollover_keeps_fetches_working_and_old_or_expired_releases_are_refused() {
    let world = World::new(3);
    let old = world
        .files
        .iter()
        .find(|(n, _)| n == CHANGED)
        .unwrap()
        .1
        .clone();
    let new: Vec<u8> = old.iter().map(|b| b ^ 0x5a).collect();
    build(&world, "r10", 10, None, &[]);
    build(&world, "r11", 11, Some(&new), &[]);
    // Valid for 0.0001 days (8.64 s): expired by the end of the test.
    build(
        &world,
        "r12-short",
        12,
        Some(&new),
        &["--valid-days", "0.0001"],
    );
    let built = std::time::Instant::now();

    let links: Vec<_> = (0..3)
        .map(|i| world.dir.path().join(format!("current-{i}")))
        .collect();
    for link in &links {
        point(link, &world.path("r10"));
    }
    let mirrors: Vec<Mirror> = (0..3)
        .map(|i| {
            Mirror::start(
                &links[i].to_string_lossy(),
                &world.path(&format!("m{i}.key")),
                &[],
            )
        })
        .collect();
    let entries: Vec<(String, String)> = mirrors
        .iter()
        .enumerate()
        .map(|(i, m)| (m.url.clone(), format!("m{i}")))
        .collect();
    let list = world.mirror_list("mirrors.pir", &entries);
    let state = world.path("state");

    assert_eq!(fetch(&world, &list, &state, &world.path("a")).unwrap(), old);

    // One mirror moves to release 11: it serves 11 and still 10, so every client fetches 10
    // (served by all three) and nothing fails.
    point(&links[0], &world.path("r11"));
    let report = mirrors[0].hangup();
    assert!(report.contains("1 release(s) added"), "{report}");
    assert_eq!(fetch(&world, &list, &state, &world.path("b")).unwrap(), old);

    // The others follow: clients now get release 11.
    point(&links[1], &world.path("r11"));
    point(&links[2], &world.path("r11"));
    mirrors[1].hangup();
    mirrors[2].hangup();
    assert_eq!(fetch(&world, &list, &state, &world.path("c")).unwrap(), new);

    // A reload that finds a corrupt copy changes nothing.
    point(&links[0], "/nonexistent/release");
    let report = mirrors[0].hangup();
    assert!(report.contains("reload failed"), "{report}");
    assert_eq!(fetch(&world, &list, &state, &world.path("d")).unwrap(), new);

    // Rollback: mirrors that serve only release 10 are refused by a client that used 11...
    let stale: Vec<Mirror> = (0..3)
        .map(|i| Mirror::start(&world.path("r10"), &world.path(&format!("m{i}.key")), &[]))
        .collect();
    let entries: Vec<(String, String)> = stale
        .iter()
        .enumerate()
        .map(|(i, m)| (m.url.clone(), format!("m{i}")))
        .collect();
    let stale_list = world.mirror_list("stale.pir", &entries);
    let error = fetch(&world, &stale_list, &state, &world.path("e")).unwrap_err();
    assert!(
        error.contains("rollback attack") && error.contains("version 10"),
        "{error}"
    );
    // ...while a client that never saw 11 accepts 10.
    let fresh_state = world.path("fresh-state");
    assert_eq!(
        fetch(&world, &stale_list, &fresh_state, &world.path("f")).unwrap(),
        old
    );

    // `--release` given twice: each mirror serves both releases; clients take the newest.
    let both: Vec<Mirror> = (0..3)
        .map(|i| {
            Mirror::start_with(&[
                "--release",
                &world.path("r10"),
                "--release",
                &world.path("r11"),
                "--key",
                &world.path(&format!("m{i}.key")),
                "--listen",
                "127.0.0.1:0",
            ])
        })
        .collect();
    let entries: Vec<(String, String)> = both
        .iter()
        .enumerate()
        .map(|(i, m)| (m.url.clone(), format!("m{i}")))
        .collect();
    let both_list = world.mirror_list("both.pir", &entries);
    assert_eq!(
        fetch(&world, &both_list, &world.path("s2"), &world.path("h")).unwrap(),
        new
    );
    drop(both);

    // Freeze: an expired manifest is refused, whatever the client has seen.
    drop(stale);
    let short: Vec<Mirror> = (0..3)
        .map(|i| {
            Mirror::start(
                &world.path("r12-short"),
                &world.path(&format!("m{i}.key")),
                &[],
            )
        })
        .collect();
    let entries: Vec<(String, String)> = short
        .iter()
        .enumerate()
        .map(|(i, m)| (m.url.clone(), format!("m{i}")))
        .collect();
    let short_list = world.mirror_list("short.pir", &entries);
    let wait = std::time::Duration::from_secs(10).saturating_sub(built.elapsed());
    std::thread::sleep(wait);
    let error = fetch(&world, &short_list, &world.path("s3"), &world.path("g")).unwrap_err();
    assert!(error.contains("freeze attack"), "{error}");
}
