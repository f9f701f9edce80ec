//! QDP rows of `pir bench` (`--modes qdp`): the *online* server time of RAID-PIR with
//! query-dependent preprocessing (Günther 2019, section 3.3) next to plain RAID-PIR and RAID-PIR
//! with four Russians on the same database, for `n = 2` and `n = 3` servers (`r = 2`,
//! `c = n`, [`AnswerMode::Single`]), with a plain read of the same bytes in the same run.
//!
//! What is timed, per row, exactly as a server does it:
//! - `raid-pir`/`nN-plain`: decode the RAID-PIR query body, expand its seed, scan, encode
//!   ([`Engine::prepare`] and [`Engine::answer`], four Russians off);
//! - `raid-pir`/`nN-four-russians-tT`: the same from a four-Russians table of group size `t`;
//! - `qdp`/`nN-online`: decode the QDP query body, take its issued seed
//!   ([`QdpServer::take_query`]) and XOR the rows the flip chunks select into the entry
//!   precomputed beforehand ([`PendingAnswer::answer_body`](pir_xor::qdp::PendingAnswer)).
//!   The precomputation of that entry (the offline half) is not timed here; its median time
//!   is reported by [`QdpSummary::precompute_ms`].
//! - `qdp`/`nN-online-four-russians-tT`: the same, the flip-chunk rows read from a
//!   four-Russians table of server 0's flip chunks only
//!   ([`PendingAnswer::answer_from_table`](pir_xor::qdp::PendingAnswer::answer_from_table),
//!   [`flip_table_layout`](pir_xor::qdp::flip_table_layout); table build not timed, its size
//!   in the last column). Two rows: at the baseline's `t` (`1 / n` of its memory), and at the
//!   largest `t` whose table still takes no more memory than the baseline's
//!   ([`equal_memory_group`]; at `n = 2`, `t = 4`: `t = 5`, 3.1x against 3.75x the database).
//!
//! The issue's target: QDP online time at most 0.5 x RAID-PIR with four Russians, `n = 2`
//! ([`TARGET_RATIO`]). GB/s is database bytes over the median time for every row, so the
//! ratio column compares each row's effective speed with the memory read. Every row also counts
//! what it read (the QDP online rows: the precomputed block plus the flip-chunk rows or table
//! entries, [`PendingAnswer::rows_read`](pir_xor::qdp::PendingAnswer::rows_read)) and, where it
//! reads only some rows, times a plain read of just those as its limit.

use std::time::{Duration, Instant};

use pir_core::{DbShape, MultiServerScheme, SchemeId};
use pir_kernels::russians::RussiansLayout;
use pir_xor::engine::{Engine, EngineOptions, Russians};
use pir_xor::qdp::{self, MemorySeedStore, QdpClient, QdpConfig, QdpServer, SeedKey};
use pir_xor::{AnswerMode, RaidPir};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;
use serde::Serialize;

use crate::{median_ms, pool, random_database, Row, Shape};

/// The issue's target: QDP online time over four-Russians RAID-PIR time, `n = 2`.
pub const TARGET_RATIO: f64 = 0.5;
/// Servers `n` of the QDP rows.
pub const SERVER_COUNTS: [usize; 2] = [2, 3];
/// RAID-PIR redundancy `r` of every QDP row (chunks `c = n`).
pub const REDUNDANCY: usize = 2;

/// What to run.
#[derive(Debug, Clone)]
pub struct QdpBenchOptions {
    /// Shapes (their scheme is ignored: every row uses RAID-PIR queries).
    pub shapes: Vec<Shape>,
    /// Four-Russians group size `t`.
    pub group: usize,
    /// Thread counts (the read and the engine rows use them; the QDP online XOR of the
    /// selected rows runs on one thread, as the server runs it).
    pub threads: Vec<usize>,
    /// Timed runs per row.
    pub runs: usize,
}

/// Per shape and `n`: QDP online time against four Russians, and the offline cost.
#[derive(Debug, Clone, Serialize)]
pub struct QdpSummary {
    /// Shape name.
    pub shape: String,
    /// Servers `n`.
    pub servers: usize,
    /// Threads of the compared rows.
    pub threads: usize,
    /// QDP online median (scan) over four-Russians median (target for `n = 2`: at most 0.5).
    pub online_over_four_russians: f64,
    /// Four-Russians group size `t` of the baseline.
    pub group: usize,
    /// QDP online median from a table of the flip chunks (group `t`, `1 / n` of the
    /// baseline's memory) over four-Russians median.
    pub online_table_over_four_russians: f64,
    /// The largest group size whose flip-chunk table fits in the baseline table's memory.
    pub equal_memory_group: usize,
    /// QDP online median from a flip-chunk table of `equal_memory_group` over four-Russians
    /// median.
    pub online_equal_memory_over_four_russians: f64,
    /// QDP online median over plain RAID-PIR median.
    pub online_over_plain: f64,
    /// Median time to precompute one queue entry (offline), ms.
    pub precompute_ms: f64,
}

