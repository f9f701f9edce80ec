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
//! Decoding checks every count against the bytes there, every node and slot against the
//! shape, that no two blocks share a slot, and that the cache holds exactly the blocks marked
//! cached; free slots are rebuilt from the places (slots held back when the state was
//! written are free again, which is what makes a crash safe: see the parent module).

use std::collections::HashMap;

use pir_core::codec::{check_count, Reader, Writer};

use super::{Balancer, Place, CACHED, MAX_NODES, NEVER_WRITTEN};
use crate::error::OramError;

const VERSION: u8 = 1;

/// Encodes the state (call between batches).
pub fn encode(b: &Balancer) -> Vec<u8> {
    let block = b.block_size as usize;
    let mut w = Writer::with_capacity(16 + b.place.len() * 6 + b.cache.len() * (block + 4));
    w.u8(VERSION);
    w.u32(b.block_size);
    w.u32(b.blocks());
    // At most MAX_NODES (`check_shape`).
    w.u16(b.nodes() as u16);
    for &n in &b.node_blocks {
        w.u32(n);
    }
    for p in &b.place {
        w.u16(p.node);
        w.u32(p.slot);
    }
    // Every cached block is in exactly one queue between batches.
    let order: Vec<u32> = b.queues.iter().flatten().copied().collect();
    w.u32(order.len() as u32);
    for block in order {
        w.u32(block);
        // Queued blocks are in the cache (`begin_batch` keeps them together).
        w.bytes(b.cache.get(&block).map_or(&[][..], Vec::as_slice));
    }
    w.into_bytes()
}

fn bad(what: &str) -> OramError {
    OramError::State(format!("the balancer state is damaged: {what}"))
}

/// Decodes and checks a state.
pub fn decode(bytes: &[u8]) -> Result<Balancer, OramError> {
    let mut r = Reader::new(bytes);
    let e = OramError::StateFormat;
    if r.u8().map_err(e)? != VERSION {
        return Err(bad("unknown version"));
    }
    let block_size = r.u32().map_err(e)?;
    let blocks = r.u32().map_err(e)?;
    let k = r.u16().map_err(e)? as usize;
    check_count(&r, "nodes", k, MAX_NODES, 4).map_err(e)?;
    let node_blocks: Vec<u32> = (0..k)
        .map(|_| r.u32())
        .collect::<Result<_, _>>()
        .map_err(e)?;
    Balancer::check_shape(block_size, blocks, &node_blocks)?;
    check_count(&r, "blocks", blocks as usize, u32::MAX as usize, 6).map_err(e)?;
    let mut taken: Vec<Vec<bool>> = node_blocks
        .iter()
        .map(|&n| vec![false; n as usize])
        .collect();
    let mut place = Vec::with_capacity(blocks as usize);
    let mut cached_places = 0usize;
    for _ in 0..blocks {
        let node = r.u16().map_err(e)?;
        let slot = r.u32().map_err(e)?;
        let Some(used) = taken.get_mut(node as usize) else {
            return Err(bad("a block on a node that does not exist"));
        };
        match slot {
            NEVER_WRITTEN => {}
            CACHED => cached_places += 1,
            s => match used.get_mut(s as usize) {
                Some(u) if !*u => *u = true,
                Some(_) => return Err(bad("two blocks in one slot")),
                None => return Err(bad("a slot past the end of its node")),
            },
        }
        place.push(Place { node, slot });
    }
    let cached = r.u32().map_err(e)? as usize;
    check_count(
        &r,
        "cached blocks",
        cached,
        blocks as usize,
        4 + block_size as usize,
    )
    .map_err(e)?;
    if cached != cached_places {
        return Err(bad("the cache does not match the blocks marked cached"));
    }
    let mut cache = HashMap::with_capacity(cached);
    let mut order = Vec::with_capacity(cached);
    for _ in 0..cached {
        let block = r.u32().map_err(e)?;
        let data = r.take(block_size as usize).map_err(e)?.to_vec();
        match place.get(block as usize) {
            Some(p) if p.slot == CACHED => {}
            _ => return Err(bad("a cached block not marked cached")),
        }
        if cache.insert(block, data).is_some() {
            return Err(bad("a block cached twice"));
        }
        order.push(block);
    }
    r.finish().map_err(e)?;
    Ok(Balancer::assemble(
        block_size,
        node_blocks,
        place,
        cache,
        order,
    ))
}
