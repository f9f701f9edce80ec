//! The reference answer to one query body, sans I/O: what an evidence check recomputes and
//! what tests compare the fast path against. Mirrors answer through [`crate::engine::Engine`]
//! (behind `pir_service::mirror::Mirror`), which must give the same bytes.
//!
//! A mirror holds the whole database, so it can play any server position of any scheme: the
//! query body names the parameters (RAID-PIR: `n`, `r`, `c`, the position and the mode), and
//! they are validated against the database shape before anything is allocated. The envelope
//! (magic, version, scheme id, length) is checked by the caller with [`pir_core::wire`], using
//! [`max_query_body`] as the length limit.

use pir_core::{Codec, Database, DbShape, Error, MultiServerScheme, SchemeId};

use crate::chor::Chor;
use crate::dpf_pir::DpfPir;
use crate::raid::{RaidPir, RaidQueryBody};

/// Answers one query body of `scheme` against `db`; the body carries the scheme parameters,
/// which are validated against db.shape() before anything is allocated.
pub fn answer_body(db: &Database, scheme: SchemeId, body: &[u8]) -> Result<Vec<u8>, Error> {
    if body.len() > max_query_body(db.shape()) {
        return Err(Error::Oversized {
            len: body.len(),
            limit: max_query_body(db.shape()),
        });
    }
    match scheme {
        SchemeId::Chor => Chor::answer_body(db, body),
        SchemeId::RaidPir => {
            let RaidQueryBody {
                scheme: raid,
                query,
            } = RaidQueryBody::from_bytes(body, &db.shape())?;
            let answer = raid.answer(db, &query)?;
            Ok(raid.encode_answer(&answer))
        }
        SchemeId::Dpf => {
            let scheme = DpfPir::new(db.shape());
            let query = scheme.decode_query(body)?;
            Ok(scheme.encode_answer(&scheme.answer(db, &query)?))
        }
        other => Err(Error::WrongScheme {
            found: other as u8,
            expected: SchemeId::RaidPir as u8,
        }),
    }
}

/// Upper bound on a valid query body for this database shape (any scheme); the server refuses
/// bigger envelopes before reading them.
pub fn max_query_body(shape: DbShape) -> usize {
    Chor::query_body_len(shape)
        .max(RaidPir::max_query_body(shape))
        .max(DpfPir::query_body_len(shape))
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    use crate::raid::AnswerMode;

    #[test]
    fn answers_any_raid_position_and_chor() {
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let shape = DbShape::new(40, 64).unwrap();
        let db = Database::random(shape, &mut rng);
        let raid = RaidPir::new(shape, 5, 3, 7, AnswerMode::PerChunk).unwrap();
        let (queries, state) = raid.query(&[8, 2], &mut rng).unwrap();
        let answers: Vec<_> = queries
            .iter()
            .map(|q| {
                let body = answer_body(&db, SchemeId::RaidPir, &raid.encode_query(q)).unwrap();
                raid.decode_answer(q, &body).unwrap()
            })
            .collect();
        assert_eq!(
            raid.decode(&state, &answers).unwrap(),
            vec![db.block(8).to_vec(), db.block(2).to_vec()]
        );

        let chor = Chor::new(shape, 3).unwrap();
        let (queries, _) = chor.query(&[1], &mut rng).unwrap();
        let body = chor.encode_query(&queries[0]);
        assert_eq!(answer_body(&db, SchemeId::Chor, &body).unwrap().len(), 64);
        assert!(matches!(
            answer_body(&db, SchemeId::Control, &body),
            Err(Error::WrongScheme { .. })
        ));
        assert!(answer_body(&db, SchemeId::RaidPir, &body).is_err());
    }
}
