//! SinglePass: lookups against a plain lookup over random updates, the servers' views
//! (statistically independent of the index), queries in flight, saved states and malformed
//! input.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_xor::singlepass::{self, server, wire, Changes, Client, Params};
use proptest::prelude::*;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

const B: usize = 32;

fn database(records: u64, rng: &mut impl RngCore) -> Vec<u8> {
    let mut db = vec![0u8; records as usize * B];
    rng.fill_bytes(&mut db);
    db
}

fn record(db: &[u8], index: u64) -> &[u8] {
    &db[index as usize * B..(index as usize + 1) * B]
}

fn client(params: Params, db: &[u8], rng: &mut ChaCha20Rng) -> Client {
    let request = Client::offline_request(rng);
    let body = wire::encode_hint_request(&params, &request);
    let request = wire::decode_hint_request(&body, &params).unwrap();
    let hints = server::hints(&params, db, &request).unwrap();
    Client::new(params, &request, &hints).unwrap()
}

/// Both servers' answers to a query, through the wire bodies.
fn answers(params: &Params, db: &[u8], query: &singlepass::Query) -> (Vec<u8>, Vec<u8>) {
    let online = wire::decode_lookup(&wire::encode_lookup(params, &query.online), params).unwrap();
    let refresh =
        wire::decode_lookup(&wire::encode_lookup(params, &query.refresh), params).unwrap();
    (
        server::answer(params, db, &online).unwrap(),
        server::answer(params, db, &refresh).unwrap(),
    )
}

fn lookup(c: &mut Client, db: &[u8], index: u64, rng: &mut ChaCha20Rng) -> Vec<u8> {
    let params = *c.params();
    let (query, pending) = c.query(index, rng).unwrap();
    let (a, r) = answers(&params, db, &query);
    c.finish(pending, &a, &r).unwrap()
}

/// Changes `count` random records of `db` and returns the published changes, through the wire.
fn update(params: &Params, db: &mut [u8], count: usize, rng: &mut ChaCha20Rng) -> Changes {
    let old = db.to_vec();
    for _ in 0..count {
        let i = rng.random_range(0..params.records()) as usize;
        rng.fill_bytes(&mut db[i * B..(i + 1) * B]);
    }
    let changes = server::changes(params, &old, db).unwrap();
    wire::decode_changes(&wire::encode_changes(params, &changes), params).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// Random shapes (every layout from one row to one column), random lookups and random
    /// update batches, some applied while a query is in flight: every lookup returns what a
    /// plain read of the current database returns.
    #[test]
    fn lookups_match_a_plain_lookup_across_updates(
        records in 1u64..300,
        columns in any::<u64>(),
        seed in any::<u64>(),
        steps in 1usize..100,
    ) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let params = Params::with_columns(records, B, 1 + columns % records).unwrap();
        let mut db = database(records, &mut rng);
        let mut c = client(params, &db, &mut rng);
        for _ in 0..steps {
            let index = rng.random_range(0..records);
            match rng.random_range(0..5) {
                0 => {
                    let count = rng.random_range(1..=5);
                    let changes = update(&params, &mut db, count, &mut rng);
                    c.apply(&changes).unwrap();
                }
                1 => {
                    // Answers from the version the query was made at, an update applied
                    // before they arrive.
                    let (query, pending) = c.query(index, &mut rng).unwrap();
                    let (a, r) = answers(&params, &db, &query);
                    let expected = record(&db, index).to_vec();
                    let changes = update(&params, &mut db, 3, &mut rng);
                    c.apply(&changes).unwrap();
                    prop_assert_eq!(c.finish(pending, &a, &r).unwrap(), expected);
                }
                _ => {
                    let got = lookup(&mut c, &db, index, &mut rng);
                    prop_assert_eq!(&got[..], record(&db, index));
                }
            }
        }
        for index in 0..records {
            let got = lookup(&mut c, &db, index, &mut rng);
            prop_assert_eq!(&got[..], record(&db, index));
        }
        prop_assert_eq!(c.pending_hints(), 0);
    }
}

#[test]
fn the_same_record_many_times_and_the_default_layout() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let records = 5000;
    let params = Params::new(records, B).unwrap();
    // 28 * ceil(sqrt(5000)) = 1988 columns need 3 rows, over which 5000 records spread.
    assert_eq!((params.columns(), params.rows()), (1667, 3));
    // The benchmark's shape: a hint of 48,388 records, as large as Checklist's 48,471 parities.
    let big = Params::new(3_000_000, B).unwrap();
    assert_eq!((big.columns(), big.rows()), (48_388, 62));
    assert_eq!(Params::new(100, B).unwrap().rows(), 1);
    let db = database(records, &mut rng);
    let mut c = client(params, &db, &mut rng);
    for k in 0..6000u64 {
        let index = if k % 2 == 0 {
            4999
        } else {
            (k * 7919) % records
        };
        assert_eq!(lookup(&mut c, &db, index, &mut rng), record(&db, index));
    }
}

