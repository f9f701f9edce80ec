//! The one runner for refusal vectors, shared by every crate's tests (feature `testing`; never
//! in a release build, so the file reading here is not part of the core).
//!
//! A vector is `tests/vectors/<format>/fail_<reason>.hex`: a first line
//! `# expect=VARIANT what is wrong`, where `VARIANT` names the [`Error`] variant the decoder
//! must give (`Truncated`, `TrailingBytes`, `OutOfRange`, `UnknownValue`...), then the bytes in
//! hex (whitespace and further `#` lines ignored).
//!
//! Each crate's test builds its vectors in code, deterministically, from a valid encoding
//! ([`FailVector::new`]) and calls [`check_fail_vectors`]: the committed files must be exactly
//! the ones the code builds (run the test with `PIR_WRITE_VECTORS=1` to rewrite them), and every
//! committed file must be refused, for its stated reason, without a panic.

// Test support: a failed check is a failed test, reported with a panic that names the vector.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};

use super::Codec;
use crate::Error;

/// Set to rewrite the committed vectors from the generators.
pub const WRITE_ENV: &str = "PIR_WRITE_VECTORS";

/// One refusal vector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FailVector {
    /// The reason part of the file name (`fail_<reason>.hex`).
    pub reason: String,
    /// The error variant the decoder must give.
    pub expect: String,
    /// What is wrong, in words (the rest of the first line).
    pub note: String,
    /// The bytes to decode.
    pub bytes: Vec<u8>,
}

impl FailVector {
    /// A vector named `fail_<reason>.hex`, expected to fail with `expect` (a variant name).
    pub fn new(reason: &str, expect: &str, note: &str, bytes: Vec<u8>) -> Self {
        Self {
            reason: reason.to_owned(),
            expect: expect.to_owned(),
            note: note.to_owned(),
            bytes,
        }
    }

    /// `fail_truncated`: `good` with its last byte cut, refused as `Truncated`.
    pub fn truncated(good: &[u8], note: &str) -> Self {
        Self::new("truncated", "Truncated", note, cut(good))
    }

    /// `fail_trailing`: `good` with a zero byte appended, refused as `TrailingBytes`.
    pub fn trailing(good: &[u8], note: &str) -> Self {
        Self::new("trailing", "TrailingBytes", note, trailing(good))
    }

    /// `fail_wrong_magic`: `good` with the magic's byte at `at` set to `byte`, refused as
    /// `WrongMagic`; `note` spells the magic so damaged.
    pub fn wrong_magic(good: &[u8], at: usize, byte: u8, note: &str) -> Self {
        Self::new(
            "wrong_magic",
            "WrongMagic",
            note,
            patch(good, at, 1, byte.into()),
        )
    }

    /// `fail_next_version`: `good` with its little-endian version field (`width` bytes at
    /// `at`) set to 2, the next version, refused as `WrongVersion`.
    pub fn next_version(good: &[u8], at: usize, width: usize) -> Self {
        Self::new(
            "next_version",
            "WrongVersion",
            "version 2",
            patch(good, at, width, 2),
        )
    }

    fn file_name(&self) -> String {
        format!("fail_{}.hex", self.reason)
    }

    fn file_text(&self) -> String {
        let mut text = format!("# expect={} {}\n", self.expect, self.note);
        let hex = encode_hex(&self.bytes);
        for line in hex.as_bytes().chunks(64) {
            text.push_str(std::str::from_utf8(line).unwrap());
            text.push('\n');
        }
        text
    }

    fn parse(reason: &str, text: &str) -> Self {
        let first = text.lines().next().unwrap_or_default();
        let rest = first
            .strip_prefix("# expect=")
            .unwrap_or_else(|| panic!("fail_{reason}.hex: first line is not '# expect=VARIANT'"));
        let (expect, note) = rest.split_once(' ').unwrap_or((rest, ""));
        let hex: String = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .concat();
        let bytes =
            decode_hex(&hex).unwrap_or_else(|| panic!("fail_{reason}.hex: the bytes are not hex"));
        Self::new(reason, expect, note, bytes)
    }
}

