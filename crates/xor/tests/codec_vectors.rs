//! `tests/vectors/<format>/fail_*.hex` of the XOR schemes' bodies (Chor, RAID-PIR, DPF, QDP):
//! each refuses damaged bytes for its stated reason, through the shared runner of
//! `pir_core::codec`. `chor_query/` holds the same damage as the older
//! `tests/vectors/fail_chor_*.hex`, which `kat.rs` reads through a mirror's answer path.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::bits::BitVec;
use pir_core::codec::testing::{
    check_fail_vectors, check_format, cut, patch, trailing, vectors_dir, FailVector, Patch,
};
use pir_core::{Codec, DbShape, MultiServerScheme};
use pir_xor::chor::ChorQueryBody;
use pir_xor::dpf::{self, DpfKey};
use pir_xor::dpf_pir::DpfQueryBody;
use pir_xor::qdp::{self, QdpQuery, QdpQueryBody, SeedGrant, SeedRequest, SeedResponse};
use pir_xor::raid::RaidQueryBody;
use pir_xor::{AnswerMode, ChorQuery, DpfAnswer, DpfPir, DpfQuery, RaidAnswer, RaidPir, RaidQuery};

#[test]
fn chor_query() {
    // B = 20 blocks of b = 64 bytes: 12 header bytes, then 3 bytes of bits.
    let shape = DbShape::new(20, 64).unwrap();
    // Blocks 0, 5 and 18 selected, as in the older vectors.
    let bits = BitVec::from_wire(20, &[0x21, 0x00, 0x04]).unwrap();
    let body = ChorQueryBody {
        shape,
        query: ChorQuery { bits },
    };
    let good = body.to_bytes();
    assert_eq!(good.len(), 15);
    assert_eq!(ChorQueryBody::from_bytes(&good, &shape).unwrap(), body);
    let vectors = [
        FailVector::new("empty", "Truncated", "no header", Vec::new()),
        FailVector::new(
            "truncated",
            "Truncated",
            "last bits byte missing",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the bits",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_block_count",
            "DatabaseMismatch",
            "block_count 19 instead of 20",
            patch(&good, 0, 8, 19),
        ),
        FailVector::new(
            "wrong_block_size",
            "DatabaseMismatch",
            "block_size 192 instead of 64",
            patch(&good, 8, 4, 192),
        ),
        FailVector::new(
            "tail_bit_set",
            "Malformed",
            "B = 20: bit 23 of the last byte is set",
            patch(&good, 14, 1, u64::from(good[14] | 0x80)),
        ),
    ];
    check_fail_vectors::<ChorQueryBody>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "chor_query"),
        &vectors,
        &shape,
    );
}

/// [`check_format`] in this crate.
fn check<T: Codec<'static>>(
    format: &str,
    good: &[u8],
    context: &T::Context,
    fields: &[Patch<'_>],
    extra: Vec<FailVector>,
) {
    check_format::<T>(
        env!("CARGO_MANIFEST_DIR"),
        format,
        good,
        context,
        fields,
        extra,
    );
}

/// RAID-PIR, B = 20 blocks of 64 bytes, n = 3, r = 2, c = 3: server 0 flips chunk 0 (7 bits).
fn raid() -> RaidPir {
    RaidPir::new(DbShape::new(20, 64).unwrap(), 3, 2, 3, AnswerMode::Single).unwrap()
}

#[test]
fn raid_query() {
    let scheme = raid();
    let query = RaidQuery {
        server: 0,
        seed: [0x5a; 16],
        flips: vec![BitVec::from_wire(7, &[0x45]).unwrap()],
    };
    let good = RaidQueryBody { scheme, query }.to_bytes();
    assert_eq!(good.len(), 40);
    // Offsets: shape 0..12, n 12, r 14, c 16, server 20, mode 22, seed 23, flips 39.
    let fields: &[Patch<'_>] = &[
        ("wrong_block_count", "DatabaseMismatch", "B = 19", 0, 8, 19),
        ("n_below_2", "Malformed", "n = 1", 12, 2, 1),
        ("r_above_n", "Malformed", "r = 4 > n = 3", 14, 2, 4),
        ("c_zero", "Malformed", "c = 0", 16, 4, 0),
        (
            "server_out_of_range",
            "OutOfRange",
            "server 3 of n = 3",
            20,
            2,
            3,
        ),
        ("bad_mode", "UnknownValue", "mode 2", 22, 1, 2),
        (
            "tail_bit_set",
            "Malformed",
            "k_0 = 7: bit 7 of the flip byte",
            39,
            1,
            0xc5,
        ),
    ];
    check::<RaidQueryBody>("raid_query", &good, &raid().shape(), fields, Vec::new());
}

