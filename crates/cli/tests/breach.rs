//! End-to-end private credential checks: `pir breach build`, two `pir breach serve`
//! processes on 127.0.0.1, `pir breach check` over standard input, the blinded step for a
//! username:password corpus, and the HIBP range proxy, all through the real binary.
//!
//! The corpus is John the Ripper's common-password list (Debian package john-data,
//! /usr/share/john/password.lst). An existing HIBP client library, the `hibp` SDK from npm
//! (`clients/hibp-js`, installed by `.ci/run` with `npm ci`), is pointed at the proxy
//! unchanged. Without either, the test fails in CI (`CI=true`) and is skipped elsewhere, with
//! what to install.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Output, Stdio};

use pir_breach::corpus::password_sha1;
use pir_breach::database::BreachDatabase;
use pir_breach::range::{range_response, RangePrefix, PADDING_MIN_LINES};
use rand::RngCore;
use support::{breach_servers, has_program, ok, pir, require, Proc};

const JOHN_LIST: &str = "/usr/share/john/password.lst";

/// `pir breach check` with `input` on standard input.
fn check(servers: &str, input: &str) -> Output {
    check_with(servers, input, &[])
}

/// `pir breach check EXTRA` with `input` on standard input.
fn check_with(servers: &str, input: &str, extra: &[&str]) -> Output {
    let mut child = pir()
        .args(["breach", "check", "--servers", servers])
        .args(extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

/// Plain HTTP GET; returns (status, content type, body).
fn http_get(addr: &str, path: &str, extra: &str) -> (u16, String, String) {
    let mut tcp = TcpStream::connect(addr).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\n{extra}Connection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    tcp.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    let status = head.split(' ').nth(1).unwrap().parse().unwrap();
    let content_type = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-type: ")
                .map(str::to_string)
        })
        .unwrap_or_default();
    (status, content_type, body.to_string())
}

/// The npm `hibp` SDK, unchanged but for its documented `baseUrl` option, reports through the
/// proxy the breach count the corpus holds for real passwords, and 0 for misses, with and
/// without `Add-Padding`.
fn hibp_library_through_the_proxy(addr: &str, db: &BreachDatabase) {
    let client = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/hibp-js");
    if !require(
        client.join("node_modules/hibp").exists() && has_program("node"),
        "the hibp npm client",
        "install Node.js and run `npm ci` in clients/hibp-js",
    ) {
        return;
    }
    let hits = ["password", "123456", "letmein", "dragon"];
    let misses: Vec<String> = (0..2)
        .map(|_| format!("miss-{:016x}", rand::rng().next_u64()))
        .collect();
    let out = std::process::Command::new("node")
        .arg(client.join("check.mjs"))
        .arg(format!("http://{addr}"))
        .args(hits)
        .args(&misses)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), hits.len() + misses.len(), "{stdout}");
    for (line, password) in lines.iter().zip(hits) {
        // The count the corpus holds: the password's line in its bucket's range body.
        let hash = password_sha1(password.as_bytes());
        let prefix = RangePrefix::of_hash(&hash);
        let bucket = db.bucket(prefix.bucket(db.header()).unwrap()).unwrap();
        let body =
            range_response::<rand::rngs::ThreadRng>(db.header(), prefix, &bucket, None).unwrap();
        let suffix = hex::encode(hash).to_ascii_uppercase()[5..].to_string();
        let count = body
            .split("\r\n")
            .find_map(|l| l.strip_prefix(&format!("{suffix}:")))
            .unwrap();
        assert!(count.parse::<u64>().unwrap() >= 1, "{password}: {count}");
        assert_eq!(*line, format!("{count} {count} {password}"));
    }
    for (line, miss) in lines[hits.len()..].iter().zip(&misses) {
        assert_eq!(*line, format!("0 0 {miss}"));
    }
}

