//! The HaveIBeenPwned `range` API, answered from a privately retrieved bucket.
//!
//! `GET /range/{prefix}` of api.pwnedpasswords.com takes the first 5 hex digits (20 bits,
//! either case) of a SHA-1 hash and returns every known hash with that prefix as lines
//! `SUFFIX:COUNT`: the other 35 hex digits in upper case, a colon, the decimal count. Lines
//! are separated by CRLF ("\r\n") with no line break after the last line: the API
//! documentation describes its data as "each line with a CRLF" (haveibeenpwned.com/API/v3,
//! Pwned Passwords, quoted at feedback.passwork.pro/features/p/monitor-haveibeenpwned-with-all-users),
//! and clients split the body on "\r\n" and take every piece as a line (hex.pm package
//! `pwned` 1.1.0, lib/pwned.ex; gist Firesphere/92b09c94beebd503a3fdb114d52e36d0).
//!
//! With the request header `Add-Padding: true` the API pads the answer with random suffixes
//! whose count is 0: "padded API responses (to a minimum of 800 entries with additional
//! padding of a further 0-200 entries). The padding consists of randomly generated hash
//! suffixes with the usage count field set to 0" (Cloudflare blog, "Pwned Passwords Padding
//! (ft. Lava Lamps and Workers)", 2020-03-04, blog.cloudflare.com). [`range_response`] does
//! the same: it pads to `max(real, 800) + U[0, 200]` lines. Real and padding lines are sorted
//! together by suffix, so the position of a line says nothing; only the count 0 marks padding,
//! as in HIBP.
//!
//! A proxy maps the prefix to a bucket with [`RangePrefix::bucket`] (one prefix lies in
//! exactly one bucket, as databases of SHA-1 corpora have at most 20 prefix bits), retrieves
//! that block privately, decodes it and formats it here.

use std::collections::HashSet;

use rand::RngCore;

use crate::bits::{bits_u64, set_bits_u64};
use crate::bucket::Bucket;
use crate::header::DbHeader;
use crate::BreachError;

/// Lines a padded response has at least.
pub const PADDING_MIN_LINES: usize = 800;

/// Most random extra padding lines on top of `max(real, 800)`.
pub const PADDING_MAX_EXTRA: usize = 200;

/// Line separator of range responses.
pub const LINE_SEPARATOR: &str = "\r\n";

/// A validated 5-hex-digit range prefix: the first 20 bits of a SHA-1 hash.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct RangePrefix(u32);

impl RangePrefix {
    /// Parses exactly 5 hex digits, either case (as the API accepts them).
    pub fn parse(text: &str) -> Result<Self, BreachError> {
        if text.len() != 5 || !text.bytes().all(|b| b.is_ascii_hexdigit()) {
            return Err(BreachError::malformed(
                "range prefix",
                "expected exactly 5 hexadecimal digits (0-9, A-F)",
            ));
        }
        u32::from_str_radix(text, 16)
            .map(Self)
            .map_err(|_| BreachError::malformed("range prefix", "not hexadecimal"))
    }

    /// The prefix of a SHA-1 hash.
    pub fn of_hash(hash: &[u8; 20]) -> Self {
        Self(bits_u64(hash, 0, 20) as u32)
    }

    /// The 20-bit value.
    pub fn value(self) -> u32 {
        self.0
    }

    /// The bucket holding every hash with this prefix: its first `k <= 20` bits.
    pub fn bucket(self, header: &DbHeader) -> Result<usize, BreachError> {
        check_range_database(header)?;
        Ok((self.0 >> (20 - header.prefix_bits)) as usize)
    }
}

impl std::fmt::Display for RangePrefix {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:05X}", self.0)
    }
}

