//! A client of one single-server PIR server (any scheme of `pir_lattice`, served by
//! `pir_service::lattice`).
//!
//! [`LatticeSession::open`] asks the server for its hint header (small: shape, seeds,
//! database version), then loads the hint from the cache directory if one is stored for this
//! server key and version, or downloads it (`GET /pir/v1/hint`) and stores it there.
//! [`LatticeSession::fetch`] sends one query per index in one request and checks the server's
//! signature over the request and the answers before decoding them.
//!
//! Privacy: each query is a fresh LWE encryption under the hint's public matrix; the server
//! cannot tell which index it selects (LWE assumption), and the sizes of the request and
//! reply depend only on the number of indices and on whether the request uploads keys.
//!
//! One-time keys (YPIR, YPIR+SP): the session's first request uploads the client's
//! key-switching keys, later ones name them by key id (516 KB less each). If the server
//! answers `UnknownKey` (expired, evicted, restarted), [`LatticeSession::fetch`] uploads them
//! again and retries once. The key id links this session's requests to each other, as the
//! session does anyway; it reveals nothing about the indices.
//!
//! The hint download is `envelope(scheme, Manifest, about_len u32 | about | hint message)`;
//! `about` is what the server's application says about the records (opaque here).

use std::path::{Path, PathBuf};

use pir_core::wire::{self, MessageKind};
use pir_core::SchemeId;
use pir_keys::PublicKey;
use pir_lattice::{HintHeader, Scheme, SingleClient};

use crate::exchange::{exchange, Call};
use crate::SessionError;

use crate::transport::{single_server_transport, HttpsTransport, Transport};

pub use pir_service::lattice::{parse_download, MAX_DOWNLOAD};

/// Most indices one request may carry (the server's limit).
pub const MAX_INDICES: usize = pir_service::lattice::MAX_QUERIES_PER_REQUEST;
/// Largest header-only reply accepted.
const MAX_HEADER_REPLY: usize = 4096;

fn bad(e: impl std::fmt::Display) -> SessionError {
    SessionError::bad_reply(0, e)
}

/// A session with one server: its hint, loaded or downloaded, and the transport (HTTPS pinned
/// to the server's key, or [`crate::LocalTransport`]).
pub struct LatticeSession<T = HttpsTransport> {
    transport: T,
    key: PublicKey,
    client: Box<dyn SingleClient>,
    header: HintHeader,
    about: Vec<u8>,
    from_cache: bool,
    hint_bytes: usize,
}

impl<T> std::fmt::Debug for LatticeSession<T> {
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
        hex::encode(key.0),
        hex::encode(version)
    ))
}

/// The default hint cache: `$XDG_CACHE_HOME/pir`, else `$HOME/.cache/pir`; `None` (no
/// cache, the hint is downloaded each time) when neither is an absolute path. A relative one
/// would put the cache wherever the client happens to run, so an empty or relative variable
/// counts as unset (as the XDG Base Directory specification says).
pub fn default_cache_dir() -> Option<PathBuf> {
    cache_dir_from(|name| std::env::var_os(name))
}

fn cache_dir_from(var: impl Fn(&str) -> Option<std::ffi::OsString>) -> Option<PathBuf> {
    let absolute = |name: &str| var(name).map(PathBuf::from).filter(|d| d.is_absolute());
    absolute("XDG_CACHE_HOME")
        .or_else(|| absolute("HOME").map(|home| home.join(".cache")))
        .map(|dir| dir.join("pir"))
}

fn scheme_of(id: SchemeId) -> Result<Scheme, SessionError> {
    Scheme::from_id(id).map_err(bad)
}