#[test]
fn queries_in_flight_finish_in_any_order_and_pending_hints_are_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let records = 400;
    // 2 rows of 200: a query makes at most 3 hints pending.
    let params = Params::with_columns(records, B, 200).unwrap();
    let db = database(records, &mut rng);
    let mut c = client(params, &db, &mut rng);
    let (q1, p1) = c.query(5, &mut rng).unwrap();
    // Record 5 now lies in a pending hint: refused before anything is sent.
    assert!(c.query(5, &mut rng).is_err());
    // A second query in flight, for a record whose hint is not pending.
    let (other, (q2, p2)) = (0..records)
        .rev()
        .find_map(|i| c.query(i, &mut rng).ok().map(|q| (i, q)))
        .unwrap();
    assert!(c.pending_hints() > 0);
    // Finished out of order.
    let (a2, r2) = answers(&params, &db, &q2);
    let (a1, r1) = answers(&params, &db, &q1);
    assert_eq!(c.finish(p2, &a2, &r2).unwrap(), record(&db, other));
    assert_eq!(c.finish(p1, &a1, &r1).unwrap(), record(&db, 5));
    assert_eq!(c.pending_hints(), 0);
    // An abandoned query leaves its hints pending; every other record still answers.
    let abandoned = c.query(77, &mut rng).unwrap();
    drop(abandoned);
    assert!(c.pending_hints() > 0);
    let mut served = 0;
    for index in 0..records {
        if let Ok((query, pending)) = c.query(index, &mut rng) {
            let (a, r) = answers(&params, &db, &query);
            assert_eq!(c.finish(pending, &a, &r).unwrap(), record(&db, index));
            served += 1;
        }
    }
    assert!(served >= records - 3 * 2, "{served}");
    // Later swaps move records out of (and into) the pending hints; those stay pending.
    assert!(c.pending_hints() > 0);
}

#[test]
fn a_saved_state_keeps_answering_and_damage_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let records = 500;
    let params = Params::with_columns(records, B, 50).unwrap();
    let mut db = database(records, &mut rng);
    let mut c = client(params, &db, &mut rng);
    for index in [1, 2, 3, 499] {
        lookup(&mut c, &db, index, &mut rng);
    }
    let changes = update(&params, &mut db, 10, &mut rng);
    c.apply(&changes).unwrap();
    let state = c.encode_state();
    let mut restored = Client::decode_state(params, &state).unwrap();
    for index in [1, 7, 250, 499] {
        assert_eq!(
            lookup(&mut restored, &db, index, &mut rng),
            record(&db, index)
        );
    }
    assert!(Client::decode_state(Params::with_columns(501, B, 50).unwrap(), &state).is_err());
    assert!(Client::decode_state(params, &state[..state.len() - 1]).is_err());
    let mut bad = state.clone();
    bad[0] ^= 1;
    assert!(Client::decode_state(params, &bad).is_err());
    // Row 0's first two offsets made equal: no longer a permutation.
    let at = singlepass::client::STATE_MAGIC.len() + 16;
    let mut bad = state.clone();
    bad[at + 2..at + 4].copy_from_slice(&state[at..at + 2]);
    assert!(Client::decode_state(params, &bad).is_err());
    let mut bad = state.clone();
    let last = bad.len() - 1;
    bad[last] = 2;
    assert!(Client::decode_state(params, &bad).is_err());
}

#[test]
fn wrong_shapes_lengths_and_ranges_are_errors() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let params = Params::with_columns(1000, B, 40).unwrap();
    let db = database(1000, &mut rng);
    let mut c = client(params, &db, &mut rng);
    assert!(c.query(1000, &mut rng).is_err());
    let (query, pending) = c.query(3, &mut rng).unwrap();
    let (a, r) = answers(&params, &db, &query);
    assert!(c.finish(pending, &a[1..], &r).is_err());
    assert!(server::answer(&params, &db[1..], &query.online).is_err());
    assert!(server::answer(&params, &db, &query.online[1..]).is_err());
    assert!(server::answer(&params, &db, &[40; 25]).is_err());
    let request = Client::offline_request(&mut rng);
    assert!(server::hints(&params, &db[..db.len() - B], &request).is_err());
    assert!(Client::new(params, &request, &[0; 5]).is_err());
    let mut changes = Changes::new(B);
    changes.push_delta(1000, &[1; B]).unwrap();
    assert!(c.apply(&changes).is_err());
    assert!(Changes::new(B).push_delta(0, &[1; 3]).is_err());
    assert!(c.apply(&Changes::new(16)).is_err());
    assert!(Params::with_columns(10, B, 11).is_err());
    assert!(Params::with_columns(1 << 20, B, 1 << 17).is_err());
    assert!(Params::with_rows(10, B, 0).is_err());
    assert!(Params::new(0, B).is_err());
    assert!(Params::new(10, 0).is_err());
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn malformed_bodies_are_rejected_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..200)) {
        let params = Params::with_columns(100, B, 10).unwrap();
        let _ = wire::decode_lookup(&bytes, &params);
        let _ = wire::decode_hint_request(&bytes, &params);
        let _ = wire::decode_changes(&bytes, &params);
        let _ = Client::decode_state(params, &bytes);
    }
}

