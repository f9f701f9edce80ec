//! Property tests of the XOR schemes, below the service layer: every configuration, any
//! shape, any indices. (The conformance harness every registered scheme runs, over its real
//! signed-batch service, is `pir_service::conformance`.)
//!
//! A configuration is a [`Config`] (Chor with `n` servers, or RAID-PIR with `n`, `r`, `c` and a
//! mode) over a database shape. [`check_scheme`] runs, for one configuration and a list of
//! index sets: direct correctness (query, answer, decode), the same through the wire bodies and
//! the mirror entry point (`encode_query -> serve::answer_body -> decode_answer -> decode`),
//! query and answer round trips, body-size bounds, index-independent sizes, and rejection of
//! bad index sets. A new XOR scheme adds a `Config` variant and a `run` arm here as well.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::fmt::Debug;

use pir_core::{Database, DbShape, Error, MultiServerScheme};
use pir_xor::{serve, AnswerMode, Chor, DpfPir, RaidPir};
use proptest::prelude::*;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// One scheme configuration.
#[derive(Debug, Clone, Copy)]
enum Config {
    Chor {
        servers: usize,
    },
    Raid {
        servers: usize,
        redundancy: usize,
        chunks: usize,
        mode: AnswerMode,
    },
    Dpf,
}

/// Builds the scheme of `config` and runs [`check_scheme`] on it.
fn run(
    config: Config,
    shape: DbShape,
    index_sets: &[Vec<usize>],
    seed: u64,
) -> Result<(), TestCaseError> {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let db = Database::random(shape, &mut rng);
    match config {
        Config::Chor { servers } => {
            let scheme = Chor::new(shape, servers).map_err(fail)?;
            check_scheme(&scheme, &db, index_sets, &mut rng)
        }
        Config::Raid {
            servers,
            redundancy,
            chunks,
            mode,
        } => {
            let scheme = RaidPir::new(shape, servers, redundancy, chunks, mode).map_err(fail)?;
            check_scheme(&scheme, &db, index_sets, &mut rng)
        }
        Config::Dpf => check_scheme(&DpfPir::new(shape), &db, index_sets, &mut rng),
    }
}

fn fail(error: Error) -> TestCaseError {
    TestCaseError::fail(format!("unexpected error: {error}"))
}

