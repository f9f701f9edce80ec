//! Shared set-up for the end-to-end tests: the real `pir` binary, real mirror processes on
//! 127.0.0.1, real files.

#![allow(dead_code)]

use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};

use rand::{RngCore, SeedableRng};

mod require;
// Not every test binary that includes `support` checks for an external tool.
#[allow(unused_imports)]
pub use require::require;

/// The `pir` binary built for this test run.
pub fn pir() -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_pir"));
    // Client state (the newest release version seen) goes to a directory of this test run,
    // never to the user's home.
    command.env("PIR_STATE_DIR", state_dir());
    command
}

/// The client state directory of this test process.
pub fn state_dir() -> std::path::PathBuf {
    static DIR: std::sync::OnceLock<tempfile::TempDir> = std::sync::OnceLock::new();
    DIR.get_or_init(|| tempfile::tempdir().expect("state dir"))
        .path()
        .to_path_buf()
}

/// Runs `pir` with `args`, returning its output.
pub fn run(args: &[&str]) -> Output {
    pir().args(args).output().expect("run pir")
}

/// Runs `pir` with `args` and asserts success.
pub fn ok(args: &[&str]) -> String {
    let out = run(args);
    assert!(
        out.status.success(),
        "pir {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `pir release build` of the source in `dir` (its `src`, signed with its `vendor.key`) into
/// `out` as release `version`, 4096-byte blocks, then `extra` (`--created-unix`,
/// `--shards`...): the release every sharding test builds. Its standard output.
pub fn release_build(dir: &Path, out: &str, version: &str, extra: &[&str]) -> String {
    let path = |name: &str| dir.join(name).to_string_lossy().into_owned();
    let (src, key) = (path("src"), path("vendor.key"));
    let mut args = vec![
        "release",
        "build",
        &src,
        "--key",
        &key,
        "--out",
        out,
        "--block-size",
        "4096",
        "--release-version",
        version,
        "--quiet",
    ];
    args.extend_from_slice(extra);
    ok(&args)
}

/// Puts every file of directory `from` into directory `to`, each by a rename (a server's
/// memory map of the file it replaces stays valid): a new database version installed under
/// servers that reload on SIGHUP.
pub fn install(from: &str, to: &str) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let staged = Path::new(to).join(format!(".new-{}", entry.file_name().to_string_lossy()));
        std::fs::copy(entry.path(), &staged).unwrap();
        std::fs::rename(&staged, Path::new(to).join(entry.file_name())).unwrap();
    }
}

/// `pir front serve` of `dir` (map signed by `map_pub`) over `replicas` (shard, URL, key
/// file), with `key`, on a free port, then `extra`.
pub fn start_front(
    dir: &str,
    map_pub: &str,
    replicas: &[(usize, String, String)],
    key: &str,
    extra: &[&str],
) -> Proc {
    let mut args: Vec<String> = ["front", "serve", "--db", dir, "--map-key", map_pub]
        .map(String::from)
        .to_vec();
    for (k, url, public) in replicas {
        args.push("--shard".into());
        args.push(format!("{k}={url}={public}"));
    }
    args.extend(["--key", key, "--listen", "127.0.0.1:0"].map(String::from));
    args.extend(extra.iter().map(|a| a.to_string()));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    Proc::start(&args, "https://")
}

/// `pir get INDEX --server SERVER --cache-dir CACHE` (`SERVER` is `URL=KEY.pub`).
pub fn get_record(server: &str, cache: &str, index: usize) -> Output {
    let index = index.to_string();
    run(&["get", &index, "--server", server, "--cache-dir", cache])
}

