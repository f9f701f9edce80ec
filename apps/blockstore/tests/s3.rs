//! The S3 object store (`--store s3://BUCKET/PREFIX`) against a real S3-compatible server,
//! SeaweedFS's `weed` on loopback (built by `.ci/weed.sh` from the Go module proxy): data in
//! and out, levels as objects with no plaintext, a tampered object and an older copy of an
//! object put back are caught, and `kill -9` of the server loses no flushed write.
//!
//! The store reads its endpoint and credentials from the process environment, so the tests
//! run one at a time and set the environment under a lock. The four checks share one server
//! (each under its own prefix, with its own state file): a weed start takes about 15 s on an
//! idle machine, and CI's time is short.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;
#[path = "../../../crates/cli/tests/support/require.rs"]
mod require;

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clap::Parser;
use common::*;
use object_store::aws::AmazonS3Builder;
use object_store::path::Path as ObjectPath;
use object_store::{GetOptions, ObjectStore, PutOptions, PutPayload};
use pir_blockstore::command::{self, OramCommand};
use pir_blockstore::nbd::export::ExportOptions;
use pir_blockstore::nbd::listen::Listener;
use pir_blockstore::{Disk, DiskError, StoreSpec};
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use require::require;

const BUCKET: &str = "pir-oram-test";
const INSTALL: &str = "bash .ci/weed.sh builds SeaweedFS's weed into ~/.cache/pir-ci/bin";

/// One test at a time: the store's settings are the process environment.
static SERIAL: Mutex<()> = Mutex::new(());

/// `weed` on PATH, or in the CI cache `.ci/weed.sh` fills.
fn weed_binary() -> Option<PathBuf> {
    let runs = |p: &Path| {
        Command::new(p)
            .arg("version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if runs(Path::new("weed")) {
        return Some(PathBuf::from("weed"));
    }
    let cache = std::env::var_os("XDG_CACHE_HOME")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache")))?;
    let cached = cache.join("pir-ci/bin/weed");
    runs(&cached).then_some(cached)
}

/// `N` distinct free loopback ports: every listener is held until all are chosen, so the
/// kernel cannot hand the same port out twice.
fn free_ports<const N: usize>() -> [u16; N] {
    let listeners: Vec<TcpListener> = (0..N)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap())
        .collect();
    std::array::from_fn(|i| listeners[i].local_addr().unwrap().port())
}

/// The ports of one `weed server`: HTTP and gRPC of each of its four parts, all given
/// explicitly (weed's default gRPC port is HTTP + 10000, which may be taken or collide).
#[derive(Clone, Copy)]
struct Ports {
    s3: u16,
    master: u16,
    volume: u16,
    filer: u16,
    s3_grpc: u16,
    master_grpc: u16,
    volume_grpc: u16,
    filer_grpc: u16,
}

/// A `weed server` with S3 on loopback, its data and log in `dir`.
struct Weed {
    binary: PathBuf,
    dir: PathBuf,
    ports: Ports,
    child: Option<Child>,
}

/// How long a starting weed may take to accept an object write (seconds). It needs about 15 s
/// on an idle machine (the filer's lock service comes up last); CI machines are shared.
const START_SECONDS: u64 = 300;

impl Weed {
    fn start(binary: PathBuf, dir: &Path) -> Weed {
        let [s3, master, volume, filer, s3_grpc, master_grpc, volume_grpc, filer_grpc] =
            free_ports();
        let mut weed = Weed {
            binary,
            dir: dir.to_path_buf(),
            ports: Ports {
                s3,
                master,
                volume,
                filer,
                s3_grpc,
                master_grpc,
                volume_grpc,
                filer_grpc,
            },
            child: None,
        };
        weed.run();
        weed
    }

    fn endpoint(&self) -> String {
        format!("http://127.0.0.1:{}", self.ports.s3)
    }

    fn log(&self) -> PathBuf {
        self.dir.join("weed.log")
    }

