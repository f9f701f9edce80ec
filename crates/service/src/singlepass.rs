//! SinglePass's two server roles as one [`Backend`] (`pir_xor::singlepass`): the *offline*
//! server makes a client's hints in one pass and answers refreshes, the *online* server
//! answers lookups; both publish the changes between two database versions. The online server
//! refuses hint requests, so a misconfigured client cannot send its seed (its permutations) to
//! the server that sees its looked-up columns.
//!
//! ```text
//! query body   = kind u8 | body
//!                kind 1: lookup  (pir_xor::singlepass::wire lookup: shape | Q x offset u16)
//!                kind 2: hints   (pir_xor::singlepass::wire hint request: shape | seed 16),
//!                                offline role only
//!                kind 3: changes (from database id [32]: the version the client's hints are at)
//! answer       = Q x b bytes (lookup) | m x b bytes (hints)
//!              | pir_xor::singlepass::wire changes body (changes)
//! description  = envelope(singlepass, Manifest, info)
//! info         = "pir-singlepass-info-v1" | role u8 (0 offline, 1 online)
//!              | records u64 | record_bytes u32 | columns u32
//!              | database id [32] | about_len u32 | about
//! ```
//!
//! A Safe Browsing server answers SinglePass queries through its Checklist backend
//! ([`crate::checklist::Checklist`], which calls [`prepare`] and [`answer`] here) over the same
//! bucket records; [`SinglePass`] is the backend of a deployment that serves SinglePass alone.
//!
//! Privacy: the two servers must not collude. The offline server sees the client's seed once
//! and then, per lookup, one uniformly random offset per row; the online server sees, per
//! lookup, one offset per row that is uniform and independent of the index and of its earlier
//! lookups (`pir_xor::singlepass`, "Show and Shuffle"). Work per lookup is `Q` record reads
//! whatever the index; a hint request is one pass over every record; a changes request reveals
//! only the version the client holds.

use pir_core::protocol::RELEASE_ID_LEN;
use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Database, Error, SchemeId};
use pir_keys::SecretKey;
use pir_xor::singlepass::wire::{self as sp_wire, Body, HintRequest, Lookup};
use pir_xor::singlepass::{server, Changes, OfflineRequest, Params};

use crate::roles::InfoParams;
pub use crate::roles::{Role, MAX_ABOUT_BYTES};
use crate::signed::{Backend, Refusal, SignedService};

/// A SinglePass server on the network.
pub type SinglePassService = SignedService<SinglePass>;

/// Query kind byte: one offset per row (a lookup or a refresh).
pub const KIND_LOOKUP: u8 = 1;
/// Query kind byte: the hints of a seed.
pub const KIND_HINTS: u8 = 2;
/// Query kind byte: the changes since a database version.
pub const KIND_CHANGES: u8 = 3;
/// Most queries in one request (a client sends one lookup, or one hint request, at a time).
pub const MAX_QUERIES_PER_REQUEST: usize = 4;
/// First bytes of the info message.
pub const INFO_MAGIC: &[u8] = b"pir-singlepass-info-v1";

/// What a server says about itself (the info message; module documentation).
pub type Info = crate::roles::Info<Params>;

impl InfoParams for Params {
    const MAGIC: &'static [u8] = INFO_MAGIC;
    const SCHEME: SchemeId = SchemeId::SinglePass;

    fn write(&self, w: &mut Writer) {
        w.u64(self.records());
        // Bounded by Params: b <= 2^16, m <= 2^16.
        w.u32(self.record_bytes() as u32);
        w.u32(self.columns() as u32);
    }

    fn read(r: &mut Reader<'_>) -> Result<Self, Error> {
        let records = r.u64()?;
        let record_bytes = r.u32()? as usize;
        let columns = u64::from(r.u32()?);
        Params::with_columns(records, record_bytes, columns)
            .map_err(|e| Error::Malformed(format!("SinglePass parameters: {e}")))
    }

    fn records(&self) -> u64 {
        Params::records(self)
    }

    fn record_bytes(&self) -> usize {
        Params::record_bytes(self)
    }
}

/// A SinglePass query body: `kind u8 | body` (module documentation). Context: the server's
/// parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinglePassQuery {
    /// [`KIND_LOOKUP`]: one offset per row, to either server.
    Lookup(Body<Lookup>),
    /// [`KIND_HINTS`]: a seed, to the offline server.
    Hints(Body<HintRequest>),
    /// [`KIND_CHANGES`]: the database version the client's hints are at.
    Changes([u8; RELEASE_ID_LEN]),
}