/// The rolling upgrade of a sharded database whose new files are installed: SIGHUP to every
/// shard replica (each adds its new part and retires the old one), then to the front end
/// (adding one version, called `unit` in its reload line, and retiring the old one).
pub fn reload_sharded(shards: &[Proc], front: &Proc, unit: &str) {
    for shard in shards {
        let line = shard.hangup();
        assert!(line.contains("1 part(s) added, 1 retired"), "{line}");
    }
    let line = front.hangup();
    assert!(
        line.contains(&format!("1 {unit} added, 1 retired")),
        "{line}"
    );
}

/// Queries run over and over on a thread while a test changes the servers under them (an
/// upgrade): each query asserts its own answer.
pub struct Steady {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: std::thread::JoinHandle<usize>,
}

impl Steady {
    /// Starts running `query(n)` for n = 0, 1, 2...
    pub fn start(mut query: impl FnMut(usize) + Send + 'static) -> Steady {
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::spawn(move || {
            let mut ran = 0;
            while !stopped.load(std::sync::atomic::Ordering::SeqCst) {
                query(ran);
                ran += 1;
            }
            ran
        });
        Steady { stop, thread }
    }

    /// Stops the queries; fails the test if one failed or none ran.
    pub fn stop(self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
        let ran = self
            .thread
            .join()
            .expect("a query failed during the upgrade");
        assert!(ran >= 1, "no query ran during the upgrade");
    }
}

/// A source directory with files of assorted sizes (deterministic from a seed).
pub fn write_source(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(42);
    let sizes: &[(&str, usize)] = &[
        ("empty.txt", 0),
        ("one-byte", 1),
        ("exact-block.bin", 4096),
        ("block-plus-one.bin", 4097),
        ("pool/main/a/apt_2.6.1_amd64.deb", 150_000),
        ("pool/main/b/bash_5.2.15_amd64.deb", 33_333),
        ("pool/main/l/libc6_2.36-9_amd64.deb", 400_001),
        ("pool/main/z/zlib1g_1.2.13_amd64.deb", 9_000),
        ("docs/README", 1_234),
    ];
    let mut files = Vec::new();
    for &(name, size) in sizes {
        let mut bytes = vec![0u8; size];
        rng.fill_bytes(&mut bytes);
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, &bytes).unwrap();
        files.push((name.to_string(), bytes));
    }
    files
}

/// A vendor, a release and mirror keys in a temporary directory.
pub struct World {
    pub dir: tempfile::TempDir,
    pub files: Vec<(String, Vec<u8>)>,
}

impl World {
    /// Keys `vendor` and `m0..m{mirrors}`, a source tree and a release built with 4 KiB blocks.
    pub fn new(mirror_keys: usize) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let src = dir.path().join("src");
        let files = write_source(&src);
        let p = |n: &str| dir.path().join(n).to_string_lossy().into_owned();
        ok(&["keygen", "--out", &p("vendor")]);
        for i in 0..mirror_keys {
            ok(&["keygen", "--out", &p(&format!("m{i}"))]);
        }
        ok(&[
            "release",
            "build",
            &p("src"),
            "--key",
            &p("vendor.key"),
            "--out",
            &p("release"),
            "--block-size",
            "4096",
            "--quiet",
        ]);
        Self { dir, files }
    }

    /// A path inside the world.
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    /// `pir mirror serve` of the release with key `KEY.key` on a free port of 127.0.0.1.
    pub fn mirror_args(&self, key: &str) -> Vec<String> {
        let mut args = vec!["mirror".to_string(), "serve".into(), "--release".into()];
        args.extend([
            self.path("release"),
            "--key".into(),
            self.path(&format!("{key}.key")),
        ]);
        args.extend(["--listen".into(), "127.0.0.1:0".into()]);
        args
    }

    /// A copy of the release directory under a new name.
    pub fn copy_release(&self, name: &str) -> PathBuf {
        let to = self.dir.path().join(name);
        std::fs::create_dir_all(&to).unwrap();
        for entry in std::fs::read_dir(self.dir.path().join("release")).unwrap() {
            let entry = entry.unwrap();
            std::fs::copy(entry.path(), to.join(entry.file_name())).unwrap();
        }
        to
    }

    /// Signs a mirror list of `(url, key name)` pairs into `name`.
    pub fn mirror_list(&self, name: &str, mirrors: &[(String, String)]) -> String {
        let out = self.path(name);
        let vendor_key = self.path("vendor.key");
        let mut args = vec![
            "mirror-list".to_string(),
            "build".into(),
            "--vendor-key".into(),
            vendor_key,
            "--out".into(),
            out.clone(),
        ];
        for (url, key) in mirrors {
            args.push("--mirror".into());
            args.push(format!("{url}={}", self.path(&format!("{key}.pub"))));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&args);
        out
    }
}

