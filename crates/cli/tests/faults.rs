//! Faults, with the real binary: a mirror killed while its answer is on the wire (a spare
//! takes over, or the fetch fails with nothing at `--out`), a mirror restarted on the same
//! address after that, a disk that fills under `pir fetch` and `pir db build`, and database
//! files damaged on disk (every server refuses to start on them).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use support::{
    db_build_args, fails_with, ok, partial_files, pir, require, run, serve_args, Mirror, Scratch,
    World, PASSWORDS,
};

/// A TCP relay in front of a server. TLS passes through it unchanged (the client still pins
/// the server's key); it counts the bytes the server sends and, once `cut_after` of them went
/// to the client, forwards nothing more and reports it: the test then kills the server, whose
/// answer is on the wire.
struct Relay {
    addr: SocketAddr,
    sent: Arc<AtomicU64>,
    cut_after: Arc<AtomicU64>,
    reached: Arc<(Mutex<bool>, Condvar)>,
}

impl Relay {
    fn start(target: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let relay = Relay {
            addr: listener.local_addr().unwrap(),
            sent: Arc::new(AtomicU64::new(0)),
            cut_after: Arc::new(AtomicU64::new(u64::MAX)),
            reached: Arc::new((Mutex::new(false), Condvar::new())),
        };
        let (sent, cut_after, reached) = (
            relay.sent.clone(),
            relay.cut_after.clone(),
            relay.reached.clone(),
        );
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let Ok(server) = TcpStream::connect(target) else {
                    continue; // the server is gone: the client sees the connection close
                };
                let (sent, cut_after, reached) = (sent.clone(), cut_after.clone(), reached.clone());
                let (mut client_in, mut server_out) =
                    (client.try_clone().unwrap(), server.try_clone().unwrap());
                std::thread::spawn(move || {
                    let _ = std::io::copy(&mut client_in, &mut server_out);
                    let _ = server_out.shutdown(Shutdown::Write);
                });
                std::thread::spawn(move || {
                    let (mut server_in, mut client_out) = (server, client);
                    let mut buffer = [0u8; 4096];
                    let mut cut = false;
                    loop {
                        let n = match server_in.read(&mut buffer) {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        if cut {
                            continue; // held: the rest never reaches the client
                        }
                        let before = sent.fetch_add(n as u64, Ordering::SeqCst);
                        let limit = cut_after.load(Ordering::SeqCst);
                        let pass = limit.saturating_sub(before).min(n as u64) as usize;
                        if client_out.write_all(&buffer[..pass]).is_err() {
                            break;
                        }
                        if pass < n {
                            cut = true;
                            let (flag, signal) = &*reached;
                            *flag.lock().unwrap() = true;
                            signal.notify_all();
                        }
                    }
                    let _ = client_out.shutdown(Shutdown::Both);
                });
            }
        });
        relay
    }

    fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// Whether the cut happened.
    fn cut_reached(&self) -> bool {
        *self.reached.0.lock().unwrap()
    }
}

fn addr_of(url: &str) -> SocketAddr {
    url.trim_start_matches("https://")
        .trim_end_matches('/')
        .parse()
        .unwrap()
}

fn fetch(world: &World, name: &str, list: &str, out: &str) -> std::process::Output {
    run(&[
        "fetch",
        name,
        "--mirrors",
        list,
        "--vendor-pub",
        &world.path("vendor.pub"),
        "--out",
        out,
    ])
}

/// Runs `pir fetch` in the background until `relay` cut it, calls `at_cut` (which kills the
/// mirror behind the relay, the answer on the wire) and returns the fetch's output. Each fetch
/// draws its mirrors at random, so a fetch that did not ask the relay's mirror is run again
/// (40 tries all miss a mirror asked with probability 3/4 with probability 4^-40).
fn fetch_cut(
    world: &World,
    name: &str,
    list: &str,
    out: &str,
    relay: &Relay,
    at_cut: impl FnOnce(),
) -> std::process::Output {
    let mut at_cut = Some(at_cut);
    for _ in 0..40 {
        let output = std::thread::scope(|scope| {
            let fetching = scope.spawn(|| fetch(world, name, list, out));
            while !relay.cut_reached() && !fetching.is_finished() {
                std::thread::sleep(Duration::from_millis(5));
            }
            if relay.cut_reached() {
                if let Some(cut) = at_cut.take() {
                    cut();
                }
            }
            fetching.join().unwrap()
        });
        if relay.cut_reached() {
            return output;
        }
    }
    panic!("40 fetches never asked the relay's mirror: mirrors are not drawn at random");
}

