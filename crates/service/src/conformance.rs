//! The one conformance harness: every registered scheme (`registry::standard`) runs through
//! the same checks over its real signed-batch service.
//!
//! [`check`] deploys a scheme over a seeded [`Fixture`] (its servers as [`Handler`]s, its
//! client as a sans-I/O [`Client`]), then checks:
//! - correctness: records at the edges and in the middle decode to the fixture's bytes;
//! - privacy shape: each server's request and reply sizes are the same for every index;
//! - malformed input: garbage, truncated and oversized-count requests get an error envelope
//!   (status 400, never a panic), and the servers keep answering afterwards.
//!
//! The deployments here are small and built in microseconds, so the harness is cheap enough
//! to run for every scheme in every test run.

use std::sync::Arc;

use pir_core::protocol::MAX_BATCH;
use pir_core::wire::{self, MessageKind};
use pir_core::{Database, DbShape, Error, MultiServerScheme, SchemeId};
use pir_keys::{PublicKey, SecretKey};
use pir_lattice::{Scheme, SingleClient};
use pir_xor::qdp::{MemorySeedStore, PausePolicy, QdpClient, QdpConfig, SeedKey};
use pir_xor::{AnswerMode, Chor, RaidPir};
use rand::{CryptoRng, RngCore, SeedableRng};

use crate::lattice::{Lattice, LatticeDatabase};
use crate::mirror::Mirror;
use crate::qdp::{BoxedSeedStore, Qdp, QdpSetup};
use crate::reply::{self, Expect};
use crate::{framing, Handler, SignedService};

/// Builds a small deployment of a scheme over a fixture.
pub type Deploy = fn(&Fixture) -> Result<Deployment, Error>;

/// Sends `request` to server `server` and returns its reply envelope.
pub type Exchange<'a> = &'a mut dyn FnMut(usize, Vec<u8>) -> Vec<u8>;

/// The records a deployment serves: `record_count` records of `record_bytes` bytes, from a seed.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// Number of records.
    pub record_count: usize,
    /// Bytes per record (for the XOR schemes a multiple of 32: they use it as the block size).
    pub record_bytes: usize,
    /// The records, back to back.
    pub records: Vec<u8>,
}

impl Fixture {
    /// `record_count` records of `record_bytes` bytes drawn from ChaCha20 seeded by `seed`.
    pub fn new(seed: u64, record_count: usize, record_bytes: usize) -> Self {
        let mut records = vec![0u8; record_count * record_bytes];
        rand_chacha::ChaCha20Rng::seed_from_u64(seed).fill_bytes(&mut records);
        Self {
            record_count,
            record_bytes,
            records,
        }
    }

    /// Record `index`.
    pub fn record(&self, index: usize) -> &[u8] {
        &self.records[index * self.record_bytes..(index + 1) * self.record_bytes]
    }

    /// The records as a block database.
    pub fn database(&self) -> Result<Database, Error> {
        Database::from_bytes(
            DbShape::new(self.record_count as u64, self.record_bytes)?,
            &self.records,
        )
    }
}

/// All a sans-I/O client reaches the world through: its randomness and the exchange function.
pub struct Link<'a> {
    /// The client's randomness.
    pub rng: &'a mut dyn CryptoRng,
    /// Sends a request to server `i` and returns its reply envelope.
    pub exchange: Exchange<'a>,
}

