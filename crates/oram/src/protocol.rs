//! The slot-store protocol's message bodies (the server is `pir oram store`, the client
//! `RemoteStores`, both in `pir-blockstore`): each travels in a `pir-core` envelope of scheme
//! `OramStore` (7), kind `Query` one way and `Answer` back.
//!
//! ```text
//! request = 1 FORMAT | slot bytes u32 | slots u64              -> empty
//!         | 2 READ   | count u32 | count x (first slot u64 | slots u32)
//!                                                              -> the slots, concatenated
//!         | 3 WRITE  | count u32 | count x (first slot u64 | slots u32) | the slots
//!                                                              -> empty
//!         | 4 SYNC                                             -> empty
//!         | 5 INFO                                             -> info
//! info    = slot bytes u32 | slots u64                         (zeros when not formatted)
//! ```
//!
//! Decoding checks the counts and the shape's sanity; whether the ranges lie inside the store
//! and a write's data matches its slot counts is the server's check, against the shape it
//! holds.

use pir_core::codec::{check_count, Codec, Reader, Writer};
use pir_core::Error;

const FORMAT: u8 = 1;
const READ: u8 = 2;
const WRITE: u8 = 3;
const SYNC: u8 = 4;
const INFO: u8 = 5;

/// Largest slot a store accepts (a 1 MiB block, sealed).
pub const MAX_SLOT_BYTES: u64 = 1 << 20;
/// Largest store, in bytes.
pub const MAX_STORE_BYTES: u64 = 1 << 50;
/// Bytes of one extent on the wire.
const EXTENT_BYTES: usize = 8 + 4;

/// A run of slots of one store: `first slot u64 | slots u32`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlotRun {
    /// The first slot.
    pub first: u64,
    /// How many slots.
    pub slots: u32,
}

/// A request to a slot store. The context of its [`Codec`] is the most extents one request
/// may carry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreRequest<'a> {
    /// Creates the slot file; the same shape again is a no-op, another is refused.
    Format {
        /// Bytes per slot, `1..=MAX_SLOT_BYTES`.
        slot_bytes: u32,
        /// Slots, at most `MAX_STORE_BYTES` in all.
        slots: u64,
    },
    /// Reads the runs; the reply is their slots, concatenated.
    Read(Vec<SlotRun>),
    /// Writes the runs' slots.
    Write {
        /// Where.
        runs: Vec<SlotRun>,
        /// The slots of every run, concatenated: one piece when decoded, any number when
        /// encoded (so a client does not copy its slots together first).
        data: Vec<&'a [u8]>,
    },
    /// Makes every write durable.
    Sync,
    /// Asks the shape.
    Info,
}

fn write_runs(w: &mut Writer, runs: &[SlotRun]) {
    // At most MAX_EXTENTS runs (the client's batches are far smaller).
    w.u32(u32::try_from(runs.len()).unwrap_or(u32::MAX));
    for run in runs {
        w.u64(run.first);
        w.u32(run.slots);
    }
}

fn read_runs(r: &mut Reader<'_>, max_runs: usize) -> Result<Vec<SlotRun>, Error> {
    let count = r.u32()? as usize;
    check_count(r, "slot-store extents", count, max_runs, EXTENT_BYTES)?;
    (0..count)
        .map(|_| {
            Ok(SlotRun {
                first: r.u64()?,
                slots: r.u32()?,
            })
        })
        .collect()
}

impl<'a> Codec<'a> for StoreRequest<'a> {
    type Context = usize;

    fn encode(&self, w: &mut Writer) {
        match self {
            StoreRequest::Format { slot_bytes, slots } => {
                w.u8(FORMAT);
                w.u32(*slot_bytes);
                w.u64(*slots);
            }
            StoreRequest::Read(runs) => {
                w.u8(READ);
                write_runs(w, runs);
            }
            StoreRequest::Write { runs, data } => {
                w.u8(WRITE);
                write_runs(w, runs);
                for piece in data {
                    w.bytes(piece);
                }
            }
            StoreRequest::Sync => w.u8(SYNC),
            StoreRequest::Info => w.u8(INFO),
        }
    }

    fn decode(r: &mut Reader<'a>, max_runs: &usize) -> Result<Self, Error> {
        match r.u8()? {
            FORMAT => {
                let slot_bytes = r.u32()?;
                let slots = r.u64()?;
                if slot_bytes == 0 || u64::from(slot_bytes) > MAX_SLOT_BYTES {
                    return Err(Error::OutOfRange {
                        field: "slot bytes",
                        found: u64::from(slot_bytes),
                        limit: MAX_SLOT_BYTES,
                    });
                }
                let bytes = slots.saturating_mul(u64::from(slot_bytes));
                if bytes > MAX_STORE_BYTES {
                    return Err(Error::OutOfRange {
                        field: "store bytes",
                        found: bytes,
                        limit: MAX_STORE_BYTES,
                    });
                }
                Ok(StoreRequest::Format { slot_bytes, slots })
            }
            READ => read_runs(r, *max_runs).map(StoreRequest::Read),
            WRITE => {
                let runs = read_runs(r, *max_runs)?;
                let data = vec![r.take(r.remaining())?];
                Ok(StoreRequest::Write { runs, data })
            }
            SYNC => Ok(StoreRequest::Sync),
            INFO => Ok(StoreRequest::Info),
            other => Err(Error::UnknownValue {
                field: "slot-store operation",
                found: u64::from(other),
            }),
        }
    }
}

/// The reply to `INFO`: the shape a store was formatted with (zeros when it was not).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreInfo {
    /// Bytes per slot.
    pub slot_bytes: u32,
    /// Slots.
    pub slots: u64,
}

impl Codec<'_> for StoreInfo {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.u32(self.slot_bytes);
        w.u64(self.slots);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        Ok(Self {
            slot_bytes: r.u32()?,
            slots: r.u64()?,
        })
    }
}
