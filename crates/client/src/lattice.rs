//! A client of one single-server PIR server (SimplePIR or DoublePIR, `pir_server::lattice`).
//!
//! [`LatticeSession::open`] asks the server for its hint header (small: shape, seeds,
//! database version), then loads the hint from the cache directory if one is stored for this
//! server key and version, or downloads it (`GET /pir/v1/hint`) and stores it there.
//! [`LatticeSession::fetch`] sends one query per index in one request and checks the server's
//! signature over the request and the answers before decoding them.
//!
//! Privacy: each query is a fresh LWE encryption under the hint's public matrix; the server
//! cannot tell which index it selects (LWE assumption, 128-bit parameters), and the sizes of
//! the request and reply depend only on the number of indices.
//!
//! The hint download is `envelope(scheme, Manifest, about_len u32 | about | hint message)`;
//! `about` is what the server's application says about the records (opaque here).

use std::path::{Path, PathBuf};

use pir_core::protocol;
use pir_core::wire::{self, ErrorCode, MessageKind, Reader};
use pir_core::{Error, SchemeId};
use pir_keys::PublicKey;
use pir_lattice::{
    DoublePirClient, DoubleQueryState, HintHeader, Scheme, SimplePirClient, SimpleQueryState,
};

use crate::transport::{HttpsTransport, Transport, TransportError};

/// Most indices one request may carry (the server's `MAX_QUERIES_PER_REQUEST`).
pub const MAX_INDICES: usize = 16;
/// Largest hint download accepted: the lattice limit plus room for the envelope and `about`.
pub const MAX_DOWNLOAD: usize = pir_lattice::wire::MAX_HINT_BODY + (1 << 17);
/// Largest header-only reply accepted.
const MAX_HEADER_REPLY: usize = 4096;

/// Why a lattice fetch failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LatticeError {
    /// The server could not be reached, or TLS (pinned to its key) failed.
    #[error(transparent)]
    Transport(#[from] TransportError),
    /// The server refused the request.
    #[error("the server refused: {message}")]
    Refused {
        /// Its error code (`pir_core::wire::ErrorCode`).
        code: u16,
        /// Its message.
        message: String,
    },
    /// The server's reply is malformed, inconsistent or not signed by its key.
    #[error("bad reply from the server: {0}")]
    BadReply(String),
    /// The caller asked for something the database does not have.
    #[error("{0}")]
    Request(String),
    /// The hint cache could not be written.
    #[error("hint cache {path}: {source}")]
    Cache {
        /// The cache file.
        path: PathBuf,
        /// The OS error.
        source: std::io::Error,
    },
}

impl LatticeError {
    /// True if the server answered `WrongDatabase`: its database changed, open a new session.
    pub fn is_stale(&self) -> bool {
        matches!(self, LatticeError::Refused { code, .. } if *code == ErrorCode::WrongDatabase as u16)
    }
}

fn bad(e: impl std::fmt::Display) -> LatticeError {
    LatticeError::BadReply(e.to_string())
}

enum SchemeClient {
    Simple(SimplePirClient),
    Double(DoublePirClient),
}

enum QueryState {
    Simple(SimpleQueryState),
    Double(DoubleQueryState),
}

/// A session with one server: its hint, loaded or downloaded, and the pinned transport.
pub struct LatticeSession {
    transport: HttpsTransport,
    key: PublicKey,
    client: SchemeClient,
    header: HintHeader,
    about: Vec<u8>,
    from_cache: bool,
    hint_bytes: usize,
}

impl std::fmt::Debug for LatticeSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LatticeSession")
            .field("header", &self.header)
            .finish_non_exhaustive()
    }
}

/// Where the hint of `key`'s server at `version` is cached.
pub fn cache_path(dir: &Path, key: &PublicKey, version: &[u8; 32]) -> PathBuf {
    dir.join(format!(
        "{}-{}.hint",
        pir_core::hex::encode(&key.0),
        pir_core::hex::encode(version)
    ))
}

/// Splits a hint download into the scheme, `about` and the hint message.
pub fn parse_download(bytes: &[u8]) -> Result<(Scheme, &[u8], &[u8]), Error> {
    let envelope = wire::decode_envelope(bytes, MAX_DOWNLOAD)?;
    let scheme = scheme_of(envelope.scheme)?;
    if envelope.kind != MessageKind::Manifest {
        return Err(Error::WrongKind {
            found: envelope.kind as u8,
            expected: MessageKind::Manifest as u8,
        });
    }
    let mut r = Reader::new(envelope.body);
    let len = r.u32()? as usize;
    let about = r.take(len)?;
    let hint = r.take(r.remaining())?;
    Ok((scheme, about, hint))
}