/// A scheme's client, sans I/O: it reaches server `i` only through `link`'s exchange.
pub trait Client {
    /// Retrieves record `index` privately.
    fn fetch(&self, index: usize, link: Link<'_>) -> Result<Vec<u8>, String>;
}

/// A running deployment: its servers, in position order, and a client of them.
pub struct Deployment {
    /// The servers' services.
    pub servers: Vec<Arc<dyn Handler>>,
    /// A client of the deployment.
    pub client: Box<dyn Client>,
}

/// Runs the scheme `id`, deployed by `deploy` (a registry entry's), through every check; the
/// error says which failed and how.
pub fn check(id: SchemeId, deploy: Deploy) -> Result<(), String> {
    let name = id.name();
    let fixture = Fixture::new(7, 24, fixture_record_bytes(id));
    let deployment = deploy(&fixture).map_err(|e| format!("{name}: deploy: {e}"))?;
    let servers = &deployment.servers;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(11);
    // The sizes of every exchange, per server. A scheme may take a random number of rounds
    // (Checklist's decoy rounds), but never one whose sizes differ from index to index.
    let mut sizes: Option<std::collections::BTreeSet<(usize, usize, usize)>> = None;
    for index in [0, 1, 13, fixture.record_count - 1] {
        let mut seen = std::collections::BTreeSet::new();
        let mut exchange = |server: usize, request: Vec<u8>| {
            let reply = servers[server].handle_many(&[&request]).remove(0);
            seen.insert((server, request.len(), reply.body.len()));
            reply.body
        };
        let link = Link {
            rng: &mut rng,
            exchange: &mut exchange,
        };
        let record = deployment.client.fetch(index, link)?;
        if record != fixture.record(index) {
            return Err(format!("{name}: record {index} decoded wrongly"));
        }
        match &sizes {
            None => sizes = Some(seen),
            Some(first) if *first != seen => {
                return Err(format!(
                    "{name}: request/reply sizes depend on the index: {first:?} vs {seen:?}"
                ))
            }
            Some(_) => {}
        }
    }
    for (position, server) in servers.iter().enumerate() {
        for request in malformed_requests(id, server.max_request_bytes()) {
            let reply = server.handle_many(&[&request]).remove(0);
            let envelope = wire::decode_envelope(&reply.body, reply.body.len())
                .map_err(|e| format!("{name}: server {position}: unreadable refusal: {e}"))?;
            if reply.status != 400 || envelope.kind != MessageKind::Error {
                return Err(format!(
                    "{name}: server {position} did not refuse a malformed request ({} bytes)",
                    request.len()
                ));
            }
        }
    }
    let mut exchange =
        |server: usize, request: Vec<u8>| servers[server].handle_many(&[&request]).remove(0).body;
    let index = fixture.record_count / 2;
    let link = Link {
        rng: &mut rng,
        exchange: &mut exchange,
    };
    let record = deployment.client.fetch(index, link)?;
    if record != fixture.record(index) {
        return Err(format!("{name}: wrong record after malformed requests"));
    }
    Ok(())
}

/// Bytes per record of `id`'s fixture: 64 (two 32-byte blocks for the XOR schemes) but for
/// YPIR, which serves records of at most 8 bytes and whose offline work (packing digits)
/// grows with every byte of record: 1 byte keeps its deployment to one packed ciphertext.
fn fixture_record_bytes(id: SchemeId) -> usize {
    match id {
        SchemeId::Ypir => 1,
        _ => 64,
    }
}

/// Requests every server must refuse.
fn malformed_requests(scheme: SchemeId, max_request: usize) -> Vec<Vec<u8>> {
    let id = [0u8; 32];
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(3);
    let mut random = vec![0u8; 200];
    rng.fill_bytes(&mut random);
    let good = reply::request(scheme, &id, &[vec![1, 2, 3]]);
    let mut wrong_kind = good.clone();
    wrong_kind[7] = MessageKind::Answer as u8;
    let mut oversized = good.clone();
    oversized[8..12].copy_from_slice(&u32::try_from(max_request).unwrap_or(u32::MAX).to_le_bytes());
    vec![
        Vec::new(),
        b"garbage".to_vec(),
        random,
        good[..good.len() - 1].to_vec(),
        wrong_kind,
        oversized,
        reply::request(scheme, &id, &vec![vec![0u8]; MAX_BATCH + 1]),
        wire::encode_envelope(scheme, MessageKind::Query, &[]),
    ]
}

fn key() -> Result<SecretKey, Error> {
    SecretKey::generate().map_err(|e| Error::InvalidParameter(e.to_string()))
}

/// What a test client knows of its servers: the database id they answer for and each one's
/// signing key, in position order.
struct Peers {
    id: [u8; 32],
    keys: Vec<PublicKey>,
}

impl Peers {
    /// `count` servers of database `id` under fresh keys: the client's view and the secrets.
    fn generate(id: [u8; 32], count: usize) -> Result<(Self, Vec<SecretKey>), Error> {
        let secrets = (0..count).map(|_| key()).collect::<Result<Vec<_>, _>>()?;
        let keys = secrets.iter().map(SecretKey::public).collect();
        Ok((Self { id, keys }, secrets))
    }

