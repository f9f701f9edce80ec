//! The one error type of the scheme layer.
//!
//! Modelled on rustls: errors caused by bytes a peer sent ([`Error::Malformed`],
//! [`Error::WrongMagic`], ...) are kept apart from errors caused by the caller
//! ([`Error::InvalidParameter`]). Messages never contain query contents or indices that a
//! server could log; they describe the *shape* of what was wrong.

/// Everything that can go wrong in the scheme layer.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// The caller passed parameters that do not make sense (a bug or a bad flag, not an attack).
    #[error("invalid parameter: {0}")]
    InvalidParameter(String),
    /// The message is shorter than its header or its declared length.
    #[error("message truncated: needed {needed} more bytes")]
    Truncated {
        /// Bytes missing.
        needed: usize,
    },
    /// The message declares a length above what the parameters allow.
    #[error("message too large: {len} bytes, limit {limit}")]
    Oversized {
        /// Declared or actual length.
        len: usize,
        /// The limit derived from the parameters.
        limit: usize,
    },
    /// The message does not start with the expected magic bytes.
    #[error("wrong magic bytes: this is not a pir message")]
    WrongMagic,
    /// The message has a format version this build does not speak.
    #[error("unsupported format version {found} (this build speaks version {supported})")]
    WrongVersion {
        /// Version in the message.
        found: u16,
        /// Version this build speaks.
        supported: u16,
    },
    /// The message is for another scheme, or names an unknown one.
    #[error("wrong scheme: message is for scheme id {found}, expected {expected}")]
    WrongScheme {
        /// Scheme id in the message.
        found: u8,
        /// Scheme id expected here.
        expected: u8,
    },
    /// The message kind is not the one expected here.
    #[error("wrong message kind {found}, expected {expected}")]
    WrongKind {
        /// Kind in the message.
        found: u8,
        /// Kind expected.
        expected: u8,
    },
    /// A field holds a value this build does not know (a message kind, a mode, a tag, a flag).
    #[error("unknown {field} {found}")]
    UnknownValue {
        /// What the field is.
        field: &'static str,
        /// The value found.
        found: u64,
    },
    /// A count or position lies outside what the parameters allow (`1..=max` for counts,
    /// `0..max` for positions, as `field` says).
    #[error("{field} {found} outside the allowed range (limit {limit})")]
    OutOfRange {
        /// What the field is.
        field: &'static str,
        /// The value found.
        found: u64,
        /// The limit it broke.
        limit: u64,
    },
    /// Bytes follow the end of a complete message.
    #[error("{count} unexpected trailing bytes")]
    TrailingBytes {
        /// How many.
        count: usize,
    },
    /// A length field disagrees with the parameters or with the bytes present.
    #[error("wrong length: {0}")]
    WrongLength(String),
    /// Bytes are well-framed but their content is invalid (bad field value, trailing bytes...).
    #[error("malformed message: {0}")]
    Malformed(String),
    /// The query was made for a different database (release) than the server holds.
    #[error("database mismatch: {0}")]
    DatabaseMismatch(String),
    /// The query names key material (a key id) the server does not hold: never uploaded,
    /// expired or evicted. The client uploads its keys again.
    #[error("unknown key: {0}")]
    UnknownKey(String),
}

impl Error {
    /// True when the error was caused by bytes a peer sent, false when the caller misused the API.
    pub fn is_peer_error(&self) -> bool {
        !matches!(self, Error::InvalidParameter(_))
    }
}
