//! The demo flow (`pir demo`) in-process, without the binary: three real HTTPS mirrors on
//! 127.0.0.1, a private fetch through the real client, and what the demo says each mirror saw.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use pir_updates::command::demo::{self, DemoArgs, MIRRORS};
use pir_updates::command::SchemeArg;
use pir_updates::sample;

const FILES: usize = 40;
const SEED: u64 = 7;

/// What the demo printed about one mirror's queries.
#[derive(Debug, PartialEq)]
struct Seen {
    queries: usize,
    bytes_each: usize,
    ones_percent: f64,
}

/// Runs the demo in a fresh directory; returns what it fetched (checked here against a sample
/// release written independently of the demo), what it printed, and the per-mirror lines.
async fn run(scheme: SchemeArg, file: Option<String>) -> (demo::Outcome, String, Vec<Seen>) {
    let work = tempfile::tempdir().unwrap();
    let args = DemoArgs {
        files: FILES,
        seed: SEED,
        file,
        scheme,
    };
    let mut printed = Vec::new();
    let outcome = demo::run_in(work.path(), &args, &mut printed)
        .await
        .unwrap();
    let printed = String::from_utf8(printed).unwrap();

    // The fetched file is the original: the one in the demo's directory and the same file of
    // the same sample written elsewhere.
    assert_eq!(outcome.fetched, std::fs::read(&outcome.original).unwrap());
    let elsewhere = tempfile::tempdir().unwrap();
    sample::write_sample_release(elsewhere.path(), FILES, SEED).unwrap();
    assert_eq!(
        outcome.fetched,
        std::fs::read(elsewhere.path().join(&outcome.name)).unwrap()
    );
    assert!(!outcome.fetched.is_empty());

    let seen = printed
        .lines()
        .filter(|line| line.contains("random bytes each"))
        .map(parse_seen)
        .collect();
    (outcome, printed, seen)
}

/// Parses "N query of M random bytes each; first begins ...; P% of all their bits are 1".
fn parse_seen(line: &str) -> Seen {
    let words: Vec<&str> = line.split_whitespace().collect();
    assert!(["query", "queries"].contains(&words[1]), "{line}");
    let percent = line
        .rsplit("; ")
        .next()
        .and_then(|tail| tail.strip_suffix("% of all their bits are 1"))
        .unwrap();
    Seen {
        queries: words[0].parse().unwrap(),
        bytes_each: words[3].parse().unwrap(),
        ones_percent: percent.parse().unwrap(),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_demo_fetches_the_original_and_every_mirror_sees_the_same_random_looking_queries() {
    for (scheme, bits_checked) in [
        (SchemeArg::RaidPir, true),
        (SchemeArg::Chor, true),
        (SchemeArg::Dpf, false),
    ] {
        let (outcome, printed, seen) = run(scheme, None).await;
        for step in 1..=5 {
            assert!(printed.contains(&format!("[{step}/5] ")), "{printed}");
        }
        assert!(printed.contains(&format!("fetching {:?} privately", outcome.name)));
        assert!(printed.contains("bytes match the original"));
        let asked = if scheme == SchemeArg::Dpf { 2 } else { MIRRORS };
        assert_eq!(seen.len(), asked, "{printed}");
        // Every mirror asked got as many queries, of the same size.
        for other in &seen[1..] {
            assert_eq!(
                (other.queries, other.bytes_each),
                (seen[0].queries, seen[0].bytes_each)
            );
        }
        assert!(seen[0].queries >= 1 && seen[0].bytes_each > 0);
        if bits_checked {
            // Uniform bits: about half are ones (hundreds of bits per mirror, so 30 to 70 %
            // is more than six standard deviations either way).
            for mirror in &seen {
                assert!((30.0..=70.0).contains(&mirror.ones_percent), "{printed}");
            }
        }
        assert!(printed.contains(&format!("of the {FILES} files have")));
        assert!(printed.contains("      privacy: "));
        assert!(printed
            .trim_end()
            .lines()
            .last()
            .unwrap()
            .starts_with("done in "));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queries_are_the_same_size_whichever_file_is_asked_for() {
    let files =
        sample::write_sample_release(tempfile::tempdir().unwrap().path(), FILES, SEED).unwrap();
    let smallest = files.iter().min_by_key(|(_, size)| *size).unwrap();
    let largest = files.iter().max_by_key(|(_, size)| *size).unwrap();
    let (small, _, small_seen) = run(SchemeArg::RaidPir, Some(smallest.0.clone())).await;
    let (large, _, large_seen) = run(SchemeArg::RaidPir, Some(largest.0.clone())).await;
    assert_eq!(small.name, smallest.0);
    assert_eq!(large.fetched.len() as u64, largest.1);
    // More blocks take more queries, but each query is the same size for both files.
    assert!(large_seen[0].queries >= small_seen[0].queries);
    assert_eq!(large_seen[0].bytes_each, small_seen[0].bytes_each);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_file_not_in_the_release_fails_and_stops_the_mirrors() {
    let work = tempfile::tempdir().unwrap();
    let args = DemoArgs {
        files: 10,
        seed: SEED,
        file: Some("pool/not-there.deb".into()),
        scheme: SchemeArg::Chor,
    };
    let mut printed = Vec::new();
    let error = demo::run_in(work.path(), &args, &mut printed)
        .await
        .unwrap_err();
    assert!(format!("{error:#}").contains("not-there.deb"), "{error:#}");
    assert!(!String::from_utf8(printed).unwrap().contains("done in"));
}
