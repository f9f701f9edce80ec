//! The one signed-batch service every scheme plugs into.
//!
//! ```text
//! request  = envelope(scheme, Query, query batch)          (pir_core::protocol)
//!            query batch = database id [32] | count u16 | count x (len u32 | scheme query)
//!          | envelope(control or scheme, ManifestRequest, empty)
//! reply    = envelope(scheme, Answer, payload | signature)
//!            payload   = database id [32] | count u16 | count x (len u32 | scheme answer)
//!            signature = Ed25519 over pir_keys::answer_statement(database id, request, payload)
//!          | the backend's description (its manifest, hint header or info), for a
//!            ManifestRequest
//!          | envelope(control, Error, code | message)
//! ```
//!
//! [`SignedService::handle_many`] decodes each request's envelope, checks the batch and the
//! database id, has the [`Backend`] `prepare` each query (decoded and checked against the
//! parameters before anything is allocated), answers every prepared query of every request in
//! ONE [`Backend::answer_batch`] call (one pass over the database where the scheme allows), and
//! signs each reply. Each reply is byte for byte the one the request gets alone; a bad request
//! gets its error reply and does not affect the others. The signature lets a client prove a
//! wrong answer to anyone holding the database (upPIR, Cappos 2013, section 4.2).
//!
//! Privacy: nothing derived from a request is logged or stored; [`Metrics`] count requests,
//! queries, bytes and time only.

use std::time::Instant;

use bytes::Bytes;
use pir_core::protocol::{self, MAX_BATCH, RELEASE_ID_LEN};
use pir_core::wire::{self, ErrorCode, MessageKind};
use pir_core::{Error, SchemeId};
use pir_keys::SecretKey;

use crate::metrics::Gauge;
use crate::{framing, Handler, Metrics, Reply};

/// Length of the database id every query batch names (a release id, database version or
/// header digest: always a SHA-256 or a 32-byte digest).
pub const DATABASE_ID_LEN: usize = RELEASE_ID_LEN;

/// What a client is told when the server failed ([`ErrorCode::Internal`]).
pub const INTERNAL_MESSAGE: &str =
    "the server failed to answer (its operator's log says why); try again or another server";

/// Why a request or one of its queries is refused: the code and message of the error reply.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    /// The wire error code.
    pub code: ErrorCode,
    /// What the client should know (never anything derived from a query's contents).
    pub message: String,
}

impl Refusal {
    /// The peer sent bytes that do not decode or do not fit the parameters.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::BadRequest,
            message: message.into(),
        }
    }

    /// The query was made for another database.
    pub fn wrong_database(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::WrongDatabase,
            message: message.into(),
        }
    }

    /// The scheme or message is not served here.
    pub fn unsupported(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::UnsupportedScheme,
            message: message.into(),
        }
    }

    /// A part of the service is down (a shard with no live replica): the message, which
    /// names the part and never anything derived from a query, goes to the client.
    pub fn unavailable(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::Unavailable,
            message: message.into(),
        }
    }

    /// The server failed; the client should retry elsewhere. `message` goes to the server's
    /// log only (it may name the server's files); the client is told [`INTERNAL_MESSAGE`].
    pub fn internal(message: impl Into<String>) -> Self {
        Self {
            code: ErrorCode::Internal,
            message: message.into(),
        }
    }

    /// The error reply envelope. A server failure's own message is logged here and replaced
    /// by [`INTERNAL_MESSAGE`]: the cause (a file that cannot be written, ...) is for the
    /// operator, not for every client.
    pub fn reply(&self) -> Reply {
        let (status, message) = if self.code == ErrorCode::Internal {
            tracing::error!(cause = %self.message, "a request failed on the server");
            (500, INTERNAL_MESSAGE)
        } else if self.code == ErrorCode::Unavailable {
            tracing::warn!(cause = %self.message, "a request failed: a part is down");
            (503, self.message.as_str())
        } else {
            (400, self.message.as_str())
        };
        Reply {
            status,
            body: wire::encode_envelope(
                SchemeId::Control,
                MessageKind::Error,
                &wire::encode_error(self.code, message),
            ),
        }
    }
}

impl From<Error> for Refusal {
    /// A database mismatch tells the client to refresh, an unknown key id to upload its keys
    /// again; every other scheme error is the peer's bad bytes.
    fn from(error: Error) -> Self {
        match error {
            Error::DatabaseMismatch(_) => Self::wrong_database(error.to_string()),
            // The client uploads its keys again and retries (never names the key id).
            Error::UnknownKey(_) => Self {
                code: ErrorCode::UnknownKey,
                message: error.to_string(),
            },
            other => Self::bad_request(other.to_string()),
        }
    }
}

