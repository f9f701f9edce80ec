//! A shard built alone, in bounded memory, is byte for byte the same shard (part and signed
//! map) of a build of the whole database, and held at most its budget of entries at once.

use std::path::Path;

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::blind::BlindingKey;
use crate::build::{build_into, Output};
use crate::corpus::CorpusFormat;
use crate::credential::HashKind;
use crate::shard::MAP_FILE;

/// Builds `input` whole into S shards, then every shard alone with `budget` entries, and
/// compares. Returns each alone build's footprint.
fn parts_equal_whole(
    input: &Path,
    options: &BuildOptions,
    shards: usize,
    budget: usize,
) -> Vec<Footprint> {
    // Every process of a sharded build is given the same creation time.
    let mut options = options.clone();
    options.created_unix = Some(1_767_225_600);
    let options = &options;
    let tmp = tempfile::tempdir().unwrap();
    let key = SecretKey::generate().unwrap();
    let whole = tmp.path().join("whole");
    let (report, map) = build_into(
        input,
        Output::Shards {
            dir: &whole,
            options: ShardOptions { shards, only: None },
            map_key: &key,
        },
        options,
        &mut ChaCha20Rng::seed_from_u64(1),
        &mut |_, _| {},
    )
    .unwrap();
    let map = map.unwrap();
    let mut footprints = Vec::new();
    for k in 0..shards {
        let dir = tmp.path().join(format!("alone{k}"));
        let mut bounded = options.clone();
        bounded.window_entries = budget;
        let only = ShardOptions {
            shards,
            only: Some(k),
        };
        let (alone, alone_map, footprint) =
            build_part(input, &dir, &bounded, only, &key, &mut |_, _| {}).unwrap();
        assert_eq!(alone.header, report.header, "shard {k}: the header");
        assert_eq!(alone.prefix_reason, report.prefix_reason);
        assert_eq!(alone.corpus, report.corpus);
        assert_eq!(alone_map, map, "shard {k}: the map");
        for name in [MAP_FILE.to_string(), format!("shard-{k}.part")] {
            assert_eq!(
                std::fs::read(dir.join(&name)).unwrap(),
                std::fs::read(whole.join(&name)).unwrap(),
                "shard {k}: {name}"
            );
        }
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(
            names,
            [format!("shard-{k}.part"), MAP_FILE.to_string()],
            "no spill left"
        );
        // Memory: a window at a time, never the corpus.
        assert!(footprint.windows > 1, "{footprint:?}");
        assert!(footprint.peak_window_entries <= budget, "{footprint:?}");
        assert!(
            (footprint.peak_window_entries as u64) < footprint.spilled,
            "{footprint:?}"
        );
        assert_eq!(footprint.histogram_slots, 1 << FINE_BITS);
        footprints.push(footprint);
    }
    footprints
}

fn write(dir: &Path, name: &str, text: String) -> std::path::PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path
}

#[test]
fn password_list_shards_alone_equal_the_whole_build() {
    let tmp = tempfile::tempdir().unwrap();
    // Repeated passwords (counts), an automatic k (fewer bits than the histogram's).
    let lines: Vec<String> = (0..3000).map(|i| format!("pw{}", i % 1900)).collect();
    let input = write(tmp.path(), "list.txt", lines.join("\n") + "\n");
    let options = BuildOptions::new(CorpusFormat::Passwords);
    let fp = parts_equal_whole(&input, &options, 3, 700);
    assert_eq!(fp[0].spilled, 3000);
}

#[test]
fn more_prefix_bits_than_the_histogram_still_match() {
    let tmp = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..400).map(|i| format!("w{i}")).collect();
    let input = write(tmp.path(), "list.txt", lines.join("\n") + "\n");
    let mut options = BuildOptions::new(CorpusFormat::Passwords);
    options.prefix_bits = Some(FINE_BITS + 1);
    parts_equal_whole(&input, &options, 2, 100);
}

#[test]
fn hibp_lines_with_truncated_hashes_and_bad_lines_match() {
    let tmp = tempfile::tempdir().unwrap();
    let mut text = String::new();
    for i in 0..600u32 {
        // Hashes sharing their first 40 bits in pairs: truncated, their counts merge.
        let hash = format!(
            "{:08X}{:02X}{:030X}",
            (i / 2).wrapping_mul(0x9E37_79B1),
            0,
            i
        );
        text.push_str(&format!("{hash}:{}\n", i % 5 + 1));
    }
    text.push_str("not a line\n");
    text.push_str(&format!("{:040X}:0\n", 5)); // padding: skipped
    let input = write(tmp.path(), "hibp.txt", text);
    let mut options = BuildOptions::new(CorpusFormat::Hibp);
    options.sha1_entry_bits = 40;
    options.prefix_bits = Some(6);
    options.bad_lines = crate::corpus::BadLines::Skip;
    parts_equal_whole(&input, &options, 4, 200);
}

#[test]
fn pairs_shards_alone_equal_the_whole_build() {
    let tmp = tempfile::tempdir().unwrap();
    let lines: Vec<String> = (0..500)
        .map(|i| format!("user{}:pass{}", i % 450, i % 7))
        .collect();
    let input = write(tmp.path(), "pairs.txt", lines.join("\n") + "\n");
    let mut options = BuildOptions::new(CorpusFormat::Pairs);
    options.credential_hash = HashKind::Sha256;
    options.blinding_key = Some(BlindingKey::generate(&mut ChaCha20Rng::seed_from_u64(3)));
    options.created_unix = Some(1_767_225_600);
    parts_equal_whole(&input, &options, 2, 150);
    // Without the shared blinding key a process cannot build its part.
    options.blinding_key = None;
    let only = ShardOptions {
        shards: 2,
        only: Some(0),
    };
    let key = SecretKey::generate().unwrap();
    let err = build_part(
        &input,
        &tmp.path().join("x"),
        &options,
        only,
        &key,
        &mut |_, _| {},
    );
    assert!(err.is_err());
}

#[test]
fn windows_cut_at_the_budget() {
    assert_eq!(windows(&[3, 3, 3, 3], 6), vec![0..2, 2..4]);
    assert_eq!(windows(&[9, 1, 1], 4), vec![0..1, 1..3]);
    assert_eq!(windows(&[0, 0], 1), vec![0..2]);
    assert_eq!(windows(&[5], 1), vec![0..1]);
}
