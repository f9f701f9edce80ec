//! Statistical privacy checks: what a server (or a coalition below the collusion threshold)
//! receives does not depend on the index.
//!
//! For two index sets `I` and `J` we draw `SAMPLES` queries each and, for every bit position
//! of the view, compare the number of ones in the two samples with a 2x2 chi-square test
//! (1 degree of freedom). Under independence the statistic exceeds [`THRESHOLD`] = 45 with
//! probability about 2e-11 per position, so over the few thousand positions tested here a false
//! alarm has probability below 1e-7 (and the RNG is seeded, so runs are reproducible).
//! Negative controls run the same test on views that do reveal the index (the XOR of all Chor
//! servers' vectors; `r` colluding RAID-PIR servers) and assert that it fires.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::bits::BitVec;
use pir_core::{Database, DbShape, MultiServerScheme};
use pir_xor::{prg, AnswerMode, Chor, RaidPir, RaidQuery};
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Queries per index set.
const SAMPLES: usize = 2000;
/// Chi-square (1 degree of freedom) rejection threshold: P(X > 45) ~ 2e-11 under independence.
const THRESHOLD: f64 = 45.0;

/// Per-position counts of ones over a sample of equally long bit views.
struct Sample {
    ones: Vec<u32>,
    views: usize,
}

impl Sample {
    fn new() -> Self {
        Sample {
            ones: Vec::new(),
            views: 0,
        }
    }

    fn add(&mut self, view: &[bool]) {
        if self.views == 0 {
            self.ones = vec![0; view.len()];
        }
        assert_eq!(
            view.len(),
            self.ones.len(),
            "every view has the same length"
        );
        for (count, &bit) in self.ones.iter_mut().zip(view) {
            *count += u32::from(bit);
        }
        self.views += 1;
    }
}

/// The largest 2x2 chi-square statistic over all positions of two samples of equal size:
/// `2N (a - c)^2 / ((a + c)(2N - a - c))` for `a`, `c` ones out of `N` (0 for a constant bit).
fn max_chi_square(x: &Sample, y: &Sample) -> f64 {
    assert_eq!(x.views, y.views);
    assert_eq!(x.ones.len(), y.ones.len());
    let n = x.views as f64;
    x.ones
        .iter()
        .zip(&y.ones)
        .map(|(&a, &c)| {
            let (a, c) = (f64::from(a), f64::from(c));
            let (ones, zeros) = (a + c, 2.0 * n - a - c);
            if ones == 0.0 || zeros == 0.0 {
                0.0
            } else {
                2.0 * n * (a - c).powi(2) / (ones * zeros)
            }
        })
        .fold(0.0, f64::max)
}

fn bits_of(bytes: &[u8]) -> Vec<bool> {
    bytes
        .iter()
        .flat_map(|&byte| (0..8).map(move |bit| byte >> bit & 1 == 1))
        .collect()
}

fn bitvec_bits(v: &BitVec) -> Vec<bool> {
    (0..v.len()).map(|i| v.get(i)).collect()
}

/// Draws `SAMPLES` queries for each of `first` and `second` and returns the views `view`
/// extracts from each query vector.
fn samples<S: MultiServerScheme>(
    scheme: &S,
    first: &[usize],
    second: &[usize],
    seed: u64,
    view: impl Fn(&[S::Query]) -> Vec<bool>,
) -> (Sample, Sample) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let mut draw = |indices: &[usize]| {
        let mut sample = Sample::new();
        for _ in 0..SAMPLES {
            let (queries, _) = scheme.query(indices, &mut rng).unwrap();
            sample.add(&view(&queries));
        }
        sample
    };
    (draw(first), draw(second))
}

#[test]
fn chor_single_server_view_is_index_independent() {
    let shape = DbShape::new(37, 64).unwrap();
    let chor = Chor::new(shape, 3).unwrap();
    for server in 0..3 {
        // The whole body one server receives (header, bits and zero tail).
        let (x, y) = samples(&chor, &[4], &[30], server as u64, |queries| {
            bits_of(&chor.encode_query(&queries[server]))
        });
        let statistic = max_chi_square(&x, &y);
        assert!(
            statistic < THRESHOLD,
            "server {server}: chi-square {statistic}"
        );
    }
}

#[test]
fn chor_all_servers_together_learn_the_index() {
    // Negative control: the XOR of all n vectors is the unit vector of the index.
    let shape = DbShape::new(37, 64).unwrap();
    let chor = Chor::new(shape, 3).unwrap();
    let (x, y) = samples(&chor, &[4], &[30], 9, |queries| {
        let mut sum = BitVec::zeros(37);
        for query in queries {
            sum.xor_assign(&query.bits);
        }
        bitvec_bits(&sum)
    });
    assert!(max_chi_square(&x, &y) > THRESHOLD);
}

