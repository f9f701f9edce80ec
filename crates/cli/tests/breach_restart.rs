//! A breach server restarted with the same `--seed-state` file never hands out a seed it
//! handed out before (Günther 2019, section 3.3.2: a repeated seed exposes the Hamming distance
//! of two queries). Drives the real binary: two `pir breach serve` processes on 127.0.0.1,
//! server 0 killed (as in a crash) and started again; then its seed state file rolled back and
//! deleted, and the start refused; and a database swapped on SIGHUP.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::collections::HashSet;
use std::path::Path;

use support::{breach_servers, ok, serve_args, Proc, Scratch, PASSWORDS};

/// Seeds collected from server 0 per run.
const SEEDS_PER_RUN: usize = 40;

/// A `pir breach serve` process of `dbs` on a free port, killed on drop; `extra` flags
/// appended.
fn serve_many(dbs: &[&str], server: &str, key: &str, extra: &[&str]) -> Proc {
    let mut args = vec!["breach", "serve"];
    args.extend(dbs.iter().flat_map(|db| ["--db", db]));
    args.extend(["--server", server, "--key", key]);
    args.extend(["--listen", "127.0.0.1:0", "--qdp-queue", "4"]);
    args.extend_from_slice(extra);
    Proc::start(&args, "https://")
}

/// A `pir breach serve` process of `db` with its seed state at `seed_state`.
fn serve(db: &str, server: &str, key: &str, seed_state: &str) -> Proc {
    serve_many(&[db], server, key, &["--seed-state", seed_state])
}

/// Writes the servers file `servers` of `s0` and `s1` (keys `s0.pub`, `s1.pub`); returns its
/// path.
fn servers_file(scratch: &Scratch, s0: &Proc, s1: &Proc) -> String {
    let servers = scratch.path("servers");
    ok(&[
        "breach",
        "servers",
        "--server",
        &format!("{}={}", s0.url(), scratch.path("s0.pub")),
        "--server",
        &format!("{}={}", s1.url(), scratch.path("s1.pub")),
        "--out",
        &servers,
    ]);
    servers
}

/// `pir breach check --servers SERVERS EXTRA` of `password` (on standard input): its exit
/// code.
fn check(servers: &str, password: &str, extra: &[&str]) -> Option<i32> {
    use std::io::Write;
    let mut child = support::pir()
        .args(["breach", "check", "--servers", servers])
        .args(extra)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    child.wait_with_output().unwrap().status.code()
}

/// `count` seeds from server 0 of the deployment `(s0, s1)`, via seed requests.
fn collect_seeds(dir: &Path, s0: &Proc, s1: &Proc, count: usize) -> Vec<[u8; 16]> {
    let keys = breach_servers(dir, s0, s1);
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        let session = pir_breach::BreachSession::open(&keys).await.unwrap();
        let qdp = *session.qdp();
        let mut seeds = Vec::new();
        for _ in 0..count {
            let body = session
                .exchange(0, &qdp.seed_request(0).unwrap())
                .await
                .unwrap();
            seeds.push(qdp.read_seed_response(0, &body).unwrap().seed);
        }
        seeds
    })
}

/// The high-water mark in a seed state file.
fn high_water(path: &Path) -> u64 {
    let text = std::fs::read_to_string(path).unwrap();
    let (header, value) = text.trim().split_once(' ').unwrap();
    assert_eq!(header, "pir-qdp-seed-state-v1");
    value.parse().unwrap()
}

#[test]
fn a_restarted_server_never_repeats_a_seed() {
    let scratch = Scratch::with_keys(&["s0", "s1"]);
    let (p, dir) = (|n: &str| scratch.path(n), &scratch.dir);
    scratch.breach_db("pw.db", &format!("{PASSWORDS}dragon\n"));
    let state = p("seeds-0");
    let s1 = serve(&p("pw.db"), "1", &p("s1.key"), &p("seeds-1"));

    let s0 = serve(&p("pw.db"), "0", &p("s0.key"), &state);
    let first = collect_seeds(dir.path(), &s0, &s1, SEEDS_PER_RUN);
    drop(s0); // killed, as in a crash: no clean shutdown
    let mark = high_water(Path::new(&state));
    assert!(mark >= SEEDS_PER_RUN as u64, "high-water mark {mark}");

    let after_first = std::fs::read(&state).unwrap();
    let s0 = serve(&p("pw.db"), "0", &p("s0.key"), &state);
    let second = collect_seeds(dir.path(), &s0, &s1, SEEDS_PER_RUN);
    drop(s0);
    // The restart continued above the persisted mark instead of reusing its counters.
    assert!(high_water(Path::new(&state)) > mark);

    let mut seen = HashSet::new();
    for seed in first.iter().chain(&second) {
        assert!(seen.insert(*seed), "a seed was handed out twice");
    }
    assert_eq!(seen.len(), 2 * SEEDS_PER_RUN);
    let before: HashSet<_> = first.iter().collect();
    assert!(second.iter().all(|seed| !before.contains(seed)));

    // The state file rolled back to its copy after the first run, then deleted: the server
    // refuses to start both times, saying what happened and what to do.
    let newest = std::fs::read(&state).unwrap();
    std::fs::write(&state, &after_first).unwrap();
    let refused = refused_start(&p("pw.db"), &p("s0.key"), &state);
    assert!(refused.contains("rolled back"), "{refused}");
    std::fs::remove_file(&state).unwrap();
    let refused = refused_start(&p("pw.db"), &p("s0.key"), &state);
    assert!(
        refused.contains("deleted") && refused.contains("Put it back"),
        "{refused}"
    );
    // Put back, it serves again.
    std::fs::write(&state, &newest).unwrap();
    drop(serve(&p("pw.db"), "0", &p("s0.key"), &state));
}

