//! `pir oram`: files in and out, the NBD export used by real NBD clients (`nbdinfo`,
//! `nbdcopy`, `qemu-img`), bad input refused, and `kill -9` at random points of a write-heavy
//! run over NBD with no flushed write lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use support::{ok, require, run, Proc};

fn init(dir: &Path, size: &str, stores: usize) -> String {
    let state = dir.join("state").display().to_string();
    let mut args = vec![
        "oram".to_string(),
        "init".into(),
        "--state".into(),
        state.clone(),
        "--size".into(),
        size.into(),
    ];
    for i in 0..stores {
        args.push("--store".into());
        args.push(dir.join(format!("store{i}")).display().to_string());
    }
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    ok(&args);
    state
}

fn random_file(path: &Path, len: usize, seed: u64) -> Vec<u8> {
    let mut data = vec![0u8; len];
    ChaCha20Rng::seed_from_u64(seed).fill_bytes(&mut data);
    std::fs::write(path, &data).unwrap();
    data
}

#[test]
fn files_go_in_and_out_and_bad_input_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let state = init(dir.path(), "8MiB", 2);
    let input = dir.path().join("in.bin");
    let data = random_file(&input, 1_000_003, 1);
    ok(&[
        "oram",
        "put",
        "--state",
        &state,
        "--at",
        "5000",
        input.to_str().unwrap(),
    ]);
    let output = dir.path().join("out.bin");
    ok(&[
        "oram",
        "get",
        "--state",
        &state,
        "--at",
        "5000",
        "--length",
        "1000003",
        output.to_str().unwrap(),
    ]);
    assert_eq!(std::fs::read(&output).unwrap(), data);
    let info = ok(&["oram", "info", "--state", &state]);
    assert!(info.contains("8.0 MiB"), "{info}");

    // The store's slot files never contain the plaintext.
    for store in ["store0", "store1"] {
        let raw = std::fs::read(dir.path().join(store).join("slots")).unwrap();
        assert!(
            !raw.windows(32).any(|w| w == &data[4096..4128]),
            "plaintext in {store}"
        );
    }
    // Past the end, a second init over the same state, a bad size, a wrong key.
    let fail = run(&[
        "oram",
        "put",
        "--state",
        &state,
        "--at",
        "8388000",
        input.to_str().unwrap(),
    ]);
    assert!(!fail.status.success());
    assert!(
        String::from_utf8_lossy(&fail.stderr).contains("does not fit"),
        "{fail:?}"
    );
    let again = run(&[
        "oram", "init", "--state", &state, "--size", "8MiB", "--store", "x",
    ]);
    assert!(
        String::from_utf8_lossy(&again.stderr).contains("refusing to overwrite"),
        "{again:?}"
    );
    let odd = run(&[
        "oram", "init", "--state", "s2", "--size", "1000", "--store", "y",
    ]);
    assert!(
        String::from_utf8_lossy(&odd.stderr).contains("multiple of the block size"),
        "{odd:?}"
    );
    std::fs::write(format!("{state}.key"), format!("{}\n", "ab".repeat(32))).unwrap();
    let wrong = run(&["oram", "info", "--state", &state]);
    assert!(
        String::from_utf8_lossy(&wrong.stderr).contains("does not open with this key"),
        "{wrong:?}"
    );
}

#[test]
fn a_store_that_changes_data_is_caught() {
    let dir = tempfile::tempdir().unwrap();
    let state = init(dir.path(), "2MiB", 1);
    let input = dir.path().join("in.bin");
    random_file(&input, 2 << 20, 2);
    ok(&["oram", "put", "--state", &state, input.to_str().unwrap()]);
    // Flip one bit in every 4 KiB of the store.
    let slots = dir.path().join("store0").join("slots");
    let mut raw = std::fs::read(&slots).unwrap();
    for at in (100..raw.len()).step_by(4096) {
        raw[at] ^= 1;
    }
    std::fs::write(&slots, raw).unwrap();
    let out = run(&[
        "oram",
        "get",
        "--state",
        &state,
        dir.path().join("o").to_str().unwrap(),
    ]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("fails authentication"), "{err}");
}