impl<'a> Codec<'a> for SinglePassQuery {
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
            Self::Changes(from) => {
                w.u8(KIND_CHANGES);
                w.bytes(from);
            }
        }
    }

    fn decode(r: &mut Reader<'a>, params: &Params) -> Result<Self, Error> {
        match r.u8()? {
            KIND_LOOKUP => Ok(Self::Lookup(Body::decode(r, params)?)),
            KIND_HINTS => Ok(Self::Hints(Body::decode(r, params)?)),
            KIND_CHANGES => Ok(Self::Changes(r.array()?)),
            other => Err(Error::UnknownValue {
                field: "SinglePass query kind",
                found: u64::from(other),
            }),
        }
    }
}

/// A lookup (or refresh) query body.
pub fn lookup_query(params: &Params, offsets: &[u16]) -> Vec<u8> {
    SinglePassQuery::Lookup(Body {
        params: *params,
        value: Lookup {
            offsets: offsets.to_vec(),
        },
    })
    .to_bytes()
}

/// A hint query body for the permutations of `request`.
pub fn hints_query(params: &Params, request: &OfflineRequest) -> Vec<u8> {
    SinglePassQuery::Hints(Body {
        params: *params,
        value: HintRequest {
            request: request.clone(),
        },
    })
    .to_bytes()
}

/// A query body for the changes from database `from` to the server's.
pub fn changes_query(from: &[u8; RELEASE_ID_LEN]) -> Vec<u8> {
    let mut body = vec![KIND_CHANGES];
    body.extend_from_slice(from);
    body
}

/// Longest query body a server of `params` accepts.
pub fn max_query_body(params: &Params) -> usize {
    1 + sp_wire::SHAPE_LEN + (2 * params.rows()).max(16)
}

/// Longest answer body one query may produce on a server of `params` (a hint download, an
/// answer, or the changes of every record).
pub fn max_answer(params: &Params) -> usize {
    let changes = sp_wire::SHAPE_LEN
        + 4
        // records <= 2^32 and MAX_CHANGES = 2^24: the min fits a usize.
        + (params.records().min(sp_wire::MAX_CHANGES) as usize) * (8 + params.record_bytes());
    params.hint_bytes().max(params.answer_bytes()).max(changes)
}

/// A query after [`prepare`].
#[derive(Debug)]
pub enum Prepared {
    /// Offsets to answer.
    Lookup(Vec<u16>),
    /// Hints of a seed.
    Hints(OfflineRequest),
    /// The published changes (checked against the client's version).
    Changes,
}

/// The changes a server publishes: from database `from` to the one it holds, as a changes body.
#[derive(Debug, Clone)]
pub struct Update {
    /// The version the changes start from.
    pub from: [u8; RELEASE_ID_LEN],
    /// The encoded changes body.
    pub body: Vec<u8>,
}

impl Update {
    /// The changes from database `from` to the server's, encoded for `params`.
    pub fn new(params: &Params, from: [u8; RELEASE_ID_LEN], changes: &Changes) -> Self {
        Self {
            from,
            body: sp_wire::encode_changes(params, changes),
        }
    }
}

/// Decodes and checks one SinglePass query for a server of `role` holding `params` that
/// publishes `update`: what both [`SinglePass`] and the Checklist backend run.
pub fn prepare(
    params: &Params,
    role: Role,
    update: Option<&Update>,
    query: &[u8],
) -> Result<Prepared, Refusal> {
    match SinglePassQuery::from_bytes(query, params)? {
        SinglePassQuery::Lookup(lookup) => Ok(Prepared::Lookup(lookup.value.offsets)),
        SinglePassQuery::Hints(request) => {
            if role != Role::Offline {
                return Err(Refusal::unsupported(
                    "this is the online server: ask the offline server (server 0) for hints",
                ));
            }
            Ok(Prepared::Hints(request.value.request))
        }
        SinglePassQuery::Changes(from) => match update {
            Some(update) if update.from == from => Ok(Prepared::Changes),
            _ => Err(Refusal::wrong_database(
                "this server publishes no changes from that version: fetch the hints again",
            )),
        },
    }
}

/// Answers a prepared query from `db` (`B b` bytes).
pub fn answer(
    params: &Params,
    db: &[u8],
    update: Option<&Update>,
    prepared: Prepared,
) -> Result<Vec<u8>, Error> {
    match prepared {
        Prepared::Lookup(offsets) => server::answer(params, db, &offsets),
        Prepared::Hints(request) => server::hints(params, db, &request),
        Prepared::Changes => update
            .map(|update| update.body.clone())
            .ok_or_else(|| Error::InvalidParameter("no changes published".into())),
    }
}

/// One server of a SinglePass deployment.
pub struct SinglePass {
    info: Info,
    database: Database,
    update: Option<Update>,
    description: Vec<u8>,
}

impl std::fmt::Debug for SinglePass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SinglePass")
            .field("role", &self.info.role)
            .field("params", &self.info.params)
            .finish_non_exhaustive()
    }
}

