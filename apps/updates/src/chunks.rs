//! Fetching from chunk-only mirrors (RAID-PIR, Günther 2019, section 3.2).
//!
//! With `n` servers, redundancy `r` and `c` chunks, server position `s` scans only the chunks
//! `j` with `(s - j) mod n < r`, so a mirror started with `pir mirror serve --chunks` keeps only
//! those and the signed mirror list says which it holds. A fetch then needs `n` distinct
//! mirrors, one per position, each holding that position's chunks: [`arrange`] finds them
//! among the mirrors drawn at random for the fetch (a matching of positions to mirrors, the
//! first mirrors of the random order first), and the rest stay spares, each usable only for
//! the positions it can play ([`roles`]).
//!
//! Privacy is RAID-PIR's: the index stays hidden unless `r` of the `n` mirrors asked collude.
//! Which mirror plays which position depends only on the list and the random draw, never on
//! the file fetched.

use pir_client::MirrorInfo;
use pir_core::{DbShape, MultiServerScheme};
use pir_xor::held::ChunkSet;
use pir_xor::{AnswerMode, RaidPir};

use crate::mirrors::format_chunks;
use crate::scheme_choice::SchemeChoice;
use crate::UpdateError;

/// `choice` fitted to the list: with chunk-only mirrors, RAID-PIR uses their chunk count
/// (they answer no other); all must agree on it.
pub fn fit_choice(
    choice: SchemeChoice,
    holds: &[Option<ChunkSet>],
) -> Result<SchemeChoice, UpdateError> {
    let mut counts: Vec<usize> = holds.iter().flatten().map(|s| s.chunk_count).collect();
    counts.sort_unstable();
    counts.dedup();
    match (choice, counts.as_slice()) {
        (_, []) => Ok(choice),
        (
            SchemeChoice::RaidPir {
                servers,
                redundancy,
                ..
            },
            [c],
        ) => Ok(SchemeChoice::RaidPir {
            servers,
            redundancy,
            chunks: *c,
        }),
        (SchemeChoice::RaidPir { .. }, _) => Err(UpdateError::Input(format!(
            "the mirror list's chunk-only mirrors split the release into different chunk counts \
             ({counts:?}); a RAID-PIR fetch needs one: the vendor must list mirrors of one \
             partition"
        ))),
        _ => Ok(choice),
    }
}

/// The RAID-PIR parameters whose positions chunk-only mirrors must cover, if `choice` is
/// RAID-PIR (the mode does not change which chunks a position processes).
fn raid_of(shape: DbShape, choice: SchemeChoice) -> Option<RaidPir> {
    match choice {
        SchemeChoice::RaidPir {
            servers,
            redundancy,
            chunks,
        } => RaidPir::new(
            shape,
            servers,
            redundancy,
            chunks.min(shape.block_count()),
            AnswerMode::Single,
        )
        .ok(),
        _ => None,
    }
}

/// Whether mirror `m` (holding `holds[m]`) can play `position` of `raid`.
fn can_play(holds: &[Option<ChunkSet>], raid: Option<&RaidPir>, m: usize, position: usize) -> bool {
    match (&holds[m], raid) {
        (None, _) => true,
        (Some(set), Some(raid)) => set.can_play(raid, position),
        (Some(_), None) => false,
    }
}

