//! The sans-I/O single-server service: SimplePIR or DoublePIR ([`pir_lattice`]) behind the
//! same request/reply envelopes and runtime as the mirrors.
//!
//! Unlike the mirrors, privacy does not rest on servers not colluding: a query is an LWE
//! ciphertext, pseudorandom to the server, and the server's work and reply size depend only
//! on the database shape. The price is the hint every client downloads once per database
//! version, and more work per query.
//!
//! ```text
//! GET /pir/v1/hint (offline download; see crate::runtime)
//!   envelope(scheme, Manifest, body)
//!   body        = about_len u32 | about | hint
//!   about       at most MAX_ABOUT_BYTES, opaque here: what the application says about the
//!               records (pir-records puts its record/key-value layout there)
//!   hint        the pir_lattice::wire hint message (it carries the database version)
//!
//! POST /pir/v1
//!   envelope(control or scheme, ManifestRequest, empty)
//!                                             -> the header-only hint message (kind Manifest):
//!                                                a client compares its version with its
//!                                                cached hint's before downloading again
//!   envelope(scheme, Query, query batch)       -> envelope(scheme, Answer, payload | signature)
//!     query batch = pir_core::protocol query batch: release id = the database version,
//!                   1..=MAX_QUERIES_PER_REQUEST pir_lattice::wire query messages
//!     payload     = pir_core::protocol answer payload (version, one lattice answer each)
//!     signature   = Ed25519 over pir_keys::answer_statement(version, request, payload)
//! ```
//!
//! Answers are signed with the server key, like the mirrors' (upPIR, seed 000, section 4.2),
//! on top of TLS pinned to the same key; the hint and header travel over that pinned TLS.
//! A stale version gets `WrongDatabase`, so the client fetches the hint again.

use std::time::Instant;

use bytes::Bytes;
use pir_core::protocol::{self, RELEASE_ID_LEN};
use pir_core::wire::{self, ErrorCode, MessageKind, Writer};
use pir_core::{Error, SchemeId};
use pir_keys::SecretKey;
use pir_lattice::{DbVersion, DoublePirServer, HintHeader, Params, Scheme, Seed, SimplePirServer};

use crate::Handler;
use crate::{Metrics, Reply};

/// Most lattice queries in one request: a key-value lookup needs two, a few records more.
/// Bounds the work and the request size one client can ask for at once.
pub const MAX_QUERIES_PER_REQUEST: usize = 16;
/// Largest application description carried next to the hint.
pub const MAX_ABOUT_BYTES: usize = 64 * 1024;

/// The lattice server of one scheme.
#[derive(Debug)]
enum LatticeServer {
    Simple(SimplePirServer),
    Double(DoublePirServer),
}

impl LatticeServer {
    fn answer_batch(&self, queries: &[&[u8]]) -> Vec<Result<Vec<u8>, Error>> {
        match self {
            LatticeServer::Simple(server) => server.answer_batch(queries),
            LatticeServer::Double(server) => server.answer_batch(queries),
        }
    }
}

/// What a lattice service is built from.
#[derive(Debug, Clone)]
pub struct LatticeDatabase<'a> {
    /// SimplePIR or DoublePIR.
    pub scheme: Scheme,
    /// The records, back to back (`records × record_bytes` bytes).
    pub records: &'a [u8],
    /// Number of records.
    pub record_count: u64,
    /// Bytes per record.
    pub record_bytes: usize,
    /// Seeds of the public matrices (`A`, and `A2` for DoublePIR), kept with the database so
    /// a restart gives the same hint.
    pub seeds: [Seed; 2],
    /// The database version (a digest of the records, the seeds and the scheme).
    pub version: DbVersion,
    /// Served next to the hint, opaque here (at most [`MAX_ABOUT_BYTES`]).
    pub about: Vec<u8>,
}

/// A single-server PIR service: the packed database, the hint download, and the key that
/// signs answers.
pub struct LatticeService {
    server: LatticeServer,
    header: HintHeader,
    header_message: Vec<u8>,
    download: Bytes,
    key: SecretKey,
    metrics: Metrics,
    query_bytes: usize,
}

