//! What a store sees does not depend on what is asked: the slots read and written under a
//! sequential scan, uniformly random blocks and one block asked again and again have the same
//! distribution (two-sample chi-square tests on the store's view), and the test has the power
//! to see a leak (a control trace that reads a repeated block's home again is flagged). The
//! background shuffler's schedule (how many partitions each batch reads, how much shuffle
//! I/O runs between batches) is compared the same way, under an open-loop client and under
//! a closed-loop one (whose sending rate the store can time: TaoStore's critique of
//! ObliviStore, which the schedule before reads of partitions being shuffled failed).
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_oram::{Client, Extent, Geometry, MemoryStore, Op, Oram, Request};
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

const BLOCKS: u64 = 1024;
const REQUESTS: u32 = 40_000;

#[derive(Clone, Copy)]
enum Workload {
    Sequential,
    Random,
    RepeatOne,
}

/// The store's view: for every read, (partition, level, slot offset inside the region); and
/// the number of extents read and written per request.
struct View {
    reads: Vec<(u32, usize, u32)>,
    first_read_partitions: Vec<u32>,
    extents: u64,
    slots: u64,
}

fn locate(g: &Geometry, e: Extent) -> (u32, usize, u32) {
    let footprint = g.partition_footprint();
    let partition = (e.first_slot / footprint) as u32;
    let mut rest = e.first_slot % footprint;
    for level in 0..g.levels() {
        let region = 2 * u64::from(g.slots(level));
        if rest < region {
            return (partition, level, (rest % u64::from(g.slots(level))) as u32);
        }
        rest -= region;
    }
    unreachable!("extent outside the partition")
}

fn observe(workload: Workload, width: u32, seed: u64) -> View {
    let g = Geometry::new(512, BLOCKS, 1).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let oram = Oram::create(g.clone(), &mut rng).unwrap();
    let mut store = MemoryStore::new(g.sealed_slot(), &[g.store_bytes(0)]);
    store.log = Some(Vec::new());
    let mut c = Client::new(oram, store, rng);
    let mut pick = ChaCha20Rng::seed_from_u64(seed + 1000);
    let mut view = View {
        reads: Vec::new(),
        first_read_partitions: Vec::new(),
        extents: 0,
        slots: 0,
    };
    for batch in 0..REQUESTS / width {
        let requests = (0..width)
            .map(|j| {
                let i = batch * width + j;
                let block = match workload {
                    Workload::Sequential => i % BLOCKS as u32,
                    Workload::Random => pick.random_range(0..BLOCKS as u32),
                    Workload::RepeatOne => 7,
                };
                let op = if i.is_multiple_of(2) {
                    Op::Write(vec![i as u8; 512])
                } else {
                    Op::Read
                };
                Request {
                    id: u64::from(i),
                    block,
                    op,
                }
            })
            .collect();
        c.run(requests).unwrap();
        let log = c.store.log.replace(Vec::new()).unwrap();
        let mut seen = Vec::new();
        for (write, e) in log {
            view.extents += 1;
            view.slots += u64::from(e.slots);
            // Batch reads are one slot each; eviction reads are whole levels.
            if !write && e.slots == 1 {
                let at = locate(&g, e);
                if !seen.contains(&at.0) {
                    seen.push(at.0);
                    view.first_read_partitions.push(at.0);
                }
                view.reads.push(at);
            }
        }
    }
    view
}

/// Two-sample chi-square statistic over histograms with equal totals scaled; returns
/// (statistic, degrees of freedom).
fn two_sample(a: &[u64], b: &[u64]) -> (f64, usize) {
    let (na, nb) = (a.iter().sum::<u64>() as f64, b.iter().sum::<u64>() as f64);
    let (ka, kb) = ((nb / na).sqrt(), (na / nb).sqrt());
    let mut stat = 0.0;
    let mut bins = 0;
    for (&x, &y) in a.iter().zip(b) {
        if x + y == 0 {
            continue;
        }
        let d = ka * x as f64 - kb * y as f64;
        stat += d * d / (x + y) as f64;
        bins += 1;
    }
    (stat, bins.max(2) - 1)
}

