//! The load generator without the binary: its query planning, its statistics and report, and
//! a short bounded run against a real mirror served over HTTPS on 127.0.0.1 in this process.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::Arc;

use pir_bench::loadtest::{
    self, chor_source, percentile, AbuseCounts, IntervalRow, Kind, KneeRule, Load, Plan, Report,
};
use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::SecretKey;
use pir_updates::release;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

#[test]
fn a_mirror_plan_is_distinct_chor_queries_of_one_size() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let source = chor_source(100, 256, [9; 32], &mut rng).unwrap();
    let requests = source.requests();
    assert_eq!(requests.len(), loadtest::DISTINCT_QUERIES);
    assert_eq!(source.lookups().len(), loadtest::DISTINCT_QUERIES);
    for request in &requests {
        let envelope = wire::decode_envelope(request, request.len()).unwrap();
        assert_eq!(envelope.kind, MessageKind::Query);
        assert_eq!(envelope.scheme, SchemeId::Chor);
        assert_eq!(request.len(), requests[0].len(), "queries differ in size");
    }
    let mut distinct = requests.to_vec();
    distinct.sort();
    distinct.dedup();
    assert!(distinct.len() > 1, "every query is the same");
    // An answer carries at least one block.
    assert!(source.max_reply() > 256, "{}", source.max_reply());
    assert!(
        source
            .what()
            .starts_with("mirror, release 0909090909090909: 100 blocks of 256 B"),
        "{}",
        source.what()
    );
}

#[test]
fn a_mirror_plan_over_no_blocks_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    assert!(chor_source(0, 256, [9; 32], &mut rng).is_err());
    assert!(chor_source(10, 0, [9; 32], &mut rng).is_err());
}

#[test]
fn percentiles_are_nearest_rank_in_milliseconds() {
    let sorted: Vec<u64> = (1..=1000).map(|k| k * 1000).collect();
    assert_eq!(percentile(&sorted, 0.50), 500.0);
    assert_eq!(percentile(&sorted, 0.99), 990.0);
    assert_eq!(percentile(&sorted, 0.999), 999.0);
    assert_eq!(percentile(&sorted, 0.0), 1.0);
    assert_eq!(percentile(&sorted, 1.0), 1000.0);
    assert_eq!(percentile(&[2500], 0.5), 2.5);
    assert!(percentile(&[], 0.5).is_nan());
}

fn report(abuse: Option<AbuseCounts>) -> Report {
    Report {
        target: "a target".into(),
        clients: 3,
        elapsed_s: 2.0,
        latencies_us: vec![1000, 2000, 3000, 4000],
        errors: 1,
        first_error: Some("refused: busy".into()),
        rss_bytes: [Some(1 << 20), Some(3 << 20), None],
        abuse,
        ..Report::default()
    }
}

#[test]
fn the_report_counts_throughput_and_prints_as_before() {
    let r = report(None);
    assert_eq!(r.served(), 4);
    assert_eq!(r.throughput(), 2.0);
    assert_eq!(r.quantiles_ms(), (2.0, 4.0, 4.0));
    assert_eq!(
        r.lines(),
        [
            "served 4 queries in 2.0 s: 2.0/s; latency p50 2.00 ms, p99 4.00 ms, p99.9 4.00 ms; \
             errors 1 (first: refused: busy)",
            "server memory: 1.0 MiB before, 3.0 MiB peak, ? after",
        ]
    );
    let json = r.to_json();
    assert_eq!(json["served"], 4);
    assert_eq!(json["errors"], 1);
    assert_eq!(json["first_error"], "refused: busy");
    assert_eq!(json["throughput_per_s"], 2.0);
    assert_eq!(json["latency_ms"]["p50"], 2.0);
    assert_eq!(json["server_rss_bytes"]["peak"], 3 << 20);
    assert!(json["server_rss_bytes"]["after"].is_null());
    assert!(json["abuse"].is_null());
}

#[test]
fn the_report_says_what_the_abusers_saw() {
    let abuse = AbuseCounts {
        slow_closed: 5,
        idle_closed: 6,
        big_refused: 7,
        trickle_refused: 8,
        malformed_refused: 9,
        malformed_other: 1,
        longest_until_closed_s: 1.25,
        ..AbuseCounts::default()
    };
    let r = report(Some(abuse));
    let lines = r.lines();
    assert_eq!(lines.len(), 3);
    assert!(
        lines[2].starts_with("abuse: slowloris 5 closed by the server (0 still open"),
        "{}",
        lines[2]
    );
    assert!(lines[2].contains("malformed 9 refused with 4xx (1 otherwise)"));
    let json = r.to_json();
    assert_eq!(json["abuse"]["slowloris_closed"], 5);
    assert_eq!(json["abuse"]["big_body_413"], 7);
    assert_eq!(json["abuse"]["trickle_408"], 8);
    assert_eq!(json["abuse"]["malformed_other"], 1);
    assert_eq!(json["abuse"]["longest_until_closed_s"], 1.25);
}

