//! Checklist's two server roles as one [`Backend`] (`pir_xor::checklist`): the *offline*
//! server hands out hints and answers refreshes, the *online* server answers lookups. Both
//! answer a punctured set the same way; the online server refuses hint requests, so a
//! misconfigured client cannot send both halves of its secrets to one server.
//!
//! ```text
//! query body   = kind u8 | body
//!                kind 1: lookup (pir_xor::checklist::wire lookup: shape | punctured key)
//!                kind 2: hints  (pir_xor::checklist::wire hint request), offline role only
//! answer       = b bytes (lookup) | count x b bytes (hints)
//! description  = envelope(checklist, Manifest, info)
//! download     = envelope(checklist, Manifest, public bytes) at GET /pir/v1/hint, optional
//!                (the application's, in the clear)
//! info         = "pir-checklist-info-v1" | role u8 (0 offline, 1 online)
//!              | records u64 | record_bytes u32 | set_size u32 | hints u32
//!              | database id [32] | about_len u32 | about
//! ```
//!
//! Both roles also answer SinglePass queries (scheme `singlepass`, [`crate::singlepass`]) over
//! the same records when they are stored at exactly `b` bytes (a Safe Browsing bucket): the
//! SinglePass parameters follow from `B` and `b` (`pir_xor::singlepass::Params::new`), the
//! offline role hands out SinglePass hints, and no changes are published (a Safe Browsing list
//! changes by new buckets).
//!
//! Both roles also answer DPF queries (scheme `dpf`, `pir_xor::dpf_pir`) over the same records:
//! a client that prefers fewer bytes and no hints to the fastest server work asks both servers
//! with a DPF key each (every record is read per lookup).
//!
//! Privacy: both servers must not collude (each alone sees sets punctured at uniformly random
//! positions, see `pir_xor::checklist`). Work per lookup is `s - 1` record reads and `2s` AES
//! blocks whatever the index; a hint request's work is fixed by its count.

use pir_core::protocol::RELEASE_ID_LEN;
use pir_core::wire::{self, MessageKind, Reader, Writer};
use pir_core::{Codec, Database, DbShape, Error, MultiServerScheme, SchemeId};
use pir_keys::SecretKey;
use pir_xor::checklist::{server, wire as ck_wire, OfflineRequest, Params, PuncturedKey};
use pir_xor::{DpfPir, DpfQuery};

use crate::roles::InfoParams;
use crate::signed::{Backend, Refusal, SignedService};

/// A Checklist server on the network.
pub type ChecklistService = SignedService<Checklist>;

/// Query kind byte: a punctured set (lookup or refresh).
pub const KIND_LOOKUP: u8 = 1;
/// Query kind byte: a range of hints.
pub const KIND_HINTS: u8 = 2;
/// Most queries in one request (a client sends one lookup, or one hint range, at a time).
pub const MAX_QUERIES_PER_REQUEST: usize = 4;
/// Most hint bytes in one answer: a client fetches its hints in pieces of this size, which
/// also drives its progress bar.
pub const MAX_HINT_ANSWER: usize = 4 << 20;
/// First bytes of the info message.
pub const INFO_MAGIC: &[u8] = b"pir-checklist-info-v1";

pub use crate::roles::{Role, MAX_ABOUT_BYTES};

/// What a server says about itself (the info message; module documentation).
pub type Info = crate::roles::Info<Params>;

impl InfoParams for Params {
    const MAGIC: &'static [u8] = INFO_MAGIC;
    const SCHEME: SchemeId = SchemeId::Checklist;

    fn write(&self, w: &mut Writer) {
        w.u64(self.records());
        // Bounded by Params: b <= 2^16, s <= 2^24, m <= 2^28.
        w.u32(self.record_bytes() as u32);
        w.u32(self.sets().size() as u32);
        w.u32(self.hints() as u32);
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, Error> {
        let records = r.u64()?;
        let record_bytes = r.u32()? as usize;
        let set_size = r.u32()? as usize;
        let hints = r.u32()? as usize;
        let params = Params::with_set_size(records, record_bytes, set_size)
            .map_err(|e| Error::Malformed(format!("Checklist parameters: {e}")))?;
        if params.hints() != hints {
            return Err(Error::Malformed(format!(
                "{hints} hints announced, the parameters give {}",
                params.hints()
            )));
        }
        Ok(params)
    }

    fn records(&self) -> u64 {
        Params::records(self)
    }

    fn record_bytes(&self) -> usize {
        Params::record_bytes(self)
    }
}

/// Hints per request that fit [`MAX_HINT_ANSWER`] (at least one).
pub fn hints_per_request(params: &Params) -> u32 {
    let per = (MAX_HINT_ANSWER / params.record_bytes()).max(1);
    per.min(ck_wire::MAX_HINTS_PER_REQUEST as usize) as u32
}

/// One server of a Checklist deployment.
pub struct Checklist {
    info: Info,
    /// The same records' SinglePass layout, when the blocks are exactly `b` bytes.
    singlepass: Option<pir_xor::singlepass::Params>,
    database: Database,
    description: Vec<u8>,
    download: Option<bytes::Bytes>,
}

impl std::fmt::Debug for Checklist {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Checklist")
            .field("role", &self.info.role)
            .field("params", &self.info.params)
            .finish_non_exhaustive()
    }
}