impl QdpSummary {
    /// One line for the text output.
    pub fn line(&self) -> String {
        // Every QDP variant here uses at most the baseline's memory, so the best one counts.
        let best = self
            .online_over_four_russians
            .min(self.online_table_over_four_russians)
            .min(self.online_equal_memory_over_four_russians);
        let verdict = if self.servers != 2 {
            String::new()
        } else if best <= TARGET_RATIO {
            format!(" (target <= {TARGET_RATIO}: met)")
        } else {
            format!(" (target <= {TARGET_RATIO}: NOT met)")
        };
        let equal = if self.equal_memory_group == self.group {
            String::new()
        } else {
            format!(
                ", {:.2}x from a t={} flip-chunk table (no more memory than four Russians t={})",
                self.online_equal_memory_over_four_russians, self.equal_memory_group, self.group
            )
        };
        format!(
            "{} n={} thr={}: QDP online = {:.2}x four Russians t={} by scan, {:.2}x from a \
             t={} flip-chunk table{equal}{verdict}; scan {:.2}x plain RAID-PIR; precomputing \
             one entry (offline) {:.1} ms",
            self.shape,
            self.servers,
            self.threads,
            self.online_over_four_russians,
            self.group,
            self.online_table_over_four_russians,
            self.group,
            self.online_over_plain,
            self.precompute_ms
        )
    }
}

/// One timed QDP online step of server 0 for a random index: every server issues a seed, the
/// client builds its queries, and server 0's query is taken and answered by `answer` (the
/// query building is not timed). `reads` is what the step reads (`region`, and the table
/// layout when it answers from a table): counted, and read alone (untimed in the step) for
/// the limit.
#[allow(clippy::expect_used)]
fn online_run(
    rng: &mut ChaCha20Rng,
    servers: &mut [QdpServer<MemorySeedStore>],
    client: &QdpClient,
    reads: (&[u8], Option<RussiansLayout>),
    answer: &dyn Fn(qdp::PendingAnswer) -> Vec<u8>,
) -> Sample {
    let index = rng.random_range(0..client.scheme().shape().block_count());
    let grants: Vec<_> = servers
        .iter_mut()
        .map(|server| server.issue().expect("seed"))
        .collect();
    let (queries, _) = client.query(&[index], &grants).expect("query");
    let body = client.encode_query(&queries[0]);
    let t = Instant::now();
    let pending = servers[0].take_query(&body).expect("issued seed");
    let taken = t.elapsed();
    assert!(pending.is_precomputed(), "the queue holds an entry per run");
    // A copy to count what the answer reads, made outside the timed steps.
    let counted = pending.clone();
    let t = Instant::now();
    std::hint::black_box(answer(pending));
    let time = taken + t.elapsed();
    let (region, table) = reads;
    let precomputed = counted.precomputed_bytes();
    match counted.rows_read(table) {
        Some((b, list)) => Sample {
            time,
            touched: precomputed + list.len() * b,
            limit: Some(crate::time_rows_read(region, b, &list)),
        },
        None => Sample {
            time,
            touched: precomputed + region.len(),
            limit: None,
        },
    }
}

/// One timed answer: its time, the bytes it read, and the time of a plain read of just the
/// rows or entries it read (`None` when it reads every row: its limit is the plain read).
struct Sample {
    time: Duration,
    touched: usize,
    limit: Option<Duration>,
}

/// Medians of [`alternate`]'s runs.
struct Measured {
    read_ms: f64,
    median_ms: f64,
    touched: usize,
    limit_ms: Option<f64>,
}

/// The largest group size whose table of server 0's flip chunks (the largest share) takes at
/// most `budget` bytes, and at least `group`.
pub fn equal_memory_group(raid: &RaidPir, group: usize, budget: usize) -> usize {
    pir_kernels::russians::GROUP_SIZES
        .rev()
        .filter(|&t| t > group)
        .find(|&t| qdp::flip_table_layout(raid, 0, t).is_some_and(|l| l.table_bytes() <= budget))
        .unwrap_or(group)
}