impl std::fmt::Debug for LatticeService {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatticeService")
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

impl LatticeService {
    /// Lays the records out, computes the hint (`progress(done, total)` follows it: this is
    /// the slow part, one pass of `n = 1024` multiply-adds per database entry) and prepares
    /// the download.
    pub fn new(
        database: LatticeDatabase<'_>,
        key: SecretKey,
        progress: &mut dyn FnMut(u64, u64),
    ) -> Result<Self, Error> {
        if database.about.len() > MAX_ABOUT_BYTES {
            return Err(Error::InvalidParameter(format!(
                "the database description is {} bytes; at most {MAX_ABOUT_BYTES}",
                database.about.len()
            )));
        }
        let record_bits = u32::try_from(database.record_bytes)
            .ok()
            .and_then(|b| b.checked_mul(8))
            .ok_or_else(|| Error::InvalidParameter("records are too large".into()))?;
        let params = Params::new(database.scheme, database.record_count, record_bits)?;
        let (server, hint) = match database.scheme {
            Scheme::SimplePir => {
                let (server, hint) = SimplePirServer::new(
                    params,
                    database.records,
                    database.seeds[0],
                    database.version,
                    progress,
                )?;
                (LatticeServer::Simple(server), hint)
            }
            Scheme::DoublePir => {
                let (server, hint) = DoublePirServer::new(
                    params,
                    database.records,
                    database.seeds,
                    database.version,
                    progress,
                )?;
                (LatticeServer::Double(server), hint)
            }
        };
        let header = match &server {
            LatticeServer::Simple(s) => *s.header(),
            LatticeServer::Double(s) => *s.header(),
        };
        let mut body = Writer::with_capacity(4 + database.about.len() + hint.len());
        body.u32(database.about.len() as u32);
        body.bytes(&database.about);
        body.bytes(&hint);
        let download = wire::encode_envelope(
            params.scheme.id(),
            MessageKind::Manifest,
            &body.into_bytes(),
        );
        Ok(Self {
            server,
            header_message: header.encode(),
            header,
            download: Bytes::from(download),
            key,
            metrics: Metrics::default(),
            query_bytes: wire::HEADER_LEN
                + pir_lattice::wire::VERSION_LEN
                + 4 * pir_lattice::wire::query_words(&params),
        })
    }

    /// The hint header: shape, seeds and database version.
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// The hint download (what `GET /pir/v1/hint` returns).
    pub fn download(&self) -> &[u8] {
        &self.download
    }

    /// Bytes of one query message for this database.
    pub fn query_bytes(&self) -> usize {
        self.query_bytes
    }

    fn scheme_id(&self) -> SchemeId {
        self.header.params.scheme.id()
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

    /// Decodes one request down to its lattice query messages (not yet checked: the scheme
    /// decoders check them in `answer_batch`).
    fn begin<'a>(&self, request: &'a [u8]) -> Result<Begun<'a>, (ErrorCode, String)> {
        let bad = |e: Error| (ErrorCode::BadRequest, e.to_string());
        let envelope = wire::decode_envelope(request, self.max_request_bytes()).map_err(bad)?;
        let header_request =
            envelope.kind == MessageKind::ManifestRequest && envelope.scheme == SchemeId::Control;
        if envelope.scheme != self.scheme_id() && !header_request {
            return Err((
                ErrorCode::UnsupportedScheme,
                format!(
                    "this server answers {} queries, not {}",
                    self.scheme_id().name(),
                    envelope.scheme.name()
                ),
            ));
        }
        match envelope.kind {
            MessageKind::ManifestRequest if envelope.body.is_empty() => Ok(Begun::Header),
            MessageKind::Query => {
                let batch = protocol::decode_query_batch(envelope.body).map_err(bad)?;
                if batch.queries.len() > MAX_QUERIES_PER_REQUEST {
                    return Err(bad(Error::Malformed(format!(
                        "{} queries in one request; at most {MAX_QUERIES_PER_REQUEST}",
                        batch.queries.len()
                    ))));
                }
                if batch.release_id != self.header.version {
                    return Err((
                        ErrorCode::WrongDatabase,
                        "the database changed: download the hint again".into(),
                    ));
                }
                Ok(Begun::Queries(batch.queries))
            }
            other => Err(bad(Error::WrongKind {
                found: other as u8,
                expected: MessageKind::Query as u8,
            })),
        }
    }

