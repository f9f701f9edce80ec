//! Fuzz target: Chor, RAID-PIR, DPF and QDP query bodies against a small database.

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

use pir_core::{Database, DbShape, SchemeId};
use pir_xor::{AnswerMode, RaidPir};

fn db() -> &'static Database {
    static DB: OnceLock<Database> = OnceLock::new();
    DB.get_or_init(|| {
        let shape = DbShape::new(21, 64).expect("a valid shape");
        Database::from_bytes(shape, &vec![3u8; 21 * 64]).expect("bytes of the shape")
    })
}

fuzz_target!(|data: &[u8]| {
    let db = db();
    for scheme in [SchemeId::Chor, SchemeId::RaidPir, SchemeId::Dpf] {
        let _ = pir_xor::serve::answer_body(db, scheme, data);
    }
    if let Ok(raid) = RaidPir::new(db.shape(), 2, 2, 2, AnswerMode::Single) {
        let _ = pir_xor::qdp::decode_seed_request(&raid, data);
        let _ = pir_xor::qdp::decode_query(&raid, data);
    }
});