#[test]
fn raid_answer() {
    // Per-chunk answers of server 1 (n = 3, r = 2, c = 3): chunks 0 and 1, 2 blocks of 64.
    let scheme =
        RaidPir::new(DbShape::new(20, 64).unwrap(), 3, 2, 3, AnswerMode::PerChunk).unwrap();
    let shape = scheme.answer_shape(1);
    assert_eq!((shape.blocks, shape.block_size), (2, 64));
    let answer = RaidAnswer {
        blocks: vec![vec![1; 64], vec![2; 64]],
    };
    check::<RaidAnswer>("raid_answer", &answer.to_bytes(), &shape, &[], Vec::new());
}

/// The pinned DPF key pair of `dpf.rs` for point 1000 of 4096 (depth 5, 119 bytes).
fn dpf_key() -> DpfKey {
    let [key, _] = dpf::generate_from_seeds(1000, 4096, [[0x11; 16], [0x22; 16]]).unwrap();
    key
}

#[test]
fn dpf_key_vectors() {
    let good = dpf_key().to_bytes();
    assert_eq!(good.len(), dpf::key_len(5));
    // Offsets: depth 0, root seed 1..17, t 17, levels of 17 bytes from 18, last 16.
    let fields: &[Patch<'_>] = &[
        (
            "wrong_depth",
            "DatabaseMismatch",
            "depth 4, the domain needs 5",
            0,
            1,
            4,
        ),
        (
            "root_seed_low_bit",
            "UnknownValue",
            "root seed's low bit set",
            1,
            1,
            0x11,
        ),
        ("control_bit", "UnknownValue", "control bit 2", 17, 1, 2),
        (
            "control_correction",
            "UnknownValue",
            "level 0 corrections 4",
            34,
            1,
            4,
        ),
    ];
    let levels_missing = FailVector::new(
        "levels_missing",
        "Truncated",
        "one level of five, refused before allocating",
        good[..18 + 17].to_vec(),
    );
    check::<DpfKey>("dpf_key", &good, &5, fields, vec![levels_missing]);
}

#[test]
fn dpf_query() {
    let shape = DbShape::new(4096, 32).unwrap();
    let body = DpfQueryBody {
        shape,
        query: DpfQuery::from_key(dpf_key()),
    };
    let good = body.to_bytes();
    assert_eq!(good.len(), DpfPir::query_body_len(shape));
    let fields: &[Patch<'_>] = &[
        (
            "wrong_block_count",
            "DatabaseMismatch",
            "B = 4095",
            0,
            8,
            4095,
        ),
        (
            "wrong_block_size",
            "DatabaseMismatch",
            "block_size 64",
            8,
            4,
            64,
        ),
        (
            "wrong_depth",
            "DatabaseMismatch",
            "key of depth 6",
            12,
            1,
            6,
        ),
    ];
    check::<DpfQueryBody>("dpf_query", &good, &shape, fields, Vec::new());
}

#[test]
fn dpf_answer() {
    let shape = DbShape::new(4096, 32).unwrap();
    let good = DpfAnswer::new(vec![7; 32]).to_bytes();
    check::<DpfAnswer>("dpf_answer", &good, &shape, &[], Vec::new());
}

/// QDP over B = 21 blocks of 32 bytes, n = 3, r = 2, c = 4 (server 1 flips chunk 1, 5 bits).
fn qdp_raid() -> RaidPir {
    RaidPir::new(DbShape::new(21, 32).unwrap(), 3, 2, 4, AnswerMode::Single).unwrap()
}

/// Damage to `tag | params` shared by the three QDP bodies (offsets: tag 0, shape 1..13,
/// n 13, r 15, c 17, server 21, mode 23).
const QDP_PARAMS: &[Patch<'static>] = &[
    ("wrong_block_count", "DatabaseMismatch", "B = 22", 1, 8, 22),
    ("n_below_2", "Malformed", "n = 1", 13, 2, 1),
    ("other_redundancy", "Malformed", "r = 3, not ours", 15, 2, 3),
    (
        "server_out_of_range",
        "OutOfRange",
        "server 3 of n = 3",
        21,
        2,
        3,
    ),
    ("bad_mode", "UnknownValue", "mode 2", 23, 1, 2),
    ("other_mode", "Malformed", "PerChunk, not ours", 23, 1, 1),
];

