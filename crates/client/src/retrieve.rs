//! Running a multi-server scheme over real mirrors, with failures.
//!
//! The client assigns the first `n` mirrors of the list to the scheme's `n` server positions
//! and keeps the rest as spares. Every answer must carry a valid signature from its mirror;
//! every decoded block must pass the caller's check (the manifest's SHA-256).
//!
//! - A mirror that is down, refuses, or sends something malformed is replaced by a spare and
//!   the batch is asked again with fresh randomness; with no spare left the error names it.
//! - A block that fails its check means at least one mirror answered wrongly. For each position
//!   in turn, the client re-asks the failing blocks (fresh randomness) with that position's
//!   mirror swapped for a spare; the swap that makes every block verify names the culprit, whose
//!   signed answer from the failed attempt is kept as [`Evidence`]. Without spares the error
//!   lists the suspects and keeps all their signed answers.
//!
//! Privacy of retries: every attempt is a complete, independent PIR query with fresh
//! randomness, so each set of mirrors asked learns nothing unless all of the mirrors in one
//! attempt (Chor) or `r` of them (RAID-PIR) collude. Users listing spares should read the
//! assumption as ranging over every mirror that may be asked.

use std::collections::VecDeque;
use std::sync::Arc;

use pir_core::protocol::MAX_BATCH;
use pir_core::{Error, MultiServerScheme};
use pir_keys::PublicKey;
use pir_service::framing;
use pir_service::reply::{self, Expect, ReplyError};
use rand::CryptoRng;
use tokio::task::JoinSet;

use crate::{Evidence, Transport};

/// A mirror as the signed mirror list describes it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MirrorInfo {
    /// `https://host:port`.
    pub url: String,
    /// The key its TLS and its answers must be signed with.
    pub key: PublicKey,
}

/// Parameters of one retrieval that do not belong to the scheme.
#[derive(Debug, Clone)]
pub struct RetrieveOptions {
    /// SHA-256 of the signed manifest; mirrors serving another release refuse.
    pub release_id: [u8; 32],
    /// Largest answer body one query may produce (from the scheme parameters).
    pub max_answer: usize,
}

/// Traffic with one mirror.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MirrorStats {
    /// HTTP requests sent.
    pub requests: u64,
    /// PIR queries sent.
    pub queries: u64,
    /// Request bytes sent.
    pub bytes_sent: u64,
    /// Reply bytes received.
    pub bytes_received: u64,
}

/// Something a mirror did wrong during a retrieval that still may have succeeded.
#[derive(Debug, Clone)]
pub struct Incident {
    /// Index of the mirror in the list.
    pub mirror: usize,
    /// Its URL.
    pub url: String,
    /// What happened, in words.
    pub what: String,
    /// Its signed request/answer pair, when the mirror signed something wrong.
    pub evidence: Option<Evidence>,
}

/// The result of a retrieval.
#[derive(Debug, Clone)]
pub struct Retrieval {
    /// `(index, block)` for every requested index, in round order.
    pub blocks: Vec<(usize, Vec<u8>)>,
    /// Mirrors that were down or cheated on the way.
    pub incidents: Vec<Incident>,
    /// Traffic per mirror of the list.
    pub stats: Vec<MirrorStats>,
    /// Mirrors (list indices) in the positions used at the end.
    pub assignment: Vec<usize>,
}

/// Why a retrieval failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum FetchError {
    /// Fewer mirrors listed than the scheme needs.
    #[error("the scheme needs {need} mirrors but the mirror list has {have}")]
    NotEnoughMirrors {
        /// Servers the scheme needs.
        need: usize,
        /// Mirrors available.
        have: usize,
    },
    /// A mirror failed and no spare was left to replace it.
    #[error("mirror {url} failed: {reason} (no spare mirror left in the list)")]
    MirrorFailed {
        /// The mirror.
        url: String,
        /// What went wrong.
        reason: String,
        /// Everything that went wrong before.
        incidents: Vec<Incident>,
    },
    /// A block failed its check and the culprit could not be isolated.
    #[error(
        "block {block} failed its manifest hash: one of {suspects:?} sent a wrong answer; \
         list a spare mirror to find out which (their signed answers were kept)"
    )]
    WrongBlock {
        /// The block index.
        block: usize,
        /// URLs of the mirrors in that attempt.
        suspects: Vec<String>,
        /// Incidents, with the suspects' signed answers as evidence.
        incidents: Vec<Incident>,
    },
    /// The scheme refused the parameters or indices (a caller bug).
    #[error(transparent)]
    Scheme(#[from] Error),
}

