//! A per-shard bounded build writes what the whole build writes, byte for byte.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::list::ListDatabase;

/// `n` hosts `{prefix}{k}.example`, one a line (the update tests' lists too).
pub(crate) fn hosts(prefix: &str, range: Range<usize>) -> String {
    range.map(|k| format!("{prefix}{k}.example\n")).collect()
}

/// Every file of `dir`, by name, sorted.
pub(crate) fn files_of(dir: &Path) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            (name, std::fs::read(e.path()).unwrap())
        })
        .collect();
    out.sort();
    out
}

#[test]
fn shards_built_one_by_one_in_small_windows_are_the_whole_builds() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    // Repeats within a list, a hash on two lists, a comment and a line that is no URL.
    let malware = format!(
        "# malware\n{}{}http://\nboth.example\n",
        hosts("mal", 0..300),
        hosts("mal", 10..20)
    );
    let phishing = format!("{}both.example\r\n", hosts("phish", 0..90));
    std::fs::write(d.join("malware.txt"), &malware).unwrap();
    std::fs::write(d.join("phishing.txt"), &phishing).unwrap();
    let files = vec![
        (Threat::Malware, d.join("malware.txt")),
        (Threat::Phishing, d.join("phishing.txt")),
    ];
    let sources = [
        (Threat::Malware, malware.as_str()),
        (Threat::Phishing, phishing.as_str()),
    ];
    let key = SecretKey::generate().unwrap();
    for (shards, base, window) in [(3, Some(20), 40), (1, None, 1), (4, Some(7), 1 << 20)] {
        let (db, reports) = ListDatabase::build_lists("two", &sources, base).unwrap();
        let whole = d.join(format!("whole{shards}"));
        let options = ShardOptions { shards, only: None };
        crate::shard::write(&whole, &db, options, &key).unwrap();
        let own = d.join(format!("own{shards}"));
        for k in 0..shards {
            let only = ShardOptions {
                shards,
                only: Some(k),
            };
            let built = build_part(&own, "two", &files, base, only, &key, window).unwrap();
            assert_eq!(built.reports, reports);
            assert_eq!(
                built.counts,
                vec![
                    (Threat::Malware, db.count(Threat::Malware)),
                    (Threat::Phishing, db.count(Threat::Phishing))
                ]
            );
            assert!(built.peak_window_entries <= window.max(600));
            if window == 40 {
                assert!(built.windows > 5, "{}", built.windows);
            }
        }
        // Every file the same (parts, index, state, signed map) and no spill left behind.
        assert_eq!(files_of(&own), files_of(&whole), "{shards} shards");
    }
}

#[test]
fn a_list_without_entries_and_a_shard_out_of_range_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("m.txt"), "a.example\nb.example\n").unwrap();
    std::fs::write(d.join("p.txt"), "# nothing\n").unwrap();
    let key = SecretKey::generate().unwrap();
    let options = |only| ShardOptions { shards: 2, only };
    let files = vec![(Threat::Malware, d.join("m.txt"))];
    let out = d.join("out");
    let error = build_part(&out, "t", &files, None, options(Some(2)), &key, 10).unwrap_err();
    assert!(error.to_string().contains("shards 0 to 1"), "{error}");
    let both = vec![
        (Threat::Malware, d.join("m.txt")),
        (Threat::Phishing, d.join("p.txt")),
    ];
    let error = build_part(&out, "t", &both, None, options(Some(0)), &key, 10).unwrap_err();
    assert!(error.to_string().contains("holds no entry"), "{error}");
    // Two entries cannot make three shards.
    let three = ShardOptions {
        shards: 3,
        only: Some(0),
    };
    assert!(build_part(&out, "t", &files, None, three, &key, 10).is_err());
    assert_eq!(std::fs::read_dir(&out).unwrap().count(), 0, "nothing left");
}