/// `pir oram nbd --state STATE` on a free port of 127.0.0.1, `extra` flags appended (with
/// `--tls-psk` its address is an `nbds://` one).
fn nbd_server(state: &str, extra: &[&str]) -> Proc {
    let args = [
        &["oram", "nbd", "--state", state, "--listen", "127.0.0.1:0"],
        extra,
    ]
    .concat();
    let scheme = if extra.contains(&"--tls-psk") {
        "nbds://"
    } else {
        "nbd://"
    };
    Proc::start(&args, scheme)
}

/// Copies `image` into the export at `url` with `nbdcopy` and back into `back.raw` of `dir`
/// (both copies must succeed); returns what came back.
fn nbdcopy_round_trip(image: &Path, url: &str, dir: &Path) -> Vec<u8> {
    let copy_in = Command::new("nbdcopy")
        .arg(image)
        .arg(url)
        .status()
        .unwrap();
    assert!(copy_in.success());
    let back = dir.join("back.raw");
    let copy_out = Command::new("nbdcopy")
        .arg(url)
        .arg(&back)
        .status()
        .unwrap();
    assert!(copy_out.success());
    std::fs::read(&back).unwrap()
}

/// Runs `qemu-img convert ARGS` into `qemu.raw` of `dir` (which must succeed); returns what it
/// wrote.
fn qemu_img_convert(args: &[&str], dir: &Path) -> Vec<u8> {
    let qemu = dir.join("qemu.raw");
    let convert = Command::new("qemu-img")
        .arg("convert")
        .args(args)
        .arg(&qemu)
        .status()
        .unwrap();
    assert!(convert.success());
    std::fs::read(&qemu).unwrap()
}

fn nbd_tools() -> bool {
    require(
        support::has_program("nbdcopy")
            && support::has_program("nbdinfo")
            && support::has_program("qemu-img"),
        "nbdcopy, nbdinfo and qemu-img",
        "apt-get install libnbd-bin qemu-utils",
    )
}

#[test]
fn real_nbd_clients_copy_an_image_in_and_out_byte_for_byte() {
    if !nbd_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = init(dir.path(), "16MiB", 2);
    let server = nbd_server(&state, &[]);
    let url = format!("nbd://{}", server.addr);
    let info = Command::new("nbdinfo").arg(&url).output().unwrap();
    let text = String::from_utf8_lossy(&info.stdout);
    assert!(
        info.status.success() && text.contains("export-size: 16777216"),
        "{text}"
    );
    assert!(text.contains("can_flush: true"), "{text}");

    // A random image with a zero hole in the middle (nbdcopy sends it as write-zeroes).
    let image = dir.path().join("image.raw");
    let mut data = vec![0u8; 16 << 20];
    ChaCha20Rng::seed_from_u64(3).fill_bytes(&mut data[..6 << 20]);
    ChaCha20Rng::seed_from_u64(4).fill_bytes(&mut data[10 << 20..]);
    std::fs::write(&image, &data).unwrap();
    assert!(
        nbdcopy_round_trip(&image, &url, dir.path()) == data,
        "nbdcopy round trip differs"
    );
    let qemu = qemu_img_convert(&["-f", "raw", "-O", "raw", &url], dir.path());
    assert!(qemu == data, "qemu-img read differs");
    let mut server = server;
    let status = support::terminate(server.child_mut());
    assert!(status.success(), "pir oram nbd did not stop cleanly");
    // Closed cleanly: the next open needs no recovery, and the data is still there.
    let again = dir.path().join("again.raw");
    let out = run(&[
        "oram",
        "get",
        "--state",
        &state,
        "--at",
        "10485760",
        "--length",
        "4096",
        again.to_str().unwrap(),
    ]);
    assert!(out.status.success());
    assert!(!String::from_utf8_lossy(&out.stderr).contains("did not close cleanly"));
    assert_eq!(
        std::fs::read(&again).unwrap(),
        data[10 << 20..(10 << 20) + 4096]
    );
}