/// Two servers of `db`, the servers file, and the running processes.
fn deploy(dir: &Path, db: &str, blinding_key: Option<&str>) -> (Proc, Proc, String) {
    let p = |n: &str| dir.join(n).to_string_lossy().into_owned();
    let tag = Path::new(db)
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let start = |server: &str, blinding: Option<&str>| {
        let key = p(&format!("s{server}.key"));
        let mut args = vec![
            "breach",
            "serve",
            "--db",
            db,
            "--server",
            server,
            "--key",
            &key,
            "--listen",
            "127.0.0.1:0",
            "--qdp-queue",
            "8",
        ];
        if let Some(b) = blinding {
            args.extend(["--blinding-key", b]);
        }
        // Server 1 answers its flip chunk from a four-Russians table, server 0 by a scan.
        if server == "1" {
            args.extend(["--four-russians", "4"]);
        }
        Proc::start(&args, "https://")
    };
    let s0 = start("0", blinding_key);
    let s1 = start("1", None);
    let servers = p(&format!("{tag}.servers"));
    ok(&[
        "breach",
        "servers",
        "--server",
        &format!("https://{}={}", s0.addr, p("s0.pub")),
        "--server",
        &format!("https://{}={}", s1.addr, p("s1.pub")),
        "--out",
        &servers,
    ]);
    (s0, s1, servers)
}