/// Alternates a plain read of the database with `work` (after one untimed warm-up of each)
/// on a pool of `threads`; returns the medians of the read, the work and its limit, and the
/// mean bytes the work read.
fn alternate(
    threads: usize,
    runs: usize,
    database: &[u8],
    work: &mut (dyn FnMut() -> Sample + Send),
) -> Measured {
    let pool = pool(threads);
    let mut reads = Vec::new();
    let mut server = Vec::new();
    let mut touched = Vec::new();
    let mut limits = Vec::new();
    for run in 0..=runs {
        let read = pool.install(|| {
            let t = Instant::now();
            std::hint::black_box(pir_kernels::memory::read_parallel(database));
            t.elapsed()
        });
        let sample = pool.install(&mut *work);
        if run > 0 {
            reads.push(read);
            server.push(sample.time);
            touched.push(sample.touched);
            limits.extend(sample.limit);
        }
    }
    Measured {
        read_ms: median_ms(reads),
        median_ms: median_ms(server),
        touched: touched.iter().sum::<usize>() / touched.len().max(1),
        limit_ms: (!limits.is_empty()).then(|| median_ms(limits)),
    }
}

fn row(
    shape: &Shape,
    (scheme, mode): (&str, String),
    threads: usize,
    bytes: usize,
    measured: &Measured,
    extra: (usize, f64),
    runs: usize,
) -> Row {
    Row::measured(
        shape,
        scheme,
        mode,
        threads,
        (bytes, bytes),
        (measured.read_ms, measured.median_ms),
        extra,
        runs,
    )
    .with_touched(measured.touched)
    .with_touched_read(measured.limit_ms)
}

