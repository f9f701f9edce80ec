//! Property tests of both lattice schemes, below the service layer (the conformance harness
//! over the signed-batch service is `pir_service::conformance`): correctness over random databases of many
//! shapes on every kernel backend, batching, malformed input, sizes independent of the index,
//! and the empirical decoding-failure bound.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::Error;
use pir_kernels::matvec::Packing;
use pir_kernels::Backend;
use pir_lattice::gaussian::ErrorSampler;
use pir_lattice::lwe::{self, ZpMatrix};
use pir_lattice::params::{self, max_plaintext_modulus, LWE_N};
use pir_lattice::records::record;
use pir_lattice::{
    BuildInput, DoublePirClient, DoublePirServer, Params, Scheme, SimplePirClient, SimplePirServer,
};
use proptest::prelude::*;
use rand::{Rng, RngCore, SeedableRng};
use rand_chacha::ChaCha20Rng;

const VERSION: [u8; 32] = [0x5a; 32];

/// One scheme behind one interface, so every check runs on both.
enum Server {
    Simple(SimplePirServer),
    Double(DoublePirServer),
}
enum Client {
    Simple(SimplePirClient),
    Double(DoublePirClient),
}
enum State {
    Simple(pir_lattice::SimpleQueryState),
    Double(pir_lattice::DoubleQueryState),
}

fn setup(scheme: Scheme, records: u64, bits: u32, data: &[u8]) -> (Server, Client) {
    setup_with(Params::new(scheme, records, bits).unwrap(), data)
}

fn setup_with(params: Params, data: &[u8]) -> (Server, Client) {
    let scheme = params.scheme;
    let mut last = (0, 0);
    let input = BuildInput {
        params,
        records: data,
        seeds: [[1; 16], [2; 16]],
        version: VERSION,
        saved: None,
        progress: &mut |done, total| last = (done, total),
    };
    let (server, client) = match scheme {
        Scheme::SimplePir => {
            let (s, saved) = SimplePirServer::build(input).unwrap();
            (
                Server::Simple(s),
                Client::Simple(SimplePirClient::new(&saved.hint).unwrap()),
            )
        }
        Scheme::DoublePir => {
            let (s, saved) = DoublePirServer::build(input).unwrap();
            (
                Server::Double(s),
                Client::Double(DoublePirClient::new(&saved.hint).unwrap()),
            )
        }
        Scheme::Ypir | Scheme::YpirSp | Scheme::Inspire => {
            panic!("YPIR is tested through the generic interface below")
        }
    };
    assert!(
        last.0 == last.1 && last.1 > 0,
        "progress ends at total: {last:?}"
    );
    (server, client)
}

impl Server {
    fn answer(&self, q: &[u8]) -> Result<Vec<u8>, Error> {
        match self {
            Server::Simple(s) => s.answer(q),
            Server::Double(s) => s.answer(q),
        }
    }
    fn answer_batch(&self, qs: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        match self {
            Server::Simple(s) => s.answer_batch(qs),
            Server::Double(s) => s.answer_batch(qs),
        }
    }
}

impl Client {
    fn query(&self, index: u64, rng: &mut ChaCha20Rng) -> Result<(State, Vec<u8>), Error> {
        Ok(match self {
            Client::Simple(c) => {
                let (s, q) = c.query(index, rng)?;
                (State::Simple(s), q)
            }
            Client::Double(c) => {
                let (s, q) = c.query(index, rng)?;
                (State::Double(s), q)
            }
        })
    }
    fn decode(&self, state: &State, answer: &[u8]) -> Result<Vec<u8>, Error> {
        match (self, state) {
            (Client::Simple(c), State::Simple(s)) => c.decode(s, answer),
            (Client::Double(c), State::Double(s)) => c.decode(s, answer),
            _ => unreachable!("test pairs states with their client"),
        }
    }
}

fn random_db(records: u64, bits: u32, rng: &mut ChaCha20Rng) -> Vec<u8> {
    let mut data = vec![0u8; (records * u64::from(bits)).div_ceil(8) as usize];
    rng.fill_bytes(&mut data);
    data
}

