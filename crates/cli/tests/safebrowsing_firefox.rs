//! REAL Firefox (Debian's firefox-esr, headless, through Marionette) through `pir safebrowsing
//! proxy` with Checklist, DPF and SinglePass: shown its phishing page for a host of uBlock
//! Origin's badware list and its malware page for one of the URLhaus list (two lists of one
//! database), while an unlisted page loads, and relays holding the servers' keys showing that
//! neither server was sent a visited host's hash prefix or full hash.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sb;
mod support;

use std::io::{Read, Write};
use std::net::TcpListener;
use std::path::{Path, PathBuf};

use sb::*;
use support::{ok, require};

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
