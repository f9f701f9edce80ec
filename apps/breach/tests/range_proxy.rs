//! The HIBP range proxy without the binary: two breach servers in this process (over
//! `LocalTransport`) and the proxy's requests handed to [`RangeProxy::handle`] as plain `http`
//! requests.

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::sync::Arc;

use bytes::Bytes;
use http::{Request, StatusCode};
use pir_breach::corpus::{password_sha1, CorpusFormat, CorpusStats, Sha1Entry};
use pir_breach::database::{build_sha1, Sha1Layout};
use pir_breach::header::DbHeader;
use pir_breach::proxy::RangeProxy;
use pir_breach::service::{BreachBackend, BreachConfig};
use pir_breach::BreachSession;
use pir_client::LocalTransport;

async fn proxy() -> RangeProxy<LocalTransport> {
    let entries: Vec<Sha1Entry> = [&b"123456"[..], b"hunter2"]
        .iter()
        .map(|p| Sha1Entry {
            hash: password_sha1(p),
            count: 7,
        })
        .collect();
    let (db, _) = build_sha1(
        CorpusFormat::Passwords,
        &entries,
        &Sha1Layout::default(),
        &CorpusStats::default(),
    )
    .unwrap();
    let (header, database) = db.into_parts();
    let mut servers: Vec<Arc<dyn pir_service::Handler>> = Vec::new();
    let mut keys = Vec::new();
    for server in 0..2 {
        let key = pir_keys::SecretKey::generate().unwrap();
        keys.push(key.public());
        let copy = pir_core::Database::from_bytes(database.shape(), database.bytes()).unwrap();
        let config = BreachConfig::in_memory(copy, header.encode().to_vec(), server, key);
        servers.push(Arc::new(BreachBackend::start(config).unwrap()));
    }
    let session = BreachSession::open_with(LocalTransport::new(servers), &keys)
        .await
        .unwrap();
    let header = DbHeader::decode(session.header()).unwrap();
    RangeProxy::new(session, header).unwrap()
}

fn get(path: &str) -> Request<Bytes> {
    Request::get(path).body(Bytes::new()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn range_requests_are_answered_and_others_refused() {
    let proxy = proxy().await;
    let hash = hex::encode_upper(password_sha1(b"hunter2"));
    let reply = proxy.handle(get(&format!("/range/{}", &hash[..5]))).await;
    assert_eq!(reply.status(), StatusCode::OK);
    assert_eq!(reply.headers()["content-type"], "text/plain");
    let body = String::from_utf8(reply.body().to_vec()).unwrap();
    assert!(body.contains(&format!("{}:7", &hash[5..])), "{body}");

    let mut padded = get(&format!("/range/{}?mode=sha1", &hash[..5]));
    padded
        .headers_mut()
        .insert("add-padding", "true".parse().unwrap());
    let reply = proxy.handle(padded).await;
    assert_eq!(reply.status(), StatusCode::OK);
    assert!(reply.body().len() > body.len());

    assert_eq!(
        proxy.handle(get("/range/ZZZZZ")).await.status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        proxy.handle(get("/range/00000?mode=ntlm")).await.status(),
        StatusCode::BAD_REQUEST
    );
    assert_eq!(
        proxy.handle(get("/status")).await.status(),
        StatusCode::NOT_FOUND
    );
    let post = Request::post("/range/00000").body(Bytes::new()).unwrap();
    assert_eq!(
        proxy.handle(post).await.status(),
        StatusCode::METHOD_NOT_ALLOWED
    );
}