#[test]
fn the_tls_psk_export_serves_only_clients_with_the_key() {
    if !nbd_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let state = init(dir.path(), "4MiB", 1);
    // psktool's format: username:hexkey.
    let mut key = [0u8; 32];
    ChaCha20Rng::seed_from_u64(7).fill_bytes(&mut key);
    let keys = dir.path().join("keys.psk");
    std::fs::write(&keys, format!("alice:{}\n", hex::encode(key))).unwrap();
    let wrong = dir.path().join("wrong.psk");
    std::fs::write(&wrong, format!("alice:{}\n", "ab".repeat(32))).unwrap();
    // Not on loopback without asking, never beyond it without TLS.
    let open = run(&["oram", "nbd", "--state", &state, "--listen", "0.0.0.0:0"]);
    assert!(!open.status.success());
    assert!(String::from_utf8_lossy(&open.stderr).contains("--allow-remote"));
    let plain = run(&[
        "oram",
        "nbd",
        "--state",
        &state,
        "--listen",
        "0.0.0.0:0",
        "--allow-remote",
    ]);
    assert!(
        String::from_utf8_lossy(&plain.stderr).contains("--tls-psk"),
        "{plain:?}"
    );
    let server = nbd_server(&state, &["--tls-psk", keys.to_str().unwrap()]);
    // libnbd takes the PSK user from the URI's user part (tls-username= needs a login name).
    let url = |file: &Path| {
        format!(
            "nbds://alice@{}/?tls-psk-file={}",
            server.addr,
            file.display()
        )
    };
    let image = dir.path().join("image.raw");
    let data = random_file(&image, 4 << 20, 8);
    let refused = |target: &str| {
        let out = Command::new("nbdcopy")
            .arg(target)
            .arg(dir.path().join("stolen.raw"))
            .output()
            .unwrap();
        !out.status.success()
            && std::fs::metadata(dir.path().join("stolen.raw")).map_or(true, |m| m.len() == 0)
    };
    assert!(refused(&url(&wrong)), "a wrong key read the disk");
    assert!(
        refused(&format!("nbd://{}", server.addr)),
        "plaintext read the disk"
    );
    assert!(
        nbdcopy_round_trip(&image, &url(&keys), dir.path()) == data,
        "nbdcopy over TLS differs"
    );
    // qemu: a tls-creds-psk object reads keys.psk from a directory.
    let creds = dir.path().join("creds");
    std::fs::create_dir(&creds).unwrap();
    std::fs::copy(&keys, creds.join("keys.psk")).unwrap();
    let (host, port) = server.addr.rsplit_once(':').unwrap();
    let object = format!(
        "tls-creds-psk,id=tls0,endpoint=client,dir={},username=alice",
        creds.display()
    );
    let image =
        format!("driver=nbd,server.type=inet,server.host={host},server.port={port},tls-creds=tls0");
    let convert = ["-O", "raw", "--object", &object, "--image-opts", &image];
    let qemu = qemu_img_convert(&convert, dir.path());
    assert!(qemu == data, "qemu-img over TLS differs");
    let mut server = server;
    assert!(support::terminate(server.child_mut()).success());
}

/// A minimal NBD client (old-style export name, simple replies) for the crash test.
struct Nbd {
    stream: TcpStream,
    cookie: u64,
}

impl Nbd {
    fn connect(addr: &str) -> std::io::Result<Nbd> {
        let mut stream = TcpStream::connect(addr)?;
        let mut greeting = [0u8; 18];
        stream.read_exact(&mut greeting)?;
        assert_eq!(&greeting[..8], b"NBDMAGIC");
        stream.write_all(&3u32.to_be_bytes())?;
        let mut option = Vec::new();
        option.extend_from_slice(b"IHAVEOPT");
        option.extend_from_slice(&1u32.to_be_bytes());
        option.extend_from_slice(&0u32.to_be_bytes());
        stream.write_all(&option)?;
        let mut export = [0u8; 10];
        stream.read_exact(&mut export)?;
        Ok(Nbd { stream, cookie: 0 })
    }

