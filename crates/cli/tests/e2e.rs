//! End-to-end: the real `pir` binary as vendor, three or four mirror processes on 127.0.0.1,
//! and the real client, over HTTPS.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::io::{Read, Write};

use support::{dead_url, has_program, ok, partial_files, require, run, serve_args, Mirror, World};

fn fetch_args<'a>(name: &'a str, mirrors: &'a str, world: &'a World, out: &'a str) -> Vec<String> {
    [
        "fetch",
        name,
        "--mirrors",
        mirrors,
        "--vendor-pub",
        &world.path("vendor.pub"),
        "--out",
        out,
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

fn args(v: &[String]) -> Vec<&str> {
    v.iter().map(String::as_str).collect()
}

/// Runs `pir fetch` until its standard error names `url`, and returns that run. Each fetch
/// draws its mirrors at random (3 of the 4 listed here), so one misses a given mirror with
/// probability 1/4, and 40 tries all miss it with probability 4^-40.
fn fetch_until_named(fetch: &[String], url: &str) -> std::process::Output {
    for _ in 0..40 {
        let result = run(&args(fetch));
        if !result.status.success() || String::from_utf8_lossy(&result.stderr).contains(url) {
            return result;
        }
    }
    panic!("40 fetches never asked {url}: mirrors are not drawn at random");
}

/// `(url, key name)` pairs for a mirror list: mirror `k` holds key `m{first_key + k}`.
fn entries(mirrors: &[Mirror], first_key: usize) -> Vec<(String, String)> {
    mirrors
        .iter()
        .enumerate()
        .map(|(k, m)| (m.url.clone(), format!("m{}", first_key + k)))
        .collect()
}

fn three_good_mirrors(world: &World) -> Vec<Mirror> {
    let release = world.path("release");
    (0..3)
        .map(|i| Mirror::start(&release, &world.path(&format!("m{i}.key")), &[]))
        .collect()
}

#[test]
fn every_file_fetched_privately_is_byte_equal() {
    let world = World::new(3);
    let mirrors = three_good_mirrors(&world);
    let list: Vec<(String, String)> = entries(&mirrors, 0);
    let list = world.mirror_list("mirrors.pir", &list);
    for (k, (name, bytes)) in world.files.iter().enumerate() {
        let out = world.path(&format!("out-raid-{k}"));
        let stdout = ok(&args(&fetch_args(name, &list, &world, &out)));
        assert!(stdout.contains("privacy: RAID-PIR"), "{stdout}");
        assert_eq!(
            &std::fs::read(&out).unwrap(),
            bytes,
            "RAID-PIR fetch of {name}"
        );
    }
    // Chor, and RAID-PIR with other parameters, on a multi-block file.
    let (name, bytes) = &world.files[6];
    let out = world.path("out-chor");
    let mut chor = fetch_args(name, &list, &world, &out);
    chor.extend(["--scheme", "chor"].map(String::from));
    let stdout = ok(&args(&chor));
    assert!(
        stdout.contains("at least one of the mirrors asked does not collude"),
        "{stdout}"
    );
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);
    // DPF over two of the mirrors: a short key per mirror instead of one bit per block.
    let out = world.path("out-dpf");
    let mut dpf = fetch_args(name, &list, &world, &out);
    dpf.extend(["--scheme", "dpf", "--json"].map(String::from));
    let report = ok(&args(&dpf));
    assert!(report.contains("DPF over 2 mirrors"), "{report}");
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);
    let out = world.path("out-raid-r3");
    let mut r3 = fetch_args(name, &list, &world, &out);
    r3.extend(["--redundancy", "3", "--chunks", "5"].map(String::from));
    ok(&args(&r3));
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);
    // A name that is not in the release is a clear error and writes nothing.
    let out = world.path("out-missing");
    let result = run(&args(&fetch_args("no/such/file", &list, &world, &out)));
    assert!(!result.status.success());
    assert!(String::from_utf8_lossy(&result.stderr).contains("no file named"));
    assert!(!std::path::Path::new(&out).exists());
}

/// A mirror serving corrupted data (and signing its wrong answers).
fn cheating_mirror(world: &World, key: &str) -> Mirror {
    let bad = world.copy_release("bad-release");
    let db = bad.join("database.bin");
    let mut bytes = std::fs::read(&db).unwrap();
    for (i, byte) in bytes.iter_mut().enumerate() {
        *byte ^= (i as u8).wrapping_mul(167) | 1;
    }
    std::fs::write(&db, bytes).unwrap();
    Mirror::start(
        &bad.to_string_lossy(),
        &world.path(&format!("{key}.key")),
        &["--skip-verify"],
    )
}

