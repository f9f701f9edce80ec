//! A sharded breach database end to end: `pir breach build --shards 2` (and one shard built
//! by its own process with `--shard 1`), two `pir shard serve`, a `pir front serve` as breach
//! server 0, and the unchanged `pir breach check` and `pir breach proxy` through it, giving
//! exactly what a deployment of whole servers (`pir breach serve`) gives; a front end whose
//! shard 1 is another database's refuses to answer (no verdict). Real processes over HTTPS on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::io::Write;
use std::path::Path;
use std::process::{Output, Stdio};

use pir_breach::corpus::password_sha1;
use pir_breach::database::BreachDatabase;
use pir_breach::range::{range_response, RangePrefix};
use support::{install, ok, pir, reload_sharded, run, start_front, Proc, Scratch, Steady};

const HITS: [&str; 4] = ["password", "123456", "letmein", "dragon"];
const MISSES: [&str; 2] = ["miss-6b1f0e0c8a2d", "miss-not-in-any-list"];

/// A password list with the hits (some more than once) and generated filler.
fn corpus(salt: &str) -> String {
    let mut list: Vec<String> = (0..300).map(|i| format!("word{salt}{i}")).collect();
    list.extend(HITS.iter().map(|h| h.to_string()));
    list.extend(["password", "123456"].map(String::from));
    list.join("\n") + "\n"
}

