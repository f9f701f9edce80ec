//! Tests of the signed mirror list: formats 1 to 3, signatures, limits and the argument parsers.

use super::*;
use crate::testutil::{other_key, vendor_key};
use proptest::prelude::*;

fn key(byte: u8) -> PublicKey {
    PublicKey([byte; 32])
}

fn sample() -> MirrorList {
    MirrorList {
        created_unix: 1_700_000_000,
        list_version: 7,
        expires_unix: 1_700_086_400,
        mirrors: vec![
            MirrorEntry::new("https://127.0.0.1:8443".into(), key(1)),
            MirrorEntry::new("https://mirror.example.org:443".into(), key(2)),
            MirrorEntry::new("https://[::1]:9000".into(), key(3)),
        ],
    }
}

fn sign_raw(body: &[u8]) -> Vec<u8> {
    let mut bytes = body.to_vec();
    bytes
        .extend_from_slice(&vendor_key().sign(&signing_message(MIRROR_LIST_SIGNING_CONTEXT, body)));
    bytes
}

fn body_of(list: &MirrorList) -> Vec<u8> {
    let bytes = list.encode_signed(&vendor_key());
    bytes[..bytes.len() - 64].to_vec()
}

#[test]
fn round_trip_and_known_answer() {
    let list = sample();
    let bytes = list.encode_signed(&vendor_key());
    assert_eq!(
        MirrorList::decode_verified(&bytes, &vendor_key().public()).unwrap(),
        list
    );
    assert_eq!(
        hex::encode(&bytes[..20]),
        "5049524c020000f1536500000000070000000000"
    );
    assert_eq!(
        hex::encode(pir_keys::sha256(&bytes)),
        crate::testutil::MIRROR_LIST_KAT_SHA256
    );
}

#[test]
fn every_flipped_byte_fails_verification() {
    let bytes = sample().encode_signed(&vendor_key());
    for i in 0..bytes.len() {
        let mut bad = bytes.clone();
        bad[i] ^= 0x80;
        assert!(
            MirrorList::decode_verified(&bad, &vendor_key().public()).is_err(),
            "byte {i}"
        );
    }
}

#[test]
fn wrong_key_and_truncation_fail() {
    let bytes = sample().encode_signed(&vendor_key());
    let other = other_key().public();
    let err = MirrorList::decode_verified(&bytes, &other).unwrap_err();
    assert!(matches!(err, UpdateError::Signature(_)));
    assert!(err.to_string().contains(&other.fingerprint()));
    for len in 0..bytes.len() {
        assert!(MirrorList::decode_verified(&bytes[..len], &vendor_key().public()).is_err());
    }
    let err = MirrorList::decode_verified(&[7; 100], &vendor_key().public()).unwrap_err();
    assert!(err.to_string().contains("not a pir mirror list"));
}

#[test]
fn fail_cases_are_rejected() {
    let good = body_of(&sample());
    let patched = |offset: usize, value: &[u8]| {
        let mut body = good.clone();
        body[offset..offset + value.len()].copy_from_slice(value);
        body
    };
    let with = |change: fn(&mut MirrorList)| {
        let mut list = sample();
        change(&mut list);
        body_of(&list)
    };
    let mut trailing = good.clone();
    trailing.push(0);
    let cases: Vec<(&str, Vec<u8>)> = vec![
        ("fail_bad_magic", patched(0, b"PIRM")),
        ("fail_version_0", patched(4, &0u16.to_le_bytes())),
        ("fail_count_zero", patched(30, &0u16.to_le_bytes())),
        ("fail_count_too_many", patched(30, &65u16.to_le_bytes())),
        ("fail_count_past_end", patched(30, &4u16.to_le_bytes())),
        ("fail_url_length_huge", patched(32, &u16::MAX.to_le_bytes())),
        ("fail_trailing_byte", trailing),
        ("fail_truncated_key", good[..good.len() - 1].to_vec()),
        ("fail_empty_list", with(|l| l.mirrors.clear())),
        (
            "fail_http_url",
            with(|l| l.mirrors[0].url = "http://127.0.0.1:8443".into()),
        ),
        (
            "fail_url_with_path",
            with(|l| l.mirrors[0].url = "https://a.org:1/x".into()),
        ),
        (
            "fail_url_no_port",
            with(|l| l.mirrors[0].url = "https://a.org".into()),
        ),
        (
            "fail_duplicate_url",
            with(|l| l.mirrors[1].url = l.mirrors[0].url.clone()),
        ),
        (
            "fail_duplicate_url_slash",
            with(|l| l.mirrors[1].url = "https://127.0.0.1:8443/".into()),
        ),
        (
            "fail_duplicate_key",
            with(|l| l.mirrors[1].key = l.mirrors[0].key),
        ),
        (
            "fail_65_mirrors",
            with(|l| {
                l.mirrors = (0..65u8)
                    .map(|i| MirrorEntry::new(format!("https://m{i}.org:1"), key(i)))
                    .collect()
            }),
        ),
    ];
    for (name, body) in cases {
        assert!(
            MirrorList::decode_verified(&sign_raw(&body), &vendor_key().public()).is_err(),
            "{name}"
        );
    }
    MirrorList::decode_verified(&sign_raw(&good), &vendor_key().public()).unwrap();
}

