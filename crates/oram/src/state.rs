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

use pir_core::codec::{check_count, Codec};
use pir_core::wire::{Reader, Writer};
use pir_core::Error;

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
/// becomes its durable region), marked `clean` or not. Call [`Oram::mark_durable`] once the
/// bytes are on disk.
pub fn encode(oram: &Oram, clean: bool) -> Vec<u8> {
    let mut w = Writer::with_capacity(64 + oram.geometry.blocks as usize * 30);
    write_state(&mut w, oram, clean);
    w.into_bytes()
}

/// Decodes and checks a state (see the module docs).
pub fn decode(bytes: &[u8]) -> Result<Oram, OramError> {
    Oram::from_bytes(bytes, &()).map_err(OramError::StateFormat)
}

/// The state file's plaintext: [`Codec::encode`] writes the state with its own clean flag
/// ([`encode`] chooses the flag), [`Codec::decode`] checks every length against the geometry
/// the bytes declare and the placement for consistency.
impl Codec<'_> for Oram {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        write_state(w, self, self.clean);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        read_state(r)
    }
}

fn write_state(w: &mut Writer, oram: &Oram, clean: bool) {
    let g = &oram.geometry;
    w.bytes(MAGIC);
    for v in [VERSION, g.block_size, g.blocks, g.stores] {
        w.u32(v);
    }
    w.bytes(&oram.instance);
    w.bytes(&oram.slot_key);
    w.u32(oram.session);
    w.u32(oram.sweep);
    w.u8(u8::from(clean));
    write_u32s(w, &oram.home);
    write_u32s(w, &oram.loc);
    let write_list = |w: &mut Writer, list: &[u32]| {
        // Lists are bounded by the geometry's u32 block and slot counts.
        w.u32(list.len() as u32);
        write_u32s(w, list);
    };
    for part in &oram.partitions {
        w.u32(part.real);
        write_list(w, &part.cache);
        for level in &part.levels {
            w.u8(u8::from(level.filled));
            w.u8(level.region);
            w.u8(if level.filled {
                level.region
            } else {
                level.durable_region
            });
            w.u64(level.epoch);
            if level.filled {
                write_u32s(w, &level.slots);
                write_list(w, &level.dummies);
            }
        }
    }
    for map in [&oram.cached, &oram.local_data] {
        let mut ids: Vec<u32> = map.keys().copied().collect();
        ids.sort_unstable();
        w.u32(ids.len() as u32);
        for id in ids {
            w.u32(id);
            w.bytes(&map[&id]);
        }
    }
}

fn write_u32s(w: &mut Writer, values: &[u32]) {
    for &v in values {
        w.u32(v);
    }
}

/// `n` u32s, the bytes checked to be there before the vector is allocated.
fn read_u32s(r: &mut Reader<'_>, n: usize) -> Result<Vec<u32>, Error> {
    let raw = r.take(n.checked_mul(4).ok_or(Error::Oversized {
        len: n,
        limit: usize::MAX / 4,
    })?)?;
    Ok(raw
        .chunks_exact(4)
        .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        .collect())
}

/// A u32 count (at most `max`), then that many u32s.
fn read_list(r: &mut Reader<'_>, field: &'static str, max: usize) -> Result<Vec<u32>, Error> {
    let n = r.u32()? as usize;
    check_count(r, field, n, max, 4)?;
    read_u32s(r, n)
}

fn read_state(r: &mut Reader<'_>) -> Result<Oram, Error> {
    if r.take(MAGIC.len())? != MAGIC {
        return Err(Error::WrongMagic);
    }
    let version = r.u32()?;
    if version != VERSION {
        return Err(Error::WrongVersion {
            found: u16::try_from(version).unwrap_or(u16::MAX),
            supported: VERSION as u16,
        });
    }
    let block_size = r.u32()?;
    let blocks = r.u32()?;
    let stores = r.u32()?;
    let g = Geometry::new(block_size, u64::from(blocks), stores)
        .map_err(|e| Error::Malformed(format!("geometry: {e}")))?;
    let instance = r.array()?;
    let slot_key: [u8; KEY_LEN] = r.array()?;
    let session = r.u32()?;
    let sweep = r.u32()?;
    let clean = r.u8()? != 0;
    let n = blocks as usize;
    let home = read_u32s(r, n)?;
    let loc = read_u32s(r, n)?;
    if let Some(&p) = home.iter().chain([&sweep]).find(|&&h| h >= g.partitions) {
        return Err(Error::OutOfRange {
            field: "partition number",
            found: u64::from(p),
            limit: u64::from(g.partitions),
        });
    }
    let mut partitions = Vec::with_capacity(g.partitions as usize);
    for _ in 0..g.partitions {
        partitions.push(read_partition(r, &g, n)?);
    }
    let cached = read_blocks(r, block_size as usize, blocks)?;
    let local_data = read_blocks(r, block_size as usize, blocks)?;
    check(&g, &home, &loc, &partitions, &cached, &local_data)?;
    Oram::assemble(
        g, instance, slot_key, session, sweep, clean, home, loc, partitions, cached, local_data,
    )
    .map_err(|e| Error::Malformed(e.to_string()))
}

fn read_partition(r: &mut Reader<'_>, g: &Geometry, n: usize) -> Result<Partition, Error> {
    let real = r.u32()?;
    let cache = read_list(r, "eviction cache entries", n)?;
    let mut levels = Vec::with_capacity(g.levels());
    for l in 0..g.levels() {
        let filled = r.u8()? != 0;
        let region = r.u8()?;
        let durable_region = r.u8()?;
        let epoch = r.u64()?;
        if let Some(bad) = [region, durable_region].into_iter().find(|&x| x > 1) {
            return Err(Error::UnknownValue {
                field: "region",
                found: u64::from(bad),
            });
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
            level.slots = read_u32s(r, slots)?;
            level.dummies = read_list(r, "unread dummies", slots)?;
            level.reads = level.slots.iter().filter(|&&s| s == CONSUMED).count() as u32;
        }
        levels.push(level);
    }
    Ok(Partition {
        levels,
        real,
        cache,
    })
}

/// A count (at most one per block), then `id u32 | block` each, ids distinct and in range.
fn read_blocks(
    r: &mut Reader<'_>,
    block_size: usize,
    blocks: u32,
) -> Result<HashMap<u32, Vec<u8>>, Error> {
    let count = r.u32()? as usize;
    check_count(
        r,
        "client-side blocks",
        count,
        blocks as usize,
        block_size.saturating_add(4),
    )?;
    let mut map = HashMap::with_capacity(count);
    for _ in 0..count {
        let id = r.u32()?;
        let data = r.take(block_size)?.to_vec();
        if id >= blocks {
            return Err(Error::OutOfRange {
                field: "client-side block id",
                found: u64::from(id),
                limit: u64::from(blocks),
            });
        }
        if map.insert(id, data).is_some() {
            return Err(Error::Malformed(
                "a client-side block id is repeated".into(),
            ));
        }
    }
    Ok(map)
}

/// The position map, the levels and the cache must describe the same placement (a state that
/// breaks this is [`Error::Malformed`]).
fn check(
    g: &Geometry,
    home: &[u32],
    loc: &[u32],
    partitions: &[Partition],
    cached: &HashMap<u32, Vec<u8>>,
    local_data: &HashMap<u32, Vec<u8>>,
) -> Result<(), Error> {
    let bad = |what: &str| Error::Malformed(what.to_owned());
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
