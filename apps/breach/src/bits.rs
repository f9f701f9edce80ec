//! Bit strings: the fixed-width values stored in buckets, and the MSB-first bit writer and
//! reader of the bucket code ([`crate::bucket`]).
//!
//! Bit order is big-endian throughout: bit 0 of a byte string is the most significant bit of
//! its first byte, so the numeric order of a hash equals the byte order of its encoding and
//! "the top k bits" of a SHA-1 hash are the first k bits of its hex digits.

/// Bytes of a [`Value`]: room for a whole SHA-1 hash (160 bits), the widest value stored.
pub const VALUE_BYTES: usize = 20;

/// A value of up to 160 bits stored in a bucket, left-aligned: its `w` bits are the first `w`
/// bits of the array and every later bit is zero. Ordering the arrays orders the values.
pub type Value = [u8; VALUE_BYTES];

/// Bits `start..start + len` of `src` as an integer (`len <= 64`). Bits past the end of `src`
/// read as zero.
pub fn bits_u64(src: &[u8], start: usize, len: usize) -> u64 {
    debug_assert!(len <= 64);
    let mut out = 0u64;
    let mut pos = start;
    let mut remaining = len;
    while remaining > 0 {
        let byte = src.get(pos / 8).copied().unwrap_or(0);
        let offset = pos % 8;
        let take = (8 - offset).min(remaining);
        let bits = (byte >> (8 - offset - take)) & low_mask8(take);
        out = (out << take) | u64::from(bits);
        pos += take;
        remaining -= take;
    }
    out
}

/// Writes the low `len` bits of `v` (`len <= 64`) into bits `start..start + len` of `dst`,
/// which must be long enough. Other bits are left unchanged.
pub fn set_bits_u64(dst: &mut [u8], start: usize, len: usize, v: u64) {
    debug_assert!(len <= 64);
    let mut pos = start;
    let mut remaining = len;
    while remaining > 0 {
        let offset = pos % 8;
        let take = (8 - offset).min(remaining);
        let bits = ((v >> (remaining - take)) as u8) & low_mask8(take);
        let shift = 8 - offset - take;
        let byte = &mut dst[pos / 8];
        *byte = (*byte & !(low_mask8(take) << shift)) | (bits << shift);
        pos += take;
        remaining -= take;
    }
}

/// Bits `start..start + len` of `src` as a left-aligned [`Value`] (`len <= 160`).
pub fn extract_value(src: &[u8], start: usize, len: usize) -> Value {
    let mut out = [0u8; VALUE_BYTES];
    let mut done = 0;
    while done < len {
        let take = (len - done).min(64);
        set_bits_u64(&mut out, done, take, bits_u64(src, start + done, take));
        done += take;
    }
    out
}

fn low_mask8(bits: usize) -> u8 {
    if bits >= 8 {
        0xff
    } else {
        (1u8 << bits) - 1
    }
}

/// Appends bits, most significant first, to a growing byte vector.
#[derive(Debug, Default)]
pub struct BitWriter {
    bytes: Vec<u8>,
    bit_len: usize,
}

impl BitWriter {
    /// Starts a bit string after the given whole bytes (a block header, say).
    pub fn after(bytes: Vec<u8>) -> Self {
        let bit_len = bytes.len() * 8;
        Self { bytes, bit_len }
    }

    /// Appends the low `len` bits of `v` (`len <= 64`).
    pub fn put(&mut self, v: u64, len: usize) {
        let mut remaining = len;
        while remaining > 0 {
            let offset = self.bit_len % 8;
            if offset == 0 {
                self.bytes.push(0);
            }
            let take = (8 - offset).min(remaining);
            let bits = ((v >> (remaining - take)) as u8) & low_mask8(take);
            if let Some(last) = self.bytes.last_mut() {
                *last |= bits << (8 - offset - take);
            }
            remaining -= take;
            self.bit_len += take;
        }
    }

    /// Appends bits `start..start + len` of `src`.
    pub fn put_slice_bits(&mut self, src: &[u8], start: usize, len: usize) {
        let mut done = 0;
        while done < len {
            let take = (len - done).min(64);
            self.put(bits_u64(src, start + done, take), take);
            done += take;
        }
    }

    /// Appends `q` in unary: `q` zero bits, then a one bit.
    pub fn put_unary(&mut self, q: u64) {
        let mut left = q;
        while left > 0 {
            let take = left.min(64);
            self.put(0, take as usize);
            left -= take;
        }
        self.put(1, 1);
    }

    /// Appends `n >= 1` in Elias gamma code: `bitlen(n) - 1` zero bits, then `n` in
    /// `bitlen(n)` bits (which start with its leading one).
    pub fn put_gamma(&mut self, n: u64) {
        debug_assert!(n >= 1);
        let len = 64 - n.leading_zeros() as usize;
        self.put(0, len - 1);
        self.put(n, len);
    }

    /// The bytes written; the last byte is zero-padded.
    pub fn into_bytes(self) -> Vec<u8> {
        self.bytes
    }
}

