//! Known-answer tests from `tests/vectors/`: the PRG stream, a pinned RAID-PIR query, and the
//! `fail_*.hex` query bodies a mirror must reject (each with the error it must give).

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};

use pir_core::{Database, DbShape, Error, MultiServerScheme, SchemeId};
use pir_xor::{prg, serve, AnswerMode, RaidPir};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn vectors_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors")
}

fn read_vector(name: &str) -> String {
    let path = vectors_dir().join(name);
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Non-empty lines that are not `#` comments.
fn data_lines(text: &str) -> impl Iterator<Item = &str> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
}

/// The value of `key=value` among the whitespace-separated fields of `line`.
fn field<'a>(line: &'a str, key: &str) -> &'a str {
    line.split_whitespace()
        .find_map(|part| {
            part.strip_prefix(key)
                .and_then(|rest| rest.strip_prefix('='))
        })
        .unwrap_or_else(|| panic!("line has no {key}=: {line}"))
}

#[test]
fn prg_matches_openssl_aes128_ctr() {
    let text = read_vector("prg_aes128ctr.txt");
    let mut keys = Vec::new();
    for line in data_lines(&text) {
        let seed: prg::Seed = hex::decode(field(line, "key")).unwrap().try_into().unwrap();
        let expected = hex::decode(field(line, "out")).unwrap();
        assert!(expected.len() >= 64, "vectors cover at least 64 bytes");
        let mut out = vec![0u8; expected.len()];
        prg::expand(&seed, &mut out);
        assert_eq!(
            hex::encode(&out),
            hex::encode(&expected),
            "seed {}",
            hex::encode(seed)
        );
        // Every prefix is the same stream (servers expand only what they need).
        for len in [1, 15, 16, 17, 33] {
            let mut short = vec![0u8; len];
            prg::expand(&seed, &mut short);
            assert_eq!(short, expected[..len]);
        }
        keys.push(hex::encode(seed));
    }
    assert!(keys.contains(&"00000000000000000000000000000000".to_string()));
    assert!(keys.contains(&"000102030405060708090a0b0c0d0e0f".to_string()));
}

#[test]
fn raidpir_query_matches_pinned_bodies() {
    let text = read_vector("raidpir_query_kat.txt");
    let shape = DbShape::new(20, 64).unwrap();
    let seeds: Vec<String> = data_lines(&text)
        .filter(|line| line.starts_with("seed "))
        .map(|line| line.split_whitespace().nth(2).unwrap().to_string())
        .collect();
    assert_eq!(seeds.len(), 3);
    let mut db_rng = ChaCha20Rng::seed_from_u64(99);
    let db = Database::random(shape, &mut db_rng);

    let mut cases = 0;
    let mut lines = data_lines(&text)
        .filter(|line| !line.starts_with("seed "))
        .peekable();
    while let Some(case) = lines.next() {
        assert!(
            case.starts_with("case "),
            "expected a case line, got {case}"
        );
        let mode = match field(case, "mode") {
            "single" => AnswerMode::Single,
            "perchunk" => AnswerMode::PerChunk,
            other => panic!("unknown mode {other}"),
        };
        let indices: Vec<usize> = field(case, "indices")
            .split(',')
            .map(|i| i.parse().unwrap())
            .collect();
        let raid = RaidPir::new(shape, 3, 2, 3, mode).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(7);
        let (queries, state) = raid.query(&indices, &mut rng).unwrap();
        let mut answers = Vec::new();
        for (server, query) in queries.iter().enumerate() {
            let line = lines.next().expect("one query line per server");
            assert_eq!(field(line, "server"), server.to_string());
            let expected = line.split_whitespace().nth(2).unwrap();
            let body = raid.encode_query(query);
            assert_eq!(hex::encode(&body), expected, "case {case}, server {server}");
            assert_eq!(hex::encode(query.seed), seeds[server]);
            // The pinned body is a valid query: a mirror answers it and the answers decode.
            let answer =
                serve::answer_body(&db, SchemeId::RaidPir, &hex::decode(expected).unwrap())
                    .unwrap();
            answers.push(raid.decode_answer(query, &answer).unwrap());
        }
        let blocks: Vec<Vec<u8>> = indices.iter().map(|&i| db.block(i).to_vec()).collect();
        assert_eq!(raid.decode(&state, &answers).unwrap(), blocks);
        cases += 1;
    }
    assert_eq!(cases, 2);
}

/// The error variant's name, as written after `expect=` in a `fail_*.hex` file.
fn variant(error: &Error) -> &'static str {
    match error {
        Error::Truncated { .. } => "Truncated",
        Error::Oversized { .. } => "Oversized",
        Error::WrongLength(_) => "WrongLength",
        Error::Malformed(_) => "Malformed",
        Error::DatabaseMismatch(_) => "DatabaseMismatch",
        Error::WrongScheme { .. } => "WrongScheme",
        Error::UnknownValue { .. } => "UnknownValue",
        Error::OutOfRange { .. } => "OutOfRange",
        Error::TrailingBytes { .. } => "TrailingBytes",
        Error::InvalidParameter(_) => "InvalidParameter",
        _ => "other",
    }
}

#[test]
fn fail_vectors_are_rejected_for_the_stated_reason() {
    let shape = DbShape::new(20, 64).unwrap();
    let db = Database::zeroed(shape);
    let mut checked = 0;
    let mut names: Vec<PathBuf> = std::fs::read_dir(vectors_dir())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| {
            let name = path.file_name().unwrap().to_string_lossy();
            name.starts_with("fail_") && name.ends_with(".hex")
        })
        .collect();
    names.sort();
    for path in names {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(&path).unwrap();
        let expect = text
            .lines()
            .find_map(|line| line.strip_prefix("# expect="))
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap_or_else(|| panic!("{name}: no '# expect=' line"));
        let body = hex::decode(data_lines(&text).collect::<String>()).unwrap();
        let scheme = if name.starts_with("fail_chor_") {
            SchemeId::Chor
        } else if name.starts_with("fail_raidpir_") {
            SchemeId::RaidPir
        } else {
            panic!("{name}: unknown scheme prefix")
        };
        match serve::answer_body(&db, scheme, &body) {
            Ok(_) => panic!("{name}: accepted"),
            Err(error) => {
                assert_eq!(variant(&error), expect, "{name}: {error}");
                assert!(
                    error.is_peer_error(),
                    "{name}: bad bytes are the peer's fault"
                );
            }
        }
        checked += 1;
    }
    assert!(checked >= 15, "only {checked} fail vectors found");
}
