//! Malformed query bodies through the mirror entry point (`serve::answer_body`): every class of
//! damage is rejected with an error of the right kind, and no input panics.

// Test code: a failed unwrap is a failed test, with its location.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::{Database, DbShape, Error, MultiServerScheme, SchemeId};
use pir_xor::{serve, AnswerMode, Chor, RaidPir};
use proptest::prelude::*;
use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

/// Offsets of the RAID-PIR header fields (module doc of `pir_xor::raid`).
const BLOCK_COUNT: usize = 0;
const BLOCK_SIZE: usize = 8;
const SERVERS: usize = 12;
const REDUNDANCY: usize = 14;
const CHUNKS: usize = 16;
const SERVER: usize = 20;
const MODE: usize = 22;

fn set_u16(body: &mut [u8], at: usize, value: u16) {
    body[at..at + 2].copy_from_slice(&value.to_le_bytes());
}

fn set_u32(body: &mut [u8], at: usize, value: u32) {
    body[at..at + 4].copy_from_slice(&value.to_le_bytes());
}

fn set_u64(body: &mut [u8], at: usize, value: u64) {
    body[at..at + 8].copy_from_slice(&value.to_le_bytes());
}

/// A bad field value: free-form, an unknown value, or a count or position out of range.
fn is_malformed(result: Result<Vec<u8>, Error>) -> bool {
    matches!(
        result,
        Err(Error::Malformed(_) | Error::UnknownValue { .. } | Error::OutOfRange { .. })
    )
}

/// A server answering one query body.
type Answerer<'a> = dyn Fn(&[u8]) -> Result<Vec<u8>, Error> + 'a;

/// A database with 21 blocks (not a multiple of 8, so bit vectors have tail bits).
fn fixture() -> (Database, ChaCha20Rng) {
    let mut rng = ChaCha20Rng::seed_from_u64(17);
    let shape = DbShape::new(21, 64).unwrap();
    (Database::random(shape, &mut rng), rng)
}

/// `answer` refuses `body` truncated anywhere (including inside the header), with a trailing
/// byte, and beyond the bound of a query body for `db`'s shape.
fn rejects_wrong_lengths(answer: &Answerer<'_>, body: &[u8], db: &Database) {
    for len in 0..body.len() {
        assert!(
            matches!(answer(&body[..len]), Err(Error::Truncated { .. })),
            "len {len}"
        );
    }
    let mut long = body.to_vec();
    long.push(0);
    assert!(matches!(
        answer(&long),
        Err(Error::TrailingBytes { count: 1 })
    ));
    long.resize(serve::max_query_body(db.shape()) + 1, 0);
    assert!(matches!(answer(&long), Err(Error::Oversized { .. })));
}

/// `answer` refuses `body` with its block count set to `blocks` or its block size to
/// `block_size` (each not the database's).
fn rejects_wrong_shape(answer: &Answerer<'_>, body: &[u8], blocks: u64, block_size: u32) {
    let mut bad = body.to_vec();
    set_u64(&mut bad, BLOCK_COUNT, blocks);
    assert!(matches!(answer(&bad), Err(Error::DatabaseMismatch(_))));
    let mut bad = body.to_vec();
    set_u32(&mut bad, BLOCK_SIZE, block_size);
    assert!(matches!(answer(&bad), Err(Error::DatabaseMismatch(_))));
}

fn raid_bodies(db: &Database, rng: &mut ChaCha20Rng, mode: AnswerMode) -> (RaidPir, Vec<Vec<u8>>) {
    let raid = RaidPir::new(db.shape(), 4, 3, 6, mode).unwrap();
    let (queries, _) = raid.query(&[5], rng).unwrap();
    let bodies = queries.iter().map(|q| raid.encode_query(q)).collect();
    (raid, bodies)
}

