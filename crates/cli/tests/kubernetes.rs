//! The deployment in deploy/ really runs: the image from deploy/Containerfile (built by
//! deploy/build-image.sh from the `pir` binary of this build), the Helm chart in
//! deploy/helm/pir rendered by `helm template` and run by `podman kube play` as 2 shards x 2
//! replicas and a front end, and the unchanged `pir get` through the front end; then a
//! sharded release and a sharded breach database as two more releases of the chart from the
//! same image, with the unchanged `pir fetch` and `pir breach check` through their front ends
//! (`kubernetes/kube.rs`).
//!
//! What podman does not do, the test does, and says so (docs/deploy-kubernetes.md): podman
//! 4.3 ignores StatefulSets, so the chart renders with `podman=true` (each StatefulSet replica
//! as a bare Pod of the same name and pod spec); it has no Services and rolls no Deployments,
//! so a TCP relay in this test stands in for the front end's Service, and the upgrade plays
//! the new front pod template beside the old one, moves the relay to it once it serves, then
//! removes the old one (the order of a RollingUpdate with maxSurge 1, maxUnavailable 0).
//!
//! Needs podman (with runc and /etc/containers/containers.conf as .ci/run writes it) and helm;
//! in CI a missing one fails, elsewhere the test is skipped with how to install them.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

#[path = "kubernetes/kube.rs"]
mod kube;
mod support;

use std::collections::HashMap;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use support::{fails_with, ok, require, run, Scratch};

const RECORDS: usize = 2000;
const RECORD_SIZE: usize = 32;

/// Runs `program` with `args`; its output.
fn tool(program: &str, args: &[&str]) -> Output {
    Command::new(program)
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"))
}

/// Runs `program` with `args` and asserts success; its standard output.
fn tool_ok(program: &str, args: &[&str]) -> String {
    let out = tool(program, args);
    assert!(
        out.status.success(),
        "{program} {args:?} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn tools_present() -> bool {
    let podman = tool_runs("podman", &["--version"]);
    let helm = tool_runs("helm", &["version", "--short"]);
    require(
        podman && helm,
        "podman or helm",
        "apt-get install podman runc, write /etc/containers/containers.conf as .ci/run does, \
         and `go install helm.sh/helm/v3/cmd/helm@v3.22.0` with its GOBIN on PATH; .ci/run does \
         all three",
    )
}

fn tool_runs(program: &str, args: &[&str]) -> bool {
    Command::new(program)
        .args(args)
        .output()
        .is_ok_and(|o| o.status.success())
}

/// The repository's deploy/ directory.
fn deploy_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../deploy")
}

/// Everything this run started in podman for one release of the chart, removed when dropped
/// (also when the test fails); the image too if this release built it.
struct Cluster {
    release: String,
    image: String,
    owns_image: bool,
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let pods = tool(
            "podman",
            &[
                "pod",
                "ls",
                "-q",
                "--filter",
                &format!("name=^{}-", self.release),
            ],
        );
        for pod in String::from_utf8_lossy(&pods.stdout).split_whitespace() {
            tool("podman", &["pod", "rm", "-f", "-t", "0", pod]);
        }
        // podman kube play keeps a ConfigMap's volume after the pods that used it.
        for suffix in ["settings", "public-keys", "keys"] {
            tool(
                "podman",
                &["volume", "rm", "-f", &format!("{}-{suffix}", self.release)],
            );
        }
        if self.owns_image {
            tool("podman", &["rmi", "-f", &self.image]);
        }
    }
}

impl Cluster {
    /// Plays `docs` (YAML documents) with `podman kube play`.
    fn play(&self, scratch: &Scratch, name: &str, docs: &[&str]) {
        let file = scratch.path(&format!("{name}.yaml"));
        std::fs::write(&file, docs.join("\n---\n")).unwrap();
        tool_ok("podman", &["kube", "play", &file]);
    }

