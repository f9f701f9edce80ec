//! The XOR mirror as a [`Backend`]: Chor and RAID-PIR queries answered by the
//! [`pir_xor::engine::Engine`] in one pass per batch, and the signed manifest for manifest
//! requests.
//!
//! A shard of a sharded breach database ([`Mirror::with_qdp_partials`]) also takes QDP
//! precompute orders from its front end ([`pir_xor::qdp_shard`]): it computes the partial
//! answer of each order's seed over its rows, keeps it (bounded, oldest evicted first), and
//! answers the plain RAID-PIR query of that seed with the flip chunks' rows only.
//!
//! Privacy: a query selects rows with bits that are uniformly random to a mirror unless all
//! of the mirrors of one query (Chor) or `r` of them (RAID-PIR) collude; the engine's work and
//! answer size depend on the shape and the scheme, never on the index.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use pir_core::protocol::{MAX_BATCH, RELEASE_ID_LEN};
use pir_core::wire::{self, MessageKind};
use pir_core::DbShape;
use pir_core::{Database, Error, SchemeId};
use pir_keys::SecretKey;
use pir_xor::engine::{Engine, EngineOptions, Prepared};
use pir_xor::held::HeldChunks;
use pir_xor::qdp_shard::{PartialKey, ShardPartials};

use crate::signed::{Backend, Refusal, SignedService};

/// A mirror on the network: [`Mirror`] behind the signed-batch service.
pub type MirrorService = SignedService<Mirror>;

/// What a mirror answers from: the whole release, or only some RAID-PIR chunks of it.
enum Holding {
    /// The whole release behind the scan engine (database and tables): every scheme.
    Whole(Engine),
    /// Only these chunks (`pir mirror serve --chunks`): RAID-PIR positions they cover.
    Chunks(HeldChunks),
}

/// A mirror's state: what it answers from ([`Holding`]), the release it serves and the
/// signed manifest it hands out.
pub struct Mirror {
    holding: Holding,
    release_id: [u8; RELEASE_ID_LEN],
    manifest: Vec<u8>,
    description: Vec<u8>,
    legacy_files: BTreeMap<String, (usize, usize)>,
    /// A breach shard's QDP partial answers (`None`: QDP orders are refused).
    qdp: Option<QdpPartials>,
}

/// A shard's QDP partial answers and how its RAID-PIR answers used them.
struct QdpPartials {
    store: Mutex<ShardPartials>,
    /// Answers finished from a stored partial answer (the online half only).
    precomputed: AtomicU64,
    /// RAID-PIR answers with no stored partial answer (a full scan).
    fallback: AtomicU64,
}

/// A query of a [`Mirror`] after [`Backend::prepare`].
#[derive(Debug)]
pub enum MirrorPrepared {
    /// A query answered as it is.
    Query(Prepared),
    /// A QDP precompute order: its answer is stored under the key, the client gets none.
    Order(PartialKey, Prepared),
    /// The online half of a RAID-PIR query whose partial answer was stored.
    Online(Vec<u8>, Prepared),
}

impl std::fmt::Debug for Mirror {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut d = f.debug_struct("Mirror");
        match &self.holding {
            Holding::Whole(engine) => d.field("engine", engine),
            Holding::Chunks(held) => d.field("held", held),
        };
        d.finish_non_exhaustive()
    }
}

impl Mirror {
    /// The schemes a mirror answers (each must have a registry entry naming mirrors).
    pub const SCHEMES: &'static [SchemeId] = &[SchemeId::Chor, SchemeId::RaidPir, SchemeId::Dpf];

    /// A mirror answering with `engine`, identified by `release_id` (the SHA-256 of
    /// `manifest`, the signed manifest bytes it hands to clients).
    pub fn new(engine: Engine, release_id: [u8; RELEASE_ID_LEN], manifest: Vec<u8>) -> Self {
        Self::holding(Holding::Whole(engine), release_id, manifest)
    }