fn check_range_database(header: &DbHeader) -> Result<(), BreachError> {
    if !header.corpus.is_sha1() {
        return Err(BreachError::Input(
            "the range API serves SHA-1 password databases (hibp or passwords), not pairs".into(),
        ));
    }
    if header.prefix_bits > crate::header::MAX_SHA1_PREFIX_BITS {
        return Err(BreachError::Input(
            "invalid header: more than 20 prefix bits".into(),
        ));
    }
    if header.entry_bits() != 160 {
        return Err(BreachError::Input(format!(
            "this database keeps only {} bits of each hash; the range API needs whole SHA-1 \
             hashes: build it without truncation",
            header.entry_bits()
        )));
    }
    Ok(())
}

/// The body of `GET /range/{prefix}` from the decoded bucket of `prefix`, byte for byte as
/// api.pwnedpasswords.com formats it. With `padding` (the request had `Add-Padding: true`),
/// random count-0 lines are added as described in the module docs.
pub fn range_response<R: RngCore + ?Sized>(
    header: &DbHeader,
    prefix: RangePrefix,
    bucket: &Bucket,
    padding: Option<&mut R>,
) -> Result<String, BreachError> {
    let index = prefix.bucket(header)?;
    let k = header.prefix_bits as usize;
    let mut lines: Vec<(String, u64)> = Vec::new();
    for entry in bucket.entries() {
        // The whole hash: the bucket index (k bits), then the stored value (160 - k bits).
        let mut hash = [0u8; 20];
        set_bits_u64(&mut hash, 0, k, index as u64);
        let mut done = 0;
        while done < 160 - k {
            let take = (160 - k - done).min(64);
            set_bits_u64(
                &mut hash,
                k + done,
                take,
                bits_u64(&entry.value, done, take),
            );
            done += take;
        }
        if RangePrefix::of_hash(&hash) == prefix {
            lines.push((suffix_hex(&hash), entry.count));
        }
    }
    if let Some(rng) = padding {
        let extra = (rng.next_u32() as usize) % (PADDING_MAX_EXTRA + 1);
        let target = lines.len().max(PADDING_MIN_LINES) + extra;
        let mut seen: HashSet<String> = lines.iter().map(|(s, _)| s.clone()).collect();
        while lines.len() < target {
            let mut random = [0u8; 20];
            rng.fill_bytes(&mut random);
            let fake = suffix_hex(&random);
            if seen.insert(fake.clone()) {
                lines.push((fake, 0));
            }
        }
    }
    lines.sort_unstable();
    let mut body = String::with_capacity(lines.len() * 44);
    for (i, (suffix, count)) in lines.iter().enumerate() {
        if i > 0 {
            body.push_str(LINE_SEPARATOR);
        }
        body.push_str(suffix);
        body.push(':');
        body.push_str(&count.to_string());
    }
    Ok(body)
}

