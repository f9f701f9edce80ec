//! Shared set-up of the Safe Browsing end-to-end tests (`safebrowsing.rs` and
//! `safebrowsing_firefox.rs`): `pir` processes, servers files, the proxy, raw HTTP and v4
//! requests, and the recording relays that show what each server was sent.

#![allow(dead_code)]

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use pir_safebrowsing::proto;
use pir_safebrowsing::testing::{self, find_request};
use prost::Message;

use crate::support::{ok, pir};

/// A `pir` child process, killed on drop, with the URL it printed.
pub struct Process {
    pub child: Child,
    pub url: String,
    pub lines: Vec<String>,
    /// The lines it prints after `lines`, read on a thread of their own.
    rest: std::sync::mpsc::Receiver<String>,
}

impl Process {
    /// Starts `pir ARGS` and reads its output until a line holds `marker` followed by a URL.
    pub fn start(args: &[&str], marker: &str) -> Self {
        let mut command = pir();
        command.args(args);
        Self::spawn(command, args, marker)
    }

    /// [`Process::start`] under a soft open-file limit of `open_files` (`ulimit -n`).
    pub fn start_limited(args: &[&str], marker: &str, open_files: u32) -> Self {
        let program = pir().get_program().to_owned();
        let mut command = pir();
        let mut shell = std::process::Command::new("sh");
        shell
            .arg("-c")
            .arg(format!("ulimit -n {open_files} && exec \"$0\" \"$@\""))
            .arg(program)
            .args(args)
            .envs(command.get_envs().filter_map(|(k, v)| Some((k, v?))));
        command = shell;
        Self::spawn(command, args, marker)
    }

