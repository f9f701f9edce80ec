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

use crate::wire::{Reader, Writer};
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
mod fail_vectors;

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