fn scheme_of(id: SchemeId) -> Result<Scheme, Error> {
    match id {
        SchemeId::SimplePir => Ok(Scheme::SimplePir),
        SchemeId::DoublePir => Ok(Scheme::DoublePir),
        other => Err(Error::Malformed(format!(
            "{} is not a single-server scheme",
            other.name()
        ))),
    }
}

fn refusal(body: &[u8]) -> LatticeError {
    match wire::decode_error(body) {
        Ok((code, message)) => LatticeError::Refused { code, message },
        Err(e) => bad(e),
    }
}

impl LatticeSession {
    /// Connects to `url` (pinned to `key`), and loads the hint of the server's current
    /// database from `cache_dir` or downloads it (and stores it there).
    pub async fn open(
        url: &str,
        key: PublicKey,
        cache_dir: Option<&Path>,
    ) -> Result<LatticeSession, LatticeError> {
        let transport = HttpsTransport::new(&[(url.to_string(), key)])?;
        let request = wire::encode_envelope(SchemeId::Control, MessageKind::ManifestRequest, &[]);
        let reply = transport.exchange(0, request, MAX_HEADER_REPLY).await?;
        let envelope = wire::decode_envelope(&reply, MAX_HEADER_REPLY).map_err(bad)?;
        if envelope.kind == MessageKind::Error {
            return Err(refusal(envelope.body));
        }
        let scheme = scheme_of(envelope.scheme).map_err(bad)?;
        let (announced, _) = pir_lattice::wire::decode_hint(&reply, scheme).map_err(bad)?;
        let cached = cache_dir.map(|dir| cache_path(dir, &key, &announced.version));
        let mut from_cache = false;
        let mut download = None;
        if let Some(path) = &cached {
            if let Ok(bytes) = std::fs::read(path) {
                from_cache = true;
                download = Some(bytes);
            }
        }
        let download = match download {
            Some(bytes) => bytes,
            None => {
                let bytes = transport.download(0, "/pir/v1/hint", MAX_DOWNLOAD).await?;
                if let Ok(envelope) = wire::decode_envelope(&bytes, MAX_HEADER_REPLY) {
                    if envelope.kind == MessageKind::Error {
                        return Err(refusal(envelope.body));
                    }
                }
                bytes
            }
        };
        let (hint_scheme, about, hint) = parse_download(&download).map_err(bad)?;
        if hint_scheme != scheme {
            return Err(bad(
                "the hint is for another scheme than the server announces",
            ));
        }
        let client = match scheme {
            Scheme::SimplePir => SchemeClient::Simple(SimplePirClient::new(hint).map_err(bad)?),
            Scheme::DoublePir => SchemeClient::Double(DoublePirClient::new(hint).map_err(bad)?),
        };
        let header = match &client {
            SchemeClient::Simple(c) => *c.header(),
            SchemeClient::Double(c) => *c.header(),
        };
        if header != announced {
            return Err(bad(
                "the hint does not match the database the server announces",
            ));
        }
        if let (Some(path), false) = (&cached, from_cache) {
            store(path, &download)?;
        }
        Ok(LatticeSession {
            transport,
            key,
            header,
            about: about.to_vec(),
            client,
            from_cache,
            hint_bytes: download.len(),
        })
    }

    /// The hint header: scheme, shape and database version.
    pub fn header(&self) -> &HintHeader {
        &self.header
    }

    /// What the server's application says about its records.
    pub fn about(&self) -> &[u8] {
        &self.about
    }

    /// Whether the hint came from the cache (no download).
    pub fn hint_from_cache(&self) -> bool {
        self.from_cache
    }

    /// Bytes of the hint download.
    pub fn hint_bytes(&self) -> usize {
        self.hint_bytes
    }