/// A query after decoding.
#[derive(Debug)]
pub enum Prepared {
    /// A punctured set to answer.
    Lookup(PuncturedKey),
    /// Hints of a master seed.
    Hints(OfflineRequest, std::ops::Range<usize>),
    /// A DPF key.
    Dpf(DpfQuery),
    /// A SinglePass query.
    SinglePass(crate::singlepass::Prepared),
}

impl Checklist {
    /// The schemes a Safe Browsing server answers: Checklist, SinglePass, and DPF for small
    /// buckets.
    pub const SCHEMES: &'static [SchemeId] =
        &[SchemeId::Checklist, SchemeId::SinglePass, SchemeId::Dpf];

    /// A server of `role` over `database` (the records, in the layout `params` describe),
    /// identified by `database_id`; `about` is served in the info message.
    pub fn new(
        params: Params,
        database: Database,
        database_id: [u8; RELEASE_ID_LEN],
        role: Role,
        about: Vec<u8>,
    ) -> Result<Self, Error> {
        server::check_database(&params, &database)?;
        crate::roles::check_about(&about)?;
        let info = Info {
            role,
            params,
            database_id,
            about,
        };
        let description = info.description();
        let singlepass = singlepass_layout(&params, database.shape().block_size());
        Ok(Self {
            info,
            singlepass,
            database,
            description,
            download: None,
        })
    }

    /// Serves `bytes` at `GET /pir/v1/hint` (in an envelope, see [`parse_download`]): public
    /// data a client downloads in the clear (Safe Browsing: the list's prefixes), never
    /// anything about a query.
    pub fn with_download(mut self, bytes: &[u8]) -> Self {
        self.download = Some(download_envelope(bytes));
        self
    }

    /// Puts the server behind the signed-batch service, signing with `key`.
    pub fn serve(self, key: SecretKey) -> ChecklistService {
        SignedService::new(self, key)
    }

    /// What the server says about itself.
    pub fn info(&self) -> &Info {
        &self.info
    }

    /// The SinglePass layout of the same records, if it serves SinglePass.
    pub fn singlepass(&self) -> Option<&pir_xor::singlepass::Params> {
        self.singlepass.as_ref()
    }
}

impl Backend for Checklist {
    type Prepared = Prepared;

