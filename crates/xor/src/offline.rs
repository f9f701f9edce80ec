//! What the offline/online schemes ([`crate::checklist`], [`crate::singlepass`]) share: the
//! client's one offline request (a master seed the offline server expands into the client's
//! secret sets or permutations), the check of the hint download against the parameters, and
//! the largest record either accepts.

use pir_core::prg;
use pir_core::wire::Reader;
use pir_core::Error;
use rand::CryptoRng;

/// Largest record: hints are `m b` bytes on the client.
pub const MAX_RECORD_BYTES: usize = 1 << 16;

/// What the client sends the offline server once: the seed of all its secret structure (the
/// online server must never see it).
#[derive(Clone, PartialEq, Eq)]
pub struct OfflineRequest {
    /// Expanded by [`pir_core::prg`] into the client's sets or permutations.
    pub master: prg::Seed,
}

impl OfflineRequest {
    /// A fresh request: a new master seed from `rng`.
    pub fn random(rng: &mut (impl CryptoRng + ?Sized)) -> Self {
        let mut master = [0u8; 16];
        rng.fill_bytes(&mut master);
        Self { master }
    }
}

impl std::fmt::Debug for OfflineRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // The seed is the client's secret: never printed.
        f.debug_struct("OfflineRequest").finish_non_exhaustive()
    }
}

/// Checks that a hint download of `got` bytes is the `count` hints of `record_bytes` bytes the
/// parameters give (`what` names one hint: "sets", "hints").
pub fn check_hint_len(
    got: usize,
    count: usize,
    record_bytes: usize,
    what: &str,
) -> Result<(), Error> {
    let expected = count * record_bytes;
    if got != expected {
        return Err(Error::WrongLength(format!(
            "{got} bytes of hints, {expected} expected ({count} {what} of {record_bytes} bytes)"
        )));
    }
    Ok(())
}

/// Refuses a lookup of `index` in a database of `records` records before anything is sent.
pub fn check_index(index: u64, records: u64) -> Result<(), Error> {
    if index >= records {
        return Err(Error::InvalidParameter(format!(
            "record {index} of {records}"
        )));
    }
    Ok(())
}

/// Opens a saved client state: it must be exactly `expected` bytes (a state is always a whole
/// file) and start with `magic`. `scheme` names it in the error.
pub fn open_state(
    r: &mut Reader<'_>,
    magic: &[u8],
    expected: usize,
    scheme: &str,
) -> Result<(), Error> {
    if r.remaining() != expected {
        return Err(Error::WrongLength(format!(
            "a {scheme} state of {} bytes, {expected} expected for these parameters",
            r.remaining()
        )));
    }
    if r.take(magic.len())? != magic {
        return Err(Error::WrongMagic);
    }
    Ok(())
}

/// The two messages of one lookup, one for each server: `M` is the scheme's lookup body
/// (Checklist: a punctured set; SinglePass: one offset per row).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Query<M> {
    /// For the online server.
    pub online: M,
    /// For the offline server (the refresh).
    pub refresh: M,
}

/// A `Debug` for a client type that shows its parameters and nothing secret (its sets or
/// permutations and hints).
macro_rules! debug_params_only {
    ($type:ident) => {
        impl std::fmt::Debug for $type {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct(stringify!($type))
                    .field("params", &self.params)
                    .finish_non_exhaustive()
            }
        }
    };
}
pub(crate) use debug_params_only;