    pub fn spawn(mut command: std::process::Command, args: &[&str], marker: &str) -> Self {
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn pir");
        let stdout = child.stdout.take().unwrap();
        let mut reader = BufReader::new(stdout).lines();
        let mut lines = Vec::new();
        let url = loop {
            let Some(Ok(line)) = reader.next() else {
                let err = crate::support::read_stderr(&mut child);
                panic!("pir {args:?} stopped before {marker:?}: {lines:?} {err}");
            };
            lines.push(line.clone());
            if let Some(rest) = line.split(marker).nth(1) {
                let url = rest.split_whitespace().next().unwrap();
                break url.trim_end_matches("/v4/").to_string();
            }
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        let (send, rest) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in reader.by_ref().map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        Self {
            child,
            url,
            lines,
            rest,
        }
    }

    /// Sends SIGHUP (reload) and waits (at most a minute) for the line reporting the reload.
    #[allow(dead_code)]
    pub fn hangup(&self) -> String {
        let sent = std::process::Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -HUP failed");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.rest.recv_timeout(left) {
                Ok(line) if line.starts_with("reload") => return line,
                Ok(_) => continue,
                Err(e) => panic!("no reload report within a minute: {e}"),
            }
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `pir safebrowsing serve` of `db` as server `position` on `listen`, with the key
/// `s{position}.key` of `dir` (made on first use).
pub fn serve(dir: &Path, db: &Path, position: usize, listen: &str) -> Process {
    let key = dir.join(format!("s{position}.key"));
    if !key.exists() {
        ok(&["keygen", "--out", key.to_str().unwrap()]);
    }
    Process::start(
        &[
            "safebrowsing",
            "serve",
            "--db",
            db.to_str().unwrap(),
            "--server",
            &position.to_string(),
            "--key",
            key.to_str().unwrap(),
            "--listen",
            listen,
        ],
        " at ",
    )
}

/// Writes the servers file `out`: server `i` at `urls[i]` with the key `s{i}.pub` of `dir`.
pub fn servers_file(dir: &Path, urls: [&str; 2], out: &Path) {
    let spec = |i: usize| format!("{}={}", urls[i], dir.join(format!("s{i}.pub")).display());
    ok(&[
        "safebrowsing",
        "servers",
        "--server",
        &spec(0),
        "--server",
        &spec(1),
        "--out",
        out.to_str().unwrap(),
    ]);
}

/// Two servers of `db` and a servers file; returns them and the servers file path.
pub fn deployment(dir: &Path, db: &Path) -> (Process, Process, PathBuf) {
    let offline = serve(dir, db, 0, "127.0.0.1:0");
    let online = serve(dir, db, 1, "127.0.0.1:0");
    let file = dir.join("servers.txt");
    servers_file(dir, [&offline.url, &online.url], &file);
    (offline, online, file)
}

/// Writes `list.txt` of `hosts` host names `host{k}.evil.example` into `dir` and builds
/// `sb.db` from it, `extra` flags appended; returns the database.
pub fn hosts_db(dir: &Path, hosts: usize, extra: &[&str]) -> PathBuf {
    let list = dir.join("list.txt");
    let text: String = (0..hosts)
        .map(|k| format!("host{k}.evil.example\n"))
        .collect();
    std::fs::write(&list, text).unwrap();
    let db = dir.join("sb.db");
    build(&list, &db, extra);
    db
}

/// `pir safebrowsing build LIST --out DB EXTRA`: what it printed.
pub fn build(list: &Path, db: &Path, extra: &[&str]) -> String {
    let args = ["safebrowsing", "build", list.to_str().unwrap(), "--out"];
    ok(&[&args[..], &[db.to_str().unwrap()], extra].concat())
}

pub fn proxy(servers: &Path) -> Process {
    proxy_with(servers, &[])
}

pub fn proxy_with(servers: &Path, extra: &[&str]) -> Process {
    Process::start(&proxy_args(servers, extra), "proxy at ")
}

/// `pir safebrowsing proxy` on a free port of 127.0.0.1 for `servers`, then `extra`.
pub fn proxy_args<'a>(servers: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["safebrowsing", "proxy", "--listen", "127.0.0.1:0"];
    args.extend(["--servers", servers.to_str().unwrap()]);
    args.extend_from_slice(extra);
    args
}

/// One HTTP/1.1 exchange with the proxy (a POST carries a protobuf body, a GET of a v4 call
/// the method override, as Firefox sends them); returns the status and the body.
pub fn http(url: &str, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let authority = url.trim_start_matches("http://");
    let extra = match method {
        "POST" => "Content-Type: application/x-protobuf\r\n",
        _ if path.starts_with("/v4/") => "X-HTTP-Method-Override: POST\r\n",
        _ => "",
    };
    http_raw(
        url,
        method,
        path,
        &format!("Host: {authority}\r\n{extra}"),
        body,
    )
}

/// One HTTP/1.1 exchange with exactly the header lines `headers` (each ending in CRLF).
pub fn http_raw(url: &str, method: &str, path: &str, headers: &str, body: &[u8]) -> (u16, Vec<u8>) {
    let authority = url.trim_start_matches("http://");
    let mut stream = std::net::TcpStream::connect(authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(20)))
        .unwrap();
    write!(
        stream,
        "{method} {path} HTTP/1.1\r\n{headers}Content-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    )
    .unwrap();
    stream.write_all(body).unwrap();
    let mut reply = Vec::new();
    stream.read_to_end(&mut reply).unwrap();
    let split = reply.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let head = String::from_utf8_lossy(&reply[..split]).into_owned();
    let status = head.split_whitespace().nth(1).unwrap().parse().unwrap();
    let mut body = reply[split + 4..].to_vec();
    if head
        .to_ascii_lowercase()
        .contains("transfer-encoding: chunked")
    {
        body = unchunk(&body);
    }
    (status, body)
}

pub fn unchunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line_end = bytes.windows(2).position(|w| w == b"\r\n").unwrap();
        let size =
            usize::from_str_radix(std::str::from_utf8(&bytes[..line_end]).unwrap().trim(), 16)
                .unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&bytes[line_end + 2..line_end + 2 + size]);
        bytes = &bytes[line_end + 4 + size..];
    }
}

/// An update of the malware list (on Linux) from `state`.
pub fn update_request(state: Vec<u8>) -> Vec<u8> {
    testing::update_request(&[(proto::MALWARE_THREAT, 2)], &state)
}

/// `fullHashes:find` at `path` for `prefixes`, POSTed to the proxy at `url`: its status and
/// body.
pub fn lookup(url: &str, path: &str, prefixes: &[&[u8]]) -> (u16, Vec<u8>) {
    http(url, "POST", path, &find_request(prefixes))
}

/// [`lookup`], which must succeed; its answer.
pub fn find(url: &str, path: &str, prefixes: &[&[u8]]) -> proto::FindFullHashesResponse {
    let (status, body) = lookup(url, path, prefixes);
    assert_eq!(status, 200);
    proto::FindFullHashesResponse::decode(&body[..]).unwrap()
}

/// [`find`] for the prefix of `listed` and an unlisted prefix: exactly `listed` matches.
pub fn finds_only(url: &str, path: &str, listed: &[u8]) {
    let found = find(url, path, &[&listed[..4], &[0xde, 0xad, 0xbe, 0xef]]);
    assert_eq!(found.matches.len(), 1);
    assert_eq!(found.matches[0].threat.as_ref().unwrap().hash, listed);
}