/// A scheme's server side, as the signed-batch service drives it.
///
/// Adding a scheme to the network means implementing this trait (and registering the scheme
/// in [`crate::registry`]); the service does the envelope, batch, id, signature and metrics.
pub trait Backend: Send + Sync + 'static {
    /// A query after [`Backend::prepare`]: decoded, checked, ready to answer.
    type Prepared: Send;

    /// Whether queries of `scheme` are answered here.
    fn accepts(&self, scheme: SchemeId) -> bool;
    /// The id every query batch must name.
    fn database_id(&self) -> &[u8; DATABASE_ID_LEN];
    /// What a client whose batch names another id is told (e.g. "fetch the manifest again").
    fn stale_message(&self) -> String;
    /// Most queries in one request (at most [`MAX_BATCH`]).
    fn max_queries(&self) -> usize;
    /// Longest query body the parameters allow.
    fn max_query_body(&self) -> usize;
    /// The complete reply envelope to a manifest request (a manifest, a hint header, an
    /// info message).
    fn description(&self) -> &[u8];
    /// Decodes and checks one query body against the parameters.
    fn prepare(&self, scheme: SchemeId, query: &[u8]) -> Result<Self::Prepared, Refusal>;
    /// Answers `prepared`, in one pass where the scheme allows; answer `i` belongs to query `i`.
    fn answer_batch(&self, prepared: Vec<Self::Prepared>) -> Vec<Result<Vec<u8>, Refusal>>;
    /// The `/health` line; must not touch the database.
    fn health(&self) -> String;
    /// Whether to take traffic (`/health` answers 503 when not): a front end with a shard
    /// that has no live replica is not.
    fn ready(&self) -> bool {
        true
    }
    /// More `/metrics` lines in Prometheus text format (labelled series, say a front end's
    /// per-shard ones); never anything derived from a query.
    fn metrics_text(&self) -> String {
        String::new()
    }
    /// Gauges for `/metrics` (queue depths and the like; never anything derived from a query).
    fn gauges(&self) -> Vec<Gauge> {
        Vec::new()
    }
    /// The offline download at `GET /pir/v1/hint`, if the scheme has one.
    fn hint(&self) -> Option<Bytes> {
        None
    }
    /// A file for the plain legacy listener, if registered.
    fn legacy_file(&self, _name: &str) -> Option<&[u8]> {
        None
    }
    /// The manifest for the plain legacy listener, if any.
    fn legacy_manifest(&self) -> Option<&[u8]> {
        None
    }
}

/// A [`Backend`] behind envelopes, batches, signatures and metrics.
pub struct SignedService<B> {
    backend: B,
    key: SecretKey,
    metrics: std::sync::Arc<Metrics>,
}

impl<B: std::fmt::Debug> std::fmt::Debug for SignedService<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SignedService")
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

/// A request after decoding: what is left to compute.
enum Begun {
    Describe,
    Queries { scheme: SchemeId, count: usize },
}

impl<B: Backend> SignedService<B> {
    /// Serves `backend`, signing answers with `key`.
    pub fn new(backend: B, key: SecretKey) -> Self {
        Self {
            backend,
            key,
            metrics: std::sync::Arc::new(Metrics::default()),
        }
    }

    /// Counts into `metrics` (shared with other services, such as the releases of one mirror)
    /// instead of counters of its own.
    pub fn with_metrics(mut self, metrics: std::sync::Arc<Metrics>) -> Self {
        self.metrics = metrics;
        self
    }

    /// The scheme backend.
    pub fn backend(&self) -> &B {
        &self.backend
    }

    /// The counters.
    pub fn metrics(&self) -> &Metrics {
        &self.metrics
    }

    /// Largest request envelope this service reads; anything bigger is refused unread.
    pub fn max_request_bytes(&self) -> usize {
        framing::request_bytes(self.max_queries(), self.backend.max_query_body())
    }

    fn max_queries(&self) -> usize {
        self.backend.max_queries().clamp(1, MAX_BATCH)
    }

    /// Handles one request.
    pub fn handle(&self, request: &[u8]) -> Reply {
        self.handle_many(&[request])
            .pop()
            .unwrap_or_else(|| Refusal::internal("no reply").reply())
    }