/// Whether a chi-square statistic is far beyond its degrees of freedom (about p < 1e-6:
/// mean df, standard deviation sqrt(2 df)).
fn suspicious(stat: f64, df: usize) -> bool {
    stat > df as f64 + 5.0 * (2.0 * df as f64).sqrt() + 10.0
}

fn histograms(view: &View, g: &Geometry) -> Vec<Vec<u64>> {
    let mut partitions = vec![0u64; g.partitions as usize];
    let mut repeats = vec![0u64; 2];
    let mut offsets = vec![vec![0u64; 16]; g.levels()];
    for w in view.first_read_partitions.windows(2) {
        repeats[usize::from(w[0] == w[1])] += 1;
    }
    // The partition each request read (its first slot read; every read of a request is in
    // the same partition).
    for &p in &view.first_read_partitions {
        partitions[p as usize] += 1;
    }
    for &(_, level, offset) in &view.reads {
        let bucket = (u64::from(offset) * 16 / u64::from(g.slots(level))) as usize;
        offsets[level][bucket] += 1;
    }
    let mut all = vec![partitions, repeats];
    all.extend(offsets);
    all
}

#[test]
fn the_store_view_is_the_same_for_every_workload() {
    compare(1);
}

/// Eight requests in flight at once: the same block asked eight times concurrently (fake
/// reads for all but one) looks like eight different blocks.
#[test]
fn concurrent_requests_for_one_block_do_not_show() {
    compare(8);
}

fn compare(width: u32) {
    let g = Geometry::new(512, BLOCKS, 1).unwrap();
    let views = [
        ("sequential", observe(Workload::Sequential, width, 1)),
        ("random", observe(Workload::Random, width, 2)),
        ("repeat-one", observe(Workload::RepeatOne, width, 3)),
    ];
    let reference = histograms(&views[1].1, &g);
    for (name, view) in &views {
        // Same amount of traffic per request (within 2%: it depends only on the random
        // partitions drawn).
        let ratio = view.slots as f64 / views[1].1.slots as f64;
        assert!((0.98..1.02).contains(&ratio), "{name}: {ratio}");
        for (i, (h, r)) in histograms(view, &g).iter().zip(&reference).enumerate() {
            let (stat, df) = two_sample(h, r);
            assert!(
                !suspicious(stat, df),
                "{name}: statistic {i} is {stat:.1} with {df} degrees of freedom"
            );
        }
    }
    if width > 1 {
        return;
    }
    // Power: a leaky client that reads a repeated block's home again (no fresh home after
    // each access) makes every partition read the same; the same test flags it at once.
    let mut leaky = histograms(&views[2].1, &g);
    leaky[1] = vec![0, views[2].1.first_read_partitions.len() as u64];
    let (stat, df) = two_sample(&leaky[1], &reference[1]);
    assert!(
        suspicious(stat, df),
        "the control leak was not seen: {stat}"
    );
}

/// The store's view of the background schedule under an open-loop client: 8 new requests
/// before every step, whatever was answered (ObliviStore's model: when requests arrive is
/// public, what they ask is not). Per step, the partitions the batch read and the shuffle
/// pieces (multi-slot reads and writes) that ran; and the partitions read. A closed-loop
/// client is `closed_loop` below.
struct Schedule {
    batch_sizes: Vec<u64>,
    pieces: Vec<u64>,
    /// Per step: how often a shuffle piece read follows a piece write (the order of the
    /// pieces: the driver runs each wave's reads, then its writes, whatever was asked).
    turns: Vec<u64>,
    partitions: Vec<u64>,
    answered: u64,
}