#[test]
fn raidpir_rejects_every_damage_class() {
    let (db, mut rng) = fixture();
    for mode in [AnswerMode::Single, AnswerMode::PerChunk] {
        let (raid, bodies) = raid_bodies(&db, &mut rng, mode);
        for body in &bodies {
            let answer = |bytes: &[u8]| serve::answer_body(&db, SchemeId::RaidPir, bytes);
            assert!(answer(body).is_ok(), "the undamaged body is accepted");

            rejects_wrong_lengths(&answer, body, &db);
            // Wrong shape.
            rejects_wrong_shape(&answer, body, 22, 128);
            let mut bad = body.clone();
            set_u64(&mut bad, BLOCK_COUNT, u64::MAX);
            assert!(matches!(answer(&bad), Err(Error::DatabaseMismatch(_))));

            // Invalid parameters.
            for (field, value) in [
                (REDUNDANCY, 5),    // r > n
                (REDUNDANCY, 1),    // r < 2
                (REDUNDANCY, 0),    // r < 2
                (SERVERS, 1),       // n < 2
                (SERVERS, 65),      // n > MAX_SERVERS
                (SERVER, 4),        // server >= n
                (SERVER, u16::MAX), // server >= n
            ] {
                let mut bad = body.clone();
                set_u16(&mut bad, field, value);
                assert!(is_malformed(answer(&bad)), "field at {field} = {value}");
            }
            for chunks in [0, 22, 257, u32::MAX] {
                let mut bad = body.clone();
                set_u32(&mut bad, CHUNKS, chunks);
                assert!(is_malformed(answer(&bad)), "c = {chunks}");
            }
            for mode_byte in [2, 0x80, 0xff] {
                let mut bad = body.clone();
                bad[MODE] = mode_byte;
                assert!(is_malformed(answer(&bad)), "mode {mode_byte}");
            }
            // The scheme's own decoder also refuses a body for other parameters.
            let mut other = body.clone();
            set_u16(&mut other, REDUNDANCY, 2);
            assert!(answer(&other).is_ok(), "r = 2 is valid for a mirror");
            assert!(matches!(
                raid.decode_query(&other),
                Err(Error::Malformed(_))
            ));

            // Wrong scheme id.
            assert!(matches!(
                serve::answer_body(&db, SchemeId::Control, body),
                Err(Error::WrongScheme { .. })
            ));
        }
        // Tail bits: with B = 21, c = 6 and n = 4, the last flip byte of server 0 is chunk 4,
        // which has k_4 = 3 bits, so bits 3..8 of that byte must be zero.
        let mut bad = bodies[0].clone();
        *bad.last_mut().unwrap() |= 0x10;
        assert!(is_malformed(serve::answer_body(
            &db,
            SchemeId::RaidPir,
            &bad
        )));
    }
}

#[test]
fn chor_rejects_every_damage_class() {
    let (db, mut rng) = fixture();
    let chor = Chor::new(db.shape(), 3).unwrap();
    let (queries, _) = chor.query(&[20], &mut rng).unwrap();
    for query in &queries {
        let body = chor.encode_query(query);
        let answer = |bytes: &[u8]| serve::answer_body(&db, SchemeId::Chor, bytes);
        assert!(answer(&body).is_ok());
        rejects_wrong_lengths(&answer, &body, &db);
        rejects_wrong_shape(&answer, &body, 20, 0);
        // B = 21: bits 21..24 of the last byte must be zero.
        let mut bad = body.clone();
        *bad.last_mut().unwrap() |= 0x20;
        assert!(is_malformed(answer(&bad)));
        assert!(matches!(
            serve::answer_body(&db, SchemeId::Control, &body),
            Err(Error::WrongScheme { .. })
        ));
    }
}

#[test]
fn answer_bodies_of_the_wrong_length_are_rejected() {
    let (db, mut rng) = fixture();
    let (raid, _) = raid_bodies(&db, &mut rng, AnswerMode::PerChunk);
    let (queries, _) = raid.query(&[0, 1], &mut rng).unwrap();
    let total: usize = queries.iter().map(|q| raid.answer_body_len(q.server)).sum();
    assert_eq!(
        total,
        3 * 6 * 64,
        "every chunk is answered by r = 3 servers"
    );
    for query in &queries {
        let good = raid.answer_body_len(query.server);
        for len in [0, good - 1, good + 1, good + 64] {
            assert!(matches!(
                raid.decode_answer(query, &vec![0; len]),
                Err(Error::Truncated { .. } | Error::TrailingBytes { .. })
            ));
        }
    }
}

fn any_scheme() -> impl Strategy<Value = SchemeId> {
    prop_oneof![
        Just(SchemeId::Control),
        Just(SchemeId::Chor),
        Just(SchemeId::RaidPir)
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(1000))]

    /// Arbitrary bytes never panic, whatever the scheme, and are almost always refused.
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..120), scheme in any_scheme()) {
        let (db, _) = fixture();
        let _ = serve::answer_body(&db, scheme, &bytes);
        let raid = RaidPir::new(db.shape(), 4, 3, 6, AnswerMode::PerChunk).unwrap();
        let _ = raid.decode_query(&bytes);
        let chor = Chor::new(db.shape(), 2).unwrap();
        let _ = chor.decode_query(&bytes);
    }

    /// Valid bodies with random damage (a byte overwritten, cut or extended) never panic; a
    /// mirror answers only bodies that still decode to a query of the right shape.
    #[test]
    fn damaged_bodies_never_panic(
        server in 0usize..4,
        position in any::<usize>(),
        value in any::<u8>(),
        cut in any::<bool>(),
        per_chunk in any::<bool>(),
    ) {
        let (db, mut rng) = fixture();
        let mode = if per_chunk { AnswerMode::PerChunk } else { AnswerMode::Single };
        let (_, bodies) = raid_bodies(&db, &mut rng, mode);
        let mut body = bodies[server].clone();
        let at = position % (body.len() + 1);
        if cut {
            body.truncate(at);
        } else if at == body.len() {
            body.push(value);
        } else {
            body[at] = value;
        }
        if let Ok(answer) = serve::answer_body(&db, SchemeId::RaidPir, &body) {
            prop_assert_eq!(answer.len() % 64, 0);
        }
    }
}