/// Groups `indices` into rounds of at most `per_round` blocks, no two in the same chunk.
/// Round `t` takes the `t`-th requested index of every chunk, so the number of rounds is the
/// largest number of requested blocks in one chunk.
pub fn plan_rounds(
    indices: &[usize],
    per_round: usize,
    chunk_of: impl Fn(usize) -> usize,
) -> Vec<Vec<usize>> {
    if per_round <= 1 {
        return indices.iter().map(|&i| vec![i]).collect();
    }
    let mut rounds: Vec<Vec<usize>> = Vec::new();
    let mut used: Vec<std::collections::HashSet<usize>> = Vec::new();
    for &index in indices {
        let chunk = chunk_of(index);
        let slot =
            (0..rounds.len()).find(|&t| rounds[t].len() < per_round && !used[t].contains(&chunk));
        match slot {
            Some(t) => {
                rounds[t].push(index);
                used[t].insert(chunk);
            }
            None => {
                rounds.push(vec![index]);
                used.push([chunk].into_iter().collect());
            }
        }
    }
    rounds
}

enum PositionFailure {
    /// Unreachable, refused, or unsigned garbage: replace it.
    Unusable(String),
    /// Signed something invalid: replace it and keep the evidence.
    Signed(String),
}

struct Attempt {
    /// Decoded blocks per round.
    blocks: Vec<Vec<Vec<u8>>>,
    /// (round, position in round) of blocks that failed the check.
    bad: Vec<(usize, usize)>,
    requests: Vec<Vec<u8>>,
    replies: Vec<Vec<u8>>,
}

enum AttemptError {
    Mirrors(Vec<(usize, PositionFailure, Vec<u8>, Vec<u8>)>),
    Scheme(Error),
}

struct Retriever<'a, S, T> {
    scheme: &'a S,
    transport: Arc<T>,
    mirrors: &'a [MirrorInfo],
    options: &'a RetrieveOptions,
    stats: Vec<MirrorStats>,
    verify: &'a (dyn Fn(usize, &[u8]) -> bool + Sync),
}

impl<S: MultiServerScheme, T: Transport> Retriever<'_, S, T> {
    async fn attempt(
        &mut self,
        assignment: &[usize],
        rounds: &[Vec<usize>],
        rng: &mut impl CryptoRng,
    ) -> Result<Attempt, AttemptError> {
        let n = assignment.len();
        let mut states = Vec::with_capacity(rounds.len());
        let mut queries: Vec<Vec<S::Query>> =
            (0..n).map(|_| Vec::with_capacity(rounds.len())).collect();
        for round in rounds {
            let (per_server, state) = self
                .scheme
                .query(round, rng)
                .map_err(AttemptError::Scheme)?;
            states.push(state);
            for (position, query) in per_server.into_iter().enumerate() {
                queries[position].push(query);
            }
        }
        let requests: Vec<Vec<u8>> = queries
            .iter()
            .map(|qs| {
                let bodies: Vec<Vec<u8>> = qs.iter().map(|q| self.scheme.encode_query(q)).collect();
                reply::request(self.scheme.id(), &self.options.release_id, &bodies)
            })
            .collect();

        let max_reply = framing::reply_bytes(rounds.len(), self.options.max_answer);
        let mut exchanges = JoinSet::new();
        for (position, request) in requests.iter().enumerate() {
            let transport = self.transport.clone();
            let mirror = assignment[position];
            let request = request.clone();
            exchanges.spawn(async move {
                (
                    position,
                    transport.exchange(mirror, request, max_reply).await,
                )
            });
        }
        let mut replies = vec![Vec::new(); n];
        let mut answers: Vec<Vec<S::Answer>> = (0..n).map(|_| Vec::new()).collect();
        let mut failures = Vec::new();
        while let Some(joined) = exchanges.join_next().await {
            let Ok((position, result)) = joined else {
                continue;
            };
            let mirror = assignment[position];
            let stats = &mut self.stats[mirror];
            stats.requests += 1;
            stats.queries += rounds.len() as u64;
            stats.bytes_sent += requests[position].len() as u64;
            match result {
                Err(error) => failures.push((
                    position,
                    PositionFailure::Unusable(error.to_string()),
                    Vec::new(),
                    Vec::new(),
                )),
                Ok(reply) => {
                    stats.bytes_received += reply.len() as u64;
                    match self.check_reply(mirror, &requests[position], &reply, &queries[position])
                    {
                        Ok(decoded) => answers[position] = decoded,
                        Err(failure) => failures.push((
                            position,
                            failure,
                            requests[position].clone(),
                            reply.clone(),
                        )),
                    }
                    replies[position] = reply;
                }
            }
        }
        // Positions that never reported (a panicked task) are failures too.
        for (position, reply) in replies.iter().enumerate() {
            let reported = !reply.is_empty() || failures.iter().any(|f| f.0 == position);
            if !reported {
                failures.push((
                    position,
                    PositionFailure::Unusable("request task failed".into()),
                    Vec::new(),
                    Vec::new(),
                ));
            }
        }
        if !failures.is_empty() {
            return Err(AttemptError::Mirrors(failures));
        }

        let mut per_position: Vec<std::vec::IntoIter<S::Answer>> =
            answers.into_iter().map(Vec::into_iter).collect();
        let mut blocks = Vec::with_capacity(rounds.len());
        let mut bad = Vec::new();
        for (t, state) in states.iter().enumerate() {
            let round_answers: Vec<S::Answer> =
                per_position.iter_mut().filter_map(Iterator::next).collect();
            let decoded = self
                .scheme
                .decode(state, &round_answers)
                .map_err(AttemptError::Scheme)?;
            for (k, block) in decoded.iter().enumerate() {
                if !(self.verify)(rounds[t][k], block) {
                    bad.push((t, k));
                }
            }
            blocks.push(decoded);
        }
        Ok(Attempt {
            blocks,
            bad,
            requests,
            replies,
        })
    }

    fn check_reply(
        &self,
        mirror: usize,
        request: &[u8],
        reply: &[u8],
        queries: &[S::Query],
    ) -> Result<Vec<S::Answer>, PositionFailure> {
        let expect = Expect {
            scheme: self.scheme.id(),
            database_id: &self.options.release_id,
            key: &self.mirrors[mirror].key,
            count: queries.len(),
            max_answer: self.options.max_answer,
        };
        let answers = reply::open(reply, request, expect).map_err(|e| match e {
            ReplyError::Signed(_) => PositionFailure::Signed(e.to_string()),
            other => PositionFailure::Unusable(other.to_string()),
        })?;
        answers
            .iter()
            .zip(queries)
            .map(|(bytes, query)| self.scheme.decode_answer(query, bytes))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PositionFailure::Signed(format!("signed a malformed answer: {e}")))
    }
}

