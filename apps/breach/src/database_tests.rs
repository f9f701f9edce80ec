use super::*;
use crate::blind::{blind_query, BlindedCheck};
use crate::credential::{credential_hash, Argon2Params};
use proptest::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const FAST_ARGON2: HashKind = HashKind::Argon2id(Argon2Params {
    memory_kib: 64,
    iterations: 1,
    parallelism: 1,
});

fn sha1_db(hashes: &[[u8; 20]], layout: Sha1Layout) -> BreachDatabase {
    let mut entries: Vec<Sha1Entry> = hashes
        .iter()
        .enumerate()
        .map(|(i, &hash)| Sha1Entry {
            hash,
            count: i as u64 + 1,
        })
        .collect();
    entries.sort();
    entries.dedup_by(|a, b| a.hash == b.hash);
    hibp(&entries, &layout).unwrap().0
}

/// `entries` (sorted) as an HIBP database laid out by `layout`, and why that layout.
fn hibp(
    entries: &[Sha1Entry],
    layout: &Sha1Layout,
) -> Result<(BreachDatabase, String), BreachError> {
    build_sha1(CorpusFormat::Hibp, entries, layout, &CorpusStats::default())
}

fn random_hashes(n: usize, seed: u64) -> Vec<[u8; 20]> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    (0..n).map(|_| rng.random()).collect()
}

#[test]
fn found_and_not_found() {
    let hashes = random_hashes(2000, 1);
    let db = sha1_db(&hashes, Sha1Layout::default());
    let h = db.header();
    assert_eq!(h.stats.entries, 2000);
    assert_eq!(h.prefix_bits, 8);
    assert_eq!(db.database().shape().block_count(), 256);
    assert!(h.stats.min_bucket <= 2 && h.stats.max_bucket >= 2);
    for (i, hash) in hashes.iter().enumerate() {
        assert_eq!(db.lookup_sha1(hash).unwrap(), Some(i as u64 + 1));
    }
    for miss in random_hashes(2000, 2) {
        assert_eq!(db.lookup_sha1(&miss).unwrap(), None);
    }
    assert!(db.bucket(256).is_err());
}

#[test]
fn dummies_never_match() {
    // Mostly empty buckets: nearly every block is padding.
    let hashes = random_hashes(5, 3);
    let layout = Sha1Layout {
        prefix_bits: Some(4),
        entry_bits: 160,
    };
    let db = sha1_db(&hashes, layout);
    let total: usize = (0..16).map(|b| db.bucket(b).unwrap().len()).sum();
    assert_eq!(total, 5);
    for bucket in 0u8..16 {
        // The value all-zero is what zero padding would decode to; all-ones is the largest.
        let mut zero = [0u8; 20];
        zero[0] = bucket << 4;
        let mut ones = [0xffu8; 20];
        ones[0] = (bucket << 4) | 0x0f;
        assert_eq!(db.lookup_sha1(&zero).unwrap(), None);
        assert_eq!(db.lookup_sha1(&ones).unwrap(), None);
    }
    // Real all-zero and all-ones hashes are found.
    let db = sha1_db(&[[0u8; 20], [0xffu8; 20]], layout);
    assert_eq!(db.lookup_sha1(&[0u8; 20]).unwrap(), Some(1));
    assert_eq!(db.lookup_sha1(&[0xffu8; 20]).unwrap(), Some(2));
    let mut almost = [0u8; 20];
    almost[19] = 1;
    assert_eq!(db.lookup_sha1(&almost).unwrap(), None);
}

#[test]
fn file_round_trip_and_damage() {
    let db = sha1_db(&random_hashes(300, 4), Sha1Layout::default());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("breach.db");
    db.write(&path).unwrap();
    assert_eq!(
        std::fs::read_dir(dir.path()).unwrap().count(),
        1,
        "no temporary left"
    );
    let opened = BreachDatabase::open(&path, true).unwrap();
    assert_eq!(opened.header(), db.header());
    assert_eq!(opened.header().database_id(), db.header().database_id());
    assert_eq!(opened.database().bytes(), db.database().bytes());
    assert_eq!(opened.database().bytes().as_ptr() as usize % LINE, 0);
    let again = BreachDatabase::from_bytes(&db.to_bytes()).unwrap();
    assert_eq!(again.header(), db.header());

    let mut bytes = std::fs::read(&path).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&path, &bytes).unwrap();
    assert!(BreachDatabase::open(&path, false).is_ok());
    let err = BreachDatabase::open(&path, true).unwrap_err().to_string();
    assert!(err.contains("corrupt"), "{err}");
    assert!(BreachDatabase::from_bytes(&bytes).is_err());

    std::fs::write(&path, &bytes[..bytes.len() - 64]).unwrap();
    let err = BreachDatabase::open(&path, false).unwrap_err().to_string();
    assert!(
        err.contains("incomplete") && err.contains("breach.db"),
        "{err}"
    );
    std::fs::write(&path, vec![7u8; 1000]).unwrap();
    let err = BreachDatabase::open(&path, false).unwrap_err().to_string();
    assert!(err.contains("magic"), "{err}");
    std::fs::write(&path, b"short").unwrap();
    assert!(BreachDatabase::open(&path, false).is_err());
}