fn qdp_check<T>(format: &str, good: &[u8], wrong_tag: u8, extra: Vec<FailVector>)
where
    T: Codec<'static, Context = RaidPir>,
{
    let mut fields = QDP_PARAMS.to_vec();
    fields.push((
        "wrong_tag",
        "UnknownValue",
        "another message's tag",
        0,
        1,
        u64::from(wrong_tag),
    ));
    check::<T>(format, good, &qdp_raid(), &fields, extra);
}

#[test]
fn qdp_seed_request() {
    let good = SeedRequest {
        raid: qdp_raid(),
        server: 1,
    }
    .to_bytes();
    assert_eq!(good.len(), qdp::SEED_REQUEST_LEN);
    qdp_check::<SeedRequest>("qdp_seed_request", &good, qdp::TAG_QUERY, Vec::new());
}

#[test]
fn qdp_seed_response() {
    let grant = SeedGrant {
        server: 1,
        id: 7,
        seed: [0x5a; 16],
    };
    let good = SeedResponse {
        raid: qdp_raid(),
        grant,
    }
    .to_bytes();
    assert_eq!(good.len(), qdp::SEED_RESPONSE_LEN);
    qdp_check::<SeedResponse>(
        "qdp_seed_response",
        &good,
        qdp::TAG_SEED_REQUEST,
        Vec::new(),
    );
}

#[test]
fn qdp_query() {
    let query = QdpQuery {
        server: 1,
        seed_id: 7,
        flips: vec![BitVec::from_wire(5, &[0x15]).unwrap()],
    };
    let good = QdpQueryBody {
        raid: qdp_raid(),
        query,
    }
    .to_bytes();
    assert_eq!(good.len(), qdp::query_body_len(&qdp_raid(), 1));
    let tail = FailVector::new(
        "tail_bit_set",
        "Malformed",
        "k_1 = 5: bit 7 of the flip byte",
        patch(&good, 32, 1, 0x95),
    );
    qdp_check::<QdpQueryBody>("qdp_query", &good, qdp::TAG_SEED_RESPONSE, vec![tail]);
}

/// `tests/vectors/singlepass_changes/`: a SinglePass changes body (`wire::Body<Changes>`).
#[test]
fn singlepass_changes() {
    use pir_xor::singlepass::wire::{Body, SHAPE_LEN};
    use pir_xor::singlepass::{Changes, Params};
    // B = 100 records of 8 bytes in 10 rows of m = 10 columns; two changes.
    let params = Params::with_rows(100, 8, 10).unwrap();
    let mut changes = Changes::new(8);
    changes.push_delta(3, &[1; 8]).unwrap();
    changes.push_delta(99, &[2; 8]).unwrap();
    let body = Body {
        params,
        value: changes,
    };
    let good = body.to_bytes();
    assert_eq!(good.len(), SHAPE_LEN + 4 + 2 * 16);
    assert_eq!(Body::<Changes>::from_bytes(&good, &params).unwrap(), body);
    let vectors = [
        FailVector::new("empty", "Truncated", "no shape", Vec::new()),
        FailVector::new(
            "truncated",
            "Truncated",
            "last delta byte missing",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the changes",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_records",
            "DatabaseMismatch",
            "101 records instead of 100",
            patch(&good, 0, 8, 101),
        ),
        FailVector::new(
            "wrong_columns",
            "DatabaseMismatch",
            "11 columns instead of 10",
            patch(&good, 12, 4, 11),
        ),
        FailVector::new(
            "count_above_limit",
            "OutOfRange",
            "2^24 + 1 changes",
            patch(&good, SHAPE_LEN, 4, (1 << 24) + 1),
        ),
        FailVector::new(
            "count_above_bytes",
            "Truncated",
            "3 changes, two follow",
            patch(&good, SHAPE_LEN, 4, 3),
        ),
        FailVector::new(
            "index_out_of_range",
            "OutOfRange",
            "a change of record 100 of 100",
            patch(&good, SHAPE_LEN + 4, 8, 100),
        ),
    ];
    check_fail_vectors::<Body<Changes>>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "singlepass_changes"),
        &vectors,
        &params,
    );
}