    fn request(
        &mut self,
        command: u16,
        offset: u64,
        data: &[u8],
        length: u32,
    ) -> std::io::Result<Vec<u8>> {
        self.cookie += 1;
        let mut header = Vec::with_capacity(28 + data.len());
        header.extend_from_slice(&0x2560_9513u32.to_be_bytes());
        header.extend_from_slice(&0u16.to_be_bytes());
        header.extend_from_slice(&command.to_be_bytes());
        header.extend_from_slice(&self.cookie.to_be_bytes());
        header.extend_from_slice(&offset.to_be_bytes());
        header.extend_from_slice(&length.to_be_bytes());
        header.extend_from_slice(data);
        self.stream.write_all(&header)?;
        let mut reply = [0u8; 16];
        self.stream.read_exact(&mut reply)?;
        let error = u32::from_be_bytes(reply[4..8].try_into().unwrap());
        if error != 0 {
            return Err(std::io::Error::other(format!("NBD error {error}")));
        }
        let mut out = vec![0u8; if command == 0 { length as usize } else { 0 }];
        self.stream.read_exact(&mut out)?;
        Ok(out)
    }
}

/// The block size of the crash tests' disks, and their number of blocks (1 MiB).
const BLOCK: usize = 4096;
const BLOCKS: u64 = 256;

/// What a crash test wrote over NBD: per block, the value of the last flushed write, and
/// values written after it.
#[derive(Default)]
struct Writes {
    durable: HashMap<u64, Vec<u8>>,
    unflushed: HashMap<u64, Vec<Vec<u8>>>,
    flushes: usize,
}

impl Writes {
    /// Everything durable so far reads back exactly; an unflushed write may or may not be
    /// there (and, when there, is durable from now on).
    fn check(&mut self, nbd: &mut Nbd, round: usize) {
        for block in 0..BLOCKS {
            let got = nbd
                .request(0, block * BLOCK as u64, &[], BLOCK as u32)
                .unwrap();
            let want = self
                .durable
                .get(&block)
                .cloned()
                .unwrap_or(vec![0u8; BLOCK]);
            let pending = self.unflushed.remove(&block).unwrap_or_default();
            assert!(
                got == want || pending.contains(&got),
                "round {round}: block {block} lost its last flushed write"
            );
            if got != want {
                self.durable.insert(block, got);
            }
        }
    }

    /// Writes batches of random blocks, each followed by a flush, until a request fails (the
    /// server or a store was killed).
    fn until_killed(&mut self, nbd: &mut Nbd, rng: &mut ChaCha20Rng) {
        loop {
            let mut batch: Vec<(u64, Vec<u8>)> = Vec::new();
            for _ in 0..rng.random_range(1..8) {
                let block = rng.random_range(0..BLOCKS);
                let mut value = vec![0u8; BLOCK];
                rng.fill_bytes(&mut value);
                self.unflushed.entry(block).or_default().push(value.clone());
                if nbd
                    .request(1, block * BLOCK as u64, &value, BLOCK as u32)
                    .is_err()
                {
                    return;
                }
                batch.push((block, value));
            }
            if nbd.request(3, 0, &[], 0).is_err() {
                return;
            }
            // Flushed: these are now acknowledged.
            self.flushes += 1;
            for (block, value) in batch {
                self.durable.insert(block, value);
                self.unflushed.remove(&block);
            }
        }
    }
}

/// Sends SIGKILL to process `pid` after `delay_ms` milliseconds, on a thread of its own.
fn kill_9_after(pid: u32, delay_ms: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .stdout(Stdio::null())
            .status();
    })
}

