//! `pir safebrowsing`: a list built, both servers and the proxy started as real processes on
//! 127.0.0.1, the proxy driven with Safe Browsing v4 messages (as Firefox sends them), its state
//! reused after a restart, the list updated under running servers (SIGHUP) and the browser
//! brought up to date with a partial update; relays holding the servers' keys show that neither
//! server was sent a looked-up prefix. Real Firefox is in `safebrowsing_firefox.rs`.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sb;
mod support;

use std::io::{Read, Write};
use std::net::TcpListener;

use base64ct::Encoding;

use pir_safebrowsing::proto;
use prost::Message;
use sb::*;

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
