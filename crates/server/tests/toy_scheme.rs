//! ARCHITECTURE.md's "Adding a scheme", followed step by step for a toy scheme: the trivial
//! PIR that downloads the whole database (private because the server sends the same bytes
//! whatever the client wants). It gets an id, a `Backend`, a client, one registry entry;
//! then the one conformance harness checks it, and the real HTTPS runtime serves it.

use std::sync::Arc;

use pir_client::{HttpsTransport, Transport};
use pir_core::{Error, SchemeId};
use pir_keys::{PublicKey, SecretKey};
use pir_server::ServerOptions;
use pir_service::conformance::{self, Client, Deployment, Fixture, Link};
use pir_service::registry::{Family, SchemeEntry, Security, Servers};
use pir_service::reply::{self, Expect};
use pir_service::{framing, Backend, Handler, Refusal, SignedService};

const ID: [u8; 32] = [4; 32];
/// Step 1: an id (the reserved experimental one, until the scheme earns its own).
const SCHEME: SchemeId = SchemeId::Experimental;
/// The toy's whole query: one byte, the same for every index.
const QUERY: [u8; 1] = [0xd0];

/// Step 2: the backend. `corrupt` makes it lie, to show the harness notices.
#[derive(Debug)]
struct Download {
    records: Vec<u8>,
    corrupt: bool,
    description: Vec<u8>,
}

impl Download {
    fn new(fixture: &Fixture, corrupt: bool) -> Self {
        Self {
            records: fixture.records.clone(),
            corrupt,
            description: pir_core::wire::encode_envelope(
                SchemeId::Control,
                pir_core::wire::MessageKind::Manifest,
                b"download everything",
            ),
        }
    }
}

impl Backend for Download {
    type Prepared = ();

    fn accepts(&self, scheme: SchemeId) -> bool {
        scheme == SCHEME
    }
    fn database_id(&self) -> &[u8; 32] {
        &ID
    }
    fn stale_message(&self) -> String {
        "another database".into()
    }
    fn max_queries(&self) -> usize {
        1
    }
    fn max_query_body(&self) -> usize {
        QUERY.len()
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn prepare(&self, _scheme: SchemeId, query: &[u8]) -> Result<(), Refusal> {
        if query != QUERY {
            return Err(Refusal::bad_request("the download query is one fixed byte"));
        }
        Ok(())
    }
    fn answer_batch(&self, prepared: Vec<()>) -> Vec<Result<Vec<u8>, Refusal>> {
        let mut answer = self.records.clone();
        if self.corrupt {
            answer[0] ^= 1;
        }
        prepared.iter().map(|()| Ok(answer.clone())).collect()
    }
    fn health(&self) -> String {
        "ok scheme=experimental\n".into()
    }
}

/// Step 3: the client, sans I/O.
struct DownloadClient {
    key: PublicKey,
    record_bytes: usize,
    total: usize,
}

impl Client for DownloadClient {
    fn fetch(&self, index: usize, link: Link<'_>) -> Result<Vec<u8>, String> {
        let request = reply::request(SCHEME, &ID, &[QUERY.to_vec()]);
        let reply_bytes = (link.exchange)(0, request.clone());
        let answers =
            reply::open(&reply_bytes, &request, self.expect()).map_err(|e| e.to_string())?;
        let start = index * self.record_bytes;
        answers[0]
            .get(start..start + self.record_bytes)
            .map(<[u8]>::to_vec)
            .ok_or_else(|| "short download".to_string())
    }
}

impl DownloadClient {
    fn expect(&self) -> Expect<'_> {
        Expect {
            scheme: SCHEME,
            database_id: &ID,
            key: &self.key,
            count: 1,
            max_answer: self.total,
        }
    }
}

fn deploy_with(fixture: &Fixture, corrupt: bool) -> Result<Deployment, Error> {
    let key = SecretKey::generate().map_err(|e| Error::InvalidParameter(e.to_string()))?;
    let client = DownloadClient {
        key: key.public(),
        record_bytes: fixture.record_bytes,
        total: fixture.records.len(),
    };
    Ok(Deployment {
        servers: vec![Arc::new(SignedService::new(
            Download::new(fixture, corrupt),
            key,
        ))],
        client: Box::new(client),
    })
}

/// Step 4: one registry entry.
fn entry(deploy: pir_service::conformance::Deploy) -> SchemeEntry {
    SchemeEntry {
        id: SCHEME,
        name: "toy download",
        family: Family::SingleServer,
        servers: Servers::Exactly(1),
        purpose: "showing how a scheme is added",
        assumption: "none: the client downloads every record",
        security: Security::InformationTheoretic,
        // No server command serves it.
        served_by: &[],
        // Every server answers with the whole database, so shards cannot add up parts.
        combine: pir_service::shard::Combine::NotYet("a toy download is not sharded"),
        deploy,
    }
}

#[test]
fn the_harness_accepts_the_toy_and_catches_a_lying_one() {
    let honest = entry(|f| deploy_with(f, false));
    conformance::check(honest.id, honest.deploy).unwrap();
    let lying = entry(|f| deploy_with(f, true));
    let error = conformance::check(lying.id, lying.deploy).unwrap_err();
    assert!(error.contains("decoded wrongly"), "{error}");
    // Standard servers refuse the experimental id.
    assert!(pir_service::registry::lookup(SCHEME).is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_runtime_serves_the_toy_over_https() {
    let fixture = Fixture::new(1, 16, 64);
    let key = SecretKey::generate().unwrap();
    let service = SignedService::new(
        Download::new(&fixture, false),
        SecretKey::from_pkcs8(key.pkcs8()).unwrap(),
    );
    assert!(Handler::health(&service).contains("experimental"));
    let tls = pir_keys::tls::server_config(&key).unwrap();
    let running = pir_server::start(
        Arc::new(service),
        tls,
        ServerOptions::new("127.0.0.1:0".parse().unwrap()),
    )
    .await
    .unwrap();
    let url = format!("https://{}", running.addr);
    let transport = HttpsTransport::new(&[(url, key.public())]).unwrap();
    let client = DownloadClient {
        key: key.public(),
        record_bytes: 64,
        total: fixture.records.len(),
    };
    let request = reply::request(SCHEME, &ID, &[QUERY.to_vec()]);
    let max_reply = framing::reply_bytes(1, client.total);
    let reply_bytes = transport
        .exchange(0, request.clone(), max_reply)
        .await
        .unwrap();
    let answers = reply::open(&reply_bytes, &request, client.expect()).unwrap();
    assert_eq!(&answers[0][5 * 64..6 * 64], fixture.record(5));
    // A query in another scheme's name is refused by the same service.
    let chor = reply::request(SchemeId::Chor, &ID, &[QUERY.to_vec()]);
    let refused = transport
        .exchange(0, chor.clone(), max_reply)
        .await
        .unwrap();
    let error = reply::open(
        &refused,
        &chor,
        Expect {
            scheme: SchemeId::Chor,
            ..client.expect()
        },
    )
    .unwrap_err();
    assert!(
        matches!(error, reply::ReplyError::Refused { .. }),
        "{error}"
    );
    running.shutdown().await;
}
