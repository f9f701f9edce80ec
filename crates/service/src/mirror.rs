//! The sans-I/O mirror service: request bytes in, reply bytes out.
//!
//! One request is one [`pir_core::wire`] envelope: a manifest request, or a batch of queries of
//! one scheme ([`pir_core::protocol`]). Every length is checked against the database shape
//! before anything is allocated; a malformed request gets an error envelope and the service
//! keeps serving everyone else. Answers are signed with the mirror's key over the request and
//! the answer (upPIR, seed 000, section 4.2), so a client can prove a wrong answer.

use std::collections::BTreeMap;
use std::time::Instant;

use pir_core::protocol::{self, MAX_BATCH, RELEASE_ID_LEN};
use pir_core::wire::{self, ErrorCode, MessageKind};
use pir_core::{Database, Error, SchemeId};
use pir_keys::SecretKey;
use pir_xor::engine::{Engine, EngineOptions, Prepared};

use crate::{Handler, Metrics, Reply};

/// A mirror's state: the database, the signed manifest it serves, and its key.
pub struct Service {
    engine: Engine,
    release_id: [u8; RELEASE_ID_LEN],
    manifest: Vec<u8>,
    key: SecretKey,
    legacy_files: BTreeMap<String, (usize, usize)>,
    metrics: Metrics,
}

impl std::fmt::Debug for Service {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Service")
            .field("engine", &self.engine)
            .finish_non_exhaustive()
    }
}

impl Service {
    /// A service for `database` with the plain scan engine (no four-Russians tables),
    /// identified by `release_id` (the SHA-256 of `manifest`, the signed manifest bytes it
    /// hands to clients), signing with `key`.
    pub fn new(
        database: Database,
        release_id: [u8; 32],
        manifest: Vec<u8>,
        key: SecretKey,
    ) -> Self {
        let options = EngineOptions {
            russians: pir_xor::Russians::Off,
            ..EngineOptions::default()
        };
        Self::with_engine(
            Engine::new(database, options, &|_, _| {}),
            release_id,
            manifest,
            key,
        )
    }

    /// A service answering with `engine` (its database and precomputed tables).
    pub fn with_engine(
        engine: Engine,
        release_id: [u8; 32],
        manifest: Vec<u8>,
        key: SecretKey,
    ) -> Self {
        Self {
            engine,
            release_id,
            manifest,
            key,
            legacy_files: BTreeMap::new(),
            metrics: Metrics::default(),
        }
    }

    /// Registers files for plain legacy downloads: `(name, byte offset, length)` in the database
    /// region. Fails if a range lies outside the region.
    pub fn with_legacy_files(
        mut self,
        files: impl IntoIterator<Item = (String, usize, usize)>,
    ) -> Result<Self, Error> {
        let total = self.database().shape().total_bytes();
        for (name, offset, len) in files {
            if offset.checked_add(len).is_none_or(|end| end > total) {
                return Err(Error::InvalidParameter(format!(
                    "file {name} lies outside the database"
                )));
            }
            self.legacy_files.insert(name, (offset, len));
        }
        Ok(self)
    }

    /// The bytes of a legacy file, if registered.
    pub fn legacy_file(&self, name: &str) -> Option<&[u8]> {
        let &(offset, len) = self.legacy_files.get(name)?;
        Some(&self.database().bytes()[offset..offset + len])
    }

    /// The signed manifest bytes.
    pub fn manifest(&self) -> &[u8] {
        &self.manifest
    }

    /// The release this mirror serves.
    pub fn release_id(&self) -> &[u8; RELEASE_ID_LEN] {
        &self.release_id
    }

    /// The database being served.
    pub fn database(&self) -> &Database {
        self.engine.database()
    }

    /// The engine answering queries.
    pub fn engine(&self) -> &Engine {
        &self.engine
    }

    /// The counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Largest request envelope this service reads; anything bigger is refused unread.
    pub fn max_request_bytes(&self) -> usize {
        wire::HEADER_LEN
            + RELEASE_ID_LEN
            + 2
            + MAX_BATCH * (4 + pir_xor::serve::max_query_body(self.database().shape()))
    }

    /// A health line that does not touch the database.
    pub fn health(&self) -> String {
        let shape = self.database().shape();
        format!(
            "ok release={} blocks={} block_size={}\n",
            pir_core::hex::encode(&self.release_id),
            shape.block_count(),
            shape.block_size()
        )
    }

    /// Handles one request.
    pub fn handle(&self, request: &[u8]) -> Reply {
        self.handle_many(&[request])
            .pop()
            .unwrap_or_else(|| self.error_reply(ErrorCode::Internal, "no reply".into()))
    }

