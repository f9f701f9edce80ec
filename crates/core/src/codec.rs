//! The one trait every `pir` binary format implements.
//!
//! A format is a type with an [`encode`](Codec::encode) half that appends to a
//! [`Writer`] and a [`decode`](Codec::decode) half that reads from a [`Reader`] over
//! untrusted bytes (modelled on rustls' `msgs::codec`). What a decoder must know that the bytes
//! do not say (the database shape, the parameters, a size limit) is its
//! [`Context`](Codec::Context); formats that describe themselves take `()`.
//!
//! Rules every implementation keeps (docs/wire.md lists the formats):
//! - integers little-endian, written through [`Writer`] and read through [`Reader`];
//! - every length or count is checked against what follows and against the context *before*
//!   anything is allocated;
//! - malformed bytes are an [`Error`], never a panic;
//! - [`Codec::from_bytes`] refuses bytes left after a complete value.
//!
//! The lifetime `'a` lets a decoded value borrow from the input (a query batch keeps slices of
//! the request instead of copying them); owned formats implement `Codec<'a>` for every `'a`.
//!
//! Each format has refusal vectors in `tests/vectors/<format>/fail_*.hex`, checked by the one
//! runner in [`testing`] (feature `testing`, for tests only).

use crate::Error;

/// A binary format: encodes to and decodes from bytes, checked.
pub trait Codec<'a>: Sized {
    /// What a decoder must be told that the bytes do not say (`()` when nothing).
    type Context: ?Sized;

    /// Appends the encoding of `self`.
    fn encode(&self, w: &mut Writer);

    /// Reads one value from `r`, checking every length against `context` before allocating.
    /// Bytes after the value are left in `r`.
    fn decode(r: &mut Reader<'a>, context: &Self::Context) -> Result<Self, Error>;

    /// The encoding of `self` as a new buffer.
    fn to_bytes(&self) -> Vec<u8> {
        let mut w = Writer::default();
        self.encode(&mut w);
        w.into_bytes()
    }

    /// Decodes exactly one value: bytes left after it are [`Error::TrailingBytes`].
    fn from_bytes(bytes: &'a [u8], context: &Self::Context) -> Result<Self, Error> {
        let mut r = Reader::new(bytes);
        let value = Self::decode(&mut r, context)?;
        r.finish()?;
        Ok(value)
    }
}

/// Appends little-endian integers and bytes to a buffer.
#[derive(Debug, Default)]
pub struct Writer {
    buf: Vec<u8>,
}

impl Writer {
    /// An empty writer with room for `capacity` bytes.
    pub fn with_capacity(capacity: usize) -> Self {
        Self {
            buf: Vec::with_capacity(capacity),
        }
    }
    /// Appends one byte.
    pub fn u8(&mut self, v: u8) {
        self.buf.push(v);
    }
    /// Appends a u16, little-endian.
    pub fn u16(&mut self, v: u16) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a u32, little-endian.
    pub fn u32(&mut self, v: u32) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends a u64, little-endian.
    pub fn u64(&mut self, v: u64) {
        self.buf.extend_from_slice(&v.to_le_bytes());
    }
    /// Appends raw bytes.
    pub fn bytes(&mut self, v: &[u8]) {
        self.buf.extend_from_slice(v);
    }
    /// Appends a u16 length and then the bytes (callers keep `v` under 64 KiB).
    pub fn short_bytes(&mut self, v: &[u8]) {
        self.u16(u16::try_from(v.len()).unwrap_or(u16::MAX));
        self.bytes(&v[..v.len().min(usize::from(u16::MAX))]);
    }
    /// The bytes written so far.
    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// Reads little-endian integers and bytes from untrusted input; every read is bounds-checked.
#[derive(Debug)]
pub struct Reader<'a> {
    rest: &'a [u8],
}