/// The largest file of the world (400 kB: about a hundred 4 KiB blocks).
fn big_file(world: &World) -> (String, Vec<u8>) {
    world
        .files
        .iter()
        .max_by_key(|(_, bytes)| bytes.len())
        .cloned()
        .unwrap()
}

#[test]
fn a_mirror_killed_mid_fetch_is_replaced_by_a_spare_or_the_fetch_leaves_nothing() {
    let world = World::new(5);
    let release = world.path("release");
    let mirror = |k: usize| Mirror::start(&release, &world.path(&format!("m{k}.key")), &[]);
    let (name, bytes) = big_file(&world);
    let (m1, m2, spare) = (mirror(1), mirror(2), mirror(3));
    // A signed list: the mirror behind `relay` (key `relay_key`), mirrors 1 and 2, and the
    // spare (key m3) if asked for.
    let list = |name: &str, relay: &Relay, relay_key: &str, with_spare: bool| {
        let mut entries = vec![
            (relay.url(), relay_key.to_string()),
            (m1.url.clone(), "m1".into()),
            (m2.url.clone(), "m2".into()),
        ];
        if with_spare {
            entries.push((spare.url.clone(), "m3".into()));
        }
        world.mirror_list(name, &entries)
    };

    // How many bytes a whole fetch takes from mirror 0 (through the relay, uncut).
    let m0 = mirror(0);
    let relay = Relay::start(addr_of(&m0.url));
    let with_spare = list("with-spare.pir", &relay, "m0", true);
    let out = world.path("whole");
    // Mirrors are drawn at random: fetch until one went through the relay.
    let mut whole = 0;
    for _ in 0..40 {
        relay.sent.store(0, Ordering::SeqCst);
        let result = fetch(&world, &name, &with_spare, &out);
        assert!(result.status.success(), "{result:?}");
        assert_eq!(std::fs::read(&out).unwrap(), bytes);
        whole = relay.sent.load(Ordering::SeqCst);
        if whole > 100_000 {
            break;
        }
    }
    assert!(whole > 100_000, "mirror 0 sent only {whole} bytes");

    // Again, cut halfway through what mirror 0 sends, and mirror 0 killed right then.
    relay.sent.store(0, Ordering::SeqCst);
    relay.cut_after.store(whole / 2, Ordering::SeqCst);
    let out = world.path("via-spare");
    let result = fetch_cut(&world, &name, &with_spare, &out, &relay, || drop(m0));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(result.status.success(), "{stderr}");
    assert_eq!(std::fs::read(&out).unwrap(), bytes, "the spare's blocks");
    assert!(
        stderr.contains(&relay.url()),
        "the failed mirror named: {stderr}"
    );

    // Without a spare: the fetch fails, names the mirror, and leaves nothing behind.
    let m0 = mirror(4);
    let relay = Relay::start(addr_of(&m0.url));
    let no_spare = list("no-spare.pir", &relay, "m4", false);
    relay.cut_after.store(whole / 2, Ordering::SeqCst);
    let out = world.path("no-spare-out");
    let result = fetch_cut(&world, &name, &no_spare, &out, &relay, || drop(m0));
    let stderr = String::from_utf8_lossy(&result.stderr);
    assert!(
        !result.status.success(),
        "a fetch with a dead mirror and no spare succeeded"
    );
    assert!(
        stderr.contains(&format!("mirror {} failed", relay.url())),
        "{stderr}"
    );
    assert!(!Path::new(&out).exists(), "something was left at --out");
    assert!(partial_files(world.dir.path()).is_empty());
}