#[test]
fn cheating_mirror_is_named_and_its_signed_answer_proves_it() {
    let world = World::new(4);
    let bad = cheating_mirror(&world, "m0");
    let release = world.path("release");
    let good: Vec<Mirror> = (1..4)
        .map(|i| Mirror::start(&release, &world.path(&format!("m{i}.key")), &[]))
        .collect();
    let (name, bytes) = &world.files[4];

    // With a spare: the fetch succeeds through honest mirrors, names the cheater, keeps evidence.
    let mut list = vec![(bad.url.clone(), "m0".to_string())];
    list.extend(entries(&good, 1));
    let list_path = world.mirror_list("with-spare.pir", &list);
    let out = world.path("fetched.deb");
    let result = fetch_until_named(&fetch_args(name, &list_path, &world, &out), &bad.url);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);
    assert!(
        stderr.contains(&bad.url) && stderr.contains("wrong answer"),
        "{stderr}"
    );
    for m in &good {
        assert!(
            !stderr.contains(&format!("mirror {} sent", m.url)),
            "honest mirror blamed: {stderr}"
        );
    }
    let evidence: Vec<_> = std::fs::read_dir(world.dir.path())
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".evidence-"))
        .collect();
    assert_eq!(evidence.len(), 1, "{evidence:?}");
    // Together with the other positions' requests, evidence reveals the block: owner only.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(&evidence[0])
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600, "evidence is mode {mode:o}");
    let check = |file: &str, release: &str| {
        let out = run(&["evidence", "check", file, "--release", release]);
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        (out.status.code(), text)
    };
    let (code, verdict) = check(&evidence[0].to_string_lossy(), &release);
    assert_eq!(code, Some(6), "proof of cheating exits 6: {verdict}");
    assert!(
        verdict.contains("CHEATED") && verdict.contains(&bad.url),
        "{verdict}"
    );
    // Against a corrupt local copy nothing is judged: it could make an honest mirror look guilty.
    let (code, verdict) = check(&evidence[0].to_string_lossy(), &world.path("bad-release"));
    assert_eq!(code, Some(1), "{verdict}");
    assert!(
        verdict.contains("cannot be trusted") && !verdict.contains("CHEATED"),
        "{verdict}"
    );

    // Without a spare: the fetch fails with exit code 3, names the suspects, leaves no file.
    let list_path = world.mirror_list("no-spare.pir", &list[..3]);
    let out_dir = world.dir.path().join("no-spare");
    std::fs::create_dir(&out_dir).unwrap();
    let out = out_dir.join("fetched.deb").to_string_lossy().into_owned();
    let result = run(&args(&fetch_args(name, &list_path, &world, &out)));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert_eq!(result.status.code(), Some(3), "{stderr}");
    assert!(
        stderr.contains("failed its manifest hash") && stderr.contains(&bad.url),
        "{stderr}"
    );
    assert!(
        !std::path::Path::new(&out).exists(),
        "a wrong file was written"
    );
    assert!(
        partial_files(&out_dir).is_empty(),
        "partial file left behind"
    );
    assert!(stderr.contains("evidence kept"), "{stderr}");
    // Every suspect's signed answer was kept; the honest ones check as correct (exit 0), the
    // corrupt one as proof (exit 6).
    let mut codes: Vec<Option<i32>> = std::fs::read_dir(&out_dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| p.to_string_lossy().contains(".evidence-"))
        .map(|p| check(&p.to_string_lossy(), &release).0)
        .collect();
    codes.sort();
    assert_eq!(codes, vec![Some(0), Some(0), Some(6)]);
}

#[test]
fn down_mirror_is_named_or_replaced_by_a_spare() {
    let world = World::new(4);
    let mirrors = three_good_mirrors(&world);
    let dead = dead_url();
    let (name, bytes) = &world.files[5];

    let mut list = vec![(dead.clone(), "m3".to_string())];
    list.extend(entries(&mirrors, 0));
    let with_spare = world.mirror_list("with-spare.pir", &list);
    let out = world.path("via-spare");
    let result = fetch_until_named(&fetch_args(name, &with_spare, &world, &out), &dead);
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);
    assert!(
        stderr.contains(&dead) && stderr.contains("cannot connect"),
        "{stderr}"
    );

    let no_spare = world.mirror_list("no-spare.pir", &list[..3]);
    let out = world.path("no-spare-out");
    let result = run(&args(&fetch_args(name, &no_spare, &world, &out)));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success());
    assert!(
        stderr.contains(&format!("mirror {dead} failed")),
        "{stderr}"
    );
    assert!(!std::path::Path::new(&out).exists());
    assert!(partial_files(world.dir.path()).is_empty());
}