/// Retrieves the blocks of `rounds` (each round one query, as [`plan_rounds`] makes them)
/// privately from `mirrors`, checking each block with `verify(index, block)`.
#[allow(clippy::too_many_arguments)]
pub async fn retrieve<S: MultiServerScheme, T: Transport>(
    scheme: &S,
    transport: Arc<T>,
    mirrors: &[MirrorInfo],
    options: &RetrieveOptions,
    rounds: &[Vec<usize>],
    verify: &(dyn Fn(usize, &[u8]) -> bool + Sync),
    rng: &mut impl CryptoRng,
) -> Result<Retrieval, FetchError> {
    let n = scheme.servers();
    if mirrors.len() < n {
        return Err(FetchError::NotEnoughMirrors {
            need: n,
            have: mirrors.len(),
        });
    }
    let mut this = Retriever {
        scheme,
        transport,
        mirrors,
        options,
        stats: vec![MirrorStats::default(); mirrors.len()],
        verify,
    };
    let mut assignment: Vec<usize> = (0..n).collect();
    let mut spares: VecDeque<usize> = (n..mirrors.len()).collect();
    let mut incidents: Vec<Incident> = Vec::new();
    let mut blocks = Vec::new();

    for group in rounds.chunks(MAX_BATCH) {
        loop {
            let attempt = match this.attempt(&assignment, group, rng).await {
                Ok(attempt) => attempt,
                Err(AttemptError::Scheme(e)) => return Err(FetchError::Scheme(e)),
                Err(AttemptError::Mirrors(failures)) => {
                    for (position, failure, request, reply) in failures {
                        let mirror = assignment[position];
                        let (what, evidence) = match failure {
                            PositionFailure::Unusable(what) => (what, None),
                            PositionFailure::Signed(what) => {
                                let ev = Evidence::new(
                                    &mirrors[mirror],
                                    options.release_id,
                                    request,
                                    reply,
                                );
                                (what, Some(ev))
                            }
                        };
                        tracing::warn!(mirror = %mirrors[mirror].url, %what, "mirror failed; trying a spare");
                        incidents.push(Incident {
                            mirror,
                            url: mirrors[mirror].url.clone(),
                            what: what.clone(),
                            evidence,
                        });
                        match spares.pop_front() {
                            Some(spare) => assignment[position] = spare,
                            None => {
                                return Err(FetchError::MirrorFailed {
                                    url: mirrors[mirror].url.clone(),
                                    reason: what,
                                    incidents,
                                })
                            }
                        }
                    }
                    continue;
                }
            };
            let decoded = if attempt.bad.is_empty() {
                attempt.blocks
            } else {
                this.isolate(
                    &mut assignment,
                    &mut spares,
                    group,
                    &attempt,
                    &mut incidents,
                    rng,
                )
                .await?
            };
            for (round, round_blocks) in group.iter().zip(decoded) {
                blocks.extend(round.iter().copied().zip(round_blocks));
            }
            break;
        }
    }
    Ok(Retrieval {
        blocks,
        incidents,
        stats: this.stats,
        assignment,
    })
}