/// The mirror order of one fetch from `drawn` (a random order, preferred mirrors first):
/// unchanged when no mirror is chunk-only. Otherwise, for RAID-PIR, `n` mirrors that can play
/// positions `0..n` (in position order) followed by the others in drawn order as spares; for
/// another scheme, the whole-release mirrors only. A clear error when the mirrors cannot cover
/// every position.
pub fn arrange(
    drawn: Vec<usize>,
    holds: &[Option<ChunkSet>],
    mirrors: &[MirrorInfo],
    shape: DbShape,
    choice: SchemeChoice,
) -> Result<Vec<usize>, UpdateError> {
    if holds.iter().all(Option::is_none) {
        return Ok(drawn);
    }
    let n = choice.servers();
    let Some(raid) = raid_of(shape, choice) else {
        let whole: Vec<usize> = drawn.into_iter().filter(|&m| holds[m].is_none()).collect();
        if whole.len() < n {
            return Err(UpdateError::Input(format!(
                "{} needs {n} mirrors holding the whole release and the list has {}; the \
                 others hold only some RAID-PIR chunks: fetch with RAID-PIR (--scheme raid-pir) \
                 instead",
                choice.id().name(),
                whole.len()
            )));
        }
        return Ok(whole);
    };
    // Kuhn's augmenting paths: position -> mirror, trying mirrors in drawn order.
    let mut player: Vec<Option<usize>> = vec![None; n];
    for position in 0..n {
        let mut seen = vec![false; drawn.len()];
        if !augment(position, &drawn, holds, &raid, &mut player, &mut seen) {
            return Err(uncovered(position, &raid, holds, mirrors));
        }
    }
    let chosen: Vec<usize> = player.iter().flatten().copied().collect();
    let spares = drawn.iter().copied().filter(|m| !chosen.contains(m));
    Ok(chosen.iter().copied().chain(spares).collect())
}

/// Finds a mirror for `position`, moving others to other positions if need be.
fn augment(
    position: usize,
    drawn: &[usize],
    holds: &[Option<ChunkSet>],
    raid: &RaidPir,
    player: &mut [Option<usize>],
    seen: &mut [bool],
) -> bool {
    for (k, &m) in drawn.iter().enumerate() {
        if seen[k] || !can_play(holds, Some(raid), m, position) {
            continue;
        }
        seen[k] = true;
        let holder = player.iter().position(|p| *p == Some(m));
        let free = match holder {
            None => true,
            Some(other) => augment(other, drawn, holds, raid, player, seen),
        };
        if free {
            player[position] = Some(m);
            return true;
        }
    }
    false
}

/// Why no set of mirrors covers every chunk.
fn uncovered(
    position: usize,
    raid: &RaidPir,
    holds: &[Option<ChunkSet>],
    mirrors: &[MirrorInfo],
) -> UpdateError {
    let needs: Vec<String> = raid
        .processed_chunks(position)
        .map(|j| j.to_string())
        .collect();
    let held: Vec<String> = holds
        .iter()
        .zip(mirrors)
        .map(|(set, m)| match set {
            Some(set) => format!("{} holds {}", m.url, format_chunks(set)),
            None => format!("{} holds everything", m.url),
        })
        .collect();
    UpdateError::Input(format!(
        "the mirrors cannot cover every chunk: RAID-PIR with n = {}, r = {} and c = {} needs a \
         distinct mirror for each of its {} server positions, and none is left for position \
         {position}, which needs chunks {} (mirrors: {}); the vendor must list mirrors holding \
         every position's chunks, or fetch with fewer servers",
        raid.servers(),
        raid.redundancy(),
        raid.chunks(),
        raid.servers(),
        needs.join(", "),
        held.join("; ")
    ))
}