    /// Waits until the container of pod `pod` has printed `line`; panics with its log if it
    /// has not within three minutes.
    fn wait_for(&self, pod: &str, container: &str, line: &str) {
        let name = format!("{pod}-{container}");
        let start = Instant::now();
        loop {
            let out = tool("podman", &["logs", &name]);
            let log = format!(
                "{}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            if log.contains(line) {
                return;
            }
            assert!(
                start.elapsed() < Duration::from_secs(180),
                "{name} never printed {line:?}: {log}"
            );
            std::thread::sleep(Duration::from_millis(500));
        }
    }

    /// Removes pod `name` at once, as a node failure would.
    fn kill(&self, name: &str) {
        tool_ok("podman", &["pod", "rm", "-f", "-t", "0", name]);
    }

    fn shard_pod(&self, version: &str, k: usize, replica: usize) -> String {
        format!("{}-{version}-shard-{k}-{replica}", self.release)
    }
}

/// A free TCP port on this host (bound and released; the chart publishes the front end on it).
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// The records of database version `version` (1 or 2): different bytes per version.
fn records(version: u8) -> Vec<u8> {
    (0..RECORDS * RECORD_SIZE)
        .map(|i| (i * 37 % 251) as u8 ^ version.wrapping_mul(0x5a))
        .collect()
}

fn record(data: &[u8], index: usize) -> Vec<u8> {
    data[index * RECORD_SIZE..(index + 1) * RECORD_SIZE].to_vec()
}

/// `pir db build --shards 2` of `data` into DB/VERSION, signed by map.key.
fn build_db(scratch: &Scratch, version: &str, data: &[u8]) {
    let input = scratch.path(&format!("{version}.bin"));
    std::fs::write(&input, data).unwrap();
    let out = scratch.path(&format!("db/{version}"));
    ok(&[
        "db",
        "build",
        "--records",
        &input,
        "--record-size",
        &RECORD_SIZE.to_string(),
        "--shards",
        "2",
        "--key",
        &scratch.path("map.key"),
        "--out",
        &out,
    ]);
}

/// Makes `dir` and everything in it readable by the image's user (65532): the scratch
/// directory is private to root, and key files are written 0600.
fn open_up(dir: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let mode = if dir.is_dir() { 0o755 } else { 0o644 };
    std::fs::set_permissions(dir, std::fs::Permissions::from_mode(mode)).unwrap();
    if dir.is_dir() {
        for entry in std::fs::read_dir(dir).unwrap() {
            open_up(&entry.unwrap().path());
        }
    }
}

/// `helm template` of the chart for podman with `versions`, serving `serve`, the front end
/// published on `port`; the rendered YAML documents.
fn render(
    cluster: &Cluster,
    scratch: &Scratch,
    versions: &[&str],
    serve: &str,
    port: u16,
) -> Vec<String> {
    let values = values(cluster, scratch, versions, serve, port);
    template(cluster, scratch, &format!("{serve}-{port}"), &values)
}

/// The chart's values for podman with `versions`, serving `serve`, the front end published on
/// `port`, the keys of the scratch directory.
fn values(
    cluster: &Cluster,
    scratch: &Scratch,
    versions: &[&str],
    serve: &str,
    port: u16,
) -> serde_json::Value {
    let text = |name: &str| std::fs::read_to_string(scratch.path(name)).unwrap();
    let (repository, tag) = cluster.image.rsplit_once(':').unwrap();
    serde_json::json!({
        "podman": true,
        "image": {"repository": repository, "tag": tag, "pullPolicy": "Never"},
        "database": {
            "versions": versions,
            "serve": serve,
            "shards": 2,
            "volume": {
                "persistentVolumeClaim": null,
                "hostPath": {"path": scratch.path("db"), "type": "Directory"},
            },
        },
        "shards": {"replicas": 2},
        "front": {"replicas": 1, "hostPort": port, "shardTimeoutSeconds": 2},
        "keys": {"front": text("front.key"), "shards": [text("shard-0.key"), text("shard-1.key")]},
        "publicKeys": {
            "map": text("map.pub"),
            "shards": [text("shard-0.pub"), text("shard-1.pub")],
        },
    })
}

