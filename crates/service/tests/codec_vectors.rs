//! `tests/vectors/{releases,checklist_info,checklist_query,checklist_download,
//! checklist_description,lattice_download,singlepass_info,singlepass_query}/fail_*.hex`: the
//! service layer's messages refuse damaged bytes for their stated reason, through the shared
//! runner of
//! `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{
    check_fail_vectors, check_format, cut, envelope_trailing, patch, trailing, vectors_dir,
    FailVector, Patch,
};
use pir_core::{Codec, SchemeId};
use pir_lattice::Scheme;
use pir_service::checklist::{
    hints_query, ChecklistQuery, Description, Download, Info, Role, INFO_MAGIC,
};
use pir_service::lattice::HintDownload;
use pir_service::releases::ReleaseList;
use pir_service::ReleaseInfo;
use pir_xor::checklist::{OfflineRequest, Params};

const MANIFEST_DIR: &str = env!("CARGO_MANIFEST_DIR");

fn dir(format: &str) -> std::path::PathBuf {
    vectors_dir(env!("CARGO_MANIFEST_DIR"), format)
}

#[test]
fn releases_list() {
    let good = ReleaseList(vec![ReleaseInfo {
        id: [1; 32],
        version: 7,
        expires_unix: 1_900_000_000,
    }])
    .to_bytes();
    assert_eq!(good.len(), 50);
    let vectors = [
        FailVector::truncated(&good, "expiry one byte short"),
        FailVector::trailing(&good, "a byte after the list"),
        FailVector::new(
            "count_above_limit",
            "OutOfRange",
            "65 releases > 64",
            patch(&good, 0, 2, 65),
        ),
        FailVector::new(
            "count_above_bytes",
            "Truncated",
            "2 releases, one follows",
            patch(&good, 0, 2, 2),
        ),
    ];
    check_fail_vectors::<ReleaseList>(&dir("releases"), &vectors, &());
}

#[test]
fn checklist_info() {
    let info = Info {
        role: Role::Online,
        params: Params::new(100, 32).unwrap(),
        database_id: [3; 32],
        about: b"ab".to_vec(),
    };
    let good = info.to_bytes();
    assert_eq!(Info::decode(&good).unwrap(), info);
    // Offsets after the 21-byte magic: role 21, records 22, record bytes 30, set size 34,
    // hints 38, database id 42, about length 74.
    assert_eq!(INFO_MAGIC.len(), 21);
    let vectors = [
        FailVector::truncated(&good, "about one byte short"),
        FailVector::trailing(&good, "a byte after about"),
        FailVector::wrong_magic(&good, 20, b'2', "pir-checklist-info-v2"),
        FailVector::new(
            "unknown_role",
            "UnknownValue",
            "role 2",
            patch(&good, 21, 1, 2),
        ),
        FailVector::new(
            "zero_records",
            "Malformed",
            "0 records",
            patch(&good, 22, 8, 0),
        ),
        FailVector::new(
            "hints_disagree",
            "Malformed",
            "hint count not the parameters'",
            patch(&good, 38, 4, 1),
        ),
        FailVector::new(
            "about_oversized",
            "Oversized",
            "about length 65537 > 65536",
            patch(&good, 74, 4, 65537),
        ),
        FailVector::new(
            "about_above_bytes",
            "Truncated",
            "about length 3, 2 bytes follow",
            patch(&good, 74, 4, 3),
        ),
    ];
    check_fail_vectors::<Info>(&dir("checklist_info"), &vectors, &());
}