/// `tests/vectors/<format>` seen from a crate two levels below the workspace root
/// (`crates/X`, `apps/X`); pass `env!("CARGO_MANIFEST_DIR")`.
pub fn vectors_dir(manifest_dir: &str, format: &str) -> PathBuf {
    Path::new(manifest_dir)
        .join("../../tests/vectors")
        .join(format)
}

/// Every `fail_*.hex` in `dir`, sorted by name.
pub fn load(dir: &Path) -> Vec<FailVector> {
    let entries = std::fs::read_dir(dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    let mut vectors: Vec<FailVector> = entries
        .map(|entry| entry.unwrap().path())
        .filter_map(|path| {
            let name = path.file_name()?.to_str()?.to_owned();
            let reason = name.strip_prefix("fail_")?.strip_suffix(".hex")?.to_owned();
            let text = std::fs::read_to_string(&path).unwrap();
            Some(FailVector::parse(&reason, &text))
        })
        .collect();
    vectors.sort_by(|a, b| a.reason.cmp(&b.reason));
    vectors
}

/// Makes the committed files in `dir` the generated ones when [`WRITE_ENV`] is set; otherwise
/// checks that they already are (so a vector cannot drift from the code that explains it).
pub fn sync(dir: &Path, generated: &[FailVector]) {
    let mut generated = generated.to_vec();
    generated.sort_by(|a, b| a.reason.cmp(&b.reason));
    if std::env::var_os(WRITE_ENV).is_some() {
        std::fs::create_dir_all(dir).unwrap();
        for old in load(dir) {
            std::fs::remove_file(dir.join(old.file_name())).unwrap();
        }
        for v in &generated {
            std::fs::write(dir.join(v.file_name()), v.file_text()).unwrap();
        }
        return;
    }
    let committed = load(dir);
    let names = |vs: &[FailVector]| vs.iter().map(FailVector::file_name).collect::<Vec<_>>();
    assert_eq!(
        names(&committed),
        names(&generated),
        "{}: committed vectors differ from the generated ones; rerun with {WRITE_ENV}=1",
        dir.display()
    );
    for (c, g) in committed.iter().zip(&generated) {
        assert_eq!(
            c,
            g,
            "{}/{}: differs from the generated vector; rerun with {WRITE_ENV}=1",
            dir.display(),
            c.file_name()
        );
    }
}

/// The name of an error's variant, as written after `expect=`.
pub fn variant(error: &Error) -> String {
    format!("{error:?}")
        .chars()
        .take_while(char::is_ascii_alphanumeric)
        .collect()
}

/// Decodes every vector as a `T` and asserts it is refused with its expected variant, by a
/// peer error, without a panic.
pub fn assert_refused<'v, T: Codec<'v>>(vectors: &'v [FailVector], context: &T::Context) {
    assert!(!vectors.is_empty(), "no vectors to check");
    for v in vectors {
        let outcome = catch_unwind(AssertUnwindSafe(|| T::from_bytes(&v.bytes, context)));
        match outcome {
            Err(_) => panic!("{}: the decoder panicked", v.file_name()),
            Ok(Ok(_)) => panic!("{}: accepted ({})", v.file_name(), v.note),
            Ok(Err(error)) => {
                assert_eq!(
                    variant(&error),
                    v.expect,
                    "{}: refused for another reason: {error}",
                    v.file_name()
                );
                assert!(
                    error.is_peer_error(),
                    "{}: bad bytes must be the peer's fault: {error}",
                    v.file_name()
                );
            }
        }
    }
}

/// The whole check for one format: [`sync`] the committed files with `generated`, then
/// [`assert_refused`] every committed file. Returns how many were checked.
pub fn check_fail_vectors<T: Codec<'static>>(
    dir: &Path,
    generated: &[FailVector],
    context: &T::Context,
) -> usize {
    sync(dir, generated);
    // Leaked so that formats that borrow from their input (`Codec<'static>`) can be checked;
    // a few hundred bytes per test run.
    let vectors: &'static [FailVector] = Vec::leak(load(dir));
    assert_refused::<T>(vectors, context);
    vectors.len()
}

