//! Checklist's message bodies (inside the signed envelope of the service layer), little-endian:
//!
//! ```text
//! shape         = records u64 | record_bytes u32 | set_size u32
//! hint request  = shape | master seed 16 | first hint u32 | count u32     (to the offline server)
//! hint answer   = count x b bytes: the parities of sets first..first+count
//! lookup        = shape | punctured key (pset: position u32 | shift u64 | depth x 16 bytes)
//! lookup answer = b bytes
//! ```
//! A server checks the shape against its own database before anything else, so a client with
//! stale parameters gets a clear mismatch instead of wrong records.

use pir_core::wire::{Reader, Writer};
use pir_core::{Codec, Error};

use super::pset::PuncturedKey;
use super::{OfflineRequest, Params};

/// Most hints one request asks for: 2^20 (32 MiB of 32-byte parities); a client fetches more in
/// several requests, which also drives its progress bar.
pub const MAX_HINTS_PER_REQUEST: u32 = 1 << 20;

/// Bytes of the shape header.
pub const SHAPE_LEN: usize = 8 + 4 + 4;

/// The shape header every body starts with: what the client thinks the database is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Records in the database.
    pub records: u64,
    /// Bytes per record.
    pub record_bytes: u32,
    /// Elements per set.
    pub set_size: u32,
}

impl Shape {
    /// The shape of `params`.
    pub fn of(params: &Params) -> Self {
        Self {
            records: params.records(),
            // record_bytes <= MAX_RECORD_BYTES and s <= 2^24 (checked by Params)
            record_bytes: params.record_bytes() as u32,
            set_size: params.sets().size() as u32,
        }
    }

    fn write(&self, w: &mut Writer) {
        w.u64(self.records);
        w.u32(self.record_bytes);
        w.u32(self.set_size);
    }
}

/// Reads the shape header and refuses one that is not `params`' with
/// [`Error::DatabaseMismatch`].
fn check_shape(r: &mut Reader<'_>, params: &Params) -> Result<Shape, Error> {
    let records = r.u64()?;
    let record_bytes = r.u32()?;
    let set_size = r.u32()?;
    let found = Shape {
        records,
        record_bytes,
        set_size,
    };
    if found != Shape::of(params) {
        return Err(Error::DatabaseMismatch(format!(
            "the query is for {records} records of {record_bytes} bytes in sets of {set_size}; \
             this server holds {} records of {} bytes in sets of {}",
            params.records(),
            params.record_bytes(),
            params.sets().size()
        )));
    }
    Ok(found)
}

/// A hint request: hints `hints` of the sets `request` seeds. Context: the server's
/// parameters (the shape header must match them; the range must lie within its hints).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HintRequest {
    /// The shape the client asks about.
    pub shape: Shape,
    /// The client's offline request (its master seed).
    pub request: OfflineRequest,
    /// The hints asked for (`1..=MAX_HINTS_PER_REQUEST` of them).
    pub hints: std::ops::Range<usize>,
}

impl<'a> Codec<'a> for HintRequest {
    type Context = Params;

    fn encode(&self, w: &mut Writer) {
        self.shape.write(w);
        w.bytes(&self.request.master);
        // Ranges are bounded by the u32 hint count of the parameters.
        w.u32(self.hints.start as u32);
        w.u32(self.hints.len() as u32);
    }

    fn decode(r: &mut Reader<'a>, params: &Params) -> Result<Self, Error> {
        let shape = check_shape(r, params)?;
        let master = r.array()?;
        let first = r.u32()? as usize;
        let count = r.u32()?;
        if count == 0 || count > MAX_HINTS_PER_REQUEST {
            return Err(Error::OutOfRange {
                field: "hint count",
                found: u64::from(count),
                limit: u64::from(MAX_HINTS_PER_REQUEST),
            });
        }
        let end = first + count as usize;
        if end > params.hints() {
            return Err(Error::OutOfRange {
                field: "last hint",
                found: end as u64,
                limit: params.hints() as u64,
            });
        }
        Ok(Self {
            shape,
            request: OfflineRequest { master },
            hints: first..end,
        })
    }
}

/// A request for hints `first..first + count` of `request`'s sets ([`HintRequest`]).
pub fn encode_hint_request(
    params: &Params,
    request: &OfflineRequest,
    first: u32,
    count: u32,
) -> Vec<u8> {
    let mut w = Writer::with_capacity(SHAPE_LEN + 16 + 8);
    Shape::of(params).write(&mut w);
    w.bytes(&request.master);
    w.u32(first);
    w.u32(count);
    w.into_bytes()
}

/// Reads a hint request for a server holding `params` (untrusted bytes; [`HintRequest`]).
pub fn decode_hint_request(
    bytes: &[u8],
    params: &Params,
) -> Result<(OfflineRequest, std::ops::Range<usize>), Error> {
    let request = HintRequest::from_bytes(bytes, params)?;
    Ok((request.request, request.hints))
}

/// A lookup body: the shape header and one punctured key. Context: the server's parameters. A
/// lookup is always a whole query body, so its decoder checks the exact length first
/// ([`Error::WrongLength`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The shape the client asks about.
    pub shape: Shape,
    /// The punctured set.
    pub key: PuncturedKey,
}

impl<'a> Codec<'a> for Lookup {
    type Context = Params;

    fn encode(&self, w: &mut Writer) {
        self.shape.write(w);
        self.key.encode(w);
    }

    fn decode(r: &mut Reader<'a>, params: &Params) -> Result<Self, Error> {
        let expected = SHAPE_LEN + params.sets().punctured_len();
        if r.remaining() != expected {
            return Err(Error::WrongLength(format!(
                "a Checklist lookup of {} bytes, {expected} expected",
                r.remaining()
            )));
        }
        let shape = check_shape(r, params)?;
        let key = PuncturedKey::decode(r, params.sets())?;
        Ok(Self { shape, key })
    }
}

/// A lookup body: one punctured key (to either server; [`Lookup`]).
pub fn encode_lookup(params: &Params, key: &PuncturedKey) -> Vec<u8> {
    let mut w = Writer::with_capacity(SHAPE_LEN + params.sets().punctured_len());
    Shape::of(params).write(&mut w);
    key.encode(&mut w);
    w.into_bytes()
}

/// Reads a lookup body for a server holding `params` (untrusted bytes; [`Lookup`]).
pub fn decode_lookup(bytes: &[u8], params: &Params) -> Result<PuncturedKey, Error> {
    Lookup::from_bytes(bytes, params).map(|lookup| lookup.key)
}