#[test]
fn truncated_entries() {
    let mut hashes = random_hashes(500, 5);
    // Two hashes equal in their first 48 bits merge into one entry.
    let mut twin = hashes[0];
    twin[19] ^= 0xff;
    hashes.push(twin);
    let layout = Sha1Layout {
        prefix_bits: Some(8),
        entry_bits: 48,
    };
    let db = sha1_db(&hashes, layout);
    assert_eq!(db.header().entry_bits(), 48);
    assert_eq!(db.header().stats.entries, 500);
    assert_eq!(db.lookup_sha1(&hashes[0]).unwrap(), Some(1 + 501));
    assert!(db.header().false_positive_bound() > 0.0);
    for miss in random_hashes(500, 6) {
        assert_eq!(db.lookup_sha1(&miss).unwrap(), None);
    }
    let bad = Sha1Layout {
        prefix_bits: Some(8),
        entry_bits: 31,
    };
    let entries = [Sha1Entry {
        hash: [1; 20],
        count: 1,
    }];
    assert!(hibp(&entries, &bad).is_err());
}

#[test]
fn unsorted_input_is_refused() {
    let entries = [
        Sha1Entry {
            hash: [0xff; 20],
            count: 1,
        },
        Sha1Entry {
            hash: [0x00; 20],
            count: 1,
        },
    ];
    let err = hibp(&entries, &Sha1Layout::default()).unwrap_err();
    assert!(err.to_string().contains("sorted"), "{err}");
    let layout = Sha1Layout {
        prefix_bits: Some(21),
        entry_bits: 160,
    };
    assert!(hibp(&[], &layout).is_err());
}

#[test]
fn blinded_credentials_end_to_end() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let key = BlindingKey::generate(&mut rng);
    for hash in [FAST_ARGON2, HashKind::Sha256] {
        let pairs: Vec<(String, String)> = (0..200)
            .map(|i| (format!("user{i}"), format!("pw{i}")))
            .collect();
        let entries: Vec<CredentialEntry> = pairs
            .iter()
            .map(|(u, p)| {
                CredentialEntry::new(
                    &key,
                    &credential_hash(&hash, u.as_bytes(), p.as_bytes()).unwrap(),
                )
            })
            .collect();
        let (db, _) =
            build_pairs(entries, hash, key.key_id(), None, &CorpusStats::default()).unwrap();
        let db = BreachDatabase::from_bytes(&db.to_bytes()).unwrap();
        assert_eq!(db.header().stats.entries, 200);
        db.check_key(&key).unwrap();
        assert!(db.check_key(&BlindingKey::generate(&mut rng)).is_err());
        let check = |user: &str, password: &str, rng: &mut ChaCha20Rng| {
            let h =
                credential_hash(&db.header().hash, user.as_bytes(), password.as_bytes()).unwrap();
            let index = db.header().credential_bucket(&h).unwrap();
            let (request, state) = BlindedCheck::new(&h, rng);
            let response = blind_query(&key, &request).unwrap();
            let bucket = db
                .header()
                .decode_bucket(db.database().block(index))
                .unwrap();
            state.finish(&response, &bucket).unwrap()
        };
        assert!(check("user5", "pw5", &mut rng));
        assert!(
            check(" USER5 ", "pw5", &mut rng),
            "usernames are normalized"
        );
        assert!(!check("user5", "pw6", &mut rng));
        assert!(!check("user5p", "w5", &mut rng));
        assert!(!check("nobody", "pw5", &mut rng));
    }
}

#[test]
fn compression_on_random_hashes() {
    let mut entries: Vec<Sha1Entry> = random_hashes(100_000, 8)
        .into_iter()
        .map(|hash| Sha1Entry { hash, count: 1 })
        .collect();
    entries.sort();
    let (db, _) = hibp(&entries, &Sha1Layout::default()).unwrap();
    let h = db.header();
    let ratio = h.compression_ratio();
    assert!(ratio > 1.2 && ratio < 1.5, "ratio {ratio}");
    assert!(h.block_size < h.uncompressed_block_size());
}

/// The number in the report: `cargo test -p pir-breach --release -- --ignored compression_1m`.
#[test]
#[ignore = "measurement, about a second in release mode"]
fn compression_1m() {
    for counts_one in [true, false] {
        let mut rng = ChaCha20Rng::seed_from_u64(9);
        let mut entries: Vec<Sha1Entry> = (0..1_000_000)
            .map(|_| Sha1Entry {
                hash: rng.random(),
                // HIBP-like heavy tail: mostly small counts.
                count: if counts_one {
                    1
                } else {
                    1 + (rng.random::<u32>() % 1000).pow(3) as u64 / 10_000_000
                },
            })
            .collect();
        entries.sort();
        let (db, reason) = hibp(&entries, &Sha1Layout::default()).unwrap();
        let h = db.header();
        println!(
            "counts {}: {reason}\n  block {} B, uncompressed {} B, ratio {:.3}, buckets min/mean/max {}/{:.1}/{}",
            if counts_one { "all 1" } else { "heavy-tailed" },
            h.block_size,
            h.uncompressed_block_size(),
            h.compression_ratio(),
            h.stats.min_bucket,
            h.stats.mean_bucket(h.bucket_count()),
            h.stats.max_bucket
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn any_corpus_any_prefix(
        hashes in proptest::collection::vec(any::<[u8; 20]>(), 0..200),
        k in 0u32..=20,
        bits in 32u32..=160,
    ) {
        prop_assume!(bits > k);
        let layout = Sha1Layout { prefix_bits: Some(k), entry_bits: bits };
        let db = sha1_db(&hashes, layout);
        let db = BreachDatabase::from_bytes(&db.to_bytes()).unwrap();
        for hash in &hashes {
            prop_assert!(db.lookup_sha1(hash).unwrap().is_some());
        }
        let stored: usize = (0..db.header().bucket_count()).map(|b| db.bucket(b).unwrap().len()).sum();
        prop_assert_eq!(stored as u64, db.header().stats.entries);
    }
}