/// Asserts that no request body in `seen` holds a prefix or a full hash of `hashes`.
pub fn assert_nothing_of(seen: &[(usize, Vec<u8>)], host: &str, hashes: &[[u8; 32]]) {
    for (server, body) in seen {
        for hash in hashes {
            for needle in [&hash[..4], &hash[..]] {
                assert!(
                    !body.windows(needle.len()).any(|w| w == needle),
                    "server {server} was sent {} of {host}'s hash in a {}-byte request",
                    if needle.len() == 4 {
                        "the prefix"
                    } else {
                        "the whole"
                    },
                    body.len()
                );
            }
        }
    }
}

/// A relay per server, in this process: a TLS server with the server's own key that records
/// each request body it is sent and forwards it to the real server. What a relay records is
/// exactly what its server sees.
/// Request bodies the relays were sent: (server position, bytes).
pub type Seen = std::sync::Arc<std::sync::Mutex<Vec<(usize, Vec<u8>)>>>;

pub struct Relays {
    pub servers_file: PathBuf,
    seen: Seen,
    _runtimes: [tokio::runtime::Runtime; 2],
}

pub struct Relay {
    position: usize,
    upstream: pir_client::HttpsTransport,
    runtime: tokio::runtime::Handle,
    seen: Seen,
    metrics: pir_service::Metrics,
}

impl Relay {
    /// Runs `work` on the relay's runtime from a thread of its own (the caller may be
    /// inside the runtime already).
    pub fn blocking<T: Send>(&self, work: impl std::future::Future<Output = T> + Send) -> T {
        std::thread::scope(|s| {
            s.spawn(|| self.runtime.block_on(work))
                .join()
                .expect("relay thread")
        })
    }
}

impl pir_service::Handler for Relay {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<pir_service::Reply> {
        requests
            .iter()
            .map(|request| {
                self.seen
                    .lock()
                    .unwrap()
                    .push((self.position, request.to_vec()));
                match self.blocking(pir_client::Transport::exchange(
                    &self.upstream,
                    0,
                    request.to_vec(),
                    64 << 20,
                )) {
                    Ok(body) => pir_service::Reply { status: 200, body },
                    Err(_) => pir_service::Reply {
                        status: 502,
                        body: Vec::new(),
                    },
                }
            })
            .collect()
    }

    fn max_request_bytes(&self) -> usize {
        64 << 20
    }

    fn health(&self) -> String {
        "relay".into()
    }

    fn metrics(&self) -> &pir_service::Metrics {
        &self.metrics
    }

    fn hint(&self) -> Option<bytes::Bytes> {
        self.blocking(self.upstream.download(0, "/pir/v1/hint", 1 << 30))
            .ok()
            .map(bytes::Bytes::from)
    }
}

impl Relays {
    /// Relays in front of the two servers of `dir` (keys `s0.key`, `s1.key`), and a servers
    /// file naming the relays.
    pub fn start(dir: &Path, servers: &Path) -> Self {
        let runtime = tokio::runtime::Runtime::new().unwrap();
        // Forwarding runs on a runtime of its own: a relay's worker may block on it.
        let upstream = tokio::runtime::Runtime::new().unwrap();
        let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
        let text = std::fs::read_to_string(servers).unwrap();
        let urls: Vec<String> = text
            .lines()
            .filter_map(|l| l.split_whitespace().find(|w| w.starts_with("https://")))
            .map(|u| u.trim_end_matches('/').to_string())
            .collect();
        assert_eq!(urls.len(), 2, "two servers in {text}");
        let mut relayed = Vec::new();
        for (position, url) in urls.iter().enumerate() {
            let key = pir_keys::SecretKey::load(&dir.join(format!("s{position}.key"))).unwrap();
            let public = key.public();
            let relay = Relay {
                position,
                upstream: pir_client::HttpsTransport::new(&[(url.clone(), public)]).unwrap(),
                runtime: upstream.handle().clone(),
                seen: seen.clone(),
                metrics: pir_service::Metrics::default(),
            };
            let tls = pir_keys::tls::server_config(&key).unwrap();
            let mut options = pir_server::ServerOptions::new("127.0.0.1:0".parse().unwrap());
            options.workers = 1;
            let running = runtime
                .block_on(pir_server::start(std::sync::Arc::new(relay), tls, options))
                .unwrap();
            relayed.push(format!("https://{}", running.addr));
            std::mem::forget(running);
        }
        let servers_file = dir.join("relayed-servers.txt");
        self::servers_file(dir, [&relayed[0], &relayed[1]], &servers_file);
        Self {
            servers_file,
            seen,
            _runtimes: [runtime, upstream],
        }
    }

    /// Every request body the servers were sent: (server position, bytes).
    pub fn seen(&self) -> Vec<(usize, Vec<u8>)> {
        self.seen.lock().unwrap().clone()
    }
}
