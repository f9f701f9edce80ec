//! `tests/vectors/prologue/fail_*.hex`: every binary format's prologue (magic, version) is
//! checked first, and a wrong magic, another version or a cut prologue is refused for that
//! reason, by the decoder users actually reach (signed formats are signed here first, so the
//! refusal is the prologue's and not the signature's).

#![allow(clippy::unwrap_used, clippy::expect_used)] // tests fail loudly on purpose

use std::path::{Path, PathBuf};

use pir_core::Error;
use pir_keys::SecretKey;

fn vectors() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/vectors/prologue");
    let mut paths: Vec<PathBuf> = std::fs::read_dir(dir)
        .expect("tests/vectors/prologue exists")
        .map(|entry| entry.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("fail_")
        })
        .collect();
    paths.sort();
    paths
}

/// The reason a core decoder gave, as named in the vector files.
fn core_reason(error: &Error) -> &'static str {
    match error {
        Error::WrongMagic => "WrongMagic",
        Error::WrongVersion { .. } => "WrongVersion",
        Error::Truncated { .. } => "Truncated",
        _ => "other",
    }
}

/// The reason an application decoder gave, from its message (its error types carry text).
fn text_reason(message: &str) -> &'static str {
    let m = message.to_ascii_lowercase();
    if m.contains("version") {
        "WrongVersion"
    } else if m.contains("magic") || m.contains("not a pir") {
        "WrongMagic"
    } else if m.contains("truncated")
        || m.contains("too short")
        || m.contains("must be")
        || m.contains("a header is")
    {
        "Truncated"
    } else {
        "other"
    }
}

/// `context || body`, signed and appended, as a vendor signs manifests and mirror lists.
fn signed(vendor: &SecretKey, context: &[u8], body: &[u8]) -> Vec<u8> {
    let signature = vendor.sign(&[context, body].concat());
    [body, signature.as_ref()].concat()
}

fn reason(format: &str, bytes: &[u8]) -> Option<&'static str> {
    let vendor = SecretKey::generate().unwrap();
    let public = vendor.public();
    match format {
        "envelope" => pir_core::wire::decode_envelope(bytes, 1 << 20)
            .err()
            .map(|e| core_reason(&e)),
        "evidence" => pir_client::Evidence::decode(bytes)
            .err()
            .map(|e| core_reason(&e)),
        "breachinfo" => pir_breach::info::Info::decode(bytes)
            .err()
            .map(|e| core_reason(&e)),
        "manifest" => {
            let context = pir_updates::manifest::MANIFEST_SIGNING_CONTEXT;
            pir_updates::manifest::Manifest::decode_verified(
                &signed(&vendor, context, bytes),
                &public,
            )
            .err()
            .map(|e| text_reason(&e.to_string()))
        }
        "mirrorlist" => {
            let context = pir_updates::mirrors::MIRROR_LIST_SIGNING_CONTEXT;
            pir_updates::mirrors::MirrorList::decode_verified(
                &signed(&vendor, context, bytes),
                &public,
            )
            .err()
            .map(|e| text_reason(&e.to_string()))
        }
        "breachdb" => pir_breach::header::DbHeader::decode(bytes)
            .err()
            .map(|e| text_reason(&e.to_string())),
        "offline" => pir_records::offline::decode(bytes, pir_lattice::Scheme::SimplePir, &[0; 32])
            .err()
            .map(|e| text_reason(&e.to_string())),
        "oramstate" => pir_blockstore::disk::sealed_state(bytes)
            .err()
            .map(|e| core_reason(&e)),
        "records" => pir_records::DbHeader::decode(bytes)
            .err()
            .map(|e| text_reason(&e.to_string())),
        other => panic!("unknown format {other}"),
    }
}

#[test]
fn every_format_refuses_a_bad_prologue_for_that_reason() {
    let mut formats = std::collections::BTreeSet::new();
    let paths = vectors();
    for path in &paths {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let text = std::fs::read_to_string(path).unwrap();
        let first = text.lines().next().unwrap_or_default();
        let field = |key: &str| {
            first
                .split_whitespace()
                .find_map(|w| w.strip_prefix(key))
                .map(|v| v.trim_end_matches(':').to_string())
                .unwrap_or_else(|| panic!("{name}: no {key} on the first line"))
        };
        let (format, expect) = (field("format="), field("expect="));
        let hex: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .concat();
        let bytes = hex::decode(hex.trim()).unwrap();
        match reason(&format, &bytes) {
            None => panic!("{name}: accepted"),
            Some(got) => assert_eq!(got, expect, "{name}"),
        }
        formats.insert(format);
    }
    assert_eq!(formats.len(), 9, "a format lost its vectors: {formats:?}");
}
