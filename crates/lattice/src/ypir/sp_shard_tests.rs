//! YPIR+SP row shards against the whole server, on small databases.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use rand::SeedableRng;
use rand_chacha::ChaCha20Rng;

use super::*;
use crate::params::Params;
use crate::ypir::shard::tests::{ask_whole_and_front, build_part, cuts, front_answers, SEEDS};
use crate::ypir::shard::{ShardOffline, YpirPacking, SHARD_KEY_ID};
use crate::ypir::tests::{database_for, serve};
use crate::ypir::wire::Keys;
use crate::ypir::{YpirSpClient, YpirSpServer};

/// Shard `rows` of `bytes`, built.
fn shard(params: Params, bytes: &[u8], rows: Range<usize>, version: u8) -> (YpirSpShard, Saved) {
    build_part(YpirSpShard::build_rows, params, bytes, rows, version)
}

/// For S = 1, 2, 3 shards on random row boundaries (within records: a record's 10 entries
/// lie down 10 of the 600 rows), the shards' masks are the whole server's row for row, and
/// the front end's answers (keys uploaded by the first query of the batch, named by id in the
/// others) are the whole server's byte for byte, each decoding to its record.
#[test]
fn sp_row_shards_pack_to_the_whole_answer_byte_for_byte() {
    let (records, bits) = (60u64, 160u32);
    let (params, bytes) = database_for(Scheme::YpirSp, records, bits, 5);
    let rows = SpShape::of(&params).unwrap().rows;
    assert_eq!(rows, 600);
    let (whole, client, saved) = serve(
        params,
        &bytes,
        SEEDS,
        YpirSpServer::build,
        YpirSpClient::new,
    );
    let mut rng = ChaCha20Rng::seed_from_u64(11);
    for shards in 1..=3 {
        let ranges = cuts(&mut rng, rows, shards);
        let (servers, offline): (Vec<_>, Vec<_>) = ranges
            .iter()
            .map(|rows| {
                let (server, part) = shard(params, &bytes, rows.clone(), 9);
                let words = 2 * RING_D;
                assert!(part.extra == saved[rows.start * words..rows.end * words]);
                (server, ShardOffline::decode(&part.hint).unwrap())
            })
            .unzip();
        let packing = YpirPacking::new(&offline).unwrap();
        assert_eq!(packing.header(), whole.header());
        let answers = |queries: &[&[u8]]| front_answers(&packing, &servers, queries);
        ask_whole_and_front(&whole, &client, answers, &bytes, &mut rng);
    }
}

/// Offline parts that do not tile one database, a part read as another shard's, and a
/// malformed part are refused; a shard of another version refuses the query.
#[test]
fn sp_parts_of_another_database_or_shard_are_refused() {
    let (params, bytes) = database_for(Scheme::YpirSp, 9, 72, 6);
    let rows = SpShape::of(&params).unwrap().rows;
    let cut = rows / 3;
    let (a, a_saved) = shard(params, &bytes, 0..cut, 9);
    let (b, b_saved) = shard(params, &bytes, cut..rows, 9);
    let (other, other_saved) = shard(params, &bytes, cut..rows, 8);
    let offline = |saved: &Saved| ShardOffline::decode(&saved.hint).unwrap();
    let (a_off, b_off) = (offline(&a_saved), offline(&b_saved));
    assert_eq!(a_off.rows(), 0..cut);
    // Another database's shard, a missing shard, the wrong order.
    assert!(YpirPacking::new(&[a_off.clone(), offline(&other_saved)]).is_err());
    assert!(YpirPacking::new(std::slice::from_ref(&a_off)).is_err());
    assert!(YpirPacking::new(&[b_off.clone(), a_off.clone()]).is_err());
    let hint = &a_saved.hint;
    assert!(ShardOffline::decode(&hint[..hint.len() - 1]).is_err());
    let packing = YpirPacking::new(&[a_off, b_off]).unwrap();
    let client = YpirSpClient::new(&a.header().encode()).unwrap();
    let (_, query) = client.query(3, &mut ChaCha20Rng::seed_from_u64(1)).unwrap();
    let decoded = packing.decode_query(&query).unwrap();
    let stripped = packing.shard_query(&decoded);
    // The shard is sent no keys, under the key id every client's queries get.
    let lengths = SpShape::of(&params).unwrap().lengths();
    let sent = wire::decode_query(&stripped, &lengths, &a.header().version).unwrap();
    assert!(matches!(sent.keys, Keys::Cached) && sent.key_id == SHARD_KEY_ID);
    assert!(!matches!(decoded.keys, Keys::Cached));
    let part_a = a.answer_batch(&[&stripped]).pop().unwrap().unwrap();
    let part_b = b.answer_batch(&[&stripped]).pop().unwrap().unwrap();
    assert!(packing.decode_part(0, &part_a).is_ok());
    assert!(packing.decode_part(1, &part_b).is_ok());
    // Shard 1's part in shard 0's place (another length), cut, or with a body past q2.
    assert!(packing.decode_part(0, &part_b).is_err());
    assert!(packing.decode_part(0, &part_a[..part_a.len() - 1]).is_err());
    let mut high = part_a.clone();
    let at = pir_core::wire::HEADER_LEN;
    high[at..at + crate::params::ypir::ELEMENT_BYTES].fill(0xff);
    assert!(packing.decode_part(0, &high).is_err());
    assert!(packing.decode_part(2, &part_a).is_err());
    // A shard of another version refuses the query.
    assert!(other.answer_batch(&[&stripped]).pop().unwrap().is_err());
}