/// Which mirror of the fetch's order can play which position: `can(k, p)` for mirror `order[k]`
/// and RAID-PIR position `p` (always true without chunk-only mirrors).
pub fn roles(
    order: &[usize],
    holds: &[Option<ChunkSet>],
    shape: DbShape,
    choice: SchemeChoice,
) -> impl Fn(usize, usize) -> bool + Sync {
    let raid = raid_of(shape, choice);
    let holds: Vec<Option<ChunkSet>> = order.iter().map(|&m| holds[m].clone()).collect();
    move |k, position| k < holds.len() && can_play(&holds, raid.as_ref(), k, position)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::seq::SliceRandom;
    use rand::SeedableRng;

    fn set(chunks: &[usize]) -> Option<ChunkSet> {
        Some(ChunkSet::new(4, chunks.to_vec()).unwrap())
    }

    fn infos(n: usize) -> Vec<MirrorInfo> {
        (0..n)
            .map(|i| MirrorInfo {
                url: format!("https://m{i}:1"),
                key: pir_keys::PublicKey([i as u8; 32]),
            })
            .collect()
    }

    const RAID: SchemeChoice = SchemeChoice::RaidPir {
        servers: 4,
        redundancy: 2,
        chunks: 4,
    };

    #[test]
    fn every_position_gets_a_mirror_holding_its_chunks_and_spares_only_theirs() {
        let shape = DbShape::new(100, 64).unwrap();
        // Position s of n = 4, r = 2, c = 4 processes chunks s - 1 and s (mod 4).
        let holds = vec![
            set(&[0, 3]),
            set(&[0, 1]),
            set(&[1, 2]),
            set(&[2, 3]),
            set(&[0, 1]),
            None,
        ];
        let raid = raid_of(shape, RAID).unwrap();
        let mut rng = rand_chacha::ChaCha20Rng::seed_from_u64(1);
        let mut first = std::collections::HashSet::new();
        for _ in 0..50 {
            let mut drawn: Vec<usize> = (0..holds.len()).collect();
            drawn.shuffle(&mut rng);
            let order = arrange(drawn, &holds, &infos(6), shape, RAID).unwrap();
            assert_eq!(order.len(), 6);
            for (p, &m) in order[..4].iter().enumerate() {
                assert!(can_play(&holds, Some(&raid), m, p), "{order:?}");
            }
            first.insert(order[1]);
            let can = roles(&order, &holds, shape, RAID);
            for (k, &m) in order.iter().enumerate() {
                for p in 0..4 {
                    assert_eq!(can(k, p), can_play(&holds, Some(&raid), m, p));
                }
            }
            assert!(!can(6, 0));
        }
        // Position 1 goes to mirror 1, 4 or 5 at random, not always the same.
        assert!(first.len() >= 2, "{first:?}");
    }

    #[test]
    fn mirrors_that_cannot_cover_every_chunk_are_a_clear_error() {
        let shape = DbShape::new(100, 64).unwrap();
        let holds = vec![set(&[0, 3]), set(&[0, 1]), set(&[0, 1]), set(&[2, 3])];
        let error = arrange(vec![0, 1, 2, 3], &holds, &infos(4), shape, RAID)
            .unwrap_err()
            .to_string();
        assert!(
            error.contains("cannot cover every chunk") && error.contains("chunks 1, 2"),
            "{error}"
        );
        assert!(error.contains("https://m1:1 holds 0,1/4"), "{error}");
        // Chor needs whole mirrors: the chunk-only ones are left out, and too few is an error.
        let chor = SchemeChoice::Chor { servers: 2 };
        let mut mixed = holds.clone();
        mixed.push(None);
        let error = arrange(vec![4, 0, 1, 2, 3], &mixed, &infos(5), shape, chor)
            .unwrap_err()
            .to_string();
        assert!(error.contains("raid-pir"), "{error}");
        mixed.push(None);
        assert_eq!(
            arrange(vec![5, 0, 4], &mixed, &infos(6), shape, chor).unwrap(),
            vec![5, 4]
        );
        // Without chunk-only mirrors the drawn order stands.
        let whole = vec![None; 3];
        assert_eq!(
            arrange(vec![2, 0, 1], &whole, &infos(3), shape, chor).unwrap(),
            vec![2, 0, 1]
        );
    }

    #[test]
    fn the_chunk_count_comes_from_the_list() {
        let holds = vec![Some(ChunkSet::new(6, vec![0]).unwrap()), None];
        let fitted = fit_choice(RAID, &holds).unwrap();
        assert_eq!(
            fitted,
            SchemeChoice::RaidPir {
                servers: 4,
                redundancy: 2,
                chunks: 6
            }
        );
        let mixed = vec![set(&[0]), Some(ChunkSet::new(6, vec![0]).unwrap())];
        assert!(fit_choice(RAID, &mixed).is_err());
        assert_eq!(fit_choice(RAID, &[None, None]).unwrap(), RAID);
    }
}
