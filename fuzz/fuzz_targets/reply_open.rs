//! Fuzz target: The client twin: any reply is classified, never a panic.

#![no_main]

use libfuzzer_sys::fuzz_target;
use pir_core::SchemeId;
use pir_service::reply::{self, Expect};

fuzz_target!(|data: &[u8]| {
    let key = pir_keys::PublicKey([7; 32]);
    let request = reply::request(SchemeId::Chor, &[5; 32], &[vec![1, 2, 3]]);
    let expect = Expect {
        scheme: SchemeId::Chor,
        database_id: &[5; 32],
        key: &key,
        count: 1,
        max_answer: 64,
    };
    let _ = reply::open(data, &request, expect);
});
