//! The one error type of the updates application.
//!
//! Like `pir-core`'s error (modelled on rustls), it keeps apart what went wrong *outside* the
//! caller's control (a file could not be read, a document is malformed or its signature does
//! not verify) from what the caller asked for wrongly ([`UpdateError::Input`]). Messages name
//! the file or document concerned and, where there is one, the next step for the user.

/// Everything that can go wrong while building, publishing or opening a release.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum UpdateError {
    /// A file or directory could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file or directory.
        path: String,
        /// What the operating system said.
        source: std::io::Error,
    },
    /// A manifest, mirror list or release file is malformed (says what and which file).
    #[error("{0}")]
    Format(String),
    /// The manifest is expired or older than a release this client already used (freeze or
    /// rollback attack); says which.
    #[error("{0}")]
    Stale(String),
    /// A signature did not verify (says which document and which key fingerprint).
    #[error("{0}")]
    Signature(String),
    /// The user asked for something that cannot be done (empty directory, bad file name,
    /// invalid block size, output directory in use...).
    #[error("{0}")]
    Input(String),
    /// A database or wire error from `pir-core`.
    #[error(transparent)]
    Core(#[from] pir_core::Error),
    /// A key could not be loaded or used.
    #[error(transparent)]
    Keys(#[from] pir_keys::KeyError),
    /// The private retrieval failed (mirrors down or cheating, no spare left).
    #[error(transparent)]
    Fetch(#[from] pir_client::FetchError),
    /// The private retrieval failed and evidence files were written.
    #[error("{error}")]
    FetchFailed {
        /// What failed.
        error: pir_client::FetchError,
        /// Evidence files kept next to the output path.
        evidence: Vec<std::path::PathBuf>,
    },
}

/// The shared I/O error (`pir_fs`), as this type's [`UpdateError::Io`].
impl From<pir_fs::PathError> for UpdateError {
    fn from(error: pir_fs::PathError) -> Self {
        let pir_fs::PathError { path, source } = error;
        Self::Io { path, source }
    }
}

impl UpdateError {
    /// An [`UpdateError::Io`] for `path`.
    pub(crate) fn io(path: &std::path::Path, source: std::io::Error) -> Self {
        pir_fs::PathError::new(path, source).into()
    }

    /// A closure that turns an I/O error into an [`UpdateError::Io`] for `path`, for `map_err`.
    pub(crate) fn io_at(path: &std::path::Path) -> impl Fn(std::io::Error) -> Self + '_ {
        move |source| Self::io(path, source)
    }
}