    fn accepts(&self, scheme: SchemeId) -> bool {
        Self::SCHEMES.contains(&scheme)
    }
    fn database_id(&self) -> &[u8; RELEASE_ID_LEN] {
        &self.info.database_id
    }
    fn stale_message(&self) -> String {
        format!(
            "this server holds database {}; fetch its info and the hints again",
            hex::encode(&self.info.database_id[..8])
        )
    }
    fn max_queries(&self) -> usize {
        MAX_QUERIES_PER_REQUEST
    }
    fn max_query_body(&self) -> usize {
        query_limit(
            &self.info.params,
            self.singlepass.as_ref(),
            self.database.shape(),
        )
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn prepare(&self, scheme: SchemeId, query: &[u8]) -> Result<Prepared, Refusal> {
        prepare_query(
            &self.info,
            self.singlepass.as_ref(),
            self.database.shape(),
            scheme,
            query,
        )
    }
    fn answer_batch(&self, prepared: Vec<Prepared>) -> Vec<Result<Vec<u8>, Refusal>> {
        let params = &self.info.params;
        prepared
            .into_iter()
            .map(|query| {
                let answer = match query {
                    Prepared::Lookup(key) => server::answer(params, &self.database, &key),
                    Prepared::Hints(request, range) => {
                        server::hints(params, &self.database, &request, range)
                    }
                    Prepared::SinglePass(query) => match &self.singlepass {
                        Some(singlepass) => crate::singlepass::answer(
                            singlepass,
                            self.database.bytes(),
                            None,
                            query,
                        ),
                        // prepare() made a SinglePass query only with parameters.
                        None => Err(Error::InvalidParameter("no SinglePass layout".into())),
                    },
                    Prepared::Dpf(query) => {
                        let dpf = DpfPir::new(self.database.shape());
                        dpf.answer(&self.database, &query)
                            .map(|answer| dpf.encode_answer(&answer))
                    }
                };
                answer.map_err(|e| Refusal::internal(e.to_string()))
            })
            .collect()
    }
    fn hint(&self) -> Option<bytes::Bytes> {
        self.download.clone()
    }
    fn health(&self) -> String {
        self.info.health("checklist")
    }
}

/// The SinglePass layout of the records of `params` stored in blocks of `block_size` bytes:
/// only when they are stored at exactly `b` bytes (a Safe Browsing bucket).
pub fn singlepass_layout(
    params: &Params,
    block_size: usize,
) -> Option<pir_xor::singlepass::Params> {
    (block_size == params.record_bytes())
        .then(|| pir_xor::singlepass::Params::new(params.records(), params.record_bytes()).ok())
        .flatten()
}

/// Longest query body a server of `params` (SinglePass layout `singlepass`, database shape
/// `shape`) accepts.
pub fn query_limit(
    params: &Params,
    singlepass: Option<&pir_xor::singlepass::Params>,
    shape: DbShape,
) -> usize {
    let checklist = 1 + ck_wire::SHAPE_LEN + params.sets().punctured_len().max(16 + 8);
    let singlepass = singlepass.map_or(0, crate::singlepass::max_query_body);
    checklist
        .max(singlepass)
        .max(pir_xor::serve::max_query_body(shape))
}

/// Decodes and checks one query of `scheme` as the server `info` describes (SinglePass layout
/// `singlepass`, database shape `shape`) does before answering it: what a whole server, a
/// shard of it and a front end over its shards all run, so they refuse the same queries
/// (the online role refuses hint requests) with the same errors.
pub fn prepare_query(
    info: &Info,
    singlepass: Option<&pir_xor::singlepass::Params>,
    shape: DbShape,
    scheme: SchemeId,
    query: &[u8],
) -> Result<Prepared, Refusal> {
    let params = &info.params;
    if scheme == SchemeId::SinglePass {
        let Some(singlepass) = singlepass else {
            return Err(Refusal::unsupported(
                "this database is not stored for SinglePass: use Checklist or DPF",
            ));
        };
        let prepared = crate::singlepass::prepare(singlepass, info.role, None, query)?;
        return Ok(Prepared::SinglePass(prepared));
    }
    if scheme == SchemeId::Dpf {
        return Ok(Prepared::Dpf(DpfPir::new(shape).decode_query(query)?));
    }
    match ChecklistQuery::from_bytes(query, params)? {
        ChecklistQuery::Lookup(lookup) => Ok(Prepared::Lookup(lookup.key)),
        ChecklistQuery::Hints(request) => {
            if info.role != Role::Offline {
                return Err(Refusal::unsupported(
                    "this is the online server: ask the offline server (server 0) for hints",
                ));
            }
            if request.hints.len() > hints_per_request(params) as usize {
                return Err(Refusal::bad_request(format!(
                    "at most {} hints per request",
                    hints_per_request(params)
                )));
            }
            Ok(Prepared::Hints(request.request, request.hints))
        }
    }
}

/// Longest answer body one query may produce on a server of `params`.
pub fn max_answer(params: &Params) -> usize {
    params.record_bytes() * hints_per_request(params) as usize
}

/// A Checklist query body: `kind u8 | body` (module documentation). Context: the server's
/// parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ChecklistQuery {
    /// [`KIND_LOOKUP`]: a punctured set, to either server.
    Lookup(ck_wire::Lookup),
    /// [`KIND_HINTS`]: a range of hints, to the offline server.
    Hints(ck_wire::HintRequest),
}

impl<'a> Codec<'a> for ChecklistQuery {
    type Context = Params;

    fn encode(&self, w: &mut Writer) {
        match self {
            Self::Lookup(lookup) => {
                w.u8(KIND_LOOKUP);
                lookup.encode(w);
            }
            Self::Hints(request) => {
                w.u8(KIND_HINTS);
                request.encode(w);
            }
        }
    }

    fn decode(r: &mut Reader<'a>, params: &Params) -> Result<Self, Error> {
        match r.u8()? {
            KIND_LOOKUP => Ok(Self::Lookup(ck_wire::Lookup::decode(r, params)?)),
            KIND_HINTS => Ok(Self::Hints(ck_wire::HintRequest::decode(r, params)?)),
            other => Err(Error::UnknownValue {
                field: "Checklist query kind",
                found: u64::from(other),
            }),
        }
    }
}