#[test]
fn a_mirror_restarted_mid_request_serves_the_next_fetch() {
    let world = World::new(3);
    let release = world.path("release");
    let port = TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let listen = format!("127.0.0.1:{port}");
    let start_m0 = || {
        Mirror::start_with(&[
            "--release",
            &release,
            "--key",
            &world.path("m0.key"),
            "--listen",
            &listen,
        ])
    };
    let m0 = start_m0();
    let others: Vec<Mirror> = (1..3)
        .map(|k| Mirror::start(&release, &world.path(&format!("m{k}.key")), &[]))
        .collect();
    let relay = Relay::start(addr_of(&m0.url));
    let list = world.mirror_list(
        "list.pir",
        &[
            (relay.url(), "m0".into()),
            (others[0].url.clone(), "m1".into()),
            (others[1].url.clone(), "m2".into()),
        ],
    );
    let (name, bytes) = big_file(&world);
    relay.cut_after.store(20_000, Ordering::SeqCst);
    let out = world.path("during");
    // Killed with a request in flight, then started again on the same address.
    let mut _restarted = None;
    let during = fetch_cut(&world, &name, &list, &out, &relay, || {
        drop(m0); // killed (SIGKILL)
        _restarted = Some(start_m0());
    });
    if during.status.success() {
        assert_eq!(std::fs::read(&out).unwrap(), bytes);
    } else {
        assert!(!Path::new(&out).exists(), "something was left at --out");
    }
    relay.cut_after.store(u64::MAX, Ordering::SeqCst);
    let out = world.path("after");
    let result = fetch(&world, &name, &list, &out);
    assert!(result.status.success(), "{result:?}");
    assert_eq!(std::fs::read(&out).unwrap(), bytes);
    assert!(partial_files(world.dir.path()).is_empty());
}

/// How this machine lets us mount a small tmpfs where only our child sees it: `unshare` into
/// new user and mount namespaces (no privileges needed), or, as root, into a new mount
/// namespace only. `None` if neither works.
fn namespace_args() -> Option<&'static [&'static str]> {
    const CHOICES: [&[&str]; 2] = [&["--user", "--map-root-user", "--mount"], &["--mount"]];
    let dir = tempfile::tempdir().unwrap();
    CHOICES.into_iter().find(|args| {
        std::process::Command::new("unshare")
            .args(*args)
            .args(["sh", "-c", "mount -t tmpfs -o size=64k tmpfs \"$0\""])
            .arg(dir.path())
            .output()
            .is_ok_and(|o| o.status.success())
    })
}

/// Runs `pir ARGS` with `dir` a fresh tmpfs of `kib` KiB (in a namespace of its own);
/// returns its output and what was left in `dir` afterwards.
fn on_a_small_disk(dir: &Path, kib: u32, args: &[&str]) -> (std::process::Output, Vec<String>) {
    std::fs::create_dir_all(dir).unwrap();
    let script = format!(
        "mount -t tmpfs -o size={kib}k tmpfs \"$0\" || exit 99; \"$@\"; rc=$?; \
         echo LEFT:; ls -A \"$0\"; exit $rc"
    );
    let out = std::process::Command::new("unshare")
        .args(namespace_args().expect("checked by the test"))
        .args(["sh", "-c", &script])
        .arg(dir)
        .arg(env!("CARGO_BIN_EXE_pir"))
        .args(args)
        .env("PIR_STATE_DIR", support::state_dir())
        .output()
        .unwrap();
    assert_ne!(out.status.code(), Some(99), "mount failed: {out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let left = stdout
        .split("LEFT:")
        .nth(1)
        .unwrap_or("")
        .split_whitespace()
        .map(str::to_string)
        .collect();
    (out, left)
}

#[test]
fn a_full_disk_fails_fetch_and_db_build_cleanly() {
    if !require(
        namespace_args().is_some(),
        "a mount namespace for a small tmpfs (unshare from util-linux, with user namespaces or as root)",
        "apt-get install util-linux, and allow user namespaces (sysctl kernel.unprivileged_userns_clone=1) or run as root",
    ) {
        return;
    }
    let world = World::new(3);
    let release = world.path("release");
    let mirrors: Vec<Mirror> = (0..3)
        .map(|k| Mirror::start(&release, &world.path(&format!("m{k}.key")), &[]))
        .collect();
    let list = world.mirror_list(
        "list.pir",
        &mirrors
            .iter()
            .enumerate()
            .map(|(k, m)| (m.url.clone(), format!("m{k}")))
            .collect::<Vec<_>>(),
    );
    let (name, bytes) = big_file(&world);
    assert!(bytes.len() > 256 * 1024);
    let disk = world.dir.path().join("disk");
    let out = disk.join("file");
    let vendor = world.path("vendor.pub");
    let fetch = [
        "fetch",
        &name,
        "--mirrors",
        &list,
        "--vendor-pub",
        &vendor,
        "--out",
        out.to_str().unwrap(),
    ];
    let (result, left) = on_a_small_disk(&disk, 256, &fetch);
    fails_with(&result, "No space left on device");
    assert!(left.is_empty(), "left on the full disk: {left:?}");
    // The same fetch with room succeeds.
    let (result, left) = on_a_small_disk(&disk, 1024, &fetch);
    assert!(result.status.success(), "{result:?}");
    assert_eq!(left, vec!["file".to_string()]);

    // A record database larger than the disk.
    let records = world.dir.path().join("records.bin");
    std::fs::write(&records, vec![7u8; 512 * 1024]).unwrap();
    let db = disk.join("records.db");
    let build = db_build_args(records.to_str().unwrap(), "32", db.to_str().unwrap());
    let (result, left) = on_a_small_disk(&disk, 256, &build);
    fails_with(&result, "No space left on device");
    assert!(left.is_empty(), "left on the full disk: {left:?}");
}

/// Flips one bit of `path` at `offset` (from the end when negative).
fn flip(path: &Path, offset: i64) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = if offset < 0 {
        bytes.len() - offset.unsigned_abs() as usize
    } else {
        offset as usize
    };
    bytes[at] ^= 1;
    std::fs::write(path, bytes).unwrap();
}

