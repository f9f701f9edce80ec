//! Running a multi-server scheme over real mirrors, with failures.
//!
//! The client assigns the first `n` mirrors of the list to the scheme's `n` server positions
//! and keeps the rest as spares. Every answer must carry a valid signature from its mirror;
//! every decoded block must pass the caller's check (the manifest's SHA-256).
//!
//! - A mirror that is down, refuses, or sends something malformed is replaced by a spare and
//!   the batch is asked again with fresh randomness; with no spare left the error names it.
//! - A block that fails its check means at least one mirror answered wrongly. For each position
//!   in turn, the client sends a spare the EXACT request that position was sent and decodes the
//!   failing rounds again with the spare's answer in its place; if every block then verifies,
//!   that position's signed answer is proven inconsistent with the vendor's hashes given the
//!   other answers, and it is kept as [`Evidence`]. A mirror is never named on a retry with fresh
//!   randomness (a corrupt row spoils only the queries that select it). Without a usable spare
//!   the error lists the suspects and keeps all their signed answers.
//!
//! Privacy of retries: every attempt is a complete, independent PIR query with fresh
//! randomness, and a spare asked during isolation receives one position's query unchanged, so
//! each set of mirrors asked learns nothing unless all of the mirrors of one query (Chor) or
//! `r` of them (RAID-PIR) collude. Users listing spares should read the
//! assumption as ranging over every mirror that may be asked.

use std::collections::VecDeque;
use std::sync::Arc;

use pir_core::protocol::MAX_BATCH;
use pir_core::{Error, MultiServerScheme};
use pir_service::reply::ReplyError;
use rand::CryptoRng;
use tokio::task::JoinSet;

use crate::exchange::{exchange, resend, Call, ExchangeError, Exchanged};
use crate::{Evidence, Transport};

pub use crate::transport::MirrorInfo;

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

/// A round's index in its group and its decoded blocks.
type RoundBlocks = (usize, Vec<Vec<u8>>);

struct Attempt<S: MultiServerScheme> {
    /// Decoded blocks per round.
    blocks: Vec<Vec<Vec<u8>>>,
    /// (round, position in round) of blocks that failed the check.
    bad: Vec<(usize, usize)>,
    /// The client state of each round, to decode again with one position's answers replaced.
    states: Vec<S::ClientState>,
    /// The queries each position was sent, round by round.
    queries: Vec<Vec<S::Query>>,
    requests: Vec<Vec<u8>>,
    replies: Vec<Vec<u8>>,
    /// Each position's checked answer bodies, round by round, to decode again.
    answers: Vec<Vec<Vec<u8>>>,
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
    can_play: &'a (dyn Fn(usize, usize) -> bool + Sync),
}

impl<S: MultiServerScheme, T: Transport> Retriever<'_, S, T> {
    async fn attempt(
        &mut self,
        assignment: &[usize],
        rounds: &[Vec<usize>],
        rng: &mut impl CryptoRng,
    ) -> Result<Attempt<S>, AttemptError> {
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
        let mut exchanges = JoinSet::new();
        for (position, qs) in queries.iter().enumerate() {
            let transport = self.transport.clone();
            let call = self.call(assignment[position]);
            let bodies: Vec<Vec<u8>> = qs.iter().map(|q| self.scheme.encode_query(q)).collect();
            exchanges.spawn(async move {
                (position, exchange(transport.as_ref(), call, &bodies).await)
            });
        }
        let mut requests = vec![Vec::new(); n];
        let mut replies = vec![Vec::new(); n];
        let mut bodies: Vec<Vec<Vec<u8>>> = vec![Vec::new(); n];
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
            match result {
                Err(ExchangeError::Transport { request, source }) => {
                    stats.bytes_sent += request.len() as u64;
                    failures.push((
                        position,
                        PositionFailure::Unusable(source.to_string()),
                        Vec::new(),
                        Vec::new(),
                    ));
                }
                Err(ExchangeError::Reply {
                    request,
                    reply,
                    error,
                }) => {
                    stats.bytes_sent += request.len() as u64;
                    stats.bytes_received += reply.len() as u64;
                    failures.push((position, failure(error), request, reply.clone()));
                    replies[position] = reply;
                }
                Ok(exchanged) => {
                    stats.bytes_sent += exchanged.request.len() as u64;
                    stats.bytes_received += exchanged.reply.len() as u64;
                    match self.decode_answers(&exchanged.answers, &queries[position]) {
                        Ok(decoded) => answers[position] = decoded,
                        Err(failure) => failures.push((
                            position,
                            failure,
                            exchanged.request.clone(),
                            exchanged.reply.clone(),
                        )),
                    }
                    let Exchanged {
                        request,
                        reply,
                        answers,
                    } = exchanged;
                    requests[position] = request;
                    replies[position] = reply;
                    bodies[position] = answers;
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
            states,
            queries,
            requests,
            replies,
            answers: bodies,
        })
    }

    /// What `mirror` is asked and what its reply must match.
    fn call(&self, mirror: usize) -> Call {
        Call {
            server: mirror,
            scheme: self.scheme.id(),
            database_id: self.options.release_id,
            key: self.mirrors[mirror].key,
            max_answer: self.options.max_answer,
        }
    }

    /// The scheme answers of checked answer bodies; one that does not decode was signed.
    fn decode_answers(
        &self,
        bodies: &[Vec<u8>],
        queries: &[S::Query],
    ) -> Result<Vec<S::Answer>, PositionFailure> {
        bodies
            .iter()
            .zip(queries)
            .map(|(bytes, query)| self.scheme.decode_answer(query, bytes))
            .collect::<Result<Vec<_>, _>>()
            .map_err(|e| PositionFailure::Signed(format!("signed a malformed answer: {e}")))
    }
}

