//! YPIR row shards against the whole server, on the smallest YPIR layout (4096 row groups).

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::params::Params;
use crate::single::{SingleClient, SingleServer};
use crate::ypir::tests::{ask_in_one_batch, database_for, serve};
use crate::ypir::{YpirClient, YpirServer};

pub(in crate::ypir) const SEEDS: [crate::prg::Seed; 2] = [[1; 16], [2; 16]];

/// Shard `groups` of `bytes` (its part cut as a DoublePIR row part), built.
fn shard(params: Params, bytes: &[u8], groups: Range<usize>, version: u8) -> (YpirShard, Saved) {
    let e = params.entries_per_record();
    let rows = groups.start * e..groups.end * e;
    build_part(YpirShard::build_rows, params, bytes, rows, version)
}

/// A shard's builder over matrix rows (YPIR's or YPIR+SP's `build_rows`).
pub(in crate::ypir) type BuildRows<S> =
    fn(BuildInput<'_>, Range<usize>) -> Result<(S, Saved), Error>;

/// The shard of matrix rows `rows` of `bytes` (its part cut as a row part) that `build`
/// builds (YPIR's or YPIR+SP's).
pub(in crate::ypir) fn build_part<S>(
    build: BuildRows<S>,
    params: Params,
    bytes: &[u8],
    rows: Range<usize>,
    version: u8,
) -> (S, Saved) {
    let part = crate::double_rows::row_part(&params, bytes, &rows).unwrap();
    let input = BuildInput {
        params,
        records: &part,
        seeds: SEEDS,
        version: [version; 32],
        saved: None,
        progress: &mut |_, _| {},
    };
    build(input, rows).unwrap()
}

/// `shards` random unit ranges tiling `0..groups` (YPIR+SP's tests cut rows with it).
pub(in crate::ypir) fn cuts(
    rng: &mut ChaCha20Rng,
    groups: usize,
    shards: usize,
) -> Vec<Range<usize>> {
    let mut at = vec![0, groups];
    while at.len() < shards + 1 {
        let c = rng.random_range(1..groups);
        if !at.contains(&c) {
            at.push(c);
        }
    }
    at.sort_unstable();
    at.windows(2).map(|w| w[0]..w[1]).collect()
}

/// The front end's answers to `queries` over `shards` (YPIR's or YPIR+SP's): each query's
/// keys taken in order, the stripped query sent to every shard, the parts summed and packed.
pub(in crate::ypir) fn front_answers<S: SingleServer>(
    packing: &YpirPacking,
    shards: &[S],
    queries: &[&[u8]],
) -> Vec<Vec<u8>> {
    let decoded: Vec<Query> = queries
        .iter()
        .map(|q| packing.decode_query(q).unwrap())
        .collect();
    let keys: Vec<QueryKeys> = decoded
        .iter()
        .map(|q| packing.keys_of(q).unwrap())
        .collect();
    let stripped: Vec<Vec<u8>> = decoded.iter().map(|q| packing.shard_query(q)).collect();
    let stripped: Vec<&[u8]> = stripped.iter().map(Vec::as_slice).collect();
    let mut sums: Vec<Option<Part>> = vec![None; queries.len()];
    for (k, shard) in shards.iter().enumerate() {
        for (sum, part) in sums.iter_mut().zip(shard.answer_batch(&stripped)) {
            let part = part.unwrap();
            assert_eq!(part.len(), packing.part_bytes(k));
            let part = packing.decode_part(k, &part).unwrap();
            match sum {
                Some(sum) => sum.add(&part).unwrap(),
                None => *sum = Some(part),
            }
        }
    }
    let sums: Vec<Part> = sums.into_iter().map(Option::unwrap).collect();
    let keys: Vec<&QueryKeys> = keys.iter().collect();
    packing.pack(&keys, &sums).unwrap()
}

/// For S = 1..4 shards on random group boundaries, the front end's answers (keys uploaded by
/// the first query of the batch, named by id in the others) are the whole server's byte for
/// byte: the summed parts are the whole server's leaf bodies and masks value for value, and
/// the packing is deterministic. Each decodes to its record. The packing plan depends only on
/// the summed static masks: they are compared for every S and the plan built once (it is
/// most of the cost of a front end).
#[test]
fn row_shards_pack_to_the_whole_answer_byte_for_byte() {
    let (records, bits) = (5000u64, 8u32);
    let (params, bytes) = database_for(Scheme::Ypir, records, bits, 5);
    let shape = Shape::of(&params).unwrap();
    let (whole, client, _) = serve(params, &bytes, SEEDS, YpirServer::build, YpirClient::new);
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    let mut packing: Option<(YpirPacking, Vec<Rns>)> = None;
    for shards in 1..=4 {
        let ranges = cuts(&mut rng, shape.groups, shards);
        let (servers, offline): (Vec<_>, Vec<_>) = ranges
            .iter()
            .map(|groups| {
                let (server, saved) = shard(params, &bytes, groups.clone(), 9);
                (server, ShardOffline::decode(&saved.hint).unwrap())
            })
            .unzip();
        let (header, _, masks) = summed_masks(&offline).unwrap();
        assert_eq!(&header, whole.header());
        let (packing, first) =
            packing.get_or_insert_with(|| (YpirPacking::new(&offline).unwrap(), masks.clone()));
        assert!(masks == *first, "{ranges:?}: the static masks differ");
        // The plan is this split's too: only the shards' units differ.
        packing.units = offline.iter().map(|o| o.units.clone()).collect();
        let answers = |queries: &[&[u8]]| front_answers(packing, &servers, queries);
        ask_whole_and_front(&whole, &client, answers, &bytes, &mut rng);
    }
}

/// The first, the last and a random record asked in one batch (keys uploaded by the first
/// query, named by id in the others) of the whole server, whose answers decode to the records
/// of `bytes`, and of a front end over shards (`front`): the answers are the same byte for
/// byte.
pub(in crate::ypir) fn ask_whole_and_front(
    whole: &dyn SingleServer,
    client: &dyn SingleClient,
    front: impl Fn(&[&[u8]]) -> Vec<Vec<u8>>,
    bytes: &[u8],
    rng: &mut ChaCha20Rng,
) {
    let asked = ask_in_one_batch(whole, client, bytes, rng);
    let queries: Vec<&[u8]> = asked.iter().map(|(q, _)| q.as_slice()).collect();
    let answers = front(&queries);
    assert_eq!(answers.len(), asked.len());
    for ((_, expected), answer) in asked.iter().zip(&answers) {
        assert!(answer == expected, "the front end's answer differs");
    }
}

/// Offline parts that do not tile one database, and malformed parts, are refused (all
/// before any packing plan is built).
#[test]
fn parts_of_another_database_or_malformed_are_refused() {
    let (params, bytes) = database_for(Scheme::Ypir, 3000, 8, 6);
    let shape = Shape::of(&params).unwrap();
    let groups = shape.groups;
    let (a, a_saved) = shard(params, &bytes, 0..groups / 2, 9);
    let (_, b_saved) = shard(params, &bytes, groups / 2..groups, 9);
    let (other, other_saved) = shard(params, &bytes, groups / 2..groups, 8);
    let offline = |saved: &Saved| ShardOffline::decode(&saved.hint).unwrap();
    let (a_off, b_off) = (offline(&a_saved), offline(&b_saved));
    assert!(summed_masks(&[a_off.clone(), b_off.clone()]).is_ok());
    // Another database's shard (another version), a gap, a missing shard, the wrong order.
    assert!(YpirPacking::new(&[a_off.clone(), offline(&other_saved)]).is_err());
    assert!(YpirPacking::new(std::slice::from_ref(&a_off)).is_err());
    assert!(YpirPacking::new(&[b_off, a_off]).is_err());
    // Offline parts cut or with a residue out of range.
    let hint = &a_saved.hint;
    assert!(ShardOffline::decode(&hint[..hint.len() - 1]).is_err());
    let mut high = hint.clone();
    let at = high.len() - 4;
    high[at..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(ShardOffline::decode(&high).is_err());
    // A part: cut, a body at q2 or above, a mask residue out of range.
    let client = YpirClient::new(&a.header().encode()).unwrap();
    let (_, query) = client
        .query(17, &mut ChaCha20Rng::seed_from_u64(1))
        .unwrap();
    let decoded = wire::decode_query(&query, &shape.lengths(), &a.header().version).unwrap();
    let stripped = wire::encode_query(
        Scheme::Ypir,
        &a.header().version,
        &Query {
            key_id: SHARD_KEY_ID,
            keys: Keys::Cached,
            ..decoded
        },
    );
    let part = a.answer_batch(&[&stripped]).pop().unwrap().unwrap();
    let (shape, half) = (Layout::Ypir(shape), 0..groups / 2);
    assert!(decode_part(&shape, &half, &part).is_ok());
    assert!(decode_part(&shape, &half, &part[..part.len() - 1]).is_err());
    let mut body = part.clone();
    body[pir_core::wire::HEADER_LEN..pir_core::wire::HEADER_LEN + ELEMENT_BYTES].fill(0xff);
    assert!(decode_part(&shape, &half, &body).is_err());
    let mut mask = part.clone();
    let at = mask.len() - 4;
    mask[at..].copy_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode_part(&shape, &half, &mask).is_err());
    // A shard of another version refuses the query, so a front end of another database
    // gets no part from it.
    assert!(other.answer_batch(&[&stripped]).pop().unwrap().is_err());
}