/// One round of a crash test: `pir oram nbd` on `state` is started, everything written so far
/// is checked, and a write-heavy run goes on until process `victim` (the NBD server itself when
/// `None`) is killed with SIGKILL after a random delay drawn from `delays` milliseconds.
fn crash_round(
    state: &str,
    round: usize,
    writes: &mut Writes,
    rng: &mut ChaCha20Rng,
    delays: std::ops::Range<u64>,
    victim: Option<u32>,
) {
    let server = nbd_server(state, &[]);
    let mut nbd = Nbd::connect(&server.addr).unwrap();
    writes.check(&mut nbd, round);
    let pid = victim.unwrap_or(server.child_id());
    let killer = kill_9_after(pid, rng.random_range(delays));
    writes.until_killed(&mut nbd, rng);
    killer.join().unwrap();
}

#[test]
fn kill_9_during_writes_loses_no_flushed_write() {
    let dir = tempfile::tempdir().unwrap();
    let state = init(dir.path(), "1MiB", 2);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut writes = Writes::default();
    for round in 0..6 {
        crash_round(&state, round, &mut writes, &mut rng, 50..400, None);
    }
    assert!(
        writes.flushes >= 20,
        "only {} flushes before the kills: the test did not exercise recovery",
        writes.flushes
    );
}

#[test]
fn kill_9_of_a_remote_store_loses_no_flushed_write() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    let state = path("state");
    ok(&["oram", "owner", "--state", &state]);
    let owner = format!("{state}.client.pub");
    let store = |i: usize, listen: &str| {
        let args = [
            "oram",
            "store",
            "--dir",
            &path(&format!("d{i}")),
            "--key",
            &path(&format!("s{i}.key")),
            "--owner",
            &owner,
            "--listen",
            listen,
        ];
        Proc::start(&args, "https://")
    };
    let mut stores = Vec::new();
    for i in 0..2 {
        ok(&["keygen", "--out", &path(&format!("s{i}"))]);
        stores.push(store(i, "127.0.0.1:0"));
    }
    let addrs: Vec<String> = stores.iter().map(|s| s.addr.clone()).collect();
    let specs: Vec<String> = (0..2)
        .map(|i| format!("https://{}={}", addrs[i], path(&format!("s{i}.pub"))))
        .collect();
    ok(&[
        "oram", "init", "--state", &state, "--size", "1MiB", "--store", &specs[0], "--store",
        &specs[1],
    ]);
    // The stores hold only sealed slots and their shape.
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let mut writes = Writes::default();
    for round in 0..4 {
        let victim = rng.random_range(0..2usize);
        let pid = stores[victim].child_id();
        crash_round(&state, round, &mut writes, &mut rng, 50..300, Some(pid));
        // The client refused to go on without the store (the round is over); bring it back.
        stores[victim] = store(victim, &addrs[victim]);
    }
    assert!(
        writes.flushes >= 10,
        "only {} flushes before the kills",
        writes.flushes
    );
}