/// What a reply that did not check means for its position: only a signed inconsistency is
/// evidence.
fn failure(error: ReplyError) -> PositionFailure {
    match error {
        ReplyError::Signed(_) => PositionFailure::Signed(error.to_string()),
        other => PositionFailure::Unusable(other.to_string()),
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
    retrieve_with_roles(
        scheme,
        transport,
        mirrors,
        options,
        rounds,
        verify,
        &|_, _| true,
        rng,
    )
    .await
}

/// [`retrieve`] where not every mirror can play every server position: `can_play(mirror,
/// position)` says which can (a chunk-only RAID-PIR mirror holds the chunks of some positions
/// only). Mirror `k < n` plays position `k` first (the caller checks it can); a spare replaces
/// a position only if it can play it.
#[allow(clippy::too_many_arguments)]
pub async fn retrieve_with_roles<S: MultiServerScheme, T: Transport>(
    scheme: &S,
    transport: Arc<T>,
    mirrors: &[MirrorInfo],
    options: &RetrieveOptions,
    rounds: &[Vec<usize>],
    verify: &(dyn Fn(usize, &[u8]) -> bool + Sync),
    can_play: &(dyn Fn(usize, usize) -> bool + Sync),
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
        can_play,
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
                        let slot = spares.iter().position(|&m| can_play(m, position));
                        match slot.and_then(|slot| spares.remove(slot)) {
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
    /// Finds the mirror whose answer broke `failed`, with proof; returns the group's blocks
    /// with the broken rounds replaced by verified ones.
    ///
    /// For each position in turn, the spare is sent the EXACT request that position was sent.
    /// The failed rounds are then decoded again with the spare's answers in place of that
    /// position's. If every block now matches the vendor's hash, the position's signed answer is
    /// proven wrong: given the other positions' signed answers, the block is a bijection of
    /// that position's answer (XOR), so only the spare's answer is consistent with the vendor's
    /// hash, and the position's answer differs from it. A position whose answer equals the
    /// spare's, or that swapping does not repair, is never named. (A fresh-randomness retry
    /// that happens to verify proves nothing: a corrupt row spoils only the answers whose
    /// random query selects it.)
    ///
    /// Privacy: the spare receives one query exactly as that position did; it learns what that
    /// position learned, so the assumption ranges over every mirror that may be asked.
    async fn isolate(
        &mut self,
        assignment: &mut [usize],
        spares: &mut VecDeque<usize>,
        group: &[Vec<usize>],
        failed: &Attempt<S>,
        incidents: &mut Vec<Incident>,
    ) -> Result<Vec<Vec<Vec<u8>>>, FetchError> {
        let mut bad_rounds: Vec<usize> = failed.bad.iter().map(|&(t, _)| t).collect();
        bad_rounds.dedup();
        let first_bad_block = group[failed.bad[0].0][failed.bad[0].1];

        let mut position = 0;
        while position < assignment.len() {
            if spares.is_empty() {
                break;
            }
            let Some(slot) = spares.iter().position(|&m| (self.can_play)(m, position)) else {
                position += 1;
                continue;
            };
            let spare = spares[slot];
            let stats = &mut self.stats[spare];
            stats.requests += 1;
            stats.queries += group.len() as u64;
            stats.bytes_sent += failed.requests[position].len() as u64;
            let exchanged = resend(
                self.transport.as_ref(),
                self.call(spare),
                failed.requests[position].clone(),
                failed.queries[position].len(),
            )
            .await;
            let checked = match exchanged {
                Err(error) => {
                    if let ExchangeError::Reply { reply, .. } = &error {
                        self.stats[spare].bytes_received += reply.len() as u64;
                    }
                    Err(error.to_string())
                }
                Ok(exchanged) => {
                    self.stats[spare].bytes_received += exchanged.reply.len() as u64;
                    self.decode_answers(&exchanged.answers, &failed.queries[position])
                        .map_err(|failure| match failure {
                            PositionFailure::Unusable(w) | PositionFailure::Signed(w) => w,
                        })
                }
            };
            let spare_answers = match checked {
                Ok(answers) => answers,
                Err(what) => {
                    // The spare is of no use: drop it and try this position with the next one.
                    tracing::warn!(mirror = %self.mirrors[spare].url, %what, "spare failed");
                    incidents.push(Incident {
                        mirror: spare,
                        url: self.mirrors[spare].url.clone(),
                        what,
                        evidence: None,
                    });
                    spares.remove(slot);
                    continue;
                }
            };
            if let Some(repaired) = self.repair(
                assignment,
                position,
                spare_answers,
                group,
                &bad_rounds,
                failed,
            )? {
                spares.remove(slot);
                let culprit = assignment[position];
                let evidence = Evidence::new(
                    &self.mirrors[culprit],
                    self.options.release_id,
                    failed.requests[position].clone(),
                    failed.replies[position].clone(),
                );
                let what = format!(
                    "sent a wrong answer: block {first_bad_block} failed its manifest hash, and \
                     the spare {}'s signed answer to the same query repairs it",
                    self.mirrors[spare].url
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
                for (t, round_blocks) in repaired {
                    blocks[t] = round_blocks;
                }
                return Ok(blocks);
            }
            position += 1;
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

    /// Decodes the `bad_rounds` of `failed` again with `replacement` as the answers of
    /// `position`; the repaired rounds if every block of them now verifies.
    fn repair(
        &self,
        assignment: &[usize],
        position: usize,
        replacement: Vec<S::Answer>,
        group: &[Vec<usize>],
        bad_rounds: &[usize],
        failed: &Attempt<S>,
    ) -> Result<Option<Vec<RoundBlocks>>, FetchError> {
        let mut per_position: Vec<Vec<Option<S::Answer>>> = Vec::with_capacity(assignment.len());
        for p in 0..assignment.len() {
            let answers = if p == position {
                replacement.iter().map(|_| None).collect()
            } else {
                // These answers decoded in the failed attempt.
                self.decode_answers(&failed.answers[p], &failed.queries[p])
                    .map_err(|_| {
                        FetchError::Scheme(Error::Malformed(
                            "an answer that decoded no longer does".into(),
                        ))
                    })?
                    .into_iter()
                    .map(Some)
                    .collect()
            };
            per_position.push(answers);
        }
        let mut replacement: Vec<Option<S::Answer>> = replacement.into_iter().map(Some).collect();
        let mut repaired = Vec::with_capacity(bad_rounds.len());
        for &t in bad_rounds {
            let round_answers: Vec<S::Answer> = (0..assignment.len())
                .filter_map(|p| {
                    if p == position {
                        replacement.get_mut(t).and_then(Option::take)
                    } else {
                        per_position[p].get_mut(t).and_then(Option::take)
                    }
                })
                .collect();
            if round_answers.len() != assignment.len() {
                return Ok(None);
            }
            let decoded = self.scheme.decode(&failed.states[t], &round_answers)?;
            let all_verify = decoded
                .iter()
                .enumerate()
                .all(|(k, block)| (self.verify)(group[t][k], block));
            if !all_verify {
                return Ok(None);
            }
            repaired.push((t, decoded));
        }
        Ok(Some(repaired))
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