    fn holding(holding: Holding, release_id: [u8; RELEASE_ID_LEN], manifest: Vec<u8>) -> Self {
        let description =
            wire::encode_envelope(SchemeId::Control, MessageKind::Manifest, &manifest);
        Self {
            holding,
            release_id,
            manifest,
            description,
            legacy_files: BTreeMap::new(),
            qdp: None,
        }
    }

    /// The mirror of a breach shard: it also takes QDP precompute orders (scheme QDP) and
    /// keeps up to `capacity` partial answers ([`pir_xor::qdp_shard`]). Only a mirror
    /// holding a whole engine takes them.
    pub fn with_qdp_partials(mut self, capacity: usize) -> Self {
        if matches!(self.holding, Holding::Whole(_)) {
            self.qdp = Some(QdpPartials {
                store: Mutex::new(ShardPartials::new(capacity)),
                precomputed: AtomicU64::new(0),
                fallback: AtomicU64::new(0),
            });
        }
        self
    }

    /// RAID-PIR answers finished from a stored QDP partial answer and answered by a full
    /// scan, since the start (`(0, 0)` without [`Mirror::with_qdp_partials`]).
    pub fn qdp_counts(&self) -> (u64, u64) {
        self.qdp.as_ref().map_or((0, 0), |q| {
            (
                q.precomputed.load(Ordering::Relaxed),
                q.fallback.load(Ordering::Relaxed),
            )
        })
    }

    /// The partial answers, locked.
    fn partials(q: &QdpPartials) -> MutexGuard<'_, ShardPartials> {
        // Every ShardPartials method leaves it consistent, so a poisoned lock is usable.
        q.store.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A chunk-only RAID-PIR mirror: it keeps only `held`'s chunks and refuses queries that
    /// need others, Chor and DPF queries included ([`HeldChunks::prepare`]).
    pub fn held(held: HeldChunks, release_id: [u8; RELEASE_ID_LEN], manifest: Vec<u8>) -> Self {
        Self::holding(Holding::Chunks(held), release_id, manifest)
    }

    /// The chunks a chunk-only mirror holds (`None`: the whole release).
    pub fn held_chunks(&self) -> Option<&HeldChunks> {
        match &self.holding {
            Holding::Chunks(held) => Some(held),
            Holding::Whole(_) => None,
        }
    }

    /// The release's shape (the one queries name), whatever part of it is held.
    pub fn shape(&self) -> DbShape {
        match &self.holding {
            Holding::Chunks(held) => held.shape(),
            // A shard's engine holds only its rows but answers queries for the whole database.
            Holding::Whole(engine) => engine.query_shape(),
        }
    }

    /// Bytes this mirror keeps in memory for its release: the database or the held chunks,
    /// plus the four-Russians tables.
    pub fn mapped_bytes(&self) -> usize {
        match &self.holding {
            Holding::Chunks(held) => held.mapped_bytes(),
            Holding::Whole(engine) => {
                engine.database().bytes().len() + engine.russians_table_bytes()
            }
        }
    }

    /// A mirror of `database` with the plain scan engine (no four-Russians tables).
    pub fn plain(database: Database, release_id: [u8; RELEASE_ID_LEN], manifest: Vec<u8>) -> Self {
        let options = EngineOptions {
            russians: pir_xor::Russians::Off,
            ..EngineOptions::default()
        };
        Self::new(
            Engine::new(database, options, &|_, _| {}),
            release_id,
            manifest,
        )
    }

    /// Puts the mirror behind the signed-batch service, signing with `key`.
    pub fn serve(self, key: SecretKey) -> MirrorService {
        SignedService::new(self, key)
    }

    /// Registers files for plain legacy downloads: `(name, byte offset, length)` in the database
    /// region. Fails if a range lies outside the region.
    pub fn with_legacy_files(
        mut self,
        files: impl IntoIterator<Item = (String, usize, usize)>,
    ) -> Result<Self, Error> {
        for (name, offset, len) in files {
            let total = match &self.holding {
                Holding::Whole(engine) => engine.database().shape().total_bytes(),
                Holding::Chunks(held) => {
                    return Err(Error::InvalidParameter(format!(
                        "a mirror holding only chunks {} cannot serve whole files ({name})",
                        held.set().describe()
                    )))
                }
            };
            if offset.checked_add(len).is_none_or(|end| end > total) {
                return Err(Error::InvalidParameter(format!(
                    "file {name} lies outside the database"
                )));
            }
            self.legacy_files.insert(name, (offset, len));
        }
        Ok(self)
    }

