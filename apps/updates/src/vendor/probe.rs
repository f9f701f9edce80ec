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
//! A chunk-only mirror (`pir mirror serve --chunks`, its health line says `chunks=LIST/C`)
//! refuses Chor, so it is asked a RAID-PIR query instead, at a position its chunks cover
//! (n servers, redundancy r, its chunk count c); the vendor answers the other positions from
//! its own copy. A mirror that claims chunks it does not hold fails the probe like a liar
//! would. What the probe learned (the release it serves, the chunks it holds) is what the
//! vendor writes into the list for it ([`Probed`]).
//!
//! Generic over [`Transport`] (position 0 is the mirror probed), so it runs over HTTPS in
//! the service and in memory in tests.

use pir_client::exchange::{exchange, Call, ExchangeError};
use pir_client::{fetch_manifest, fetch_releases, Transport, TransportError};
use pir_core::MultiServerScheme;
use pir_keys::PublicKey;
use pir_xor::held::ChunkSet;
use pir_xor::raid::MAX_SERVERS;
use pir_xor::{AnswerMode, Chor, RaidPir};
use rand::{CryptoRng, Rng};

use super::registry::ProbeOutcome;
use crate::manifest::MAX_MANIFEST_BYTES;
use crate::mirrors::{parse_chunks, ListedRelease};
use crate::release::Release;
use crate::Manifest;

/// What one probe found, and what the vendor lists the mirror with when it passed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probed {
    /// Up and honest, or why not.
    pub outcome: ProbeOutcome,
    /// The release it serves (the vendor's current one, when it passed).
    pub release: Option<ListedRelease>,
    /// The chunks it holds (`None`: the whole release), as the probe found them answered.
    pub chunks: Option<ChunkSet>,
}

impl Probed {
    fn failed(outcome: ProbeOutcome) -> Probed {
        Probed {
            outcome,
            release: None,
            chunks: None,
        }
    }
}

/// The chunks a mirror's health line (`GET /health`) says it holds: its `chunks=LIST/C`
/// word, as `pir mirror serve --chunks` writes it (`None`: the whole release, or no such
/// word; the probe then asks it a Chor query).
pub fn chunks_in_health(health: &str) -> Option<ChunkSet> {
    health
        .split_whitespace()
        .find_map(|word| word.strip_prefix("chunks="))
        .and_then(|list| parse_chunks(list).ok())
}