/// `pir breach build` of `list` into `out` (pinned creation time, 16 buckets) with `extra`.
fn build(list: &str, out: &str, extra: &[&str]) -> String {
    let mut args = vec![
        "breach",
        "build",
        "--format",
        "passwords",
        list,
        "--out",
        out,
        "--prefix-bits",
        "4",
        "--created-unix",
        "1767225600",
        "--quiet",
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

/// `pir shard serve` of shard `k` of `dir` with `key`.
fn shard(dir: &str, k: usize, key: &str) -> Proc {
    let k = k.to_string();
    Proc::start(
        &[
            "shard",
            "serve",
            "--db",
            dir,
            "--shard",
            &k,
            "--key",
            key,
            "--listen",
            "127.0.0.1:0",
        ],
        "https://",
    )
}

/// `pir front serve` of `dir` as breach server 0 over `replicas` (shard, URL, key file).
fn front(dir: &str, map_pub: &str, replicas: &[(usize, String, String)], key: &str) -> Proc {
    start_front(dir, map_pub, replicas, key, &["--server", "0"])
}

/// `pir breach serve` of `db` as server `server`.
fn whole(db: &str, server: &str, key: &str) -> Proc {
    Proc::start(
        &[
            "breach",
            "serve",
            "--db",
            db,
            "--server",
            server,
            "--key",
            key,
            "--listen",
            "127.0.0.1:0",
        ],
        "https://",
    )
}

/// The servers file of `s0` and `s1` (with their key files) at `out`.
fn servers(out: &str, s0: (&Proc, &str), s1: (&Proc, &str)) -> String {
    ok(&[
        "breach",
        "servers",
        "--server",
        &format!("{}={}", s0.0.url(), s0.1),
        "--server",
        &format!("{}={}", s1.0.url(), s1.1),
        "--out",
        out,
    ]);
    out.to_string()
}

/// `pir breach check --servers SERVERS` of `password` on standard input.
fn check(servers: &str, password: &str) -> Output {
    check_with(&["--servers", servers], password)
}

/// `pir breach check` with `args` of `password` on standard input.
fn check_with(args: &[&str], password: &str) -> Output {
    let mut child = pir()
        .args(["breach", "check"])
        .args(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(format!("{password}\n").as_bytes()).unwrap();
    drop(stdin);
    child.wait_with_output().unwrap()
}

/// The sharded build's files: the parts are the whole database's blocks, the map names its
/// header, and shard 1 built by its own process is the same part and map.
fn builds(s: &Scratch) -> (String, String) {
    let list = s.path("list.txt");
    std::fs::write(&list, corpus("a")).unwrap();
    let (dir, db) = (s.path("sharded"), s.path("pw.db"));
    let map_key = s.path("map.key");
    let printed = build(&list, &dir, &["--shards", "2", "--key", &map_key]);
    assert!(printed.contains("shard 1: buckets"), "{printed}");
    build(&list, &db, &[]);
    let read = |path: String| std::fs::read(path).unwrap();
    let file = read(db.clone());
    let parts = [
        read(format!("{dir}/shard-0.part")),
        read(format!("{dir}/shard-1.part")),
    ];
    assert_eq!(parts.concat(), file[256..]);
    let own = s.path("own1");
    build(
        &list,
        &own,
        &["--shards", "2", "--shard", "1", "--key", &map_key],
    );
    assert_eq!(read(format!("{own}/shard-1.part")), parts[1]);
    assert!(!Path::new(&format!("{own}/shard-0.part")).exists());
    assert_eq!(
        read(format!("{own}/shard-map.bin")),
        read(format!("{dir}/shard-map.bin"))
    );
    // One process's shard without the pinned creation time would differ from the others'.
    let loose = run(&[
        "breach",
        "build",
        "--format",
        "passwords",
        &list,
        "--out",
        &s.path("loose"),
        "--shards",
        "2",
        "--shard",
        "0",
        "--key",
        &map_key,
    ]);
    assert!(!loose.status.success(), "{loose:?}");
    (dir, db)
}

#[test]
fn a_sharded_breach_database_answers_as_whole_servers() {
    let s = Scratch::with_keys(&["map", "s0", "s1", "f0", "a0", "a1", "o1"]);
    let (dir, db) = builds(&s);
    let p = |n: &str| s.path(n);

    let (a0, a1) = (shard(&dir, 0, &p("a0.key")), shard(&dir, 1, &p("a1.key")));
    let replicas = vec![(0, a0.url(), p("a0.pub")), (1, a1.url(), p("a1.pub"))];
    let f0 = front(&dir, &p("map.pub"), &replicas, &p("f0.key"));
    let (s0, s1) = (whole(&db, "0", &p("s0.key")), whole(&db, "1", &p("s1.key")));
    let plain = servers(
        &p("whole.servers"),
        (&s0, &p("s0.pub")),
        (&s1, &p("s1.pub")),
    );
    let sharded = servers(
        &p("sharded.servers"),
        (&f0, &p("f0.pub")),
        (&s1, &p("s1.pub")),
    );

    for password in HITS.iter().chain(&MISSES) {
        let (a, b) = (check(&plain, password), check(&sharded, password));
        let expected = if HITS.contains(password) { 5 } else { 0 };
        assert_eq!(a.status.code(), Some(expected), "{password}: {a:?}");
        assert_eq!(
            (b.status.code(), &b.stdout),
            (a.status.code(), &a.stdout),
            "{password}: {b:?}"
        );
    }

    // The HIBP range proxy through the front end: the range bodies of the whole database.
    let proxy = Proc::start(
        &[
            "breach",
            "proxy",
            "--listen",
            "127.0.0.1:0",
            "--servers",
            &sharded,
        ],
        "http://",
    );
    let opened = BreachDatabase::open(Path::new(&db), true).unwrap();
    for password in ["password", "qwerty"] {
        let hash = password_sha1(password.as_bytes());
        let prefix = RangePrefix::of_hash(&hash);
        let bucket = opened
            .bucket(prefix.bucket(opened.header()).unwrap())
            .unwrap();
        let expected =
            range_response::<rand::rngs::ThreadRng>(opened.header(), prefix, &bucket, None)
                .unwrap();
        assert_eq!(http_get(&proxy.addr, &format!("/range/{prefix}")), expected);
    }
    drop(proxy);

    // A front end whose shard 1 is another database's: refused, never a wrong verdict.
    let other_list = p("other.txt");
    std::fs::write(&other_list, corpus("b")).unwrap();
    let other = p("other");
    build(
        &other_list,
        &other,
        &["--shards", "2", "--key", &p("map.key")],
    );
    let o1 = shard(&other, 1, &p("o1.key"));
    let mixed = vec![(0, a0.url(), p("a0.pub")), (1, o1.url(), p("o1.pub"))];
    let bad = front(&dir, &p("map.pub"), &mixed, &p("f0.key"));
    let bad_servers = servers(&p("bad.servers"), (&bad, &p("f0.pub")), (&s1, &p("s1.pub")));
    let out = check(&bad_servers, "password");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!matches!(out.status.code(), Some(0 | 5)), "{out:?}");
    // The front end's answer is refused (its log names shard 1), so no verdict is printed.
    assert!(stderr.contains("server 0 refused"), "{stderr}");
    assert!(out.stdout.is_empty(), "{out:?}");
}

/// The database id a breach front end's or server's first line names.
fn served_id(process: &Proc) -> String {
    let line = &process.first_line;
    let id = line.split("serving database ").nth(1).unwrap_or_default();
    id.split([' ', ',']).next().unwrap_or_default().to_string()
}

#[test]
fn a_sharded_breach_database_reloads_on_sighup_without_failed_checks() {
    let s = Scratch::with_keys(&["map", "s1", "f0", "a0", "a1"]);
    let p = |n: &str| s.path(n);
    let (list, dir, db) = (p("v1.txt"), p("sharded"), p("pw.db"));
    std::fs::write(&list, corpus("a")).unwrap();
    build(&list, &dir, &["--shards", "2", "--key", &p("map.key")]);
    build(&list, &db, &[]);
    let shards = [shard(&dir, 0, &p("a0.key")), shard(&dir, 1, &p("a1.key"))];
    let replicas: Vec<_> = (shards.iter().enumerate())
        .map(|(k, a)| (k, a.url(), p(&format!("a{k}.pub"))))
        .collect();
    let f0 = front(&dir, &p("map.pub"), &replicas, &p("f0.key"));
    let s1 = whole(&db, "1", &p("s1.key"));
    let both = servers(&p("servers"), (&f0, &p("f0.pub")), (&s1, &p("s1.pub")));
    let old = served_id(&f0);
    assert_eq!(old.len(), 64, "{}", f0.first_line);
    let fresh = "fresh-in-version-two";
    assert_eq!(check(&both, fresh).status.code(), Some(0));

    // Version 2 adds a password; checks of version 1 run on throughout the upgrade.
    let steady = {
        let (both, old) = (both.clone(), old.clone());
        Steady::start(move |_| {
            let out = check_with(&["--servers", &both, "--db", &old], "password");
            assert_eq!(out.status.code(), Some(5), "a check failed: {out:?}");
        })
    };
    let list2 = p("v2.txt");
    std::fs::write(&list2, corpus("b") + fresh + "\n").unwrap();
    build(
        &list2,
        &p("sharded2"),
        &["--shards", "2", "--key", &p("map.key")],
    );
    std::fs::create_dir(p("whole2")).unwrap();
    build(&list2, &p("whole2/pw.db"), &[]);
    install(&p("sharded2"), &dir);
    reload_sharded(&shards, &f0, "database(s)");
    install(&p("whole2"), &p(""));
    assert!(s1.hangup().starts_with("reloaded"));
    steady.stop();
    // New checks see version 2; version 1 is still answered while it is retired.
    assert_eq!(check(&both, fresh).status.code(), Some(5));
    let out = check_with(&["--servers", &both, "--db", &old], fresh);
    assert_eq!(out.status.code(), Some(0), "{out:?}");

    // A damaged map: the front end's reload fails and it serves on.
    std::fs::write(Path::new(&dir).join("shard-map.bin"), b"damaged").unwrap();
    let line = f0.hangup();
    assert!(line.starts_with("reload failed"), "{line}");
    assert_eq!(check(&both, fresh).status.code(), Some(5));
}

/// Plain HTTP GET of `path` from `addr`; the body of a 200 reply.
fn http_get(addr: &str, path: &str) -> String {
    use std::io::Read;
    let mut tcp = std::net::TcpStream::connect(addr).unwrap();
    write!(
        tcp,
        "GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut reply = String::new();
    tcp.read_to_string(&mut reply).unwrap();
    let (head, body) = reply.split_once("\r\n\r\n").unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    body.to_string()
}