/// Reads bits, most significant first, from untrusted bytes; every read is bounds-checked.
#[derive(Debug)]
pub struct BitReader<'a> {
    bytes: &'a [u8],
    pos: usize,
}

/// A read ran past the end of the bit string.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OutOfBits;

impl<'a> BitReader<'a> {
    /// Starts reading `bytes` at bit `pos`.
    pub fn new(bytes: &'a [u8], pos: usize) -> Self {
        Self { bytes, pos }
    }

    /// Bits not yet read.
    pub fn remaining(&self) -> usize {
        (self.bytes.len() * 8).saturating_sub(self.pos)
    }

    /// The position of the next bit.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Reads `len <= 64` bits as an integer.
    pub fn get(&mut self, len: usize) -> Result<u64, OutOfBits> {
        if len > self.remaining() {
            return Err(OutOfBits);
        }
        let v = bits_u64(self.bytes, self.pos, len);
        self.pos += len;
        Ok(v)
    }

    /// Reads a unary number (zero bits up to a one bit). Returns `Ok(None)` when more than
    /// `max` zero bits come first, without reading further.
    pub fn unary(&mut self, max: u64) -> Result<Option<u64>, OutOfBits> {
        let mut q = 0u64;
        loop {
            if self.remaining() == 0 {
                return Err(OutOfBits);
            }
            // Skip whole zero bytes at once: a long run costs one step per byte.
            if self.pos.is_multiple_of(8) && self.bytes[self.pos / 8] == 0 {
                q += 8;
                self.pos += 8;
            } else {
                let bit = bits_u64(self.bytes, self.pos, 1);
                self.pos += 1;
                if bit == 1 {
                    return Ok((q <= max).then_some(q));
                }
                q += 1;
            }
            if q > max {
                return Ok(None);
            }
        }
    }

    /// Reads an Elias gamma number (at least 1, at most `u64::MAX`). `Ok(None)` when the code
    /// announces more than 64 bits.
    pub fn gamma(&mut self) -> Result<Option<u64>, OutOfBits> {
        let Some(zeros) = self.unary(63)? else {
            return Ok(None);
        };
        let rest = self.get(zeros as usize)?;
        Ok(Some((1u64 << zeros) | rest))
    }

    /// True when every bit from the current position to the end is zero.
    pub fn rest_is_zero(&self) -> bool {
        let head = self.pos % 8;
        let mut byte = self.pos / 8;
        if head != 0 {
            if let Some(&b) = self.bytes.get(byte) {
                if b & low_mask8(8 - head) != 0 {
                    return false;
                }
            }
            byte += 1;
        }
        self.bytes
            .get(byte..)
            .is_none_or(|tail| tail.iter().all(|&b| b == 0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bits_round_trip() {
        let src = [0b1010_1100, 0xff, 0x01];
        assert_eq!(bits_u64(&src, 0, 4), 0b1010);
        assert_eq!(bits_u64(&src, 4, 8), 0b1100_1111);
        assert_eq!(bits_u64(&src, 23, 1), 1);
        assert_eq!(bits_u64(&src, 20, 10), 0b0001 << 6);
        let mut dst = [0u8; 3];
        set_bits_u64(&mut dst, 3, 13, 0x1fff);
        assert_eq!(dst, [0x1f, 0xff, 0x00]);
        let v = extract_value(&[0xab, 0xcd, 0xef], 4, 12);
        assert_eq!(&v[..3], &[0xbc, 0xd0, 0x00]);
    }

    #[test]
    fn writer_reader_codes() {
        let mut w = BitWriter::after(vec![7]);
        w.put_unary(0);
        w.put_unary(13);
        w.put_gamma(1);
        w.put_gamma(5);
        w.put_gamma(u64::MAX);
        w.put(0b101, 3);
        let bytes = w.into_bytes();
        assert_eq!(bytes[0], 7);
        let mut r = BitReader::new(&bytes, 8);
        assert_eq!(r.unary(10), Ok(Some(0)));
        assert_eq!(r.unary(13), Ok(Some(13)));
        assert_eq!(r.gamma(), Ok(Some(1)));
        assert_eq!(r.gamma(), Ok(Some(5)));
        assert_eq!(r.gamma(), Ok(Some(u64::MAX)));
        assert_eq!(r.get(3), Ok(0b101));
        assert!(r.rest_is_zero());
        assert_eq!(r.get(8), Err(OutOfBits));
    }

    #[test]
    fn unary_limits() {
        let zeros = [0u8; 4];
        assert_eq!(BitReader::new(&zeros, 0).unary(100), Err(OutOfBits));
        assert_eq!(BitReader::new(&zeros, 0).unary(5), Ok(None));
        let mut r = BitReader::new(&[0x00, 0x01], 0);
        assert_eq!(r.unary(14), Ok(None));
        let mut r = BitReader::new(&[0x00, 0x01], 0);
        assert_eq!(r.unary(15), Ok(Some(15)));
        assert_eq!(BitReader::new(&[0u8; 9], 0).gamma(), Ok(None));
        assert!(!BitReader::new(&[0x01], 4).rest_is_zero());
        assert!(BitReader::new(&[0xf0], 4).rest_is_zero());
    }
}
