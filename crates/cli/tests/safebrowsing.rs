//! `pir safebrowsing`: a list built, both servers and the proxy started as real processes on
//! 127.0.0.1, the proxy driven with Safe Browsing v4 messages (as Firefox sends them), its state
//! reused after a restart, the list updated under running servers (SIGHUP) and the browser
//! brought up to date with a partial update; and REAL Firefox (Debian's firefox-esr, headless, through
//! Marionette), through the proxy with Checklist and with DPF, shown its phishing page for a
//! host of uBlock Origin's badware list and its malware page for one of the URLhaus list
//! (two lists of one database), while an unlisted page loads, and relays holding the servers'
//! keys showing that neither server was sent a visited host's hash prefix or full hash.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};

use base64ct::Encoding;
use pir_safebrowsing::proto;
use pir_safebrowsing::testing::{self, find_request};
use prost::Message;
use support::{ok, pir, require};

/// A `pir` child process, killed on drop, with the URL it printed.
struct Process {
    child: Child,
    url: String,
    lines: Vec<String>,
}

impl Process {
    /// Starts `pir ARGS` and reads its output until a line holds `marker` followed by a URL.
    fn start(args: &[&str], marker: &str) -> Self {
        let mut command = pir();
        command.args(args);
        Self::spawn(command, args, marker)
    }