fn refusal(body: &[u8]) -> SessionError {
    match wire::decode_error(body) {
        Ok((code, message)) => SessionError::Refused {
            server: 0,
            code,
            message,
        },
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
    ) -> Result<LatticeSession, SessionError> {
        let transport = single_server_transport(&[(url.to_string(), key)])
            .map_err(SessionError::transport(0))?;
        LatticeSession::open_with(transport, key, cache_dir).await
    }

    /// [`LatticeSession::open`] for the database `id` of a server that serves several.
    pub async fn open_database(
        url: &str,
        key: PublicKey,
        id: [u8; 32],
        cache_dir: Option<&Path>,
    ) -> Result<LatticeSession, SessionError> {
        let transport = single_server_transport(&[(url.to_string(), key)])
            .map_err(SessionError::transport(0))?;
        LatticeSession::open_database_with(transport, key, Some(id), cache_dir).await
    }
}

impl<T: Transport> LatticeSession<T> {
    /// [`LatticeSession::open`] over any transport to the server (its position 0), whose
    /// answers must be signed by `key`.
    pub async fn open_with(
        transport: T,
        key: PublicKey,
        cache_dir: Option<&Path>,
    ) -> Result<Self, SessionError> {
        Self::open_database_with(transport, key, None, cache_dir).await
    }

    /// [`LatticeSession::open_with`] for the database `id` (its version) of a server that
    /// serves several; `None` is the server's default (newest) database.
    pub async fn open_database_with(
        transport: T,
        key: PublicKey,
        id: Option<[u8; 32]>,
        cache_dir: Option<&Path>,
    ) -> Result<Self, SessionError> {
        let request = wire::encode_envelope(
            SchemeId::Control,
            MessageKind::ManifestRequest,
            id.as_ref().map_or(&[][..], |id| &id[..]),
        );
        let reply = transport
            .exchange(0, request, MAX_HEADER_REPLY)
            .await
            .map_err(SessionError::transport(0))?;
        let envelope = wire::decode_envelope(&reply, MAX_HEADER_REPLY).map_err(bad)?;
        if envelope.kind == MessageKind::Error {
            return Err(refusal(envelope.body));
        }
        let scheme = scheme_of(envelope.scheme)?;
        let (announced, _) = pir_lattice::wire::decode_hint(&reply, scheme).map_err(bad)?;
        if id.is_some_and(|id| id != announced.version) {
            return Err(bad(
                "the server described another database than the one asked for",
            ));
        }
        let cached = cache_dir.map(|dir| cache_path(dir, &key, &announced.version));
        let mut cached_bytes = cached.as_ref().and_then(|path| std::fs::read(path).ok());
        loop {
            let from_cache = cached_bytes.is_some();
            let download = match cached_bytes.take() {
                Some(bytes) => bytes,
                None => {
                    let bytes = match &id {
                        Some(id) => transport.hint_of(0, id, MAX_DOWNLOAD).await,
                        None => transport.hint(0, MAX_DOWNLOAD).await,
                    }
                    .map_err(SessionError::transport(0))?;
                    if let Ok(envelope) = wire::decode_envelope(&bytes, MAX_HEADER_REPLY) {
                        if envelope.kind == MessageKind::Error {
                            return Err(refusal(envelope.body));
                        }
                    }
                    bytes
                }
            };
            let opened = parse_download(&download)
                .map_err(bad)
                .and_then(|(s, about, hint)| {
                    if s != scheme {
                        return Err(bad(
                            "the hint is for another scheme than the server announces",
                        ));
                    }
                    let client = pir_lattice::open_client(scheme, hint).map_err(bad)?;
                    if *client.header() != announced {
                        return Err(bad(
                            "the hint does not match the database the server announces",
                        ));
                    }
                    Ok((about.to_vec(), client))
                });
            let (about, client) = match opened {
                Ok(opened) => opened,
                // A cached hint that no longer fits (damaged, or cached before the server
                // laid the same database out anew, as an upgrade that changes a scheme's
                // layout does): download it again.
                Err(_) if from_cache => continue,
                Err(e) => return Err(e),
            };
            if let (Some(path), false) = (&cached, from_cache) {
                store(path, &download)?;
            }
            return Ok(Self {
                transport,
                key,
                header: *client.header(),
                about,
                client,
                from_cache,
                hint_bytes: download.len(),
            });
        }
    }

