//! `pir oram node` and `pir oram nbd --balancer`: ORAM nodes behind the oblivious load
//! balancer, exported as one NBD device. `nbdcopy --flush` of a 64 MiB image in and out of a
//! two-node export byte for byte, and `kill -9` of a node and of the balancer at random
//! points of a write-heavy run with no flushed write lost.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Stdio};

use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;
use support::{ok, require, Proc};

/// Nodes and a balancer of `size` over them in `dir`: keys, node disks, running nodes.
struct Cluster {
    dir: std::path::PathBuf,
    bstate: String,
    nodes: Vec<Proc>,
    addrs: Vec<String>,
}

impl Cluster {
    fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    fn new(dir: &Path, size: &str, count: usize) -> Cluster {
        let mut cluster = Cluster {
            dir: dir.to_path_buf(),
            bstate: dir.join("bstate").display().to_string(),
            nodes: Vec::new(),
            addrs: Vec::new(),
        };
        ok(&["oram", "owner", "--state", &cluster.bstate]);
        let node_size = ok(&[
            "oram",
            "node-size",
            "--size",
            size,
            "--nodes",
            &count.to_string(),
        ]);
        let node_size = node_size.trim().to_string();
        for i in 0..count {
            ok(&["keygen", "--out", &cluster.path(&format!("n{i}"))]);
            ok(&[
                "oram",
                "init",
                "--state",
                &cluster.path(&format!("node{i}")),
                "--size",
                &node_size,
                "--store",
                &cluster.path(&format!("store{i}")),
            ]);
            let node = cluster.start_node(i, "127.0.0.1:0");
            cluster.addrs.push(node.addr.clone());
            cluster.nodes.push(node);
        }
        let mut args = vec![
            "oram".to_string(),
            "balancer".into(),
            "--state".into(),
            cluster.bstate.clone(),
            "--size".into(),
            size.into(),
        ];
        for i in 0..count {
            args.push("--node".into());
            args.push(format!(
                "https://{}={}",
                cluster.addrs[i],
                cluster.path(&format!("n{i}.pub"))
            ));
        }
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        ok(&args);
        cluster
    }

    /// `pir oram node` number `i` in the shape the issue asks: --state, --key, --listen (and
    /// the balancer's key).
    fn start_node(&self, i: usize, listen: &str) -> Proc {
        let owner = format!("{}.client.pub", self.bstate);
        let state = self.path(&format!("node{i}"));
        let key = self.path(&format!("n{i}.key"));
        let args = [
            "oram", "node", "--state", &state, "--key", &key, "--listen", listen, "--owner", &owner,
        ];
        Proc::start(&args, "https://")
    }

    fn export(&self) -> Proc {
        let args = [
            "oram",
            "nbd",
            "--balancer",
            &self.bstate,
            "--listen",
            "127.0.0.1:0",
        ];
        Proc::start(&args, "nbd://")
    }
}

#[test]
fn nbdcopy_copies_64_mib_in_and_out_of_a_two_node_export() {
    if !require(
        support::has_program("nbdcopy"),
        "nbdcopy",
        "apt-get install libnbd-bin",
    ) {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let cluster = Cluster::new(dir.path(), "64MiB", 2);
    let export = cluster.export();
    let url = format!("nbd://{}", export.addr);
    let image = dir.path().join("image.raw");
    let mut data = vec![0u8; 64 << 20];
    ChaCha20Rng::seed_from_u64(3).fill_bytes(&mut data);
    std::fs::write(&image, &data).unwrap();
    let copy_in = Command::new("nbdcopy")
        .arg("--flush")
        .arg(&image)
        .arg(&url)
        .status()
        .unwrap();
    assert!(copy_in.success(), "nbdcopy into the export failed");
    let back = dir.path().join("back.raw");
    let copy_out = Command::new("nbdcopy")
        .arg(&url)
        .arg(&back)
        .status()
        .unwrap();
    assert!(copy_out.success(), "nbdcopy out of the export failed");
    assert!(
        std::fs::read(&back).unwrap() == data,
        "the round trip differs"
    );
    let mut export = export;
    assert!(support::terminate(export.child_mut()).success());
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

    /// Command 0 read, 1 write, 3 flush.
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

const BLOCK: usize = 4096;
const BLOCKS: u64 = 256;

/// Per block, the value of the last flushed write and the values written after it.
#[derive(Default)]
struct Writes {
    durable: HashMap<u64, Vec<u8>>,
    unflushed: HashMap<u64, Vec<Vec<u8>>>,
    flushes: usize,
}

impl Writes {
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

    fn until_killed(&mut self, nbd: &mut Nbd, rng: &mut ChaCha20Rng) {
        loop {
            let mut batch = Vec::new();
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
            self.flushes += 1;
            for (block, value) in batch {
                self.durable.insert(block, value);
                self.unflushed.remove(&block);
            }
        }
    }
}

fn kill_9_after(pid: u32, delay_ms: u64) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        std::thread::sleep(std::time::Duration::from_millis(delay_ms));
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .stdout(Stdio::null())
            .status();
    })
}

#[test]
fn kill_9_of_a_node_or_the_balancer_loses_no_flushed_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut cluster = Cluster::new(dir.path(), "1MiB", 2);
    let mut rng = ChaCha20Rng::seed_from_u64(5);
    let mut writes = Writes::default();
    for round in 0..8 {
        let export = cluster.export();
        let mut nbd = Nbd::connect(&export.addr).unwrap();
        writes.check(&mut nbd, round);
        // Even rounds kill the balancer, odd ones a node (and then the balancer, which
        // refuses to go on without it).
        let victim = (round % 2 == 1).then(|| rng.random_range(0..2usize));
        let pid = match victim {
            Some(i) => cluster.nodes[i].child_id(),
            None => export.child_id(),
        };
        let killer = kill_9_after(pid, rng.random_range(100..600));
        writes.until_killed(&mut nbd, &mut rng);
        killer.join().unwrap();
        drop(nbd);
        drop(export);
        if let Some(i) = victim {
            let addr = cluster.addrs[i].clone();
            cluster.nodes[i] = cluster.start_node(i, &addr);
        }
    }
    assert!(
        writes.flushes >= 10,
        "only {} flushes before the kills: the test did not exercise recovery",
        writes.flushes
    );
    let export = cluster.export();
    let mut nbd = Nbd::connect(&export.addr).unwrap();
    writes.check(&mut nbd, 99);
}