/// The checks every scheme passes, for every index set in `index_sets` (each one a valid
/// request for the scheme).
fn check_scheme<S>(
    scheme: &S,
    db: &Database,
    index_sets: &[Vec<usize>],
    rng: &mut ChaCha20Rng,
) -> Result<(), TestCaseError>
where
    S: MultiServerScheme,
    S::Query: Debug + PartialEq,
    S::Answer: Debug + PartialEq,
{
    let shape = scheme.shape();
    let mut sizes: Option<(Vec<usize>, Vec<usize>)> = None;
    for indices in index_sets {
        prop_assert!(indices.len() <= scheme.max_blocks_per_query());
        let expected: Vec<Vec<u8>> = indices.iter().map(|&i| db.block(i).to_vec()).collect();
        let (queries, state) = scheme.query(indices, rng).map_err(fail)?;
        prop_assert_eq!(queries.len(), scheme.servers());

        // Direct: answer on the structs.
        let answers: Vec<S::Answer> = queries
            .iter()
            .map(|q| scheme.answer(db, q))
            .collect::<Result<_, _>>()
            .map_err(fail)?;
        prop_assert_eq!(&scheme.decode(&state, &answers).map_err(fail)?, &expected);

        // Through the wire bodies and the mirror entry point.
        let mut wire_answers = Vec::new();
        let mut query_lens = Vec::new();
        let mut answer_lens = Vec::new();
        for (query, direct) in queries.iter().zip(&answers) {
            let body = scheme.encode_query(query);
            prop_assert!(body.len() <= serve::max_query_body(shape));
            prop_assert_eq!(&scheme.decode_query(&body).map_err(fail)?, query);
            let answer_bytes = serve::answer_body(db, scheme.id(), &body).map_err(fail)?;
            prop_assert_eq!(&answer_bytes, &scheme.encode_answer(direct));
            let answer = scheme.decode_answer(query, &answer_bytes).map_err(fail)?;
            prop_assert_eq!(&answer, direct);
            query_lens.push(body.len());
            answer_lens.push(answer_bytes.len());
            wire_answers.push(answer);
        }
        prop_assert_eq!(
            &scheme.decode(&state, &wire_answers).map_err(fail)?,
            &expected
        );

        // Body sizes depend on the parameters and the server position, never on the indices.
        match &sizes {
            None => sizes = Some((query_lens, answer_lens)),
            Some((q, a)) => {
                prop_assert_eq!(q, &query_lens);
                prop_assert_eq!(a, &answer_lens);
            }
        }

        // A missing answer, or an answer body one byte short or long, is an error.
        prop_assert!(scheme.decode(&state, &answers[1..]).is_err());
        for (query, answer) in queries.iter().zip(&answers) {
            let mut bytes = scheme.encode_answer(answer);
            bytes.push(0);
            prop_assert!(scheme.decode_answer(query, &bytes).is_err());
            bytes.truncate(bytes.len() - 1);
            if let Some(shorter) = bytes.len().checked_sub(1) {
                prop_assert!(scheme.decode_answer(query, &bytes[..shorter]).is_err());
            }
        }
    }

    // Bad index sets are the caller's error.
    let block_count = shape.block_count();
    prop_assert!(matches!(
        scheme.query(&[block_count], rng),
        Err(Error::InvalidParameter(_))
    ));
    prop_assert!(matches!(
        scheme.query(&[], rng),
        Err(Error::InvalidParameter(_))
    ));
    let too_many: Vec<usize> = (0..=scheme.max_blocks_per_query())
        .map(|i| i % block_count)
        .collect();
    prop_assert!(matches!(
        scheme.query(&too_many, rng),
        Err(Error::InvalidParameter(_))
    ));
    Ok(())
}

/// Valid index sets for `config` over `block_count` blocks, from raw proptest picks:
/// single-index schemes get one index per pick; `PerChunk` gets chunk-disjoint sets.
fn index_sets(
    config: Config,
    block_count: usize,
    picks: &[(usize, Vec<usize>)],
) -> Vec<Vec<usize>> {
    match config {
        Config::Chor { .. }
        | Config::Dpf
        | Config::Raid {
            mode: AnswerMode::Single,
            ..
        } => picks
            .iter()
            .map(|(first, _)| vec![first % block_count])
            .collect(),
        Config::Raid {
            chunks,
            mode: AnswerMode::PerChunk,
            ..
        } => picks
            .iter()
            .map(|(count, positions)| {
                // Pick `count` distinct chunks, then a position inside each.
                let mut rng = ChaCha20Rng::seed_from_u64(*count as u64);
                let mut order: Vec<usize> = (0..chunks).collect();
                order.shuffle(&mut rng);
                let take = 1 + count % chunks;
                order
                    .into_iter()
                    .take(take)
                    .zip(positions.iter().cycle())
                    .map(|(chunk, position)| {
                        let chunk_len = (block_count - chunk).div_ceil(chunks);
                        (position % chunk_len) * chunks + chunk
                    })
                    .collect()
            })
            .collect(),
    }
}

fn config_strategy(block_count: usize) -> impl Strategy<Value = Config> {
    let max_chunks = block_count.min(pir_xor::raid::MAX_CHUNKS);
    prop_oneof![
        (2usize..=6).prop_map(|servers| Config::Chor { servers }),
        Just(Config::Dpf),
        (2usize..=8, any::<usize>(), 1..=max_chunks, any::<bool>()).prop_map(
            |(servers, redundancy, chunks, per_chunk)| Config::Raid {
                servers,
                redundancy: 2 + redundancy % (servers - 1),
                chunks,
                mode: if per_chunk {
                    AnswerMode::PerChunk
                } else {
                    AnswerMode::Single
                },
            }
        ),
    ]
}