/// `helm template` of the chart as `cluster`'s release with `values`; the YAML documents.
fn template(
    cluster: &Cluster,
    scratch: &Scratch,
    name: &str,
    values: &serde_json::Value,
) -> Vec<String> {
    // JSON is YAML: the values file is written with serde_json.
    let file = scratch.path(&format!("values-{name}.json"));
    std::fs::write(&file, values.to_string()).unwrap();
    let chart = deploy_dir().join("helm/pir");
    let yaml = tool_ok(
        "helm",
        &[
            "template",
            &cluster.release,
            chart.to_str().unwrap(),
            "-f",
            &file,
        ],
    );
    yaml.split("\n---")
        .map(str::trim)
        .filter(|doc| doc.contains("kind:"))
        .map(String::from)
        .collect()
}

/// The documents of `docs` of `kind` whose text contains `needle`.
fn select<'a>(docs: &'a [String], kind: &str, needle: &str) -> Vec<&'a str> {
    docs.iter()
        .filter(|doc| doc.contains(&format!("\nkind: {kind}\n")) && doc.contains(needle))
        .map(String::as_str)
        .collect()
}

/// A TCP relay on 127.0.0.1 to a backend that can be switched: it stands in for the front
/// end's Service (podman has none). A connection stays with the backend it was opened to, as
/// with kube-proxy.
struct Relay {
    addr: SocketAddr,
    backend: Arc<Mutex<SocketAddr>>,
    /// Connections open, by backend.
    open: Arc<Mutex<HashMap<SocketAddr, usize>>>,
}

impl Relay {
    fn start(backend: SocketAddr) -> Relay {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let backend = Arc::new(Mutex::new(backend));
        let open = Arc::new(Mutex::new(HashMap::new()));
        let (to, count) = (backend.clone(), open.clone());
        std::thread::spawn(move || {
            for client in listener.incoming() {
                let Ok(client) = client else { continue };
                let target = *to.lock().unwrap();
                let Ok(server) = TcpStream::connect(target) else {
                    continue;
                };
                *count.lock().unwrap().entry(target).or_insert(0) += 1;
                let count = count.clone();
                let (c2, s2) = (client.try_clone().unwrap(), server.try_clone().unwrap());
                let up = std::thread::spawn(move || pipe(c2, s2));
                std::thread::spawn(move || {
                    pipe(server, client);
                    let _ = up.join();
                    *count.lock().unwrap().get_mut(&target).unwrap() -= 1;
                });
            }
        });
        Relay {
            addr,
            backend,
            open,
        }
    }

