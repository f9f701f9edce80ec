//! SinglePass's message bodies (inside the signed envelope of the service layer),
//! little-endian:
//!
//! ```text
//! shape         = records u64 | record_bytes u32 | columns u32          (m; Q = ceil(B / m))
//! hint request  = shape | master seed 16                                 (to the offline server)
//! hint answer   = m x b bytes: hints 0..m
//! lookup        = shape | Q x offset u16, each below m                   (to either server)
//! lookup answer = Q x b bytes: the record at each row's offset
//! changes       = shape | count u32 | count x (index u64 | delta b)      (published by a server)
//! ```
//! A server checks the shape against its own database before anything else, so a client with
//! stale parameters gets a clear mismatch instead of wrong records. Every length is checked
//! against the parameters before anything is allocated.

use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Error};

use super::{Changes, OfflineRequest, Params};

/// Bytes of the shape header.
pub const SHAPE_LEN: usize = 8 + 4 + 4;

/// Most changes in one body: 2^24 (512 MiB of 32-byte deltas; a server publishes more in
/// several bodies).
pub const MAX_CHANGES: u64 = 1 << 24;

fn write_shape(w: &mut Writer, params: &Params) {
    w.u64(params.records());
    // record_bytes <= MAX_RECORD_BYTES and m <= MAX_COLUMNS (checked by Params)
    w.u32(params.record_bytes() as u32);
    w.u32(params.columns() as u32);
}

fn check_shape(r: &mut Reader<'_>, params: &Params) -> Result<(), Error> {
    let records = r.u64()?;
    let record_bytes = r.u32()?;
    let columns = r.u32()?;
    if records != params.records()
        || record_bytes as usize != params.record_bytes()
        || columns as usize != params.columns()
    {
        return Err(Error::DatabaseMismatch(format!(
            "the message is for {records} records of {record_bytes} bytes in {columns} columns; \
             this side holds {} records of {} bytes in {} columns",
            params.records(),
            params.record_bytes(),
            params.columns()
        )));
    }
    Ok(())
}

/// A hint request: the client's master seed. Context: the server's parameters (the shape
/// header must match them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintRequest {
    /// The client's offline request.
    pub request: OfflineRequest,
}

/// A body with the parameters its sender holds, which it writes as the shape header (so the
/// encoder knows them; the decoder checks them against its own, its context).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Body<T> {
    /// The parameters the sender holds (written as the shape header).
    pub params: Params,
    /// The body after the header.
    pub value: T,
}

impl<'a> Codec<'a> for Body<HintRequest> {
    type Context = Params;

    fn encode(&self, w: &mut Writer) {
        write_shape(w, &self.params);
        w.bytes(&self.value.request.master);
    }

    fn decode(r: &mut Reader<'a>, params: &Params) -> Result<Self, Error> {
        check_shape(r, params)?;
        let master = r.array()?;
        Ok(Self {
            params: *params,
            value: HintRequest {
                request: OfflineRequest { master },
            },
        })
    }
}

/// A lookup: one offset per row (to either server). A lookup is always a whole query body, so
/// its decoder checks the exact length first ([`Error::WrongLength`]), then that every offset
/// is below `m`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// `Q` offsets, row by row.
    pub offsets: Vec<u16>,
}

impl<'a> Codec<'a> for Body<Lookup> {
    type Context = Params;

    fn encode(&self, w: &mut Writer) {
        write_shape(w, &self.params);
        for &o in &self.value.offsets {
            w.u16(o);
        }
    }

    fn decode(r: &mut Reader<'a>, params: &Params) -> Result<Self, Error> {
        let expected = SHAPE_LEN + 2 * params.rows();
        if r.remaining() != expected {
            return Err(Error::WrongLength(format!(
                "a SinglePass lookup of {} bytes, {expected} expected",
                r.remaining()
            )));
        }
        check_shape(r, params)?;
        let mut offsets = Vec::with_capacity(params.rows());
        for _ in 0..params.rows() {
            let o = r.u16()?;
            if usize::from(o) >= params.columns() {
                return Err(Error::OutOfRange {
                    field: "offset",
                    found: u64::from(o),
                    limit: params.columns() as u64,
                });
            }
            offsets.push(o);
        }
        Ok(Self {
            params: *params,
            value: Lookup { offsets },
        })
    }
}

/// A changes body: every index below `B`, the body exactly as long as its count says (checked
/// before anything is allocated).
impl<'a> Codec<'a> for Body<Changes> {
    type Context = Params;

    fn encode(&self, w: &mut Writer) {
        write_shape(w, &self.params);
        let changes = &self.value;
        // At most MAX_CHANGES are meant to be sent; a larger batch fails to decode, never
        // wraps silently below 2^32.
        w.u32(u32::try_from(changes.len()).unwrap_or(u32::MAX));
        for (index, delta) in changes.iter() {
            w.u64(index);
            w.bytes(delta);
        }
    }

    fn decode(r: &mut Reader<'a>, params: &Params) -> Result<Self, Error> {
        check_shape(r, params)?;
        let count = u64::from(r.u32()?);
        if count > MAX_CHANGES {
            return Err(Error::OutOfRange {
                field: "change count",
                found: count,
                limit: MAX_CHANGES,
            });
        }
        let b = params.record_bytes();
        // count <= 2^24 and b <= 2^16: no overflow.
        let body = count as usize * (8 + b);
        if r.remaining() < body {
            return Err(Error::Truncated {
                needed: body - r.remaining(),
            });
        }
        let mut changes = Changes::new(b);
        changes.indices.reserve(count as usize);
        changes.deltas.reserve(count as usize * b);
        for _ in 0..count {
            let index = r.u64()?;
            if index >= params.records() {
                return Err(Error::OutOfRange {
                    field: "changed record",
                    found: index,
                    limit: params.records(),
                });
            }
            changes.push_delta(index, r.take(b)?)?;
        }
        Ok(Self {
            params: *params,
            value: changes,
        })
    }
}