    /// Handles several requests at once: all their queries are answered in one pass over the
    /// database ([`Engine::answer_batch`]). Each reply is byte for byte the one
    /// [`Service::handle`] gives the request alone; a bad request gets its error reply and
    /// does not affect the others.
    pub fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        let started = Instant::now();
        let begun: Vec<Result<Begun, (ErrorCode, String)>> =
            requests.iter().map(|request| self.begin(request)).collect();
        let prepared: Vec<&Prepared> = begun
            .iter()
            .flat_map(|b| match b {
                Ok(Begun::Queries { prepared, .. }) => prepared.iter().collect(),
                _ => Vec::new(),
            })
            .collect();
        let mut answers = self.engine.answer_batch_refs(&prepared).into_iter();
        let mut replies = Vec::with_capacity(requests.len());
        for (request, begun) in requests.iter().zip(begun) {
            let (reply, queries) = match begun {
                Ok(Begun::Manifest) => (
                    Reply {
                        status: 200,
                        body: wire::encode_envelope(
                            SchemeId::Control,
                            MessageKind::Manifest,
                            &self.manifest,
                        ),
                    },
                    0,
                ),
                Ok(Begun::Queries { scheme, prepared }) => {
                    let bodies: Vec<Vec<u8>> = answers.by_ref().take(prepared.len()).collect();
                    let count = bodies.len();
                    (
                        Reply {
                            status: 200,
                            body: self.sign_answers(request, scheme, &bodies),
                        },
                        count,
                    )
                }
                Err((code, message)) => (self.error_reply(code, message), 0),
            };
            let micros = u64::try_from(started.elapsed().as_micros()).unwrap_or(u64::MAX);
            self.metrics.record(
                request.len(),
                reply.body.len(),
                queries,
                reply.status != 200,
                micros,
            );
            replies.push(reply);
        }
        replies
    }

    fn error_reply(&self, code: ErrorCode, message: String) -> Reply {
        let status = if code == ErrorCode::Internal {
            500
        } else {
            400
        };
        Reply {
            status,
            body: wire::encode_envelope(
                SchemeId::Control,
                MessageKind::Error,
                &wire::encode_error(code, &message),
            ),
        }
    }

    /// Decodes and checks one request, down to prepared queries.
    fn begin(&self, request: &[u8]) -> Result<Begun, (ErrorCode, String)> {
        let bad = |e: Error| (ErrorCode::BadRequest, e.to_string());
        let envelope = wire::decode_envelope(request, self.max_request_bytes()).map_err(bad)?;
        match envelope.kind {
            MessageKind::ManifestRequest => {
                if !envelope.body.is_empty() {
                    return Err(bad(Error::WrongLength(
                        "a manifest request has an empty body".into(),
                    )));
                }
                Ok(Begun::Manifest)
            }
            MessageKind::Query => {
                if !matches!(envelope.scheme, SchemeId::Chor | SchemeId::RaidPir) {
                    return Err((
                        ErrorCode::UnsupportedScheme,
                        format!("scheme {} is not served here", envelope.scheme.name()),
                    ));
                }
                let batch = protocol::decode_query_batch(envelope.body).map_err(bad)?;
                if batch.release_id != self.release_id {
                    return Err((
                        ErrorCode::WrongDatabase,
                        format!(
                            "this mirror serves release {}; fetch the current manifest",
                            pir_core::hex::encode(&self.release_id[..8])
                        ),
                    ));
                }
                let prepared = batch
                    .queries
                    .iter()
                    .map(|query| self.engine.prepare(envelope.scheme, query))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(|e| match e {
                        Error::DatabaseMismatch(_) => (ErrorCode::WrongDatabase, e.to_string()),
                        other => bad(other),
                    })?;
                Ok(Begun::Queries {
                    scheme: envelope.scheme,
                    prepared,
                })
            }
            other => Err(bad(Error::WrongKind {
                found: other as u8,
                expected: MessageKind::Query as u8,
            })),
        }
    }

    /// The signed answer envelope for `request`.
    fn sign_answers(&self, request: &[u8], scheme: SchemeId, answers: &[Vec<u8>]) -> Vec<u8> {
        let mut body = protocol::encode_answer_payload(&self.release_id, answers);
        let statement = pir_keys::answer_statement(&self.release_id, request, &body);
        body.extend_from_slice(&self.key.sign(&statement));
        wire::encode_envelope(scheme, MessageKind::Answer, &body)
    }
}

impl Handler for Service {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        Service::handle_many(self, requests)
    }
    fn max_request_bytes(&self) -> usize {
        Service::max_request_bytes(self)
    }
    fn health(&self) -> String {
        Service::health(self)
    }
    fn metrics(&self) -> &Metrics {
        Service::metrics(self)
    }
    fn legacy_file(&self, name: &str) -> Option<&[u8]> {
        Service::legacy_file(self, name)
    }
    fn legacy_manifest(&self) -> Option<&[u8]> {
        Some(self.manifest())
    }
}


/// A request after decoding: what is left to compute.
enum Begun {
    Manifest,
    Queries {
        scheme: SchemeId,
        prepared: Vec<Prepared>,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use pir_core::{DbShape, MultiServerScheme};
    use rand::SeedableRng;

    fn service() -> (Service, SecretKey) {
        let shape = DbShape::new(20, 64).unwrap();
        let db = Database::random(shape, &mut rand_chacha::ChaCha20Rng::seed_from_u64(1));
        let key = SecretKey::generate().unwrap();
        let copy = SecretKey::from_pkcs8(key.pkcs8()).unwrap();
        (
            Service::new(db, [5; 32], b"signed manifest".to_vec(), copy),
            key,
        )
    }

    fn query(service: &Service, index: usize) -> Vec<u8> {
        let chor = pir_xor::Chor::new(service.database().shape(), 2).unwrap();
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
        let (service, _) = service();
        let bytes = service.database().bytes()[64..164].to_vec();
        let service = service
            .with_legacy_files([("a".to_string(), 64, 100)])
            .unwrap();
        assert_eq!(service.legacy_file("a").unwrap(), &bytes[..]);
        assert!(service.legacy_file("b").is_none());
        let (service, _) = self::service();
        assert!(service
            .with_legacy_files([("x".to_string(), 1200, 200)])
            .is_err());
    }
}