// Shapes are validated by `shape_named`/`SHAPES`; queries are built here for this database
// and its parameters, so preparing and answering them cannot fail.
#[allow(clippy::expect_used)]
/// Runs every QDP row: per shape and `n`, plain RAID-PIR, four-Russians RAID-PIR and QDP
/// online, per thread count. Calls `report` after each row and `summary` after each `n`.
pub fn run_qdp(
    options: &QdpBenchOptions,
    report: &mut dyn FnMut(&Row),
    summary: &mut dyn FnMut(&QdpSummary),
) -> Vec<Row> {
    let runs = options.runs.max(1);
    let max_threads = options.threads.iter().copied().max().unwrap_or(1);
    let mut rng = ChaCha20Rng::seed_from_u64(2026);
    let mut rows = Vec::new();
    for shape in &options.shapes {
        let db_shape =
            DbShape::new(shape.blocks as u64, shape.block_size).expect("shapes are valid");
        let bytes = db_shape.total_bytes();
        let schemes: Vec<RaidPir> = SERVER_COUNTS
            .iter()
            .filter(|&&n| n <= shape.blocks)
            .map(|&n| {
                RaidPir::new(db_shape, n, REDUNDANCY, n, AnswerMode::Single)
                    .expect("n <= B servers, r = 2, c = n")
            })
            .collect();
        let mut medians: Vec<[f64; 5]> = vec![[f64::NAN; 5]; schemes.len() * options.threads.len()];
        let mut precompute = vec![f64::NAN; schemes.len()];
        let mut groups = vec![options.group; schemes.len()];
        let b = db_shape.block_size();
        // Engines one at a time: the four-Russians table is (2^t - 1)/t times the database.
        for (slot, russians) in [(0, Russians::Off), (1, Russians::Group(options.group))] {
            let engine_options = EngineOptions {
                russians,
                russians_memory_limit: usize::MAX,
            };
            let started = Instant::now();
            let engine = pool(max_threads).install(|| {
                Engine::new(random_database(db_shape, 0x5a), engine_options, &|_, _| {})
            });
            let setup_s = started.elapsed().as_secs_f64();
            let table = engine.russians_table_bytes();
            for (i, raid) in schemes.iter().enumerate() {
                let n = raid.servers();
                let mode = match russians {
                    Russians::Group(t) => format!("n{n}-four-russians-t{t}"),
                    _ => format!("n{n}-plain"),
                };
                for (k, &threads) in options.threads.iter().enumerate() {
                    let measured = alternate(threads, runs, engine.database().bytes(), &mut || {
                        let index = rng.random_range(0..db_shape.block_count());
                        let (queries, _) = raid.query(&[index], &mut rng).expect("index in range");
                        let body = raid.encode_query(&queries[0]);
                        let t = Instant::now();
                        let prepared = engine
                            .prepare(SchemeId::RaidPir, &body)
                            .expect("valid query");
                        std::hint::black_box(engine.answer(&prepared));
                        let time = t.elapsed();
                        Sample {
                            time,
                            touched: engine.bytes_read(&[&prepared]),
                            limit: engine.rows_read(&prepared).map(|(region, size, list)| {
                                crate::time_rows_read(region, size, &list)
                            }),
                        }
                    });
                    medians[i * options.threads.len() + k][slot] = measured.median_ms;
                    let row = row(
                        shape,
                        ("raid-pir", mode.clone()),
                        threads,
                        bytes,
                        &measured,
                        (table, setup_s),
                        runs,
                    );
                    report(&row);
                    rows.push(row);
                }
            }
            if russians != Russians::Off {
                continue;
            }
            // QDP on the plain engine's database: server 0 is measured; the other servers
            // only issue seeds (their partial answers do not matter to server 0's time).
            for (i, raid) in schemes.iter().enumerate() {
                let n = raid.servers();
                // (runs + 1) per thread count, for the scan rows and the two table rows
                let entries = 3 * (runs + 1) * options.threads.len();
                let mut servers: Vec<QdpServer<MemorySeedStore>> = (0..n)
                    .map(|s| {
                        let config = QdpConfig {
                            queue_capacity: if s == 0 { entries } else { 0 },
                            issued_capacity: entries.max(1),
                            ..QdpConfig::default()
                        };
                        let key = SeedKey::from_bytes([s as u8 + 1; 16]);
                        QdpServer::new(*raid, s, config, &key, MemorySeedStore::new())
                            .expect("valid QDP parameters")
                    })
                    .collect();
                let precomputer = servers[0].precomputer();
                let mut offline = Vec::new();
                pool(max_threads).install(|| {
                    for _ in 0..entries {
                        let t = Instant::now();
                        precomputer
                            .step(&mut servers[0], engine.database())
                            .expect("precompute");
                        offline.push(t.elapsed());
                    }
                });
                precompute[i] = median_ms(offline);
                let client = QdpClient::new(*raid);
                for (k, &threads) in options.threads.iter().enumerate() {
                    let measured = alternate(threads, runs, engine.database().bytes(), &mut || {
                        let reads = (engine.database().bytes(), None);
                        online_run(&mut rng, &mut servers, &client, reads, &|pending| {
                            pending.answer_body(engine.database()).expect("answer")
                        })
                    });
                    medians[i * options.threads.len() + k][2] = measured.median_ms;
                    let row = row(
                        shape,
                        ("qdp", format!("n{n}-online")),
                        threads,
                        bytes,
                        &measured,
                        (0, 0.0),
                        runs,
                    );
                    report(&row);
                    rows.push(row);
                }
                // The same online step from a table of server 0's flip chunks: at the
                // baseline's group size, and at the largest one whose table still takes no
                // more memory than the baseline's table over every row.
                let baseline_table =
                    RussiansLayout::new(db_shape.block_count(), b, 1, options.group)
                        .expect("valid four-Russians layout")
                        .table_bytes();
                let equal = equal_memory_group(raid, options.group, baseline_table);
                groups[i] = equal;
                let mut tables = vec![options.group];
                if equal != options.group {
                    tables.push(equal);
                }
                for (slot, &t) in tables.iter().enumerate() {
                    let layout = qdp::flip_table_layout(raid, 0, t).expect("valid layout");
                    let started = Instant::now();
                    let table = pool(max_threads).install(|| {
                        pir_kernels::russians::build_parallel(
                            layout,
                            engine.database().bytes(),
                            &|_, _| {},
                        )
                    });
                    let setup_s = started.elapsed().as_secs_f64();
                    for (k, &threads) in options.threads.iter().enumerate() {
                        let measured =
                            alternate(threads, runs, engine.database().bytes(), &mut || {
                                let reads = (&table[..], Some(layout));
                                online_run(&mut rng, &mut servers, &client, reads, &|pending| {
                                    let answer = pending
                                        .answer_from_table(engine.database(), layout, &table)
                                        .expect("answer");
                                    raid.encode_answer(&answer)
                                })
                            });
                        let cell = &mut medians[i * options.threads.len() + k];
                        cell[3 + slot] = measured.median_ms;
                        if slot == 0 {
                            cell[4] = measured.median_ms;
                        }
                        let row = row(
                            shape,
                            ("qdp", format!("n{n}-online-four-russians-t{t}")),
                            threads,
                            bytes,
                            &measured,
                            (table.len(), setup_s),
                            runs,
                        );
                        report(&row);
                        rows.push(row);
                    }
                }
            }
        }
        for (i, raid) in schemes.iter().enumerate() {
            for (k, &threads) in options.threads.iter().enumerate() {
                let [plain, russians, online, online_table, online_equal] =
                    medians[i * options.threads.len() + k];
                summary(&QdpSummary {
                    shape: shape.name.into(),
                    servers: raid.servers(),
                    threads,
                    group: options.group,
                    online_over_four_russians: online / russians,
                    online_table_over_four_russians: online_table / russians,
                    equal_memory_group: groups[i],
                    online_equal_memory_over_four_russians: online_equal / russians,
                    online_over_plain: online / plain,
                    precompute_ms: precompute[i],
                });
            }
        }
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_run_reports_five_rows_per_n_and_a_summary() {
        let options = QdpBenchOptions {
            shapes: vec![crate::shape_named("1024x64-raid").unwrap()],
            group: 4,
            threads: vec![1],
            runs: 2,
        };
        let mut summaries = Vec::new();
        let rows = run_qdp(&options, &mut |_| {}, &mut |s| summaries.push(s.clone()));
        let modes: Vec<(&str, &str)> = rows
            .iter()
            .map(|r| (r.scheme.as_str(), r.mode.as_str()))
            .collect();
        assert_eq!(
            modes,
            [
                ("raid-pir", "n2-plain"),
                ("raid-pir", "n3-plain"),
                ("qdp", "n2-online"),
                ("qdp", "n2-online-four-russians-t4"),
                ("qdp", "n2-online-four-russians-t5"),
                ("qdp", "n3-online"),
                ("qdp", "n3-online-four-russians-t4"),
                ("qdp", "n3-online-four-russians-t6"),
                ("raid-pir", "n2-four-russians-t4"),
                ("raid-pir", "n3-four-russians-t4"),
            ]
        );
        for row in &rows {
            assert!(row.median_ms > 0.0 && row.memory_read_gb_per_s > 0.0);
            assert!((row.ratio - row.gb_per_s / row.memory_read_gb_per_s).abs() < 1e-9);
        }
        // What each row read: 64-byte rows are scanned densely (every row, no limit of their
        // own); table answers read some entries (and QDP the precomputed block besides).
        let db = 64 * 1024;
        for (i, row) in rows.iter().enumerate() {
            let touched = row.touched_bytes.expect("every row counts what it read");
            match i {
                0 | 1 => assert_eq!(touched, db),
                2 | 5 => assert_eq!(touched, 64 + db),
                3 | 4 | 6 | 7 => assert!(touched > 64 && touched < 64 + db / 2, "{row:?}"),
                _ => assert!(touched > 0 && touched < db, "{row:?}"),
            }
            assert_eq!(
                row.touched_read_ms.is_some(),
                !matches!(i, 0 | 1 | 2 | 5),
                "{row:?}"
            );
            assert!(row.touched_ratio.is_some_and(|r| r > 0.0));
        }
        let baseline = 64 * 1024 * 15 / 4;
        assert_eq!(rows[8].extra_memory_bytes, baseline);
        // flip-chunk tables: ceil(B / (n t)) super-groups of one group of 2^t - 1 entries
        assert_eq!(rows[3].extra_memory_bytes, 1024usize.div_ceil(8) * 15 * 64);
        assert_eq!(rows[4].extra_memory_bytes, 1024usize.div_ceil(10) * 31 * 64);
        assert_eq!(rows[6].extra_memory_bytes, 1024usize.div_ceil(12) * 15 * 64);
        assert_eq!(rows[7].extra_memory_bytes, 1024usize.div_ceil(18) * 63 * 64);
        // the larger group is the largest within the baseline's memory
        assert!(rows[4].extra_memory_bytes <= baseline && rows[7].extra_memory_bytes <= baseline);
        let raid =
            RaidPir::new(DbShape::new(1024, 64).unwrap(), 2, 2, 2, AnswerMode::Single).unwrap();
        assert!(qdp::flip_table_layout(&raid, 0, 6).unwrap().table_bytes() > baseline);
        assert_eq!(equal_memory_group(&raid, 4, baseline), 5);
        assert_eq!(equal_memory_group(&raid, 4, 0), 4);
        assert_eq!(summaries.len(), 2);
        assert_eq!(summaries[0].equal_memory_group, 5);
        assert_eq!(summaries[1].equal_memory_group, 6);
        assert!(summaries.iter().all(|s| s.online_over_four_russians > 0.0
            && s.online_table_over_four_russians > 0.0
            && s.online_equal_memory_over_four_russians > 0.0
            && s.precompute_ms > 0.0
            && s.line().contains("QDP online")));
    }
}