fn schedule(workload: Workload, steps: u32, seed: u64) -> Schedule {
    const IN_FLIGHT: u64 = 32;
    const PER_STEP: u64 = 8;
    let g = Geometry::new(512, BLOCKS, 1).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let oram = Oram::create(g.clone(), &mut rng).unwrap();
    let mut store = MemoryStore::new(g.sealed_slot(), &[g.store_bytes(0)]);
    store.log = Some(Vec::new());
    let mut c = Client::new(oram, store, rng);
    let mut pick = ChaCha20Rng::seed_from_u64(seed + 1000);
    let mut view = Schedule {
        batch_sizes: vec![0; IN_FLIGHT as usize + 1],
        pieces: vec![0; 64],
        turns: vec![0; 64],
        partitions: vec![0; g.partitions as usize],
        answered: 0,
    };
    let mut submitted = 0u64;
    for _ in 0..steps {
        for _ in 0..PER_STEP {
            let block = match workload {
                Workload::Sequential => (submitted % BLOCKS) as u32,
                Workload::Random => pick.random_range(0..BLOCKS as u32),
                Workload::RepeatOne => 7,
            };
            let op = if submitted.is_multiple_of(2) {
                Op::Write(vec![submitted as u8; 512])
            } else {
                Op::Read
            };
            c.oram
                .submit(Request {
                    id: submitted,
                    block,
                    op,
                })
                .unwrap();
            submitted += 1;
        }
        view.answered += c.step().unwrap().len() as u64;
        let log = c.store.log.replace(Vec::new()).unwrap();
        let mut read_now: Vec<u32> = Vec::new();
        let (mut pieces, mut turns, mut last_write) = (0usize, 0usize, false);
        for (write, e) in log {
            let (partition, _, _) = locate(&g, e);
            if e.slots == 1 && !write {
                if !read_now.contains(&partition) {
                    read_now.push(partition);
                    view.partitions[partition as usize] += 1;
                }
            } else {
                pieces += 1;
                turns += usize::from(last_write && !write);
                last_write = write;
            }
        }
        view.batch_sizes[read_now.len()] += 1;
        view.pieces[pieces.min(63)] += 1;
        view.turns[turns.min(63)] += 1;
    }
    view
}

/// Background shuffling keeps the store's view independent of the workload: batch sizes,
/// shuffle I/O between batches and the partitions read have the same distribution under a
/// scan, random blocks and one block asked again and again (8 new requests per step; see
/// `schedule` for what an open-loop client means here).
#[test]
fn the_background_schedule_does_not_depend_on_the_workload() {
    const STEPS: u32 = 3000;
    let views = [
        ("sequential", schedule(Workload::Sequential, STEPS, 11)),
        ("random", schedule(Workload::Random, STEPS, 12)),
        ("repeat-one", schedule(Workload::RepeatOne, STEPS, 13)),
    ];
    let reference = &views[1].1;
    for (name, view) in &views {
        // Every workload is served at the same rate (within 2%).
        let ratio = view.answered as f64 / reference.answered as f64;
        assert!((0.98..1.02).contains(&ratio), "{name}: answered {ratio}");
        for (what, h, r) in [
            ("batch sizes", &view.batch_sizes, &reference.batch_sizes),
            ("shuffle pieces per step", &view.pieces, &reference.pieces),
            ("piece reads after writes", &view.turns, &reference.turns),
            ("partitions read", &view.partitions, &reference.partitions),
        ] {
            let (stat, df) = two_sample(h, r);
            assert!(
                !suspicious(stat, df),
                "{name}: {what}: statistic {stat:.1} with {df} degrees of freedom"
            );
        }
    }
    // Power: had a request waited whenever an earlier request for its block waited (the
    // rule before fake reads covered waiting requests), one blocked home would empty a whole
    // repeat-one batch; a histogram with that shape is flagged.
    let mut all_or_nothing = vec![0u64; reference.batch_sizes.len()];
    let total: u64 = reference.batch_sizes.iter().sum();
    let partial: u64 = reference.batch_sizes[1..reference.batch_sizes.len() - 1]
        .iter()
        .sum();
    all_or_nothing[0] = partial / 4;
    *all_or_nothing.last_mut().unwrap() = total - partial / 4;
    let (stat, df) = two_sample(&all_or_nothing, &reference.batch_sizes);
    assert!(
        suspicious(stat, df),
        "the control shape was not seen: {stat}"
    );
}

/// The store's view under a closed-loop client: 32 requests in flight, and a new request is
/// sent only when an answer comes back (so the client's sending rate is what the store can
/// time). Per step: how many answers came back (the next batch's new requests), how many
/// one-slot reads and shuffle pieces ran, and the partitions read.
struct ClosedLoop {
    answers: Vec<u64>,
    slot_reads: Vec<u64>,
    pieces: Vec<u64>,
    partitions: Vec<u64>,
    answered: u64,
}

