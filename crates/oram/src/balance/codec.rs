//! The balancer's state, encoded (the caller seals it and writes it atomically):
//!
//! ```text
//! state  = version u8 (1) | block size u32 | blocks u32 | nodes u16
//!        | nodes x node-blocks u32
//!        | blocks x (node u16 | slot u32)      slot 0xFFFFFFFF: never written,
//!                                              0xFFFFFFFE: in the eviction cache
//!        | cached u32 | cached x (block u32 | the block)   (in eviction order)
//! ```
//!
//! Decoding ([`Codec`] for [`Balancer`]; [`decode`] wraps it) checks every count against the
//! bytes there, every node and slot against the shape, that no two blocks share a slot, and
//! that the cache holds exactly the blocks marked cached; free slots are rebuilt from the
//! places (slots held back when the state was written are free again, which is what makes a
//! crash safe: see the parent module). Refusal vectors: `tests/vectors/oram_balancer_state/`.

use std::collections::HashMap;

use pir_core::codec::{check_count, Codec, Reader, Writer};
use pir_core::Error;

use super::{Balancer, Place, CACHED, MAX_NODES, NEVER_WRITTEN};
use crate::error::OramError;

const VERSION: u8 = 1;

/// Encodes the state (call between batches).
pub fn encode(b: &Balancer) -> Vec<u8> {
    b.to_bytes()
}

/// Decodes and checks a state.
pub fn decode(bytes: &[u8]) -> Result<Balancer, OramError> {
    Balancer::from_bytes(bytes, &())
        .map_err(|e| OramError::State(format!("the balancer state is damaged: {e}")))
}

fn bad(what: &str) -> Error {
    Error::Malformed(what.to_owned())
}

impl Codec<'_> for Balancer {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.u8(VERSION);
        w.u32(self.block_size);
        w.u32(self.blocks());
        // At most MAX_NODES (`check_shape`).
        w.u16(self.nodes() as u16);
        for &n in &self.node_blocks {
            w.u32(n);
        }
        for p in &self.place {
            w.u16(p.node);
            w.u32(p.slot);
        }
        // Every cached block is in exactly one queue between batches.
        let order: Vec<u32> = self.queues.iter().flatten().copied().collect();
        w.u32(order.len() as u32);
        for block in order {
            w.u32(block);
            // Queued blocks are in the cache (`begin_batch` keeps them together).
            w.bytes(self.cache.get(&block).map_or(&[][..], Vec::as_slice));
        }
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        let version = r.u8()?;
        if version != VERSION {
            return Err(Error::WrongVersion {
                found: version.into(),
                supported: VERSION.into(),
            });
        }
        let block_size = r.u32()?;
        let blocks = r.u32()?;
        let k = r.u16()? as usize;
        check_count(r, "nodes", k, MAX_NODES, 4)?;
        let node_blocks: Vec<u32> = (0..k).map(|_| r.u32()).collect::<Result<_, _>>()?;
        Balancer::check_shape(block_size, blocks, &node_blocks)
            .map_err(|e| Error::Malformed(e.to_string()))?;
        check_count(r, "blocks", blocks as usize, u32::MAX as usize, 6)?;
        let mut taken: Vec<Vec<bool>> = node_blocks
            .iter()
            .map(|&n| vec![false; n as usize])
            .collect();
        let mut place = Vec::with_capacity(blocks as usize);
        let mut cached_places = 0usize;
        for _ in 0..blocks {
            let node = r.u16()?;
            let slot = r.u32()?;
            let Some(used) = taken.get_mut(node as usize) else {
                return Err(Error::OutOfRange {
                    field: "a block's node",
                    found: node.into(),
                    limit: k as u64,
                });
            };
            match slot {
                NEVER_WRITTEN => {}
                CACHED => cached_places += 1,
                s => match used.get_mut(s as usize) {
                    Some(u) if !*u => *u = true,
                    Some(_) => return Err(bad("two blocks in one slot")),
                    None => {
                        return Err(Error::OutOfRange {
                            field: "a block's slot on its node",
                            found: s.into(),
                            limit: used.len() as u64,
                        })
                    }
                },
            }
            place.push(Place { node, slot });
        }
        let cached = r.u32()? as usize;
        check_count(
            r,
            "cached blocks",
            cached,
            blocks as usize,
            4 + block_size as usize,
        )?;
        if cached != cached_places {
            return Err(bad("the cache does not match the blocks marked cached"));
        }
        let mut cache = HashMap::with_capacity(cached);
        let mut order = Vec::with_capacity(cached);
        for _ in 0..cached {
            let block = r.u32()?;
            let data = r.take(block_size as usize)?.to_vec();
            match place.get(block as usize) {
                Some(p) if p.slot == CACHED => {}
                _ => return Err(bad("a cached block not marked cached")),
            }
            if cache.insert(block, data).is_some() {
                return Err(bad("a block cached twice"));
            }
            order.push(block);
        }
        Ok(Balancer::assemble(
            block_size,
            node_blocks,
            place,
            cache,
            order,
        ))
    }
}