/// `tests/vectors/singlepass_state/`: a saved SinglePass client (`singlepass::Client`).
#[test]
fn singlepass_state() {
    use pir_xor::singlepass::{Client, OfflineRequest, Params};
    // B = 6 records of 2 bytes in 2 rows of m = 3 columns.
    let params = Params::with_rows(6, 2, 2).unwrap();
    let request = OfflineRequest { master: [5; 16] };
    let client = Client::new(params, &request, &[0; 6]).unwrap();
    let good = client.encode_state();
    let magic = pir_xor::singlepass::client::STATE_MAGIC.len();
    assert_eq!(good.len(), magic + 16 + 12 + 6 + 3);
    let offsets = magic + 16;
    let pending = good.len() - 3;
    let vectors = [
        FailVector::new(
            "truncated",
            "WrongLength",
            "a pending flag missing",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after the state",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_magic",
            "WrongMagic",
            "pir-singlepass-state-v2",
            patch(&good, magic - 1, 1, u64::from(b'2')),
        ),
        FailVector::new(
            "wrong_records",
            "DatabaseMismatch",
            "7 records instead of 6",
            patch(&good, magic, 8, 7),
        ),
        FailVector::new(
            "not_a_permutation",
            "Malformed",
            "row 0 holds offset 0 twice",
            patch(&patch(&good, offsets, 2, 0), offsets + 2, 2, 0),
        ),
        FailVector::new(
            "bad_pending_flag",
            "Malformed",
            "a pending flag of 2",
            patch(&good, pending, 1, 2),
        ),
    ];
    check_fail_vectors::<Client>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "singlepass_state"),
        &vectors,
        &params,
    );
}

/// `tests/vectors/checklist_state/`: a saved Checklist client (`checklist::Client`).
#[test]
fn checklist_state() {
    use pir_xor::checklist::{Client, OfflineRequest, Params};
    // B = 16 records of 2 bytes in sets of 4: m = 28 * 16 / 4 = 112 hints.
    let params = Params::with_set_size(16, 2, 4).unwrap();
    let request = OfflineRequest { master: [6; 16] };
    let client = Client::new(params, &request, &vec![0; params.hint_bytes()]).unwrap();
    let good = client.encode_state();
    let magic = pir_xor::checklist::client::STATE_MAGIC.len();
    let m = params.hints();
    assert_eq!(good.len(), magic + 20 + m * 25 + params.hint_bytes());
    let first_key = magic + 20;
    let vectors = [
        FailVector::new(
            "truncated",
            "WrongLength",
            "a parity byte missing",
            cut(&good),
        ),
        FailVector::new(
            "trailing",
            "WrongLength",
            "a byte after the state",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_magic",
            "WrongMagic",
            "pir-checklist-state-v2",
            patch(&good, magic - 1, 1, u64::from(b'2')),
        ),
        FailVector::new(
            "wrong_set_size",
            "DatabaseMismatch",
            "sets of 5 instead of 4",
            patch(&good, magic + 12, 4, 5),
        ),
        FailVector::new(
            "bad_present_flag",
            "Malformed",
            "set 0's present flag is 2",
            patch(&good, first_key, 1, 2),
        ),
        FailVector::new(
            "shift_out_of_range",
            "Malformed",
            "set 0's shift is 16 of 16 records",
            patch(&good, first_key + 17, 8, 16),
        ),
    ];
    check_fail_vectors::<Client>(
        &vectors_dir(env!("CARGO_MANIFEST_DIR"), "checklist_state"),
        &vectors,
        &params,
    );
}

/// `tests/vectors/checklist_punctured_set/`: a Checklist punctured set
/// (`pir_xor::checklist::PuncturedKey`, context its `SetShape`), as carried in a lookup.
#[test]
fn checklist_punctured_set() {
    use pir_xor::checklist::pset::Ggm;
    use pir_xor::checklist::{PuncturedKey, SetKey, SetShape};
    // B = 100, s = 10: depth 4, so 12 header bytes and 4 seeds of 16.
    let shape = SetShape::new(100, 10).unwrap();
    let key = SetKey {
        seed: [0x11; 16],
        shift: 42,
    };
    let good = shape.puncture(&Ggm::new(), &key, 3).to_bytes();
    assert_eq!(good.len(), 12 + 4 * 16);
    assert_eq!(good.len(), shape.punctured_len());
    // Offsets: position 0..4, shift 4..12, seeds 12..76.
    let fields: &[Patch<'_>] = &[
        (
            "position_out_of_range",
            "OutOfRange",
            "position 10 of s = 10",
            0,
            4,
            10,
        ),
        (
            "position_max",
            "OutOfRange",
            "position 2^32 - 1",
            0,
            4,
            u64::from(u32::MAX),
        ),
        (
            "shift_out_of_range",
            "OutOfRange",
            "shift 100 of B = 100",
            4,
            8,
            100,
        ),
        ("shift_max", "OutOfRange", "shift 2^64 - 1", 4, 8, u64::MAX),
    ];
    let extra = vec![FailVector::new(
        "header_only",
        "Truncated",
        "position and shift, no seeds",
        good[..12].to_vec(),
    )];
    check::<PuncturedKey>("checklist_punctured_set", &good, &shape, fields, extra);
}
