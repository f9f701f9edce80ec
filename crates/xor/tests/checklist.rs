//! Checklist: correctness over random databases and long query sequences, the servers' view
//! (statistically independent of the index), waterfall updates with lookups, and malformed
//! input.

#![allow(clippy::unwrap_used, clippy::expect_used)]
use std::collections::BTreeMap;

use pir_core::{Database, DbShape};
use pir_xor::checklist::pset::{Ggm, Scratch};
use pir_xor::checklist::waterfall::{Change, Location, Policy, Waterfall};
use pir_xor::checklist::{self, server, wire, Client, Outcome, Params};
use proptest::prelude::*;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

const B: usize = 32;

fn database(records: u64, rng: &mut impl RngCore) -> Database {
    Database::random(DbShape::new(records, B).unwrap(), rng)
}

fn client(params: Params, db: &Database, rng: &mut ChaCha20Rng) -> Client {
    let request = Client::offline_request(rng);
    let hints = server::hints(&params, db, &request, 0..params.hints()).unwrap();
    Client::new(params, &request, &hints).unwrap()
}

/// One lookup through both servers' wire bodies, repeated over decoy rounds.
fn lookup(client: &mut Client, db: &Database, index: u64, rng: &mut ChaCha20Rng) -> Vec<u8> {
    let params = *client.params();
    loop {
        let (query, pending) = client.query(index, rng).unwrap();
        let online =
            wire::decode_lookup(&wire::encode_lookup(&params, &query.online), &params).unwrap();
        let refresh =
            wire::decode_lookup(&wire::encode_lookup(&params, &query.refresh), &params).unwrap();
        let a = server::answer(&params, db, &online).unwrap();
        let r = server::answer(&params, db, &refresh).unwrap();
        match client.finish(pending, &a, &r).unwrap() {
            Outcome::Record(record) => return record,
            Outcome::Retry => continue,
        }
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    #[test]
    fn every_lookup_returns_its_record(records in 1u64..400, seed in any::<u64>(), lookups in 1usize..120) {
        let mut rng = ChaCha20Rng::seed_from_u64(seed);
        let db = database(records, &mut rng);
        let params = Params::new(records, B).unwrap();
        let mut c = client(params, &db, &mut rng);
        for _ in 0..lookups {
            let index = rng.random_range(0..records);
            let record = lookup(&mut c, &db, index, &mut rng);
            prop_assert_eq!(&record[..], db.block(index as usize));
        }
        prop_assert_eq!(c.live_hints(), params.hints());
    }
}

#[test]
fn the_same_record_many_times_and_more_lookups_than_sets() {
    let mut rng = ChaCha20Rng::seed_from_u64(7);
    let records = 1000;
    let db = database(records, &mut rng);
    let params = Params::new(records, B).unwrap();
    let mut c = client(params, &db, &mut rng);
    // m = 28 * 1000 / 32 = 875 sets: 3000 lookups use every set several times over.
    for k in 0..3000u64 {
        let index = if k % 3 == 0 { 5 } else { (k * 7919) % records };
        assert_eq!(
            lookup(&mut c, &db, index, &mut rng),
            db.block(index as usize)
        );
        if k % 97 == 0 {
            assert!(c.pointers_consistent(), "after {k} lookups");
        }
    }
}

#[test]
fn a_saved_state_keeps_answering_and_damage_is_refused() {
    let mut rng = ChaCha20Rng::seed_from_u64(12);
    let records = 500;
    let db = database(records, &mut rng);
    let params = Params::new(records, B).unwrap();
    let mut c = client(params, &db, &mut rng);
    for index in [1, 2, 3, 499] {
        lookup(&mut c, &db, index, &mut rng);
    }
    let _abandoned = c.query(7, &mut rng).unwrap();
    let state = c.encode_state();
    let mut restored = Client::decode_state(params, &state).unwrap();
    assert_eq!(restored.live_hints(), c.live_hints());
    assert!(restored.pointers_consistent());
    for index in [1, 7, 250, 499] {
        assert_eq!(
            lookup(&mut restored, &db, index, &mut rng),
            db.block(index as usize)
        );
    }
    assert!(Client::decode_state(Params::new(501, B).unwrap(), &state).is_err());
    assert!(Client::decode_state(params, &state[..state.len() - 1]).is_err());
    let mut bad = state.clone();
    bad[0] ^= 1;
    assert!(Client::decode_state(params, &bad).is_err());
    let mut bad = state.clone();
    // The first set's shift, past B.
    let at = checklist::client::STATE_MAGIC.len() + 20 + 1 + 16;
    bad[at..at + 8].copy_from_slice(&u64::MAX.to_le_bytes());
    assert!(Client::decode_state(params, &bad).is_err());
}

#[test]
fn an_abandoned_query_never_reuses_its_set() {
    let mut rng = ChaCha20Rng::seed_from_u64(8);
    let records = 300;
    let db = database(records, &mut rng);
    let params = Params::new(records, B).unwrap();
    let mut c = client(params, &db, &mut rng);
    let ggm = Ggm::new();
    let mut sent = Vec::new();
    // Abandon queries for the same record: every online key must differ (a fresh set each time).
    for _ in 0..20 {
        let (query, _pending) = c.query(17, &mut rng).unwrap();
        let mut elements = Vec::new();
        params.sets().punctured_elements(
            &ggm,
            &query.online,
            &mut Scratch::default(),
            &mut elements,
        );
        assert!(!sent.contains(&elements));
        sent.push(elements);
    }
    assert!(c.live_hints() >= params.hints() - 20);
    assert!(c.pointers_consistent());
    assert_eq!(lookup(&mut c, &db, 17, &mut rng), db.block(17));
    assert!(c.pointers_consistent());
}

/// What a server can test about index `target` in one punctured key: whether `target` is in
/// the set it expands, and the punctured position.
fn view(params: &Params, key: &checklist::PuncturedKey, target: u64) -> (bool, usize) {
    let mut elements = Vec::new();
    params
        .sets()
        .punctured_elements(&Ggm::new(), key, &mut Scratch::default(), &mut elements);
    (elements.contains(&target), key.position())
}

/// Neither server's view depends on the index. The sharpest test a server has is to check
/// whether a guessed index lies in the punctured set: a set chosen because it holds `i` and
/// punctured at `i` would leave `i` out too often. Here (`B = 16`, `s = 4`) a random punctured
/// set holds a given index with probability `1 - (15/16)^3 = 0.176`; without the client's
/// decoys the online set would hold the queried index with probability 0.095. With 40,000
/// lookups per index, one standard deviation is 0.0019, so the 5-sigma bound below separates
/// the two by a factor of eight.
#[test]
fn neither_server_can_tell_the_index_from_its_view() {
    let mut rng = ChaCha20Rng::seed_from_u64(9);
    let records = 16;
    let db = database(records, &mut rng);
    let params = Params::with_set_size(records, B, 4).unwrap();
    let expected = 1.0 - (15.0f64 / 16.0).powi(3);
    let trials = 40_000;
    let sigma = (expected * (1.0 - expected) / trials as f64).sqrt();
    for asked in [3u64, 11] {
        let mut c = client(params, &db, &mut rng);
        let (mut online_holds, mut refresh_holds) = (0usize, 0usize);
        let mut positions = [0usize; 4];
        for _ in 0..trials {
            let (query, pending) = c.query(asked, &mut rng).unwrap();
            let (holds, position) = view(&params, &query.online, asked);
            online_holds += usize::from(holds);
            positions[position] += 1;
            refresh_holds += usize::from(view(&params, &query.refresh, asked).0);
            let a = server::answer(&params, &db, &query.online).unwrap();
            let r = server::answer(&params, &db, &query.refresh).unwrap();
            if let Outcome::Record(record) = c.finish(pending, &a, &r).unwrap() {
                assert_eq!(record, db.block(asked as usize));
            }
        }
        for (server, holds) in [("online", online_holds), ("offline", refresh_holds)] {
            let rate = holds as f64 / trials as f64;
            assert!(
                (rate - expected).abs() < 5.0 * sigma,
                "the {server} server sees index {asked} in {rate:.4} of sets, a random set holds it in {expected:.4}"
            );
        }
        // Punctured positions uniform: chi-square with 3 degrees of freedom below 16.3
        // (p = 0.001).
        let mean = trials as f64 / 4.0;
        let chi: f64 = positions
            .iter()
            .map(|&n| (n as f64 - mean).powi(2) / mean)
            .sum();
        assert!(chi < 16.3, "positions {positions:?}");
    }
}

#[test]
fn the_decoy_rate_follows_the_formula() {
    let params = Params::with_set_size(16, B, 4).unwrap();
    let p = checklist::decoy_probability(&params);
    // 1 - 16 (1 - (15/16)^4) / 4
    let exact = 1.0 - 16.0 * (1.0 - (15.0f64 / 16.0).powi(4)) / 4.0;
    assert!((p - exact).abs() < 1e-12);
    assert_eq!(
        checklist::decoy_probability(&Params::new(1, B).unwrap()),
        0.0
    );
    let big = Params::new(3_000_000, B).unwrap();
    let p = checklist::decoy_probability(&big);
    let s = big.sets().size() as f64;
    assert!((p - (s - 1.0) / 6_000_000.0).abs() < 1e-6, "{p}");
}

#[test]
fn waterfall_lookups_stay_correct_across_updates() {
    let mut rng = ChaCha20Rng::seed_from_u64(10);
    let initial: Vec<Vec<u8>> = (0..500)
        .map(|_| {
            let mut r = vec![0u8; B];
            rng.fill_bytes(&mut r);
            r
        })
        .collect();
    let policy = Policy {
        base: 20,
        ratio: 3,
        dead_percent: 60,
    };
    let mut w = Waterfall::new(policy, B, initial).unwrap();
    // One Checklist client per bucket, made when the bucket appears.
    let mut clients: BTreeMap<u64, (Params, Database, Client)> = BTreeMap::new();
    let mut hinted = 0usize;
    let mut sync = |w: &Waterfall,
                    clients: &mut BTreeMap<u64, (Params, Database, Client)>,
                    rng: &mut ChaCha20Rng| {
        clients.retain(|id, _| w.bucket(*id).is_some());
        for bucket in w.buckets() {
            if let std::collections::btree_map::Entry::Vacant(slot) = clients.entry(bucket.id()) {
                let records = bucket.len() as u64;
                let db = Database::from_bytes(DbShape::new(records, B).unwrap(), bucket.records())
                    .unwrap();
                let params = Params::new(records, B).unwrap();
                let c = client(params, &db, rng);
                hinted += bucket.len();
                slot.insert((params, db, c));
            }
        }
    };
    sync(&w, &mut clients, &mut rng);
    for step in 0..25 {
        // Modify 4 % of the live records: remove random live ones, add fresh ones.
        let live: Vec<Location> = w
            .buckets()
            .flat_map(|b| {
                (0..b.len())
                    .filter(|&p| b.record(p).is_some())
                    .map(|p| Location {
                        bucket: b.id(),
                        position: p as u64,
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let mut removed = Vec::new();
        while removed.len() < 20 {
            let l = live[rng.random_range(0..live.len())];
            if !removed.contains(&l) {
                removed.push(l);
            }
        }
        let added = (0..20)
            .map(|_| {
                let mut r = vec![0u8; B];
                rng.fill_bytes(&mut r);
                r
            })
            .collect();
        let report = w.apply(Change { added, removed }).unwrap();
        assert!(!report.created.is_empty());
        sync(&w, &mut clients, &mut rng);
        // Look up a few live records of every bucket.
        for bucket in w.buckets() {
            let (params, db, c) = clients.get_mut(&bucket.id()).unwrap();
            assert_eq!(params.records(), bucket.len() as u64);
            for _ in 0..3 {
                let p = rng.random_range(0..bucket.len());
                let got = lookup(c, db, p as u64, &mut rng);
                assert_eq!(got, db.block(p), "step {step}");
                if let Some(live) = bucket.record(p) {
                    assert_eq!(got, live);
                }
            }
        }
    }
    assert_eq!(w.live(), 500);
    assert!(hinted < 500 * 26, "updates re-hinted everything: {hinted}");
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn malformed_bodies_are_rejected_without_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        let params = Params::new(1000, B).unwrap();
        let _ = wire::decode_lookup(&bytes, &params);
        let _ = wire::decode_hint_request(&bytes, &params);
    }
}

#[test]
fn wrong_shapes_lengths_and_ranges_are_errors() {
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let params = Params::new(1000, B).unwrap();
    let other = Params::new(1001, B).unwrap();
    let db = database(1000, &mut rng);
    let mut c = client(params, &db, &mut rng);
    let (query, pending) = c.query(3, &mut rng).unwrap();
    let body = wire::encode_lookup(&params, &query.online);
    assert!(matches!(
        wire::decode_lookup(&body, &other),
        Err(pir_core::Error::WrongLength(_) | pir_core::Error::DatabaseMismatch(_))
    ));
    assert!(wire::decode_lookup(&body[..body.len() - 1], &params).is_err());
    // A position past the set.
    let mut bad = body.clone();
    bad[wire::SHAPE_LEN..wire::SHAPE_LEN + 4].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(wire::decode_lookup(&bad, &params).is_err());
    assert!(c.finish(pending, &[0; 31], &[0; 32]).is_err());
    assert!(c.query(1000, &mut rng).is_err());
    let request = Client::offline_request(&mut rng);
    assert!(server::hints(&params, &db, &request, 0..params.hints() + 1).is_err());
    assert!(server::hints(&other, &db, &request, 0..1).is_err());
    assert!(Client::new(params, &request, &[0; 5]).is_err());
    let body = wire::encode_hint_request(&params, &request, params.hints() as u32 - 1, 2);
    assert!(wire::decode_hint_request(&body, &params).is_err());
    let body = wire::encode_hint_request(&params, &request, 0, 0);
    assert!(wire::decode_hint_request(&body, &params).is_err());
    let body = wire::encode_hint_request(&params, &request, 5, 10);
    let (decoded, range) = wire::decode_hint_request(&body, &params).unwrap();
    assert_eq!(range, 5..15);
    assert_eq!(decoded, request);
}
