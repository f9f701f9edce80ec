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
use pir_core::Error;

use super::pset::PuncturedKey;
use super::{OfflineRequest, Params};

/// Most hints one request asks for: 2^20 (32 MiB of 32-byte parities); a client fetches more in
/// several requests, which also drives its progress bar.
pub const MAX_HINTS_PER_REQUEST: u32 = 1 << 20;

/// Bytes of the shape header.
pub const SHAPE_LEN: usize = 8 + 4 + 4;

fn write_shape(w: &mut Writer, params: &Params) {
    w.u64(params.records());
    // record_bytes <= MAX_RECORD_BYTES and s <= 2^24 (checked by Params)
    w.u32(params.record_bytes() as u32);
    w.u32(params.sets().size() as u32);
}

fn check_shape(r: &mut Reader<'_>, params: &Params) -> Result<(), Error> {
    let records = r.u64()?;
    let record_bytes = r.u32()?;
    let set_size = r.u32()?;
    if records != params.records()
        || record_bytes as usize != params.record_bytes()
        || set_size as usize != params.sets().size()
    {
        return Err(Error::DatabaseMismatch(format!(
            "the query is for {records} records of {record_bytes} bytes in sets of {set_size}; \
             this server holds {} records of {} bytes in sets of {}",
            params.records(),
            params.record_bytes(),
            params.sets().size()
        )));
    }
    Ok(())
}

/// A request for hints `first..first + count` of `request`'s sets.
pub fn encode_hint_request(
    params: &Params,
    request: &OfflineRequest,
    first: u32,
    count: u32,
) -> Vec<u8> {
    let mut w = Writer::with_capacity(SHAPE_LEN + 16 + 8);
    write_shape(&mut w, params);
    w.bytes(&request.master);
    w.u32(first);
    w.u32(count);
    w.into_bytes()
}

/// Reads a hint request for a server holding `params` (untrusted bytes).
pub fn decode_hint_request(
    bytes: &[u8],
    params: &Params,
) -> Result<(OfflineRequest, std::ops::Range<usize>), Error> {
    let mut r = Reader::new(bytes);
    check_shape(&mut r, params)?;
    let master = r.array()?;
    let first = r.u32()? as usize;
    let count = r.u32()?;
    r.finish()?;
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
    Ok((OfflineRequest { master }, first..end))
}

/// A lookup body: one punctured key (to either server).
pub fn encode_lookup(params: &Params, key: &PuncturedKey) -> Vec<u8> {
    let mut w = Writer::with_capacity(SHAPE_LEN + params.sets().punctured_len());
    write_shape(&mut w, params);
    key.encode(&mut w);
    w.into_bytes()
}

/// Reads a lookup body for a server holding `params` (untrusted bytes).
pub fn decode_lookup(bytes: &[u8], params: &Params) -> Result<PuncturedKey, Error> {
    let expected = SHAPE_LEN + params.sets().punctured_len();
    if bytes.len() != expected {
        return Err(Error::WrongLength(format!(
            "a Checklist lookup of {} bytes, {expected} expected",
            bytes.len()
        )));
    }
    let mut r = Reader::new(bytes);
    check_shape(&mut r, params)?;
    let key = PuncturedKey::decode(&mut r, params.sets())?;
    r.finish()?;
    Ok(key)
}
