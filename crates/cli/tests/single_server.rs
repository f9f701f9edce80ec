//! End-to-end single-server PIR: `pir db build`, `pir serve` (SimplePIR, DoublePIR, YPIR) and
//! `pir get` as real processes over HTTPS on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::io::{Read, Write};

use support::{db_build_args, ok, records_serve_args, run, serve_records, Proc, Scratch};

/// A `pir serve` child process on a free port, killed on drop, and its `https://` URL.
struct Server {
    _process: Proc,
    url: String,
}

impl Server {
    fn start(db: &str, scheme: &str, key: &str) -> Server {
        let process = serve_records(&[db], key, &["--scheme", scheme]);
        let url = process.url();
        Server {
            _process: process,
            url,
        }
    }
}

/// Starts `pir serve` of `db` with `scheme`, its standard error written to `log`; returns it
/// and what it logged before it served.
fn serve_logged(db: &str, scheme: &str, key: &str, log: &str) -> (Proc, String) {
    let mut command = support::pir();
    command
        .args(records_serve_args(&[db], key, &["--scheme", scheme]))
        .stderr(std::fs::File::create(log).unwrap());
    let process = Proc::spawn(command, "https://");
    (process, std::fs::read_to_string(log).unwrap())
}

#[test]
fn records_and_keys_fetched_privately_from_one_server() {
    let scratch = Scratch::with_keys(&["server"]);
    let p = |n: &str| scratch.path(n);
    // 150 records of 24 bytes, the last one 10 bytes short (zero-padded, trimmed on fetch).
    let data: Vec<u8> = (0..150 * 24 - 10).map(|i| (i * 31 % 251) as u8).collect();
    let built = scratch.records_db("records.db", &data, 24);
    assert!(built.contains("zero-padded"), "{built}");
    let mut kv = String::new();
    for i in 0..40 {
        kv.push_str(&format!("user{i},value of user {i}\n"));
    }
    std::fs::write(p("kv.txt"), kv).unwrap();
    ok(&["db", "build", "--kv", &p("kv.txt"), "--out", &p("kv.db")]);

    // `ypir` serves records over 8 bytes (and key-value slots) with YPIR+SP.
    for (scheme, served, scheme_id) in [
        ("simplepir", "simplepir", 3u8),
        ("doublepir", "doublepir", 4),
        ("ypir", "ypir-sp", 9),
    ] {
        let cache = p(&format!("cache-{scheme}"));
        let records = Server::start(&p("records.db"), scheme, &p("server.key"));
        let get = |what: &[&str], server: &Server| {
            let mut args = vec!["get"];
            args.extend_from_slice(what);
            let spec = format!("{}={}", server.url, p("server.pub"));
            let mut args: Vec<String> = args.iter().map(|s| s.to_string()).collect();
            args.extend(["--server".into(), spec, "--cache-dir".into(), cache.clone()]);
            let args: Vec<&str> = args.iter().map(String::as_str).collect();
            run(&args)
        };
        for index in [0usize, 77, 149] {
            let out = p(&format!("{scheme}-{index}"));
            let result = get(&[&index.to_string(), "--out", &out], &records);
            assert!(result.status.success(), "{result:?}");
            let end = ((index + 1) * 24).min(data.len());
            assert_eq!(
                std::fs::read(&out).unwrap(),
                &data[index * 24..end],
                "{scheme} {index}"
            );
        }
        // The second fetch used the cached hint.
        let second = get(&["5"], &records);
        assert_eq!(second.stdout, &data[5 * 24..6 * 24]);
        assert!(String::from_utf8_lossy(&second.stderr).contains("hint from cache"));
        // `--out -` is standard output; `--json` is one object with the value in hex.
        let dash = get(&["5", "--out", "-"], &records);
        assert_eq!(dash.stdout, &data[5 * 24..6 * 24]);
        let json = get(&["5", "--json"], &records);
        let report: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap();
        assert_eq!(report["value_hex"], hex::encode(&data[5 * 24..6 * 24]));
        assert_eq!(
            (report["bytes"].as_u64(), &report["scheme"]),
            (Some(24), &serde_json::json!(served))
        );
        if served == "ypir-sp" {
            let hint = report["hint_bytes"].as_u64().unwrap();
            assert!(hint < 1024, "YPIR+SP downloaded {hint} bytes of hint");
        }
        // An index past the end is refused on the client.
        assert!(!get(&["150"], &records).status.success());

        // A malformed query gets an error envelope; the server keeps serving.
        let mut bad = b"PIRw\x01\x00".to_vec();
        bad.extend_from_slice(&[scheme_id, 1, 5, 0, 0, 0]);
        bad.extend_from_slice(b"hello");
        let reply = post_raw(&records.url, &p("server.pub"), &bad);
        assert!(reply.starts_with(b"PIRw"), "{reply:?}");
        assert_eq!(reply[7], 3, "an error envelope");
        let again = get(&["77"], &records);
        assert_eq!(again.stdout, &data[77 * 24..78 * 24]);
        drop(records);

        let kv_server = Server::start(&p("kv.db"), scheme, &p("server.key"));
        let found = get(&["--lookup", "user17"], &kv_server);
        assert!(found.status.success(), "{found:?}");
        assert_eq!(found.stdout, b"value of user 17");
        // The older flags still work: --key for the lookup, --server URL --server-pub FILE.
        let old_form = run(&[
            "get",
            "--key",
            "user17",
            "--server",
            &kv_server.url,
            "--server-pub",
            &p("server.pub"),
            "--cache-dir",
            &cache,
        ]);
        assert_eq!(old_form.stdout, b"value of user 17", "{old_form:?}");
        let missing = get(&["--lookup", "nobody"], &kv_server);
        assert_eq!(missing.status.code(), Some(4), "{missing:?}");
        assert!(String::from_utf8_lossy(&missing.stderr).contains("not found"));
        assert!(missing.stdout.is_empty());
    }
}

