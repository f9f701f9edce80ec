//! End to end on a real common-password list: John the Ripper's `password.lst` (Debian
//! package `john-data`, installed at `/usr/share/john/password.lst`; 3546 passwords plus
//! `#!comment:` lines). Set `PIR_PASSWORD_LIST` to use another list. When the file is absent
//! the test fails in CI (`CI=true`; `.ci/run` installs `john-data`) and is skipped elsewhere,
//! saying what to install.

use std::collections::HashMap;
use std::path::PathBuf;

use pir_breach::build::{build_file, BuildOptions};
use pir_breach::corpus::{password_sha1, CorpusFormat, JOHN_COMMENT_PREFIX};
use pir_breach::database::BreachDatabase;
use pir_breach::range::{range_response, RangePrefix};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const DEFAULT_LIST: &str = "/usr/share/john/password.lst";

fn password_list() -> Option<PathBuf> {
    let path = std::env::var_os("PIR_PASSWORD_LIST")
        .map_or_else(|| PathBuf::from(DEFAULT_LIST), PathBuf::from);
    if path.is_file() {
        Some(path)
    } else if std::env::var("CI").is_ok_and(|v| v == "true") {
        panic!(
            "no password list at {} in CI: install the Debian package john-data",
            path.display()
        );
    } else {
        eprintln!(
            "SKIPPED: no password list at {} (install the Debian package john-data, or set \
             PIR_PASSWORD_LIST to a list with one password per line)",
            path.display()
        );
        None
    }
}

/// Retrieves block `index` the way two-server XOR PIR does (Chor et al.): server 1 XORs a
/// random subset of blocks, server 2 the same subset with `index` flipped; the XOR of the two
/// answers is the block.
fn xor_pir_retrieve(db: &pir_core::Database, index: usize, rng: &mut ChaCha20Rng) -> Vec<u8> {
    let blocks = db.shape().block_count();
    let first: Vec<bool> = (0..blocks).map(|_| rng.random()).collect();
    let mut second = first.clone();
    second[index] = !second[index];
    let answer = |query: &[bool]| {
        let mut acc = vec![0u8; db.shape().block_size()];
        for (i, _) in query.iter().enumerate().filter(|(_, &bit)| bit) {
            acc.iter_mut().zip(db.block(i)).for_each(|(a, b)| *a ^= b);
        }
        acc
    };
    answer(&first)
        .iter()
        .zip(answer(&second))
        .map(|(a, b)| a ^ b)
        .collect()
}

#[test]
fn real_password_list() {
    let Some(list) = password_list() else {
        return;
    };
    let text = std::fs::read(&list).unwrap();
    let mut occurrences: HashMap<Vec<u8>, u64> = HashMap::new();
    for line in text.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if !line.is_empty() && !line.starts_with(JOHN_COMMENT_PREFIX) {
            *occurrences.entry(line.to_vec()).or_default() += 1;
        }
    }
    assert!(
        occurrences.len() > 100,
        "{} looks too small for a password list",
        list.display()
    );

    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("passwords.db");
    let mut rng = ChaCha20Rng::seed_from_u64(42);
    let mut last = (0, 0);
    let report = build_file(
        &list,
        &out,
        &BuildOptions::new(CorpusFormat::Passwords),
        &mut rng,
        &mut |d, t| last = (d, t),
    )
    .unwrap();
    eprintln!("{}", report.summary());
    assert_eq!(last, (text.len() as u64, text.len() as u64));
    assert_eq!(report.header.stats.entries, occurrences.len() as u64);
    assert!(report.header.compression_ratio() > 1.0);

    let db = BreachDatabase::open(&out, true).unwrap();
    let header = db.header().clone();
    for must in ["123456", "password", "qwerty", "letmein"] {
        if let Some(&count) = occurrences.get(must.as_bytes()) {
            assert_eq!(
                db.lookup_sha1(&password_sha1(must.as_bytes())).unwrap(),
                Some(count),
                "{must}"
            );
        }
    }
    // Every password, retrieved privately: found with its number of occurrences.
    for (password, &count) in occurrences.iter().step_by(7) {
        let (bucket, value) = header.sha1_location(&password_sha1(password)).unwrap();
        let block = xor_pir_retrieve(db.database(), bucket, &mut rng);
        assert_eq!(
            header.decode_bucket(&block).unwrap().count_of(&value),
            Some(count)
        );
    }
    // Random strings that are not on the list: not found.
    for _ in 0..500 {
        let miss: String = (0..16)
            .map(|_| rng.random_range(b'a'..=b'z') as char)
            .collect();
        if !occurrences.contains_key(miss.as_bytes()) {
            assert_eq!(
                db.lookup_sha1(&password_sha1(miss.as_bytes())).unwrap(),
                None,
                "{miss}"
            );
        }
    }
    // The range API answer for "password" names its suffix with its count.
    let hash = password_sha1(b"password");
    let prefix = RangePrefix::of_hash(&hash);
    let bucket = db.bucket(prefix.bucket(&header).unwrap()).unwrap();
    let body = range_response::<ChaCha20Rng>(&header, prefix, &bucket, None).unwrap();
    let expected = format!(
        "1E4C9B93F3F0682250B6CF8331B7EE68FD8:{}",
        occurrences.get(&b"password"[..]).copied().unwrap_or(0)
    );
    if occurrences.contains_key(&b"password"[..]) {
        assert!(body.split("\r\n").any(|line| line == expected), "{body}");
    }
}
