//! A sharded database's update: the same directory as the update of the whole database,
//! sharded afresh; only the parts that change are written again.

#![allow(clippy::unwrap_used)]

use super::*;
use crate::list::Threat;
use crate::shard_build::tests::{files_of, hosts};

#[test]
fn a_sharded_update_is_the_whole_update_sharded() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = SecretKey::generate().unwrap();
    let (malware, phishing) = (hosts("mal", 0..300), hosts("phish", 0..90));
    let sources = [
        (Threat::Malware, malware.as_str()),
        (Threat::Phishing, phishing.as_str()),
    ];
    let (mut whole, _) = ListDatabase::build_lists("two", &sources, Some(20)).unwrap();
    let sharded = d.join("sharded");
    let options = ShardOptions {
        shards: 3,
        only: None,
    };
    write(&sharded, &whole, options, &key).unwrap();
    let steps: Vec<(Vec<(Threat, String)>, bool)> = vec![
        // New hosts: a new bucket at the end of the rows; the ranges move.
        (vec![(Threat::Malware, hosts("mal", 10..340))], true),
        // Removals only: records are marked dead in place, no part changes.
        (vec![(Threat::Phishing, hosts("phish", 5..90))], false),
        // More new buckets, merged with the last one.
        (vec![(Threat::Malware, hosts("mal", 20..420))], true),
    ];
    for (step, (lists, moves)) in steps.iter().enumerate() {
        let sources: Vec<(Threat, &str)> = lists.iter().map(|(t, s)| (*t, s.as_str())).collect();
        let old = read_map(&sharded, Some(&key.public())).unwrap();
        let before = read_database(&sharded, &old).unwrap();
        assert_eq!(before, whole, "step {step}");
        let (next, _, _) = before.update_lists(&sources).unwrap();
        let (map, written) = write_update(&sharded, &next, &old, &key).unwrap();
        assert_eq!(!written.is_empty(), *moves, "step {step}: {written:?}");
        assert_eq!(About::decode(&map.about).unwrap().version, step as u64 + 1);
        // The whole database's update, sharded afresh: the same files.
        let (expected, _, _) = whole.update_lists(&sources).unwrap();
        let fresh = d.join(format!("fresh{step}"));
        write(&fresh, &expected, options, &key).unwrap();
        assert_eq!(files_of(&sharded), files_of(&fresh), "step {step}");
        whole = expected;
    }
}

#[test]
fn a_damaged_or_old_sharded_database_is_not_updated() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let key = SecretKey::generate().unwrap();
    let (db, _) = ListDatabase::build_with("one", &hosts("h", 0..100), Some(20)).unwrap();
    let options = ShardOptions {
        shards: 2,
        only: None,
    };
    write(d, &db, options, &key).unwrap();
    let map = read_map(d, Some(&key.public())).unwrap();
    assert_eq!(read_database(d, &map).unwrap(), db);
    // Signed by another key.
    let other = SecretKey::generate().unwrap();
    assert!(read_map(d, Some(&other.public())).is_err());
    // A state that does not make the map's database.
    let state = State {
        next_id: 7,
        ..State::of(&db)
    };
    std::fs::write(d.join(STATE_FILE), state.encode()).unwrap();
    let wrong = read_database(d, &map).unwrap_err();
    assert!(format!("{wrong:#}").contains("digest"), "{wrong:#}");
    // No state (an older build).
    std::fs::remove_file(d.join(STATE_FILE)).unwrap();
    let old = read_database(d, &map).unwrap_err();
    assert!(format!("{old:#}").contains("older pir"), "{old:#}");
    std::fs::write(d.join(STATE_FILE), State::of(&db).encode()).unwrap();
    // A part flipped.
    let mut part = std::fs::read(part_path(d, 1)).unwrap();
    part[5] ^= 1;
    std::fs::write(part_path(d, 1), part).unwrap();
    let damaged = read_database(d, &map).unwrap_err();
    assert!(damaged.to_string().contains("hash differs"), "{damaged}");
}
