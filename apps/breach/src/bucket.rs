//! Compressed buckets: "compressible PIR" (Günther 2019, section 3.4).
//!
//! A bucket holds the entries whose hash starts with one `k`-bit prefix. Each entry is a
//! fixed-width value of `w` bits (the prefix is dropped: the bucket index implies it) and, for
//! SHA-1 corpora, a count. Sorted values of a uniformly distributed hash are close to their
//! neighbours, so the bucket stores the *gaps* between them (section 3.4: "we can store their
//! differences instead of the whole entries themselves"), with a Golomb-Rice code:
//!
//! ```text
//! block   = m: u32 LE                      number of entries
//!         | for each entry, in increasing order of value (MSB-first bit string):
//!             unary(high_i - high_{i-1})   high = first L bits of the value, high_{-1} = 0;
//!                                          unary(q) = q zero bits, then a one bit
//!             low                          the other r = w - L bits of the value, verbatim
//!             gamma(count)                 only if counts are stored: Elias gamma, count >= 1
//!         | zero bits up to the block size
//! where   L = min(w, floor(log2(m)))  (L = 0 when m <= 1), r = w - L
//! ```
//!
//! With `L = floor(log2 m)` the `m` high parts fall into `2^L <= m` slots, so the mean gap is
//! at most 1 and each entry costs about `r + 2` bits instead of `w`: `log2(m) - 2` bits saved
//! per value, plus the counts, which are mostly small (gamma(1) is one bit).
//!
//! Every block of a database is padded with zero bits to one block size. The padding is never
//! read as entries: the decoder stops after the `m` entries the block declares, and it rejects
//! a block whose padding is not all zero, whose values are not strictly increasing or whose
//! entry count could not fit, so every bucket has exactly one encoding and decoding returns
//! exactly the entries that went in.

use crate::bits::{extract_value, set_bits_u64, BitReader, BitWriter, OutOfBits, Value};
use crate::BreachError;

/// Bytes before the bit string of a block: the entry count `m` (u32 LE).
pub const BLOCK_HEADER_BYTES: usize = 4;

/// Widest value a bucket stores: a whole SHA-1 hash.
pub const MAX_VALUE_BITS: u32 = 160;

/// One entry of a bucket.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Entry {
    /// The stored value, left-aligned (see [`Value`]).
    pub value: Value,
    /// How often the hash occurs in the corpus (at least 1). Databases without counts (blinded
    /// credential databases) report 1 for every entry.
    pub count: u64,
}

/// How the buckets of one database are coded: the value width `w` and whether counts are
/// stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BucketCodec {
    value_bits: u32,
    counts: bool,
}

impl BucketCodec {
    /// A codec for `w`-bit values (`1 <= w <= 160`), with or without counts.
    pub fn new(value_bits: u32, counts: bool) -> Result<Self, BreachError> {
        if value_bits == 0 || value_bits > MAX_VALUE_BITS {
            return Err(BreachError::Input(format!(
                "value width {value_bits} bits must be between 1 and {MAX_VALUE_BITS}"
            )));
        }
        Ok(Self { value_bits, counts })
    }

    /// `w`, the bits stored per value.
    pub fn value_bits(&self) -> u32 {
        self.value_bits
    }

    /// Whether each entry carries a count.
    pub fn counts(&self) -> bool {
        self.counts
    }

    /// `(L, r)` for a bucket of `m` entries: high bits coded as gaps, low bits verbatim.
    fn split(&self, m: u32) -> (usize, usize) {
        let log = if m <= 1 { 0 } else { 31 - m.leading_zeros() };
        let high = log.min(self.value_bits) as usize;
        (high, self.value_bits as usize - high)
    }

    /// Encodes a bucket. `entries` must be strictly increasing by value, every value must have
    /// zero bits past `w`, and with counts every count must be at least 1.
    pub fn encode(&self, entries: &[Entry]) -> Result<Vec<u8>, BreachError> {
        let m = u32::try_from(entries.len()).map_err(|_| {
            BreachError::Input(format!(
                "a bucket of {} entries is too large (at most 2^32 - 1); use more prefix bits",
                entries.len()
            ))
        })?;
        let (high_bits, low_bits) = self.split(m);
        let w = self.value_bits as usize;
        let mut out = BitWriter::after(m.to_le_bytes().to_vec());
        let mut previous: Option<&Value> = None;
        let mut previous_high = 0u64;
        for entry in entries {
            if extract_value(&entry.value, 0, w) != entry.value {
                return Err(BreachError::Input(format!(
                    "a bucket value has bits set past its width of {w} bits"
                )));
            }
            if previous.is_some_and(|p| *p >= entry.value) {
                return Err(BreachError::Input(
                    "bucket entries must be strictly increasing by value".into(),
                ));
            }
            if self.counts && entry.count == 0 {
                return Err(BreachError::Input("a bucket entry has count 0".into()));
            }
            let high = crate::bits::bits_u64(&entry.value, 0, high_bits);
            out.put_unary(high - previous_high);
            out.put_slice_bits(&entry.value, high_bits, low_bits);
            if self.counts {
                out.put_gamma(entry.count);
            }
            previous = Some(&entry.value);
            previous_high = high;
        }
        Ok(out.into_bytes())
    }