/// A `pir mirror serve` child process, killed on drop.
pub struct Mirror {
    process: Proc,
    pub url: String,
    pub legacy: Option<SocketAddr>,
}

impl Mirror {
    /// Starts a mirror of `release` with key `key_path` on a free port; `extra` flags appended.
    pub fn start(release: &str, key_path: &str, extra: &[&str]) -> Self {
        let mut args = vec![
            "--release",
            release,
            "--key",
            key_path,
            "--listen",
            "127.0.0.1:0",
        ];
        args.extend_from_slice(extra);
        Self::start_with(&args)
    }

    /// Starts `pir mirror serve ARGS` (which must make it listen on a free port).
    pub fn start_with(args: &[&str]) -> Self {
        let process = Proc::start(&[&["mirror", "serve"], args].concat(), "https://");
        let url = process.url();
        let mut legacy = None;
        if args.contains(&"--legacy-http") {
            let line = process.next_line();
            let addr = line
                .split("http://")
                .nth(1)
                .unwrap()
                .split('/')
                .next()
                .unwrap();
            legacy = Some(addr.parse().unwrap());
        }
        Self {
            process,
            url,
            legacy,
        }
    }

    /// Sends SIGHUP (reload the releases) and waits for the mirror to report the reload;
    /// returns its report line.
    pub fn hangup(&self) -> String {
        self.process.hangup()
    }

    /// Sends SIGTERM (what systemd and Kubernetes send) and returns the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        terminate(self.process.child_mut())
    }
}