#[test]
fn a_version_1_list_is_refused_with_how_to_rebuild_it() {
    // Version 1: the prologue, created_unix, then the entries (no version, no expiry).
    let mut body = b"PIRL".to_vec();
    body.extend_from_slice(&1u16.to_le_bytes());
    let v2 = body_of(&sample());
    body.extend_from_slice(&v2[6..14]);
    body.extend_from_slice(&v2[30..]);
    let error = MirrorList::decode_verified(&sign_raw(&body), &vendor_key().public())
        .unwrap_err()
        .to_string();
    assert!(error.contains("format version 1"), "{error}");
    assert!(
        error.contains("pir mirror-list build") && error.contains("--list-version"),
        "{error}"
    );
    let newer = patched_version(4);
    let error = MirrorList::decode_verified(&sign_raw(&newer), &vendor_key().public())
        .unwrap_err()
        .to_string();
    assert!(error.contains("upgrade pir"), "{error}");
}

fn patched_version(version: u16) -> Vec<u8> {
    let mut body = body_of(&sample());
    body[4..6].copy_from_slice(&version.to_le_bytes());
    body
}

/// `sample()` with a release and chunks stated for some mirrors (format 3).
fn sample_v3() -> MirrorList {
    let mut list = sample();
    let release = ListedRelease {
        id: [9; 32],
        version: 42,
    };
    list.mirrors[0].release = Some(release);
    list.mirrors[0].chunks = Some(ChunkSet::new(4, vec![0, 1]).unwrap());
    list.mirrors[1].chunks = Some(ChunkSet::new(10, vec![9]).unwrap());
    list.mirrors[2].release = Some(release);
    list
}

#[test]
fn releases_and_chunks_round_trip_in_format_3_and_format_2_stays_2() {
    let list = sample_v3();
    let bytes = list.encode_signed(&vendor_key());
    assert_eq!(&bytes[4..6], &3u16.to_le_bytes());
    let back = MirrorList::decode_verified(&bytes, &vendor_key().public()).unwrap();
    assert_eq!(back, list);
    assert_eq!(
        format_chunks(back.mirrors[0].chunks.as_ref().unwrap()),
        "0,1/4"
    );
    // Without statements the list is written, and read, as format 2.
    let plain = sample().encode_signed(&vendor_key());
    assert_eq!(&plain[4..6], &2u16.to_le_bytes());
    let back = MirrorList::decode_verified(&plain, &vendor_key().public()).unwrap();
    assert!(back
        .mirrors
        .iter()
        .all(|m| m.release.is_none() && m.chunks.is_none()));
    // Entry 0 of format 3 starts at 32: URL (2 + 22), key (32), then the flags at 88.
    let good = body_of(&list);
    assert_eq!(good[88], HAS_RELEASE | HAS_CHUNKS);
    // Chunk count at 88 + 1 + 40 = 129, bitmap at 131.
    assert_eq!(&good[129..132], &[4, 0, 0b11]);
    let patched = |offset: usize, value: &[u8]| {
        let mut body = good.clone();
        body[offset..offset + value.len()].copy_from_slice(value);
        body
    };
    for (name, body) in [
        ("unknown flag", patched(88, &[7])),
        ("chunk count 0", patched(129, &[0, 0])),
        ("chunk count 257", patched(129, &[1, 1])),
        ("bit past the count", patched(131, &[0b1_0011])),
        ("no chunk held", patched(131, &[0])),
        ("a format 3 list read as format 2", patched(4, &[2, 0])),
    ] {
        let error = MirrorList::decode_verified(&sign_raw(&body), &vendor_key().public());
        assert!(error.is_err(), "{name}");
    }
}