    /// Exchanges a request of one `query` with `server` and returns its checked answer.
    fn ask(
        &self,
        exchange: Exchange<'_>,
        (scheme, server): (SchemeId, usize),
        query: Vec<u8>,
        max_answer: usize,
    ) -> Result<Vec<u8>, String> {
        let request = reply::request(scheme, &self.id, &[query]);
        let reply_bytes = exchange(server, request.clone());
        if reply_bytes.len() > framing::reply_bytes(1, max_answer) {
            return Err(format!(
                "{}: reply longer than the framing allows",
                scheme.name()
            ));
        }
        let expect = Expect {
            scheme,
            database_id: &self.id,
            key: &self.keys[server],
            count: 1,
            max_answer,
        };
        // One query, so `open` returned exactly one answer.
        reply::open(&reply_bytes, &request, expect)
            .map(|answers| answers.concat())
            .map_err(|e| format!("{}: server {server}: {e}", scheme.name()))
    }
}

/// A client of any multi-server scheme served by [`Mirror`]s.
struct MirrorClient<S> {
    scheme: S,
    peers: Peers,
}

impl<S: MultiServerScheme> Client for MirrorClient<S> {
    fn fetch(&self, index: usize, link: Link<'_>) -> Result<Vec<u8>, String> {
        let (queries, state) = self
            .scheme
            .query(&[index], &mut &mut *link.rng)
            .map_err(|e| e.to_string())?;
        let max_answer = self.scheme.max_answer_body();
        let mut answers = Vec::new();
        for (server, query) in queries.iter().enumerate() {
            let body = self.scheme.encode_query(query);
            let to = (self.scheme.id(), server);
            let got = self.peers.ask(link.exchange, to, body, max_answer)?;
            answers.push(
                self.scheme
                    .decode_answer(query, &got)
                    .map_err(|e| e.to_string())?,
            );
        }
        let mut blocks = self
            .scheme
            .decode(&state, &answers)
            .map_err(|e| e.to_string())?;
        blocks.pop().ok_or_else(|| "no block decoded".into())
    }
}

fn deploy_mirrors<S: MultiServerScheme + 'static>(
    fixture: &Fixture,
    scheme: S,
) -> Result<Deployment, Error> {
    let (peers, secrets) = Peers::generate([7u8; 32], scheme.servers())?;
    let mut servers: Vec<Arc<dyn Handler>> = Vec::new();
    for key in secrets {
        let mirror = Mirror::plain(fixture.database()?, peers.id, b"manifest".to_vec());
        servers.push(Arc::new(mirror.serve(key)));
    }
    Ok(Deployment {
        servers,
        client: Box::new(MirrorClient { scheme, peers }),
    })
}

/// A client of an offline/online scheme (`C`: Checklist's or SinglePass's): hints fetched at
/// deployment, lookups through the exchange.
struct HintedClient<C> {
    client: std::sync::Mutex<C>,
    peers: Peers,
}

impl<C> HintedClient<C> {
    fn new(client: C, peers: Peers) -> Box<Self> {
        Box::new(Self {
            client: std::sync::Mutex::new(client),
            peers,
        })
    }

    fn lock(&self) -> Result<std::sync::MutexGuard<'_, C>, String> {
        self.client
            .lock()
            .map_err(|_| "client poisoned".to_string())
    }
}