/// Hex digits 6 to 40 of a hash (bits 20 to 160), upper case.
fn suffix_hex(hash: &[u8; 20]) -> String {
    hex::encode_upper(hash).split_off(5)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::corpus::{password_sha1, CorpusStats, Sha1Entry};
    use crate::database::{build_sha1, Sha1Layout};
    use rand::SeedableRng;
    use rand_chacha::ChaCha20Rng;

    fn hash_hex(hex: &str) -> [u8; 20] {
        hex::decode(hex).unwrap().try_into().unwrap()
    }

    #[test]
    fn prefixes() {
        assert_eq!(RangePrefix::parse("5baa6").unwrap().value(), 0x5BAA6);
        assert_eq!(RangePrefix::parse("5BAA6").unwrap().to_string(), "5BAA6");
        for bad in ["5BAA", "5BAA61", "5BAG6", "+BAA6", " BAA6", "", "５BAA"] {
            let err = RangePrefix::parse(bad).unwrap_err();
            assert!(err.is_peer_error(), "{bad}");
        }
        assert_eq!(
            RangePrefix::of_hash(&password_sha1(b"password")).to_string(),
            "5BAA6"
        );
    }

    fn database(hashes: &[([u8; 20], u64)], k: u32) -> crate::database::BreachDatabase {
        let mut entries: Vec<Sha1Entry> = hashes
            .iter()
            .map(|&(hash, count)| Sha1Entry { hash, count })
            .collect();
        entries.sort();
        let layout = Sha1Layout {
            prefix_bits: Some(k),
            entry_bits: 160,
        };
        build_sha1(
            crate::corpus::CorpusFormat::Hibp,
            &entries,
            &layout,
            &CorpusStats::default(),
        )
        .unwrap()
        .0
    }

    #[test]
    fn byte_exact_response() {
        let password = password_sha1(b"password");
        let same_prefix = hash_hex("5BAA600000000000000000000000000000000001");
        let last = hash_hex("5BAA6FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF");
        let other_prefix = hash_hex("5BAA700000000000000000000000000000000000");
        for k in [0, 12, 20] {
            let db = database(
                &[
                    (password, 52256179),
                    (same_prefix, 2),
                    (last, 1),
                    (other_prefix, 5),
                ],
                k,
            );
            let prefix = RangePrefix::parse("5baa6").unwrap();
            let bucket = db.bucket(prefix.bucket(db.header()).unwrap()).unwrap();
            let body = range_response::<ChaCha20Rng>(db.header(), prefix, &bucket, None).unwrap();
            assert_eq!(
                body,
                "00000000000000000000000000000000001:2\r\n\
                 1E4C9B93F3F0682250B6CF8331B7EE68FD8:52256179\r\n\
                 FFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFFF:1",
                "k = {k}"
            );
            let empty = RangePrefix::parse("00000").unwrap();
            let bucket = db.bucket(empty.bucket(db.header()).unwrap()).unwrap();
            let body = range_response::<ChaCha20Rng>(db.header(), empty, &bucket, None).unwrap();
            assert_eq!(body, "", "k = {k}");
        }
    }

    #[test]
    fn padded_response() {
        let password = password_sha1(b"password");
        let db = database(&[(password, 7)], 16);
        let prefix = RangePrefix::of_hash(&password);
        let bucket = db.bucket(prefix.bucket(db.header()).unwrap()).unwrap();
        let mut rng = ChaCha20Rng::seed_from_u64(5);
        let mut sizes = HashSet::new();
        for _ in 0..20 {
            let body = range_response(db.header(), prefix, &bucket, Some(&mut rng)).unwrap();
            assert!(!body.ends_with('\n') && !body.contains("\n\n"));
            let lines: Vec<&str> = body.split("\r\n").collect();
            assert!((800..=1000).contains(&lines.len()), "{}", lines.len());
            sizes.insert(lines.len());
            assert!(lines.contains(&"1E4C9B93F3F0682250B6CF8331B7EE68FD8:7"));
            let mut suffixes = HashSet::new();
            for line in &lines {
                let (suffix, count) = line.split_once(':').unwrap();
                assert_eq!(suffix.len(), 35);
                assert!(suffix
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'A'..=b'F').contains(&b)));
                assert!(count == "0" || *line == "1E4C9B93F3F0682250B6CF8331B7EE68FD8:7");
                assert!(suffixes.insert(suffix));
            }
            assert!(lines.windows(2).all(|w| w[0] < w[1]), "sorted by suffix");
        }
        assert!(sizes.len() > 5, "the padded size varies");
    }

    #[test]
    fn wrong_databases_are_refused() {
        let password = password_sha1(b"password");
        let mut entries = vec![Sha1Entry {
            hash: password,
            count: 1,
        }];
        entries.sort();
        let layout = Sha1Layout {
            prefix_bits: Some(8),
            entry_bits: 64,
        };
        let (db, _) = build_sha1(
            crate::corpus::CorpusFormat::Passwords,
            &entries,
            &layout,
            &CorpusStats::default(),
        )
        .unwrap();
        let err = RangePrefix::of_hash(&password)
            .bucket(db.header())
            .unwrap_err()
            .to_string();
        assert!(err.contains("keeps only 64 bits"), "{err}");
    }
}
