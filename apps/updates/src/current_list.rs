//! The mirror list a client uses: the newest valid one among the file it was given, the list it
//! kept from an earlier session, and the list its mirrors serve.
//!
//! Mirrors serve the vendor's current signed list (`pir mirror serve --mirror-list FILE`, at
//! `GET /pir/v1/hint`), so a client learns of a new list from any mirror when it cannot reach
//! the vendor. A mirror cannot forge a list (the vendor signs it) and cannot roll a client
//! back: the client takes a mirror's list only if it verifies, has not expired and is newer
//! than the one it has, and refuses any list older than the newest it has used or past its
//! expiry ([`Freshness::for_mirror_lists`]).

use std::path::Path;

use pir_client::{MirrorInfo, Transport};
use pir_keys::PublicKey;
use rand::Rng;

use crate::choose::mirror_order;
use crate::freshness::Freshness;
use crate::{MirrorList, UpdateError};

/// Largest mirror list a client downloads from a mirror: 64 mirrors of 2048-byte URLs with
/// their keys, the header and the signature fit in 136 KB.
pub const MAX_LIST_BYTES: usize = 256 << 10;

/// Most mirrors asked for their list when the client's own has expired (a valid list is
/// refreshed from one mirror, drawn at random, per session).
const EXPIRED_TRIES: usize = 8;

/// A mirror list whose vendor signature verified, with its signed bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedList {
    /// The list.
    pub list: MirrorList,
    /// Its signed bytes, as the vendor wrote them.
    pub bytes: Vec<u8>,
}

impl SignedList {
    /// Verifies `bytes` under `vendor`.
    pub fn verify(bytes: Vec<u8>, vendor: &PublicKey) -> Result<Self, UpdateError> {
        let list = MirrorList::decode_verified(&bytes, vendor)?;
        Ok(Self { list, bytes })
    }

    /// Reads and verifies the list file at `path`.
    pub fn load(path: &Path, vendor: &PublicKey) -> Result<Self, UpdateError> {
        let bytes = std::fs::read(path).map_err(UpdateError::io_at(path))?;
        Self::verify(bytes, vendor)
    }

    /// The mirrors, in list order.
    pub fn mirrors(&self) -> Vec<MirrorInfo> {
        self.list
            .mirrors
            .iter()
            .map(|m| MirrorInfo {
                url: m.url.clone(),
                key: m.key,
            })
            .collect()
    }

    fn is_newer_than(&self, other: &SignedList) -> bool {
        self.list.list_version > other.list.list_version
    }
}

/// The newer of `given` and the list kept in `freshness` by an earlier session (a kept list
/// that no longer verifies is ignored; on a tie, `given`).
pub fn newest_known(given: SignedList, freshness: &Freshness, vendor: &PublicKey) -> SignedList {
    match freshness
        .kept_list()
        .and_then(|bytes| SignedList::verify(bytes, vendor).ok())
    {
        Some(kept) if kept.is_newer_than(&given) => kept,
        _ => given,
    }
}

/// Asks mirrors of `current` (over `transport`, whose positions are `current`'s), drawn at
/// random, for the list they serve: one mirror while `current` is valid at `now`, up to
/// [`EXPIRED_TRIES`] once it has expired. Returns the first list that verifies under `vendor`,
/// is newer than `current` and has not expired; `None` when no mirror has one (a mirror that
/// serves no list, or an older one, is not an error).
pub async fn from_mirrors<T: Transport, R: Rng + ?Sized>(
    transport: &T,
    current: &SignedList,
    vendor: &PublicKey,
    now: u64,
    rng: &mut R,
) -> Option<SignedList> {
    let expired = current.list.expires_unix <= now;
    let tries = if expired { EXPIRED_TRIES } else { 1 };
    let positions: Vec<usize> = (0..current.list.mirrors.len()).collect();
    for i in mirror_order(&[&positions], rng).into_iter().take(tries) {
        let url = &current.list.mirrors[i].url;
        let served = match transport.hint(i, MAX_LIST_BYTES).await {
            Ok(bytes) => SignedList::verify(bytes, vendor),
            Err(e) => {
                tracing::debug!(mirror = %url, "no mirror list from this mirror: {e}");
                continue;
            }
        };
        match served {
            Ok(list) if list.is_newer_than(current) && list.list.expires_unix > now => {
                tracing::info!(
                    mirror = %url,
                    "mirror list version {} learned from a mirror (had {})",
                    list.list.list_version,
                    current.list.list_version
                );
                return Some(list);
            }
            Ok(_) => {}
            Err(e) => tracing::warn!(mirror = %url, "the mirror list it serves is refused: {e}"),
        }
    }
    None
}

/// Refuses `list` if it has expired at `now` or is older than the newest list this client has
/// used (both name the attack); otherwise records its version and keeps it.
pub fn accept(list: &SignedList, freshness: &Freshness, now: u64) -> Result<(), UpdateError> {
    freshness.check_version(list.list.list_version, list.list.expires_unix, now)?;
    freshness.record(list.list.list_version)?;
    if freshness.kept_list().as_deref() != Some(list.bytes.as_slice()) {
        freshness.keep_list(&list.bytes);
    }
    Ok(())
}