#[test]
fn the_intro_names_the_target_and_the_abusers() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let source = chor_source(10, 64, [1; 32], &mut rng).unwrap();
    let key = SecretKey::generate().unwrap().public();
    let mut plan = Plan::closed(("https://127.0.0.1:1".into(), key), 4, 3);
    let [target, how] = plan.intro(&source);
    assert_eq!(
        target,
        format!("target: {} at https://127.0.0.1:1", source.what())
    );
    assert_eq!(how, "4 clients for 3 s");
    plan.abusers = Some(2);
    assert_eq!(
        plan.intro(&source)[1],
        "4 clients for 3 s, with 2 slowloris, 2 idle and 2 bad-body connections"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_short_run_against_a_mirror_serves_every_query() {
    let dir = tempfile::tempdir().unwrap();
    let payload: Vec<u8> = (0..20_000u32).map(|i| (i * 31 % 251) as u8).collect();
    let files = [("pool/a.deb", &payload[..])];
    let (_, out) = pir_updates::sample::small_release(dir.path(), &files, 1024).unwrap();
    let key = SecretKey::generate().unwrap();
    let service = pir_updates::serve::single(release::open(&out, None, true).unwrap(), &key);
    let running = pir_server::start(
        Arc::new(service.unwrap()),
        pir_keys::tls::server_config(&key).unwrap(),
        pir_server::ServerOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await
    .unwrap();

    let mut plan = Plan::closed((format!("https://{}", running.addr), key.public()), 3, 1);
    plan.interval_ms = 250;
    plan.server_pids = vec![std::process::id()];
    let source = loadtest::source(&plan.servers, Kind::Mirror).await.unwrap();
    assert!(
        source.what().starts_with("mirror, release "),
        "{}",
        source.what()
    );
    let r = loadtest::run(&plan, source).await.unwrap();
    assert_eq!(r.errors, 0, "{:?}", r.first_error);
    assert!(r.served() > 0);
    assert!(
        r.latencies_us.windows(2).all(|w| w[0] <= w[1]),
        "not sorted"
    );
    assert!(r.elapsed_s >= 1.0, "{}", r.elapsed_s);
    assert_eq!(r.clients, 3);
    assert!(r.rss_bytes[0].unwrap() > 0, "no memory from /metrics");
    assert!(r.rss_bytes[1] >= r.rss_bytes[0]);
    assert!(r.abuse.is_none());
    // The counts add up, interval by interval, and the server (this process) used CPU.
    assert!(r.inconsistencies().is_empty(), "{:?}", r.inconsistencies());
    assert_eq!(r.intervals.len(), 4);
    assert!(r.server_cpu_s.unwrap() > 0.0);
    assert!(r.cpu_ms_per_lookup().unwrap() > 0.0);
    let [received, sent] = r.bytes_per_lookup();
    assert!(received.unwrap() > 0.0 && sent.unwrap() > 0.0, "{r:?}");
    // A mirror has no QDP queue.
    assert!(r.qdp_fallback_scans.is_none());

    // Open loop at a bounded rate: every lookup due is sent and answered.
    plan.load = Load::Open { rate: 40.0 };
    let source = loadtest::source(&plan.servers, Kind::Mirror).await.unwrap();
    let r = loadtest::run(&plan, source).await.unwrap();
    assert_eq!(r.errors, 0, "{:?}", r.first_error);
    assert_eq!(r.sent(), 40);
    assert_eq!(r.rate, Some(40.0));
    assert!(r.inconsistencies().is_empty(), "{:?}", r.inconsistencies());
    assert_eq!(
        r.intervals.iter().map(|i| i.sent).collect::<Vec<_>>(),
        [10; 4]
    );
    running.shutdown().await;
}

#[tokio::test]
async fn a_run_needs_clients_and_time() {
    let key = SecretKey::generate().unwrap().public();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let source = chor_source(10, 64, [1; 32], &mut rng).unwrap();
    let mut plan = Plan::closed(("https://127.0.0.1:1".into(), key), 0, 1);
    let e = loadtest::run(&plan, source.clone()).await.unwrap_err();
    assert!(e.to_string().contains("--clients"), "{e}");
    plan.load = Load::Open { rate: 0.0 };
    let e = loadtest::run(&plan, source).await.unwrap_err();
    assert!(e.to_string().contains("--rate"), "{e}");
}

fn row(sent: u64, ok: u64, errors: u64) -> IntervalRow {
    IntervalRow {
        t_s: 1.0,
        sent,
        ok,
        errors,
        p50_ms: 1.0,
        p99_ms: 2.0,
        qdp_queue_depth: None,
        qdp_fallback_scans: None,
        server_cpu_s: None,
    }
}

#[test]
fn a_report_whose_counts_do_not_add_up_says_so() {
    let mut r = report(None);
    r.intervals = vec![row(3, 2, 1), row(2, 2, 0)];
    assert!(r.inconsistencies().is_empty(), "{:?}", r.inconsistencies());
    r.intervals[1] = row(3, 2, 0);
    let found = r.inconsistencies();
    assert_eq!(found.len(), 2, "{found:?}");
    assert!(found[0].contains("3 sent, 2 served, 0 errors"), "{found:?}");
}

#[test]
fn a_knee_step_breaks_on_errors_latency_or_a_shortfall() {
    let rule = KneeRule {
        max_error_share: 0.01,
        max_p99_ms: 3.5,
        min_served_share: 0.9,
    };
    let mut r = Report {
        rate: Some(2.0),
        elapsed_s: 2.0,
        latencies_us: vec![1000; 200],
        ..Report::default()
    };
    r.elapsed_s = 100.0;
    assert!(rule.broken(&r).is_none(), "{:?}", rule.broken(&r));
    r.errors = 3;
    assert!(rule.broken(&r).unwrap().contains("3 errors"));
    r.errors = 0;
    r.latencies_us.push(9000);
    r.latencies_us.push(9000);
    r.latencies_us.push(9000);
    assert!(rule.broken(&r).unwrap().contains("p99"));
    r.latencies_us.truncate(200);
    r.rate = Some(3.0);
    assert!(rule.broken(&r).unwrap().contains("offered"));
}
