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

use pir_core::codec::{Codec, Reader, Writer};
use pir_core::Error;

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
        let w = self.value_bits as usize;
        let mut previous: Option<&Value> = None;
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
            previous = Some(&entry.value);
        }
        Ok(self.write(m, entries))
    }

    /// Decodes a block (the encoding followed by zero padding), taking the whole of `block`
    /// as one block: [`BucketBlock`]'s decoder with the block size `block.len()`, its refusal
    /// reported as [`BreachError::Malformed`].
    pub fn decode(&self, block: &[u8]) -> Result<Bucket, BreachError> {
        let shape = BlockShape {
            codec: *self,
            block_size: block.len(),
        };
        BucketBlock::from_bytes(block, &shape)
            .map(BucketBlock::into_bucket)
            .map_err(|e| {
                let message = match e {
                    Error::Malformed(message) => message,
                    other => other.to_string(),
                };
                BreachError::malformed("bucket block", message)
            })
    }

    /// The most entries a block of `block_bits` bits (header included) can hold when it
    /// declares `m`: each entry costs at least one unary bit, its low bits and, with counts,
    /// one gamma bit.
    fn fits(&self, m: u32, block_bits: usize) -> usize {
        let (_, low_bits) = self.split(m);
        let min_bits = 1 + low_bits + usize::from(self.counts);
        block_bits.saturating_sub(BLOCK_HEADER_BYTES * 8) / min_bits
    }

    /// Writes `entries` after their count, without the checks of [`BucketCodec::encode`]
    /// (callers pass entries that passed them).
    fn write(&self, m: u32, entries: &[Entry]) -> Vec<u8> {
        let (high_bits, low_bits) = self.split(m);
        let mut out = BitWriter::after(m.to_le_bytes().to_vec());
        let mut previous_high = 0u64;
        for entry in entries {
            let high = crate::bits::bits_u64(&entry.value, 0, high_bits);
            out.put_unary(high.saturating_sub(previous_high));
            out.put_slice_bits(&entry.value, high_bits, low_bits);
            if self.counts {
                out.put_gamma(entry.count.max(1));
            }
            previous_high = high;
        }
        out.into_bytes()
    }
}

/// What a bucket block's decoder must be told: the database's bucket code and its block size.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct BlockShape {
    /// The value width and whether counts are stored.
    pub codec: BucketCodec,
    /// Bytes per block (the block a PIR answer returns).
    pub block_size: usize,
}

/// One bucket block exactly as it lies in the database and comes back from a PIR answer:
/// the bucket's encoding (module documentation) padded with zero bits to the block size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BucketBlock {
    shape: BlockShape,
    bucket: Bucket,
}

impl BucketBlock {
    /// The block of `entries` (the conditions of [`BucketCodec::encode`]); errors if their
    /// encoding does not fit `shape.block_size`.
    pub fn new(shape: BlockShape, entries: &[Entry]) -> Result<Self, BreachError> {
        let len = shape.codec.encode(entries)?.len();
        if len > shape.block_size {
            return Err(BreachError::Input(format!(
                "a bucket of {} entries needs {len} bytes, above the {}-byte block",
                entries.len(),
                shape.block_size
            )));
        }
        Ok(Self {
            shape,
            bucket: Bucket {
                entries: entries.to_vec(),
            },
        })
    }

    /// The shape the block was built or decoded with.
    pub fn shape(&self) -> BlockShape {
        self.shape
    }

    /// The decoded bucket.
    pub fn bucket(&self) -> &Bucket {
        &self.bucket
    }

    /// The decoded bucket, taken out of the block.
    pub fn into_bucket(self) -> Bucket {
        self.bucket
    }
}

