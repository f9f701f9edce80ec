//! The vendor's probe of one mirror: is it up, does it serve the current release, and does it
//! answer a private query correctly?
//!
//! The honesty probe is a real private query: two-server Chor for a random block, one share
//! sent to the mirror, the other answered by the vendor from its own copy of the release.
//! The mirror sees a uniformly random subset of the blocks, exactly what any client's Chor
//! query shows it, so it cannot tell a probe from a client; and since the XOR of the subset
//! covers half the release, a mirror serving wrong data for some blocks fails it with
//! probability 1/2 for each such block. The decoded block is checked against the manifest's
//! hash, as a client does. A mirror that lies only now and then (to some clients, for some
//! batches) can still pass; evidence from clients catches it ([`super::Registry::prove`]).
//!
//! Generic over [`Transport`] (position 0 is the mirror probed), so it runs over HTTPS in
//! the service and in memory in tests.

use pir_client::exchange::{exchange, Call, ExchangeError};
use pir_client::{fetch_manifest, fetch_releases, Transport, TransportError};
use pir_core::{MultiServerScheme, SchemeId};
use pir_keys::PublicKey;
use pir_xor::Chor;
use rand::{CryptoRng, Rng};

use super::registry::ProbeOutcome;
use crate::manifest::MAX_MANIFEST_BYTES;
use crate::release::Release;
use crate::Manifest;

/// Probes the mirror at position 0 of `transport`, whose key is `key`, against `release`
/// (the vendor's own copy), asking for a block drawn with `rng`.
pub async fn probe<T: Transport, R: CryptoRng + Rng>(
    transport: &T,
    key: PublicKey,
    release: &Release,
    rng: &mut R,
) -> ProbeOutcome {
    let id = release.release_id;
    match serves(transport, &id).await {
        Ok(true) => {}
        Ok(false) => {
            return ProbeOutcome::WrongRelease(format!(
                "does not serve the current release {}",
                hex::encode(&id[..8])
            ))
        }
        Err(e) => return ProbeOutcome::Dead(format!("releases list: {e}")),
    }
    match private_query(transport, key, release, rng).await {
        Ok(outcome) => outcome,
        Err(why) => ProbeOutcome::Dead(why),
    }
}

/// Whether the mirror serves release `id` (its releases list, or the one manifest an older
/// mirror without a list serves).
async fn serves<T: Transport>(transport: &T, id: &[u8; 32]) -> Result<bool, TransportError> {
    match fetch_releases(transport, 0).await {
        Ok(list) => Ok(list.iter().any(|info| info.id == *id)),
        Err(TransportError::Refused(_)) => {
            let bytes = fetch_manifest(transport, 0, MAX_MANIFEST_BYTES).await?;
            Ok(Manifest::release_id(&bytes) == *id)
        }
        Err(e) => Err(e),
    }
}

/// One Chor query for a random block: the mirror answers share 0, the vendor share 1.
async fn private_query<T: Transport, R: CryptoRng + Rng>(
    transport: &T,
    key: PublicKey,
    release: &Release,
    rng: &mut R,
) -> Result<ProbeOutcome, String> {
    let shape = release.database.shape();
    let chor = Chor::new(shape, 2).map_err(|e| format!("probe query: {e}"))?;
    let index = rng.random_range(0..shape.block_count());
    let (queries, state) = chor
        .query(&[index], rng)
        .map_err(|e| format!("probe query: {e}"))?;
    let call = Call {
        server: 0,
        scheme: SchemeId::Chor,
        database_id: release.release_id,
        key,
        max_answer: chor.max_answer_body(),
    };
    let exchanged = match exchange(transport, call, &[chor.encode_query(&queries[0])]).await {
        Ok(exchanged) => exchanged,
        Err(ExchangeError::Transport { source, .. }) => return Err(format!("query: {source}")),
        Err(ExchangeError::Reply { error, .. }) => {
            return Err(format!("its reply to a private query: {error}"))
        }
        Err(other) => return Err(format!("query: {other}")),
    };
    let theirs = match exchanged
        .answers
        .first()
        .map(|bytes| chor.decode_answer(&queries[0], bytes))
    {
        Some(Ok(answer)) => answer,
        _ => {
            return Ok(ProbeOutcome::WrongAnswer(
                "signed an answer of the wrong shape to a private query".into(),
            ))
        }
    };
    let ours = chor
        .answer(&release.database, &queries[1])
        .map_err(|e| format!("the vendor's own share: {e}"))?;
    let block = chor
        .decode(&state, &[theirs, ours])
        .ok()
        .and_then(|mut blocks| blocks.pop());
    let right = block.is_some_and(|block| {
        release
            .manifest
            .block_hashes
            .get(index)
            .is_some_and(|hash| *hash == pir_keys::sha256(&block))
    });
    Ok(if right {
        ProbeOutcome::Passed
    } else {
        ProbeOutcome::WrongAnswer(
            "its signed answer to a private query for a random block fails the manifest's hash"
                .into(),
        )
    })
}
