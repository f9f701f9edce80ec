//! With `--log-format json` every line a server writes to standard error is one JSON object:
//! its status lines ("opening ...", "hint ready ...") and progress go through the logger too.
//! Each server command is started, asked over HTTPS, reloaded with SIGHUP and stopped with
//! SIGTERM, and everything it wrote to standard error is read back.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::io::{Read, Write};
use std::path::Path;
use std::process::Stdio;

use support::{serve_args, Proc, Scratch, World, PASSWORDS};

/// A server started with `--log info --log-format json`, its standard output read line by
/// line and its standard error kept whole.
struct Server {
    process: Proc,
    addr: String,
}

impl Server {
    /// Starts `pir --log info --log-format json ARGS` (its first line names its address).
    fn start(args: &[&str]) -> Server {
        let mut command = support::pir();
        command
            .args(["--log", "info", "--log-format", "json"])
            .args(args)
            .stderr(Stdio::piped());
        let process = Proc::spawn(command, "https://");
        let addr = process.addr.clone();
        Server { process, addr }
    }

    /// Sends SIGHUP and waits for the line saying how the reload went.
    fn reload(&self) -> String {
        self.process.hangup()
    }

    /// Stops it with SIGTERM; returns its standard error, every line checked to be a JSON
    /// object with a level and a message.
    fn stop(self) -> Vec<serde_json::Value> {
        let stderr = self.process.stop();
        let lines: Vec<serde_json::Value> = stderr
            .lines()
            .map(|line| {
                let value: serde_json::Value = serde_json::from_str(line)
                    .unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}\n{stderr}"));
                assert!(value.is_object(), "{line}");
                assert!(value["level"].is_string(), "{line}");
                assert!(value["fields"]["message"].is_string(), "{line}");
                value
            })
            .collect();
        let said = |text: &str| {
            lines
                .iter()
                .any(|l| l["fields"]["message"].as_str().unwrap().contains(text))
        };
        assert!(said("serving PIR over HTTPS"), "{stderr}");
        assert!(said("SIGHUP"), "the reload is logged: {stderr}");
        assert!(said("stopped"), "the shutdown is logged: {stderr}");
        lines
    }
}

/// Asks the server at `addr` (pinned to `key_path`) for `/health` and sends it a body that is
/// no request: both over TLS, as any client would.
fn ask(addr: &str, key_path: &Path) {
    let send = |head: String, body: &[u8]| -> String {
        let key = pir_keys::PublicKey::load(key_path).unwrap();
        let config = pir_keys::tls::client_config(key).unwrap();
        let tcp = std::net::TcpStream::connect(addr).unwrap();
        let conn = rustls::ClientConnection::new(config, pir_keys::tls::server_name()).unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        tls.write_all(head.as_bytes()).unwrap();
        tls.write_all(body).unwrap();
        let mut reply = Vec::new();
        let _ = tls.read_to_end(&mut reply);
        String::from_utf8_lossy(&reply).into_owned()
    };
    let health = send(
        format!("GET /health HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"),
        b"",
    );
    assert!(health.starts_with("HTTP/1.1 200"), "{health}");
    let body = b"PIRw\x01\x00 not a request";
    let reply = send(
        format!(
            "POST /pir/v1 HTTP/1.1\r\nHost: {addr}\r\nContent-Length: {}\r\nConnection: \
             close\r\n\r\n",
            body.len()
        ),
        body,
    );
    assert!(reply.starts_with("HTTP/1.1"), "{reply}");
}

/// The status lines (target `pir::status`) among `lines`.
fn status_lines(lines: &[serde_json::Value]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l["target"] == "pir::status")
        .map(|l| l["fields"]["message"].as_str().unwrap().to_string())
        .collect()
}

