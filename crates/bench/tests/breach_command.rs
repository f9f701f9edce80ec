//! `pir breach bench` without the binary: the command's run over real HTTPS, both servers
//! started in this process by `pir_breach::command::start_server` on 127.0.0.1.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use pir_bench::breach::command::{options, run_with};
use pir_breach::command::{BreachBenchArgs, QdpPolicyArg};

fn args(dir: &std::path::Path) -> BreachBenchArgs {
    BreachBenchArgs {
        entries: 2000,
        seed: 3,
        checks: 2,
        qdp_queue: 4,
        qdp_policy: QdpPolicyArg::Never,
        four_russians: Some(2),
        dir: Some(dir.to_path_buf()),
    }
}

#[test]
fn the_flags_become_the_drivers_options() {
    let dir = tempfile::tempdir().unwrap();
    let options = options(&args(dir.path()));
    assert_eq!(
        (
            options.entries,
            options.seed,
            options.checks,
            options.qdp_queue
        ),
        (2000, 3, 2, 4)
    );
    assert_eq!(options.dir.as_deref(), Some(dir.path()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_small_bench_checks_over_https_against_two_started_servers() {
    let dir = tempfile::tempdir().unwrap();
    let mut lines = Vec::new();
    run_with(&args(dir.path()), &mut |line| lines.push(line))
        .await
        .unwrap();
    assert!(
        lines[0].starts_with("2000 random SHA-1 hashes (seed 3) generated"),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l
                .contains("over 4 checks (2 hits found with their counts, 2 misses not found)")),
        "{lines:?}"
    );
}