/// Sends SIGTERM to `child` and waits for it to exit (at most a minute, then kills it and
/// fails the test).
pub fn terminate(child: &mut Child) -> std::process::ExitStatus {
    let sent = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .expect("run kill");
    assert!(sent.success(), "kill -TERM failed");
    for _ in 0..600 {
        if let Some(status) = child.try_wait().expect("wait for the child") {
            return status;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    let _ = child.kill();
    panic!("the server did not stop within a minute of SIGTERM");
}

/// A `pir` child process killed on drop; `addr` is the host:port after `prefix` (such as
/// `https://`) in the first line it printed.
pub struct Proc {
    child: Child,
    pub addr: String,
    /// The first line it printed.
    pub first_line: String,
    /// The lines it prints after the first, read on a thread of their own so that the child
    /// never blocks on a full pipe.
    lines: std::sync::mpsc::Receiver<String>,
    /// Its whole standard error, read on a thread of its own, where the command piped it.
    stderr: Option<std::thread::JoinHandle<String>>,
}

impl Proc {
    /// Starts `pir ARGS` (which must make it listen on a free port and print its address on
    /// its first line), its standard error discarded.
    pub fn start(args: &[&str], prefix: &str) -> Proc {
        let mut command = pir();
        command.args(args).stderr(Stdio::null());
        Proc::spawn(command, prefix)
    }

    /// Spawns `command` (a `pir` command line whose standard error the caller has set up) with
    /// its standard output piped; as [`Proc::start`]. A piped standard error is read from the
    /// start (a full pipe would stop the child), for [`Proc::stop`].
    pub fn spawn(mut command: Command, prefix: &str) -> Proc {
        let mut child = command.stdout(Stdio::piped()).spawn().expect("spawn pir");
        let stderr = child.stderr.take().map(|mut err| {
            std::thread::spawn(move || {
                let mut text = String::new();
                std::io::Read::read_to_string(&mut err, &mut text).unwrap();
                text
            })
        });
        let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
        let first = lines.next().expect("printed nothing").unwrap();
        let addr = first
            .split_whitespace()
            .find_map(|w| w.strip_prefix(prefix))
            .unwrap_or_else(|| panic!("no {prefix} address in {first:?}"))
            .split('/')
            .next()
            .unwrap()
            .to_string();
        let (send, receive) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in lines.map_while(Result::ok) {
                let _ = send.send(line);
            }
        });
        Proc {
            child,
            addr,
            first_line: first,
            lines: receive,
            stderr,
        }
    }

    /// Stops it with SIGTERM, asserts that it exited 0 and returns its standard error (empty
    /// unless the command piped it).
    pub fn stop(mut self) -> String {
        let status = terminate(&mut self.child);
        assert!(status.success(), "{status:?}");
        self.stderr
            .take()
            .map(|reader| reader.join().unwrap())
            .unwrap_or_default()
    }

    /// `https://` and its address.
    pub fn url(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The next line it prints (at most a minute's wait).
    pub fn next_line(&self) -> String {
        self.lines
            .recv_timeout(std::time::Duration::from_secs(60))
            .expect("no line within a minute")
    }

    /// Sends SIGHUP (reload) and waits for the line that reports the reload (at most a
    /// minute); returns that line.
    pub fn hangup(&self) -> String {
        let sent = Command::new("kill")
            .args(["-HUP", &self.child.id().to_string()])
            .status()
            .expect("run kill");
        assert!(sent.success(), "kill -HUP failed");
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        loop {
            let left = deadline.saturating_duration_since(std::time::Instant::now());
            match self.lines.recv_timeout(left) {
                Ok(line) if line.starts_with("reload") => return line,
                Ok(_) => continue,
                Err(e) => panic!("no reload report within a minute: {e}"),
            }
        }
    }

    /// The child process (to signal it).
    pub fn child_mut(&mut self) -> &mut Child {
        &mut self.child
    }

    /// The child's process id.
    pub fn child_id(&self) -> u32 {
        self.child.id()
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The two breach servers `s0`, `s1` as a client opens them: their URLs with the public keys
/// `s0.pub` and `s1.pub` in `dir`.
pub fn breach_servers(dir: &Path, s0: &Proc, s1: &Proc) -> Vec<(String, pir_keys::PublicKey)> {
    [(s0, "s0.pub"), (s1, "s1.pub")]
        .iter()
        .map(|(s, k)| {
            let key = pir_keys::PublicKey::load(&dir.join(k)).unwrap();
            (format!("https://{}", s.addr), key)
        })
        .collect()
}

/// A URL where nothing listens (bound, then released).
pub fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    format!("https://{addr}")
}

/// Files in `dir` whose names start with `.` and contain `partial` (leftovers of a failed write).
pub fn partial_files(dir: &Path) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("partial"))
        .collect()
}

/// Whether `program --version` runs.
pub fn has_program(program: &str) -> bool {
    Command::new(program)
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

/// Asserts that `out` is a failure, without a panic, whose standard error contains `needle`;
/// returns its standard error.
pub fn fails_with(out: &Output, needle: &str) -> String {
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(!out.status.success(), "succeeded: {out:?}");
    assert!(stderr.contains(needle), "no {needle:?} in: {stderr}");
    assert!(!stderr.contains("panicked"), "{stderr}");
    stderr
}

/// The whole standard error of `child` (piped), read to its end.
pub fn read_stderr(child: &mut Child) -> String {
    let mut err = String::new();
    let mut pipe = child.stderr.take().expect("standard error is piped");
    std::io::Read::read_to_string(&mut pipe, &mut err).unwrap();
    err
}

/// A temporary directory of one test, and the files most tests build in it.
pub struct Scratch {
    pub dir: tempfile::TempDir,
}

impl Scratch {
    /// An empty directory with key pairs `NAME.key`/`NAME.pub` for each of `keys`.
    pub fn with_keys(keys: &[&str]) -> Scratch {
        let scratch = Scratch {
            dir: tempfile::tempdir().unwrap(),
        };
        for key in keys {
            ok(&["keygen", "--out", &scratch.path(key)]);
        }
        scratch
    }

    /// A path inside the directory.
    pub fn path(&self, name: &str) -> String {
        self.dir.path().join(name).to_string_lossy().into_owned()
    }

    /// Writes `list` (one password a line) to `DB.txt` and builds the breach database `DB`
    /// from it; returns the database's path.
    pub fn breach_db(&self, db: &str, list: &str) -> String {
        let text = self.path(&format!("{db}.txt"));
        std::fs::write(&text, list).unwrap();
        ok(&[
            "breach",
            "build",
            "--format",
            "passwords",
            &text,
            "--out",
            &self.path(db),
            "--quiet",
        ]);
        self.path(db)
    }

    /// Writes `records` to `DB.bin` and builds the record database `DB` of `record_size`-byte
    /// records from it; returns what `pir db build` printed.
    pub fn records_db(&self, db: &str, records: &[u8], record_size: usize) -> String {
        let bin = self.path(&format!("{db}.bin"));
        std::fs::write(&bin, records).unwrap();
        ok(&db_build_args(
            &bin,
            &record_size.to_string(),
            &self.path(db),
        ))
    }

    /// Writes `list` (one URL expression a line) to `DB.txt` and builds the Safe Browsing
    /// database `DB` from it; returns the database's path.
    pub fn safebrowsing_db(&self, db: &str, list: &str) -> String {
        let text = self.path(&format!("{db}.txt"));
        std::fs::write(&text, list).unwrap();
        ok(&["safebrowsing", "build", &text, "--out", &self.path(db)]);
        self.path(db)
    }
}

/// `pir db build --records RECORDS --record-size SIZE --out OUT`.
pub fn db_build_args<'a>(records: &'a str, record_size: &'a str, out: &'a str) -> [&'a str; 8] {
    let size = "--record-size";
    [
        "db",
        "build",
        "--records",
        records,
        size,
        record_size,
        "--out",
        out,
    ]
}

/// The arguments of a server command `pir COMMAND... --db DB --server SERVER --key KEY
/// --listen 127.0.0.1:0` (breach and Safe Browsing servers), then `extra`.
pub fn serve_args<'a>(
    command: &[&'a str],
    db: &'a str,
    server: &'a str,
    key: &'a str,
    extra: &[&'a str],
) -> Vec<&'a str> {
    let mut args = command.to_vec();
    args.extend([
        "--db",
        db,
        "--server",
        server,
        "--key",
        key,
        "--listen",
        "127.0.0.1:0",
    ]);
    args.extend_from_slice(extra);
    args
}

/// `pir serve --quiet` of the record databases `dbs` with `key` on a free port, `extra` flags
/// appended.
pub fn serve_records(dbs: &[&str], key: &str, extra: &[&str]) -> Proc {
    Proc::start(&records_serve_args(dbs, key, extra), "https://")
}

/// The arguments of [`serve_records`].
pub fn records_serve_args<'a>(dbs: &[&'a str], key: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    let mut args = vec!["serve"];
    args.extend(dbs.iter().flat_map(|db| ["--db", db]));
    args.extend(["--key", key, "--listen", "127.0.0.1:0", "--quiet"]);
    args.extend_from_slice(extra);
    args
}

/// A few common passwords, one a line: the breach list most tests build.
pub const PASSWORDS: &str = "123456\npassword\nqwerty\nletmein\n";