    /// Starts the server (on the same ports and data as before, for a restart) and waits until
    /// it serves.
    fn run(&mut self) {
        let data = self.dir.join("data");
        std::fs::create_dir_all(&data).unwrap();
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.log())
            .unwrap();
        let p = self.ports;
        let mut command = Command::new(&self.binary);
        // Not the store's settings of an earlier test in this process: weed takes
        // AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY as an identity and then refuses the
        // anonymous requests `probe` makes (403).
        for (name, _) in std::env::vars_os() {
            if name.to_string_lossy().starts_with("AWS_") {
                command.env_remove(name);
            }
        }
        let child = command
            .args([
                "server",
                // Loopback only: without -ip weed advertises the machine's own address.
                "-ip=127.0.0.1",
                "-ip.bind=127.0.0.1",
                &format!("-dir={}", data.display()),
                "-s3",
                &format!("-s3.port={}", p.s3),
                &format!("-s3.port.grpc={}", p.s3_grpc),
                &format!("-master.port={}", p.master),
                &format!("-master.port.grpc={}", p.master_grpc),
                &format!("-volume.port={}", p.volume),
                &format!("-volume.port.grpc={}", p.volume_grpc),
                &format!("-filer.port={}", p.filer),
                &format!("-filer.port.grpc={}", p.filer_grpc),
                // The HTTP sockets beside the data, not in the shared /tmp.
                &format!(
                    "-filer.localSocket={}",
                    self.dir.join("filer.sock").display()
                ),
                &format!("-s3.localSocket={}", self.dir.join("s3.sock").display()),
                // No traffic off the machine.
                "-master.telemetry=false",
                // Small volumes, as many as the disk holds: objects are rewritten often.
                "-master.volumeSizeLimitMB=64",
                "-volume.max=0",
                // Catalog servers on fixed ports: not needed, and they would collide.
                "-s3.port.iceberg=0",
                "-s3.port.lance=0",
            ])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
        let started = Instant::now();
        self.wait_ready();
        eprintln!(
            "s3 test: weed took {:.1} s to serve",
            started.elapsed().as_secs_f64()
        );
    }

    /// Waits until an object written through the S3 port reads back: the bucket is accepted
    /// seconds before the volume server and the filer's lock service take object writes.
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(START_SECONDS);
        loop {
            let Err(last) = self.probe() else { return };
            let exited = self.child.as_mut().and_then(|c| c.try_wait().unwrap());
            if exited.is_some() || Instant::now() >= deadline {
                let log = std::fs::read_to_string(self.log()).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "weed did not serve S3 on {} within {START_SECONDS} s (exited: {exited:?}; \
                     last probe: {last}); the end of its log:\n{}",
                    self.endpoint(),
                    tail.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Creates the bucket (or finds it), writes a small object and reads it back, unsigned
    /// (weed with no identities configured takes anonymous requests).
    fn probe(&self) -> Result<(), String> {
        let bucket = self.http("PUT", &format!("/{BUCKET}"), b"")?;
        if bucket.0 != 200 && bucket.0 != 409 {
            return Err(format!("bucket: {}", bucket.0));
        }
        let body = b"ready";
        let put = self.http("PUT", &format!("/{BUCKET}/ready"), body)?;
        if put.0 != 200 {
            return Err(format!("object write: {}", put.0));
        }
        let get = self.http("GET", &format!("/{BUCKET}/ready"), b"")?;
        if get.0 != 200 || !get.1.windows(body.len()).any(|w| w == body) {
            return Err(format!("object read: {}", get.0));
        }
        Ok(())
    }

    /// One HTTP/1.1 request to the S3 port: the status and the raw reply.
    fn http(&self, method: &str, path: &str, body: &[u8]) -> Result<(u16, Vec<u8>), String> {
        let mut s = TcpStream::connect(("127.0.0.1", self.ports.s3)).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_secs(20)))
            .map_err(|e| e.to_string())?;
        let head = format!(
            "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{}\r\nContent-Length: {}\r\n\
             Connection: close\r\n\r\n",
            self.ports.s3,
            body.len()
        );
        s.write_all(head.as_bytes()).map_err(|e| e.to_string())?;
        s.write_all(body).map_err(|e| e.to_string())?;
        let mut reply = Vec::new();
        s.read_to_end(&mut reply).map_err(|e| e.to_string())?;
        let status = String::from_utf8_lossy(&reply)
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| "no HTTP status".to_string())?;
        Ok((status, reply))
    }

    /// `kill -9`, then the gRPC sockets weed keeps in /tmp under its ports.
    fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            child.kill().unwrap();
            child.wait().unwrap();
        }
        let p = self.ports;
        for (part, port) in [
            ("master", p.master_grpc),
            ("volume", p.volume_grpc),
            ("filer", p.filer_grpc),
            ("s3", p.s3_grpc),
        ] {
            let _ = std::fs::remove_file(format!("/tmp/seaweedfs-{part}-grpc-{port}.sock"));
        }
    }

    fn restart(&mut self) {
        self.kill();
        self.run();
    }
}