    /// [`Process::start`] under a soft open-file limit of `open_files` (`ulimit -n`).
    fn start_limited(args: &[&str], marker: &str, open_files: u32) -> Self {
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

    fn spawn(mut command: std::process::Command, args: &[&str], marker: &str) -> Self {
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
                let err = support::read_stderr(&mut child);
                panic!("pir {args:?} stopped before {marker:?}: {lines:?} {err}");
            };
            lines.push(line.clone());
            if let Some(rest) = line.split(marker).nth(1) {
                let url = rest.split_whitespace().next().unwrap();
                break url.trim_end_matches("/v4/").to_string();
            }
        };
        // Keep draining stdout so the child never blocks on a full pipe.
        std::thread::spawn(move || for _ in reader.by_ref() {});
        Self { child, url, lines }
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
fn serve(dir: &Path, db: &Path, position: usize, listen: &str) -> Process {
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
fn servers_file(dir: &Path, urls: [&str; 2], out: &Path) {
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
fn deployment(dir: &Path, db: &Path) -> (Process, Process, PathBuf) {
    let offline = serve(dir, db, 0, "127.0.0.1:0");
    let online = serve(dir, db, 1, "127.0.0.1:0");
    let file = dir.join("servers.txt");
    servers_file(dir, [&offline.url, &online.url], &file);
    (offline, online, file)
}

/// Writes `list.txt` of `hosts` host names `host{k}.evil.example` into `dir` and builds
/// `sb.db` from it, `extra` flags appended; returns the database.
fn hosts_db(dir: &Path, hosts: usize, extra: &[&str]) -> PathBuf {
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
fn build(list: &Path, db: &Path, extra: &[&str]) -> String {
    let args = ["safebrowsing", "build", list.to_str().unwrap(), "--out"];
    ok(&[&args[..], &[db.to_str().unwrap()], extra].concat())
}

fn proxy(servers: &Path) -> Process {
    proxy_with(servers, &[])
}

fn proxy_with(servers: &Path, extra: &[&str]) -> Process {
    Process::start(&proxy_args(servers, extra), "proxy at ")
}

/// `pir safebrowsing proxy` on a free port of 127.0.0.1 for `servers`, then `extra`.
fn proxy_args<'a>(servers: &'a Path, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["safebrowsing", "proxy", "--listen", "127.0.0.1:0"];
    args.extend(["--servers", servers.to_str().unwrap()]);
    args.extend_from_slice(extra);
    args
}

/// One HTTP/1.1 exchange with the proxy (a POST carries a protobuf body, a GET of a v4 call
/// the method override, as Firefox sends them); returns the status and the body.
fn http(url: &str, method: &str, path: &str, body: &[u8]) -> (u16, Vec<u8>) {
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
fn http_raw(url: &str, method: &str, path: &str, headers: &str, body: &[u8]) -> (u16, Vec<u8>) {
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

fn unchunk(mut bytes: &[u8]) -> Vec<u8> {
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
fn update_request(state: Vec<u8>) -> Vec<u8> {
    testing::update_request(&[(proto::MALWARE_THREAT, 2)], &state)
}

/// `fullHashes:find` at `path` for `prefixes`, POSTed to the proxy at `url`: its status and
/// body.
fn lookup(url: &str, path: &str, prefixes: &[&[u8]]) -> (u16, Vec<u8>) {
    http(url, "POST", path, &find_request(prefixes))
}

/// [`lookup`], which must succeed; its answer.
fn find(url: &str, path: &str, prefixes: &[&[u8]]) -> proto::FindFullHashesResponse {
    let (status, body) = lookup(url, path, prefixes);
    assert_eq!(status, 200);
    proto::FindFullHashesResponse::decode(&body[..]).unwrap()
}

/// [`find`] for the prefix of `listed` and an unlisted prefix: exactly `listed` matches.
fn finds_only(url: &str, path: &str, listed: &[u8]) {
    let found = find(url, path, &[&listed[..4], &[0xde, 0xad, 0xbe, 0xef]]);
    assert_eq!(found.matches.len(), 1);
    assert_eq!(found.matches[0].threat.as_ref().unwrap().hash, listed);
}

#[test]
fn the_proxy_speaks_v4_and_keeps_its_hints_across_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let list = dir.path().join("list.txt");
    let mut text = String::from("# test list\n");
    for k in 0..500 {
        text.push_str(&format!("host{k}.evil.example\n"));
    }
    text.push_str("||download.evil.example/payload.exe^$all\nhttp://\n");
    std::fs::write(&list, text).unwrap();
    let db = dir.path().join("sb.db");
    // Level-0 buckets of 20 records: buckets below 80 are looked up by DPF.
    let built = build(&list, &db, &["--bucket-base", "20"]);
    assert!(built.contains("501 full hashes"), "{built}");
    assert!(built.contains("1 bucket(s) of 501 records"), "{built}");
    assert!(built.contains("skipped 1 lines"), "{built}");
    let (offline, online, servers) = deployment(dir.path(), &db);
    let proxy = proxy_with(&servers, &["--refresh-seconds", "1"]);
    assert!(
        proxy.lines[0].contains("1 by Checklist (hints for 501 records downloaded"),
        "{:?}",
        proxy.lines
    );

    // threatListUpdates:fetch, as Firefox sends it: GET with the message in $req.
    let req = base64ct::Base64Url::encode_string(&update_request(Vec::new()));
    let path = format!("/v4/threatListUpdates:fetch?$ct=application/x-protobuf&key=pir&$httpMethod=POST&$req={req}");
    let (status, body) = http(&proxy.url, "GET", &path, b"");
    assert_eq!(status, 200);
    let update = proto::FetchThreatListUpdatesResponse::decode(&body[..]).unwrap();
    let list_update = &update.list_update_responses[0];
    assert_eq!(list_update.response_type, proto::FULL_UPDATE);
    let raw = &list_update.additions[0]
        .raw_hashes
        .as_ref()
        .unwrap()
        .raw_hashes;
    assert_eq!(raw.len(), 501 * 4);
    assert_eq!(
        list_update.checksum.as_ref().unwrap().sha256,
        pir_keys::sha256(raw)
    );

    // fullHashes:find for a listed URL's prefix and for an unlisted one (POST body this time).
    let listed = pir_safebrowsing::entry_hash("http://download.evil.example/payload.exe").unwrap();
    finds_only(
        &proxy.url,
        "/v4/fullHashes:find?$ct=application/x-protobuf",
        &listed,
    );
    let (status, _) = http(&proxy.url, "POST", "/v4/fullHashes:find", b"\xff\xff\xff");
    assert_eq!(status, 400);
    let (_, status_body) = http(&proxy.url, "GET", "/status", b"");
    let status_text = String::from_utf8(status_body).unwrap();
    assert!(
        status_text.contains("updates 1\nlookups 1\n"),
        "{status_text}"
    );

    // The list changes: five hosts leave, three arrive. The servers reload on SIGHUP; the
    // proxy notices the new version, needs no new hints (the new bucket is small: DPF), and
    // brings the browser up to date with a partial update that checks out.
    let mut text = String::new();
    for k in 5..500 {
        text.push_str(&format!("host{k}.evil.example\n"));
    }
    text.push_str("download.evil.example/payload.exe\nnew1.example\nnew2.example\nnew3.example\n");
    std::fs::write(&list, text).unwrap();
    let updated = build(&list, &db, &["--update"]);
    assert!(updated.contains("version 1"), "{updated}");
    assert!(updated.contains("3 added, 5 removed"), "{updated}");
    assert!(updated.contains("hints for 0 records"), "{updated}");
    assert!(updated.contains("looks up 3 by DPF"), "{updated}");
    for server in [&offline, &online] {
        let hup = std::process::Command::new("kill")
            .args(["-HUP", &server.child.id().to_string()])
            .status()
            .unwrap();
        assert!(hup.success());
    }
    let mut refreshed = String::new();
    for _ in 0..60 {
        let (_, body) = http(&proxy.url, "GET", "/status", b"");
        refreshed = String::from_utf8(body).unwrap();
        if refreshed.contains("version 1\n") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    }
    assert!(refreshed.contains("version 1\nbuckets 2\n"), "{refreshed}");
    assert!(refreshed.contains("checklist_buckets 1\n"), "{refreshed}");
    assert!(refreshed.contains("hinted_records 501\n"), "{refreshed}");
    let old_state = list_update.new_client_state.clone();
    let (status, body) = http(
        &proxy.url,
        "POST",
        "/v4/threatListUpdates:fetch",
        &update_request(old_state),
    );
    assert_eq!(status, 200);
    let partial = proto::FetchThreatListUpdatesResponse::decode(&body[..]).unwrap();
    let partial = &partial.list_update_responses[0];
    assert_eq!(partial.response_type, proto::PARTIAL_UPDATE);
    let mut prefixes: Vec<[u8; 4]> = raw.chunks_exact(4).map(|c| c.try_into().unwrap()).collect();
    let removals = &partial.removals[0].raw_indices.as_ref().unwrap().indices;
    assert_eq!(removals.len(), 5);
    for &i in removals.iter().rev() {
        prefixes.remove(i as usize);
    }
    let added = &partial.additions[0].raw_hashes.as_ref().unwrap().raw_hashes;
    assert_eq!(added.len(), 3 * 4);
    prefixes.extend(
        added
            .chunks_exact(4)
            .map(|c| <[u8; 4]>::try_from(c).unwrap()),
    );
    prefixes.sort_unstable();
    assert_eq!(
        partial.checksum.as_ref().unwrap().sha256,
        pir_keys::sha256(&prefixes.concat())
    );
    // A new host is found (in the DPF bucket), a removed one no longer.
    let new = pir_safebrowsing::entry_hash("new2.example").unwrap();
    let gone = pir_safebrowsing::entry_hash("host3.evil.example").unwrap();
    let found = find(
        &proxy.url,
        "/v4/fullHashes:find",
        &[&new[..4], &gone[..4], &listed[..4]],
    );
    let hashes: Vec<&[u8]> = found
        .matches
        .iter()
        .map(|m| m.threat.as_ref().unwrap().hash.as_slice())
        .collect();
    assert_eq!(hashes, vec![&new[..], &listed[..]]);
    drop(proxy);

    // A restart loads the saved hints instead of downloading them, and still answers.
    let proxy = self::proxy(&servers);
    assert!(
        proxy.lines[0].contains("hints for 0 records downloaded"),
        "{:?}",
        proxy.lines
    );
    let found = find(&proxy.url, "/v4/fullHashes:find", &[&listed[..4]]);
    assert_eq!(found.matches.len(), 1);
    drop(proxy);

    // The same lookups by DPF: no hints, the same answers.
    let proxy = proxy_with(&servers, &["--scheme", "dpf"]);
    assert!(
        proxy.lines[0].contains("0 by Checklist"),
        "{:?}",
        proxy.lines
    );
    finds_only(&proxy.url, "/v4/fullHashes:find", &listed);
    drop(proxy);

    // The same lookups by SinglePass: hints made by the offline server in one pass (replacing
    // the Checklist state), the same answers, and the hints kept across a restart.
    let proxy = proxy_with(&servers, &["--scheme", "singlepass"]);
    let line = &proxy.lines[0];
    assert!(line.contains("1 by SinglePass (hints for "), "{line}");
    assert!(!line.contains("hints for 0 records"), "{line}");
    finds_only(&proxy.url, "/v4/fullHashes:find", &listed);
    drop(proxy);
    let proxy = proxy_with(&servers, &["--scheme", "singlepass"]);
    let line = &proxy.lines[0];
    assert!(
        line.contains("by SinglePass (hints for 0 records"),
        "{line}"
    );
    finds_only(&proxy.url, "/v4/fullHashes:find", &listed);
}

/// Each scheme's lookups through recording relays: the listed host is found, and neither
/// server is ever sent its hash prefix or full hash (the relays hold the servers' keys and
/// record every request body as the server sees it).
#[test]
fn the_servers_never_see_a_looked_up_prefix_under_any_scheme() {
    let dir = tempfile::tempdir().unwrap();
    let db = hosts_db(dir.path(), 300, &["--bucket-base", "20"]);
    let (_offline, _online, servers) = deployment(dir.path(), &db);
    let relays = Relays::start(dir.path(), &servers);
    let listed = pir_safebrowsing::entry_hash("host7.evil.example").unwrap();
    for scheme in ["singlepass", "checklist", "dpf"] {
        let proxy = proxy_with(&relays.servers_file, &["--scheme", scheme]);
        finds_only(&proxy.url, "/v4/fullHashes:find", &listed);
    }
    let seen = relays.seen();
    assert!(seen.iter().any(|(server, _)| *server == 1), "no lookups");
    for (server, body) in &seen {
        for needle in [&listed[..4], &listed[..]] {
            assert!(
                !body.windows(needle.len()).any(|w| w == needle),
                "server {server} was sent {} bytes of the hash in a {}-byte request",
                needle.len(),
                body.len()
            );
        }
    }
}

/// What a web page (DNS rebinding, `no-cors` requests) or another local process (an idle
/// flood, a `100 Continue` never followed by its body) can send the proxy, against a proxy
/// whose open-file limit (256) is below the flood: each refused or cut off, and the browser's
/// own requests still answered.
#[test]
fn the_proxy_refuses_web_pages_and_outlasts_local_floods() {
    let dir = tempfile::tempdir().unwrap();
    let db = hosts_db(dir.path(), 200, &[]);
    let (_offline, _online, servers) = deployment(dir.path(), &db);
    let proxy = Process::start_limited(&proxy_args(&servers, &[]), "proxy at ", 256);
    let authority = proxy.url.trim_start_matches("http://").to_string();
    let port = authority.rsplit(':').next().unwrap().to_string();
    let local = format!("Host: {authority}\r\n");
    let update = update_request(Vec::new());
    let req = base64ct::Base64Url::encode_string(&update);
    let firefox_path = format!(
        "/v4/threatListUpdates:fetch?$ct=application/x-protobuf&key=pir&$httpMethod=POST&$req={req}"
    );

    // DNS rebinding: the page's own name, pointed at 127.0.0.1.
    let rebound = format!("Host: evil.example:{port}\r\nX-HTTP-Method-Override: POST\r\n");
    assert_eq!(http_raw(&proxy.url, "GET", "/status", &rebound, b"").0, 421);
    assert_eq!(
        http_raw(&proxy.url, "GET", &firefox_path, &rebound, b"").0,
        421
    );
    // What a no-cors fetch can send: a text/plain POST, a GET without the method override.
    let plain = format!("{local}Content-Type: text/plain\r\n");
    let (status, _) = http_raw(
        &proxy.url,
        "POST",
        "/v4/threatListUpdates:fetch",
        &plain,
        &update,
    );
    assert_eq!(status, 415);
    assert_eq!(
        http_raw(&proxy.url, "GET", &firefox_path, &local, b"").0,
        403
    );
    // Amplification: one list asked for 4,000 times in one request.
    let repeated = proto::FetchThreatListUpdatesRequest {
        client: None,
        list_update_requests: (0..4000)
            .map(|k| proto::ListUpdateRequest {
                threat_type: proto::MALWARE_THREAT,
                platform_type: k % 4,
                threat_entry_type: proto::URL,
                state: Vec::new(),
            })
            .collect(),
    }
    .encode_to_vec();
    let (status, body) = http(&proxy.url, "POST", "/v4/threatListUpdates:fetch", &repeated);
    assert_eq!(status, 400);
    assert!(body.len() < 200, "{} bytes", body.len());
    let (_, status_body) = http(&proxy.url, "GET", "/status", b"");
    let status_text = String::from_utf8(status_body).unwrap();
    assert!(status_text.starts_with("updates 0\n"), "{status_text}");

    // A 100 Continue whose body never comes is cut off (body timeout: 10 s).
    let mut stream = std::net::TcpStream::connect(&authority).unwrap();
    stream
        .set_read_timeout(Some(std::time::Duration::from_secs(30)))
        .unwrap();
    write!(
        stream,
        "POST /v4/fullHashes:find HTTP/1.1\r\n{local}Content-Type: application/x-protobuf\r\n\
         Content-Length: 10\r\nExpect: 100-continue\r\n\r\n"
    )
    .unwrap();
    let mut reply = Vec::new();
    stream
        .read_to_end(&mut reply)
        .expect("the connection is closed, not held");
    let reply = String::from_utf8_lossy(&reply);
    assert!(
        reply.contains("100 Continue") && reply.contains(" 408 "),
        "{reply}"
    );

    // An idle flood larger than the proxy's open-file limit: the browser is still answered,
    // lookups included (they need descriptors for the servers' connections).
    let flood: Vec<std::net::TcpStream> = (0..400)
        .map(|_| std::net::TcpStream::connect(&authority).unwrap())
        .collect();
    std::thread::sleep(std::time::Duration::from_millis(500));
    let (status, body) = http(&proxy.url, "GET", &firefox_path, b"");
    assert_eq!(status, 200);
    let answer = proto::FetchThreatListUpdatesResponse::decode(&body[..]).unwrap();
    assert_eq!(answer.list_update_responses.len(), 1);
    let listed = pir_safebrowsing::entry_hash("host9.evil.example").unwrap();
    let found = find(&proxy.url, "/v4/fullHashes:find", &[&listed[..4]]);
    assert_eq!(found.matches.len(), 1);
    drop(flood);
}

/// A file uBlock Origin ships in Debian (`webext-ublock-origin-firefox`): `urlhaus-filter-online.txt`
/// (URLhaus: malware hosts) or `badware.min.txt` (scam and deceptive sites).
fn ublock_list(name: &str) -> Option<PathBuf> {
    let root = Path::new("/usr/share/mozilla/extensions");
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).ok()?.flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else if path.file_name().is_some_and(|n| n == name) {
                return Some(path);
            }
        }
    }
    None
}

/// The first bare host name (not an IP address) of a list that `avoid` does not hold.
fn first_host(list: &Path, avoid: &str) -> String {
    let text = std::fs::read_to_string(list).unwrap();
    let avoid: Vec<&str> = avoid
        .lines()
        .filter_map(pir_safebrowsing::list::entry_of)
        .collect();
    text.lines()
        .filter_map(pir_safebrowsing::list::entry_of)
        .find(|e| {
            !e.contains(['/', ',', '#', ' '])
                && e.contains('.')
                && e.chars().any(|c| c.is_ascii_alphabetic())
                && !avoid.contains(e)
        })
        .expect("a host in the list")
        .to_string()
}

/// Serves one HTML page on 127.0.0.1 (the unlisted site Firefox must load).
fn page_server() -> String {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten().take(50) {
            let mut stream = stream;
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let page = "<html><head><title>fine</title></head><body>not listed</body></html>";
            let _ = write!(
                stream,
                "HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{page}",
                page.len()
            );
        }
    });
    format!("http://{addr}/fine.html")
}