fn retrieve_and_check(scheme: Scheme, records: u64, bits: u32, seed: u64, queries: usize) {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let data = random_db(records, bits, &mut rng);
    let (server, client) = setup(scheme, records, bits, &data);
    let mut indices: Vec<u64> = (0..queries).map(|_| rng.random_range(0..records)).collect();
    indices.push(records - 1);
    for i in indices {
        let (state, query) = client.query(i, &mut rng).unwrap();
        let answer = server.answer(&query).unwrap();
        assert_eq!(
            client.decode(&state, &answer).unwrap(),
            record(&data, i, bits),
            "{scheme:?} N={records} bits={bits} i={i}"
        );
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(10))]

    #[test]
    fn any_index_any_shape_decodes(
        records in 1u64..300,
        bits in prop_oneof![1u32..=10, 11u32..=80, Just(256u32)],
        seed in any::<u64>(),
    ) {
        for backend in Backend::available() {
            Backend::force(backend);
            retrieve_and_check(Scheme::SimplePir, records, bits, seed, 2);
            if bits <= 200 {
                retrieve_and_check(Scheme::DoublePir, records, bits, seed, 2);
            }
        }
    }
}

#[test]
fn large_records_span_a_column() {
    // 64 KiB records: 65 536 entries of 8 bits (p = 256) down one column each.
    retrieve_and_check(Scheme::SimplePir, 2, 64 * 1024 * 8, 7, 1);
    // DoublePIR's largest record: 64 entries.
    let p = Params::new(Scheme::DoublePir, 30, 8).unwrap().p;
    retrieve_and_check(Scheme::DoublePir, 30, 64 * params::entry_bits(p), 8, 3);
}

#[test]
fn batches_match_single_answers_and_isolate_bad_queries() {
    for scheme in [Scheme::SimplePir, Scheme::DoublePir] {
        let mut rng = ChaCha20Rng::seed_from_u64(3);
        let (records, bits) = (500, 12);
        let data = random_db(records, bits, &mut rng);
        let (server, client) = setup(scheme, records, bits, &data);
        let mut states = Vec::new();
        let mut queries = Vec::new();
        for i in 0..11u64 {
            let (s, q) = client.query(i * 41, &mut rng).unwrap();
            states.push(s);
            queries.push(q);
        }
        queries[4].truncate(20);
        let refs: Vec<&[u8]> = queries.iter().map(Vec::as_slice).collect();
        let answers = server.answer_batch(&refs);
        assert_eq!(answers.len(), 11);
        for (i, (answer, state)) in answers.iter().zip(&states).enumerate() {
            if i == 4 {
                assert!(answer.is_err());
                continue;
            }
            let answer = answer.as_ref().unwrap();
            assert_eq!(answer, &server.answer(&queries[i]).unwrap(), "{scheme:?}");
            let got = client.decode(state, answer).unwrap();
            assert_eq!(got, record(&data, i as u64 * 41, bits));
        }
    }
}

#[test]
fn sizes_do_not_depend_on_the_index() {
    for scheme in [Scheme::SimplePir, Scheme::DoublePir] {
        let mut rng = ChaCha20Rng::seed_from_u64(4);
        let data = random_db(200, 5, &mut rng);
        let (server, client) = setup(scheme, 200, 5, &data);
        let sizes: Vec<(usize, usize)> = [0u64, 1, 99, 199]
            .iter()
            .map(|&i| {
                let (_, q) = client.query(i, &mut rng).unwrap();
                (q.len(), server.answer(&q).unwrap().len())
            })
            .collect();
        assert!(
            sizes.windows(2).all(|w| w[0] == w[1]),
            "{scheme:?} {sizes:?}"
        );
    }
}