/// Sends `body` to `POST /pir/v1` over TLS pinned to `key_path` and returns the reply body.
fn post_raw(url: &str, key_path: &str, body: &[u8]) -> Vec<u8> {
    let key = pir_keys::PublicKey::load(std::path::Path::new(key_path)).unwrap();
    let config = pir_keys::tls::client_config(key).unwrap();
    let addr = url.trim_start_matches("https://");
    let tcp = std::net::TcpStream::connect(addr).unwrap();
    let conn = rustls::ClientConnection::new(config, pir_keys::tls::server_name()).unwrap();
    let mut tls = rustls::StreamOwned::new(conn, tcp);
    let head = format!(
        "POST /pir/v1 HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    tls.write_all(head.as_bytes()).unwrap();
    tls.write_all(body).unwrap();
    let mut reply = Vec::new();
    let _ = tls.read_to_end(&mut reply);
    let split = reply.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    reply[split + 4..].to_vec()
}

/// DoublePIR's record limit is checked when the database is built (naming the scheme that
/// fits), and `pir serve` refuses before computing any hint.
#[test]
fn scheme_limits_are_checked_at_build_time() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    std::fs::write(path("records"), vec![7u8; 256 * 100]).unwrap();
    let (records, refused_out) = (path("records"), path("d.pir"));
    let build = db_build_args(&records, "256", &refused_out);
    let refused = run(&[&build[..], &["--scheme", "doublepir"]].concat());
    assert!(!refused.status.success());
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(err.contains("--scheme simplepir"), "{err}");
    assert!(
        !dir.path().join("d.pir").exists(),
        "nothing is written for a refused build"
    );
    let built = ok(&db_build_args(&records, "256", &path("s.pir")));
    // YPIR serves them too, as YPIR+SP.
    assert!(
        built.contains(
            "served by: simplepir, ypir (as YPIR+SP: records over 8 bytes), inspire (not doublepir"
        ),
        "{built}"
    );
    ok(&["keygen", "--out", &path("k")]);
    let serve = run(&[
        "serve",
        "--db",
        &path("s.pir"),
        "--scheme",
        "doublepir",
        "--key",
        &path("k.key"),
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(!serve.status.success());
    let err = String::from_utf8_lossy(&serve.stderr);
    assert!(
        err.contains("cannot be served with doublepir") && !err.contains("computing"),
        "{err}"
    );
}

/// The hint is computed once: `pir serve` saves it next to the database, a restart loads it
/// (and answers correctly with it), and a damaged file is recomputed, never used.
#[test]
fn a_restarted_server_loads_its_saved_hint() {
    let scratch = Scratch::with_keys(&["server"]);
    let p = |n: &str| scratch.path(n);
    let data: Vec<u8> = (0..300 * 16).map(|i| (i * 7 % 253) as u8).collect();
    scratch.records_db("r.db", &data, 16);
    for scheme in ["simplepir", "doublepir"] {
        let start = |round: usize| {
            let log = p(&format!("{scheme}-{round}.log"));
            let (process, log) = serve_logged(&p("r.db"), scheme, &p("server.key"), &log);
            let url = process.url();
            (process, url, log)
        };
        let fetch = |url: &str| {
            let out = run(&[
                "get",
                "123",
                "--server",
                &format!("{url}={}", p("server.pub")),
            ]);
            assert!(out.status.success(), "{out:?}");
            out.stdout
        };
        // Per start: what its log says, and what it must not say.
        let rounds: [(&[&str], Option<&str>); 3] = [
            (&["computing", "saved the hint"], None),
            (&["loading the saved"], Some("computing")),
            (&["damaged", "computing"], None),
        ];
        for (round, (said, unsaid)) in rounds.into_iter().enumerate() {
            if round == 2 {
                // A damaged file is refused (checksum) and the hint recomputed.
                let offline = p(&format!("r.db.{scheme}.offline"));
                let mut bytes = std::fs::read(&offline).unwrap();
                let middle = bytes.len() / 2;
                bytes[middle] ^= 1;
                std::fs::write(&offline, bytes).unwrap();
            }
            let (mut server, url, log) = start(round);
            assert!(
                said.iter().all(|s| log.contains(s)) && unsaid.is_none_or(|u| !log.contains(u)),
                "{log}"
            );
            assert_eq!(fetch(&url), &data[123 * 16..124 * 16]);
            support::terminate(server.child_mut());
        }
    }
}

/// YPIR end to end: no hint download (the client fetches only the header and the
/// description), records fetched and checked, a malformed query answered with an error
/// envelope while the server keeps serving, and the offline work loaded at a restart.
#[test]
fn ypir_fetches_records_without_a_hint() {
    let scratch = Scratch::with_keys(&["server"]);
    let p = |n: &str| scratch.path(n);
    let data: Vec<u8> = (0..5000 * 4).map(|i| (i * 13 % 249) as u8).collect();
    let built = scratch.records_db("y.db", &data, 4);
    assert!(built.contains("ypir"), "{built}");
    let start = |round: usize| {
        let log = p(&format!("ypir-{round}.log"));
        let (process, log) = serve_logged(&p("y.db"), "ypir", &p("server.key"), &log);
        let url = process.url();
        (process, url, log)
    };
    let get = |url: &str, index: usize, cache: &str| {
        let out = run(&[
            "get",
            &index.to_string(),
            "--json",
            "--server",
            &format!("{url}={}", p("server.pub")),
            "--cache-dir",
            cache,
        ]);
        assert!(out.status.success(), "{out:?}");
        let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
        assert_eq!(
            report["value_hex"],
            hex::encode(&data[index * 4..index * 4 + 4])
        );
        assert_eq!(report["scheme"], "ypir");
        report
    };
    let (mut first, url, log) = start(0);
    assert!(log.contains("computing"), "{log}");
    for index in [0usize, 2345, 4999] {
        let report = get(&url, index, &p(&format!("fresh-{index}")));
        let hint = report["hint_bytes"].as_u64().unwrap();
        assert!(hint < 1024, "YPIR downloaded {hint} bytes of hint");
    }
    // A malformed YPIR query gets an error envelope; the server keeps serving.
    let mut bad = b"PIRw\x01\x00".to_vec();
    bad.extend_from_slice(&[8, 1, 5, 0, 0, 0]);
    bad.extend_from_slice(b"hello");
    let reply = post_raw(&url, &p("server.pub"), &bad);
    assert_eq!(reply[7], 3, "an error envelope");
    get(&url, 77, &p("cache"));
    support::terminate(first.child_mut());
    let (mut second, url, log) = start(1);
    assert!(
        log.contains("loading the saved") && !log.contains("computing"),
        "{log}"
    );
    get(&url, 4321, &p("cache"));
    support::terminate(second.child_mut());
}

/// `pir serve` swaps its database on SIGHUP without a restart: a rebuilt file is served from
/// then on (clients fetch the new hint), and a damaged one leaves the old database served.
#[test]
fn sighup_swaps_the_database_without_a_restart() {
    let scratch = Scratch::with_keys(&["server"]);
    let p = |n: &str| scratch.path(n);
    let build = |fill: u8| scratch.records_db("r.db", &[fill; 200 * 8], 8);
    build(1);
    let server = serve_records(&[&p("r.db")], &p("server.key"), &[]);
    let (url, hangup) = (server.url(), || server.hangup());
    let cache = p("cache");
    let get = |index: &str| {
        let out = run(&[
            "get",
            index,
            "--server",
            &format!("{url}={}", p("server.pub")),
            "--cache-dir",
            &cache,
        ]);
        assert!(out.status.success(), "{out:?}");
        out.stdout
    };
    assert_eq!(get("5"), vec![1u8; 8]);

    build(2);
    let report = hangup();
    assert!(
        report.starts_with("reloaded: serving database version"),
        "{report}"
    );
    assert_eq!(
        get("5"),
        vec![2u8; 8],
        "the new database, through a new hint"
    );

    // A damaged file: the reload fails and the database of before stays served.
    let mut bytes = std::fs::read(p("r.db")).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(p("r.db"), bytes).unwrap();
    let report = hangup();
    assert!(report.starts_with("reload failed"), "{report}");
    assert!(report.contains("damaged"), "{report}");
    assert_eq!(get("5"), vec![2u8; 8]);
}

/// One `pir serve` process serves several databases: the first by default, any other by its
/// version (`pir get --db VERSION`), each with its own hint.
#[test]
fn one_server_serves_several_databases_chosen_by_version() {
    let scratch = Scratch::with_keys(&["server"]);
    let p = |n: &str| scratch.path(n);
    scratch.records_db("a.db", &[0xaa; 100 * 8], 8);
    scratch.records_db("b.db", &[0xbb; 100 * 8], 8);
    let server = serve_records(&[&p("a.db"), &p("b.db")], &p("server.key"), &[]);
    // Its first two lines: the URL and version of each database.
    let served: Vec<(String, String, bool)> = [server.first_line.clone(), server.next_line()]
        .into_iter()
        .map(|line| {
            let version = line
                .split("database version ")
                .nth(1)
                .unwrap()
                .split([',', ')'])
                .next()
                .unwrap()
                .to_string();
            let url = line
                .split_whitespace()
                .find(|w| w.starts_with("https://"))
                .unwrap()
                .to_string();
            (url, version, line.contains("the default"))
        })
        .collect();
    assert!(served[0].2 && !served[1].2, "{served:?}");
    assert_ne!(served[0].1, served[1].1);
    let url = served[0].0.clone();
    let get = |extra: &[&str]| {
        let mut args = vec![
            "get".to_string(),
            "7".into(),
            "--server".into(),
            format!("{url}={}", p("server.pub")),
            "--cache-dir".into(),
            p("cache"),
        ];
        args.extend(extra.iter().map(|s| s.to_string()));
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        run(&args)
    };
    let default = get(&[]);
    assert!(default.status.success(), "{default:?}");
    assert_eq!(default.stdout, vec![0xaa; 8]);
    let second = get(&["--db", &served[1].1]);
    assert!(second.status.success(), "{second:?}");
    assert_eq!(second.stdout, vec![0xbb; 8]);
    let first = get(&["--db", &served[0].1]);
    assert_eq!(first.stdout, vec![0xaa; 8]);
    // A version the server does not serve is refused by name.
    let unknown = get(&["--db", &"00".repeat(32)]);
    assert!(!unknown.status.success());
    assert!(
        String::from_utf8_lossy(&unknown.stderr).contains("does not serve"),
        "{unknown:?}"
    );
}