/// The offline server (position 0) and the online server (position 1) of an offline/online
/// scheme of database `id`, each made by `serve` with a fresh key, and the client's view.
fn two_roles(
    id: [u8; 32],
    serve: impl Fn(crate::roles::Role, SecretKey) -> Result<Arc<dyn Handler>, Error>,
) -> Result<(Vec<Arc<dyn Handler>>, Peers), Error> {
    let (peers, secrets) = Peers::generate(id, 2)?;
    let roles = [crate::roles::Role::Offline, crate::roles::Role::Online];
    let servers = roles
        .into_iter()
        .zip(secrets)
        .map(|(role, key)| serve(role, key))
        .collect::<Result<Vec<_>, _>>()?;
    Ok((servers, peers))
}

impl Client for HintedClient<pir_xor::checklist::Client> {
    fn fetch(&self, index: usize, link: Link<'_>) -> Result<Vec<u8>, String> {
        use pir_xor::checklist::Outcome;
        let mut client = self.lock()?;
        let params = *client.params();
        let max_answer = crate::checklist::max_answer(&params);
        loop {
            let (query, pending) = client
                .query(index as u64, &mut *link.rng)
                .map_err(|e| e.to_string())?;
            let mut answers = Vec::new();
            for (server, key) in [(1, &query.online), (0, &query.refresh)] {
                let body = crate::checklist::lookup_query(&params, key);
                let to = (SchemeId::Checklist, server);
                answers.push(self.peers.ask(link.exchange, to, body, max_answer)?);
            }
            match client
                .finish(pending, &answers[0], &answers[1])
                .map_err(|e| e.to_string())?
            {
                Outcome::Record(record) => return Ok(record),
                Outcome::Retry => continue,
            }
        }
    }
}

/// Checklist: an offline server (hints, refreshes) and an online server (lookups).
pub fn deploy_checklist(fixture: &Fixture) -> Result<Deployment, Error> {
    use crate::checklist::{hints_query, max_answer, Checklist};
    use pir_xor::checklist::{Client as Hints, Params};
    let params = Params::new(fixture.record_count as u64, fixture.record_bytes)?;
    let id = [9u8; 32];
    let (servers, peers) = two_roles(id, |role, key| {
        let server = Checklist::new(params, fixture.database()?, id, role, Vec::new())?;
        Ok(Arc::new(server.serve(key)))
    })?;
    let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
    let request = Hints::offline_request(&mut rng);
    let query = hints_query(&params, &request, 0, params.hints() as u32);
    let mut exchange =
        |server: usize, request: Vec<u8>| servers[server].handle_many(&[&request]).remove(0).body;
    let hints = peers
        .ask(
            &mut exchange,
            (SchemeId::Checklist, 0),
            query,
            max_answer(&params),
        )
        .map_err(|e| Error::InvalidParameter(format!("hint download: {e}")))?;
    let client = Hints::new(params, &request, &hints)?;
    Ok(Deployment {
        servers,
        client: HintedClient::new(client, peers),
    })
}

/// A SinglePass client: each lookup one offset per row to each server.
impl Client for HintedClient<pir_xor::singlepass::Client> {
    fn fetch(&self, index: usize, link: Link<'_>) -> Result<Vec<u8>, String> {
        let mut client = self.lock()?;
        let params = *client.params();
        let max_answer = crate::singlepass::max_answer(&params);
        let (query, pending) = client
            .query(index as u64, &mut *link.rng)
            .map_err(|e| e.to_string())?;
        let mut answers = Vec::new();
        for (server, offsets) in [(1, &query.online), (0, &query.refresh)] {
            let body = crate::singlepass::lookup_query(&params, offsets);
            let to = (SchemeId::SinglePass, server);
            answers.push(self.peers.ask(link.exchange, to, body, max_answer)?);
        }
        client
            .finish(pending, &answers[0], &answers[1])
            .map_err(|e| e.to_string())
    }
}