impl<'a> Reader<'a> {
    /// Starts reading `bytes`.
    pub fn new(bytes: &'a [u8]) -> Self {
        Self { rest: bytes }
    }
    /// Bytes not yet read.
    pub fn remaining(&self) -> usize {
        self.rest.len()
    }
    /// Takes the next `n` bytes.
    pub fn take(&mut self, n: usize) -> Result<&'a [u8], Error> {
        if self.rest.len() < n {
            return Err(Error::Truncated {
                needed: n - self.rest.len(),
            });
        }
        let (head, tail) = self.rest.split_at(n);
        self.rest = tail;
        Ok(head)
    }
    /// Takes a fixed-size array.
    pub fn array<const N: usize>(&mut self) -> Result<[u8; N], Error> {
        let mut out = [0u8; N];
        out.copy_from_slice(self.take(N)?);
        Ok(out)
    }
    /// Reads one byte.
    pub fn u8(&mut self) -> Result<u8, Error> {
        Ok(self.take(1)?[0])
    }
    /// Reads a little-endian u16.
    pub fn u16(&mut self) -> Result<u16, Error> {
        Ok(u16::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian u32.
    pub fn u32(&mut self) -> Result<u32, Error> {
        Ok(u32::from_le_bytes(self.array()?))
    }
    /// Reads a little-endian u64.
    pub fn u64(&mut self) -> Result<u64, Error> {
        Ok(u64::from_le_bytes(self.array()?))
    }
    /// Reads a u16 length and that many bytes, refusing lengths above `max`.
    pub fn short_bytes(&mut self, max: usize) -> Result<&'a [u8], Error> {
        let len = usize::from(self.u16()?);
        if len > max {
            return Err(Error::Oversized { len, limit: max });
        }
        self.take(len)
    }
    /// Skips `n` bytes (reserved fields).
    pub fn skip(&mut self, n: usize) -> Result<(), Error> {
        self.take(n).map(|_| ())
    }
    /// Succeeds only if everything was read.
    pub fn finish(&self) -> Result<(), Error> {
        if self.rest.is_empty() {
            Ok(())
        } else {
            Err(Error::TrailingBytes {
                count: self.rest.len(),
            })
        }
    }
}

/// Reads a count field already decoded and refuses it when it exceeds `limit` or when the
/// bytes left cannot hold `count` items of at least `min_item` bytes each, so a decoder never
/// reserves memory for items that are not there.
pub fn check_count(
    r: &Reader<'_>,
    field: &'static str,
    count: usize,
    limit: usize,
    min_item: usize,
) -> Result<(), Error> {
    if count > limit {
        return Err(Error::OutOfRange {
            field,
            found: count as u64,
            limit: limit as u64,
        });
    }
    let needed = count.saturating_mul(min_item);
    if needed > r.remaining() {
        return Err(Error::Truncated {
            needed: needed - r.remaining(),
        });
    }
    Ok(())
}

#[cfg(any(test, feature = "testing"))]
pub mod testing;

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::panic)] // tests fail loudly on purpose
mod fail_vector_tests;

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq)]
    struct Pair(u16, Vec<u8>);

    impl<'a> Codec<'a> for Pair {
        type Context = usize;
        fn encode(&self, w: &mut Writer) {
            w.u16(self.0);
            w.u16(self.1.len() as u16);
            w.bytes(&self.1);
        }
        fn decode(r: &mut Reader<'a>, max: &usize) -> Result<Self, Error> {
            let a = r.u16()?;
            let n = usize::from(r.u16()?);
            check_count(r, "bytes", n, *max, 1)?;
            Ok(Pair(a, r.take(n)?.to_vec()))
        }
    }

    #[test]
    fn provided_methods_round_trip_and_refuse_trailing_bytes() {
        let v = Pair(7, vec![1, 2, 3]);
        let bytes = v.to_bytes();
        assert_eq!(Pair::from_bytes(&bytes, &8).unwrap(), v);
        let mut long = bytes.clone();
        long.push(0);
        assert_eq!(
            Pair::from_bytes(&long, &8),
            Err(Error::TrailingBytes { count: 1 })
        );
        assert!(matches!(
            Pair::from_bytes(&bytes, &2),
            Err(Error::OutOfRange { .. })
        ));
        assert!(matches!(
            Pair::from_bytes(&bytes[..5], &8),
            Err(Error::Truncated { needed: 2 })
        ));
    }
}