/// Starts `pir ARGS` as a [`Server`], asks it (pinned to `key_path`), reloads it (the reload
/// line starting with `reloaded`) and stops it; returns its status lines.
fn exercise(args: &[&str], key_path: &str, reloaded: &str) -> Vec<String> {
    let server = Server::start(args);
    ask(&server.addr, Path::new(key_path));
    let reload = server.reload();
    assert!(reload.starts_with(reloaded), "{reload}");
    status_lines(&server.stop())
}

/// Asserts that a line of `status` starts with each of `starts`.
fn said(status: &[String], starts: &[&str]) {
    for start in starts {
        assert!(
            status.iter().any(|l| l.starts_with(start)),
            "no {start:?} in {status:?}"
        );
    }
}

#[test]
fn mirror_serve_logs_json_only() {
    let world = World::new(1);
    let mut args = world.mirror_args("m0");
    args.extend(["--four-russians", "2"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let status = exercise(&args, &world.path("m0.pub"), "reloaded:");
    assert!(status.iter().any(|l| l.contains("loaded in")), "{status:?}");
    said(&status, &["opening ", "building four-Russians tables"]);
}

#[test]
fn single_server_logs_json_only() {
    let scratch = Scratch::with_keys(&["server"]);
    let p = |name: &str| scratch.path(name);
    scratch.records_db("r.db", &[7u8; 64 * 16], 16);
    let (db, key) = (p("r.db"), p("server.key"));
    let args = [
        "serve",
        "--db",
        &db,
        "--key",
        &key,
        "--listen",
        "127.0.0.1:0",
    ];
    let status = exercise(&args, &p("server.pub"), "reloaded:");
    said(
        &status,
        &[
            "computing the simplepir hint",
            "saved the hint",
            "loading the saved",
        ],
    );
}

#[test]
fn breach_serve_logs_json_only() {
    let scratch = Scratch::with_keys(&["s1"]);
    let db = scratch.breach_db("pw.db", PASSWORDS);
    let key = scratch.path("s1.key");
    let extra = ["--four-russians", "4", "--qdp-queue", "8"];
    let args = serve_args(&["breach", "serve"], &db, "1", &key, &extra);
    let status = exercise(&args, &scratch.path("s1.pub"), "reloaded:");
    said(&status, &["building the four-Russians table"]);
}

#[test]
fn safebrowsing_serve_logs_json_only() {
    let scratch = Scratch::with_keys(&["s0"]);
    let list: String = (0..300).map(|i| format!("bad{i}.example.org\n")).collect();
    let db = scratch.safebrowsing_db("sb.db", &list);
    let key = scratch.path("s0.key");
    let args = serve_args(&["safebrowsing", "serve"], &db, "0", &key, &[]);
    exercise(&args, &scratch.path("s0.pub"), "reloaded list");
}

/// A server that cannot start says why in one JSON object too (`pir::error`), with the causes
/// in its `details`; nothing else reaches standard error, and the exit code is still 1.
#[test]
fn a_failed_start_is_one_json_error() {
    let scratch = Scratch::with_keys(&["s0"]);
    let missing = scratch.path("missing.db");
    let key = scratch.path("s0.key");
    let output = support::pir()
        .args(["--log-format", "json", "serve", "--db"])
        .arg(&missing)
        .arg("--key")
        .arg(&key)
        .args(["--listen", "127.0.0.1:0"])
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1));
    let stderr = String::from_utf8(output.stderr).unwrap();
    let lines: Vec<serde_json::Value> = stderr
        .lines()
        .map(|line| {
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not JSON ({e}): {line:?}"))
        })
        .collect();
    let error = lines
        .iter()
        .find(|l| l["target"] == "pir::error")
        .unwrap_or_else(|| panic!("no pir::error event: {stderr}"));
    assert_eq!(error["level"], "ERROR", "{stderr}");
    let said = format!(
        "{} {}",
        error["fields"]["message"], error["fields"]["details"]
    );
    assert!(said.contains("missing.db"), "names the file: {stderr}");
}
