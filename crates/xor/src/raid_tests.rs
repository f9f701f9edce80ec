//! Unit tests of RAID-PIR: parameters, chunk assignment, seed expansion, answers.

use super::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

fn scheme(block_count: u64, n: usize, r: usize, c: usize, mode: AnswerMode) -> RaidPir {
    RaidPir::new(DbShape::new(block_count, 64).unwrap(), n, r, c, mode).unwrap()
}

#[test]
fn parameter_rules() {
    let shape = DbShape::new(10, 64).unwrap();
    let single = AnswerMode::Single;
    assert!(RaidPir::new(shape, 1, 2, 1, single).is_err());
    assert!(RaidPir::new(shape, MAX_SERVERS + 1, 2, 1, single).is_err());
    assert!(RaidPir::new(shape, 3, 1, 3, single).is_err());
    assert!(RaidPir::new(shape, 3, 4, 3, single).is_err());
    assert!(RaidPir::new(shape, 3, 2, 0, single).is_err());
    assert!(RaidPir::new(shape, 3, 2, 11, single).is_err());
    assert!(RaidPir::new(shape, 3, 3, 10, single).is_ok());
    let big = DbShape::new(1000, 64).unwrap();
    assert!(RaidPir::new(big, 3, 2, MAX_CHUNKS + 1, single).is_err());
    assert!(RaidPir::new(big, 3, 2, MAX_CHUNKS, single).is_ok());
}

#[test]
fn chunks_partition_blocks_and_each_is_seen_by_r_servers() {
    for (b, n, r, c) in [(20, 3, 2, 3), (7, 4, 4, 7), (100, 5, 3, 2), (9, 2, 2, 9)] {
        let raid = scheme(b, n, r, c, AnswerMode::Single);
        let total: usize = (0..c).map(|j| raid.chunk_len(j)).sum();
        assert_eq!(total, b as usize);
        assert_eq!(raid.chunk_len(c), 0);
        assert!(!raid.processes(n, 0) && raid.processed_chunks(n).next().is_none());
        for j in 0..c {
            assert!(raid.chunk_len(j) >= 1);
            let seen: Vec<usize> = (0..n).filter(|&s| raid.processes(s, j)).collect();
            assert_eq!(seen.len(), r);
            let flippers: Vec<usize> = (0..n)
                .filter(|&s| raid.flip_chunks(s).any(|x| x == j))
                .collect();
            assert_eq!(flippers, vec![j % n]);
        }
    }
}

#[test]
fn thesis_example_layout() {
    // Figure 3.1 of Günther 2019: n = 4, B = 24, c = 4, r = 3 (k = 6 per chunk).
    let raid = scheme(24, 4, 3, 4, AnswerMode::Single);
    assert_eq!(
        (0..4).map(|j| raid.chunk_len(j)).collect::<Vec<_>>(),
        vec![6; 4]
    );
    assert_eq!(raid.processed_chunks(0).collect::<Vec<_>>(), vec![0, 2, 3]);
    assert_eq!(raid.seeded_chunks(0).collect::<Vec<_>>(), vec![2, 3]);
    // Block 9 lies in chunk 1 at position 2.
    assert_eq!((raid.chunk_of(9), 9 / raid.chunks()), (1, 2));
}

#[test]
fn single_and_multi_block_queries_decode() {
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let shape = DbShape::new(23, 128).unwrap();
    let db = Database::random(shape, &mut rng);
    for mode in [AnswerMode::Single, AnswerMode::PerChunk] {
        let raid = RaidPir::new(shape, 4, 3, 5, mode).unwrap();
        let requests: Vec<Vec<usize>> = match mode {
            AnswerMode::Single => (0..23).map(|i| vec![i]).collect(),
            AnswerMode::PerChunk => vec![vec![0], vec![7, 3, 10, 4], vec![22, 20, 21, 18, 19]],
        };
        for indices in requests {
            let (queries, state) = raid.query(&indices, &mut rng).unwrap();
            let answers: Vec<_> = queries
                .iter()
                .map(|q| raid.answer(&db, q).unwrap())
                .collect();
            let expected: Vec<Vec<u8>> = indices.iter().map(|&i| db.block(i).to_vec()).collect();
            assert_eq!(raid.decode(&state, &answers).unwrap(), expected);
        }
    }
}

#[test]
fn rejects_bad_index_sets() {
    let mut rng = ChaCha20Rng::seed_from_u64(0);
    let single = scheme(20, 3, 2, 3, AnswerMode::Single);
    assert!(single.query(&[0, 1], &mut rng).is_err());
    assert!(single.query(&[], &mut rng).is_err());
    assert!(single.query(&[20], &mut rng).is_err());
    let multi = scheme(20, 3, 2, 3, AnswerMode::PerChunk);
    assert!(multi.query(&[0, 1, 2], &mut rng).is_ok());
    assert!(multi.query(&[0, 3], &mut rng).is_err());
    assert!(multi.query(&[0, 1, 2, 4], &mut rng).is_err());
}

#[test]
fn answer_rejects_hand_built_queries_that_do_not_fit() {
    let raid = scheme(20, 3, 2, 3, AnswerMode::Single);
    let db = Database::zeroed(raid.shape());
    let mut rng = ChaCha20Rng::seed_from_u64(0);
    let (mut queries, _) = raid.query(&[5], &mut rng).unwrap();
    queries[0].flips[0] = BitVec::zeros(3);
    assert!(raid.answer(&db, &queries[0]).is_err());
    queries[1].server = 3;
    assert!(raid.answer(&db, &queries[1]).is_err());
    queries[2].flips.push(BitVec::zeros(6));
    assert!(raid.answer(&db, &queries[2]).is_err());
}

#[test]
fn body_lengths_stay_under_the_global_bound() {
    for (b, n, r, c) in [
        (1, 2, 2, 1),
        (300, 2, 2, 256),
        (300, 64, 2, 1),
        (17, 5, 3, 17),
    ] {
        let raid = scheme(b, n, r, c, AnswerMode::PerChunk);
        for server in 0..n {
            assert!(raid.query_body_len(server) <= RaidPir::max_query_body(raid.shape()));
        }
    }
}