#[test]
fn private_checks_over_a_real_password_list_pairs_and_the_range_proxy() {
    if !require(
        Path::new(JOHN_LIST).exists(),
        JOHN_LIST,
        "install the Debian package john-data",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
    ok(&["keygen", "--out", &p("s0")]);
    ok(&["keygen", "--out", &p("s1")]);
    let built = ok(&[
        "breach",
        "build",
        "--format",
        "passwords",
        JOHN_LIST,
        "--out",
        &p("pw.db"),
        "--quiet",
    ]);
    assert!(built.contains("compression ratio"), "{built}");
    let (s0, s1, servers) = deploy(dir.path(), &p("pw.db"), None);

    // Real passwords of the list are found, with their counts; random ones are not.
    for password in ["password", "123456", "letmein", "dragon"] {
        let out = check(&servers, &format!("{password}\n"));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(out.status.code(), Some(5), "{password}: {stdout} {out:?}");
        assert!(stdout.starts_with("found (seen "), "{stdout}");
    }
    let mut rng = rand::rng();
    for _ in 0..3 {
        let miss = format!("miss-{:016x}", rng.next_u64());
        let out = check(&servers, &format!("{miss}\n"));
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "not found");
    }
    // No password on standard input is an error, not a verdict.
    assert_eq!(check(&servers, "").status.code(), Some(1));
    // Scripts get JSON, with the same exit codes.
    let hit = check_with(&servers, "password\n", &["--json"]);
    let report: serde_json::Value = serde_json::from_slice(&hit.stdout).unwrap();
    assert_eq!(
        (hit.status.code(), &report["found"]),
        (Some(5), &serde_json::json!(true))
    );
    assert!(report["count"].as_u64().is_some_and(|c| c >= 1), "{report}");
    let miss = check_with(&servers, "miss-not-in-any-list\n", &["--json"]);
    let report: serde_json::Value = serde_json::from_slice(&miss.stdout).unwrap();
    assert_eq!(
        (miss.status.code(), &report["found"]),
        (Some(0), &serde_json::json!(false))
    );

    // A replayed QDP query is refused with a clear error; malformed requests are refused,
    // and the servers keep serving.
    let keys = breach_servers(dir.path(), &s0, &s1);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let session = pir_breach::BreachSession::open(&keys).await.unwrap();
        let qdp = *session.qdp();
        let mut grants = Vec::new();
        for s in 0..2 {
            let body = session
                .exchange(s, &qdp.seed_request(s).unwrap())
                .await
                .unwrap();
            grants.push(qdp.read_seed_response(s, &body).unwrap());
        }
        let (queries, _) = qdp.query(&[3], &grants).unwrap();
        let query = qdp.encode_query(&queries[0]);
        session.exchange(0, &query).await.unwrap();
        let replay = session.exchange(0, &query).await.unwrap_err().to_string();
        assert!(replay.contains("unknown QDP seed id"), "{replay}");
        for bad in [&[][..], &[9, 9, 9], &[3, 1, 2], &[0x10, 1, 2]] {
            let error = session.exchange(1, bad).await.unwrap_err().to_string();
            assert!(error.contains("refused"), "{error}");
        }
        // Server 1 holds no blinding key.
        let error = session.exchange(1, &[0x10; 33]).await.unwrap_err();
        assert!(error.to_string().contains("no blinding key"), "{error}");
    });
    assert_eq!(check(&servers, "password\n").status.code(), Some(5));

    // The proxy: byte-compatible with a range body computed locally from the database.
    let proxy = Proc::start(
        &[
            "breach",
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--servers",
            &servers,
        ],
        "http://",
    );
    let db = BreachDatabase::open(Path::new(&p("pw.db")), true).unwrap();
    for password in ["password", "qwerty", "monkey"] {
        let hash = password_sha1(password.as_bytes());
        let prefix = RangePrefix::of_hash(&hash);
        let bucket = db.bucket(prefix.bucket(db.header()).unwrap()).unwrap();
        let expected =
            range_response::<rand::rngs::ThreadRng>(db.header(), prefix, &bucket, None).unwrap();
        let lower = prefix.to_string().to_ascii_lowercase();
        let (status, content_type, body) = http_get(&proxy.addr, &format!("/range/{lower}"), "");
        assert_eq!((status, content_type.as_str()), (200, "text/plain"));
        assert_eq!(body, expected, "{password}");
        let suffix = hex::encode(hash).to_ascii_uppercase()[5..].to_string();
        assert!(body.contains(&format!("{suffix}:")), "{password} in {body}");
        let (status, _, padded) = http_get(
            &proxy.addr,
            &format!("/range/{prefix}?mode=sha1"),
            "Add-Padding: true\r\n",
        );
        assert_eq!(status, 200);
        let lines: Vec<&str> = padded.split("\r\n").collect();
        assert!(lines.len() >= PADDING_MIN_LINES, "{}", lines.len());
        assert!(lines.iter().any(|l| l.starts_with(&format!("{suffix}:"))));
        let zeros = lines.iter().filter(|l| l.ends_with(":0")).count();
        assert_eq!(zeros, lines.len() - expected.split("\r\n").count());
    }
    hibp_library_through_the_proxy(&proxy.addr, &db);
    let (status, _, body) = http_get(&proxy.addr, "/range/5BAA6?mode=ntlm", "");
    assert_eq!(status, 400);
    assert!(body.contains("NTLM"), "{body}");
    for bad in ["/range/5BAA", "/range/5BAAZ", "/range/5BAA61"] {
        assert_eq!(http_get(&proxy.addr, bad, "").0, 400, "{bad}");
    }
    // A web page that rebinds its own name to 127.0.0.1 sends that name: refused (421), no
    // lookup made for it.
    let port = proxy.addr.rsplit(':').next().unwrap();
    let mut tcp = TcpStream::connect(&proxy.addr).unwrap();
    write!(
        tcp,
        "GET /range/5BAA6 HTTP/1.1\r\nHost: evil.example:{port}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    tcp.read_to_string(&mut reply).unwrap();
    assert!(reply.starts_with("HTTP/1.1 421"), "{reply}");
    drop((proxy, s0, s1));

    // A username:password corpus with the blinded step on server 0.
    std::fs::write(
        p("pairs.txt"),
        "alice@example.com:hunter2\nbob:correct horse battery staple\ncarol:123456\n",
    )
    .unwrap();
    ok(&[
        "breach",
        "build",
        "--format",
        "pairs",
        &p("pairs.txt"),
        "--out",
        &p("pairs.db"),
        "--argon2-memory-kib",
        "64",
        "--argon2-iterations",
        "1",
        "--quiet",
    ]);
    let blinding = p("pairs.db.key");
    let (_s0, _s1, servers) = deploy(dir.path(), &p("pairs.db"), Some(&blinding));
    for (input, code) in [
        ("Alice@Example.com\nhunter2\n", 5),
        ("carol\n123456\n", 5),
        ("alice@example.com\nhunter3\n", 0),
        ("mallory\nhunter2\n", 0),
    ] {
        let out = check(&servers, input);
        assert_eq!(out.status.code(), Some(code), "{input:?}: {out:?}");
    }
}
