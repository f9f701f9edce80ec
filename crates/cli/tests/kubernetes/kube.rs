//! The chart with the other sharded databases: a release (`pir release build --shards 2`,
//! fetched with the real `pir fetch`) and a breach database (`pir breach build --shards 2`,
//! checked with the real `pir breach check`), each its own release of the chart (2 shards of
//! one replica each and a front end) from the same image, beside the records one. PIR needs
//! two servers that do not collude: the other is a whole server on this host (`pir mirror
//! serve`, `pir breach serve`), as another operator would run it.

use std::io::Write;
use std::net::SocketAddr;
use std::process::{Output, Stdio};

use super::support::{ok, pir, release_build, write_source, Mirror, Proc, Scratch};
use super::{free_port, open_up, select, template, values, Cluster};

/// Plays the chart as release `name` of `cluster`'s image for the database directory
/// `version` (under the scratch's db/), whose map is signed by `map_pub`, its front end
/// published on a free port with `front` values added; waits until its shards and front end
/// serve (the front end's start-up line holds `serving`). Returns the release (removed when
/// dropped) and the front end's address.
fn play(
    cluster: &Cluster,
    scratch: &Scratch,
    name: &str,
    map_pub: &str,
    front: serde_json::Value,
    serving: &str,
) -> (Cluster, SocketAddr) {
    let release = Cluster {
        release: format!("{}-{name}", cluster.release),
        image: cluster.image.clone(),
        owns_image: false,
    };
    let port = free_port();
    let mut values = values(&release, scratch, &[name], name, port);
    values["shards"]["replicas"] = 1.into();
    values["publicKeys"]["map"] = std::fs::read_to_string(scratch.path(map_pub))
        .unwrap()
        .into();
    for (key, value) in front.as_object().unwrap() {
        values["front"][key] = value.clone();
    }
    let docs = template(&release, scratch, name, &values);
    let config = select(&docs, "ConfigMap", "");
    let shards = select(&docs, "Pod", &format!("pir/database-version: {name}"));
    assert_eq!(shards.len(), 2, "2 shards x 1 replica: {docs:?}");
    let front = select(&docs, "Deployment", "name: front");
    release.play(scratch, name, &[config, shards, front].concat());
    for k in 0..2 {
        release.wait_for(&release.shard_pod(name, k, 0), "shard", "serving shard");
    }
    release.wait_for(
        &format!("{}-front-pod-0", release.release),
        "front",
        serving,
    );
    let addr = format!("127.0.0.1:{port}").parse().unwrap();
    (release, addr)
}

/// A sharded release behind a front end in podman is one mirror of the signed list, a whole
/// mirror on this host the other: `pir fetch` of every scheme gives the files' bytes.
pub(super) fn fetch_through_a_front_end(cluster: &Cluster, scratch: &Scratch) {
    let files = write_source(&scratch.dir.path().join("src"));
    // Now: a manifest expires, and the fetch refuses an expired one (a freeze attack).
    let created = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
        .to_string();
    let build = |out: &str, extra: &[&str]| {
        let extra = [&["--created-unix", created.as_str()][..], extra].concat();
        release_build(scratch.dir.path(), out, "7", &extra);
    };
    build(&scratch.path("db/rel"), &["--shards", "2"]);
    build(&scratch.path("whole-rel"), &[]);
    open_up(scratch.dir.path());
    let front = serde_json::json!({});
    let (_release, addr) = play(
        cluster,
        scratch,
        "rel",
        "vendor.pub",
        front,
        "serving release",
    );
    let mirror = Mirror::start(&scratch.path("whole-rel"), &scratch.path("m1.key"), &[]);
    let list = scratch.path("mirrors.pir");
    ok(&[
        "mirror-list",
        "build",
        "--vendor-key",
        &scratch.path("vendor.key"),
        "--mirror",
        &format!("https://{addr}={}", scratch.path("front.pub")),
        "--mirror",
        &format!("{}={}", mirror.url, scratch.path("m1.pub")),
        "--out",
        &list,
    ]);
    for (name, scheme) in [
        ("pool/main/l/libc6_2.36-9_amd64.deb", "raid-pir"),
        ("pool/main/b/bash_5.2.15_amd64.deb", "chor"),
        ("docs/README", "dpf"),
    ] {
        let out = scratch.path("fetched");
        let fetched = super::support::run(&[
            "fetch",
            name,
            "--mirrors",
            &list,
            "--vendor-pub",
            &scratch.path("vendor.pub"),
            "--out",
            &out,
            "--scheme",
            scheme,
        ]);
        assert!(fetched.status.success(), "{name} {scheme}: {fetched:?}");
        let expected = &files.iter().find(|(n, _)| n == name).unwrap().1;
        assert_eq!(&std::fs::read(&out).unwrap(), expected, "{name} {scheme}");
        std::fs::remove_file(&out).unwrap();
    }
}