/// Runs a server command that must refuse to start; returns its standard error. Fails the
/// test if it is still running after a minute (it would be serving the damaged file).
fn refuses_to_start(args: &[&str]) -> String {
    let mut child = pir()
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        if let Some(status) = child.try_wait().unwrap() {
            let err = support::read_stderr(&mut child);
            assert!(!status.success(), "{args:?} exited 0: {err}");
            assert!(!err.contains("panicked"), "{err}");
            return err;
        }
        if std::time::Instant::now() > deadline {
            let _ = child.kill();
            panic!("{args:?} started serving a damaged database");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn damaged_database_files_are_refused_at_start() {
    let scratch = Scratch::with_keys(&["key"]);
    let p = |n: &str| scratch.path(n);
    let key = p("key.key");

    // A mirror's release: one flipped bit in the block file.
    let world = World::new(1);
    let release = world.copy_release("damaged-release");
    flip(&release.join("database.bin"), 150_000);
    let err = refuses_to_start(&[
        "mirror",
        "serve",
        "--release",
        release.to_str().unwrap(),
        "--key",
        &key,
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(err.contains("does not match its SHA-256"), "{err}");

    // A single-server record database.
    scratch.records_db("records.db", &[3u8; 32 * 1000], 32);
    flip(Path::new(&p("records.db")), -100);
    let err = refuses_to_start(&[
        "serve",
        "--db",
        &p("records.db"),
        "--key",
        &key,
        "--listen",
        "127.0.0.1:0",
    ]);
    assert!(err.contains("damaged"), "{err}");

    // A breach database.
    let db = scratch.breach_db("pw.db", PASSWORDS);
    flip(Path::new(&db), -100);
    let err = refuses_to_start(&serve_args(&["breach", "serve"], &db, "0", &key, &[]));
    assert!(err.contains("corrupt"), "{err}");

    // A Safe Browsing database.
    let db = scratch.safebrowsing_db("sb.db", "evil.example.com\nbad.example.org/x\n");
    flip(Path::new(&db), -10);
    let err = refuses_to_start(&serve_args(&["safebrowsing", "serve"], &db, "0", &key, &[]));
    assert!(err.contains("damaged"), "{err}");
}

/// Runs `pir ARGS` as on a full disk: under `RLIMIT_FSIZE` 0 with `SIGXFSZ` ignored, every
/// write of a byte to a file fails with EFBIG ("File too large") as it would with ENOSPC,
/// while creating files and directories still works. Needs no privileges.
fn with_no_room(args: &[&str]) -> std::process::Output {
    std::process::Command::new("sh")
        .args(["-c", "trap '' XFSZ; ulimit -f 0 && exec \"$@\"", "sh"])
        .arg(env!("CARGO_BIN_EXE_pir"))
        .args(args)
        .env("PIR_STATE_DIR", support::state_dir())
        .output()
        .unwrap()
}

/// Every file under `dir`, with its size.
fn files_under(dir: &Path) -> Vec<(String, u64)> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.metadata().unwrap();
        if meta.is_dir() {
            found.extend(files_under(&entry.path()));
        } else {
            found.push((entry.path().display().to_string(), meta.len()));
        }
    }
    found.sort();
    found
}

#[test]
fn small_writers_on_a_full_disk_leave_nothing_and_can_be_run_again() {
    let scratch = Scratch::with_keys(&["vendor", "s0", "s1"]);
    let p = |name: &str| scratch.path(name);
    let out = scratch.dir.path().join("out");
    std::fs::create_dir(&out).unwrap();
    let o = |name: &str| out.join(name).to_str().unwrap().to_string();
    let server = |port: u16, key: &str| format!("https://127.0.0.1:{port}={}", p(key));
    let (s0, s1) = (server(1, "s0.pub"), server(2, "s1.pub"));
    // `pir COMMAND servers` of s0 and s1 into `out`.
    let servers_file = |command: &str, out: &str| -> Vec<String> {
        let servers = ["--server", &s0, "--server", &s1];
        let mut args = vec![command, "servers"];
        args.extend(servers);
        let out = o(out);
        args.extend(["--out", &out]);
        args.into_iter().map(String::from).collect()
    };
    let commands: Vec<Vec<String>> = vec![
        vec!["keygen".into(), "--out".into(), o("new")],
        vec![
            "mirror-list".into(),
            "build".into(),
            "--vendor-key".into(),
            p("vendor.key"),
            "--mirror".into(),
            s0.clone(),
            "--mirror".into(),
            s1.clone(),
            "--out".into(),
            o("mirrors.pir"),
        ],
        servers_file("breach", "breach.servers"),
        servers_file("safebrowsing", "sb.servers"),
        vec![
            "safebrowsing".into(),
            "firefox-profile".into(),
            "--proxy".into(),
            "http://127.0.0.1:8470".into(),
            "--out".into(),
            o("profile"),
        ],
    ];
    for command in &commands {
        let args: Vec<&str> = command.iter().map(String::as_str).collect();
        fails_with(&with_no_room(&args), "File too large");
        let left = files_under(&out);
        assert!(left.is_empty(), "{args:?} left {left:?}");
        // The same command, with room: no "File exists" from the failed run.
        ok(&args);
        let written = files_under(&out);
        assert!(!written.is_empty(), "{args:?} wrote nothing");
        assert!(written.iter().all(|(_, len)| *len > 0), "{written:?}");
        for (path, _) in written {
            std::fs::remove_file(path).unwrap();
        }
    }
    // The secret key written after the retry is still the owner's only.
    ok(&["keygen", "--out", &o("again")]);
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(o("again.key"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
}

#[test]
fn fetch_refuses_a_state_directory_that_is_not_absolute() {
    let scratch = Scratch::with_keys(&["vendor", "m0"]);
    let (p, dir) = (|name: &str| scratch.path(name), &scratch.dir);
    ok(&[
        "mirror-list",
        "build",
        "--vendor-key",
        &p("vendor.key"),
        "--mirror",
        &format!("https://127.0.0.1:1={}", p("m0.pub")),
        "--out",
        &p("mirrors.pir"),
    ]);
    let fetch = |env: &[(&str, &str)], remove_home: bool| {
        let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_pir"));
        command
            .current_dir(dir.path())
            .env_remove("PIR_STATE_DIR")
            .env_remove("XDG_STATE_HOME")
            .args(["fetch", "any", "--mirrors", &p("mirrors.pir")])
            .args(["--vendor-pub", &p("vendor.pub"), "--out", &p("out")]);
        if remove_home {
            command.env_remove("HOME");
        }
        command.envs(env.iter().copied());
        command.output().unwrap()
    };
    // Empty variables and no HOME: no state directory, said plainly, before any mirror is
    // asked; nothing is created in the current directory.
    let out = fetch(&[("PIR_STATE_DIR", ""), ("XDG_STATE_HOME", "")], true);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("no state directory for rollback protection"),
        "{stderr}"
    );
    // A relative PIR_STATE_DIR is refused by name.
    let out = fetch(
        &[("PIR_STATE_DIR", "state"), ("HOME", "/nonexistent")],
        false,
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success());
    assert!(
        stderr.contains("PIR_STATE_DIR=state is not an absolute path"),
        "{stderr}"
    );
    let left: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| !n.starts_with("vendor") && !n.starts_with("m0") && n != "mirrors.pir")
        .collect();
    assert!(
        left.is_empty(),
        "created in the current directory: {left:?}"
    );
}

#[test]
fn a_breach_server_that_cannot_keep_its_seed_state_does_not_start() {
    let scratch = Scratch::with_keys(&["key"]);
    let db = scratch.breach_db("pw.db", PASSWORDS);
    // Its directory does not exist (as good as read-only, and unwritable for root too): it
    // would refuse every check while saying "serving"; it must not start.
    let (key, state) = (scratch.path("key.key"), scratch.path("gone/seeds-0"));
    let err = refuses_to_start(&serve_args(
        &["breach", "serve"],
        &db,
        "0",
        &key,
        &["--seed-state", &state],
    ));
    assert!(err.contains("seed state cannot be written"), "{err}");
}
