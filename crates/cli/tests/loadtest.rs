//! `pir loadtest` at a small N against real servers: a mirror and a single-server `pir serve`,
//! with abusive connections mixed in; every valid query is served, every abuse is cut off or
//! refused, and the report says so.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

mod support;

use support::{ok, serve_records, Mirror, Scratch, World};

/// `pir loadtest --server SERVER --kind KIND --seconds SECONDS EXTRA --json`: its report.
fn report(server: &str, kind: &str, seconds: &str, extra: &[&str]) -> serde_json::Value {
    let args = [&["loadtest", "--server", server, "--kind", kind], extra].concat();
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