/// `pir breach check --servers FILE` of `password` on standard input.
fn check(servers: &str, password: &str) -> Output {
    let mut child = pir()
        .args(["breach", "check", "--servers", servers])
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

/// A sharded breach database behind a front end in podman as breach server 0, a whole
/// server 1 on this host: `pir breach check` gives what two whole servers give.
pub(super) fn breach_check_through_a_front_end(cluster: &Cluster, scratch: &Scratch) {
    let hits = ["password", "letmein"];
    let mut list: Vec<String> = (0..300).map(|i| format!("word{i}")).collect();
    list.extend(hits.map(String::from));
    std::fs::write(scratch.path("pw.txt"), list.join("\n") + "\n").unwrap();
    let build = |out: &str, extra: &[&str]| {
        let text = scratch.path("pw.txt");
        let mut args = vec![
            "breach",
            "build",
            "--format",
            "passwords",
            &text,
            "--out",
            out,
            "--prefix-bits",
            "4",
            "--created-unix",
            "1767225600",
            "--quiet",
        ];
        args.extend_from_slice(extra);
        ok(&args);
    };
    let map_key = scratch.path("map.key");
    build(
        &scratch.path("db/br"),
        &["--shards", "2", "--key", &map_key],
    );
    let whole = scratch.path("pw.db");
    build(&whole, &[]);
    open_up(scratch.dir.path());
    let front = serde_json::json!({"breachServer": 0});
    let (_release, addr) = play(cluster, scratch, "br", "map.pub", front, "breach server 0");
    let serve = |server: &str, key: &str| {
        let key = scratch.path(key);
        let args = [
            "breach", "serve", "--db", &whole, "--server", server, "--key", &key,
        ];
        Proc::start(
            &[&args[..], &["--listen", "127.0.0.1:0"]].concat(),
            "https://",
        )
    };
    let (s0, s1) = (serve("0", "b0.key"), serve("1", "b1.key"));
    let servers = |name: &str, first: String, key: &str| {
        let out = scratch.path(name);
        ok(&[
            "breach",
            "servers",
            "--server",
            &format!("{first}={}", scratch.path(key)),
            "--server",
            &format!("{}={}", s1.url(), scratch.path("b1.pub")),
            "--out",
            &out,
        ]);
        out
    };
    let plain = servers("whole.servers", s0.url(), "b0.pub");
    let sharded = servers("front.servers", format!("https://{addr}"), "front.pub");
    for password in hits.iter().chain(&["not-in-the-list-7c1d"]) {
        let (a, b) = (check(&plain, password), check(&sharded, password));
        let expected = if hits.contains(password) { 5 } else { 0 };
        assert_eq!(a.status.code(), Some(expected), "{password}: {a:?}");
        assert_eq!(
            (b.status.code(), &b.stdout),
            (a.status.code(), &a.stdout),
            "{password}: {b:?}"
        );
    }
}