    /// Fetches records `indices` (1 to [`MAX_INDICES`]) in one request; returns each record
    /// and the request and reply sizes.
    pub async fn fetch(&self, indices: &[u64]) -> Result<Fetched, LatticeError> {
        if indices.is_empty() || indices.len() > MAX_INDICES {
            return Err(LatticeError::Request(format!(
                "ask for 1 to {MAX_INDICES} records at once"
            )));
        }
        let records = self.header.params.records;
        if let Some(&index) = indices.iter().find(|&&i| i >= records) {
            return Err(LatticeError::Request(format!(
                "record {index} does not exist: the database has {records} records (0 to {})",
                records - 1
            )));
        }
        let mut rng = rand::rng();
        let mut states = Vec::with_capacity(indices.len());
        let mut queries = Vec::with_capacity(indices.len());
        for &index in indices {
            let (state, query) = match &self.client {
                SchemeClient::Simple(c) => {
                    let (s, q) = c
                        .query(index, &mut rng)
                        .map_err(|e| LatticeError::Request(e.to_string()))?;
                    (QueryState::Simple(s), q)
                }
                SchemeClient::Double(c) => {
                    let (s, q) = c
                        .query(index, &mut rng)
                        .map_err(|e| LatticeError::Request(e.to_string()))?;
                    (QueryState::Double(s), q)
                }
            };
            states.push(state);
            queries.push(query);
        }
        let version = self.header.version;
        let scheme = self.header.params.scheme.id();
        let body = protocol::encode_query_batch(&version, &queries);
        let request = wire::encode_envelope(scheme, MessageKind::Query, &body);
        let answer_max =
            wire::HEADER_LEN + 4 * pir_lattice::wire::answer_words(&self.header.params);
        let reply_max = wire::HEADER_LEN
            + protocol::RELEASE_ID_LEN
            + 2
            + indices.len() * (4 + answer_max)
            + protocol::SIGNATURE_LEN;
        let request_bytes = request.len();
        let reply = self
            .transport
            .exchange(0, request.clone(), reply_max)
            .await?;
        let envelope = wire::decode_envelope(&reply, reply_max).map_err(bad)?;
        match envelope.kind {
            MessageKind::Answer if envelope.scheme == scheme => {}
            MessageKind::Error => return Err(refusal(envelope.body)),
            other => return Err(bad(format!("unexpected reply kind {other:?}"))),
        }
        let batch = protocol::decode_answer_batch(envelope.body, answer_max).map_err(bad)?;
        let statement = pir_keys::answer_statement(&version, &request, batch.payload);
        self.key
            .verify(&statement, &batch.signature)
            .map_err(|_| bad("the answers are not signed by the server's key"))?;
        if batch.release_id != version || batch.answers.len() != indices.len() {
            return Err(bad("the answers do not match the request"));
        }
        let records = states
            .iter()
            .zip(&batch.answers)
            .map(|(state, answer)| match (&self.client, state) {
                (SchemeClient::Simple(c), QueryState::Simple(s)) => c.decode(s, answer),
                (SchemeClient::Double(c), QueryState::Double(s)) => c.decode(s, answer),
                _ => Err(Error::InvalidParameter(
                    "query state of another scheme".into(),
                )),
            })
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        Ok(Fetched {
            records,
            request_bytes,
            reply_bytes: reply.len(),
        })
    }
}

/// What [`LatticeSession::fetch`] returns.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Fetched {
    /// The records, in the order asked.
    pub records: Vec<Vec<u8>>,
    /// Bytes sent.
    pub request_bytes: usize,
    /// Bytes received.
    pub reply_bytes: usize,
}

/// Writes the hint cache file atomically.
fn store(path: &Path, bytes: &[u8]) -> Result<(), LatticeError> {
    let cache = |source| LatticeError::Cache {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(cache)?;
    }
    let temp = path.with_extension(format!("partial-{}", std::process::id()));
    std::fs::write(&temp, bytes)
        .and_then(|()| std::fs::rename(&temp, path))
        .map_err(|e| {
            let _ = std::fs::remove_file(&temp);
            cache(e)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn downloads_are_parsed_and_checked() {
        let mut body = 3u32.to_le_bytes().to_vec();
        body.extend_from_slice(b"abcHINT");
        let bytes = wire::encode_envelope(SchemeId::DoublePir, MessageKind::Manifest, &body);
        let (scheme, about, hint) = parse_download(&bytes).unwrap();
        assert_eq!(
            (scheme, about, hint),
            (Scheme::DoublePir, &b"abc"[..], &b"HINT"[..])
        );
        let chor = wire::encode_envelope(SchemeId::Chor, MessageKind::Manifest, &body);
        assert!(parse_download(&chor).is_err());
        let mut long = 99u32.to_le_bytes().to_vec();
        long.extend_from_slice(b"abc");
        let truncated = wire::encode_envelope(SchemeId::SimplePir, MessageKind::Manifest, &long);
        assert!(parse_download(&truncated).is_err());
        let key = PublicKey([7; 32]);
        let path = cache_path(Path::new("/c"), &key, &[1; 32]);
        assert!(path
            .to_string_lossy()
            .ends_with(&format!("{}.hint", "01".repeat(32))));
    }
}