/// The bucket block (module documentation). Decoding takes exactly `block_size` bytes and
/// refuses, before allocating, an entry count the block cannot hold (`OutOfRange`); any other
/// deviation from the one valid encoding (entries running past the block, a value outside its
/// bucket's range, a count longer than 64 bits, values not strictly increasing, padding not
/// zero) is `Malformed`.
impl Codec<'_> for BucketBlock {
    type Context = BlockShape;

    fn encode(&self, w: &mut Writer) {
        let entries = self.bucket.entries();
        // `new` and `decode` only admit fewer than 2^32 entries.
        let m = u32::try_from(entries.len()).unwrap_or(u32::MAX);
        let bytes = self.shape.codec.write(m, entries);
        w.bytes(&bytes);
        w.bytes(&vec![0; self.shape.block_size.saturating_sub(bytes.len())]);
    }

    fn decode(r: &mut Reader<'_>, shape: &BlockShape) -> Result<Self, Error> {
        let malformed = |m: &str| Error::Malformed(m.to_owned());
        let block = r.take(shape.block_size)?;
        let m = Reader::new(block).u32()?;
        let codec = shape.codec;
        let (high_bits, low_bits) = codec.split(m);
        let mut reader = BitReader::new(block, BLOCK_HEADER_BYTES * 8);
        let fits = codec.fits(m, block.len() * 8);
        if m as usize > fits {
            return Err(Error::OutOfRange {
                field: "bucket entry count",
                found: m.into(),
                limit: fits as u64,
            });
        }
        let past_end = |_: OutOfBits| malformed("entries run past the block");
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
                .map_err(past_end)?
                .ok_or_else(|| malformed("a value lies outside its bucket's range"))?;
            high += gap;
            let mut value = [0u8; crate::bits::VALUE_BYTES];
            set_bits_u64(&mut value, 0, high_bits, high);
            let mut done = 0;
            while done < low_bits {
                let take = (low_bits - done).min(64);
                let bits = reader.get(take).map_err(past_end)?;
                set_bits_u64(&mut value, high_bits + done, take, bits);
                done += take;
            }
            let count = if codec.counts {
                reader
                    .gamma()
                    .map_err(past_end)?
                    .ok_or_else(|| malformed("a count is longer than 64 bits"))?
            } else {
                1
            };
            if entries.last().is_some_and(|last| last.value >= value) {
                return Err(malformed("values are not strictly increasing"));
            }
            entries.push(Entry { value, count });
        }
        if !reader.rest_is_zero() {
            return Err(malformed("padding after the entries is not all zero"));
        }
        Ok(Self {
            shape: *shape,
            bucket: Bucket { entries },
        })
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
        assert!(err.contains("truncated"), "{err}");
        let err = codec
            .decode(&[0xff, 0xff, 0, 0, 0xff])
            .unwrap_err()
            .to_string();
        assert!(err.contains("bucket entry count 65535"), "{err}");
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

    /// A 64-byte block of `bits` (a bit string written after its header), zero-padded or cut.
    fn block_of(w: BitWriter) -> Vec<u8> {
        let mut bytes = w.into_bytes();
        bytes.resize(64, 0);
        bytes
    }

    #[test]
    fn block_vectors_are_refused() {
        use pir_core::codec::testing::{check_format, FailVector, Patch};
        let shape = BlockShape {
            codec: BucketCodec::new(16, true).unwrap(),
            block_size: 64,
        };
        let entries: Vec<Entry> = [(0x0123u16, 1u64), (0x4567, 2), (0x89ab, 1), (0xcdef, 300)]
            .iter()
            .map(|&(v, count)| {
                let mut value = [0; VALUE_BYTES];
                value[..2].copy_from_slice(&v.to_be_bytes());
                Entry { value, count }
            })
            .collect();
        let good = BucketBlock::new(shape, &entries).unwrap().to_bytes();
        assert_eq!(good.len(), 64);
        // The bytes are those of the database builder's code, padded.
        let raw = shape.codec.encode(&entries).unwrap();
        assert_eq!(good, padded(raw.clone(), 64 - raw.len()));
        // Entry count at 0 (u32); for m = 1000, L = 9 and 480 bits hold at most 53 entries.
        let fields: &[Patch<'_>] = &[
            (
                "count_above_capacity",
                "OutOfRange",
                "1000 entries declared, 53 fit",
                0,
                4,
                1000,
            ),
            (
                "padding_not_zero",
                "Malformed",
                "last padding byte 1",
                63,
                1,
                1,
            ),
        ];
        // Two equal values: gap 0 and the same low bits twice.
        let mut equal = BitWriter::after(2u32.to_le_bytes().to_vec());
        for _ in 0..2 {
            equal.put_unary(0);
            equal.put(0x1234, 15);
            equal.put_gamma(1);
        }
        // m = 2 gives one high bit (high part 0 or 1); a gap of 2 leaves that range.
        let mut outside = BitWriter::after(2u32.to_le_bytes().to_vec());
        outside.put_unary(2);
        outside.put(0x1234, 15);
        outside.put_gamma(1);
        // A gamma code announcing 65 bits.
        let mut long = BitWriter::after(1u32.to_le_bytes().to_vec());
        long.put_unary(0);
        long.put(0x1234, 16);
        long.put(0, 64);
        long.put(1, 1);
        // 20 entries fit by their least size, but counts of 2^62 make each 138 bits long.
        let mut past = BitWriter::after(20u32.to_le_bytes().to_vec());
        for i in 0..20 {
            past.put_unary(0);
            past.put(i, 12);
            past.put_gamma(1 << 62);
        }
        let extra = vec![
            FailVector::new(
                "not_increasing",
                "Malformed",
                "two equal values",
                block_of(equal),
            ),
            FailVector::new(
                "value_out_of_range",
                "Malformed",
                "high part 2 in a bucket of 2 entries (at most 1)",
                block_of(outside),
            ),
            FailVector::new(
                "count_too_long",
                "Malformed",
                "a count of 65 bits",
                block_of(long),
            ),
            FailVector::new(
                "entries_past_block",
                "Malformed",
                "20 entries of 138 bits in 480 bits",
                block_of(past),
            ),
        ];
        // Each Malformed vector is refused for its own reason, not an earlier one.
        let reasons = [
            "strictly increasing",
            "outside",
            "longer than 64",
            "run past",
        ];
        for (v, reason) in extra.iter().zip(reasons) {
            let err = BucketBlock::from_bytes(&v.bytes, &shape).unwrap_err();
            assert!(err.to_string().contains(reason), "{}: {err}", v.reason);
        }
        let checked = check_format::<BucketBlock>(
            env!("CARGO_MANIFEST_DIR"),
            "breach_bucket",
            &good,
            &shape,
            fields,
            extra,
        );
        assert_eq!(checked, 9);
    }
}
