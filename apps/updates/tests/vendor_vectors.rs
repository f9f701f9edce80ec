//! `tests/vectors/vendor_{request,reply}/fail_*.hex`: the vendor service's messages
//! (`pir_updates::vendor::wire`), which it decodes from any client or mirror and a client
//! decodes from the service: a known answer for each layout, and damaged bytes refused for
//! their stated reason by the shared runner of `pir_core::codec`.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use pir_core::codec::testing::{check_format, patch, FailVector, Patch};
use pir_core::Codec;
use pir_keys::PublicKey;
use pir_updates::vendor::wire::{
    Outcome, Registration, SignedRegistration, VendorReply, VendorRequest, MAX_EVIDENCE_BYTES,
    MAX_MESSAGE,
};

/// A registration of `https://a:1` with fixed keys, time and signature bytes (the decoder
/// does not verify: the registry does).
fn registration() -> VendorRequest {
    VendorRequest::Register(SignedRegistration {
        registration: Registration {
            url: "https://a:1".into(),
            mirror: PublicKey([6; 32]),
            vendor: PublicKey([7; 32]),
            created_unix: 1,
        },
        signature: [8; 64],
    })
}

#[test]
fn vendor_request_known_answers() {
    let register = [
        &b"PIRVndrQ"[..],
        &1u16.to_le_bytes(),
        &[2],
        &11u16.to_le_bytes(),
        b"https://a:1",
        &[6; 32],
        &[7; 32],
        &1u64.to_le_bytes(),
        &[8; 64],
    ]
    .concat();
    assert_eq!(registration().to_bytes(), register);
    assert_eq!(VendorRequest::Status.to_bytes(), b"PIRVndrQ\x01\x00\x01");
    assert_eq!(
        VendorRequest::Evidence(b"xyz".to_vec()).to_bytes(),
        b"PIRVndrQ\x01\x00\x03\x03\x00\x00\x00xyz"
    );
    for request in [
        registration(),
        VendorRequest::Status,
        VendorRequest::Evidence(b"xyz".to_vec()),
    ] {
        assert_eq!(
            VendorRequest::from_bytes(&request.to_bytes(), &()).unwrap(),
            request
        );
    }
}

#[test]
fn vendor_request() {
    let good = registration().to_bytes();
    // Offsets: magic 0..8, version 8, kind 10, URL length 11, URL 13..24 ("https" 13..18),
    // mirror key 24, vendor key 56, created 88, signature 96..160.
    assert_eq!(good.len(), 160);
    let fields: &[Patch<'_>] = &[
        (
            "wrong_magic",
            "WrongMagic",
            "magic XIRVndrQ",
            0,
            1,
            u64::from(b'X'),
        ),
        ("next_version", "WrongVersion", "version 2", 8, 2, 2),
        ("unknown_kind", "UnknownValue", "request kind 9", 10, 1, 9),
        ("url_oversized", "Oversized", "URL length 2049", 11, 2, 2049),
        (
            "url_above_bytes",
            "Truncated",
            "URL length 2000 of 147 bytes",
            11,
            2,
            2000,
        ),
        ("url_not_utf8", "Malformed", "URL byte 0xff", 13, 1, 0xff),
        (
            "url_scheme",
            "Malformed",
            "http:://a:1 instead of https://",
            17,
            1,
            u64::from(b':'),
        ),
    ];
    let evidence = VendorRequest::Evidence(b"xyz".to_vec()).to_bytes();
    let mut status_trailing = VendorRequest::Status.to_bytes();
    status_trailing.push(0);
    let extra = vec![
        FailVector::new(
            "evidence_oversized",
            "Oversized",
            "evidence length 64 MiB + 1",
            patch(&evidence, 11, 4, MAX_EVIDENCE_BYTES as u64 + 1),
        ),
        FailVector::new(
            "evidence_above_bytes",
            "Truncated",
            "evidence length 4, 3 bytes follow",
            patch(&evidence, 11, 4, 4),
        ),
        FailVector::new(
            "status_trailing",
            "TrailingBytes",
            "a byte after a status request",
            status_trailing,
        ),
    ];
    check_format::<VendorRequest>(
        env!("CARGO_MANIFEST_DIR"),
        "vendor_request",
        &good,
        &(),
        fields,
        extra,
    );
}

fn reply() -> VendorReply {
    VendorReply {
        outcome: Outcome::Pending,
        message: "ok".into(),
        release_id: [9; 32],
        list_version: 5,
    }
}

#[test]
fn vendor_reply_known_answer() {
    let bytes = [
        &b"PIRVndrA"[..],
        &1u16.to_le_bytes(),
        &[1],
        &2u16.to_le_bytes(),
        b"ok",
        &[9; 32],
        &5u64.to_le_bytes(),
    ]
    .concat();
    assert_eq!(reply().to_bytes(), bytes);
    assert_eq!(VendorReply::from_bytes(&bytes, &()).unwrap(), reply());
    // A longer message is cut at MAX_MESSAGE bytes, on a character boundary.
    let long = VendorReply {
        message: "é".repeat(MAX_MESSAGE),
        ..reply()
    };
    let decoded = VendorReply::from_bytes(&long.to_bytes(), &()).unwrap();
    assert_eq!(decoded.message, "é".repeat(MAX_MESSAGE / 2));
}

#[test]
fn vendor_reply() {
    let good = reply().to_bytes();
    // Offsets: magic 0..8, version 8, outcome 10, message length 11, message 13..15,
    // release id 15..47, list version 47..55.
    assert_eq!(good.len(), 55);
    let fields: &[Patch<'_>] = &[
        (
            "wrong_magic",
            "WrongMagic",
            "magic XIRVndrA",
            0,
            1,
            u64::from(b'X'),
        ),
        ("next_version", "WrongVersion", "version 2", 8, 2, 2),
        ("unknown_outcome", "UnknownValue", "outcome 6", 10, 1, 6),
        (
            "message_oversized",
            "Oversized",
            "message length 1025",
            11,
            2,
            1025,
        ),
        (
            "message_above_bytes",
            "Truncated",
            "message length 100 of 44 bytes",
            11,
            2,
            100,
        ),
        (
            "message_not_utf8",
            "Malformed",
            "message byte 0xff",
            13,
            1,
            0xff,
        ),
    ];
    check_format::<VendorReply>(
        env!("CARGO_MANIFEST_DIR"),
        "vendor_reply",
        &good,
        &(),
        fields,
        Vec::new(),
    );
}
