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

/// Three mirrors serving `repo` packed as a release, the signed mirror list, and the method
/// installed in `work/methods`. Returns the mirrors (kept running while they live).
fn serve_repo(work: &Path, repo: &Path) -> Vec<Mirror> {
    let ws = |name: &str| work.join(name).to_string_lossy().into_owned();
    ok(&["keygen", "--out", &ws("vendor")]);
    for i in 0..3 {
        ok(&["keygen", "--out", &ws(&format!("m{i}"))]);
    }
    ok(&[
        "release",
        "build",
        &repo.to_string_lossy(),
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
    assert!(work.join("methods/pir").exists() && work.join("methods/http").exists());
    mirrors
}

/// `apt-get ARGS` against the state in `work` with `source` as the only source, through the
/// method in `work/methods`; asserts success and returns what it printed.
fn apt_get(work: &Path, source: &str, args: &[&str]) -> String {
    let (success, text) = apt_run(work, source, args);
    assert!(success, "apt-get {args:?} failed:\n{text}");
    text
}

/// [`apt_get`] without the assertion: whether it succeeded, and what it printed.
fn apt_run(work: &Path, source: &str, args: &[&str]) -> (bool, String) {
    let ws = |name: &str| work.join(name).to_string_lossy().into_owned();
    std::fs::write(work.join("sources.list"), format!("{source}\n")).unwrap();
    for dir in ["state/lists/partial", "cache/archives/partial"] {
        std::fs::create_dir_all(work.join(dir)).unwrap();
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
    (out.status.success(), text)
}

/// The `.deb` files apt fetched into `work/cache/archives` are byte-equal to those in `pool`,
/// and include jq's.
fn check_fetched(work: &Path, pool: &Path) {
    let archives = work.join("cache/archives");
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
}

#[test]
fn apt_get_installs_through_the_pir_method() {
    if !apt_available() {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = |name: &str| work.path().join(name);
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
    let _mirrors = serve_repo(work.path(), &w("repo"));

    let source = "deb [trusted=yes] pir://updates/ ./";
    let update = apt_get(work.path(), source, &["update"]);
    assert!(update.contains("pir://updates ./ Packages"), "{update}");
    let install = apt_get(
        work.path(),
        source,
        &["install", "--download-only", "-y", "jq"],
    );
    assert!(install.contains("pir://updates"), "{install}");
    check_fetched(work.path(), &pool);
    // The method honours the hashes apt's signed index expects: a file whose bytes do not match
    // them (here: the index claims another SHA-256, as for a tampered index) is refused with
    // HashSumMismatch, and nothing is written; the right hash and size are accepted.
    let jq = std::fs::read_dir(&pool)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .find(|n| n.starts_with("jq_"))
        .unwrap();
    let jq_bytes = std::fs::read(pool.join(&jq)).unwrap();
    let right = hex::encode(pir_keys::sha256(&jq_bytes));
    let config = format!(
        "601 Configuration\nConfig-Item: Acquire::pir::MirrorList={}\nConfig-Item: Acquire::pir::VendorKey={}\nConfig-Item: Acquire::pir::StateDir={}\n\n",
        w("mirrors.pir").display(),
        w("vendor.pub").display(),
        w("pir-state").display()
    );
    let acquire = |out: &Path, sha: &str, size: usize| {
        format!(
            "600 URI Acquire\nURI: pir://updates/pool/{jq}\nFilename: {}\nExpected-SHA256: {sha}\nExpected-Checksum-FileSize: {size}\n\n",
            out.display()
        )
    };
    let (bad, good) = (w("bad.deb"), w("good.deb"));
    let input = format!(
        "{config}{}{}",
        acquire(&bad, &"0".repeat(64), jq_bytes.len()),
        acquire(&good, &right, jq_bytes.len())
    );
    let out = apt_method(input.as_bytes());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("FailReason: HashSumMismatch"), "{text}");
    assert!(text.contains(&format!("SHA256-Hash: {right}")), "{text}");
    assert!(
        !bad.exists(),
        "a file that failed the index's hash was written"
    );
    assert_eq!(std::fs::read(&good).unwrap(), jq_bytes);

    // The freshness state was recorded, and the manifest and the mirror list kept for the
    // next run.
    let mut state: Vec<String> = std::fs::read_dir(w("pir-state"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    state.sort();
    assert_eq!(state.len(), 4, "{state:?}");
    assert!(
        state[0].contains("-manifest-")
            && state[1].starts_with("newest-")
            && state[2].starts_with("newest-mirror-list-")
            && state[3].starts_with("newest-mirror-list-")
            && state[3].ends_with(".pir"),
        "{state:?}"
    );
}

/// `program ARGS` in `dir`, asserting success; its standard output.
fn tool(dir: &Path, program: &str, args: &[&str]) -> Vec<u8> {
    let out = Command::new(program)
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap_or_else(|e| panic!("{program}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out.stdout
}

/// A `dists/` + `pool/` repository as `apt-ftparchive` makes it, with an `InRelease` signed by
/// an archive key of its own (gpg): apt checks that signature itself, so the test shows that
/// `pir release build` keeps apt's signed index valid.
#[test]
fn apt_get_verifies_the_archive_signature_of_a_dists_repository_through_pir() {
    if !apt_available()
        || !require(
            has_program("apt-ftparchive") && has_program("gpg"),
            "apt-ftparchive and gpg",
            "apt-get install apt-utils gnupg",
        )
    {
        return;
    }
    let work = tempfile::tempdir().unwrap();
    let w = |name: &str| work.path().join(name);
    let pool = w("repo/pool/main");
    std::fs::create_dir_all(&pool).unwrap();
    std::fs::create_dir_all(w("repo/dists/stable/main/binary-amd64")).unwrap();
    if !download(&pool) {
        return;
    }
    let repo = w("repo");
    let packages = tool(&repo, "apt-ftparchive", &["packages", "pool"]);
    std::fs::write(w("repo/dists/stable/main/binary-amd64/Packages"), packages).unwrap();
    let release = tool(
        &repo,
        "apt-ftparchive",
        &[
            "-o",
            "APT::FTPArchive::Release::Suite=stable",
            "-o",
            "APT::FTPArchive::Release::Codename=stable",
            "-o",
            "APT::FTPArchive::Release::Architectures=amd64",
            "-o",
            "APT::FTPArchive::Release::Components=main",
            "release",
            "dists/stable",
        ],
    );
    std::fs::write(w("repo/dists/stable/Release"), release).unwrap();
    let gnupg = w("gnupg");
    std::fs::create_dir(&gnupg).unwrap();
    std::fs::set_permissions(&gnupg, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let home = gnupg.to_string_lossy().into_owned();
    let gpg = |args: &[&str]| {
        let mut all = vec!["--batch", "--homedir", &home];
        all.extend_from_slice(args);
        tool(work.path(), "gpg", &all)
    };
    gpg(&[
        "--passphrase",
        "",
        "--quick-gen-key",
        "pir test archive <archive@pir.invalid>",
        "ed25519",
        "sign",
        "never",
    ]);
    gpg(&[
        "--yes",
        "--clearsign",
        "-o",
        &w("repo/dists/stable/InRelease").to_string_lossy(),
        &w("repo/dists/stable/Release").to_string_lossy(),
    ]);
    std::fs::write(w("archive-key.gpg"), gpg(&["--export"])).unwrap();
    let _mirrors = serve_repo(work.path(), &repo);

    let source = format!(
        "deb [signed-by={}] pir://updates/ stable main",
        w("archive-key.gpg").display()
    );
    let update = apt_get(work.path(), &source, &["update"]);
    assert!(
        update.contains("pir://updates stable InRelease") && !update.contains("NO_PUBKEY"),
        "{update}"
    );
    apt_get(
        work.path(),
        &source,
        &["install", "--download-only", "-y", "jq"],
    );
    check_fetched(work.path(), &pool);

    // An archive key that did not sign the index: apt refuses the repository.
    let other = w("other-gnupg");
    std::fs::create_dir(&other).unwrap();
    std::fs::set_permissions(&other, std::os::unix::fs::PermissionsExt::from_mode(0o700)).unwrap();
    let other_home = other.to_string_lossy().into_owned();
    tool(
        work.path(),
        "gpg",
        &[
            "--batch",
            "--homedir",
            &other_home,
            "--passphrase",
            "",
            "--quick-gen-key",
            "someone else <else@pir.invalid>",
            "ed25519",
            "sign",
            "never",
        ],
    );
    let wrong = tool(
        work.path(),
        "gpg",
        &["--batch", "--homedir", &other_home, "--export"],
    );
    std::fs::write(w("wrong-key.gpg"), wrong).unwrap();
    std::fs::remove_dir_all(w("state/lists")).unwrap();
    let wrong_source = format!(
        "deb [signed-by={}] pir://updates/ stable main",
        w("wrong-key.gpg").display()
    );
    let (_, text) = apt_run(work.path(), &wrong_source, &["update"]);
    assert!(
        text.contains("NO_PUBKEY") || text.contains("not signed"),
        "apt accepted an index signed by another key:\n{text}"
    );
}

/// Runs `pir apt method` with `input` on its standard input (closed after it), as apt does.
fn apt_method(input: &[u8]) -> std::process::Output {
    let mut method = pir()
        .args(["apt", "method"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    method.stdin.take().unwrap().write_all(input).unwrap();
    method.wait_with_output().unwrap()
}

#[test]
fn garbage_from_apt_gets_a_400_and_the_method_keeps_answering() {
    let out = apt_method(
            b"this is not apt\n\n\
              600 URI Acquire\nno colon\n\n\
              600 URI Acquire\nFilename: /tmp/x\n\n\
              600 URI Acquire\nURI: pir://updates/../../etc/shadow\nFilename: /tmp/x\n\n\
              600 URI Acquire\nURI: pir://updates/pool/a.deb\nFilename: /tmp/x\nExpected-Checksum-FileSize: many\n\n\
              600 URI Acquire\nURI: pir://updates/pool/a.deb\nFilename: /tmp/x\n\n",
    );
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