/// Whether real Firefox can be driven here (skips outside CI with how to install what lacks).
fn firefox_available(lists: &[Option<PathBuf>]) -> bool {
    require(
        lists.iter().all(Option::is_some),
        "the URLhaus and badware lists of uBlock Origin",
        "apt-get install webext-ublock-origin-firefox",
    ) && require(
        support::has_program("firefox-esr"),
        "firefox-esr",
        "apt-get install firefox-esr",
    ) && require(
        std::process::Command::new("python3")
            .args(["-c", "import marionette_driver"])
            .output()
            .is_ok_and(|o| o.status.success()),
        "the marionette-driver Python package",
        "python3 -m pip install -r clients/firefox/requirements.txt",
    )
}

/// Firefox, through a proxy using `scheme`, on `blocked` (`(page, host)`: the listed host must
/// end on `about:blocked?e=PAGE`) and on an unlisted page, which must load.
fn firefox_through_proxy(dir: &Path, servers: &Path, scheme: &str, blocked: &[(&str, &str)]) {
    let proxy = proxy_with(servers, &["--scheme", scheme]);
    let printed = proxy.lines.join("\n");
    assert!(
        printed.contains("missing unwanted goog-unwanted-proto: no source"),
        "the proxy says which lists it lacks: {printed}"
    );
    let (_, health) = http(&proxy.url, "GET", "/health", b"");
    let health = String::from_utf8(health).unwrap();
    assert!(
        health.contains("list phishing goog-phish-proto: "),
        "{health}"
    );
    assert!(
        health.contains("missing download goog-badbinurl-proto"),
        "{health}"
    );
    let profile = dir.join(format!("profile-{scheme}"));
    ok(&[
        "safebrowsing",
        "firefox-profile",
        "--proxy",
        &proxy.url,
        "--out",
        profile.to_str().unwrap(),
    ]);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../clients/firefox/check_safebrowsing.py");
    let mut command = std::process::Command::new("python3");
    command
        .arg(script)
        .args(["--profile", profile.to_str().unwrap()])
        .args(["--proxy", &proxy.url]);
    for (page, host) in blocked {
        command.args(["--blocked", &format!("{page}=http://{host}/")]);
    }
    let out = command
        .args(["--allowed", &page_server()])
        .args(["--port", &port.to_string()])
        .output()
        .expect("run the Marionette script");
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "Firefox did not behave ({scheme}): {report}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(report.contains("\"ok\": true"), "{report}");
    for (page, _) in blocked {
        assert!(report.contains(&format!("e={page}")), "{report}");
    }
    let (_, status) = http(&proxy.url, "GET", "/status", b"");
    let status = String::from_utf8(status).unwrap();
    // Firefox fetched the lists and asked for the full hashes of the blocked hosts' prefixes:
    // private lookups, the prefixes never sent to a server.
    assert!(!status.contains("lookups 0\n"), "{status}");
}