/// What one server's views tell about the looked-up record `(row, offset)`: how often the
/// record's own offset appears in its row, how often a row's offset repeats from one query to
/// the next, and how the offsets of each row are spread.
#[derive(Default)]
struct Views {
    hits: usize,
    repeats: usize,
    pairs: usize,
    counts: Vec<Vec<usize>>,
    last: Option<Vec<u16>>,
}

impl Views {
    fn see(&mut self, view: &[u16], row: usize, offset: u16, columns: usize) {
        if self.counts.is_empty() {
            self.counts = vec![vec![0; columns]; view.len()];
        }
        self.hits += usize::from(view[row] == offset);
        for (i, &o) in view.iter().enumerate() {
            self.counts[i][usize::from(o)] += 1;
        }
        if let Some(last) = &self.last {
            self.pairs += view.len();
            self.repeats += last.iter().zip(view).filter(|(a, b)| a == b).count();
        }
        self.last = Some(view.to_vec());
    }

    /// Asserts the views look like independent uniform vectors of `[m]^Q`.
    fn check(&self, server: &str, asked: u64, trials: usize, columns: usize) {
        let p = 1.0 / columns as f64;
        for (what, count, n) in [
            ("its own offset in its row", self.hits, trials),
            (
                "a row's offset repeated from the previous query",
                self.repeats,
                self.pairs,
            ),
        ] {
            let rate = count as f64 / n as f64;
            let sigma = (p * (1.0 - p) / n as f64).sqrt();
            assert!(
                (rate - p).abs() < 5.0 * sigma,
                "the {server} server sees {what} for record {asked} in {rate:.4} of queries, \
                 {p:.4} for a random vector"
            );
        }
        // Offsets of every row uniform: chi-square with Q (m - 1) = 28 degrees of freedom
        // below 66.6 (p = 0.0001).
        let mean = trials as f64 / columns as f64;
        let chi: f64 = self
            .counts
            .iter()
            .flatten()
            .map(|&n| (n as f64 - mean).powi(2) / mean)
            .sum();
        assert!(
            chi < 66.6,
            "the {server} server's offsets: {:?}",
            self.counts
        );
    }
}

/// Neither server's view depends on the index. A server holding a view can test a guess
/// `(row, offset)` by checking whether the offset appears in that row (a client sending the
/// looked-up column unmasked would show it every time, rate 1 instead of `1/m`), and whether a
/// row's offsets repeat between queries (a client reusing a column without the swap would
/// repeat `Q - 1` of `Q` offsets for the same record, rate near 1). Here (`B = 32`, `Q = 4`
/// rows of `m = 8`) a random vector scores `1/8` on both; with 20,000 lookups of one record
/// one standard deviation is 0.0023 (0.0012 for repeats), so the 5-sigma bounds below are far
/// from either leak.
#[test]
fn neither_server_can_tell_the_index_from_its_view() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let records = 32;
    let params = Params::with_columns(records, B, 8).unwrap();
    assert_eq!(params.rows(), 4);
    let db = database(records, &mut rng);
    let trials = 20_000;
    for asked in [3u64, 29] {
        let mut c = client(params, &db, &mut rng);
        let (row, offset) = ((asked / 8) as usize, (asked % 8) as u16);
        let (mut online, mut refresh) = (Views::default(), Views::default());
        for _ in 0..trials {
            let (query, pending) = c.query(asked, &mut rng).unwrap();
            online.see(&query.online, row, offset, 8);
            refresh.see(&query.refresh, row, offset, 8);
            let (a, r) = answers(&params, &db, &query);
            assert_eq!(c.finish(pending, &a, &r).unwrap(), record(&db, asked));
        }
        online.check("online", asked, trials, 8);
        refresh.check("offline", asked, trials, 8);
    }
}