    /// Handles several requests at once: all their queries are answered by one
    /// [`Backend::answer_batch`]. Reply `i` is what request `i` gets alone.
    pub fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        let started = Instant::now();
        let mut prepared = Vec::new();
        let begun: Vec<Result<Begun, Refusal>> = requests
            .iter()
            .map(|request| self.begin(request, &mut prepared))
            .collect();
        let mut answers = self.backend.answer_batch(prepared).into_iter();
        let mut replies = Vec::with_capacity(requests.len());
        for (request, begun) in requests.iter().zip(begun) {
            let (reply, queries) = match begun {
                Ok(Begun::Describe) => (
                    Reply {
                        status: 200,
                        body: self.backend.description().to_vec(),
                    },
                    0,
                ),
                Ok(Begun::Queries { scheme, count }) => {
                    let mine: Result<Vec<Vec<u8>>, Refusal> =
                        answers.by_ref().take(count).collect();
                    match mine {
                        Ok(bodies) if bodies.len() == count => {
                            (self.sign(request, scheme, &bodies), count)
                        }
                        Ok(_) => (Refusal::internal("answers went missing").reply(), 0),
                        Err(refusal) => (refusal.reply(), 0),
                    }
                }
                Err(refusal) => (refusal.reply(), 0),
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

    /// Decodes and checks one request; its prepared queries are appended to `prepared` only
    /// if every one of them prepares.
    fn begin(&self, request: &[u8], prepared: &mut Vec<B::Prepared>) -> Result<Begun, Refusal> {
        let bad = |e: Error| Refusal::bad_request(e.to_string());
        let envelope =
            wire::decode_envelope(request, self.max_request_bytes()).map_err(|e| match e {
                Error::WrongScheme { found, .. } => self.unknown_scheme(found),
                other => bad(other),
            })?;
        let served = self.backend.accepts(envelope.scheme);
        match envelope.kind {
            MessageKind::ManifestRequest if envelope.scheme == SchemeId::Control || served => {
                if !envelope.body.is_empty() {
                    return Err(bad(Error::WrongLength(
                        "a manifest request has an empty body".into(),
                    )));
                }
                return Ok(Begun::Describe);
            }
            MessageKind::Query | MessageKind::ManifestRequest => {}
            other => {
                return Err(bad(Error::WrongKind {
                    found: other as u8,
                    expected: MessageKind::Query as u8,
                }))
            }
        }
        if !served {
            return Err(Refusal::unsupported(format!(
                "scheme {} is not served here",
                envelope.scheme.name()
            )));
        }
        let batch = protocol::decode_query_batch(envelope.body).map_err(bad)?;
        if batch.queries.len() > self.max_queries() {
            return Err(Refusal::bad_request(format!(
                "{} queries in one request; at most {}",
                batch.queries.len(),
                self.max_queries()
            )));
        }
        if &batch.release_id != self.backend.database_id() {
            return Err(Refusal::wrong_database(self.backend.stale_message()));
        }
        let mine = batch
            .queries
            .iter()
            .map(|query| self.backend.prepare(envelope.scheme, query))
            .collect::<Result<Vec<_>, _>>()?;
        let count = mine.len();
        prepared.extend(mine);
        Ok(Begun::Queries {
            scheme: envelope.scheme,
            count,
        })
    }

    /// The refusal of a scheme id this build does not know: it names the schemes served here
    /// (the decoder alone cannot know them).
    fn unknown_scheme(&self, found: u8) -> Refusal {
        let served: Vec<&str> = (0..=u8::MAX)
            .filter_map(|byte| SchemeId::from_byte(byte).ok())
            .filter(|&scheme| scheme != SchemeId::Control && self.backend.accepts(scheme))
            .map(SchemeId::name)
            .collect();
        Refusal::unsupported(format!(
            "unknown scheme id {found}; this server serves {}",
            served.join(", ")
        ))
    }

    /// The signed answer envelope for `request`.
    fn sign(&self, request: &[u8], scheme: SchemeId, answers: &[Vec<u8>]) -> Reply {
        let id = self.backend.database_id();
        let mut body = protocol::encode_answer_payload(id, answers);
        let statement = pir_keys::answer_statement(id, request, &body);
        body.extend_from_slice(&self.key.sign(&statement));
        Reply {
            status: 200,
            body: wire::encode_envelope(scheme, MessageKind::Answer, &body),
        }
    }
}

impl<B: Backend> Handler for SignedService<B> {
    fn handle_many(&self, requests: &[&[u8]]) -> Vec<Reply> {
        SignedService::handle_many(self, requests)
    }
    fn max_request_bytes(&self) -> usize {
        SignedService::max_request_bytes(self)
    }
    fn health(&self) -> String {
        self.backend.health()
    }
    fn ready(&self) -> bool {
        self.backend.ready()
    }
    fn metrics(&self) -> &Metrics {
        &self.metrics
    }
    fn render_metrics(&self) -> String {
        let mut text = self.metrics.render_with(&self.backend.gauges());
        text.push_str(&self.backend.metrics_text());
        text
    }
    fn hint(&self) -> Option<Bytes> {
        self.backend.hint()
    }
    fn legacy_file(&self, name: &str) -> Option<Bytes> {
        self.backend.legacy_file(name).map(Bytes::copy_from_slice)
    }
    fn legacy_manifest(&self) -> Option<Bytes> {
        self.backend.legacy_manifest().map(Bytes::copy_from_slice)
    }
}