    /// Sends new connections to `backend`; waits (up to 30 s) until the connections to the
    /// old one are closed.
    fn switch(&self, backend: SocketAddr) {
        let old = std::mem::replace(&mut *self.backend.lock().unwrap(), backend);
        let start = Instant::now();
        while self.open.lock().unwrap().get(&old).is_some_and(|&n| n > 0)
            && start.elapsed() < Duration::from_secs(30)
        {
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Copies `from` to `to` until `from` ends, then ends `to`'s writing half.
fn pipe(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = to.shutdown(std::net::Shutdown::Write);
}

/// `pir get INDEX` through the front end at `addr`.
fn get(scratch: &Scratch, addr: SocketAddr, index: usize, out: Option<&str>) -> Output {
    let server = format!("https://{addr}={}", scratch.path("front.pub"));
    let index = index.to_string();
    let cache = scratch.path("cache");
    let mut args = vec![
        "get",
        index.as_str(),
        "--server",
        &server,
        "--cache-dir",
        &cache,
    ];
    if let Some(out) = out {
        args.extend(["--out", out]);
    }
    run(&args)
}

/// Asks until a query through `addr` succeeds (the front end is up); panics after 3 minutes.
fn wait_serving(scratch: &Scratch, addr: SocketAddr) {
    let start = Instant::now();
    loop {
        let out = get(scratch, addr, 0, None);
        if out.status.success() {
            return;
        }
        assert!(
            start.elapsed() < Duration::from_secs(180),
            "the front end at {addr} never answered: {out:?}"
        );
        std::thread::sleep(Duration::from_secs(1));
    }
}

#[test]
fn the_chart_runs_two_shards_of_two_replicas_under_podman() {
    if !tools_present() {
        return;
    }
    let scratch = Scratch::with_keys(&[
        "front", "shard-0", "shard-1", "map", "vendor", "m1", "b0", "b1",
    ]);
    let (v1, v2) = (records(1), records(2));
    build_db(&scratch, "v1", &v1);
    build_db(&scratch, "v2", &v2);
    open_up(scratch.dir.path());

    let run_id = format!("{}-{}", std::process::id(), free_port());
    let cluster = Cluster {
        release: format!("pirtest-{run_id}"),
        image: format!("localhost/pir-test:{run_id}"),
        owns_image: true,
    };
    let built = tool_ok(
        "bash",
        &[
            deploy_dir().join("build-image.sh").to_str().unwrap(),
            env!("CARGO_BIN_EXE_pir"),
            &cluster.image,
        ],
    );
    assert_eq!(built.trim(), cluster.image);

    // Version v1: shards first (their pods, with the ConfigMaps they mount), then the front
    // end, which fetches every shard's hint part when it starts.
    let port = free_port();
    let docs = render(&cluster, &scratch, &["v1"], "v1", port);
    let config = select(&docs, "ConfigMap", "");
    let shards_v1 = select(&docs, "Pod", "pir/database-version: v1");
    assert_eq!(shards_v1.len(), 4, "2 shards x 2 replicas: {docs:?}");
    cluster.play(&scratch, "shards-v1", &[config.clone(), shards_v1].concat());
    for (k, replica) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        cluster.wait_for(
            &cluster.shard_pod("v1", k, replica),
            "shard",
            "serving shard",
        );
    }
    let front = select(&docs, "Deployment", "name: front");
    assert_eq!(front.len(), 1, "{docs:?}");
    cluster.play(&scratch, "front-v1", &[config, front].concat());
    let front_addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_serving(&scratch, front_addr);
    let service = Relay::start(front_addr);

    for index in [0, 999, 1000, 1337, 1999] {
        let out = get(&scratch, service.addr, index, None);
        assert!(out.status.success(), "{index}: {out:?}");
        assert_eq!(out.stdout, record(&v1, index), "record {index}");
    }

    upgrade(&cluster, &scratch, &service, &v1, &v2);
    faults(&cluster, &scratch, service.addr, &v2);
    kube::fetch_through_a_front_end(&cluster, &scratch);
    kube::breach_check_through_a_front_end(&cluster, &scratch);
}

/// The upgrade to v2 under steady queries: v2's shards beside v1's, then a front end serving
/// v2 beside the v1 one, the Service moved to it once it answers, the old front end and the
/// v1 shards removed. No query may fail, and every answer is v1's or v2's record.
fn upgrade(cluster: &Cluster, scratch: &Scratch, service: &Relay, v1: &[u8], v2: &[u8]) {
    let stop = Arc::new(AtomicBool::new(false));
    let steady = {
        let (stop, addr) = (stop.clone(), service.addr);
        let dir = scratch.dir.path().to_path_buf();
        let (v1, v2) = (v1.to_vec(), v2.to_vec());
        std::thread::spawn(move || {
            let scratch = Scratch {
                dir: tempfile::TempDir::new_in(&dir).unwrap(),
            };
            std::fs::copy(dir.join("front.pub"), scratch.path("front.pub")).unwrap();
            let mut answered = (0, 0);
            let mut index = 0;
            while !stop.load(Ordering::SeqCst) {
                index = (index + 7) % RECORDS;
                let out = get(&scratch, addr, index, None);
                assert!(
                    out.status.success(),
                    "a query failed in the upgrade: {out:?}"
                );
                if out.stdout == record(&v1, index) {
                    answered.0 += 1;
                } else {
                    assert_eq!(out.stdout, record(&v2, index), "record {index}");
                    answered.1 += 1;
                }
            }
            answered
        })
    };

    let port = free_port();
    let docs = render(cluster, scratch, &["v1", "v2"], "v2", port);
    let config = select(&docs, "ConfigMap", "");
    let shards_v2 = select(&docs, "Pod", "pir/database-version: v2");
    assert_eq!(shards_v2.len(), 4, "{docs:?}");
    cluster.play(scratch, "shards-v2", &[config.clone(), shards_v2].concat());
    for (k, replica) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        cluster.wait_for(
            &cluster.shard_pod("v2", k, replica),
            "shard",
            "serving shard",
        );
    }
    // podman rolls no Deployment: the new pod template runs as a second Deployment.
    let old_front = format!("name: {}-front\n", cluster.release);
    let new_front = format!("name: {}-front-next\n", cluster.release);
    let front: Vec<String> = select(&docs, "Deployment", "name: front")
        .iter()
        .map(|doc| doc.replacen(&old_front, &new_front, 1))
        .collect();
    assert!(front[0].contains("front-v2.toml"), "{}", front[0]);
    let front: Vec<&str> = front.iter().map(String::as_str).collect();
    cluster.play(scratch, "front-v2", &[config, front].concat());
    let next: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    wait_serving(scratch, next);
    // The old front end leaves once its connections are done (kube-proxy sends it no new
    // ones; SIGTERM lets requests in flight finish).
    service.switch(next);
    tool_ok(
        "podman",
        &[
            "pod",
            "rm",
            "-f",
            "-t",
            "10",
            &format!("{}-front-pod-0", cluster.release),
        ],
    );
    for (k, replica) in [(0, 0), (0, 1), (1, 0), (1, 1)] {
        cluster.kill(&cluster.shard_pod("v1", k, replica));
    }
    std::thread::sleep(Duration::from_secs(3));
    stop.store(true, Ordering::SeqCst);
    let (old, new) = steady.join().expect("no query failed during the upgrade");
    assert!(new > 0, "no query reached v2 ({old} reached v1)");
    println!("steady queries in the upgrade: {old} answered from v1, {new} from v2, none failed");
    for index in [5, 1500] {
        let out = get(scratch, service.addr, index, None);
        assert!(out.status.success(), "{index}: {out:?}");
        assert_eq!(
            out.stdout,
            record(v2, index),
            "record {index} after the upgrade"
        );
    }
}

/// One replica of shard 0 gone: queries still work. Both replicas of shard 1 gone: the clear
/// error naming the shard, and no output file.
fn faults(cluster: &Cluster, scratch: &Scratch, addr: SocketAddr, v2: &[u8]) {
    cluster.kill(&cluster.shard_pod("v2", 0, 0));
    for index in [3, 1500, 1999] {
        let out = get(scratch, addr, index, None);
        assert!(out.status.success(), "{index}: {out:?}");
        assert_eq!(out.stdout, record(v2, index), "record {index}");
    }
    cluster.kill(&cluster.shard_pod("v2", 1, 0));
    cluster.kill(&cluster.shard_pod("v2", 1, 1));
    let file = scratch.path("record-42.bin");
    let out = get(scratch, addr, 42, Some(&file));
    fails_with(&out, "shard 1 has no live replica");
    assert!(out.stdout.is_empty(), "{out:?}");
    assert!(!Path::new(&file).exists(), "a failed query left {file}");
}