/// Probes the mirror at position 0 of `transport`, whose key is `key` and which says it holds
/// `chunks` (`None`: the whole release), against `release` (the vendor's own copy), asking
/// for a block drawn with `rng`.
pub async fn probe<T: Transport, R: CryptoRng + Rng>(
    transport: &T,
    key: PublicKey,
    chunks: Option<&ChunkSet>,
    release: &Release,
    rng: &mut R,
) -> Probed {
    let id = release.release_id;
    match serves(transport, &id).await {
        Ok(true) => {}
        Ok(false) => {
            return Probed::failed(ProbeOutcome::WrongRelease(format!(
                "does not serve the current release {}",
                hex::encode(&id[..8])
            )))
        }
        Err(e) => return Probed::failed(ProbeOutcome::Dead(format!("releases list: {e}"))),
    }
    let asked = match chunks {
        None => private_query(transport, key, release, rng).await,
        Some(set) => held_query(transport, key, set, release, rng).await,
    };
    match asked {
        Ok(ProbeOutcome::Passed) => Probed {
            outcome: ProbeOutcome::Passed,
            release: Some(ListedRelease {
                id,
                version: release.manifest.release_version,
            }),
            chunks: chunks.cloned(),
        },
        Ok(outcome) => Probed::failed(outcome),
        Err(why) => Probed::failed(ProbeOutcome::Dead(why)),
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
    let chor = Chor::new(release.database.shape(), 2).map_err(|e| format!("probe query: {e}"))?;
    ask(transport, key, &chor, 0, release, rng).await
}

/// A RAID-PIR parameter set (n, r, c = the set's chunk count) and a position a mirror holding
/// `set` can play, the fewest servers first: what a client fetching from it would ask.
fn playable(set: &ChunkSet, release: &Release) -> Option<(RaidPir, usize)> {
    let shape = release.database.shape();
    for servers in 2..=MAX_SERVERS.min(set.chunk_count.max(2)) {
        for redundancy in (2..=servers).rev() {
            let Ok(raid) = RaidPir::new(
                shape,
                servers,
                redundancy,
                set.chunk_count,
                AnswerMode::Single,
            ) else {
                continue;
            };
            if let Some(position) = (0..servers).find(|&s| set.can_play(&raid, s)) {
                return Some((raid, position));
            }
        }
    }
    None
}

/// One RAID-PIR query for a random block: the mirror answers a position its chunks cover,
/// the vendor every other position.
async fn held_query<T: Transport, R: CryptoRng + Rng>(
    transport: &T,
    key: PublicKey,
    set: &ChunkSet,
    release: &Release,
    rng: &mut R,
) -> Result<ProbeOutcome, String> {
    match playable(set, release) {
        Some((raid, position)) => ask(transport, key, &raid, position, release, rng).await,
        None => Ok(ProbeOutcome::WrongAnswer(format!(
            "it says it holds chunks {}, which play no RAID-PIR position of this release",
            set.describe()
        ))),
    }
}

/// One query of `scheme` for a random block: the mirror answers share `theirs`, the vendor
/// every other share from its own copy; the decoded block must match the manifest's hash.
async fn ask<S: MultiServerScheme, T: Transport, R: CryptoRng + Rng>(
    transport: &T,
    key: PublicKey,
    scheme: &S,
    theirs: usize,
    release: &Release,
    rng: &mut R,
) -> Result<ProbeOutcome, String> {
    let shape = release.database.shape();
    let index = rng.random_range(0..shape.block_count());
    let (queries, state) = scheme
        .query(&[index], rng)
        .map_err(|e| format!("probe query: {e}"))?;
    let call = Call {
        server: 0,
        scheme: scheme.id(),
        database_id: release.release_id,
        key,
        max_answer: scheme.max_answer_body(),
    };
    let exchanged = match exchange(transport, call, &[scheme.encode_query(&queries[theirs])]).await
    {
        Ok(exchanged) => exchanged,
        Err(ExchangeError::Transport { source, .. }) => return Err(format!("query: {source}")),
        Err(ExchangeError::Reply { error, .. }) => {
            return Err(format!("its reply to a private query: {error}"))
        }
        Err(other) => return Err(format!("query: {other}")),
    };
    let answer = match exchanged
        .answers
        .first()
        .map(|bytes| scheme.decode_answer(&queries[theirs], bytes))
    {
        Some(Ok(answer)) => answer,
        _ => {
            return Ok(ProbeOutcome::WrongAnswer(
                "signed an answer of the wrong shape to a private query".into(),
            ))
        }
    };
    let mut answers = Vec::with_capacity(queries.len());
    let mut answer = Some(answer);
    for (k, query) in queries.iter().enumerate() {
        if k == theirs {
            // Taken once: `theirs` is one position.
            answers.extend(answer.take());
        } else {
            answers.push(
                scheme
                    .answer(&release.database, query)
                    .map_err(|e| format!("the vendor's own share: {e}"))?,
            );
        }
    }
    let block = scheme
        .decode(&state, &answers)
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_chunks_a_health_line_states_are_read_and_anything_else_is_a_whole_mirror() {
        let line = "ok release=ab blocks=60 block_size=1024 chunks=0,3/4 (newest of 2 releases)";
        assert_eq!(
            chunks_in_health(line),
            Some(ChunkSet::new(4, vec![0, 3]).unwrap())
        );
        assert_eq!(chunks_in_health("ok release=ab blocks=60"), None);
        assert_eq!(chunks_in_health("ok chunks=9/4"), None);
        assert_eq!(chunks_in_health(""), None);
    }
}