#[test]
fn real_firefox_shows_the_phishing_and_malware_pages_and_loads_another() {
    let lists = [
        ublock_list("urlhaus-filter-online.txt"),
        ublock_list("badware.min.txt"),
    ];
    if !firefox_available(&lists) {
        return;
    }
    let [Some(malware), Some(phishing)] = lists else {
        unreachable!("checked above")
    };
    // A real entry of each list; the phishing host is on no malware list.
    let malware_host = first_host(&malware, "");
    let phishing_host = first_host(&phishing, &std::fs::read_to_string(&malware).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("sb.db");
    let printed = ok(&[
        "safebrowsing",
        "build",
        "--threat",
        &format!("malware={}", malware.display()),
        "--threat",
        &format!("phishing={}", phishing.display()),
        "--out",
        db.to_str().unwrap(),
    ]);
    assert!(printed.contains("no source for unwanted"), "{printed}");
    let (_offline, _online, servers) = deployment(dir.path(), &db);
    // The proxy talks to the servers through relays that hold the servers' own keys: each
    // relay sees, decrypted, every byte its server is sent, and keeps a copy.
    let relays = Relays::start(dir.path(), &servers);
    let blocked = [
        ("deceptiveBlocked", phishing_host.as_str()),
        ("malwareBlocked", malware_host.as_str()),
    ];
    for scheme in ["checklist", "dpf", "singlepass"] {
        firefox_through_proxy(dir.path(), &relays.servers_file, scheme, &blocked);
    }
    let seen = relays.seen();
    assert!(
        seen.iter().any(|(server, _)| *server == 1),
        "the online server was asked nothing: {} requests",
        seen.len()
    );
    for (_, host) in blocked {
        let hashes = pir_safebrowsing::url::full_hashes(&format!("http://{host}/")).unwrap();
        let entry = pir_safebrowsing::url::entry_hash(host).unwrap();
        assert!(
            hashes.contains(&entry),
            "the host's own expression is the listed one"
        );
        assert_nothing_of(&seen, host, &hashes);
    }
}

/// Asserts that no request body in `seen` holds a prefix or a full hash of `hashes`.
fn assert_nothing_of(seen: &[(usize, Vec<u8>)], host: &str, hashes: &[[u8; 32]]) {
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
type Seen = std::sync::Arc<std::sync::Mutex<Vec<(usize, Vec<u8>)>>>;

struct Relays {
    servers_file: PathBuf,
    seen: Seen,
    _runtimes: [tokio::runtime::Runtime; 2],
}

struct Relay {
    position: usize,
    upstream: pir_client::HttpsTransport,
    runtime: tokio::runtime::Handle,
    seen: Seen,
    metrics: pir_service::Metrics,
}

impl Relay {
    /// Runs `work` on the relay's runtime from a thread of its own (the caller may be
    /// inside the runtime already).
    fn blocking<T: Send>(&self, work: impl std::future::Future<Output = T> + Send) -> T {
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
    fn start(dir: &Path, servers: &Path) -> Self {
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
    fn seen(&self) -> Vec<(usize, Vec<u8>)> {
        self.seen.lock().unwrap().clone()
    }
}

/// The online server goes down and comes back on its address: lookups meanwhile fail with an
/// error (the proxy keeps serving), and afterwards they succeed again.
#[test]
fn the_proxy_survives_a_restart_of_the_online_server() {
    let dir = tempfile::tempdir().unwrap();
    let db = hosts_db(dir.path(), 300, &["--bucket-base", "20"]);
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = ["127.0.0.1:0".to_string(), format!("127.0.0.1:{port}")];
    let start = |position: usize| serve(dir.path(), &db, position, &listen[position]);
    let offline = start(0);
    let online = start(1);
    let servers = dir.path().join("servers.txt");
    servers_file(dir.path(), [&offline.url, &online.url], &servers);
    let proxy = proxy(&servers);
    let listed = pir_safebrowsing::entry_hash("host7.evil.example").unwrap();
    let find = || {
        lookup(
            &proxy.url,
            "/v4/fullHashes:find?$ct=application/x-protobuf",
            &[&listed[..4]],
        )
    };
    let matches = |body: &[u8]| {
        proto::FindFullHashesResponse::decode(body)
            .unwrap()
            .matches
            .len()
    };
    let (status, body) = find();
    assert_eq!((status, matches(&body)), (200, 1));

    drop(online); // killed
    let (status, _) = find();
    assert_ne!(status, 200, "a lookup with the online server down");
    let (status, _) = http(&proxy.url, "GET", "/status", b"");
    assert_eq!(status, 200, "the proxy keeps serving");

    let _online = start(1);
    let (status, body) = find();
    assert_eq!((status, matches(&body)), (200, 1), "after the restart");
}
