//! The client state: everything the client must remember, encoded and sealed.
//!
//! Plain layout (little-endian), version 1:
//! `"PIRORAMS"` ‖ version u32 ‖ block size u32 ‖ blocks u32 ‖ stores u32 ‖ instance [16] ‖
//! slot key [32] ‖ session u32 ‖ sweep u32 ‖ clean u8 ‖ home[N] u32 ‖ loc[N] u32 ‖ per
//! partition: real u32, cache count u32 + ids, per level: filled u8, region u8, durable u8,
//! epoch u64, and if filled the slot array and the unread-dummy list (u32 count + ids) ‖
//! cached blocks, then blocks of the client-side levels: each a count u32, then (id u32 ‖ B
//! bytes) each.
//!
//! The file is sealed with AES-256-GCM under the state key (`STATE.key`, written by
//! `pir oram init`); [`decode`] checks every length against the geometry before allocating,
//! and checks that the position map and the levels agree, so a corrupt or foreign state is
//! refused with a message instead of misbehaving later.

use std::collections::HashMap;

use crate::error::OramError;
use crate::oram::{Oram, LOC_CACHE, LOC_NOWHERE};
use crate::params::Geometry;
use crate::partition::{Level, Partition, CONSUMED, DUMMY};
use crate::seal::{self, KEY_LEN};

const MAGIC: &[u8; 8] = b"PIRORAMS";
const VERSION: u32 = 1;
/// Associated data of the sealed state file.
pub const STATE_LABEL: &[u8] = b"pir-oram state v1";

/// Encodes the state as it will be after it is durable (every filled level's current region
/// becomes its durable region). Call [`Oram::mark_durable`] once the bytes are on disk.
pub fn encode(oram: &Oram, clean: bool) -> Vec<u8> {
    let g = &oram.geometry;
    let mut out = Vec::with_capacity(64 + g.blocks as usize * 30);
    out.extend_from_slice(MAGIC);
    for v in [VERSION, g.block_size, g.blocks, g.stores] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&oram.instance);
    out.extend_from_slice(&oram.slot_key);
    out.extend_from_slice(&oram.session.to_le_bytes());
    out.extend_from_slice(&oram.sweep.to_le_bytes());
    out.push(u8::from(clean));
    for &h in &oram.home {
        out.extend_from_slice(&h.to_le_bytes());
    }
    for &l in &oram.loc {
        out.extend_from_slice(&l.to_le_bytes());
    }
    let put_list = |out: &mut Vec<u8>, list: &[u32]| {
        out.extend_from_slice(&(list.len() as u32).to_le_bytes());
        for &v in list {
            out.extend_from_slice(&v.to_le_bytes());
        }
    };
    for part in &oram.partitions {
        out.extend_from_slice(&part.real.to_le_bytes());
        put_list(&mut out, &part.cache);
        for level in &part.levels {
            out.push(u8::from(level.filled));
            out.push(level.region);
            out.push(if level.filled {
                level.region
            } else {
                level.durable_region
            });
            out.extend_from_slice(&level.epoch.to_le_bytes());
            if level.filled {
                for &s in &level.slots {
                    out.extend_from_slice(&s.to_le_bytes());
                }
                put_list(&mut out, &level.dummies);
            }
        }
    }
    for map in [&oram.cached, &oram.local_data] {
        let mut ids: Vec<u32> = map.keys().copied().collect();
        ids.sort_unstable();
        out.extend_from_slice(&(ids.len() as u32).to_le_bytes());
        for id in ids {
            out.extend_from_slice(&id.to_le_bytes());
            out.extend_from_slice(&map[&id]);
        }
    }
    out
}

struct Reader<'a> {
    bytes: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], OramError> {
        if self.bytes.len() < n {
            return Err(bad("the state is truncated"));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }

    fn u8(&mut self) -> Result<u8, OramError> {
        Ok(self.take(1)?[0])
    }

    fn u32(&mut self) -> Result<u32, OramError> {
        let mut b = [0u8; 4];
        b.copy_from_slice(self.take(4)?);
        Ok(u32::from_le_bytes(b))
    }

    fn u64(&mut self) -> Result<u64, OramError> {
        let mut b = [0u8; 8];
        b.copy_from_slice(self.take(8)?);
        Ok(u64::from_le_bytes(b))
    }

    fn u32s(&mut self, n: usize) -> Result<Vec<u32>, OramError> {
        let raw = self.take(n.checked_mul(4).ok_or_else(|| bad("a list is too long"))?)?;
        Ok(raw
            .chunks_exact(4)
            .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
            .collect())
    }

    fn list(&mut self, max: usize) -> Result<Vec<u32>, OramError> {
        let n = self.u32()? as usize;
        if n > max {
            return Err(bad("a list is longer than the geometry allows"));
        }
        self.u32s(n)
    }
}

fn bad(what: &str) -> OramError {
    OramError::State(format!(
        "{what}; the state file is damaged or from another version"
    ))
}