/// SinglePass: an offline server (hints, refreshes) and an online server (lookups), over a
/// grid of four rows (so that every lookup spans several rows).
pub fn deploy_singlepass(fixture: &Fixture) -> Result<Deployment, Error> {
    use crate::singlepass::{hints_query, max_answer, SinglePass};
    use pir_xor::singlepass::{Client as Hints, Params};
    let id = [8u8; 32];
    let params = Params::with_rows(fixture.record_count as u64, fixture.record_bytes, 4)?;
    let (servers, peers) = two_roles(id, |role, key| {
        let backend = SinglePass::new(params, fixture.database()?, id, role, Vec::new())?;
        Ok(Arc::new(backend.serve(key)))
    })?;
    let request = Hints::offline_request(&mut rand_chacha::ChaCha20Rng::seed_from_u64(6));
    let mut exchange =
        |server: usize, request: Vec<u8>| servers[server].handle_many(&[&request]).remove(0).body;
    let query = hints_query(&params, &request);
    let hints = peers
        .ask(
            &mut exchange,
            (SchemeId::SinglePass, 0),
            query,
            max_answer(&params),
        )
        .map_err(|e| Error::InvalidParameter(format!("hint download: {e}")))?;
    let client = Hints::new(params, &request, &hints)?;
    Ok(Deployment {
        servers,
        client: HintedClient::new(client, peers),
    })
}

/// Chor over two mirrors.
pub fn deploy_chor(fixture: &Fixture) -> Result<Deployment, Error> {
    deploy_mirrors(fixture, Chor::new(fixture.database()?.shape(), 2)?)
}

/// DPF PIR over two mirrors.
pub fn deploy_dpf(fixture: &Fixture) -> Result<Deployment, Error> {
    deploy_mirrors(fixture, pir_xor::DpfPir::new(fixture.database()?.shape()))
}

/// RAID-PIR over three mirrors, `r = 2`.
pub fn deploy_raid_pir(fixture: &Fixture) -> Result<Deployment, Error> {
    let shape = fixture.database()?.shape();
    deploy_mirrors(fixture, RaidPir::new(shape, 3, 2, 3, AnswerMode::Single)?)
}

struct QdpTestClient {
    client: QdpClient,
    peers: Peers,
}

impl Client for QdpTestClient {
    fn fetch(&self, index: usize, link: Link<'_>) -> Result<Vec<u8>, String> {
        let err = |e: Error| e.to_string();
        let seed_bytes = pir_xor::qdp::SEED_RESPONSE_LEN;
        let mut grants = Vec::new();
        for server in 0..self.peers.keys.len() {
            let request = self.client.seed_request(server).map_err(err)?;
            let to = (SchemeId::Qdp, server);
            let got = self.peers.ask(link.exchange, to, request, seed_bytes)?;
            grants.push(self.client.read_seed_response(server, &got).map_err(err)?);
        }
        let (queries, state) = self.client.query(&[index], &grants).map_err(err)?;
        let mut answers = Vec::new();
        for (server, query) in queries.iter().enumerate() {
            let max_answer = self.client.scheme().answer_body_len(server);
            let body = self.client.encode_query(query);
            let to = (SchemeId::Qdp, server);
            let got = self.peers.ask(link.exchange, to, body, max_answer)?;
            answers.push(self.client.decode_answer(server, &got).map_err(err)?);
        }
        let mut blocks = self.client.decode(&state, &answers).map_err(err)?;
        blocks.pop().ok_or_else(|| "no block decoded".into())
    }
}

/// QDP over two servers (`r = n = 2`, two chunks), one of them precomputing.
pub fn deploy_qdp(fixture: &Fixture) -> Result<Deployment, Error> {
    let shape = fixture.database()?.shape();
    let raid = RaidPir::new(shape, 2, 2, 2, AnswerMode::Single)?;
    let (peers, secrets) = Peers::generate([9u8; 32], 2)?;
    let mut servers: Vec<Arc<dyn Handler>> = Vec::new();
    for (server, key) in secrets.into_iter().enumerate() {
        let qdp = Qdp::start(QdpSetup {
            database: fixture.database()?,
            raid,
            server,
            database_id: peers.id,
            description: wire::encode_envelope(SchemeId::Qdp, MessageKind::Manifest, b"qdp"),
            qdp: QdpConfig {
                queue_capacity: 4,
                ..QdpConfig::default()
            },
            policy: if server == 0 {
                PausePolicy::Never
            } else {
                PausePolicy::Always
            },
            seed_key: SeedKey::from_bytes([server as u8 + 1; 16]),
            seed_store: BoxedSeedStore(Box::new(MemorySeedStore::new())),
            flip_table: None,
        })?;
        servers.push(Arc::new(SignedService::new(qdp, key)));
    }
    Ok(Deployment {
        servers,
        client: Box::new(QdpTestClient {
            client: QdpClient::new(raid),
            peers,
        }),
    })
}

