//! The real `apt-get` through the `pir` method: a flat repository of real Debian packages
//! (downloaded with `apt-get download` here, never committed) packed into a release, served by
//! three mirrors; `apt-get update` and `apt-get install --download-only` of a package and its
//! dependencies fetch everything privately, and the files are byte-equal to the originals.
//! Garbage from apt gets a `400` and the method keeps answering.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Command, Stdio};

use support::{has_program, ok, pir, require, Mirror};

/// Packages of the test: `jq` and what it depends on, and `hello`.
const PACKAGES: &[&str] = &["hello", "jq", "libjq1", "libonig5"];

fn apt_available() -> bool {
    require(
        has_program("apt-get") && has_program("dpkg-scanpackages"),
        "apt-get and dpkg-scanpackages",
        "apt-get install apt dpkg-dev",
    )
}

/// `apt-get download` of [`PACKAGES`] into `dir`.
fn download(dir: &Path) -> bool {
    let out = Command::new("apt-get")
        .args(["download", "-qq"])
        .args(PACKAGES)
        .current_dir(dir)
        .output()
        .expect("run apt-get download");
    require(
        out.status.success(),
        "the real Debian packages (apt-get download failed)",
        &format!(
            "run `apt-get update` so apt can download {PACKAGES:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

#[test]
fn apt_get_installs_through_the_pir_method() {
    if !apt_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = |name: &str| work.path().join(name);
    let ws = |name: &str| w(name).to_string_lossy().into_owned();
    let pool = w("repo/pool");
    std::fs::create_dir_all(&pool).unwrap();
    if !download(&pool) {
        return;
    }
    // A flat repository: the packages and their index (dpkg-scanpackages, as a vendor would).
    let index = Command::new("dpkg-scanpackages")
        .args(["-m", "pool"])
        .current_dir(w("repo"))
        .stderr(Stdio::null())
        .output()
        .unwrap();
    assert!(index.status.success());
    std::fs::write(w("repo/Packages"), &index.stdout).unwrap();

    ok(&["keygen", "--out", &ws("vendor")]);
    for i in 0..3 {
        ok(&["keygen", "--out", &ws(&format!("m{i}"))]);
    }
    ok(&[
        "release",
        "build",
        &ws("repo"),
        "--key",
        &ws("vendor.key"),
        "--out",
        &ws("release"),
        "--quiet",
    ]);
    let mirrors: Vec<Mirror> = (0..3)
        .map(|i| Mirror::start(&ws("release"), &ws(&format!("m{i}.key")), &[]))
        .collect();
    let mut list = vec![
        "mirror-list".to_string(),
        "build".into(),
        "--vendor-key".into(),
        ws("vendor.key"),
        "--out".into(),
        ws("mirrors.pir"),
    ];
    for (i, m) in mirrors.iter().enumerate() {
        list.push("--mirror".into());
        list.push(format!("{}={}", m.url, ws(&format!("m{i}.pub"))));
    }
    ok(&list.iter().map(String::as_str).collect::<Vec<_>>());
    let installed = ok(&["apt", "install-method", "--dir", &ws("methods")]);
    assert!(installed.contains("installed"), "{installed}");
    assert!(w("methods/pir").exists() && w("methods/http").exists());

    std::fs::write(w("sources.list"), "deb [trusted=yes] pir://updates/ ./\n").unwrap();
    for dir in ["state/lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(w(dir)).unwrap();
    }
    let options: Vec<String> = [
        format!("Dir::State={}", ws("state")),
        "Dir::State::status=/var/lib/dpkg/status".into(),
        format!("Dir::Cache={}", ws("cache")),
        format!("Dir::Etc::SourceList={}", ws("sources.list")),
        "Dir::Etc::SourceParts=/nonexistent".into(),
        "Debug::NoLocking=1".into(),
        format!("Dir::Bin::Methods={}", ws("methods")),
        format!("Acquire::pir::MirrorList={}", ws("mirrors.pir")),
        format!("Acquire::pir::VendorKey={}", ws("vendor.pub")),
        format!("Acquire::pir::StateDir={}", ws("pir-state")),
        "APT::Sandbox::User=root".into(),
    ]
    .iter()
    .flat_map(|o| ["-o".to_string(), o.clone()])
    .collect();
    let apt = |args: &[&str]| {
        let out = Command::new("apt-get")
            .args(&options)
            .args(args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(out.status.success(), "apt-get {args:?} failed:\n{text}");
        text
    };
    let update = apt(&["update"]);
    assert!(update.contains("pir://updates ./ Packages"), "{update}");
    let install = apt(&["install", "--download-only", "-y", "jq"]);
    assert!(install.contains("pir://updates"), "{install}");
    // jq and its dependencies that this machine lacks were fetched, and are the originals.
    let archives = w("cache/archives");
    let fetched: Vec<String> = std::fs::read_dir(&archives)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".deb"))
        .collect();
    assert!(fetched.iter().any(|n| n.starts_with("jq_")), "{fetched:?}");
    for name in &fetched {
        assert_eq!(
            std::fs::read(archives.join(name)).unwrap(),
            std::fs::read(pool.join(name)).unwrap(),
            "{name}"
        );
    }
    // The freshness state was recorded.
    assert!(std::fs::read_dir(w("pir-state")).unwrap().count() == 1);
}

#[test]
fn garbage_from_apt_gets_a_400_and_the_method_keeps_answering() {
    let mut method = pir()
        .args(["apt", "method"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = method.stdin.take().unwrap();
    stdin
        .write_all(
            b"this is not apt\n\n\
              600 URI Acquire\nno colon\n\n\
              600 URI Acquire\nFilename: /tmp/x\n\n\
              600 URI Acquire\nURI: pir://updates/../../etc/shadow\nFilename: /tmp/x\n\n\
              600 URI Acquire\nURI: pir://updates/pool/a.deb\nFilename: /tmp/x\nExpected-Checksum-FileSize: many\n\n\
              600 URI Acquire\nURI: pir://updates/pool/a.deb\nFilename: /tmp/x\n\n",
        )
        .unwrap();
    drop(stdin);
    let out = method.wait_with_output().unwrap();
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.starts_with("100 Capabilities\n"), "{text}");
    assert_eq!(text.matches("400 URI Failure").count(), 6, "{text}");
    assert!(text.contains("climbs out"), "{text}");
    // The last request was well formed: it fails only for the missing configuration, and says
    // what to set.
    assert!(
        text.contains("Acquire::pir::MirrorList is not set"),
        "{text}"
    );
}