/// The sub-query bits server `server` derives from its seed, per chunk (`None` for chunks it
/// does not expand), following the layout in `pir_xor::raid`'s module documentation.
fn expanded(raid: &RaidPir, query: &RaidQuery) -> Vec<Option<BitVec>> {
    let n = raid.servers();
    let seeded: Vec<usize> = raid
        .processed_chunks(query.server)
        .filter(|&chunk| chunk % n != query.server)
        .collect();
    let total: usize = seeded.iter().map(|&j| raid.chunk_len(j).div_ceil(8)).sum();
    let mut stream = vec![0u8; total];
    prg::expand(&query.seed, &mut stream);
    let mut out = vec![None; raid.chunks()];
    let mut offset = 0;
    for chunk in seeded {
        let len = raid.chunk_len(chunk);
        out[chunk] = Some(BitVec::from_prefix_truncating(len, &stream[offset..]).unwrap());
        offset += len.div_ceil(8);
    }
    out
}

/// What a coalition of servers learns about each flip chunk it holds: the flip XOR the
/// coalition's own sub-queries for that chunk. Uniform unless the coalition covers all `r`
/// servers of the chunk, in which case it is the unit vector of the requested position.
fn coalition_view(raid: &RaidPir, queries: &[RaidQuery], coalition: &[usize]) -> Vec<bool> {
    let n = raid.servers();
    let mut view = Vec::new();
    for &server in coalition {
        for (chunk, flip) in raid.flip_chunks(server).zip(&queries[server].flips) {
            let mut known = flip.clone();
            for &other in coalition {
                if let Some(bits) = &expanded(raid, &queries[other])[chunk] {
                    known.xor_assign(bits);
                }
            }
            assert_eq!(chunk % n, server);
            view.extend(bitvec_bits(&known));
        }
    }
    view
}

#[test]
fn raidpir_single_server_view_is_index_independent() {
    let shape = DbShape::new(40, 64).unwrap();
    for mode in [AnswerMode::Single, AnswerMode::PerChunk] {
        let raid = RaidPir::new(shape, 4, 3, 6, mode).unwrap();
        // Same chunk count per set in PerChunk mode; different chunks and positions.
        let (first, second): (&[usize], &[usize]) = match mode {
            AnswerMode::Single => (&[2], &[39]),
            AnswerMode::PerChunk => (&[2, 9], &[37, 6]),
        };
        for server in 0..4 {
            // The whole body: header, fresh seed and flip chunks (with their zero tails).
            let (x, y) = samples(&raid, first, second, 100 + server as u64, |queries| {
                bits_of(&raid.encode_query(&queries[server]))
            });
            let statistic = max_chi_square(&x, &y);
            assert!(
                statistic < THRESHOLD,
                "{mode:?} server {server}: chi-square {statistic}"
            );
        }
    }
}

#[test]
fn raidpir_r_minus_1_colluders_learn_nothing_but_r_do() {
    let shape = DbShape::new(40, 64).unwrap();
    let raid = RaidPir::new(shape, 4, 3, 4, AnswerMode::Single).unwrap();
    // Block 2 is in chunk 2 (servers 2, 3, 0; flip server 2); block 37 in chunk 1 (1, 2, 3).
    // Coalition {2, 3}: r - 1 = 2 servers; it holds the flip of chunk 2 and one of that
    // chunk's two sub-queries, but not server 0's.
    let (x, y) = samples(&raid, &[2], &[37], 7, |q| coalition_view(&raid, q, &[2, 3]));
    let statistic = max_chi_square(&x, &y);
    assert!(
        statistic < THRESHOLD,
        "r - 1 colluders: chi-square {statistic}"
    );
    // Negative control: {2, 3, 0} are all r = 3 servers of chunk 2 and see its unit vector.
    let (x, y) = samples(&raid, &[2], &[37], 8, |q| {
        coalition_view(&raid, q, &[2, 3, 0])
    });
    assert!(
        max_chi_square(&x, &y) > THRESHOLD,
        "the test detects a revealing view"
    );
}

#[test]
fn body_sizes_do_not_depend_on_the_index() {
    let shape = DbShape::new(29, 128).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(3);
    let db = Database::random(shape, &mut rng);
    let raid = RaidPir::new(shape, 5, 3, 7, AnswerMode::PerChunk).unwrap();
    // (query body, answer body) lengths per server, from real answers.
    let mut sizes = |indices: &[usize]| -> Vec<(usize, usize)> {
        let (queries, _) = raid.query(indices, &mut rng).unwrap();
        queries
            .iter()
            .map(|q| {
                let answer = raid.answer(&db, q).unwrap();
                (
                    raid.encode_query(q).len(),
                    raid.encode_answer(&answer).len(),
                )
            })
            .collect()
    };
    let reference = sizes(&[0]);
    for indices in [
        vec![28],
        vec![13, 1],
        vec![6, 5, 4, 3, 2, 1, 0],
        vec![27, 26, 25],
    ] {
        assert_eq!(sizes(&indices), reference);
    }
    let chor = Chor::new(shape, 2).unwrap();
    for index in 0..29 {
        let (queries, _) = chor.query(&[index], &mut rng).unwrap();
        for query in &queries {
            assert_eq!(chor.encode_query(query).len(), 12 + 4);
            assert_eq!(
                chor.encode_answer(&chor.answer(&db, query).unwrap()).len(),
                128
            );
        }
    }
}