    /// The transport the session talks through.
    pub fn transport(&self) -> &T {
        &self.transport
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
    pub async fn fetch(&self, indices: &[u64]) -> Result<Fetched, SessionError> {
        if indices.is_empty() || indices.len() > MAX_INDICES {
            return Err(SessionError::Request(format!(
                "ask for 1 to {MAX_INDICES} records at once"
            )));
        }
        let records = self.header.params.records;
        if let Some(&index) = indices.iter().find(|&&i| i >= records) {
            return Err(SessionError::Request(format!(
                "record {index} does not exist: the database has {records} records (0 to {})",
                records - 1
            )));
        }
        // One re-upload: the server may have forgotten the keys this client uploaded.
        match self.fetch_once(indices).await {
            Err(e) if e.is_unknown_key() => {
                self.client.keys_lost();
                self.fetch_once(indices).await
            }
            other => other,
        }
    }

    /// One request for `indices` (checked by [`LatticeSession::fetch`]).
    async fn fetch_once(&self, indices: &[u64]) -> Result<Fetched, SessionError> {
        let mut rng = rand::rng();
        let mut states = Vec::with_capacity(indices.len());
        let mut queries = Vec::with_capacity(indices.len());
        self.client.begin_request();
        for &index in indices {
            let (state, query) = self
                .client
                .query(index, &mut rng)
                .map_err(|e| SessionError::Request(e.to_string()))?;
            states.push(state);
            queries.push(query);
        }
        let version = self.header.version;
        let scheme = self.header.params.scheme.id();
        let call = Call {
            server: 0,
            scheme,
            database_id: version,
            key: self.key,
            max_answer: wire::HEADER_LEN
                + pir_lattice::wire::answer_body_bytes(&self.header.params),
        };
        let exchanged = exchange(&self.transport, call, &queries)
            .await
            .map_err(|e| SessionError::from_exchange(0, e))?;
        let records = states
            .iter()
            .zip(&exchanged.answers)
            .map(|(state, answer)| self.client.decode(state, answer))
            .collect::<Result<Vec<_>, _>>()
            .map_err(bad)?;
        Ok(Fetched {
            records,
            request_bytes: exchanged.request.len(),
            reply_bytes: exchanged.reply.len(),
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
fn store(path: &Path, bytes: &[u8]) -> Result<(), SessionError> {
    let cache = |source| SessionError::Cache {
        path: path.to_path_buf(),
        source,
    };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(cache)?;
    }
    pir_fs::write_atomic_bytes(path, bytes).map_err(cache)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// One-time keys: the first fetch uploads them, the next names them (smaller request);
    /// when the server forgets them (an expiry of 0 here), `fetch` uploads them again and
    /// retries once, and the records still come back.
    #[test]
    fn a_forgotten_key_is_uploaded_again_and_the_fetch_succeeds() {
        let records: Vec<u8> = (0..32u32 * 12).map(|i| (i * 5 + 1) as u8).collect();
        let key = pir_keys::SecretKey::generate().unwrap();
        let public = key.public();
        let lattice = pir_service::Lattice::new(
            pir_service::lattice::LatticeDatabase {
                scheme: Scheme::YpirSp,
                records: &records,
                record_count: 32,
                record_bytes: 12,
                seeds: [[4; 16], [5; 16]],
                version: [6; 32],
                about: Vec::new(),
            },
            &mut |_, _| {},
        )
        .unwrap();
        let service = std::sync::Arc::new(lattice.serve(key));
        let transport = crate::LocalTransport::new(vec![service.clone()]);
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        runtime.block_on(async {
            let session = LatticeSession::open_with(transport, public, None)
                .await
                .unwrap();
            let first = session.fetch(&[3]).await.unwrap();
            let later = session.fetch(&[30]).await.unwrap();
            assert_eq!(first.records[0], &records[3 * 12..4 * 12]);
            assert_eq!(later.records[0], &records[30 * 12..31 * 12]);
            // Seven bytes per element mod q2, one ring element per key part.
            let keys = 7 * pir_lattice::params::ypir::key_parts() * pir_lattice::ring::RING_D;
            assert_eq!(first.request_bytes - later.request_bytes, keys);
            assert_eq!(first.reply_bytes, later.reply_bytes);
            service
                .backend()
                .set_key_policy(pir_lattice::KeyPolicy {
                    expiry: std::time::Duration::ZERO,
                    ..pir_lattice::KeyPolicy::default()
                })
                .unwrap();
            // Refused (the keys are gone), then uploaded again: the retry's request is the
            // first one's size.
            let again = session.fetch(&[7]).await.unwrap();
            assert_eq!(again.records[0], &records[7 * 12..8 * 12]);
            assert_eq!(again.request_bytes, first.request_bytes);
        });
    }

    /// A cached hint that does not fit what the server announces for the same database
    /// version (laid out anew by an upgraded server, or damaged) is downloaded again, not an
    /// error; the fresh download replaces it.
    #[test]
    fn a_cached_hint_that_no_longer_fits_is_downloaded_again() {
        let records: Vec<u8> = (0..64u32 * 8).map(|i| (i * 7 + 3) as u8).collect();
        let lattice = |count: u64| {
            pir_service::Lattice::new(
                pir_service::lattice::LatticeDatabase {
                    scheme: Scheme::DoublePir,
                    records: &records[..count as usize * 8],
                    record_count: count,
                    record_bytes: 8,
                    seeds: [[4; 16], [5; 16]],
                    version: [6; 32],
                    about: Vec::new(),
                },
                &mut |_, _| {},
            )
            .unwrap()
        };
        // Same version, another shape: what a layout change leaves in a client's cache.
        let other = lattice(40);
        let served = lattice(64);
        let key = pir_keys::SecretKey::generate().unwrap();
        let public = key.public();
        let dir = std::env::temp_dir().join(format!("pir-hint-cache-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = cache_path(&dir, &public, &[6; 32]);
        let fresh = served.download().to_vec();
        let service = std::sync::Arc::new(served.serve(key));
        let runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        for stale in [other.download().to_vec(), b"not a hint".to_vec()] {
            std::fs::write(&path, &stale).unwrap();
            runtime.block_on(async {
                let transport = crate::LocalTransport::new(vec![service.clone()]);
                let session = LatticeSession::open_with(transport, public, Some(&dir))
                    .await
                    .unwrap();
                assert!(!session.hint_from_cache());
                let got = session.fetch(&[50]).await.unwrap();
                assert_eq!(got.records[0], &records[50 * 8..51 * 8]);
                assert_eq!(std::fs::read(&path).unwrap(), fresh);
                // The next session takes the fresh copy from the cache.
                let transport = crate::LocalTransport::new(vec![service.clone()]);
                let again = LatticeSession::open_with(transport, public, Some(&dir))
                    .await
                    .unwrap();
                assert!(again.hint_from_cache());
            });
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn cache_files_are_named_by_key_and_version() {
        let key = PublicKey([7; 32]);
        let path = cache_path(Path::new("/c"), &key, &[1; 32]);
        assert!(path
            .to_string_lossy()
            .ends_with(&format!("{}.hint", "01".repeat(32))));
    }

    #[test]
    fn the_default_cache_is_absolute_or_none() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            cache_dir_from(move |name| {
                vars.iter()
                    .find(|(k, _)| *k == name)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            })
        };
        let dir = |s: &str| Some(PathBuf::from(s));
        assert_eq!(
            env(&[("XDG_CACHE_HOME", "/x"), ("HOME", "/h")]),
            dir("/x/pir")
        );
        assert_eq!(env(&[("HOME", "/h")]), dir("/h/.cache/pir"));
        assert_eq!(
            env(&[("XDG_CACHE_HOME", ""), ("HOME", "/h")]),
            dir("/h/.cache/pir")
        );
        assert_eq!(
            env(&[("XDG_CACHE_HOME", "c"), ("HOME", "/h")]),
            dir("/h/.cache/pir")
        );
        assert_eq!(
            env(&[("HOME", "")]),
            None,
            "not `.cache/pir` in the current directory"
        );
        assert_eq!(env(&[("HOME", "h")]), None);
        assert_eq!(env(&[]), None);
    }
}