fn closed_loop(workload: Workload, steps: u32, seed: u64) -> ClosedLoop {
    const IN_FLIGHT: u64 = 32;
    let g = Geometry::new(512, BLOCKS, 1).unwrap();
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let oram = Oram::create(g.clone(), &mut rng).unwrap();
    let mut store = MemoryStore::new(g.sealed_slot(), &[g.store_bytes(0)]);
    store.log = Some(Vec::new());
    let mut c = Client::new(oram, store, rng);
    let mut pick = ChaCha20Rng::seed_from_u64(seed + 1000);
    let mut view = ClosedLoop {
        answers: vec![0; IN_FLIGHT as usize + 1],
        slot_reads: vec![0; 64],
        pieces: vec![0; 64],
        partitions: vec![0; g.partitions as usize],
        answered: 0,
    };
    let mut submitted = 0u64;
    let mut send = |c: &mut Client<MemoryStore, ChaCha20Rng>, submitted: &mut u64| {
        let block = match workload {
            Workload::Sequential => (*submitted % BLOCKS) as u32,
            Workload::Random => pick.random_range(0..BLOCKS as u32),
            Workload::RepeatOne => 7,
        };
        let op = if submitted.is_multiple_of(2) {
            Op::Write(vec![*submitted as u8; 512])
        } else {
            Op::Read
        };
        c.oram
            .submit(Request {
                id: *submitted,
                block,
                op,
            })
            .unwrap();
        *submitted += 1;
    };
    for _ in 0..IN_FLIGHT {
        send(&mut c, &mut submitted);
    }
    for _ in 0..steps {
        let answers = c.step().unwrap().len();
        view.answered += answers as u64;
        view.answers[answers.min(IN_FLIGHT as usize)] += 1;
        let log = c.store.log.replace(Vec::new()).unwrap();
        let (mut slot_reads, mut pieces) = (0usize, 0usize);
        let mut read_now: Vec<u32> = Vec::new();
        for (write, e) in log {
            if e.slots == 1 && !write {
                slot_reads += 1;
                let (partition, _, _) = locate(&g, e);
                if !read_now.contains(&partition) {
                    read_now.push(partition);
                    view.partitions[partition as usize] += 1;
                }
            } else {
                pieces += 1;
            }
        }
        // Buckets of 4 reads (a request reads one slot per filled level on the store).
        view.slot_reads[(slot_reads / 4).min(63)] += 1;
        view.pieces[pieces.min(63)] += 1;
        // The closed loop: one new request per answer.
        for _ in 0..answers {
            send(&mut c, &mut submitted);
        }
    }
    view
}

/// A closed-loop client (it sends the next request only when an answer came back) hammering
/// one block is served at the same rate, with the same store view, as one asking random
/// blocks or scanning: no request waits for a partition being shuffled, so no answer is held
/// back by another request's partition (TaoStore's timing critique of ObliviStore).
#[test]
fn a_closed_loop_client_is_served_at_the_same_rate_whatever_it_asks() {
    const STEPS: u32 = 3000;
    let views = [
        ("sequential", closed_loop(Workload::Sequential, STEPS, 21)),
        ("random", closed_loop(Workload::Random, STEPS, 22)),
        ("repeat-one", closed_loop(Workload::RepeatOne, STEPS, 23)),
    ];
    let reference = &views[1].1;
    let mut differences = Vec::new();
    for (name, view) in &views {
        // Answers per step are what the store times (the client's next sends).
        let ratio = view.answered as f64 / reference.answered as f64;
        if !(0.98..1.02).contains(&ratio) {
            differences.push(format!("{name}: answered {ratio:.3} of random's"));
        }
        for (what, h, r) in [
            ("answers per step", &view.answers, &reference.answers),
            (
                "one-slot reads per step",
                &view.slot_reads,
                &reference.slot_reads,
            ),
            ("shuffle pieces per step", &view.pieces, &reference.pieces),
            ("partitions read", &view.partitions, &reference.partitions),
        ] {
            let (stat, df) = two_sample(h, r);
            if suspicious(stat, df) {
                differences.push(format!(
                    "{name}: {what}: statistic {stat:.1} with {df} degrees of freedom"
                ));
            }
        }
    }
    assert!(differences.is_empty(), "{}", differences.join("; "));
}
