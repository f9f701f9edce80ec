//! The one error type of the ORAM core.

use thiserror::Error;

/// What went wrong. "Tampered" errors are proof the storage returned bytes the client never
/// wrote at that place and time; everything else is a parameter or usage error.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum OramError {
    /// The requested shape or an argument is outside what the ORAM supports.
    #[error("{0}")]
    Params(String),
    /// A block id is past the end of the ORAM.
    #[error("block {block} is past the end of the store ({blocks} blocks)")]
    OutOfRange {
        /// The block asked for.
        block: u64,
        /// Blocks in the ORAM.
        blocks: u32,
    },
    /// A sealed slot failed authentication: the store changed, swapped or rolled back a slot.
    #[error(
        "store {store} returned a slot that fails authentication (partition {partition}, level {level}, slot {slot}): \
         the store changed, swapped or rolled back data; stop using it and restore from a copy you trust"
    )]
    Tampered {
        /// Store index.
        store: u32,
        /// Partition.
        partition: u32,
        /// Level.
        level: u32,
        /// Slot in the level.
        slot: u32,
    },
    /// The store returned a reply of the wrong size.
    #[error("store {store} returned {got} bytes where {want} were expected")]
    ShortRead {
        /// Store index.
        store: u32,
        /// Bytes received.
        got: usize,
        /// Bytes expected.
        want: usize,
    },
    /// The sealed client state cannot be opened or is malformed.
    #[error("client state: {0}")]
    State(String),
    /// The client state's plaintext is malformed or inconsistent (its codec's reason).
    #[error("client state: {0}; the state file is damaged or from another version")]
    StateFormat(#[source] pir_core::Error),
    /// An invariant of the construction failed; a bug, reported instead of a panic.
    #[error("internal ORAM invariant failed: {0} (please report this)")]
    Internal(&'static str),
    /// The storage back end failed.
    #[error("storage: {0}")]
    Store(String),
}