/// A lookup query body ([`ChecklistQuery::Lookup`]).
pub fn lookup_query(params: &Params, key: &PuncturedKey) -> Vec<u8> {
    ChecklistQuery::Lookup(ck_wire::Lookup {
        shape: ck_wire::Shape::of(params),
        key: key.clone(),
    })
    .to_bytes()
}

/// A hint query body for hints `first..first + count` ([`ChecklistQuery::Hints`]).
pub fn hints_query(params: &Params, request: &OfflineRequest, first: u32, count: u32) -> Vec<u8> {
    let mut body = vec![KIND_HINTS];
    body.extend(ck_wire::encode_hint_request(params, request, first, count));
    body
}

/// Reads `envelope(checklist, Manifest, body)` and returns the body.
fn read_manifest<'a>(r: &mut Reader<'a>) -> Result<&'a [u8], Error> {
    // The envelope is the whole message: what follows it is its body, whatever the length.
    let max = r.remaining();
    let envelope = wire::Envelope::decode(r, &max)?;
    if envelope.scheme != SchemeId::Checklist {
        return Err(Error::WrongScheme {
            found: envelope.scheme as u8,
            expected: SchemeId::Checklist as u8,
        });
    }
    if envelope.kind != MessageKind::Manifest {
        return Err(Error::WrongKind {
            found: envelope.kind as u8,
            expected: MessageKind::Manifest as u8,
        });
    }
    Ok(envelope.body)
}

fn write_manifest(w: &mut Writer, body: &[u8]) {
    wire::Envelope {
        scheme: SchemeId::Checklist,
        kind: MessageKind::Manifest,
        body,
    }
    .encode(w);
}

/// The optional download at `GET /pir/v1/hint`: `envelope(checklist, Manifest, public
/// bytes)`, the application's bytes borrowed from the message.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Download<'a>(pub &'a [u8]);

impl<'a> Codec<'a> for Download<'a> {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        write_manifest(w, self.0);
    }

    fn decode(r: &mut Reader<'a>, _: &()) -> Result<Self, Error> {
        read_manifest(r).map(Download)
    }
}

/// A server's description reply: `envelope(checklist, Manifest, info)`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Description(pub Info);

impl Codec<'_> for Description {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        write_manifest(w, &self.0.to_bytes());
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        let body = read_manifest(r)?;
        Info::from_bytes(body, &()).map(Description)
    }
}

/// The download envelope around an application's public bytes (what [`parse_download`]
/// reads), for a server that serves several Checklist databases behind one download.
pub fn download_envelope(bytes: &[u8]) -> bytes::Bytes {
    bytes::Bytes::from(Download(bytes).to_bytes())
}

/// The application bytes of a download from [`Checklist::with_download`] (untrusted).
pub fn parse_download(bytes: &[u8]) -> Result<&[u8], Error> {
    Download::from_bytes(bytes, &()).map(|download| download.0)
}

/// Reads a server's description reply ([`Description`]; untrusted).
pub fn parse_description(bytes: &[u8]) -> Result<Info, Error> {
    Description::from_bytes(bytes, &()).map(|description| description.0)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pir_core::DbShape;
    use pir_xor::checklist::Client;
    use rand::SeedableRng;

    fn server(role: Role) -> (ChecklistService, Params) {
        let params = Params::new(100, 32).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let db = Database::random(DbShape::new(100, 32).unwrap(), &mut rng);
        let key = SecretKey::generate().unwrap();
        let checklist = Checklist::new(params, db, [3; 32], role, b"about".to_vec()).unwrap();
        (checklist.serve(key), params)
    }

    #[test]
    fn info_round_trips_and_refuses_damage() {
        let (service, params) = server(Role::Online);
        let info = parse_description(service.backend().description()).unwrap();
        assert_eq!(info.role, Role::Online);
        assert_eq!(info.params, params);
        assert_eq!(info.about, b"about");
        let bytes = info.encode();
        for cut in 0..bytes.len() {
            assert!(Info::decode(&bytes[..cut]).is_err());
        }
        let mut hints = bytes.clone();
        // The announced hint count must follow from the parameters.
        let at = INFO_MAGIC.len() + 1 + 8 + 4 + 4;
        hints[at] ^= 1;
        assert!(Info::decode(&hints).is_err());
    }

    #[test]
    fn only_the_offline_server_hands_out_hints() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        for (role, status) in [(Role::Offline, 200), (Role::Online, 400)] {
            let (service, params) = server(role);
            let request = Client::offline_request(&mut rng);
            let query = crate::reply::request(
                SchemeId::Checklist,
                &[3; 32],
                &[hints_query(&params, &request, 0, 10)],
            );
            assert_eq!(service.handle(&query).status, status, "{role:?}");
        }
    }
}
