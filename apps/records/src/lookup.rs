//! Serving a records database and looking a record or a key up privately: what `pir serve`
//! and `pir get` run, as a library.
//!
//! [`lattice_database`] describes a database to the single-server service (its header rides
//! next to the hint, so clients learn the layout); [`connect`] opens a session (hint from the
//! cache or downloaded) and decodes that header; [`lookup`] fetches a record by number, or a
//! key's two cuckoo candidates in one request (the server sees the same for every key,
//! present or not).
//!
//! Privacy: [`privacy`], from the scheme registry.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use pir_client::{LatticeSession, LocalTransport};
//! use pir_records::lookup::{lattice_database, lookup, Query};
//! use pir_records::{build_key_values, DbHeader};
//!
//! // A key-value database, served with SimplePIR by a server in this process.
//! let pairs = vec![(b"alice".to_vec(), b"1 Main St".to_vec()), (b"bob".to_vec(), b"2 Side Rd".to_vec())];
//! let (header, payload) = build_key_values(&pairs, &mut rand::rng())?;
//! let key = pir_keys::SecretKey::generate()?;
//! let public = key.public();
//! let database = lattice_database(&header, &payload, pir_lattice::Scheme::SimplePir);
//! let service = pir_service::Lattice::new(database, &mut |_, _| {})?.serve(key);
//! let transport = LocalTransport::new(vec![Arc::new(service)]);
//!
//! tokio::runtime::Runtime::new()?.block_on(async {
//!     let session = LatticeSession::open_with(transport, public, None).await?;
//!     let header = DbHeader::decode(session.about())?;
//!     let found = lookup(&session, &header, Query::Key(b"bob")).await?;
//!     assert_eq!(found.value, b"2 Side Rd");
//!     assert!(lookup(&session, &header, Query::Key(b"carol")).await.is_err());
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//! # Ok(())
//! # }
//! ```

use std::path::Path;

use pir_client::{HttpsTransport, LatticeSession, SessionError, Transport};
use pir_keys::PublicKey;
use pir_lattice::Scheme;
use pir_service::registry::Privacy;
use pir_service::LatticeDatabase;

use crate::{DbHeader, DbKind, RecordsError};

/// What privacy rests on for a database served with `scheme`, in the user's words: the
/// registry's entry.
pub fn privacy(scheme: Scheme) -> Privacy {
    Privacy::of(scheme.id())
}

/// What to look up.
#[derive(Debug, Clone, Copy)]
pub enum Query<'a> {
    /// Record number `i` of a records database.
    Index(u64),
    /// The value of a key in a key-value database.
    Key(&'a [u8]),
}

/// A record or value, and what fetching it cost.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Found {
    /// The record (trimmed to its real length) or the value.
    pub value: Vec<u8>,
    /// Bytes sent.
    pub request_bytes: usize,
    /// Bytes received.
    pub reply_bytes: usize,
}

/// Why a lookup failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LookupError {
    /// The server was unreachable, refused, or answered wrongly.
    #[error(transparent)]
    Server(#[from] SessionError),
    /// The server's description or a fetched slot does not decode.
    #[error(transparent)]
    Records(#[from] RecordsError),
    /// The query does not fit the database (an index into a key-value database, or a key
    /// into a records one).
    #[error("{0}")]
    WrongQuery(&'static str),
    /// The key is not in the database.
    #[error("key not found")]
    KeyNotFound,
}

/// What the single-server service needs to serve `header` and `payload` with `scheme`.
pub fn lattice_database<'a>(
    header: &DbHeader,
    payload: &'a [u8],
    scheme: Scheme,
) -> LatticeDatabase<'a> {
    LatticeDatabase {
        scheme,
        records: payload,
        record_count: header.records,
        record_bytes: header.record_size,
        seeds: header.matrix_seeds,
        version: header.version(scheme.id().name()),
        about: header.encode().to_vec(),
    }
}

/// Opens a session with the server at `url` (pinned to `key`; hint cached in `cache_dir`)
/// and decodes the database header it describes.
pub async fn connect(
    url: &str,
    key: PublicKey,
    cache_dir: Option<&Path>,
) -> Result<(LatticeSession<HttpsTransport>, DbHeader), LookupError> {
    connect_database(url, key, None, cache_dir).await
}

/// [`connect`] to the database `id` (its version, as the server prints it) of a server that
/// serves several; `None` is its default (newest) one.
pub async fn connect_database(
    url: &str,
    key: PublicKey,
    id: Option<[u8; 32]>,
    cache_dir: Option<&Path>,
) -> Result<(LatticeSession<HttpsTransport>, DbHeader), LookupError> {
    let session = match id {
        Some(id) => LatticeSession::open_database(url, key, id, cache_dir).await?,
        None => LatticeSession::open(url, key, cache_dir).await?,
    };
    let header = DbHeader::decode(session.about())?;
    Ok((session, header))
}

/// Looks `query` up privately in the database `header` describes.
pub async fn lookup<T: Transport>(
    session: &LatticeSession<T>,
    header: &DbHeader,
    query: Query<'_>,
) -> Result<Found, LookupError> {
    let (value, fetched) = match (query, header.kind) {
        (Query::Index(index), DbKind::Records) => {
            let fetched = session.fetch(&[index]).await?;
            let record = fetched
                .records
                .first()
                .ok_or(LookupError::WrongQuery("no record in the reply"))?;
            (header.trim_record(index, record).to_vec(), fetched)
        }
        (Query::Key(key), DbKind::KeyValue) => {
            // Always both candidates, in one request: the server sees the same for every key.
            let fetched = session.fetch(&header.candidates(key)).await?;
            let slots: Vec<&[u8]> = fetched.records.iter().map(Vec::as_slice).collect();
            let value = header
                .find_value(key, &slots)?
                .ok_or(LookupError::KeyNotFound)?;
            (value, fetched)
        }
        (Query::Index(_), DbKind::KeyValue) => {
            return Err(LookupError::WrongQuery(
                "this server holds a key-value database: use --key KEY",
            ))
        }
        (Query::Key(_), DbKind::Records) => {
            return Err(LookupError::WrongQuery(
                "this server holds records by number: give an INDEX instead of --key",
            ))
        }
    };
    Ok(Found {
        value,
        request_bytes: fetched.request_bytes,
        reply_bytes: fetched.reply_bytes,
    })
}