    /// Decodes a block (the encoding followed by zero padding). Untrusted input: every length
    /// is checked before allocating, and any deviation from the one valid encoding is an
    /// error.
    pub fn decode(&self, block: &[u8]) -> Result<Bucket, BreachError> {
        const WHAT: &str = "bucket block";
        let header: [u8; BLOCK_HEADER_BYTES] = block
            .get(..BLOCK_HEADER_BYTES)
            .and_then(|h| h.try_into().ok())
            .ok_or_else(|| {
                BreachError::malformed(
                    WHAT,
                    format!("{} bytes, shorter than its header", block.len()),
                )
            })?;
        let m = u32::from_le_bytes(header);
        let (high_bits, low_bits) = self.split(m);
        let mut reader = BitReader::new(block, BLOCK_HEADER_BYTES * 8);
        // Each entry costs at least one unary bit, its low bits and one gamma bit.
        let min_bits = 1 + low_bits + usize::from(self.counts);
        let fits = reader.remaining() / min_bits;
        if m as usize > fits {
            return Err(BreachError::malformed(
                WHAT,
                format!(
                    "declares {m} entries but {} bytes hold at most {fits}",
                    block.len()
                ),
            ));
        }
        let truncated = |_: OutOfBits| BreachError::malformed(WHAT, "entries run past the block");
        let high_max = if high_bits == 0 {
            0
        } else {
            (1u64 << high_bits) - 1
        };
        let mut entries: Vec<Entry> = Vec::with_capacity(m as usize);
        let mut high = 0u64;
        for _ in 0..m {
            let gap = reader
                .unary(high_max - high)
                .map_err(truncated)?
                .ok_or_else(|| {
                    BreachError::malformed(WHAT, "a value lies outside its bucket's range")
                })?;
            high += gap;
            let mut value = [0u8; crate::bits::VALUE_BYTES];
            set_bits_u64(&mut value, 0, high_bits, high);
            let mut done = 0;
            while done < low_bits {
                let take = (low_bits - done).min(64);
                let bits = reader.get(take).map_err(truncated)?;
                set_bits_u64(&mut value, high_bits + done, take, bits);
                done += take;
            }
            let count = if self.counts {
                reader
                    .gamma()
                    .map_err(truncated)?
                    .ok_or_else(|| BreachError::malformed(WHAT, "a count is longer than 64 bits"))?
            } else {
                1
            };
            if entries.last().is_some_and(|last| last.value >= value) {
                return Err(BreachError::malformed(
                    WHAT,
                    "values are not strictly increasing",
                ));
            }
            entries.push(Entry { value, count });
        }
        if !reader.rest_is_zero() {
            return Err(BreachError::malformed(
                WHAT,
                "padding after the entries is not all zero",
            ));
        }
        Ok(Bucket { entries })
    }
}

/// A decoded bucket: its entries in increasing order of value. Padding is never an entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Bucket {
    entries: Vec<Entry>,
}

impl Bucket {
    /// The entries, strictly increasing by value.
    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// Number of entries (real ones: padding is not counted).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// True when the bucket has no entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The count of `value` if the bucket holds it.
    pub fn count_of(&self, value: &Value) -> Option<u64> {
        self.entries
            .binary_search_by(|e| e.value.cmp(value))
            .ok()
            .map(|i| self.entries[i].count)
    }

