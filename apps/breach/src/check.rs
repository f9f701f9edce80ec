//! One private credential check, end to end: what `pir breach check` runs, as a library.
//!
//! [`connect`] opens a [`BreachSession`] and decodes the database header both servers
//! describe; [`check`] hashes the credential, fetches its bucket privately (RAID-PIR with
//! query-dependent preprocessing) and, for username+password databases, runs the blinding
//! step on the server holding the key, concurrently.
//!
//! Privacy: [`PRIVACY`]; nothing about the credential, not even a hash prefix, leaves the
//! client in the clear.
//!
//! ```
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! use std::sync::Arc;
//! use pir_breach::check::{check, Credential, Outcome};
//! use pir_breach::corpus::{password_sha1, CorpusFormat, CorpusStats, Sha1Entry};
//! use pir_breach::database::{build_sha1, Sha1Layout};
//! use pir_breach::service::{BreachBackend, BreachConfig};
//! use pir_breach::BreachSession;
//! use pir_client::LocalTransport;
//!
//! // A breach corpus of two passwords, as a database of buckets.
//! let entries: Vec<Sha1Entry> = [&b"123456"[..], b"hunter2"]
//!     .iter()
//!     .map(|p| Sha1Entry { hash: password_sha1(p), count: 7 })
//!     .collect();
//! let (db, _) = build_sha1(CorpusFormat::Passwords, &entries, &Sha1Layout::default(), &CorpusStats::default())?;
//! let (header, database) = db.into_parts();
//!
//! // Two servers in this process (over the network: `pir breach serve`).
//! let mut servers: Vec<Arc<dyn pir_service::Handler>> = Vec::new();
//! let mut keys = Vec::new();
//! for server in 0..2 {
//!     let key = pir_keys::SecretKey::generate()?;
//!     keys.push(key.public());
//!     let copy = pir_core::Database::from_bytes(database.shape(), database.bytes())?;
//!     let config = BreachConfig::in_memory(copy, header.encode().to_vec(), server, key);
//!     servers.push(Arc::new(BreachBackend::start(config)?));
//! }
//!
//! tokio::runtime::Runtime::new()?.block_on(async {
//!     let session = BreachSession::open_with(LocalTransport::new(servers), &keys).await?;
//!     let header = pir_breach::header::DbHeader::decode(session.header())?;
//!     let found = check(&session, &header, Credential::Password(b"hunter2")).await?;
//!     assert_eq!(found, Outcome::Found { count: Some(7) });
//!     let missing = check(&session, &header, Credential::Password(b"correct horse")).await?;
//!     assert_eq!(missing, Outcome::NotFound);
//!     Ok::<_, Box<dyn std::error::Error>>(())
//! })?;
//! # Ok(())
//! # }
//! ```

use pir_client::{HttpsTransport, Transport};
use pir_keys::PublicKey;
use pir_service::registry::Privacy;

use crate::blind::BlindedCheck;
use crate::corpus::password_sha1;
use crate::credential::credential_hash;
use crate::header::DbHeader;
use pir_client::SessionError;

use crate::{BreachError, BreachSession};

/// What privacy rests on, in the user's words: the registry's entries of the schemes a
/// breach server answers (QDP).
pub const PRIVACY: Privacy = Privacy(crate::BreachBackend::SCHEMES);

/// The credential to check.
#[derive(Clone, Copy)]
pub enum Credential<'a> {
    /// A password (HIBP and password-list databases).
    Password(&'a [u8]),
    /// A username and password (username:password databases).
    UserPassword {
        /// The username.
        username: &'a [u8],
        /// The password.
        password: &'a [u8],
    },
}

impl std::fmt::Debug for Credential<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never print a credential.
        f.write_str("Credential(..)")
    }
}

/// What a check found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    /// The credential is in the corpus.
    Found {
        /// How often it was seen, where the database keeps counts.
        count: Option<u64>,
    },
    /// It is not.
    NotFound,
}

/// Why a check could not be completed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CheckError {
    /// A server was unreachable, refused, or answered wrongly.
    #[error(transparent)]
    Servers(#[from] SessionError),
    /// The database or the credential does not fit (wrong kind of credential for this
    /// database, a bucket that does not decode).
    #[error(transparent)]
    Database(#[from] BreachError),
}

/// Opens a session with `servers` (URL and pinned key, server 0 first) and decodes the
/// database header they describe.
pub async fn connect(
    servers: &[(String, PublicKey)],
) -> Result<(BreachSession<HttpsTransport>, DbHeader), CheckError> {
    connect_database(servers, None).await
}

/// [`connect`] to the database `id` (SHA-256 of its header) of servers that serve several;
/// `None` is their default (first) one.
pub async fn connect_database(
    servers: &[(String, PublicKey)],
    id: Option<[u8; 32]>,
) -> Result<(BreachSession<HttpsTransport>, DbHeader), CheckError> {
    let session = match id {
        Some(id) => BreachSession::open_database(servers, id).await?,
        None => BreachSession::open(servers).await?,
    };
    let header = DbHeader::decode(session.header())?;
    Ok((session, header))
}

/// Checks `credential` privately against the database of `session`, described by `header`.
pub async fn check<T: Transport>(
    session: &BreachSession<T>,
    header: &DbHeader,
    credential: Credential<'_>,
) -> Result<Outcome, CheckError> {
    let found = match (header.corpus.is_sha1(), credential) {
        (true, Credential::Password(password)) => {
            let (bucket, value) = header.sha1_location(&password_sha1(password))?;
            let block = session.retrieve(bucket).await?;
            header.decode_bucket(&block)?.count_of(&value)
        }
        (false, Credential::UserPassword { username, password }) => {
            let h = credential_hash(&header.hash, username, password)?;
            let bucket = header.credential_bucket(&h)?;
            let (request, pending) = BlindedCheck::new(&h, &mut rand::rng());
            let (block, response) =
                tokio::try_join!(session.retrieve(bucket), session.blind(&request))?;
            pending
                .finish(&response, &header.decode_bucket(&block)?)?
                .then_some(1)
        }
        (true, Credential::UserPassword { .. }) => {
            return Err(BreachError::Input(
                "this database holds passwords only: check a password".into(),
            )
            .into())
        }
        (false, Credential::Password(_)) => {
            return Err(BreachError::Input(
                "this database holds username:password pairs: give a username too".into(),
            )
            .into())
        }
    };
    Ok(match found {
        Some(count) => Outcome::Found {
            count: header.counts.then_some(count),
        },
        None => Outcome::NotFound,
    })
}
