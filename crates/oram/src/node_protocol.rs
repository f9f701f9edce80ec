//! The ORAM-node protocol's message bodies (the server is `pir oram node`, the client the
//! balancer's node client, both in `pir-blockstore`): each travels in a `pir-core` envelope of
//! scheme `OramStore` (7), kind `Query` one way and `Answer` back. The operation numbers start
//! at 16 so a node and a slot store refuse each other's requests.
//!
//! ```text
//! request = 16 INFO                                         -> info
//!         | 17 BATCH | reads u32 | reads x slot u32
//!                    | writes u32 | writes x slot u32 | the written blocks
//!                                                           -> the read blocks, concatenated
//!         | 18 FLUSH | epoch u64                            -> empty
//! info    = block size u32 | blocks u32 | epoch u64 | node id [16]
//! ```
//!
//! A batch's reads happen before its writes. A flush makes every write durable, then the
//! epoch: the balancer writes its own state only after every node acknowledged it. Decoding
//! checks the counts against the bytes there; that slots lie inside the node and the written
//! bytes are whole blocks is the node's check, against its shape.

use pir_core::codec::{check_count, Codec, Reader, Writer};
use pir_core::Error;

const INFO: u8 = 16;
const BATCH: u8 = 17;
const FLUSH: u8 = 18;

/// A request to a node; the context of its [`Codec`] is the most slots a batch may name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum NodeRequest<'a> {
    /// Asks the shape and the last durable epoch.
    Info,
    /// Reads then writes node-blocks.
    Batch {
        /// Slots to read.
        reads: Vec<u32>,
        /// Slots to write.
        writes: Vec<u32>,
        /// The written blocks, concatenated: one piece when decoded, any number when encoded.
        data: Vec<&'a [u8]>,
    },
    /// Makes everything written durable, and `epoch` with it.
    Flush(u64),
}

fn write_slots(w: &mut Writer, slots: &[u32]) {
    // A batch names at most a few hundred slots (`balance::BATCH` and the writes per node).
    w.u32(slots.len() as u32);
    for &s in slots {
        w.u32(s);
    }
}

fn read_slots(r: &mut Reader<'_>, max: usize) -> Result<Vec<u32>, Error> {
    let count = r.u32()? as usize;
    check_count(r, "node slots", count, max, 4)?;
    (0..count).map(|_| r.u32()).collect()
}

impl<'a> Codec<'a> for NodeRequest<'a> {
    type Context = usize;

    fn encode(&self, w: &mut Writer) {
        match self {
            NodeRequest::Info => w.u8(INFO),
            NodeRequest::Batch {
                reads,
                writes,
                data,
            } => {
                w.u8(BATCH);
                write_slots(w, reads);
                write_slots(w, writes);
                for piece in data {
                    w.bytes(piece);
                }
            }
            NodeRequest::Flush(epoch) => {
                w.u8(FLUSH);
                w.u64(*epoch);
            }
        }
    }

    fn decode(r: &mut Reader<'a>, max: &usize) -> Result<Self, Error> {
        match r.u8()? {
            INFO => Ok(NodeRequest::Info),
            BATCH => {
                let reads = read_slots(r, *max)?;
                let writes = read_slots(r, *max)?;
                let data = vec![r.take(r.remaining())?];
                Ok(NodeRequest::Batch {
                    reads,
                    writes,
                    data,
                })
            }
            FLUSH => Ok(NodeRequest::Flush(r.u64()?)),
            other => Err(Error::UnknownValue {
                field: "node operation",
                found: u64::from(other),
            }),
        }
    }
}

/// The reply to `INFO`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeInfo {
    /// Bytes per block.
    pub block_size: u32,
    /// Node-blocks.
    pub blocks: u32,
    /// The last epoch made durable by a flush (0: none yet).
    pub epoch: u64,
    /// The node's random identity (kept beside its state, copied with it).
    pub id: [u8; 16],
}

impl Codec<'_> for NodeInfo {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.u32(self.block_size);
        w.u32(self.blocks);
        w.u64(self.epoch);
        w.bytes(&self.id);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        Ok(Self {
            block_size: r.u32()?,
            blocks: r.u32()?,
            epoch: r.u64()?,
            id: r.array()?,
        })
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn requests_round_trip_and_bad_counts_are_refused() {
        let block = [7u8; 8];
        let batch = NodeRequest::Batch {
            reads: vec![1, 2],
            writes: vec![3],
            data: vec![&block],
        };
        for request in [NodeRequest::Info, NodeRequest::Flush(9), batch] {
            let bytes = request.to_bytes();
            assert_eq!(NodeRequest::from_bytes(&bytes, &16).unwrap(), request);
        }
        let mut huge = vec![BATCH];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(NodeRequest::from_bytes(&huge, &16).is_err());
        assert!(NodeRequest::from_bytes(&[5], &16).is_err());
        let info = NodeInfo {
            block_size: 4096,
            blocks: 10,
            epoch: 3,
            id: [5; 16],
        };
        assert_eq!(NodeInfo::from_bytes(&info.to_bytes(), &()).unwrap(), info);
    }
}