fn case_strategy() -> impl Strategy<Value = (DbShape, Config, Vec<(usize, Vec<usize>)>, u64)> {
    (1usize..=300, 1usize..=4).prop_flat_map(|(block_count, lines)| {
        let shape = DbShape::new(block_count as u64, 64 * lines).expect("valid shape");
        (
            Just(shape),
            config_strategy(block_count),
            proptest::collection::vec(
                (
                    any::<usize>(),
                    proptest::collection::vec(any::<usize>(), 1..12),
                ),
                1..4,
            ),
            any::<u64>(),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_scheme_any_shape_any_indices((shape, config, picks, seed) in case_strategy()) {
        let sets = index_sets(config, shape.block_count(), &picks);
        run(config, shape, &sets, seed)?;
    }
}

/// Fixed corner configurations, every index: one block, `c = B`, `c = 1`, `r = n`, `n` at the
/// maximum, `c` above `n`, `c` below `n` (servers with no chunk at all).
#[test]
fn corner_configurations_every_index() {
    let corners: &[(u64, Config)] = &[
        (1, Config::Chor { servers: 2 }),
        (1, Config::Dpf),
        (129, Config::Dpf),
        (
            1,
            Config::Raid {
                servers: 2,
                redundancy: 2,
                chunks: 1,
                mode: AnswerMode::Single,
            },
        ),
        (
            9,
            Config::Chor {
                servers: pir_xor::MAX_SERVERS,
            },
        ),
        (
            9,
            Config::Raid {
                servers: 9,
                redundancy: 9,
                chunks: 9,
                mode: AnswerMode::PerChunk,
            },
        ),
        (
            17,
            Config::Raid {
                servers: 3,
                redundancy: 2,
                chunks: 17,
                mode: AnswerMode::Single,
            },
        ),
        (
            17,
            Config::Raid {
                servers: 5,
                redundancy: 3,
                chunks: 2,
                mode: AnswerMode::PerChunk,
            },
        ),
        (
            40,
            Config::Raid {
                servers: pir_xor::MAX_SERVERS,
                redundancy: 2,
                chunks: 3,
                mode: AnswerMode::Single,
            },
        ),
        (
            300,
            Config::Raid {
                servers: 2,
                redundancy: 2,
                chunks: 256,
                mode: AnswerMode::PerChunk,
            },
        ),
    ];
    for &(block_count, config) in corners {
        let shape = DbShape::new(block_count, 64).unwrap();
        let sets: Vec<Vec<usize>> = (0..block_count as usize).map(|i| vec![i]).collect();
        run(config, shape, &sets, block_count).unwrap();
    }
}

/// `PerChunk` with a full query: one block from every chunk, `c` consecutive blocks of a file.
#[test]
fn per_chunk_fetches_c_consecutive_blocks() {
    let shape = DbShape::new(50, 128).unwrap();
    let config = Config::Raid {
        servers: 4,
        redundancy: 3,
        chunks: 8,
        mode: AnswerMode::PerChunk,
    };
    let sets: Vec<Vec<usize>> = (0..=42)
        .map(|start| (start..start + 8).rev().collect())
        .collect();
    run(config, shape, &sets, 11).unwrap();
}

/// The harness itself can fail: a database changed after the answers disagrees with decode.
#[test]
fn harness_detects_a_wrong_answer() {
    let mut rng = ChaCha20Rng::seed_from_u64(2);
    let shape = DbShape::new(10, 64).unwrap();
    let db = Database::random(shape, &mut rng);
    let other = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, 3, 2, 3, AnswerMode::Single).unwrap();
    let (queries, state) = raid.query(&[4], &mut rng).unwrap();
    let mut answers: Vec<_> = queries
        .iter()
        .map(|q| raid.answer(&db, q).unwrap())
        .collect();
    answers[1] = raid.answer(&other, &queries[1]).unwrap();
    assert_ne!(
        raid.decode(&state, &answers).unwrap(),
        vec![db.block(4).to_vec()]
    );
}
