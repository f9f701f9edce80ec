//! The one error type of the breach application.
//!
//! Like `pir-core`'s error (modelled on rustls), it keeps apart what a *peer* got wrong (a
//! blinded request or response, a retrieved block, a database header: [`BreachError::Malformed`])
//! from what the *caller* asked for wrongly ([`BreachError::Input`]) and from a bad line in a
//! corpus file ([`BreachError::Corpus`], which names the file and the line). Messages describe
//! the shape of what was wrong and never echo a credential, a hash or a query.

/// Everything that can go wrong while parsing a corpus, building, opening or querying a breach
/// database.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum BreachError {
    /// A file or directory could not be read or written.
    #[error(transparent)]
    Io(#[from] pir_fs::PathError),
    /// A corpus line is malformed. `line` counts from 1.
    #[error("{source_name}:{line}: {message}")]
    Corpus {
        /// The corpus file (or "input" for an in-memory reader).
        source_name: String,
        /// Line number, from 1.
        line: u64,
        /// What is wrong with the line, and what was expected.
        message: String,
    },
    /// Bytes from outside (a blinded request or response, a retrieved block, a database header
    /// or key file) are malformed.
    #[error("malformed {what}: {message}")]
    Malformed {
        /// What was being decoded ("blinded request", "bucket block", "database header"...).
        what: &'static str,
        /// What is wrong with it.
        message: String,
    },
    /// The caller asked for something that cannot be done (bad option, wrong database kind
    /// for the operation, an output that cannot be written...).
    #[error("{0}")]
    Input(String),
    /// A database shape or wire error from `pir-core`.
    #[error(transparent)]
    Core(#[from] pir_core::Error),
}

impl BreachError {
    /// True when the error was caused by bytes from a peer or a file (as opposed to a misuse
    /// of the API by the caller).
    pub fn is_peer_error(&self) -> bool {
        matches!(self, Self::Malformed { .. } | Self::Corpus { .. })
    }

    /// A [`BreachError::Malformed`].
    pub(crate) fn malformed(what: &'static str, message: impl Into<String>) -> Self {
        Self::Malformed {
            what,
            message: message.into(),
        }
    }
}