    /// Handles requests together: every query of every request in one `answer_batch` (one
    /// pass over the database per group of kernel batch width). Each reply is the one the
    /// request gets alone; a bad request or query fails only its own request.
    pub fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        let started = Instant::now();
        let begun: Vec<Result<Begun<'_>, (ErrorCode, String)>> =
            requests.iter().map(|r| self.begin(r)).collect();
        let all: Vec<&[u8]> = begun
            .iter()
            .flat_map(|b| match b {
                Ok(Begun::Queries(queries)) => queries.as_slice(),
                _ => &[],
            })
            .copied()
            .collect();
        let mut answers = self.server.answer_batch(&all).into_iter();
        let mut replies = Vec::with_capacity(requests.len());
        for (request, begun) in requests.iter().zip(begun) {
            let (reply, queries) = match begun {
                Ok(Begun::Header) => (
                    Reply {
                        status: 200,
                        body: self.header_message.clone(),
                    },
                    0,
                ),
                Ok(Begun::Queries(queries)) => {
                    let mine: Vec<Result<Vec<u8>, Error>> =
                        answers.by_ref().take(queries.len()).collect();
                    match mine.into_iter().collect::<Result<Vec<_>, _>>() {
                        Ok(bodies) if bodies.len() == queries.len() => {
                            (self.sign_answers(request, &bodies), bodies.len())
                        }
                        Ok(_) => (
                            self.error_reply(ErrorCode::Internal, "answers went missing".into()),
                            0,
                        ),
                        Err(Error::DatabaseMismatch(message)) => {
                            (self.error_reply(ErrorCode::WrongDatabase, message), 0)
                        }
                        Err(e) => (self.error_reply(ErrorCode::BadRequest, e.to_string()), 0),
                    }
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

    /// The signed answer envelope for `request`.
    fn sign_answers(&self, request: &[u8], answers: &[Vec<u8>]) -> Reply {
        let version: &[u8; RELEASE_ID_LEN] = &self.header.version;
        let mut body = protocol::encode_answer_payload(version, answers);
        let statement = pir_keys::answer_statement(version, request, &body);
        body.extend_from_slice(&self.key.sign(&statement));
        Reply {
            status: 200,
            body: wire::encode_envelope(self.scheme_id(), MessageKind::Answer, &body),
        }
    }
}

/// A request after decoding.
enum Begun<'a> {
    Header,
    Queries(Vec<&'a [u8]>),
}

impl Handler for LatticeService {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        LatticeService::handle_many(self, requests)
    }

    fn max_request_bytes(&self) -> usize {
        wire::HEADER_LEN + RELEASE_ID_LEN + 2 + MAX_QUERIES_PER_REQUEST * (4 + self.query_bytes)
    }

    fn health(&self) -> String {
        let p = &self.header.params;
        format!(
            "ok scheme={} version={} records={} record_bits={} matrix={}x{}\n",
            self.scheme_id().name(),
            pir_core::hex::encode(&self.header.version),
            p.records,
            p.record_bits,
            p.rows,
            p.columns
        )
    }

    fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    fn hint(&self) -> Option<Bytes> {
        Some(self.download.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pir_lattice::SimplePirClient;
    use rand::SeedableRng;

    fn service(scheme: Scheme) -> (LatticeService, Vec<u8>, SecretKey) {
        let records: Vec<u8> = (0..64u32 * 40).map(|i| (i * 7 + 3) as u8).collect();
        let key = SecretKey::generate().unwrap();
        let copy = SecretKey::from_pkcs8(key.pkcs8()).unwrap();
        let database = LatticeDatabase {
            scheme,
            records: &records,
            record_count: 64,
            record_bytes: 40,
            seeds: [[1; 16], [2; 16]],
            version: [9; 32],
            about: b"about".to_vec(),
        };
        let service = LatticeService::new(database, copy, &mut |_, _| {}).unwrap();
        (service, records, key)
    }

    fn hint_of(service: &LatticeService) -> Vec<u8> {
        let envelope = wire::decode_envelope(service.download(), usize::MAX >> 1).unwrap();
        let body = envelope.body;
        let len = u32::from_le_bytes(body[..4].try_into().unwrap()) as usize;
        assert_eq!(&body[4..4 + len], b"about");
        body[4 + len..].to_vec()
    }

    fn request(version: &[u8; 32], queries: &[Vec<u8>]) -> Vec<u8> {
        let body = protocol::encode_query_batch(version, queries);
        wire::encode_envelope(SchemeId::SimplePir, MessageKind::Query, &body)
    }

    #[test]
    fn batched_requests_are_answered_signed_and_decodable() {
        let (service, records, key) = service(Scheme::SimplePir);
        let client = SimplePirClient::new(&hint_of(&service)).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(5);
        let mut states = Vec::new();
        let mut requests = Vec::new();
        for index in [0u64, 17, 63] {
            let (state, q1) = client.query(index, &mut rng).unwrap();
            let (_, q2) = client.query(1, &mut rng).unwrap();
            states.push((index, state));
            requests.push(request(&[9; 32], &[q1, q2]));
        }
        requests.insert(1, b"PIRw nonsense".to_vec());
        let refs: Vec<&[u8]> = requests.iter().map(Vec::as_slice).collect();
        let replies = service.handle_many(&refs);
        assert_eq!(replies[1].status, 400);
        let good: Vec<&Reply> = replies.iter().filter(|r| r.status == 200).collect();
        assert_eq!(good.len(), 3);
        let sizes: std::collections::BTreeSet<usize> = good.iter().map(|r| r.body.len()).collect();
        assert_eq!(sizes.len(), 1, "reply size does not depend on the index");
        let good_requests = [&requests[0], &requests[2], &requests[3]];
        for ((reply, request), (index, state)) in good.iter().zip(good_requests).zip(&states) {
            let envelope = wire::decode_envelope(&reply.body, reply.body.len()).unwrap();
            let batch = protocol::decode_answer_batch(envelope.body, 1 << 20).unwrap();
            let statement = pir_keys::answer_statement(&[9; 32], request, batch.payload);
            key.public().verify(&statement, &batch.signature).unwrap();
            let record = client.decode(state, batch.answers[0]).unwrap();
            let i = *index as usize;
            assert_eq!(record, &records[i * 40..(i + 1) * 40]);
        }
        assert_eq!(service.metrics().queries(), 6);
    }

    #[test]
    fn refusals_are_error_envelopes_and_the_service_keeps_answering() {
        let (service, _, _) = service(Scheme::DoublePir);
        let header = service.handle_many(&[&wire::encode_envelope(
            SchemeId::Control,
            MessageKind::ManifestRequest,
            &[],
        )]);
        let (h, matrix) =
            pir_lattice::wire::decode_hint(&header[0].body, Scheme::DoublePir).unwrap();
        assert_eq!((h.version, matrix), ([9; 32], None));
        let stale = request(&[8; 32], &[vec![1, 2, 3]]);
        let double = |body: &[u8]| {
            let mut bytes = body.to_vec();
            bytes[6] = SchemeId::DoublePir as u8;
            bytes
        };
        let cases = [
            (double(&stale), ErrorCode::WrongDatabase),
            (
                request(&[9; 32], &[vec![1, 2, 3]]),
                ErrorCode::UnsupportedScheme,
            ),
            (
                double(&request(&[9; 32], &[vec![1, 2, 3]])),
                ErrorCode::BadRequest,
            ),
            (b"garbage".to_vec(), ErrorCode::BadRequest),
        ];
        for (bytes, code) in &cases {
            let reply = &service.handle_many(&[bytes])[0];
            assert_eq!(reply.status, 400);
            let envelope = wire::decode_envelope(&reply.body, reply.body.len()).unwrap();
            assert_eq!(wire::decode_error(envelope.body).unwrap().0, *code as u16);
        }
        assert_eq!(service.metrics().errors(), cases.len() as u64);
        assert!(Handler::health(&service).contains("scheme=doublepir"));
    }
}