#[test]
fn checklist_query() {
    let params = Params::new(100, 32).unwrap();
    let request = OfflineRequest { master: [4; 16] };
    let good = hints_query(&params, &request, 0, 2);
    // kind 0 | shape 1..17 | master 17..33 | first 33 | count 37.
    assert_eq!(good.len(), 41);
    assert!(ChecklistQuery::from_bytes(&good, &params).is_ok());
    let vectors = [
        FailVector::new("empty", "Truncated", "no kind byte", Vec::new()),
        FailVector::truncated(&good, "count one byte short"),
        FailVector::trailing(&good, "a byte after the hint request"),
        FailVector::new(
            "unknown_kind",
            "UnknownValue",
            "kind 3",
            patch(&good, 0, 1, 3),
        ),
        FailVector::new(
            "wrong_shape",
            "DatabaseMismatch",
            "101 records, the server holds 100",
            patch(&good, 1, 8, 101),
        ),
        FailVector::new(
            "zero_hints",
            "OutOfRange",
            "count 0",
            patch(&good, 37, 4, 0),
        ),
        FailVector::new(
            "hints_above_limit",
            "OutOfRange",
            "count 2^20 + 1",
            patch(&good, 37, 4, (1 << 20) + 1),
        ),
        FailVector::new(
            "hints_past_end",
            "OutOfRange",
            "first hint 2^31",
            patch(&good, 33, 4, 1 << 31),
        ),
        FailVector::new(
            "lookup_wrong_length",
            "WrongLength",
            "a lookup of a hint request's length",
            patch(&good, 0, 1, 1),
        ),
    ];
    check_fail_vectors::<ChecklistQuery>(&dir("checklist_query"), &vectors, &params);
}

/// Damage to the envelope around a download or description (magic 0..4, version 4, scheme 6,
/// kind 7, length 8, body from 12).
const ENVELOPE_FIELDS: &[Patch<'static>] = &[
    ("wrong_magic", "WrongMagic", "PIRx", 3, 1, b'x' as u64),
    ("wrong_kind", "WrongKind", "kind Query", 7, 1, 1),
    (
        "wrong_scheme",
        "WrongScheme",
        "scheme Chor",
        6,
        1,
        SchemeId::Chor as u64,
    ),
];

/// [`check_format`] for a message that is one whole envelope: the envelope's damage, then
/// `more` and `extra`.
fn check_envelope<T: Codec<'static, Context = ()>>(
    format: &str,
    good: &[u8],
    more: &[Patch<'static>],
    mut extra: Vec<FailVector>,
) {
    let mut fields = ENVELOPE_FIELDS.to_vec();
    fields.extend_from_slice(more);
    extra.push(envelope_trailing(good));
    check_format::<T>(MANIFEST_DIR, format, good, &(), &fields, extra);
}

#[test]
fn lattice_download() {
    let download = HintDownload {
        scheme: Scheme::SimplePir,
        about: b"abc",
        hint: b"HINT",
    };
    let good = download.to_bytes();
    // about_len 12, about 16..19, hint 19..23.
    assert_eq!(good.len(), 23);
    let more: &[Patch<'static>] = &[
        (
            "about_oversized",
            "Oversized",
            "65537 > 65536",
            12,
            4,
            65537,
        ),
        ("about_above_body", "Truncated", "99, 7 follow", 12, 4, 99),
    ];
    check_envelope::<HintDownload>("lattice_download", &good, more, Vec::new());
}

#[test]
fn checklist_download() {
    let good = Download(b"prefixes").to_bytes();
    check_envelope::<Download>("checklist_download", &good, &[], Vec::new());
}

#[test]
fn checklist_description() {
    let info = Info {
        role: Role::Offline,
        params: Params::new(100, 32).unwrap(),
        database_id: [3; 32],
        about: b"ab".to_vec(),
    };
    let good = Description(info).to_bytes();
    // The info from 12: its magic's last byte at 32, role at 33.
    let magic = u64::from(b'2');
    let more: &[Patch<'static>] = &[
        ("info_wrong_magic", "WrongMagic", "info v2", 32, 1, magic),
        ("info_unknown_role", "UnknownValue", "role 2", 33, 1, 2),
    ];
    // The envelope is whole but the info in it is one byte short.
    let short = patch(&cut(&good), 8, 4, (good.len() - 13) as u64);
    let note = "about one byte short";
    let extra = vec![FailVector::new("info_truncated", "Truncated", note, short)];
    check_envelope::<Description>("checklist_description", &good, more, extra);
}

