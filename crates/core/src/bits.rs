//! Packed bit vectors, least-significant bit first: bit `i` is `bytes[i / 8] >> (i % 8) & 1`.
//!
//! This is the layout of every bit-vector query on the wire (Chor queries, RAID-PIR flip
//! chunks and PRG-expanded sub-queries), so it is pinned here once.

use rand::RngCore;

use crate::Error;

/// A vector of `len` bits packed into `ceil(len / 8)` bytes; unused high bits are zero.
#[derive(Clone, PartialEq, Eq)]
pub struct BitVec {
    len: usize,
    bytes: Vec<u8>,
}

impl std::fmt::Debug for BitVec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "BitVec({} bits)", self.len)
    }
}

/// Bytes needed for `len` bits.
pub fn byte_len(len: usize) -> usize {
    len.div_ceil(8)
}

impl BitVec {
    /// All-zero vector of `len` bits.
    pub fn zeros(len: usize) -> Self {
        Self {
            len,
            bytes: vec![0; byte_len(len)],
        }
    }

    /// Uniformly random vector of `len` bits.
    pub fn random(len: usize, rng: &mut impl RngCore) -> Self {
        let mut bytes = vec![0; byte_len(len)];
        rng.fill_bytes(&mut bytes);
        let mut v = Self { len, bytes };
        v.clear_tail();
        v
    }

    /// Takes the first `ceil(len / 8)` bytes of `bytes` and clears the bits past `len`
    /// (used for PRG output, whose tail bits are simply ignored).
    pub fn from_prefix_truncating(len: usize, bytes: &[u8]) -> Result<Self, Error> {
        let need = byte_len(len);
        let prefix = bytes.get(..need).ok_or_else(|| Error::Truncated {
            needed: need.saturating_sub(bytes.len()),
        })?;
        let mut v = Self {
            len,
            bytes: prefix.to_vec(),
        };
        v.clear_tail();
        Ok(v)
    }

    /// Parses exactly `ceil(len / 8)` bytes from the wire; bits past `len` must be zero so
    /// that every vector has one encoding.
    pub fn from_wire(len: usize, bytes: &[u8]) -> Result<Self, Error> {
        if bytes.len() != byte_len(len) {
            return Err(Error::WrongLength(format!(
                "bit vector of {len} bits needs {} bytes, got {}",
                byte_len(len),
                bytes.len()
            )));
        }
        let v = Self {
            len,
            bytes: bytes.to_vec(),
        };
        let mut canonical = v.clone();
        canonical.clear_tail();
        if canonical != v {
            return Err(Error::Malformed(
                "bit vector has bits set past its length".into(),
            ));
        }
        Ok(v)
    }

    fn clear_tail(&mut self) {
        let rem = self.len % 8;
        if rem != 0 {
            if let Some(last) = self.bytes.last_mut() {
                *last &= (1u8 << rem) - 1;
            }
        }
    }

    /// Number of bits.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a zero-length vector.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The packed bytes.
    pub fn as_bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// Bit `i` (panics if `i >= len`).
    pub fn get(&self, i: usize) -> bool {
        assert!(i < self.len, "bit index out of range");
        self.bytes[i / 8] >> (i % 8) & 1 == 1
    }

    /// Flips bit `i` (panics if `i >= len`).
    pub fn flip(&mut self, i: usize) {
        assert!(i < self.len, "bit index out of range");
        self.bytes[i / 8] ^= 1 << (i % 8);
    }

    /// `self ^= other` (panics on different lengths: both come from the same parameters).
    pub fn xor_assign(&mut self, other: &BitVec) {
        assert_eq!(self.len, other.len, "bit vectors of different lengths");
        for (a, b) in self.bytes.iter_mut().zip(&other.bytes) {
            *a ^= b;
        }
    }

    /// Number of set bits.
    pub fn count_ones(&self) -> usize {
        self.bytes.iter().map(|b| b.count_ones() as usize).sum()
    }

    /// Indices of the set bits, in increasing order.
    pub fn ones(&self) -> impl Iterator<Item = usize> + '_ {
        self.bytes
            .iter()
            .enumerate()
            .flat_map(|(byte_index, &byte)| {
                (0..8)
                    .filter(move |bit| byte >> bit & 1 == 1)
                    .map(move |bit| byte_index * 8 + bit)
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_lsb_first() {
        let mut v = BitVec::zeros(10);
        v.flip(0);
        v.flip(9);
        assert_eq!(v.as_bytes(), &[0b0000_0001, 0b0000_0010]);
        assert_eq!(v.ones().collect::<Vec<_>>(), vec![0, 9]);
        assert_eq!(v.count_ones(), 2);
    }

    #[test]
    fn wire_rejects_noncanonical_tail_and_wrong_length() {
        assert!(BitVec::from_wire(10, &[0, 0b0000_0100]).is_err());
        assert!(BitVec::from_wire(10, &[0]).is_err());
        assert!(BitVec::from_wire(10, &[0xff, 0b11]).is_ok());
    }

    #[test]
    fn truncating_prefix_clears_tail() {
        let v = BitVec::from_prefix_truncating(3, &[0xff, 0xff]).unwrap();
        assert_eq!(v.as_bytes(), &[0b111]);
        assert!(BitVec::from_prefix_truncating(17, &[0, 0]).is_err());
    }
}