/// `bytes` with its last byte removed: the common "truncated" vector.
pub fn cut(bytes: &[u8]) -> Vec<u8> {
    bytes[..bytes.len().saturating_sub(1)].to_vec()
}

/// `bytes` with one zero byte appended: the common "trailing bytes" vector.
pub fn trailing(bytes: &[u8]) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out.push(0);
    out
}

/// `bytes` with the little-endian field of `width` bytes at `at` replaced by `value`.
pub fn patch(bytes: &[u8], at: usize, width: usize, value: u64) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at..at + width].copy_from_slice(&value.to_le_bytes()[..width]);
    out
}

/// The vectors most formats share: `truncated` (last byte cut) and `trailing` (a byte added)
/// of the valid encoding `good`, and `empty`, all with the variants a complete decoder gives.
pub fn cut_and_trailing(good: &[u8]) -> Vec<FailVector> {
    vec![
        FailVector::new("empty", "Truncated", "no bytes", Vec::new()),
        FailVector::new("truncated", "Truncated", "last byte missing", cut(good)),
        FailVector::new(
            "trailing",
            "TrailingBytes",
            "a byte after the value",
            trailing(good),
        ),
    ]
}

/// One damaged field of a valid encoding: `(reason, expected variant, note, offset, width,
/// value)`, the little-endian field of `width` bytes at `offset` replaced by `value`.
pub type Patch<'p> = (&'p str, &'p str, &'p str, usize, usize, u64);

/// One vector per [`Patch`] of `good`.
pub fn patches(good: &[u8], fields: &[Patch<'_>]) -> Vec<FailVector> {
    fields
        .iter()
        .map(|&(reason, expect, note, at, width, value)| {
            FailVector::new(reason, expect, note, patch(good, at, width, value))
        })
        .collect()
}

/// The whole test of one format from one valid encoding `good` (the crate's
/// `CARGO_MANIFEST_DIR` locates `tests/vectors/<format>`): `good` decodes and encodes back to
/// the same bytes, and the vectors [`cut_and_trailing`] (less those `extra` replaces, by
/// reason), `extra` and [`patches`] of `fields` are checked by [`check_fail_vectors`].
/// Returns how many vectors were checked.
pub fn check_format<T: Codec<'static>>(
    manifest_dir: &str,
    format: &str,
    good: &[u8],
    context: &T::Context,
    fields: &[Patch<'_>],
    extra: Vec<FailVector>,
) -> usize {
    let good: &'static [u8] = Vec::leak(good.to_vec());
    let decoded = T::from_bytes(good, context)
        .unwrap_or_else(|e| panic!("{format}: the valid encoding is refused: {e}"));
    assert_eq!(decoded.to_bytes(), good, "{format}: round trip");
    let mut vectors: Vec<FailVector> = cut_and_trailing(good)
        .into_iter()
        .filter(|v| extra.iter().all(|e| e.reason != v.reason))
        .collect();
    vectors.extend(extra);
    vectors.extend(patches(good, fields));
    check_fail_vectors::<T>(&vectors_dir(manifest_dir, format), &vectors, context)
}

/// The `trailing` vector of a format that is one whole envelope (`pir_core::wire::Envelope`):
/// a byte after the body contradicts the envelope's length, `WrongLength`. Pass it in
/// [`check_format`]'s `extra`.
pub fn envelope_trailing(good: &[u8]) -> FailVector {
    FailVector::new(
        "trailing",
        "WrongLength",
        "a byte after the body the envelope declares",
        trailing(good),
    )
}

fn encode_hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn decode_hex(text: &str) -> Option<Vec<u8>> {
    if !text.len().is_multiple_of(2) {
        return None;
    }
    (0..text.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(text.get(i..i + 2)?, 16).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vector_files_parse_back() {
        let v = FailVector::new("x", "Truncated", "cut short", (0..40).collect());
        assert_eq!(FailVector::parse("x", &v.file_text()), v);
        assert_eq!(variant(&Error::Truncated { needed: 1 }), "Truncated");
        assert_eq!(variant(&Error::WrongMagic), "WrongMagic");
        assert_eq!(patch(&[0, 0, 0], 1, 2, 0x0102), vec![0, 2, 1]);
    }
}
