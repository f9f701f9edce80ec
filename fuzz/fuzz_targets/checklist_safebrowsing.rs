//! Fuzz target: every decoder of Checklist and private Safe Browsing: the lookup and hint
//! request bodies, a server's info, the client's saved state, the Safe Browsing database and
//! list index files, list updates, and the proxy's v4 requests (`$req` and protobuf bodies).

#![no_main]

use libfuzzer_sys::fuzz_target;
use std::sync::OnceLock;

use pir_safebrowsing::list::{ListDatabase, ListIndex};
use pir_safebrowsing::proxy::{request_bytes, Proxy};
use pir_xor::checklist::{wire, Client, Params};
use rand::SeedableRng;

fn params() -> Params {
    Params::new(1000, 32).expect("valid parameters")
}

fn proxy() -> &'static Proxy {
    static PROXY: OnceLock<Proxy> = OnceLock::new();
    PROXY.get_or_init(|| {
        let (db, _) = ListDatabase::build("fuzz", "evil.example\nbad.example/x\n1.2.3.4\n")
            .expect("a list");
        let (next, _, _) = db.update("evil.example\nnew.example\n").expect("an update");
        let mut proxy = Proxy::new(db.index());
        proxy.replace(next.index());
        proxy
    })
}

fuzz_target!(|data: &[u8]| {
    let params = params();
    let _ = wire::decode_lookup(data, &params);
    let _ = wire::decode_hint_request(data, &params);
    let _ = pir_service::checklist::Info::decode(data);
    let _ = pir_service::checklist::parse_description(data);
    let _ = pir_service::checklist::parse_download(data);
    let small = Params::new(20, 32).expect("valid parameters");
    let _ = Client::decode_state(small, data);
    let _ = ListDatabase::decode(data);
    let _ = ListIndex::decode(data);
    let proxy = proxy();
    let _ = proxy.update(data);
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
    if let Ok(plan) = proxy.plan(data, &mut rng) {
        let fetched = vec![[0u8; 32]; plan.fetches.len()];
        let _ = proxy.full_hashes(&plan, &fetched);
    }
    if let Ok(text) = std::str::from_utf8(data) {
        let _ = request_bytes(Some(text), b"");
        if let Ok((db, _)) = ListDatabase::build("fuzz", text) {
            let _ = db.update("evil.example\n");
        }
    }
});
