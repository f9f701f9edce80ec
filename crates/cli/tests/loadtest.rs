//! `pir loadtest` at a small N against real servers: a mirror and a single-server `pir serve`,
//! with abusive connections mixed in; every valid query is served, every abuse is cut off or
//! refused, and the report says so. The Safe Browsing and breach servers at a small bounded
//! rate for a few seconds, open and closed loop: no server error, and the counts add up
//! (sent = served + errors, the intervals sum to the totals).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use support::{ok, serve_records, Mirror, Scratch, World};

/// `pir loadtest --server SERVER --kind KIND --seconds SECONDS EXTRA --json`: its report.
fn report(server: &str, kind: &str, seconds: &str, extra: &[&str]) -> serde_json::Value {
    report_of(kind, seconds, &[&["--server", server], extra].concat())
}

/// `pir loadtest --kind KIND ARGS --seconds SECONDS --json`: its report.
fn report_of(kind: &str, seconds: &str, args: &[&str]) -> serde_json::Value {
    let args = [&["loadtest", "--kind", kind], args].concat();
    let text = ok(&[&args[..], &["--seconds", seconds, "--json"]].concat());
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{e}: {text}"))
}

#[test]
fn a_mirror_serves_every_client_while_abusers_are_cut_off() {
    let world = World::new(1);
    let mirror = Mirror::start(
        &world.path("release"),
        &world.path("m0.key"),
        &[
            "--header-timeout-seconds",
            "1",
            "--body-timeout-seconds",
            "1",
        ],
    );
    let server = format!("{}={}", mirror.url, world.path("m0.pub"));
    let abusive = ["--clients", "4", "--abuse", "--abusers", "2"];
    let r = report(&server, "mirror", "3", &abusive);
    assert_eq!(r["errors"], 0, "{r}");
    assert!(r["served"].as_u64().unwrap() > 0, "{r}");
    assert!(r["latency_ms"]["p99"].as_f64().unwrap() > 0.0, "{r}");
    assert!(r["server_rss_bytes"]["before"].as_u64().unwrap() > 0, "{r}");
    let abuse = &r["abuse"];
    // With 1 s timeouts, slow and idle connections are closed within the run.
    assert!(abuse["slowloris_closed"].as_u64().unwrap() >= 2, "{r}");
    assert!(abuse["idle_closed"].as_u64().unwrap() >= 2, "{r}");
    assert!(
        abuse["longest_until_closed_s"].as_f64().unwrap() < 3.0,
        "{r}"
    );
    assert!(abuse["big_body_413"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(abuse["big_body_other"], 0, "{r}");
    assert!(abuse["trickle_408"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(abuse["trickle_other"], 0, "{r}");
    assert!(abuse["malformed_4xx"].as_u64().unwrap() >= 1, "{r}");
    assert_eq!(abuse["malformed_other"], 0, "{r}");
}

#[test]
fn a_single_server_database_serves_every_client() {
    let scratch = Scratch::with_keys(&["server"]);
    let p = |n: &str| scratch.path(n);
    let data: Vec<u8> = (0..200 * 16).map(|i| (i * 7 % 251) as u8).collect();
    scratch.records_db("records.db", &data, 16);
    let server = serve_records(&[&p("records.db")], &p("server.key"), &[]);
    let target = format!("{}={}", server.url(), p("server.pub"));
    let r = report(&target, "lattice", "2", &["--clients", "3"]);
    assert_eq!(r["errors"], 0, "{r}");
    assert!(r["served"].as_u64().unwrap() > 0, "{r}");
    assert!(r["abuse"].is_null(), "{r}");
    // A server that is not there is an error, not an empty report.
    let refused = support::run(&[
        "loadtest",
        "--server",
        &format!("{}={}", support::dead_url(), p("server.pub")),
        "--kind",
        "lattice",
        "--seconds",
        "1",
    ]);
    assert!(!refused.status.success());
}

/// Checks what every report of `pir loadtest --json` must hold: no server error, every
/// lookup sent served or counted as an error, and the intervals adding up to the totals.
fn assert_counts_add_up(r: &serde_json::Value) {
    let count =
        |v: &serde_json::Value, key: &str| v[key].as_u64().unwrap_or_else(|| panic!("{key}: {r}"));
    assert_eq!(r["errors"], 0, "{r}");
    assert!(r["first_error"].is_null(), "{r}");
    let (sent, served) = (count(r, "sent"), count(r, "served"));
    assert!(served > 0, "{r}");
    assert_eq!(sent, served + count(r, "errors"), "{r}");
    let intervals = r["intervals"].as_array().unwrap();
    assert!(!intervals.is_empty(), "{r}");
    let mut sums = (0, 0, 0);
    for i in intervals {
        assert_eq!(count(i, "sent"), count(i, "ok") + count(i, "errors"), "{i}");
        sums.0 += count(i, "sent");
        sums.1 += count(i, "ok");
        sums.2 += count(i, "errors");
    }
    assert_eq!(sums, (sent, served, count(r, "errors")), "{r}");
}

/// Both servers of a Safe Browsing list of 2,000 hosts (one bucket, looked up by Checklist).
fn safebrowsing_servers(scratch: &Scratch) -> [support::Proc; 2] {
    let list: String = (0..2000).map(|i| format!("host{i}.example\n")).collect();
    let db = scratch.safebrowsing_db("sb.db", &list);
    [0, 1].map(|s| {
        let (server, key) = (s.to_string(), scratch.path(&format!("s{s}.key")));
        let args = support::serve_args(&["safebrowsing", "serve"], &db, &server, &key, &[]);
        support::Proc::start(&args, "https://")
    })
}

#[test]
fn safebrowsing_servers_serve_an_open_and_a_closed_loop() {
    let scratch = Scratch::with_keys(&["s0", "s1"]);
    let servers = safebrowsing_servers(&scratch);
    let spec = |s: usize| {
        format!(
            "{}={}",
            servers[s].url(),
            scratch.path(&format!("s{s}.pub"))
        )
    };
    let pids = servers.each_ref().map(|s| s.child_id().to_string());
    let csv = scratch.path("timeline.csv");
    let open = [
        "--server",
        &spec(0),
        "--server",
        &spec(1),
        "--rate",
        "20",
        "--interval-ms",
        "500",
        "--server-pid",
        &pids[0],
        "--server-pid",
        &pids[1],
        "--csv",
        &csv,
    ];
    let r = report_of("safebrowsing", "2", &open);
    assert_counts_add_up(&r);
    // Open loop: every lookup due in 2 s at 20/s was sent, 10 in each half second.
    assert_eq!(r["sent"], 40, "{r}");
    let intervals = r["intervals"].as_array().unwrap();
    assert_eq!(intervals.len(), 4, "{r}");
    assert!(intervals.iter().all(|i| i["sent"] == 10), "{r}");
    assert!(
        r["target"].as_str().unwrap().contains("Checklist lookups"),
        "{r}"
    );
    assert!(r["server_cpu_ms_per_lookup"].as_f64().unwrap() > 0.0, "{r}");
    assert!(
        r["server_bytes_per_lookup"]["sent"].as_f64().unwrap() > 0.0,
        "{r}"
    );
    let text = std::fs::read_to_string(&csv).unwrap();
    assert_eq!(text.lines().count(), 5, "{text}");
    assert!(
        text.starts_with("t_s,sent,ok,errors,p50_ms,p99_ms,"),
        "{text}"
    );

    // Closed loop, DPF lookups.
    let closed = [
        "--server",
        &spec(0),
        "--server",
        &spec(1),
        "--clients",
        "2",
        "--scheme",
        "dpf",
    ];
    let r = report_of("safebrowsing", "1", &closed);
    assert_counts_add_up(&r);
    assert!(r["target"].as_str().unwrap().contains("Dpf lookups"), "{r}");
}

#[test]
fn breach_servers_report_their_qdp_queue_over_time() {
    let scratch = Scratch::with_keys(&["s0", "s1"]);
    let list: String = (0..500).map(|i| format!("password{i}\n")).collect();
    let db = scratch.breach_db("breach.db", &list);
    let servers = [0, 1].map(|s| {
        let (server, key) = (s.to_string(), scratch.path(&format!("s{s}.key")));
        let extra = ["--qdp-queue", "4", "--qdp-policy", "never"];
        let args = support::serve_args(&["breach", "serve"], &db, &server, &key, &extra);
        support::Proc::start(&args, "https://")
    });
    let spec = |s: usize| {
        format!(
            "{}={}",
            servers[s].url(),
            scratch.path(&format!("s{s}.pub"))
        )
    };
    let pids = servers.each_ref().map(|s| s.child_id().to_string());
    let png = scratch.path("flood.png");
    // The timeline chart needs its font (CI installs it; elsewhere the chart may be skipped).
    let font = support::require(
        std::path::Path::new(pir_bench::plot::FONT_PATH).exists(),
        "the chart font",
        "apt-get install fonts-dejavu-core",
    );
    let (s0, s1) = (spec(0), spec(1));
    let mut args = vec![
        "--server",
        &s0,
        "--server",
        &s1,
        "--rate",
        "10",
        "--interval-ms",
        "500",
        "--server-pid",
        &pids[0],
        "--server-pid",
        &pids[1],
    ];
    if font {
        args.extend(["--plot", &png]);
    }
    let r = report_of("breach", "2", &args);
    assert_counts_add_up(&r);
    assert_eq!(r["sent"], 20, "{r}");
    assert!(
        r["target"].as_str().unwrap().starts_with("breach servers"),
        "{r}"
    );
    // The servers' metrics give the queue depth at every interval and the fallback scans.
    let intervals = r["intervals"].as_array().unwrap();
    for i in intervals {
        assert!(i["qdp_queue_depth"].as_u64().unwrap() <= 8, "{i}");
        assert!(i["qdp_fallback_scans"].is_u64(), "{i}");
    }
    let scans = r["qdp_fallback_scans"].as_u64().unwrap();
    let summed: u64 = intervals
        .iter()
        .map(|i| i["qdp_fallback_scans"].as_u64().unwrap())
        .sum();
    assert_eq!(scans, summed, "{r}");
    // Two QDP answers per check, each from the queue or a fallback scan.
    assert!(scans <= 2 * r["served"].as_u64().unwrap(), "{r}");
    if font {
        assert!(
            std::fs::read(&png).unwrap().starts_with(b"\x89PNG"),
            "{png}"
        );
    }
    // One server alone is refused: a check needs both.
    let one = [
        "loadtest",
        "--server",
        &s0,
        "--kind",
        "breach",
        "--seconds",
        "1",
    ];
    let one = support::run(&one);
    assert!(!one.status.success());
}
