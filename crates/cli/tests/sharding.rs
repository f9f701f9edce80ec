//! Sharded serving end to end: `pir db build --shards 2`, two replicas of each shard
//! (`pir shard serve`), a front end (`pir front serve`) and the unchanged `pir get` against
//! it, as real processes over HTTPS on 127.0.0.1; replicas killed one, then two.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use support::{fails_with, get_record, ok, run, Proc, Scratch};

/// `pir shard serve` of shard `k` of `dir` with `key` on a free port.
fn shard(dir: &str, k: usize, key: &str) -> Proc {
    Proc::start(
        &[
            "shard",
            "serve",
            "--db",
            dir,
            "--shard",
            &k.to_string(),
            "--key",
            key,
            "--listen",
            "127.0.0.1:0",
        ],
        "https://",
    )
}

#[test]
fn two_shards_of_two_replicas_behind_a_front_end() {
    let scratch = Scratch::with_keys(&["front", "s0a", "s0b", "s1a", "s1b", "map"]);
    let p = |n: &str| scratch.path(n);
    // 2,000 records of 5 bytes, the last one 2 bytes short.
    let data: Vec<u8> = (0..2000 * 5 - 2).map(|i| (i * 37 % 253) as u8).collect();
    std::fs::write(p("records.bin"), &data).unwrap();
    let dir = p("sharded");
    let built = ok(&[
        "db",
        "build",
        "--records",
        &p("records.bin"),
        "--record-size",
        "5",
        "--shards",
        "2",
        "--key",
        &p("map.key"),
        "--out",
        &dir,
    ]);
    assert!(built.contains("in 2 shards"), "{built}");
    assert!(
        std::fs::metadata(format!("{dir}/shard-0.part"))
            .unwrap()
            .len()
            < data.len() as u64
    );

    let mut replicas = vec![
        (0, "s0a", shard(&dir, 0, &p("s0a.key"))),
        (0, "s0b", shard(&dir, 0, &p("s0b.key"))),
        (1, "s1a", shard(&dir, 1, &p("s1a.key"))),
        (1, "s1b", shard(&dir, 1, &p("s1b.key"))),
    ];
    let mut args: Vec<String> = ["front", "serve", "--db", &dir, "--map-key", &p("map.pub")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (k, name, process) in &replicas {
        args.push("--shard".into());
        args.push(format!(
            "{k}={}={}",
            process.url(),
            p(&format!("{name}.pub"))
        ));
    }
    args.extend(
        [
            "--key",
            &p("front.key"),
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ]
        .map(String::from),
    );
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let front = Proc::start(&args, "https://");
    // The privacy and signal lines, then the admin listener's.
    let admin_line = (0..3)
        .map(|_| front.next_line())
        .find(|line| line.starts_with("admin"))
        .expect("the admin listener's line");
    let admin = admin_line
        .split("http://")
        .nth(1)
        .and_then(|rest| rest.split('/').next())
        .unwrap_or_else(|| panic!("no admin address in {admin_line}"))
        .to_string();
    let (status, health) = plain_get(&admin, "/health");
    assert_eq!(status, 200, "{health}");
    assert!(health.contains("covered=2/2"), "{health}");
    let server = format!("{}={}", front.url(), p("front.pub"));
    let cache = p("cache");
    let get = |index: usize| get_record(&server, &cache, index);
    let expect = |index: usize| data[index * 5..((index + 1) * 5).min(data.len())].to_vec();

    for index in [0, 999, 1000, 1337, 1999] {
        let out = get(index);
        assert!(out.status.success(), "{index}: {out:?}");
        assert_eq!(out.stdout, expect(index), "record {index}");
    }

    // One replica of shard 0 gone: queries still work (the other replica answers).
    drop(replicas.remove(0));
    for index in [3, 1500] {
        let out = get(index);
        assert!(out.status.success(), "{index}: {out:?}");
        assert_eq!(out.stdout, expect(index), "record {index}");
    }

    // Both replicas of shard 1 gone: the query fails, naming the shard.
    replicas.retain(|(k, _, _)| *k != 1);
    let out = get(42);
    fails_with(&out, "shard 1 has no live replica");
    // The failures and the probes show on /health (503: a readiness probe takes the front
    // end out) and /metrics; /health/live still answers 200.
    let mut waited = 0;
    let health = loop {
        // The front end probes every replica every 2 s.
        let (status, health) = plain_get(&admin, "/health");
        if (status == 503 && health.contains("shard 0 live=1/2")) || waited > 100 {
            assert_eq!(status, 503, "{health}");
            break health;
        }
        waited += 1;
        std::thread::sleep(std::time::Duration::from_millis(100));
    };
    assert!(health.starts_with("unready front "), "{health}");
    assert!(
        health.contains("shard 1 live=0/2 (no live replica)"),
        "{health}"
    );
    assert!(health.contains("shard 0 live=1/2"), "{health}");
    assert_eq!(plain_get(&admin, "/health/live").0, 200);
    let (_, metrics) = plain_get(&admin, "/metrics");
    assert!(
        metrics.contains("pir_shard_unavailable_total{shard=\"1\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("pir_shard_seconds_count{shard=\"0\"}"),
        "{metrics}"
    );
    drop(front);
}

/// `GET path` over plain HTTP at `addr`: the status and the body.
fn plain_get(addr: &str, path: &str) -> (u16, String) {
    use std::io::{Read, Write};
    let mut stream = std::net::TcpStream::connect(addr).unwrap();
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    stream.read_to_string(&mut reply).unwrap();
    let status = reply
        .split_whitespace()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0);
    let body = reply.split_once("\r\n\r\n").map_or("", |(_, b)| b);
    (status, body.to_string())
}

#[test]
fn a_front_end_refuses_a_map_signed_by_another_key() {
    let scratch = Scratch::with_keys(&["front", "s0", "other"]);
    let p = |n: &str| scratch.path(n);
    std::fs::write(p("records.bin"), vec![7u8; 400]).unwrap();
    let dir = p("sharded");
    ok(&[
        "db",
        "build",
        "--records",
        &p("records.bin"),
        "--record-size",
        "4",
        "--shards",
        "1",
        "--out",
        &dir,
    ]);
    let out = run(&[
        "front",
        "serve",
        "--db",
        &dir,
        "--map-key",
        &p("other.pub"),
        "--shard",
        &format!("0=https://127.0.0.1:9={}", p("s0.pub")),
        "--key",
        &p("front.key"),
        "--listen",
        "127.0.0.1:0",
    ]);
    fails_with(&out, "signed by");
}

/// DoublePIR shards (`pir db build --shards 3 --scheme doublepir`: ranges of the matrix's
/// rows, here cutting records between their pieces) behind a front end: `pir get` gives the
/// records, and the front end serves DoublePIR.
#[test]
fn double_pir_shards_behind_a_front_end() {
    let scratch = Scratch::with_keys(&["front", "s0", "s1", "s2", "map"]);
    let p = |n: &str| scratch.path(n);
    // 3,000 records of 4 bytes, the last one 1 byte short.
    let data: Vec<u8> = (0..3000 * 4 - 1).map(|i| (i * 41 % 251) as u8).collect();
    std::fs::write(p("records.bin"), &data).unwrap();
    let dir = p("sharded");
    let built = ok(&[
        "db",
        "build",
        "--records",
        &p("records.bin"),
        "--record-size",
        "4",
        "--shards",
        "3",
        "--scheme",
        "doublepir",
        "--key",
        &p("map.key"),
        "--out",
        &dir,
    ]);
    assert!(built.contains("in 3 shards"), "{built}");
    assert!(built.contains("shard 2: matrix rows"), "{built}");
    assert!(built.contains("served by: doublepir"), "{built}");
    let (_shards, front, server) = front_over(&dir, 3, &p);
    for index in [0usize, 1234, 2999] {
        let out = get_record(&server, &p("cache"), index);
        assert!(out.status.success(), "{index}: {out:?}");
        let expect = &data[index * 4..((index + 1) * 4).min(data.len())];
        assert_eq!(out.stdout, expect, "record {index}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("doublepir"), "{err}");
    }
    drop(front);
}

/// YPIR shards (`pir db build --shards 2 --scheme ypir`: whole row groups of the matrix)
/// behind a front end that keeps the clients' keys and runs the packing: `pir get` gives the
/// records (each `pir get` uploads its keys to the front end, never to a shard).
#[test]
fn ypir_shards_behind_a_front_end() {
    let scratch = Scratch::with_keys(&["front", "s0", "s1", "map"]);
    let p = |n: &str| scratch.path(n);
    let data: Vec<u8> = (0..3000).map(|i| (i * 37 % 253) as u8).collect();
    std::fs::write(p("records.bin"), &data).unwrap();
    let dir = p("sharded");
    let built = ok(&[
        "db",
        "build",
        "--records",
        &p("records.bin"),
        "--record-size",
        "1",
        "--shards",
        "2",
        "--scheme",
        "ypir",
        "--key",
        &p("map.key"),
        "--out",
        &dir,
    ]);
    assert!(built.contains("shard 1: matrix rows"), "{built}");
    assert!(built.contains("served by: ypir"), "{built}");
    let (_shards, front, server) = front_over(&dir, 2, &p);
    for index in [0usize, 1234, 2999] {
        let out = get_record(&server, &p("cache"), index);
        assert!(out.status.success(), "{index}: {out:?}");
        assert_eq!(out.stdout, [data[index]], "record {index}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("ypir"), "{err}");
    }
    drop(front);
}

/// `n` shard servers of `dir` (keys `sK.key` of `p`) and a front end over them (key
/// `front.key`, map pinned to `map.pub`): the processes and the front end's `--server` spec.
fn front_over(dir: &str, n: usize, p: &dyn Fn(&str) -> String) -> (Vec<Proc>, Proc, String) {
    let shards: Vec<Proc> = (0..n)
        .map(|k| shard(dir, k, &p(&format!("s{k}.key"))))
        .collect();
    let mut args: Vec<String> = ["front", "serve", "--db", dir, "--map-key", &p("map.pub")]
        .iter()
        .map(|s| s.to_string())
        .collect();
    for (k, process) in shards.iter().enumerate() {
        args.push("--shard".into());
        args.push(format!("{k}={}={}", process.url(), p(&format!("s{k}.pub"))));
    }
    args.extend(["--key", &p("front.key"), "--listen", "127.0.0.1:0"].map(String::from));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let front = Proc::start(&args, "https://");
    let server = format!("{}={}", front.url(), p("front.pub"));
    (shards, front, server)
}

/// YPIR+SP shards (`pir db build --shards 2 --scheme ypir` of records over 8 bytes, and of a
/// key-value database): ranges of the matrix's rows behind YPIR's front end; `pir get` gives
/// the records (the last one trimmed) and `pir get --lookup` the values.
#[test]
fn ypir_sp_shards_behind_a_front_end() {
    let scratch = Scratch::with_keys(&["front", "s0", "s1", "map"]);
    let p = |n: &str| scratch.path(n);
    // 150 records of 24 bytes, the last one 10 bytes short.
    let data: Vec<u8> = (0..150 * 24 - 10).map(|i| (i * 31 % 251) as u8).collect();
    std::fs::write(p("records.bin"), &data).unwrap();
    let mut kv = String::new();
    for i in 0..40 {
        kv.push_str(&format!("user{i},value of user {i}\n"));
    }
    std::fs::write(p("kv.txt"), kv).unwrap();
    for (input, dir) in [
        (["--records", "records.bin"], "sharded"),
        (["--kv", "kv.txt"], "kv"),
    ] {
        let mut args = vec![
            "db".to_string(),
            "build".into(),
            input[0].into(),
            p(input[1]),
        ];
        if input[0] == "--records" {
            args.extend(["--record-size".into(), "24".into()]);
        }
        args.extend(["--shards", "2", "--scheme", "ypir", "--key"].map(String::from));
        args.extend([p("map.key"), "--out".into(), p(dir)]);
        let built = ok(&args.iter().map(String::as_str).collect::<Vec<_>>());
        assert!(built.contains("shard 1: matrix rows"), "{built}");
        assert!(built.contains("served by: ypir-sp"), "{built}");
    }
    let get = |what: &[&str], server: &str| {
        let mut args = vec!["get"];
        args.extend_from_slice(what);
        args.extend(["--server", server, "--cache-dir"]);
        let cache = p("cache");
        args.push(&cache);
        run(&args)
    };
    let (shards, front, server) = front_over(&p("sharded"), 2, &p);
    for index in [0usize, 77, 149] {
        let out = get(&[&index.to_string()], &server);
        assert!(out.status.success(), "{index}: {out:?}");
        let end = ((index + 1) * 24).min(data.len());
        assert_eq!(out.stdout, &data[index * 24..end], "record {index}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("ypir"), "{err}");
    }
    drop(front);
    drop(shards);
    let (_shards, front, server) = front_over(&p("kv"), 2, &p);
    let found = get(&["--lookup", "user17"], &server);
    assert!(found.status.success(), "{found:?}");
    assert_eq!(found.stdout, b"value of user 17");
    let missing = get(&["--lookup", "nobody"], &server);
    assert_eq!(missing.status.code(), Some(4), "{missing:?}");
    drop(front);
}