/// Starts server 0 expecting it to refuse; returns what it printed.
fn refused_start(db: &str, key: &str, seed_state: &str) -> String {
    let args = ["--seed-state", seed_state];
    let out = support::run(&serve_args(&["breach", "serve"], db, "0", key, &args));
    assert!(!out.status.success(), "started with a bad seed state");
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// Both servers swap to a rebuilt database on SIGHUP without a restart; a damaged one leaves
/// the old database served; the seed state shared by the old and new service only grows.
#[test]
fn sighup_swaps_the_breach_database_without_a_restart() {
    let scratch = Scratch::with_keys(&["s0", "s1"]);
    let p = |n: &str| scratch.path(n);
    let build = |list: &str| scratch.breach_db("pw.db", list);
    build("123456\npassword\nqwerty\n");
    let s0 = serve_many(&[&p("pw.db")], "0", &p("s0.key"), &[]);
    let s1 = serve_many(&[&p("pw.db")], "1", &p("s1.key"), &[]);
    let servers = servers_file(&scratch, &s0, &s1);
    let check = |password: &str| check(&servers, password, &[]);
    assert_eq!(check("correcthorse"), Some(0), "not in the first list");
    assert_eq!(check("qwerty"), Some(5));

    build("123456\npassword\nqwerty\ncorrecthorse\n");
    for server in [&s0, &s1] {
        let report = server.hangup();
        assert!(report.starts_with("reloaded: serving database"), "{report}");
    }
    assert_eq!(check("correcthorse"), Some(5), "in the rebuilt list");

    // A damaged new version arrives the way a rebuilt one does: a new file renamed over the
    // old (the serving process keeps its memory map of the file it opened).
    let mut bytes = std::fs::read(p("pw.db")).unwrap();
    let at = bytes.len() - 100;
    bytes[at] ^= 1;
    std::fs::write(p("pw.db.new"), bytes).unwrap();
    std::fs::rename(p("pw.db.new"), p("pw.db")).unwrap();
    let report = s0.hangup();
    assert!(report.starts_with("reload failed"), "{report}");
    assert!(report.contains("corrupt"), "{report}");
    assert_eq!(
        check("correcthorse"),
        Some(5),
        "the old database still served"
    );

    // The seed state the two services of server 0 shared never went back: a restart on it
    // is accepted.
    let mark = high_water(Path::new(&p("pw.db.seeds-0")));
    assert!(mark > 0);
    drop(s0);
    build("123456\npassword\nqwerty\ncorrecthorse\n");
    drop(serve_many(&[&p("pw.db")], "0", &p("s0.key"), &[]));
    assert!(high_water(Path::new(&p("pw.db.seeds-0"))) >= mark);
}

/// Both servers serve two corpora: checks go to the first by default and to the other with
/// `pir breach check --db ID`; each corpus keeps its own seed state.
#[test]
fn breach_servers_serve_several_corpora_chosen_by_id() {
    let scratch = Scratch::with_keys(&["s0", "s1"]);
    let p = |n: &str| scratch.path(n);
    let dbs = [
        scratch.breach_db("a.db", "123456\npassword\n"),
        scratch.breach_db("b.db", "qwerty\nletmein\n"),
    ];
    let dbs: Vec<&str> = dbs.iter().map(String::as_str).collect();
    let s0 = serve_many(&dbs, "0", &p("s0.key"), &[]);
    let s1 = serve_many(&dbs, "1", &p("s1.key"), &[]);
    // The second database's id, from the second line server 0 printed.
    let second = s0.next_line();
    let id = second
        .split("serving database ")
        .nth(1)
        .unwrap()
        .split([' ', ','])
        .next()
        .unwrap()
        .to_string();
    assert_eq!(id.len(), 64, "{second}");
    let servers = servers_file(&scratch, &s0, &s1);
    let check = |password: &str, extra: &[&str]| check(&servers, password, extra);
    assert_eq!(check("password", &[]), Some(5), "the default corpus");
    assert_eq!(check("qwerty", &[]), Some(0));
    assert_eq!(
        check("qwerty", &["--db", &id]),
        Some(5),
        "the second corpus"
    );
    assert_eq!(check("password", &["--db", &id]), Some(0));
    assert_eq!(check("qwerty", &["--db", &"00".repeat(32)]), Some(1));
    assert!(Path::new(&p("a.db.seeds-0")).exists() && Path::new(&p("b.db.seeds-0")).exists());
}