impl SinglePass {
    /// The schemes a standalone SinglePass server answers.
    pub const SCHEMES: &'static [SchemeId] = &[SchemeId::SinglePass];

    /// A server of `role` over `database` (`B` blocks of exactly `b` bytes), identified by
    /// `database_id`; `about` is served in the info message.
    pub fn new(
        params: Params,
        database: Database,
        database_id: [u8; RELEASE_ID_LEN],
        role: Role,
        about: Vec<u8>,
    ) -> Result<Self, Error> {
        server::check_database(&params, database.bytes())?;
        crate::roles::check_about(&about)?;
        let info = Info {
            role,
            params,
            database_id,
            about,
        };
        let description = info.description();
        Ok(Self {
            info,
            database,
            update: None,
            description,
        })
    }

    /// Publishes `changes` from database `from` to this one: a client whose hints are at
    /// `from` applies them instead of fetching new hints.
    pub fn with_changes(mut self, from: [u8; RELEASE_ID_LEN], changes: &Changes) -> Self {
        self.update = Some(Update::new(&self.info.params, from, changes));
        self
    }

    /// Puts the server behind the signed-batch service, signing with `key`.
    pub fn serve(self, key: SecretKey) -> SinglePassService {
        SignedService::new(self, key)
    }

    /// What the server says about itself.
    pub fn info(&self) -> &Info {
        &self.info
    }
}

impl Backend for SinglePass {
    type Prepared = Prepared;

    fn accepts(&self, scheme: SchemeId) -> bool {
        Self::SCHEMES.contains(&scheme)
    }
    fn database_id(&self) -> &[u8; RELEASE_ID_LEN] {
        &self.info.database_id
    }
    fn stale_message(&self) -> String {
        format!(
            "this server holds database {}; fetch its info, then the changes or the hints",
            hex::encode(&self.info.database_id[..8])
        )
    }
    fn max_queries(&self) -> usize {
        MAX_QUERIES_PER_REQUEST
    }
    fn max_query_body(&self) -> usize {
        max_query_body(&self.info.params)
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn prepare(&self, _: SchemeId, query: &[u8]) -> Result<Prepared, Refusal> {
        prepare(
            &self.info.params,
            self.info.role,
            self.update.as_ref(),
            query,
        )
    }
    fn answer_batch(&self, prepared: Vec<Prepared>) -> Vec<Result<Vec<u8>, Refusal>> {
        prepared
            .into_iter()
            .map(|query| {
                answer(
                    &self.info.params,
                    self.database.bytes(),
                    self.update.as_ref(),
                    query,
                )
                .map_err(|e| Refusal::internal(e.to_string()))
            })
            .collect()
    }
    fn health(&self) -> String {
        self.info.health("singlepass")
    }
}

/// Reads a server's description reply (`envelope(singlepass, Manifest, info)`; untrusted).
pub fn parse_description(bytes: &[u8]) -> Result<Info, Error> {
    crate::roles::parse_description(bytes)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use pir_core::DbShape;
    use pir_xor::singlepass::Client;
    use rand::SeedableRng;

    fn server(role: Role) -> (SinglePassService, Params) {
        let params = Params::new(100, 32).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let db = Database::random(DbShape::new(100, 32).unwrap(), &mut rng);
        let key = SecretKey::generate().unwrap();
        let backend = SinglePass::new(params, db, [3; 32], role, b"about".to_vec())
            .unwrap()
            .with_changes([2; 32], &Changes::new(32));
        (backend.serve(key), params)
    }

    #[test]
    fn info_round_trips() {
        let (service, params) = server(Role::Online);
        let info = parse_description(service.backend().description()).unwrap();
        assert_eq!((info.role, info.params), (Role::Online, params));
        assert_eq!(info.about, b"about");
        let bytes = info.encode();
        for cut in 0..bytes.len() {
            assert!(Info::from_bytes(&bytes[..cut], &()).is_err());
        }
    }

    #[test]
    fn only_the_offline_server_hands_out_hints() {
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(2);
        for (role, status) in [(Role::Offline, 200), (Role::Online, 400)] {
            let (service, params) = server(role);
            let request = Client::offline_request(&mut rng);
            let query = crate::reply::request(
                SchemeId::SinglePass,
                &[3; 32],
                &[hints_query(&params, &request)],
            );
            assert_eq!(service.handle(&query).status, status, "{role:?}");
        }
    }

    #[test]
    fn changes_are_served_from_the_published_version_only() {
        let (service, _) = server(Role::Online);
        for (from, status) in [([2u8; 32], 200), ([4u8; 32], 400)] {
            let query =
                crate::reply::request(SchemeId::SinglePass, &[3; 32], &[changes_query(&from)]);
            assert_eq!(service.handle(&query).status, status);
        }
    }
}