#[test]
fn malformed_input_is_rejected_without_panic() {
    for scheme in [Scheme::SimplePir, Scheme::DoublePir] {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let data = random_db(50, 8, &mut rng);
        // The table's p, not the power of two `Params::new` picks, so that some values of
        // Z_p are impossible entries and a garbage answer can be caught by decoding (below).
        let p = params::p_for(1, scheme).unwrap();
        assert!(!p.is_power_of_two());
        let (server, client) = setup_with(Params::with_modulus(scheme, 50, 8, p).unwrap(), &data);
        let (state, query) = client.query(3, &mut rng).unwrap();
        for cut in [0, 5, 12, 44, query.len() - 1] {
            assert!(server.answer(&query[..cut]).is_err());
        }
        let mut long = query.clone();
        long.extend_from_slice(&[0; 4]);
        assert!(server.answer(&long).is_err());
        let mut wrong_scheme = query.clone();
        wrong_scheme[6] = if scheme == Scheme::SimplePir { 4 } else { 3 };
        assert!(matches!(
            server.answer(&wrong_scheme),
            Err(Error::WrongScheme { .. })
        ));
        let mut wrong_version = query.clone();
        wrong_version[4] = 2;
        assert!(matches!(
            server.answer(&wrong_version),
            Err(Error::WrongVersion { .. })
        ));
        for _ in 0..200 {
            let len = rng.random_range(0..query.len() + 8);
            let mut junk = vec![0u8; len];
            rng.fill_bytes(&mut junk);
            if rng.random_bool(0.5) && len >= 12 {
                junk[..12].copy_from_slice(&query[..12]);
            }
            assert!(server.answer(&junk).is_err());
            assert!(client.decode(&state, &junk).is_err());
        }
        assert!(client.query(50, &mut rng).is_err());
        // answers of the right length but random content: each decodes to an impossible
        // entry (>= 2^b) with probability about 1 - 2^b/p, so some of 20 are refused
        let answer = server.answer(&query).unwrap();
        let refused = (0..20)
            .filter(|_| {
                let mut garbage = answer.clone();
                rng.fill_bytes(&mut garbage[12..]);
                client.decode(&state, &garbage).is_err()
            })
            .count();
        assert!(refused > 0, "{scheme:?}");
    }
}

#[test]
fn hints_of_one_scheme_are_refused_by_the_other() {
    let data = [0u8; 10];
    let params = Params::new(Scheme::SimplePir, 10, 8).unwrap();
    let build = |records| {
        SimplePirServer::build(BuildInput {
            params,
            records,
            seeds: [[0; 16]; 2],
            version: VERSION,
            saved: None,
            progress: &mut |_, _| {},
        })
    };
    let hint = build(&data).unwrap().1.hint;
    assert!(DoublePirClient::new(&hint).is_err());
    assert!(SimplePirClient::new(&hint[..hint.len() - 1]).is_err());
    let header = pir_lattice::wire::decode_hint(&hint, Scheme::SimplePir)
        .unwrap()
        .0;
    assert!(SimplePirClient::new(&header.encode()).is_err());
    assert!(build(&data[..9]).is_err());
}

/// Runs `trials` queries against a `rows × columns` matrix of worst-case entries (every entry
/// 0 or p - 1, so `|D'| = p/2`) and counts wrong decodings.
fn failures(p: u32, rows: usize, columns: usize, trials: usize, seed: u64) -> usize {
    let mut rng = ChaCha20Rng::seed_from_u64(seed);
    let packing = Packing::new(params::element_bits(p)).unwrap();
    let entries: Vec<u32> = (0..rows * columns)
        .map(|_| if rng.random_bool(0.5) { 0 } else { p - 1 })
        .collect();
    let db = ZpMatrix::from_fn(rows, columns, packing, p / 2, |r, c| {
        entries[r * columns + c]
    });
    let a_seed = [9u8; 16];
    let hint = db.times_public(&a_seed, &mut |_, _| {});
    let sampler = ErrorSampler::new();
    let mut wrong = 0;
    for _ in 0..trials {
        let column = rng.random_range(0..columns);
        let (s, c) = lwe::encrypt_unit(
            &a_seed,
            columns,
            column,
            params::delta(p),
            &sampler,
            &mut rng,
        );
        let answer = db.times_vectors(&[&c]);
        for row in 0..rows {
            let h = &hint[row * LWE_N..(row + 1) * LWE_N];
            let noisy = answer[row].wrapping_sub(pir_lattice::prg::dot(h, &s));
            wrong += usize::from(lwe::round_entry(noisy, p) != entries[row * columns + column]);
        }
    }
    wrong
}

#[test]
fn decoding_failures_follow_the_bound() {
    let (rows, columns, trials) = (64, 64, 100);
    let safe = max_plaintext_modulus(columns as u64, 1);
    // at the bound: the error stays below Δ/2 except with probability 2^-40 per entry
    assert_eq!(failures(safe, rows, columns, trials, 11), 0, "p = {safe}");
    // twice the bound: the error's standard deviation is about Δ/4, failures are common
    let too_large = 2 * safe;
    let wrong = failures(too_large, rows, columns, trials, 12);
    assert!(
        wrong > 50,
        "p = {too_large}: {wrong} failures of {}",
        rows * trials
    );
}