    /// The signed manifest bytes.
    pub fn manifest(&self) -> &[u8] {
        &self.manifest
    }

    /// The release this mirror serves.
    pub fn release_id(&self) -> &[u8; RELEASE_ID_LEN] {
        &self.release_id
    }

    /// The database being served (`None` for a chunk-only mirror: see [`Mirror::shape`] and
    /// [`Mirror::held_chunks`]).
    pub fn database(&self) -> Option<&Database> {
        self.engine().map(Engine::database)
    }

    /// The engine answering queries (`None` for a chunk-only mirror).
    pub fn engine(&self) -> Option<&Engine> {
        match &self.holding {
            Holding::Whole(engine) => Some(engine),
            Holding::Chunks(_) => None,
        }
    }
}

impl Backend for Mirror {
    type Prepared = MirrorPrepared;

    fn accepts(&self, scheme: SchemeId) -> bool {
        Self::SCHEMES.contains(&scheme) || (scheme == SchemeId::Qdp && self.qdp.is_some())
    }
    fn database_id(&self) -> &[u8; RELEASE_ID_LEN] {
        &self.release_id
    }
    fn stale_message(&self) -> String {
        format!(
            "this mirror serves release {}; fetch the current manifest",
            hex::encode(&self.release_id[..8])
        )
    }
    fn max_queries(&self) -> usize {
        MAX_BATCH
    }
    fn max_query_body(&self) -> usize {
        // A shard's queries are made for the whole database (`shape` is the query shape).
        pir_xor::serve::max_query_body(self.shape())
    }
    fn description(&self) -> &[u8] {
        &self.description
    }
    fn prepare(&self, scheme: SchemeId, query: &[u8]) -> Result<MirrorPrepared, Refusal> {
        match (&self.holding, &self.qdp) {
            // Not held here: the client asked the wrong mirror, it sent nothing malformed.
            (Holding::Chunks(held), _) => held
                .prepare(scheme, query)
                .map(MirrorPrepared::Query)
                .map_err(|e| match e {
                    Error::InvalidParameter(why) => Refusal::unsupported(why),
                    other => other.into(),
                }),
            (Holding::Whole(engine), Some(_)) if scheme == SchemeId::Qdp => {
                let (key, prepared) = engine.prepare_order(query)?;
                Ok(MirrorPrepared::Order(key, prepared))
            }
            (Holding::Whole(engine), Some(qdp)) if scheme == SchemeId::RaidPir => {
                // Taken even if the query then fails its checks: an entry is used at most
                // once (a replayed query scans in full, to the same bytes).
                let partial = Self::partials(qdp).take(query);
                let (prepared, counter) = match partial {
                    Some(partial) => (
                        MirrorPrepared::Online(partial, engine.prepare_online(query)?),
                        &qdp.precomputed,
                    ),
                    None => (
                        MirrorPrepared::Query(engine.prepare(scheme, query)?),
                        &qdp.fallback,
                    ),
                };
                counter.fetch_add(1, Ordering::Relaxed);
                Ok(prepared)
            }
            (Holding::Whole(engine), _) => {
                Ok(MirrorPrepared::Query(engine.prepare(scheme, query)?))
            }
        }
    }
    fn answer_batch(&self, prepared: Vec<MirrorPrepared>) -> Vec<Result<Vec<u8>, Refusal>> {
        let inner: Vec<&Prepared> = prepared
            .iter()
            .map(|p| match p {
                MirrorPrepared::Query(p)
                | MirrorPrepared::Order(_, p)
                | MirrorPrepared::Online(_, p) => p,
            })
            .collect();
        let answers: Vec<Vec<u8>> = match &self.holding {
            Holding::Chunks(held) => inner.iter().map(|p| held.answer(p)).collect(),
            // Orders and queries share the engine's passes.
            Holding::Whole(engine) => engine.answer_batch_refs(&inner),
        };
        prepared
            .into_iter()
            .zip(answers)
            .map(|(p, answer)| match p {
                MirrorPrepared::Query(_) => Ok(answer),
                MirrorPrepared::Order(key, _) => {
                    if let Some(qdp) = &self.qdp {
                        Self::partials(qdp).insert(key, answer);
                    }
                    Ok(Vec::new())
                }
                MirrorPrepared::Online(mut partial, _) => {
                    if partial.len() != answer.len() {
                        return Err(Refusal::internal(
                            "a stored QDP partial answer has another size",
                        ));
                    }
                    pir_kernels::xor_into(&mut partial, &answer);
                    Ok(partial)
                }
            })
            .collect()
    }
    fn gauges(&self) -> Vec<crate::metrics::Gauge> {
        let Some(qdp) = &self.qdp else {
            return Vec::new();
        };
        let (precomputed, fallback) = self.qdp_counts();
        vec![
            (
                "pir_qdp_shard_partials",
                "QDP partial answers this shard holds for seeds not yet queried.",
                Self::partials(qdp).len() as u64,
            ),
            (
                "pir_qdp_precomputed_answers",
                "RAID-PIR answers finished from a stored QDP partial answer (running total).",
                precomputed,
            ),
            (
                "pir_qdp_fallback_scans",
                "RAID-PIR answers scanned in full: no stored partial answer (running total).",
                fallback,
            ),
        ]
    }
    fn health(&self) -> String {
        let shape = self.shape();
        let chunks = match &self.holding {
            Holding::Chunks(held) => format!(
                " chunks={}",
                held.set()
                    .describe()
                    .replace(", ", ",")
                    .replace(" of ", "/")
            ),
            Holding::Whole(_) => String::new(),
        };
        format!(
            "ok release={} blocks={} block_size={}{chunks}\n",
            hex::encode(self.release_id),
            shape.block_count(),
            shape.block_size()
        )
    }
    fn legacy_file(&self, name: &str) -> Option<&[u8]> {
        let &(offset, len) = self.legacy_files.get(name)?;
        // Only a whole mirror registers legacy files (`with_legacy_files`).
        Some(&self.database()?.bytes()[offset..offset + len])
    }
    fn legacy_manifest(&self) -> Option<&[u8]> {
        Some(&self.manifest)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pir_core::{DbShape, MultiServerScheme};
    use rand::SeedableRng;

    use crate::Reply;
    use pir_core::protocol;
    use pir_core::wire::MessageKind;

    fn service() -> (MirrorService, SecretKey) {
        let shape = DbShape::new(20, 64).unwrap();
        let db = Database::random(shape, &mut rand_chacha::ChaCha20Rng::seed_from_u64(1));
        let key = SecretKey::generate().unwrap();
        let copy = SecretKey::from_pkcs8(key.pkcs8()).unwrap();
        (
            Mirror::plain(db, [5; 32], b"signed manifest".to_vec()).serve(copy),
            key,
        )
    }

    fn query(service: &MirrorService, index: usize) -> Vec<u8> {
        let chor = pir_xor::Chor::new(service.backend().shape(), 2).unwrap();
        let (queries, _) = chor
            .query(
                &[index],
                &mut rand_chacha::ChaCha20Rng::seed_from_u64(index as u64),
            )
            .unwrap();
        let body = protocol::encode_query_batch(
            &[5; 32],
            &[
                chor.encode_query(&queries[0]),
                chor.encode_query(&queries[1]),
            ],
        );
        wire::encode_envelope(SchemeId::Chor, MessageKind::Query, &body)
    }

    #[test]
    fn answers_are_signed_and_sized_independently_of_the_index() {
        let (service, key) = service();
        let mut sizes = std::collections::BTreeSet::new();
        for index in [0, 7, 18] {
            let request = query(&service, index);
            let reply = service.handle(&request);
            assert_eq!(reply.status, 200);
            let envelope = wire::decode_envelope(&reply.body, reply.body.len()).unwrap();
            let batch = protocol::decode_answer_batch(envelope.body, 64).unwrap();
            assert_eq!(batch.answers.len(), 2);
            let statement = pir_keys::answer_statement(&[5; 32], &request, batch.payload);
            key.public().verify(&statement, &batch.signature).unwrap();
            // The signature binds the request: another request does not verify.
            let other =
                pir_keys::answer_statement(&[5; 32], &query(&service, index + 1), batch.payload);
            assert!(key.public().verify(&other, &batch.signature).is_err());
            sizes.insert(reply.body.len());
        }
        assert_eq!(sizes.len(), 1);
        assert_eq!(service.metrics().queries(), 6);
    }

    #[test]
    fn refusals_are_error_envelopes_and_counted() {
        let (service, _) = service();
        let manifest = service.handle(&wire::encode_envelope(
            SchemeId::Control,
            MessageKind::ManifestRequest,
            &[],
        ));
        assert_eq!(manifest.status, 200);
        assert!(manifest.body.ends_with(b"signed manifest"));
        let cases = [
            wire::encode_envelope(SchemeId::Control, MessageKind::ManifestRequest, b"x"),
            wire::encode_envelope(SchemeId::Chor, MessageKind::Answer, b""),
            wire::encode_envelope(SchemeId::Control, MessageKind::Query, b""),
            b"PIRw".to_vec(),
            query(&service, 1)[..40].to_vec(),
        ];
        for request in &cases {
            let reply = service.handle(request);
            assert_eq!(reply.status, 400);
            let envelope = wire::decode_envelope(&reply.body, reply.body.len()).unwrap();
            assert_eq!(envelope.kind, MessageKind::Error);
            let (_, message) = wire::decode_error(envelope.body).unwrap();
            assert!(!message.is_empty());
        }
        assert_eq!(service.metrics().errors(), cases.len() as u64);
        assert!(service
            .metrics()
            .render()
            .contains(&format!("pir_errors_total {}", cases.len())));
        // And it still answers.
        assert_eq!(service.handle(&query(&service, 3)).status, 200);
    }

    #[test]
    fn a_batch_of_requests_gets_the_replies_each_gets_alone() {
        let (service, _) = service();
        let mut requests: Vec<Vec<u8>> =
            [0, 7, 18, 3].iter().map(|&i| query(&service, i)).collect();
        // A bad request in the middle of the batch only fails itself.
        requests.insert(2, b"PIRw garbage".to_vec());
        requests.push(wire::encode_envelope(
            SchemeId::Control,
            MessageKind::ManifestRequest,
            &[],
        ));
        let alone: Vec<Reply> = requests.iter().map(|r| service.handle(r)).collect();
        let refs: Vec<&[u8]> = requests.iter().map(|r| r.as_slice()).collect();
        let together = service.handle_many(&refs);
        assert_eq!(together, alone);
        assert_eq!(together[2].status, 400);
        assert!(together
            .iter()
            .enumerate()
            .all(|(i, r)| i == 2 || r.status == 200));
    }

    #[test]
    fn legacy_files_are_bounds_checked() {
        let shape = DbShape::new(20, 64).unwrap();
        let db = || Database::random(shape, &mut rand_chacha::ChaCha20Rng::seed_from_u64(1));
        let bytes = db().bytes()[64..164].to_vec();
        let mirror = Mirror::plain(db(), [5; 32], Vec::new())
            .with_legacy_files([("a".to_string(), 64, 100)])
            .unwrap();
        assert_eq!(mirror.legacy_file("a").unwrap(), &bytes[..]);
        assert!(mirror.legacy_file("b").is_none());
        assert!(Mirror::plain(db(), [5; 32], Vec::new())
            .with_legacy_files([("x".to_string(), 1200, 200)])
            .is_err());
    }
}