#[test]
fn tampered_mirror_list_and_manifest_are_rejected() {
    let world = World::new(3);
    let mirrors = three_good_mirrors(&world);
    let list: Vec<(String, String)> = entries(&mirrors, 0);
    let list_path = world.mirror_list("mirrors.pir", &list);
    let (name, _) = &world.files[1];

    // One flipped byte anywhere in the mirror list.
    let mut bytes = std::fs::read(&list_path).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x01;
    let tampered = world.path("tampered.pir");
    std::fs::write(&tampered, bytes).unwrap();
    let out = world.path("out");
    let result = run(&args(&fetch_args(name, &tampered, &world, &out)));
    assert!(!result.status.success());
    assert!(
        String::from_utf8_lossy(&result.stderr).contains("signature"),
        "{}",
        String::from_utf8_lossy(&result.stderr)
    );
    assert!(!std::path::Path::new(&out).exists());

    // A mirror list signed by someone else.
    ok(&["keygen", "--out", &world.path("intruder")]);
    let mut forged = vec![
        "mirror-list".to_string(),
        "build".into(),
        "--vendor-key".into(),
        world.path("intruder.key"),
        "--out".into(),
        world.path("forged.pir"),
    ];
    forged.extend([
        "--mirror".to_string(),
        format!("{}={}", mirrors[0].url, world.path("m0.pub")),
    ]);
    ok(&args(&forged));
    let result = run(&args(&fetch_args(
        name,
        &world.path("forged.pir"),
        &world,
        &out,
    )));
    assert!(!result.status.success());

    // Mirrors that serve a tampered manifest.
    let bad = world.copy_release("tampered-release");
    let manifest = bad.join("manifest.pir");
    let mut bytes = std::fs::read(&manifest).unwrap();
    let at = bytes.len() - 100; // inside the block hashes
    bytes[at] ^= 0x80;
    std::fs::write(&manifest, bytes).unwrap();
    let bad_path = bad.to_string_lossy().into_owned();
    let bad_mirrors: Vec<Mirror> = (0..3)
        .map(|i| {
            Mirror::start(
                &bad_path,
                &world.path(&format!("m{i}.key")),
                &["--skip-verify"],
            )
        })
        .collect();
    let list: Vec<(String, String)> = entries(&bad_mirrors, 0);
    let list_path = world.mirror_list("bad-mirrors.pir", &list);
    let result = run(&args(&fetch_args(name, &list_path, &world, &out)));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success());
    assert!(
        stderr.contains("manifest") && stderr.contains("rejected"),
        "{stderr}"
    );
    assert!(!std::path::Path::new(&out).exists());
}

#[test]
fn mirror_with_wrong_key_is_refused_by_tls() {
    let world = World::new(3);
    let mirrors = three_good_mirrors(&world);
    // The list pins another key for mirror 0's URL.
    ok(&["keygen", "--out", &world.path("other")]);
    let list = vec![
        (mirrors[0].url.clone(), "other".to_string()),
        (mirrors[1].url.clone(), "m1".to_string()),
        (mirrors[2].url.clone(), "m2".to_string()),
    ];
    let list_path = world.mirror_list("wrong-key.pir", &list);
    let out = world.path("out");
    let result = run(&args(&fetch_args(
        &world.files[2].0,
        &list_path,
        &world,
        &out,
    )));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(!result.status.success());
    assert!(
        stderr.contains(&mirrors[0].url) && stderr.contains("TLS"),
        "{stderr}"
    );
}

#[test]
fn legacy_http_serves_plain_files() {
    let world = World::new(1);
    let mirror = Mirror::start(
        &world.path("release"),
        &world.path("m0.key"),
        &["--legacy-http", "127.0.0.1:0"],
    );
    let addr = mirror.legacy.expect("legacy address");
    let (name, bytes) = &world.files[5];
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET /files/{name} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut response = Vec::new();
    stream.read_to_end(&mut response).unwrap();
    let split = response.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
    assert!(response.starts_with(b"HTTP/1.1 200"));
    assert_eq!(&response[split..], &bytes[..]);
}