impl Drop for Weed {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A server, its environment set, a runtime for the store and the test's own object client.
struct Fixture {
    weed: Weed,
    dir: tempfile::TempDir,
    runtime: tokio::runtime::Runtime,
    objects: Arc<dyn ObjectStore>,
    /// The object prefix and state file name of the check running now ([`Fixture::check`]).
    prefix: String,
    _serial: std::sync::MutexGuard<'static, ()>,
}

fn fixture() -> Option<Fixture> {
    let serial = SERIAL.lock().unwrap_or_else(|e| e.into_inner());
    let binary = weed_binary();
    if !require(binary.is_some(), "SeaweedFS's weed", INSTALL) {
        return None;
    }
    let dir = tempfile::tempdir().unwrap();
    let weed = Weed::start(binary.unwrap(), dir.path());
    for name in [
        "AWS_ENDPOINT_URL_S3",
        "AWS_ENDPOINT",
        "AWS_PROFILE",
        "AWS_SESSION_TOKEN",
    ] {
        std::env::remove_var(name);
    }
    std::env::set_var("AWS_ENDPOINT_URL", weed.endpoint());
    std::env::set_var("AWS_ACCESS_KEY_ID", "pir-test");
    std::env::set_var("AWS_SECRET_ACCESS_KEY", "pir-test-secret");
    std::env::set_var("AWS_DEFAULT_REGION", "us-east-1");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let objects = AmazonS3Builder::from_env()
        .with_bucket_name(BUCKET)
        .with_allow_http(true)
        .build()
        .unwrap();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap();
    Some(Fixture {
        weed,
        dir,
        runtime,
        objects: Arc::new(objects),
        prefix: String::from("disk/one"),
        _serial: serial,
    })
}

impl Fixture {
    /// The next check's store: a prefix and a state file of its own on the same server.
    fn check(&mut self, name: &str) {
        self.prefix = format!("disk/{name}");
    }

    fn state(&self) -> PathBuf {
        self.dir.path().join(self.prefix.replace('/', "-"))
    }

    fn init(&self, size: u64, block: u32) -> Result<(), DiskError> {
        let store = StoreSpec::parse(&format!("s3://{BUCKET}/{}", self.prefix))?;
        Disk::init(
            &self.state(),
            size,
            block,
            &[store],
            Some(self.runtime.handle()),
        )
        .map(|_| ())
    }

    fn open(&self) -> Result<Disk, DiskError> {
        Disk::open(&self.state(), Some(self.runtime.handle()))
    }

    /// Every object under the prefix, with its bytes (two listing levels: the marker, and
    /// `p<partition>/l<level>r<region>`).
    fn snapshot(&self) -> BTreeMap<String, Vec<u8>> {
        let prefix = ObjectPath::from(self.prefix.as_str());
        self.runtime.block_on(async {
            let top = self
                .objects
                .list_with_delimiter(Some(&prefix))
                .await
                .unwrap();
            let mut metas = top.objects;
            for dir in &top.common_prefixes {
                metas.extend(
                    self.objects
                        .list_with_delimiter(Some(dir))
                        .await
                        .unwrap()
                        .objects,
                );
            }
            let mut out = BTreeMap::new();
            for meta in metas {
                let bytes = self
                    .objects
                    .get_opts(&meta.location, GetOptions::default())
                    .await
                    .unwrap()
                    .bytes()
                    .await
                    .unwrap();
                out.insert(meta.location.to_string(), bytes.to_vec());
            }
            out
        })
    }

    fn put(&self, name: &str, bytes: &[u8]) {
        let path = ObjectPath::from(name);
        let payload = PutPayload::from(bytes.to_vec());
        self.runtime
            .block_on(self.objects.put_opts(&path, payload, PutOptions::default()))
            .unwrap();
    }