#[test]
fn chunk_arguments() {
    let set = parse_chunks("1, 0/4").unwrap();
    assert_eq!((set.chunk_count, set.chunks.clone()), (4, vec![0, 1]));
    assert_eq!(format_chunks(&set), "0,1/4");
    for bad in ["0,1", "0,4/4", "/4", "a/4", "0/0", "0/x", "0/257"] {
        let error = parse_chunks(bad).unwrap_err().to_string();
        assert!(error.contains("0,1/4"), "{bad}: {error}");
    }
}

#[test]
fn mirror_urls() {
    for ok in [
        "https://127.0.0.1:8443",
        "https://127.0.0.1:8443/",
        "https://[::1]:1",
        "https://mirror-1.example.org:65535",
        "https://localhost:80",
    ] {
        check_mirror_url(ok).unwrap();
    }
    for bad in [
        "http://a.org:1",
        "https://a.org",
        "https://a.org:0",
        "https://a.org:65536",
        "https://a.org:+1",
        "https://a.org:1/path",
        "https://a.org:1//",
        "https://a.org:1?x",
        "https://u@a.org:1",
        "https://:1",
        "https://-a.org:1",
        "https://a..org:1",
        "https://a_b.org:1",
        "https://[::1:1",
        "https://[zz]:1",
        "https://[::1]",
        "https://[::1]x:1",
    ] {
        assert!(check_mirror_url(bad).is_err(), "{bad}");
    }
}

#[test]
fn mirror_args() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m1.pub");
    let public = other_key().public();
    public.save(&path).unwrap();
    let entry = parse_mirror_arg(&format!("https://127.0.0.1:8443/={}", path.display())).unwrap();
    assert_eq!(
        entry,
        MirrorEntry::new("https://127.0.0.1:8443".into(), public)
    );
    assert!(matches!(
        parse_mirror_arg("https://127.0.0.1:8443"),
        Err(UpdateError::Input(_))
    ));
    assert!(matches!(
        parse_mirror_arg("https://127.0.0.1:8443="),
        Err(UpdateError::Input(_))
    ));
    assert!(matches!(
        parse_mirror_arg(&format!("http://127.0.0.1:8443={}", path.display())),
        Err(UpdateError::Input(_))
    ));
    let missing = dir.path().join("missing.pub");
    assert!(matches!(
        parse_mirror_arg(&format!("https://127.0.0.1:8443={}", missing.display())),
        Err(UpdateError::Keys(_))
    ));
}

proptest! {
    #[test]
    fn random_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
        let _ = MirrorList::decode_verified(&bytes, &vendor_key().public());
        let _ = parse_body(&bytes);
    }

    #[test]
    fn mutated_bodies_never_panic(at in any::<prop::sample::Index>(), value in any::<u8>()) {
        let mut body = body_of(&sample_v3());
        let i = at.index(body.len());
        body[i] = value;
        let _ = parse_body(&body);
        let mut body = body_of(&sample());
        let i = at.index(body.len());
        body[i] = value;
        let _ = parse_body(&body);
    }

    #[test]
    fn random_urls_never_panic(url in "https://[a-z0-9.:\\[\\]/-]{0,30}") {
        let _ = check_mirror_url(&url);
    }
}