#[test]
fn release_show_and_bad_inputs_give_clear_errors() {
    let world = World::new(1);
    let shown = ok(&[
        "release",
        "show",
        &world.path("release"),
        "--vendor-pub",
        &world.path("vendor.pub"),
    ]);
    assert!(
        shown.contains("verified") && shown.contains("pool/main/a/apt_2.6.1_amd64.deb"),
        "{shown}"
    );
    // Swapped key files, an existing output, a bad block size.
    let build = |key: &str, out: &str, extra: &[&str]| {
        let (src, key, out) = (world.path("src"), world.path(key), world.path(out));
        run(&[
            &["release", "build", &src, "--key", &key, "--out", &out],
            extra,
        ]
        .concat())
    };
    let result = build("vendor.pub", "r2", &[]);
    assert!(String::from_utf8_lossy(&result.stderr).contains("public key"));
    let result = build("vendor.key", "release", &[]);
    assert!(!result.status.success());
    let result = build("vendor.key", "r3", &["--block-size", "100"]);
    assert!(!result.status.success());
    let result = run(&["keygen", "--out", &world.path("vendor")]);
    assert!(!result.status.success(), "keygen must not overwrite a key");
}

#[test]
fn mirror_runs_from_a_config_file_with_relative_paths() {
    let world = World::new(3);
    let config = world.dir.path().join("mirror.toml");
    std::fs::write(
        &config,
        "release = \"release\"\nkey = \"m0.key\"\nlisten = \"127.0.0.1:0\"\nworkers = 2\n",
    )
    .unwrap();
    let from_file = Mirror::start_with(&["--config", &config.to_string_lossy()]);
    let others: Vec<Mirror> = (1..3)
        .map(|i| {
            Mirror::start(
                &world.path("release"),
                &world.path(&format!("m{i}.key")),
                &[],
            )
        })
        .collect();
    let mut list = vec![(from_file.url.clone(), "m0".to_string())];
    list.extend(entries(&others, 1));
    let list = world.mirror_list("mirrors.pir", &list);
    let (name, bytes) = &world.files[3];
    let out = world.path("out");
    ok(&args(&fetch_args(name, &list, &world, &out)));
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);

    std::fs::write(&config, "release = \"release\"\nbogus = 1\n").unwrap();
    let result = run(&["mirror", "serve", "--config", &config.to_string_lossy()]);
    assert!(!result.status.success());
    assert!(String::from_utf8_lossy(&result.stderr).contains("unknown field"));
}

#[test]
fn sigterm_drains_and_exits_zero_and_a_fetch_before_it_succeeds() {
    let world = World::new(3);
    let mirrors = three_good_mirrors(&world);
    let list = world.mirror_list("mirrors.pir", &entries(&mirrors, 0));
    let (name, bytes) = &world.files[0];
    let out = world.path("out-before-term");
    ok(&args(&fetch_args(name, &list, &world, &out)));
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);
    for mirror in mirrors {
        let status = mirror.terminate();
        assert!(
            status.success(),
            "a mirror stopped by SIGTERM exits 0: {status:?}"
        );
    }
}

#[test]
fn curl_reaches_health_and_metrics_with_the_printed_tls_pin_only() {
    if !require(
        has_program("curl"),
        "curl",
        "install the Debian package curl",
    ) {
        return;
    }
    let world = World::new(2);
    let mirror = Mirror::start(&world.path("release"), &world.path("m0.key"), &[]);
    let pin = ok(&["keygen", "--show-pin", &world.path("m0.pub")]);
    let pin = pin.trim();
    assert!(pin.starts_with("sha256//"), "{pin}");
    let curl = |pin: &str, path: &str| {
        std::process::Command::new("curl")
            .args([
                "--silent",
                "--show-error",
                "--insecure",
                "--pinnedpubkey",
                pin,
            ])
            .arg(format!("{}{path}", mirror.url))
            .output()
            .unwrap()
    };
    let health = curl(pin, "/health");
    assert!(health.status.success(), "{health:?}");
    assert!(String::from_utf8_lossy(&health.stdout).starts_with("ok release="));
    let metrics = curl(pin, "/metrics");
    let metrics = String::from_utf8_lossy(&metrics.stdout);
    for name in [
        "pir_requests_total",
        "pir_request_seconds_bucket{le=\"+Inf\"}",
        "pir_batch_requests_count",
        "pir_build_info{version=",
        "pir_batcher_waiting_requests 0",
    ] {
        assert!(metrics.contains(name), "{name} missing from {metrics}");
    }
    // Another server's pin is refused before any request is sent.
    let other = ok(&["keygen", "--show-pin", &world.path("m1.pub")]);
    assert!(!curl(other.trim(), "/health").status.success());
    assert!(
        !run(&["keygen"]).status.success(),
        "keygen needs --out or --show-pin"
    );
}

