//! The one error of a client session with PIR servers (single-server lookups, breach checks):
//! which server, and whether it was unreachable, refused, answered wrongly, or the caller or
//! the configuration was at fault.

use std::path::PathBuf;

use pir_core::wire::ErrorCode;
use pir_service::reply::ReplyError;

use crate::TransportError;

/// Why a session could not complete a request.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SessionError {
    /// A server could not be reached, or TLS (pinned to its key) failed.
    #[error("server {server}: {source}")]
    Transport {
        /// The server's position.
        server: usize,
        /// What failed.
        source: TransportError,
    },
    /// A server refused the request.
    #[error("server {server} refused: {message}")]
    Refused {
        /// The server's position.
        server: usize,
        /// Its error code (`pir_core::wire::ErrorCode`).
        code: u16,
        /// Its message.
        message: String,
    },
    /// A server's reply is malformed, inconsistent or not signed by its key.
    #[error("bad reply from server {server}: {message}")]
    BadReply {
        /// The server's position.
        server: usize,
        /// What is wrong.
        message: String,
    },
    /// The deployment is not usable as configured (wrong positions, different databases).
    #[error("{0}")]
    Setup(String),
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

impl SessionError {
    /// True if a server answered `WrongDatabase`: its database changed, open a new session.
    pub fn is_stale(&self) -> bool {
        matches!(self, SessionError::Refused { code, .. } if *code == ErrorCode::WrongDatabase as u16)
    }

    /// True if a server answered `UnknownKey`: it no longer holds the key material this
    /// client uploaded (expired, evicted, restarted); upload it again.
    pub fn is_unknown_key(&self) -> bool {
        matches!(self, SessionError::Refused { code, .. } if *code == ErrorCode::UnknownKey as u16)
    }

    /// A bad reply from `server`.
    pub fn bad_reply(server: usize, what: impl std::fmt::Display) -> Self {
        SessionError::BadReply {
            server,
            message: what.to_string(),
        }
    }

    /// What a failed [`pir_service::reply::open`] means for `server`.
    pub fn from_reply(server: usize, error: ReplyError) -> Self {
        match error {
            ReplyError::Refused { code, message } => SessionError::Refused {
                server,
                code,
                message,
            },
            other => SessionError::bad_reply(server, other),
        }
    }

    /// A transport failure talking to `server` (for `map_err`).
    pub fn transport(server: usize) -> impl Fn(TransportError) -> Self {
        move |source| SessionError::Transport { server, source }
    }
}