    /// True when the bucket holds `value`.
    pub fn contains(&self, value: &Value) -> bool {
        self.count_of(value).is_some()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::bits::VALUE_BYTES;
    use proptest::prelude::*;

    fn masked(mut v: Value, w: u32) -> Value {
        v = extract_value(&v, 0, w as usize);
        v
    }

    fn entries_from(raw: Vec<(Value, u64)>, w: u32, counts: bool) -> Vec<Entry> {
        let mut entries: Vec<Entry> = raw
            .into_iter()
            .map(|(v, c)| Entry {
                value: masked(v, w),
                count: if counts { c.max(1) } else { 1 },
            })
            .collect();
        entries.sort();
        entries.dedup_by(|a, b| a.value == b.value);
        entries
    }

    fn padded(mut bytes: Vec<u8>, extra: usize) -> Vec<u8> {
        bytes.resize(bytes.len() + extra, 0);
        bytes
    }

    proptest! {
        #[test]
        fn round_trip(
            w in 1u32..=160,
            counts in any::<bool>(),
            raw in proptest::collection::vec((any::<[u8; VALUE_BYTES]>(), any::<u64>()), 0..300),
            extra in 0usize..100,
        ) {
            let codec = BucketCodec::new(w, counts).unwrap();
            let entries = entries_from(raw, w, counts);
            let block = padded(codec.encode(&entries).unwrap(), extra);
            let bucket = codec.decode(&block).unwrap();
            prop_assert_eq!(bucket.entries(), &entries[..]);
            for e in &entries {
                prop_assert_eq!(bucket.count_of(&e.value), Some(e.count));
            }
        }

        #[test]
        fn random_blocks_never_panic(w in 1u32..=160, counts in any::<bool>(),
                                     bytes in proptest::collection::vec(any::<u8>(), 0..400)) {
            let codec = BucketCodec::new(w, counts).unwrap();
            if let Ok(bucket) = codec.decode(&bytes) {
                // Whatever decodes re-encodes to the same bytes: the code is canonical.
                let again = codec.encode(bucket.entries()).unwrap();
                prop_assert_eq!(&bytes[..again.len()], &again[..]);
            }
        }

        #[test]
        fn flipped_bits_never_panic(
            w in 1u32..=160,
            counts in any::<bool>(),
            raw in proptest::collection::vec((any::<[u8; VALUE_BYTES]>(), any::<u64>()), 1..50),
            flip in any::<proptest::sample::Index>(),
        ) {
            let codec = BucketCodec::new(w, counts).unwrap();
            let entries = entries_from(raw, w, counts);
            let mut block = padded(codec.encode(&entries).unwrap(), 8);
            let bit = flip.index(block.len() * 8);
            block[bit / 8] ^= 0x80 >> (bit % 8);
            if let Ok(bucket) = codec.decode(&block) {
                prop_assert_ne!(bucket.entries(), &entries[..]);
                let again = codec.encode(bucket.entries()).unwrap();
                prop_assert_eq!(&block[..again.len()], &again[..]);
            }
        }
    }

    #[test]
    fn padding_is_never_an_entry() {
        // Adversarial values: the all-zero value is what zero padding would decode to, and the
        // all-ones value is the largest possible.
        let w = 140;
        let codec = BucketCodec::new(w, true).unwrap();
        let zero = [0u8; VALUE_BYTES];
        let ones = masked([0xff; VALUE_BYTES], w);
        let mid = masked([0x5a; VALUE_BYTES], w);
        let block = padded(
            codec
                .encode(&[Entry {
                    value: mid,
                    count: 3,
                }])
                .unwrap(),
            4096,
        );
        let bucket = codec.decode(&block).unwrap();
        assert_eq!(bucket.len(), 1);
        assert_eq!(bucket.count_of(&zero), None);
        assert_eq!(bucket.count_of(&ones), None);
        assert_eq!(bucket.count_of(&mid), Some(3));
        // An empty bucket is all padding and holds nothing.
        let empty = codec.decode(&[0u8; 64]).unwrap();
        assert!(empty.is_empty() && !empty.contains(&zero));
        // Real all-zero and all-ones entries are found.
        let edges = [
            Entry {
                value: zero,
                count: 1,
            },
            Entry {
                value: ones,
                count: 9,
            },
        ];
        let bucket = codec
            .decode(&padded(codec.encode(&edges).unwrap(), 64))
            .unwrap();
        assert_eq!(bucket.count_of(&zero), Some(1));
        assert_eq!(bucket.count_of(&ones), Some(9));
    }

    #[test]
    fn malformed_blocks_are_rejected() {
        let codec = BucketCodec::new(16, true).unwrap();
        let err = codec.decode(&[1, 0]).unwrap_err().to_string();
        assert!(err.contains("shorter than its header"), "{err}");
        let err = codec
            .decode(&[0xff, 0xff, 0, 0, 0xff])
            .unwrap_err()
            .to_string();
        assert!(err.contains("declares 65535 entries"), "{err}");
        let mut block = codec
            .encode(&[Entry {
                value: masked([7; VALUE_BYTES], 16),
                count: 2,
            }])
            .unwrap();
        block.push(0x01);
        let err = codec.decode(&block).unwrap_err().to_string();
        assert!(err.contains("padding"), "{err}");
        // Two equal values (gap 0, same low bits) are not strictly increasing.
        let mut w = BitWriter::after(2u32.to_le_bytes().to_vec());
        for _ in 0..2 {
            w.put_unary(0);
            w.put(0x1234, 15);
            w.put_gamma(1);
        }
        let err = codec.decode(&w.into_bytes()).unwrap_err().to_string();
        assert!(err.contains("strictly increasing"), "{err}");
        // Unsorted or over-wide input is a caller error at encoding time.
        let a = Entry {
            value: masked([1; VALUE_BYTES], 16),
            count: 1,
        };
        let b = Entry {
            value: masked([2; VALUE_BYTES], 16),
            count: 1,
        };
        assert!(codec.encode(&[b, a]).is_err());
        assert!(codec
            .encode(&[Entry {
                value: [1; VALUE_BYTES],
                count: 1
            }])
            .is_err());
        assert!(BucketCodec::new(0, false).is_err() && BucketCodec::new(161, false).is_err());
    }
}