/// Starts a mirror with `log_args`, stops it with SIGTERM, and returns what it logged.
fn mirror_logs(world: &World, log_args: &[&str]) -> String {
    let mut child = support::pir()
        .args(log_args)
        .args(world.mirror_args("m0"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut first = String::new();
    std::io::BufRead::read_line(&mut stdout, &mut first).unwrap();
    assert!(first.contains("https://"), "{first}");
    let status = support::terminate(&mut child);
    assert!(status.success());
    let mut logs = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut logs).unwrap();
    logs
}

#[test]
fn logs_are_plain_when_piped_and_json_on_request() {
    let world = World::new(1);
    let plain = mirror_logs(&world, &["--log", "info"]);
    assert!(plain.contains("serving PIR over HTTPS"), "{plain}");
    assert!(plain.contains("SIGTERM"), "the shutdown is logged: {plain}");
    assert!(
        !plain.contains('\u{1b}'),
        "no colour codes in a pipe: {plain:?}"
    );
    let json = mirror_logs(&world, &["--log", "info", "--log-format", "json"]);
    // Every line is JSON, the status lines ("opening ...") included.
    let lines: Vec<serde_json::Value> = json
        .lines()
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert!(lines.iter().any(|l| l["target"] == "pir::status"
        && l["fields"]["message"]
            .as_str()
            .is_some_and(|m| m.starts_with("opening "))));
    assert!(lines
        .iter()
        .any(|l| l["fields"]["message"] == "serving PIR over HTTPS"));
    assert!(lines.iter().all(|l| l["level"].is_string()));
}

#[test]
fn a_closed_output_pipe_ends_the_command_quietly() {
    let world = World::new(1);
    let mut child = support::pir()
        .args(["release", "show", &world.path("release")])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // The reader goes away before the command prints, as `| head -0` would.
    drop(child.stdout.take());
    let output = child.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert!(output.status.success(), "{:?} {stderr}", output.status);
}

/// Plain HTTP GET on `addr`; returns the status and the body.
fn plain_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    tcp.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    (
        head.split(' ').nth(1).unwrap().parse().unwrap(),
        body.to_string(),
    )
}

