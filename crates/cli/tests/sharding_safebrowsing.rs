//! A sharded Safe Browsing database end to end: `pir safebrowsing build --shards 2` (and the
//! same shards built alone, one process each, with `--shard K`), each server position played by its own front end
//! (`pir front serve --server 0|1`) over its own two `pir shard serve` processes, and the
//! unchanged `pir safebrowsing proxy` through the front ends: the same list update and the
//! same verdicts (Checklist, DPF and SinglePass) as through two whole servers, as real
//! processes over HTTPS on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod sb;
mod support;

use std::path::Path;

use pir_safebrowsing::proto;
use prost::Message;
use sb::*;
use support::ok;

/// `pir keygen` of `name` in `dir`; the secret key's path.
fn keygen(dir: &Path, name: &str) -> String {
    ok(&["keygen", "--out", dir.join(name).to_str().unwrap()]);
    dir.join(format!("{name}.key"))
        .to_str()
        .unwrap()
        .to_string()
}

/// `pir safebrowsing build` of the two lists in `dir` to `out`, then `extra`.
fn build_lists(dir: &Path, out: &Path, extra: &[&str]) -> String {
    let threat = |kind: &str| format!("{kind}={}", dir.join(format!("{kind}.txt")).display());
    let (malware, phishing) = (threat("malware"), threat("phishing"));
    let mut args = vec![
        "safebrowsing",
        "build",
        "--threat",
        &malware,
        "--threat",
        &phishing,
        "--out",
        out.to_str().unwrap(),
        "--bucket-base",
        "20",
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

/// `pir shard serve` of shard `k` of `db` with a new key `name`; the process and the
/// `--shard` argument of a front end for it.
fn shard(dir: &Path, db: &Path, k: usize, name: &str) -> (Process, String) {
    let key = keygen(dir, name);
    let process = Process::start(
        &[
            "shard",
            "serve",
            "--db",
            db.to_str().unwrap(),
            "--shard",
            &k.to_string(),
            "--key",
            &key,
            "--listen",
            "127.0.0.1:0",
            // Old parts dropped within a second of a reload: a front end that still asked
            // for them would fail.
            "--retire-seconds",
            "0",
        ],
        " at ",
    );
    let arg = format!(
        "{k}={}={}",
        process.url,
        dir.join(format!("{name}.pub")).display()
    );
    (process, arg)
}

/// Server `position` of the sharded `db`: two shards of its own and a front end with the key
/// `f{position}.key`.
fn front(dir: &Path, db: &Path, position: usize) -> (Process, Vec<Process>) {
    let key = keygen(dir, &format!("f{position}"));
    let (s0, a0) = shard(dir, db, 0, &format!("p{position}s0"));
    let (s1, a1) = shard(dir, db, 1, &format!("p{position}s1"));
    let map_key = dir.join("map.pub");
    let front = Process::start(
        &[
            "front",
            "serve",
            "--db",
            db.to_str().unwrap(),
            "--map-key",
            map_key.to_str().unwrap(),
            "--server",
            &position.to_string(),
            "--shard",
            &a0,
            "--shard",
            &a1,
            "--key",
            &key,
            "--listen",
            "127.0.0.1:0",
        ],
        " at ",
    );
    (front, vec![s0, s1])
}

/// What the proxy answers for `prefixes` on the malware and phishing lists: each match's
/// threat type and hash.
fn verdicts(proxy: &str, prefixes: &[&[u8]]) -> Vec<(i32, Vec<u8>)> {
    let request = proto::FindFullHashesRequest {
        client: None,
        client_states: Vec::new(),
        threat_info: Some(proto::ThreatInfo {
            threat_types: vec![proto::MALWARE_THREAT, proto::SOCIAL_ENGINEERING],
            platform_types: vec![2],
            threat_entry_types: vec![proto::URL],
            threat_entries: prefixes
                .iter()
                .map(|prefix| proto::ThreatEntry {
                    hash: prefix.to_vec(),
                    url: String::new(),
                })
                .collect(),
        }),
    };
    let (status, body) = http(
        proxy,
        "POST",
        "/v4/fullHashes:find",
        &request.encode_to_vec(),
    );
    assert_eq!(status, 200);
    let found = proto::FindFullHashesResponse::decode(&body[..]).unwrap();
    found
        .matches
        .iter()
        .map(|m| (m.threat_type, m.threat.as_ref().unwrap().hash.clone()))
        .collect()
}

#[test]
fn the_proxy_through_front_ends_gives_the_whole_servers_verdicts() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let hosts = |prefix: &str, n: usize| -> String {
        (0..n).map(|k| format!("{prefix}{k}.example\n")).collect()
    };
    std::fs::write(d.join("malware.txt"), hosts("mal", 300)).unwrap();
    std::fs::write(d.join("phishing.txt"), hosts("phish", 120)).unwrap();
    let whole = d.join("sb.db");
    build_lists(d, &whole, &[]);
    keygen(d, "map");
    let sharded = d.join("sharded");
    let key = d.join("map.key");
    let built = build_lists(
        d,
        &sharded,
        &["--shards", "2", "--key", key.to_str().unwrap()],
    );
    assert!(built.contains("in 2 shards"), "{built}");
    assert!(built.contains("420 full hashes"), "{built}");
    // Each shard built by its own process (bounded memory): the same parts, index, state
    // and map.
    let own = d.join("own");
    for k in ["1", "0"] {
        let alone = build_lists(
            d,
            &own,
            &[
                "--shards",
                "2",
                "--shard",
                k,
                "--key",
                key.to_str().unwrap(),
            ],
        );
        assert!(alone.contains("420 full hashes"), "{alone}");
        if k == "1" {
            assert!(!own.join("shard-0.part").exists());
        }
    }
    for file in [
        "shard-0.part",
        "shard-1.part",
        "index.bin",
        "waterfall.bin",
        "shard-map.bin",
    ] {
        assert_eq!(
            std::fs::read(own.join(file)).unwrap(),
            std::fs::read(sharded.join(file)).unwrap(),
            "{file}"
        );
    }
    // --update keeps the shard count.
    let refused = support::run(&[
        "safebrowsing",
        "build",
        d.join("malware.txt").to_str().unwrap(),
        "--out",
        sharded.to_str().unwrap(),
        "--update",
        "--shards",
        "3",
        "--key",
        key.to_str().unwrap(),
    ]);
    assert!(!refused.status.success());
    let said = String::from_utf8_lossy(&refused.stderr);
    assert!(said.contains("holds 2 shards, not 3"), "{said}");
    let (_offline, _online, whole_servers) = deployment(d, &whole);
    let (front0, shards0) = front(d, &sharded, 0);
    let (front1, shards1) = front(d, &sharded, 1);
    let front_servers = d.join("fronts.txt");
    let spec = |url: &str, i: usize| format!("{url}={}", d.join(format!("f{i}.pub")).display());
    ok(&[
        "safebrowsing",
        "servers",
        "--server",
        &spec(&front0.url, 0),
        "--server",
        &spec(&front1.url, 1),
        "--out",
        front_servers.to_str().unwrap(),
    ]);

    let listed = |url: &str| pir_safebrowsing::entry_hash(url).unwrap();
    let (malware, phishing) = (
        listed("http://mal7.example/"),
        listed("http://phish99.example/"),
    );
    let unlisted = listed("http://clean.example/");
    let prefixes: Vec<&[u8]> = vec![&malware[..4], &phishing[..4], &unlisted[..4]];
    for scheme in ["checklist", "dpf", "singlepass"] {
        let through_whole = proxy_with(&whole_servers, &["--scheme", scheme]);
        let through_fronts = proxy_with(&front_servers, &["--scheme", scheme]);
        // The list as the browser gets it: byte for byte the same update.
        let update = |proxy: &str| {
            let (status, body) = http(
                proxy,
                "POST",
                "/v4/threatListUpdates:fetch",
                &update_request(Vec::new()),
            );
            assert_eq!(status, 200);
            proto::FetchThreatListUpdatesResponse::decode(&body[..]).unwrap()
        };
        assert_eq!(
            update(&through_fronts.url),
            update(&through_whole.url),
            "{scheme}"
        );
        let expected = verdicts(&through_whole.url, &prefixes);
        assert_eq!(expected.len(), 2, "{scheme}: {expected:?}");
        assert_eq!(
            verdicts(&through_fronts.url, &prefixes),
            expected,
            "{scheme}"
        );
        // Looked up again (the hint used is replaced): the same verdicts.
        assert_eq!(
            verdicts(&through_fronts.url, &prefixes),
            expected,
            "{scheme}"
        );
    }

    // The lists change: the sharded directory is updated in place, every shard replica
    // reloads, then the front ends; a new proxy through them sees version 1.
    let mut kept: String = (0..300)
        .filter(|k| !(100..110).contains(k))
        .map(|k| format!("mal{k}.example\n"))
        .collect();
    kept.push_str("newmal.example\n");
    std::fs::write(d.join("malware.txt"), kept).unwrap();
    let threat = |kind: &str| format!("{kind}={}", d.join(format!("{kind}.txt")).display());
    let updated = ok(&[
        "safebrowsing",
        "build",
        "--threat",
        &threat("malware"),
        "--out",
        sharded.to_str().unwrap(),
        "--update",
        "--shards",
        "2",
        "--key",
        key.to_str().unwrap(),
    ]);
    assert!(updated.contains("version 1"), "{updated}");
    assert!(updated.contains("1 added, 10 removed"), "{updated}");
    for shard in shards0.iter().chain(&shards1) {
        let line = shard.hangup();
        assert!(line.starts_with("reloaded: shard"), "{line}");
    }
    for front in [&front0, &front1] {
        let line = front.hangup();
        assert!(line.starts_with("reloaded: list version 1"), "{line}");
    }
    // Past the shards' retirement: the old parts are gone.
    std::thread::sleep(std::time::Duration::from_millis(1500));
    let (newmal, gone) = (
        listed("http://newmal.example/"),
        listed("http://mal105.example/"),
    );
    let prefixes: Vec<&[u8]> = vec![&newmal[..4], &gone[..4], &phishing[..4], &malware[..4]];
    for scheme in ["checklist", "dpf"] {
        let through_fronts = proxy_with(&front_servers, &["--scheme", scheme]);
        let mut found = verdicts(&through_fronts.url, &prefixes);
        found.sort();
        let mut expected = vec![
            (proto::MALWARE_THREAT, newmal.to_vec()),
            (proto::MALWARE_THREAT, malware.to_vec()),
            (proto::SOCIAL_ENGINEERING, phishing.to_vec()),
        ];
        expected.sort();
        assert_eq!(found, expected, "{scheme}");
    }
}