    /// Opens the disk and reads all of it.
    fn read_all(&self) -> Result<Vec<u8>, DiskError> {
        let mut disk = self.open()?;
        let data = disk.read_at(0, SIZE)?;
        disk.close()?;
        Ok(data)
    }
}

fn random(len: usize, seed: u64) -> Vec<u8> {
    let mut data = vec![0u8; len];
    ChaCha20Rng::seed_from_u64(seed).fill_bytes(&mut data);
    data
}

/// 512 blocks of 1 KiB: 16 partitions, levels 3 to 5 of each on the store.
const SIZE: u64 = 512 * 1024;
const BLOCK: u32 = 1024;

fn fill(f: &Fixture, seed: u64) -> Vec<u8> {
    let data = random(SIZE as usize, seed);
    let mut disk = f.open().unwrap();
    disk.write_at(0, &data).unwrap();
    disk.close().unwrap();
    data
}

fn is_tampered(result: &Result<Vec<u8>, DiskError>) -> bool {
    matches!(result, Err(e) if e.to_string().contains("fails authentication"))
}

/// `pir oram ...` in this process, through the command layer the binary dispatches to.
#[derive(clap::Parser)]
struct Pir {
    #[command(subcommand)]
    oram: OramCommand,
}

fn pir(f: &Fixture, args: &[&str]) -> anyhow::Result<()> {
    let cli = Pir::try_parse_from(std::iter::once("oram").chain(args.iter().copied())).unwrap();
    f.runtime.block_on(command::run(cli.oram))
}

/// The four checks on one server, in order (the restarts of the last one end it).
#[test]
fn the_s3_store_against_a_real_server() {
    let start = Instant::now();
    let Some(mut f) = fixture() else { return };
    // Where the time goes (on stderr, shown with --nocapture or on failure): weed's start-up
    // is most of this test's wall time.
    let phase = |name: &str| eprintln!("s3 test: {name} at {:.1} s", start.elapsed().as_secs_f64());
    phase("weed serving");
    f.check("in-and-out");
    data_goes_in_and_out_as_level_objects_without_plaintext(&f);
    phase("in-and-out done");
    f.check("changed");
    a_changed_object_is_caught(&f);
    phase("changed done");
    f.check("older");
    an_older_copy_of_an_object_put_back_is_caught(&f);
    phase("older done");
    f.check("killed");
    kill_9_of_the_object_server_loses_no_flushed_write(&mut f);
    phase("killed done");
}

fn data_goes_in_and_out_as_level_objects_without_plaintext(f: &Fixture) {
    let state = f.state().display().to_string();
    let store = format!("s3://{BUCKET}/{}", f.prefix);
    let init = [
        "init", "--state", &state, "--size", "512KiB", "--block", "1KiB",
    ];
    pir(f, &[&init[..], &["--store", &store]].concat()).unwrap();
    let input = f.dir.path().join("in.bin");
    let output = f.dir.path().join("out.bin");
    let piece = random(70_001, 9);
    std::fs::write(&input, &piece).unwrap();
    let (input, output) = (input.to_str().unwrap(), output.to_str().unwrap());
    pir(f, &["put", "--state", &state, "--at", "5000", input]).unwrap();
    let get = [
        "get", "--state", &state, "--at", "5000", "--length", "70001", output,
    ];
    pir(f, &get).unwrap();
    assert_eq!(std::fs::read(output).unwrap(), piece);

    // The NBD export over the object store: a write, a flush, a read back.
    let disk = f.open().unwrap();
    let socket = f.dir.path().join("nbd.sock");
    f.runtime.block_on(async {
        let running = Running::start(
            disk,
            Listener::unix(&socket).unwrap(),
            ExportOptions::default(),
        );
        let mut s = tokio::net::UnixStream::connect(&socket).await.unwrap();
        greet(&mut s).await.unwrap();
        go(&mut s).await.unwrap();
        let data = random(9000, 10);
        assert_eq!(write_flush_read(&mut s, 1000, &data).await, data);
        drop(s);
        running.stop().await.unwrap();
    });

    let data = fill(f, 1);
    assert_eq!(f.read_all().unwrap(), data);

    let objects = f.snapshot();
    let slot = u64::from(BLOCK) + 28;
    for (name, bytes) in &objects {
        let leaf = name.strip_prefix(&format!("{}/", f.prefix)).unwrap();
        if leaf == pir_blockstore::s3::MARKER {
            continue;
        }
        // p<partition>/l<level>r<region>, a whole level of sealed slots.
        let (part, level) = leaf.split_once('/').unwrap();
        assert!(part.starts_with('p') && level.starts_with('l'), "{name}");
        assert_eq!(bytes.len() as u64 % slot, 0, "{name}");
        assert!(
            !bytes.windows(64).any(|w| w == &data[4096..4160]),
            "plaintext in {name}"
        );
    }
    assert!(objects.len() > 16, "{:?}", objects.keys());

    // A prefix that holds a store is never formatted again, even for another state.
    let other = Disk::init(
        &f.dir.path().join("other"),
        SIZE,
        BLOCK,
        &[StoreSpec::parse(&format!("s3://{BUCKET}/{}", f.prefix)).unwrap()],
        Some(f.runtime.handle()),
    );
    let refused = other.unwrap_err().to_string();
    assert!(refused.contains("already holds an ORAM store"), "{refused}");
    assert_eq!(f.read_all().unwrap(), data);
}

fn a_changed_object_is_caught(f: &Fixture) {
    f.init(SIZE, BLOCK).unwrap();
    fill(f, 2);
    // One flipped byte in every slot of every level object: whichever slot a read touches
    // first fails authentication.
    let slot = BLOCK as usize + 28;
    for (name, mut bytes) in f.snapshot() {
        if name.ends_with(pir_blockstore::s3::MARKER) {
            continue;
        }
        for at in (20..bytes.len()).step_by(slot) {
            bytes[at] ^= 1;
        }
        f.put(&name, &bytes);
    }
    let result = f.read_all();
    assert!(is_tampered(&result), "{:?}", result.map(|d| d.len()));
}

fn an_older_copy_of_an_object_put_back_is_caught(f: &Fixture) {
    f.init(SIZE, BLOCK).unwrap();
    fill(f, 3);
    let old = f.snapshot();
    let new_data = fill(f, 4);
    let new = f.snapshot();
    let state = std::fs::read(f.state()).unwrap();
    let changed: Vec<&String> = new
        .keys()
        .filter(|k| old.get(*k).is_some_and(|o| o != &new[*k]))
        .collect();
    assert!(!changed.is_empty());
    // Each older copy alone: an object the state references fails authentication when it is
    // read; one it does not (the level's other region) is never read. Never old data. Up to 12
    // objects, stopping once one was caught and 4 were tried (each try reads every object and
    // the whole disk through the server: most of this test's time).
    let mut caught = 0;
    for (tried, name) in changed.iter().take(12).enumerate() {
        if caught > 0 && tried >= 4 {
            break;
        }
        std::fs::write(f.state(), &state).unwrap();
        // Back to the state's objects (objects it does not reference may stay).
        for (k, v) in f.snapshot() {
            if let Some(want) = new.get(&k).filter(|want| **want != v) {
                f.put(&k, want);
            }
        }
        f.put(name, &old[*name]);
        let result = f.read_all();
        if is_tampered(&result) {
            caught += 1;
        } else {
            assert_eq!(result.unwrap(), new_data, "{name}");
        }
    }
    assert!(caught > 0, "no older copy was caught");
}

fn kill_9_of_the_object_server_loses_no_flushed_write(f: &mut Fixture) {
    f.init(SIZE, BLOCK).unwrap();
    let data = random(SIZE as usize, 5);
    let mut disk = f.open().unwrap();
    disk.write_at(0, &data).unwrap();
    disk.flush().unwrap();
    // Writes after the flush, then the server dies with the client still open.
    disk.write_at(0, &random(SIZE as usize / 2, 6)).unwrap();
    f.weed.kill();
    drop(disk);
    f.weed.restart();
    // The last session did not close: opening rebuilds every partition from the flushed state.
    let mut disk = f.open().unwrap();
    assert!(disk.recovered());
    assert_eq!(disk.read_at(0, SIZE).unwrap(), data);
    let later = random(SIZE as usize, 7);
    disk.write_at(0, &later).unwrap();
    disk.flush().unwrap();
    f.weed.restart();
    drop(disk);
    assert_eq!(f.read_all().unwrap(), later);
}

/// `pir bench --oram`'s library driver over the object store (not part of the suite: it
/// measures, it asserts nothing about speed). `cargo test -p pir-blockstore --test s3 --
/// --ignored --nocapture bench`; `PIR_S3_BENCH_MIB` sets the size (16).
#[test]
#[ignore]
fn bench_over_the_object_store() {
    let Some(f) = fixture() else { return };
    let mib: u64 = std::env::var("PIR_S3_BENCH_MIB")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(16);
    let store = StoreSpec::parse(&format!("s3://{BUCKET}/bench")).unwrap();
    let options = pir_blockstore::bench::OramBenchOptions {
        size: mib << 20,
        block: 4096,
        stores: vec![store],
        runtime: Some(f.runtime.handle().clone()),
        ops: 2000,
        runs: 3,
        in_flight: 32,
        dir: f.dir.path().to_path_buf(),
    };
    let report = pir_blockstore::bench::run(&options, &mut |_, _| {}).unwrap();
    let gets = report.seeks_per_op();
    let puts = report.writes_per_op();
    println!(
        "s3 (weed, loopback) {mib} MiB, 4 KiB blocks, 32 in flight: {:.0} ops/s, p50 {:.1} ms, \
         p99 {:.1} ms, {gets:.2} GETs + {puts:.2} PUTs = {:.2} requests per operation, \
         {:.0} KiB moved per operation, fill {:.1} s",
        report.ops_per_second(),
        report.latency(0.5).as_secs_f64() * 1e3,
        report.latency(0.99).as_secs_f64() * 1e3,
        gets + puts,
        report.bytes_per_op(4096 + 28) / 1024.0,
        report.fill.as_secs_f64(),
    );
}