/// A request for the hints of `request`'s permutations ([`HintRequest`]).
pub fn encode_hint_request(params: &Params, request: &OfflineRequest) -> Vec<u8> {
    Body {
        params: *params,
        value: HintRequest {
            request: request.clone(),
        },
    }
    .to_bytes()
}

/// Reads a hint request for a server holding `params` (untrusted bytes; [`HintRequest`]).
pub fn decode_hint_request(bytes: &[u8], params: &Params) -> Result<OfflineRequest, Error> {
    Body::<HintRequest>::from_bytes(bytes, params).map(|body| body.value.request)
}

/// A lookup body: one offset per row (to either server; [`Lookup`]).
pub fn encode_lookup(params: &Params, offsets: &[u16]) -> Vec<u8> {
    Body {
        params: *params,
        value: Lookup {
            offsets: offsets.to_vec(),
        },
    }
    .to_bytes()
}

/// Reads a lookup body for a server holding `params` (untrusted bytes): exactly `Q` offsets,
/// each below `m` ([`Lookup`]).
pub fn decode_lookup(bytes: &[u8], params: &Params) -> Result<Vec<u16>, Error> {
    Body::<Lookup>::from_bytes(bytes, params).map(|body| body.value.offsets)
}

/// A changes body.
pub fn encode_changes(params: &Params, changes: &Changes) -> Vec<u8> {
    Body {
        params: *params,
        value: changes.clone(),
    }
    .to_bytes()
}

/// Reads a changes body for a client holding `params` (untrusted bytes).
pub fn decode_changes(bytes: &[u8], params: &Params) -> Result<Changes, Error> {
    Body::<Changes>::from_bytes(bytes, params).map(|body| body.value)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn params() -> Params {
        Params::with_rows(100, 32, 10).unwrap()
    }

    #[test]
    fn round_trips() {
        let p = params();
        let request = OfflineRequest { master: [9; 16] };
        let body = encode_hint_request(&p, &request);
        assert_eq!(decode_hint_request(&body, &p).unwrap(), request);
        let offsets: Vec<u16> = (0..10).collect();
        let body = encode_lookup(&p, &offsets);
        assert_eq!(decode_lookup(&body, &p).unwrap(), offsets);
        let mut changes = Changes::new(32);
        changes.push(3, &[1; 32], &[2; 32]).unwrap();
        changes.push_delta(99, &[7; 32]).unwrap();
        let body = encode_changes(&p, &changes);
        assert_eq!(decode_changes(&body, &p).unwrap(), changes);
    }

    #[test]
    fn malformed_bodies_are_errors() {
        let p = params();
        let other = Params::with_rows(101, 32, 10).unwrap();
        let request = OfflineRequest { master: [9; 16] };
        let body = encode_hint_request(&p, &request);
        assert!(decode_hint_request(&body[..body.len() - 1], &p).is_err());
        assert!(decode_hint_request(&[body.clone(), vec![0]].concat(), &p).is_err());
        assert!(matches!(
            decode_hint_request(&body, &other),
            Err(Error::DatabaseMismatch(_))
        ));

        let body = encode_lookup(&p, &[0; 10]);
        assert!(decode_lookup(&body[..body.len() - 2], &p).is_err());
        assert!(decode_lookup(&[body.clone(), vec![0, 0]].concat(), &p).is_err());
        assert!(decode_lookup(&body, &other).is_err());
        let mut bad = body.clone();
        // An offset at m = 10.
        bad[SHAPE_LEN..SHAPE_LEN + 2].copy_from_slice(&10u16.to_le_bytes());
        assert!(matches!(
            decode_lookup(&bad, &p),
            Err(Error::OutOfRange { .. })
        ));

        let mut changes = Changes::new(32);
        changes.push_delta(5, &[1; 32]).unwrap();
        let body = encode_changes(&p, &changes);
        assert!(decode_changes(&body[..body.len() - 1], &p).is_err());
        assert!(decode_changes(&[body.clone(), vec![0]].concat(), &p).is_err());
        // A count far beyond the bytes present: refused before anything is allocated.
        let mut bad = body.clone();
        bad[SHAPE_LEN..SHAPE_LEN + 4].copy_from_slice(&u32::MAX.to_le_bytes());
        assert!(matches!(
            decode_changes(&bad, &p),
            Err(Error::OutOfRange { .. })
        ));
        let mut bad = body.clone();
        bad[SHAPE_LEN..SHAPE_LEN + 4].copy_from_slice(&2u32.to_le_bytes());
        assert!(matches!(
            decode_changes(&bad, &p),
            Err(Error::Truncated { .. })
        ));
        // An index at B.
        let mut bad = body;
        bad[SHAPE_LEN + 4..SHAPE_LEN + 12].copy_from_slice(&100u64.to_le_bytes());
        assert!(matches!(
            decode_changes(&bad, &p),
            Err(Error::OutOfRange { .. })
        ));
        assert!(decode_changes(&[], &p).is_err());
        assert!(decode_lookup(&[], &p).is_err());
        assert!(decode_hint_request(&[], &p).is_err());
    }
}
