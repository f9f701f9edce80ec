//! The write side of the ORAM: planning a partition write (which block it carries, which
//! levels are read back) and rebuilding the target level from them (module docs of
//! [`crate::oram`], step 3).

use std::collections::HashMap;

use rand::CryptoRng;

use super::{Extent, LevelWrite, Oram, WritePlan, SLOT_BITS};
use crate::error::OramError;
use crate::partition::{Level, DUMMY};
use crate::seal::SlotPlace;

impl Oram {
    /// Plans the next write to `partition`: which block it carries and which levels must be
    /// read back to rebuild the target level.
    pub fn plan_write(&mut self, partition: u32) -> WritePlan {
        let part = &self.partitions[partition as usize];
        let target = part.next_target();
        let top = self.geometry.top as usize;
        let new_block = if part.real < self.geometry.top_capacity {
            part.cache
                .iter()
                .copied()
                .find(|b| !self.pins.contains_key(b))
        } else {
            None
        };
        self.plan_rebuild(partition, target, target == top, new_block)
    }

    /// Plans rebuilding every filled level of `partition` into its top level (recovery after
    /// an unclean shutdown: no slot read before the crash is read again).
    pub fn plan_reshuffle(&mut self, partition: u32) -> Option<WritePlan> {
        let part = &self.partitions[partition as usize];
        if !part.levels.iter().any(|l| l.filled) {
            return None;
        }
        Some(self.plan_rebuild(partition, self.geometry.top as usize, true, None))
    }

    fn plan_rebuild(
        &self,
        partition: u32,
        target: usize,
        include_target: bool,
        new_block: Option<u32>,
    ) -> WritePlan {
        let part = &self.partitions[partition as usize];
        let last = if include_target { target + 1 } else { target };
        let sources: Vec<usize> = (0..last).filter(|&l| part.levels[l].filled).collect();
        let local = self.geometry.local_levels();
        let reads = sources
            .iter()
            .filter(|&&l| l >= local)
            .map(|&l| Extent {
                store: partition % self.geometry.stores,
                first_slot: self
                    .geometry
                    .region_start(partition, l, part.levels[l].region),
                slots: self.geometry.slots(l),
            })
            .collect();
        WritePlan {
            partition,
            target,
            sources,
            new_block,
            reads,
        }
    }

    /// Rebuilds the planned level from the source regions read (concatenated in
    /// `plan.reads` order) and returns the sealed level to write, or `None` when the level
    /// is one of the client-side levels.
    pub fn finish_write(
        &mut self,
        plan: WritePlan,
        sealed: &mut [u8],
        rng: &mut impl CryptoRng,
    ) -> Result<Option<LevelWrite>, OramError> {
        let slot_bytes = self.geometry.sealed_slot() as usize;
        let want: usize = plan.reads.iter().map(|e| e.slots as usize).sum::<usize>() * slot_bytes;
        if sealed.len() != want {
            return Err(OramError::ShortRead {
                store: 0,
                got: sealed.len(),
                want,
            });
        }
        let partition = plan.partition;
        let mut reals: Vec<u32> = Vec::new();
        let mut data: HashMap<u32, Vec<u8>> = HashMap::new();
        let mut offset = 0usize;
        let local = self.geometry.local_levels();
        for &l in &plan.sources {
            let level = &self.partitions[partition as usize].levels[l];
            if l < local {
                for (_, block) in level.live() {
                    let contents = self
                        .local_data
                        .remove(&block)
                        .ok_or(OramError::Internal("a client-side block has no data"))?;
                    reals.push(block);
                    data.insert(block, contents);
                }
                continue;
            }
            for (slot, block) in level.live() {
                let start = offset + slot as usize * slot_bytes;
                let place = SlotPlace {
                    partition,
                    level: l as u8,
                    region: level.region,
                    slot,
                    epoch: level.epoch,
                };
                let plain = self
                    .sealer
                    .open(place, &mut sealed[start..start + slot_bytes])
                    .ok_or(OramError::Tampered {
                        store: partition % self.geometry.stores,
                        partition,
                        level: l as u32,
                        slot,
                    })?;
                reals.push(block);
                data.insert(block, plain.to_vec());
            }
            offset += level.slots.len() * slot_bytes;
        }
        if let Some(block) = plan.new_block {
            let contents = self
                .cached
                .remove(&block)
                .ok_or(OramError::Internal("an evicted block is not in the cache"))?;
            let cache = &mut self.partitions[partition as usize].cache;
            cache.retain(|&b| b != block);
            reals.push(block);
            data.insert(block, contents);
            self.partitions[partition as usize].real += 1;
        }
        let target = plan.target;
        if reals.len() > self.geometry.capacity(target) as usize {
            return Err(OramError::Internal("a rebuilt level is over capacity"));
        }
        for &l in &plan.sources {
            self.partitions[partition as usize].levels[l].clear();
        }
        let epoch = (u64::from(self.session) << 32) | u64::from(self.rebuilds);
        self.rebuilds = self.rebuilds.checked_add(1).ok_or(OramError::Internal(
            "rebuild counter exhausted; reopen the store",
        ))?;
        let slots = self.geometry.slots(target);
        let durable = self.partitions[partition as usize].levels[target].durable_region;
        let region = 1 - durable;
        let level = Level::build(&reals, slots, region, epoch, durable, rng);
        self.traffic.extents_read += plan.reads.len() as u64;
        self.traffic.slots_read += plan.reads.iter().map(|e| u64::from(e.slots)).sum::<u64>();
        if target < local {
            for (slot, &block) in level.slots.iter().enumerate() {
                if block != DUMMY {
                    self.loc[block as usize] = ((target as u32) << SLOT_BITS) | slot as u32;
                }
            }
            self.local_data.extend(data);
            self.partitions[partition as usize].levels[target] = level;
            return Ok(None);
        }
        let zeros = vec![0u8; self.geometry.block_size as usize];
        let mut bytes = vec![0u8; slots as usize * slot_bytes];
        for (slot, &block) in level.slots.iter().enumerate() {
            let plain = if block == DUMMY {
                &zeros
            } else {
                &data[&block]
            };
            let place = SlotPlace {
                partition,
                level: target as u8,
                region,
                slot: slot as u32,
                epoch,
            };
            self.sealer.seal(
                place,
                plain,
                &mut bytes[slot * slot_bytes..(slot + 1) * slot_bytes],
            )?;
            if block != DUMMY {
                self.loc[block as usize] = ((target as u32) << SLOT_BITS) | slot as u32;
            }
        }
        self.partitions[partition as usize].levels[target] = level;
        let extent = Extent {
            store: partition % self.geometry.stores,
            first_slot: self.geometry.region_start(partition, target, region),
            slots,
        };
        self.traffic.extents_written += 1;
        self.traffic.slots_written += u64::from(slots);
        Ok(Some(LevelWrite { extent, bytes }))
    }

    /// After the state encoded by `encode_state` is durable: rebuilds must now avoid the
    /// regions it references.
    pub fn mark_durable(&mut self) {
        for part in &mut self.partitions {
            for level in &mut part.levels {
                if level.filled {
                    level.durable_region = level.region;
                }
            }
        }
    }
}