/// Decodes and checks a state (see the module docs).
pub fn decode(bytes: &[u8]) -> Result<Oram, OramError> {
    let mut r = Reader { bytes };
    if r.take(8)? != MAGIC {
        return Err(bad("not a pir ORAM state"));
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(OramError::State(format!(
            "state version {version}; this pir reads version {VERSION}"
        )));
    }
    let block_size = r.u32()?;
    let blocks = r.u32()?;
    let stores = r.u32()?;
    let g = Geometry::new(block_size, u64::from(blocks), stores)?;
    let mut instance = [0u8; 16];
    instance.copy_from_slice(r.take(16)?);
    let mut slot_key = [0u8; KEY_LEN];
    slot_key.copy_from_slice(r.take(KEY_LEN)?);
    let session = r.u32()?;
    let sweep = r.u32()?;
    let clean = r.u8()? != 0;
    let n = blocks as usize;
    let home = r.u32s(n)?;
    let loc = r.u32s(n)?;
    if home.iter().any(|&h| h >= g.partitions) || sweep >= g.partitions {
        return Err(bad("a partition number is out of range"));
    }
    let mut partitions = Vec::with_capacity(g.partitions as usize);
    for _ in 0..g.partitions {
        let real = r.u32()?;
        let cache = r.list(n)?;
        let mut levels = Vec::with_capacity(g.levels());
        for l in 0..g.levels() {
            let filled = r.u8()? != 0;
            let region = r.u8()?;
            let durable_region = r.u8()?;
            let epoch = r.u64()?;
            if region > 1 || durable_region > 1 {
                return Err(bad("a region number is out of range"));
            }
            let mut level = Level {
                filled,
                region,
                durable_region,
                epoch,
                ..Level::default()
            };
            if filled {
                let slots = g.slots(l) as usize;
                level.slots = r.u32s(slots)?;
                level.dummies = r.list(slots)?;
            }
            levels.push(level);
        }
        partitions.push(Partition {
            levels,
            real,
            cache,
        });
    }
    let mut maps = Vec::with_capacity(2);
    for _ in 0..2 {
        let count = r.u32()? as usize;
        if count > n {
            return Err(bad("more client-side blocks than blocks"));
        }
        let mut map = HashMap::with_capacity(count);
        for _ in 0..count {
            let id = r.u32()?;
            let data = r.take(block_size as usize)?.to_vec();
            if id >= blocks || map.insert(id, data).is_some() {
                return Err(bad("a client-side block id is out of range or repeated"));
            }
        }
        maps.push(map);
    }
    let local_data = maps.pop().unwrap_or_default();
    let cached = maps.pop().unwrap_or_default();
    if !r.bytes.is_empty() {
        return Err(bad("trailing bytes after the state"));
    }
    check(&g, &home, &loc, &partitions, &cached, &local_data)?;
    Oram::assemble(
        g, instance, slot_key, session, sweep, clean, home, loc, partitions, cached, local_data,
    )
}

/// The position map, the levels and the cache must describe the same placement.
fn check(
    g: &Geometry,
    home: &[u32],
    loc: &[u32],
    partitions: &[Partition],
    cached: &HashMap<u32, Vec<u8>>,
    local_data: &HashMap<u32, Vec<u8>>,
) -> Result<(), OramError> {
    let mut local_live = 0usize;
    let mut found = vec![0u8; g.blocks as usize];
    for (p, part) in partitions.iter().enumerate() {
        let mut real = 0u32;
        for (l, level) in part.levels.iter().enumerate() {
            for (slot, block) in level.live() {
                if block >= g.blocks
                    || home[block as usize] != p as u32
                    || loc[block as usize] != ((l as u32) << 24 | slot)
                {
                    return Err(bad("a level and the position map disagree"));
                }
                if l < g.local_levels() {
                    if !local_data.contains_key(&block) {
                        return Err(bad("a client-side level block has no data"));
                    }
                    local_live += 1;
                }
                found[block as usize] += 1;
                real += 1;
            }
            for &d in &level.dummies {
                if level.slots.get(d as usize) != Some(&DUMMY) {
                    return Err(bad("a dummy list names a slot that is not a dummy"));
                }
            }
            let unread = level.slots.iter().filter(|&&s| s == DUMMY).count();
            if unread != level.dummies.len()
                || level.slots.iter().filter(|&&s| s == CONSUMED).count() > level.slots.len()
            {
                return Err(bad("a dummy list does not match its level"));
            }
        }
        if real != part.real {
            return Err(bad("a partition's block count is wrong"));
        }
        for &b in &part.cache {
            if b >= g.blocks
                || home[b as usize] != p as u32
                || loc[b as usize] != LOC_CACHE
                || !cached.contains_key(&b)
            {
                return Err(bad("the eviction cache and the position map disagree"));
            }
            found[b as usize] += 1;
        }
    }
    for (b, &l) in loc.iter().enumerate() {
        let want = u8::from(l != LOC_NOWHERE);
        if found[b] != want {
            return Err(bad("a block is stored twice or lost"));
        }
    }
    if local_live != local_data.len() {
        return Err(bad(
            "client-side data for blocks not in a client-side level",
        ));
    }
    if cached.len() != loc.iter().filter(|&&l| l == LOC_CACHE).count() {
        return Err(bad(
            "the cache holds blocks the position map does not place there",
        ));
    }
    Ok(())
}

/// Seals an encoded state under the state key.
pub fn seal(key: &[u8; KEY_LEN], nonce: [u8; 12], plain: &[u8]) -> Result<Vec<u8>, OramError> {
    seal::seal_blob(key, nonce, STATE_LABEL, plain)
}

/// Opens a sealed state.
pub fn open(key: &[u8; KEY_LEN], sealed: Vec<u8>) -> Result<Vec<u8>, OramError> {
    seal::open_blob(key, STATE_LABEL, sealed)
}