#[test]
fn a_store_serves_only_its_owner() {
    let dir = tempfile::tempdir().unwrap();
    let path = |name: &str| dir.path().join(name).display().to_string();
    ok(&["keygen", "--out", &path("s")]);
    let store_args = |owner: Option<&str>| {
        let mut args = vec![
            "oram".to_string(),
            "store".into(),
            "--dir".into(),
            path("d"),
        ];
        args.extend([
            "--key".into(),
            path("s.key"),
            "--listen".into(),
            "127.0.0.1:0".into(),
        ]);
        if let Some(owner) = owner {
            args.extend(["--owner".into(), owner.to_string()]);
        }
        args
    };
    // No owner, no store.
    let args = store_args(None);
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let refused = run(&args);
    assert!(!refused.status.success());
    assert!(
        String::from_utf8_lossy(&refused.stderr).contains("--owner"),
        "{refused:?}"
    );

    let (alice, mallory, eve) = (path("alice"), path("mallory"), path("eve"));
    let made = ok(&["oram", "owner", "--state", &alice]);
    assert!(made.contains("alice.client.pub"), "{made}");
    let mode = std::fs::metadata(format!("{alice}.client.key")).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
    let args = store_args(Some(&format!("{alice}.client.pub")));
    let args: Vec<&str> = args.iter().map(String::as_str).collect();
    let store = Proc::start(&args, "https://");
    let spec = format!("https://{}={}", store.addr, path("s.pub"));
    ok(&[
        "oram", "init", "--state", &alice, "--size", "1MiB", "--store", &spec,
    ]);
    let input = dir.path().join("in.bin");
    let data = random_file(&input, 300_000, 11);
    ok(&["oram", "put", "--state", &alice, input.to_str().unwrap()]);
    let slots = dir.path().join("d").join("slots");
    let before = std::fs::read(&slots).unwrap();

    // Another key, and no key at all: refused, and not one slot changes.
    ok(&["oram", "owner", "--state", &mallory]);
    let other = run(&[
        "oram", "init", "--state", &mallory, "--size", "1MiB", "--store", &spec,
    ]);
    assert!(!other.status.success(), "{other:?}");
    let none = run(&[
        "oram", "init", "--state", &eve, "--size", "1MiB", "--store", &spec,
    ]);
    assert!(!none.status.success());
    assert!(
        String::from_utf8_lossy(&none.stderr).contains("pir oram owner --state"),
        "{none:?}"
    );
    assert!(
        std::fs::read(&slots).unwrap() == before,
        "a stranger changed the slots"
    );

    // The owner still reads its data.
    let out = dir.path().join("out.bin");
    ok(&[
        "oram",
        "get",
        "--state",
        &alice,
        "--length",
        "300000",
        out.to_str().unwrap(),
    ]);
    assert!(std::fs::read(&out).unwrap() == data);
}

/// Whether this process may mount a small tmpfs in a private mount namespace (root, with
/// `unshare` from util-linux): the full-disk test's file system.
fn can_mount_tmpfs() -> bool {
    Command::new("unshare")
        .args([
            "-m",
            "sh",
            "-c",
            "d=$(mktemp -d) && mount -t tmpfs -o size=1m tmpfs \"$d\"",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

#[test]
fn init_checks_free_space_and_a_full_disk_still_opens_for_reads() {
    if !require(
        can_mount_tmpfs(),
        "a private tmpfs mount (root and unshare)",
        "run the tests as root with util-linux installed",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let small = dir.path().join("small");
    std::fs::create_dir(&small).unwrap();
    let input = dir.path().join("in.bin");
    let data = random_file(&input, 256 << 10, 9);
    // Everything on the 6 MiB file system happens inside the namespace; the mount goes with it.
    let script = r#"
        set -u
        mount -t tmpfs -o size=6m tmpfs "$D" || exit 20
        if "$PIR" oram init --state "$D/big" --size 1MiB --store "$D/bigstore" 2>"$OUT/big.err"; then exit 21; fi
        [ ! -e "$D/bigstore/slots" ] || exit 22
        "$PIR" oram init --state "$D/state" --size 256KiB --store "$D/store" || exit 23
        "$PIR" oram put --state "$D/state" "$OUT/in.bin" || exit 24
        dd if=/dev/zero of="$D/fill" bs=4k 2>/dev/null
        [ "$(stat -f -c %a "$D")" -eq 0 ] || exit 25
        "$PIR" oram get --state "$D/state" "$OUT/out1.bin" || exit 26
        "$PIR" oram get --state "$D/state" "$OUT/out2.bin" || exit 27
    "#;
    let status = Command::new("unshare")
        .args(["-m", "sh", "-c", script])
        .env("PIR", env!("CARGO_BIN_EXE_pir"))
        .env("PIR_STATE_DIR", dir.path())
        .env("D", &small)
        .env("OUT", dir.path())
        .status()
        .unwrap();
    let big = std::fs::read_to_string(dir.path().join("big.err")).unwrap_or_default();
    assert!(
        status.success(),
        "step {:?} failed; init said: {big}",
        status.code()
    );
    assert!(
        big.contains("not enough disk space") && big.contains("MiB free"),
        "{big}"
    );
    for out in ["out1.bin", "out2.bin"] {
        assert!(
            std::fs::read(dir.path().join(out)).unwrap() == data,
            "{out} differs"
        );
    }
}