/// A lattice client.
struct LatticeTestClient {
    client: Box<dyn SingleClient>,
    key: PublicKey,
}

impl Client for LatticeTestClient {
    /// Fetches the record twice: uploading the client's keys (where the scheme has any), then
    /// naming them by key id, so that the sizes of both kinds of request are checked against
    /// the index.
    fn fetch(&self, index: usize, link: Link<'_>) -> Result<Vec<u8>, String> {
        let header = *self.client.header();
        let max_answer = wire::HEADER_LEN + pir_lattice::wire::answer_body_bytes(&header.params);
        // The database id is the version in the client's own header, as a real client's is.
        let peers = Peers {
            id: header.version,
            keys: vec![self.key],
        };
        let to = (header.params.scheme.id(), 0);
        self.client.keys_lost();
        let mut records = Vec::with_capacity(2);
        for _ in 0..2 {
            let (state, query) = self
                .client
                .query(index as u64, link.rng)
                .map_err(|e| e.to_string())?;
            let got = peers.ask(link.exchange, to, query, max_answer)?;
            records.push(
                self.client
                    .decode(&state, &got)
                    .map_err(|e| e.to_string())?,
            );
        }
        if records[0] != records[1] {
            return Err(format!(
                "{}: a query with cached keys decoded to another record",
                to.0.name()
            ));
        }
        Ok(records.swap_remove(0))
    }
}

fn deploy_lattice(fixture: &Fixture, scheme: Scheme) -> Result<Deployment, Error> {
    let key = key()?;
    let public = key.public();
    let lattice = Lattice::new(
        LatticeDatabase {
            scheme,
            records: &fixture.records,
            record_count: fixture.record_count as u64,
            record_bytes: fixture.record_bytes,
            seeds: [[1; 16], [2; 16]],
            version: [5; 32],
            about: Vec::new(),
        },
        &mut |_, _| {},
    )?;
    // `Params::new` lays records over 8 bytes out for YPIR+SP even when asked for YPIR.
    if lattice.header().params.scheme != scheme {
        return Err(Error::InvalidParameter(format!(
            "{}-byte records are laid out for {}, not {}",
            fixture.record_bytes,
            lattice.header().params.scheme.id().name(),
            scheme.id().name()
        )));
    }
    let (_, _, hint) = crate::lattice::parse_download(lattice.download())?;
    let client = pir_lattice::open_client(scheme, hint)?;
    Ok(Deployment {
        servers: vec![Arc::new(lattice.serve(key))],
        client: Box::new(LatticeTestClient {
            client,
            key: public,
        }),
    })
}

/// SimplePIR over one server.
pub fn deploy_simple_pir(fixture: &Fixture) -> Result<Deployment, Error> {
    deploy_lattice(fixture, Scheme::SimplePir)
}

/// DoublePIR over one server.
pub fn deploy_double_pir(fixture: &Fixture) -> Result<Deployment, Error> {
    deploy_lattice(fixture, Scheme::DoublePir)
}

/// YPIR over one server (records of at most 8 bytes: [`check`] gives it 1-byte records).
pub fn deploy_ypir(fixture: &Fixture) -> Result<Deployment, Error> {
    deploy_lattice(fixture, Scheme::Ypir)
}

/// YPIR+SP over one server.
pub fn deploy_ypir_sp(fixture: &Fixture) -> Result<Deployment, Error> {
    deploy_lattice(fixture, Scheme::YpirSp)
}

/// InsPIRe over one server.
pub fn deploy_inspire(fixture: &Fixture) -> Result<Deployment, Error> {
    deploy_lattice(fixture, Scheme::Inspire)
}