#[test]
fn the_admin_listener_serves_metrics_and_health_only() {
    let world = World::new(1);
    let mut child = support::pir()
        .args(world.mirror_args("m0"))
        .args(["--admin-listen", "127.0.0.1:0"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let stdout = std::io::BufReader::new(child.stdout.take().unwrap());
    let mut lines = std::io::BufRead::lines(stdout).map(Result::unwrap);
    let admin = lines
        .find_map(|line| {
            line.strip_prefix("admin (plain HTTP): http://")
                .map(|rest| rest.split('/').next().unwrap().to_string())
        })
        .expect("the mirror names its admin address");
    // Keep reading: a closed stdout ends the command (quietly) at its next line.
    std::thread::spawn(move || lines.for_each(drop));
    let (status, body) = plain_get(&admin, "/metrics");
    assert_eq!(status, 200);
    assert!(body.contains("pir_request_seconds_count"), "{body}");
    // The /metrics request before this one was timed, under its endpoint.
    let (_, body) = plain_get(&admin, "/metrics");
    assert!(
        body.contains("pir_http_request_seconds_count{endpoint=\"/metrics\"} 1\n")
            && body.contains("pir_http_request_seconds_count{endpoint=\"/pir/v1\"} 0\n"),
        "{body}"
    );
    let (status, body) = plain_get(&admin, "/health");
    assert_eq!(
        (status, body.starts_with("ok release=")),
        (200, true),
        "{body}"
    );
    assert_eq!(plain_get(&admin, "/pir/v1/hint").0, 404);
    assert!(support::terminate(&mut child).success());
}

#[test]
fn completions_and_the_man_page_come_from_the_command_definitions() {
    let bash = ok(&["completions", "bash"]);
    assert!(bash.contains("_pir()"), "{bash}");
    for command in ["fetch", "breach", "mirror", "keygen"] {
        assert!(
            bash.contains(command),
            "{command} missing from the completions"
        );
    }
    assert!(ok(&["completions", "zsh"]).contains("#compdef pir"));
    let man = ok(&["man"]);
    assert!(man.contains(".TH pir 1"), "{man}");
    assert!(man.contains("breach"), "subcommands are listed");
    assert!(!run(&["completions", "tcsh"]).status.success());
}

#[test]
fn fetch_reports_json_and_writes_to_standard_output() {
    let world = World::new(3);
    let mirrors = three_good_mirrors(&world);
    let list = world.mirror_list("mirrors.pir", &entries(&mirrors, 0));
    let (name, bytes) = &world.files[1];
    let out = world.path("out-json");
    let mut json_args = fetch_args(name, &list, &world, &out);
    json_args.push("--json".into());
    let report: serde_json::Value = serde_json::from_str(&ok(&args(&json_args))).unwrap();
    assert_eq!(report["bytes"].as_u64(), Some(bytes.len() as u64));
    assert_eq!(report["out"], out);
    assert!(report["privacy"].as_str().unwrap().contains("collude"));
    assert_eq!(&std::fs::read(&out).unwrap(), bytes);
    let to_stdout = run(&args(&fetch_args(name, &list, &world, "-")));
    assert!(to_stdout.status.success(), "{to_stdout:?}");
    assert_eq!(
        &to_stdout.stdout, bytes,
        "the file itself on standard output"
    );
    assert!(String::from_utf8_lossy(&to_stdout.stderr).contains("privacy:"));
    let mut both = fetch_args(name, &list, &world, "-");
    both.push("--json".into());
    assert!(!run(&args(&both)).status.success());
}

#[test]
fn print_config_shows_the_effective_settings_as_a_config_that_round_trips() {
    let world = World::new(1);
    let mut serve = world.mirror_args("m0");
    serve.extend(["--max-batch", "8", "--print-config"].map(String::from));
    let printed = ok(&args(&serve));
    assert!(printed.contains("max_batch = 8"), "{printed}");
    assert!(
        printed.contains("grace_seconds = 10") && printed.contains("header_timeout_seconds = 30"),
        "defaults are filled in: {printed}"
    );
    let config = world.path("printed.toml");
    std::fs::write(&config, &printed).unwrap();
    let again = ok(&["mirror", "serve", "--config", &config, "--print-config"]);
    assert_eq!(again, printed);
}

#[test]
fn every_server_takes_a_config_file_and_prints_its_own() {
    let world = World::new(1);
    let dir = std::path::Path::new(&world.path("release"))
        .parent()
        .unwrap()
        .to_path_buf();
    for (command, required) in [
        (
            vec!["serve"],
            vec!["--db", "x.db", "--key", "k.key", "--listen", "127.0.0.1:0"],
        ),
        (
            vec!["breach", "serve"],
            serve_args(&[], "x.db", "1", "k.key", &[]),
        ),
        (
            vec!["safebrowsing", "serve"],
            serve_args(&[], "x.db", "0", "k.key", &[]),
        ),
        (
            vec!["oram", "store"],
            vec!["--dir", "x.db", "--key", "k.key", "--listen", "127.0.0.1:0"],
        ),
    ] {
        let first_setting = required[0].trim_start_matches("--");
        let mut args: Vec<&str> = command.clone();
        args.extend(&required);
        args.extend([
            "--grace-seconds",
            "3",
            "--max-connections",
            "77",
            "--print-config",
        ]);
        let printed = ok(&args);
        assert!(printed.contains("grace_seconds = 3"), "{printed}");
        assert!(printed.contains("max_connections = 77"), "{printed}");
        assert!(printed.contains("body_timeout_seconds = 30"), "{printed}");
        assert!(printed.contains("listen = \"127.0.0.1:0\""), "{printed}");
        assert!(
            printed.contains(&format!("{}", dir.join("x.db").display()))
                || printed.contains("/x.db\""),
            "paths are absolute: {printed}"
        );
        let file = world.path(&format!("{}.toml", command.join("-")));
        std::fs::write(&file, &printed).unwrap();
        let mut again: Vec<&str> = command.clone();
        again.extend(["--config", &file, "--print-config"]);
        assert_eq!(ok(&again), printed, "the printed file round-trips");
        // A flag overrides the file.
        again.extend(["--grace-seconds", "7"]);
        assert!(ok(&again).contains("grace_seconds = 7"));
        // Missing required settings are named.
        let mut bare: Vec<&str> = command.clone();
        bare.push("--print-config");
        let refused = run(&bare);
        assert!(!refused.status.success());
        assert!(
            String::from_utf8_lossy(&refused.stderr).contains(first_setting),
            "{refused:?}"
        );
    }
}