#[test]
fn singlepass_info() {
    use pir_service::singlepass::{Info as SpInfo, INFO_MAGIC as SP_MAGIC};
    let info = SpInfo {
        role: Role::Offline,
        params: pir_xor::singlepass::Params::with_rows(100, 32, 10).unwrap(),
        database_id: [4; 32],
        about: b"ab".to_vec(),
    };
    let good = info.to_bytes();
    assert_eq!(SpInfo::from_bytes(&good, &()).unwrap(), info);
    // Offsets after the 22-byte magic: role 22, records 23, record bytes 31, columns 35,
    // database id 39, about length 71.
    assert_eq!(SP_MAGIC.len(), 22);
    let vectors = [
        FailVector::new("truncated", "Truncated", "about one byte short", cut(&good)),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after about",
            trailing(&good),
        ),
        FailVector::new(
            "wrong_magic",
            "WrongMagic",
            "pir-singlepass-info-v2",
            patch(&good, 21, 1, u64::from(b'2')),
        ),
        FailVector::new(
            "unknown_role",
            "UnknownValue",
            "role 2",
            patch(&good, 22, 1, 2),
        ),
        FailVector::new(
            "zero_records",
            "Malformed",
            "no records",
            patch(&good, 23, 8, 0),
        ),
        FailVector::new(
            "columns_above_records",
            "Malformed",
            "101 columns for 100 records",
            patch(&good, 35, 4, 101),
        ),
        FailVector::new(
            "about_oversized",
            "Oversized",
            "about of 65537 bytes",
            patch(&good, 71, 4, 65537),
        ),
    ];
    check_fail_vectors::<SpInfo>(&dir("singlepass_info"), &vectors, &());
}

#[test]
fn singlepass_query() {
    use pir_service::singlepass::{changes_query, hints_query, lookup_query, SinglePassQuery};
    use pir_xor::singlepass::wire::SHAPE_LEN;
    // B = 100 records of 32 bytes in Q = 10 rows of m = 10 columns.
    let params = pir_xor::singlepass::Params::with_rows(100, 32, 10).unwrap();
    let lookup = lookup_query(&params, &[3; 10]);
    assert_eq!(lookup.len(), 1 + SHAPE_LEN + 20);
    let hints = hints_query(&params, &OfflineRequest { master: [7; 16] });
    assert_eq!(hints.len(), 1 + SHAPE_LEN + 16);
    for good in [&lookup, &hints, &changes_query(&[1; 32])] {
        SinglePassQuery::from_bytes(good, &params).unwrap();
    }
    let vectors = [
        FailVector::new("empty", "Truncated", "no kind byte", Vec::new()),
        FailVector::new(
            "unknown_kind",
            "UnknownValue",
            "kind 4",
            patch(&lookup, 0, 1, 4),
        ),
        FailVector::new(
            "lookup_wrong_length",
            "WrongLength",
            "a lookup one offset short",
            lookup[..lookup.len() - 2].to_vec(),
        ),
        FailVector::new(
            "lookup_trailing",
            "WrongLength",
            "a lookup with a byte after it",
            trailing(&lookup),
        ),
        FailVector::new(
            "lookup_wrong_shape",
            "DatabaseMismatch",
            "a lookup for 101 records",
            patch(&lookup, 1, 8, 101),
        ),
        FailVector::new(
            "offset_out_of_range",
            "OutOfRange",
            "row 0's offset is 10 of 10 columns",
            patch(&lookup, 1 + SHAPE_LEN, 2, 10),
        ),
        FailVector::new(
            "hints_truncated",
            "Truncated",
            "a seed byte missing",
            cut(&hints),
        ),
        FailVector::new(
            "hints_trailing",
            "TrailingBytes",
            "a byte after the seed",
            trailing(&hints),
        ),
        FailVector::new(
            "changes_truncated",
            "Truncated",
            "a database id byte missing",
            cut(&changes_query(&[1; 32])),
        ),
    ];
    check_fail_vectors::<SinglePassQuery>(&dir("singlepass_query"), &vectors, &params);
}