impl<S: MultiServerScheme, T: Transport> Retriever<'_, S, T> {
    /// Finds the mirror whose answer broke `failed` by swapping positions for spares; returns
    /// the group's blocks with the broken rounds replaced by verified ones.
    async fn isolate(
        &mut self,
        assignment: &mut [usize],
        spares: &mut VecDeque<usize>,
        group: &[Vec<usize>],
        failed: &Attempt,
        incidents: &mut Vec<Incident>,
        rng: &mut impl CryptoRng,
    ) -> Result<Vec<Vec<Vec<u8>>>, FetchError> {
        let mut bad_rounds: Vec<usize> = failed.bad.iter().map(|&(t, _)| t).collect();
        bad_rounds.dedup();
        let retry: Vec<Vec<usize>> = bad_rounds.iter().map(|&t| group[t].clone()).collect();
        let first_bad_block = group[failed.bad[0].0][failed.bad[0].1];

        let mut position = 0;
        while position < assignment.len() {
            let Some(&spare) = spares.front() else { break };
            let mut trial = assignment.to_vec();
            trial[position] = spare;
            match self.attempt(&trial, &retry, rng).await {
                Ok(fixed) if fixed.bad.is_empty() => {
                    spares.pop_front();
                    let culprit = assignment[position];
                    let evidence = Evidence::new(
                        &self.mirrors[culprit],
                        self.options.release_id,
                        failed.requests[position].clone(),
                        failed.replies[position].clone(),
                    );
                    let what = format!(
                        "sent a wrong answer: block {first_bad_block} failed its manifest hash, and verified once this mirror was replaced"
                    );
                    tracing::warn!(mirror = %self.mirrors[culprit].url, "mirror sent a wrong answer");
                    incidents.push(Incident {
                        mirror: culprit,
                        url: self.mirrors[culprit].url.clone(),
                        what,
                        evidence: Some(evidence),
                    });
                    assignment[position] = spare;
                    let mut blocks = failed.blocks.clone();
                    for (k, &t) in bad_rounds.iter().enumerate() {
                        blocks[t] = fixed.blocks[k].clone();
                    }
                    return Ok(blocks);
                }
                Ok(_) => position += 1,
                Err(AttemptError::Scheme(e)) => return Err(FetchError::Scheme(e)),
                Err(AttemptError::Mirrors(failures)) => {
                    // The spare failed during the trial: drop it and try this position again
                    // with the next spare. If a mirror already in use failed instead, there is
                    // nobody left to compare against: give up naming it.
                    for (p, failure, _, _) in failures {
                        let mirror = trial[p];
                        let what = match failure {
                            PositionFailure::Unusable(w) | PositionFailure::Signed(w) => w,
                        };
                        incidents.push(Incident {
                            mirror,
                            url: self.mirrors[mirror].url.clone(),
                            what: what.clone(),
                            evidence: None,
                        });
                        if mirror == spare {
                            spares.retain(|&s| s != mirror);
                        } else {
                            return Err(FetchError::MirrorFailed {
                                url: self.mirrors[mirror].url.clone(),
                                reason: what,
                                incidents: std::mem::take(incidents),
                            });
                        }
                    }
                }
            }
        }
        let suspects: Vec<String> = assignment
            .iter()
            .map(|&m| self.mirrors[m].url.clone())
            .collect();
        for (position, &mirror) in assignment.iter().enumerate() {
            incidents.push(Incident {
                mirror,
                url: self.mirrors[mirror].url.clone(),
                what: format!("suspect: took part in the attempt where block {first_bad_block} failed its hash"),
                evidence: Some(Evidence::new(
                    &self.mirrors[mirror],
                    self.options.release_id,
                    failed.requests[position].clone(),
                    failed.replies[position].clone(),
                )),
            });
        }
        Err(FetchError::WrongBlock {
            block: first_bad_block,
            suspects,
            incidents: std::mem::take(incidents),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rounds_are_chunk_disjoint_and_bounded() {
        let indices: Vec<usize> = (10..30).collect();
        let rounds = plan_rounds(&indices, 3, |i| i % 3);
        assert_eq!(rounds.len(), 7); // ceil(20 / 3)
        for round in &rounds {
            assert!(round.len() <= 3);
            let mut chunks: Vec<usize> = round.iter().map(|i| i % 3).collect();
            chunks.sort();
            chunks.dedup();
            assert_eq!(chunks.len(), round.len());
        }
        let mut all: Vec<usize> = rounds.concat();
        all.sort();
        assert_eq!(all, indices);
        assert_eq!(plan_rounds(&indices, 1, |i| i).len(), 20);
    }
}
