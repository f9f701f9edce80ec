//! Waterfall updates (Checklist, Kogan and Corrigan-Gibbs 2021, sections 5.2 and 7.1): a changing database kept as
//! immutable *buckets*, so that a change costs hints for the buckets it creates rather than for
//! the whole database.
//!
//! Hints are per set of a fixed universe, so a bucket never changes once made. A batch of
//! changes ([`Change`]) becomes a new bucket of its added records; removed records are marked
//! dead where they are (a client never asks for them again) and leave when their bucket is
//! rewritten. Buckets are grouped by size into levels (`level = floor(log_r(size / base))`);
//! when a level holds `r` buckets they merge into one bucket of their live records, one level
//! up (tiering, as in log-structured merge trees). A bucket more than [`Policy::dead_percent`]
//! dead is rewritten alone. A client fetches hints only for the buckets a step creates and
//! drops those it removes; between steps it asks every bucket once per lookup (the one holding
//! the record for real, the others for a random record), so no server learns which bucket
//! holds it.
//!
//! Cost of a step = records in the buckets it creates (what one client's new hints cost the
//! offline server); re-hinting from scratch costs every live record. Each added record is
//! written about once per level it passes through, so a step costs a few batches
//! (`benches`/`pir bench --modes checklist-updates` measures the ratio).
//!
//! Records within a bucket are sorted bytewise, so a bucket's layout is a function of its
//! contents (for Safe Browsing, of the full hashes it holds).

use std::collections::BTreeMap;

use pir_core::Error;

/// How buckets merge.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Policy {
    /// Size of a level-0 bucket: buckets up to `base * r` records are on level 0.
    pub base: usize,
    /// `r`: buckets per level before they merge (at least 2).
    pub ratio: usize,
    /// A bucket with more than this percentage of dead records is rewritten alone.
    pub dead_percent: usize,
}

impl Policy {
    /// The default: `r = 4`, rewrite at 75 % dead, level 0 up to `base` records. Measured at
    /// 3 M records with 1 % changed per step (`pir bench --modes checklist-updates`): `r = 4`
    /// makes a step 58x cheaper than re-hinting with at most 10 buckets, `r = 16` 83x with up
    /// to 21 (a lookup asks every bucket, so fewer is faster online).
    pub fn with_base(base: usize) -> Self {
        Self {
            base: base.max(1),
            ratio: 4,
            dead_percent: 75,
        }
    }

    fn level(&self, size: usize) -> u32 {
        let mut level = 0;
        let mut bound = self.base.saturating_mul(self.ratio);
        while size >= bound && bound < usize::MAX {
            level += 1;
            bound = bound.saturating_mul(self.ratio);
        }
        level
    }
}

/// Where a record lives: a bucket id and a position in it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Location {
    /// The bucket's id (unique for the life of the database).
    pub bucket: u64,
    /// Position within the bucket.
    pub position: u64,
}

/// One immutable bucket.
#[derive(Debug, Clone)]
pub struct Bucket {
    id: u64,
    record_bytes: usize,
    records: Vec<u8>,
    dead: Vec<bool>,
    dead_count: usize,
}

impl Bucket {
    /// Its id.
    pub fn id(&self) -> u64 {
        self.id
    }

    /// Records in it (live and dead).
    pub fn len(&self) -> usize {
        self.dead.len()
    }

    /// True when it holds no record.
    pub fn is_empty(&self) -> bool {
        self.dead.is_empty()
    }

    /// Live records in it.
    pub fn live(&self) -> usize {
        self.len() - self.dead_count
    }

    /// All records, `b` bytes each, in position order (dead ones included: they are still
    /// served, since the hints cover them).
    pub fn records(&self) -> &[u8] {
        &self.records
    }

    /// Whether record `position` is dead (removed; still served until the bucket is rewritten).
    pub fn is_dead(&self, position: usize) -> bool {
        self.dead.get(position).copied().unwrap_or(false)
    }

    /// Record `position`, if it is live.
    pub fn record(&self, position: usize) -> Option<&[u8]> {
        let b = self.record_bytes;
        (position < self.len() && !self.dead[position])
            .then(|| &self.records[position * b..(position + 1) * b])
    }
}

/// One batch of changes.
#[derive(Debug, Clone, Default)]
pub struct Change {
    /// New records, `b` bytes each.
    pub added: Vec<Vec<u8>>,
    /// Records to remove (a modification is a removal and an addition).
    pub removed: Vec<Location>,
}

/// What one step did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Step {
    /// The database version after the step.
    pub version: u64,
    /// Buckets made by the step: a client fetches hints for these.
    pub created: Vec<u64>,
    /// Buckets the step removed: a client drops their hints.
    pub dropped: Vec<u64>,
    /// Records in the created buckets: one client's hint cost of this step.
    pub hinted_records: usize,
}

/// A database of buckets under a merge [`Policy`].
#[derive(Debug, Clone)]
pub struct Waterfall {
    policy: Policy,
    record_bytes: usize,
    buckets: BTreeMap<u64, Bucket>,
    next_id: u64,
    version: u64,
}

impl Waterfall {
    /// A database whose first bucket holds `records` (`b` bytes each).
    pub fn new(policy: Policy, record_bytes: usize, records: Vec<Vec<u8>>) -> Result<Self, Error> {
        if policy.ratio < 2 {
            return Err(Error::InvalidParameter(format!(
                "a waterfall ratio of {} (at least 2)",
                policy.ratio
            )));
        }
        if record_bytes == 0 {
            return Err(Error::InvalidParameter("records of 0 bytes".into()));
        }
        let mut waterfall = Self {
            policy,
            record_bytes,
            buckets: BTreeMap::new(),
            next_id: 0,
            version: 0,
        };
        waterfall.check_records(&records)?;
        if !records.is_empty() {
            waterfall.make_bucket(records);
        }
        Ok(waterfall)
    }

    /// A database as saved: its buckets `(id, records, dead flags)` at `version`, the next
    /// bucket id to use. Checks every invariant [`Waterfall::apply`] keeps (ids unique and
    /// below `next_id`, records sorted, flags one per record); it does not re-run merges.
    pub fn from_parts(
        policy: Policy,
        record_bytes: usize,
        version: u64,
        next_id: u64,
        buckets: Vec<(u64, Vec<u8>, Vec<bool>)>,
    ) -> Result<Self, Error> {
        let mut waterfall = Self::new(policy, record_bytes, Vec::new())?;
        waterfall.version = version;
        waterfall.next_id = next_id;
        for (id, records, dead) in buckets {
            let bad = |why: String| Err(Error::Malformed(format!("waterfall bucket {id}: {why}")));
            if id >= next_id || waterfall.buckets.contains_key(&id) {
                return bad(format!("id repeated or not below the next id {next_id}"));
            }
            if records.len() != dead.len() * record_bytes {
                return bad(format!(
                    "{} record bytes for {} records",
                    records.len(),
                    dead.len()
                ));
            }
            if records
                .chunks_exact(record_bytes)
                .zip(records.chunks_exact(record_bytes).skip(1))
                .any(|(a, b)| a > b)
            {
                return bad("records are not sorted".into());
            }
            let dead_count = dead.iter().filter(|d| **d).count();
            if dead_count == dead.len() {
                return bad("no live record".into());
            }
            waterfall.buckets.insert(
                id,
                Bucket {
                    id,
                    record_bytes,
                    records,
                    dead,
                    dead_count,
                },
            );
        }
        Ok(waterfall)
    }

    /// The merge policy.
    pub fn policy(&self) -> Policy {
        self.policy
    }

    /// The id the next bucket made will get.
    pub fn next_id(&self) -> u64 {
        self.next_id
    }

    /// Where each live record is, keyed by its bytes (for turning a new list into a
    /// [`Change`]).
    pub fn locations(&self) -> std::collections::HashMap<&[u8], Location> {
        let mut map = std::collections::HashMap::with_capacity(self.live());
        for bucket in self.buckets.values() {
            for position in 0..bucket.len() {
                if let Some(record) = bucket.record(position) {
                    map.insert(
                        record,
                        Location {
                            bucket: bucket.id,
                            position: position as u64,
                        },
                    );
                }
            }
        }
        map
    }

    /// The version: 0 at the start, one more per step.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Bytes per record.
    pub fn record_bytes(&self) -> usize {
        self.record_bytes
    }

    /// The buckets, by id.
    pub fn buckets(&self) -> impl Iterator<Item = &Bucket> {
        self.buckets.values()
    }

    /// Bucket `id`, if present.
    pub fn bucket(&self, id: u64) -> Option<&Bucket> {
        self.buckets.get(&id)
    }

    /// Live records in the whole database (what re-hinting from scratch costs).
    pub fn live(&self) -> usize {
        self.buckets.values().map(Bucket::live).sum()
    }

    fn check_records(&self, records: &[Vec<u8>]) -> Result<(), Error> {
        if let Some(bad) = records.iter().find(|r| r.len() != self.record_bytes) {
            return Err(Error::InvalidParameter(format!(
                "a record of {} bytes in a database of {}-byte records",
                bad.len(),
                self.record_bytes
            )));
        }
        Ok(())
    }

    fn make_bucket(&mut self, mut records: Vec<Vec<u8>>) -> u64 {
        records.sort_unstable();
        let id = self.next_id;
        self.next_id += 1;
        let bucket = Bucket {
            id,
            record_bytes: self.record_bytes,
            dead: vec![false; records.len()],
            records: records.concat(),
            dead_count: 0,
        };
        self.buckets.insert(id, bucket);
        id
    }

    /// Applies one batch: removals first (each must name a live record), then the added
    /// records as a new bucket, then merges and rewrites as the policy says. Nothing changes
    /// if the batch is invalid.
    pub fn apply(&mut self, change: Change) -> Result<Step, Error> {
        self.check_records(&change.added)?;
        let mut removed = change.removed.clone();
        removed.sort_unstable();
        if removed.windows(2).any(|w| w[0] == w[1]) {
            return Err(Error::InvalidParameter(
                "a record is removed twice in one batch".into(),
            ));
        }
        for location in &removed {
            let live = self
                .buckets
                .get(&location.bucket)
                .and_then(|bucket| usize::try_from(location.position).ok().map(|p| (bucket, p)))
                .is_some_and(|(bucket, p)| bucket.record(p).is_some());
            if !live {
                return Err(Error::InvalidParameter(format!(
                    "no live record at bucket {} position {}",
                    location.bucket, location.position
                )));
            }
        }
        for location in &removed {
            // Checked above: the bucket exists and the position is live.
            if let Some(bucket) = self.buckets.get_mut(&location.bucket) {
                bucket.dead[location.position as usize] = true;
                bucket.dead_count += 1;
            }
        }
        let before: Vec<u64> = self.buckets.keys().copied().collect();
        if !change.added.is_empty() {
            self.make_bucket(change.added);
        }
        self.settle();
        self.version += 1;
        let after: Vec<u64> = self.buckets.keys().copied().collect();
        let created: Vec<u64> = after
            .iter()
            .copied()
            .filter(|id| !before.contains(id))
            .collect();
        let dropped = before
            .iter()
            .copied()
            .filter(|id| !after.contains(id))
            .collect();
        let hinted_records = created.iter().map(|id| self.buckets[id].len()).sum();
        Ok(Step {
            version: self.version,
            created,
            dropped,
            hinted_records,
        })
    }

    /// Merges full levels and rewrites mostly dead buckets until neither applies; empty
    /// buckets disappear.
    fn settle(&mut self) {
        loop {
            self.buckets.retain(|_, bucket| bucket.live() > 0);
            let dead_limit = self
                .buckets
                .values()
                .find(|bucket| bucket.dead_count * 100 > self.policy.dead_percent * bucket.len());
            if let Some(bucket) = dead_limit {
                let id = bucket.id;
                self.rewrite(&[id]);
                continue;
            }
            let mut levels: BTreeMap<u32, Vec<u64>> = BTreeMap::new();
            for bucket in self.buckets.values() {
                levels
                    .entry(self.policy.level(bucket.len()))
                    .or_default()
                    .push(bucket.id);
            }
            match levels.values().find(|ids| ids.len() >= self.policy.ratio) {
                Some(ids) => {
                    let ids = ids.clone();
                    self.rewrite(&ids);
                }
                None => return,
            }
        }
    }

    /// Replaces buckets `ids` by one bucket of their live records.
    fn rewrite(&mut self, ids: &[u64]) {
        let mut records = Vec::new();
        for id in ids {
            if let Some(bucket) = self.buckets.remove(id) {
                let b = bucket.record_bytes;
                for position in 0..bucket.len() {
                    if !bucket.dead[position] {
                        records.push(bucket.records[position * b..(position + 1) * b].to_vec());
                    }
                }
            }
        }
        if !records.is_empty() {
            self.make_bucket(records);
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn record(v: u32) -> Vec<u8> {
        let mut r = vec![0u8; 8];
        r[..4].copy_from_slice(&v.to_be_bytes());
        r
    }

    fn live_set(w: &Waterfall) -> Vec<Vec<u8>> {
        let mut all = Vec::new();
        for bucket in w.buckets() {
            for p in 0..bucket.len() {
                if let Some(r) = bucket.record(p) {
                    all.push(r.to_vec());
                }
            }
        }
        all.sort();
        all
    }

    #[test]
    fn steps_keep_exactly_the_live_records_and_merge_levels() {
        let policy = Policy {
            base: 4,
            ratio: 2,
            dead_percent: 50,
        };
        let mut w = Waterfall::new(policy, 8, (0..16).map(record).collect()).unwrap();
        let mut expected: Vec<Vec<u8>> = (0..16).map(record).collect();
        let mut next = 100;
        for step in 0..30 {
            // Remove the first live record of the largest bucket, add three.
            let largest = w.buckets().max_by_key(|b| b.len()).unwrap();
            let position = (0..largest.len())
                .find(|&p| largest.record(p).is_some())
                .unwrap();
            let gone = largest.record(position).unwrap().to_vec();
            expected.retain(|r| *r != gone);
            let added: Vec<Vec<u8>> = (0..3).map(|k| record(next + k)).collect();
            next += 3;
            expected.extend(added.clone());
            let removed = vec![Location {
                bucket: largest.id(),
                position: position as u64,
            }];
            let report = w.apply(Change { added, removed }).unwrap();
            assert_eq!(report.version, step + 1);
            expected.sort();
            assert_eq!(live_set(&w), expected, "step {step}");
            let per_level = w.buckets().fold(BTreeMap::<u32, usize>::new(), |mut m, b| {
                *m.entry(policy.level(b.len())).or_default() += 1;
                m
            });
            assert!(per_level.values().all(|&c| c < policy.ratio));
            assert!(report.hinted_records >= 3);
        }
    }

    #[test]
    fn invalid_batches_change_nothing() {
        let mut w = Waterfall::new(Policy::with_base(4), 8, (0..8).map(record).collect()).unwrap();
        let before = live_set(&w);
        let twice = Location {
            bucket: 0,
            position: 1,
        };
        assert!(w
            .apply(Change {
                added: vec![record(99)],
                removed: vec![twice, twice],
            })
            .is_err());
        assert!(w
            .apply(Change {
                added: vec![],
                removed: vec![Location {
                    bucket: 7,
                    position: 0
                }],
            })
            .is_err());
        assert!(w
            .apply(Change {
                added: vec![vec![0; 3]],
                removed: vec![],
            })
            .is_err());
        assert_eq!(live_set(&w), before);
        assert_eq!(w.version(), 0);
    }

    fn parts(w: &Waterfall) -> Vec<(u64, Vec<u8>, Vec<bool>)> {
        w.buckets()
            .map(|b| {
                let dead = (0..b.len()).map(|p| b.is_dead(p)).collect();
                (b.id(), b.records().to_vec(), dead)
            })
            .collect()
    }

    #[test]
    fn a_saved_waterfall_restores_and_continues_identically() {
        let policy = Policy {
            base: 2,
            ratio: 2,
            dead_percent: 50,
        };
        let mut w = Waterfall::new(policy, 8, (0..10).map(record).collect()).unwrap();
        for k in 0..5u32 {
            let locations = w.locations();
            let gone = locations[record(k).as_slice()];
            w.apply(Change {
                added: vec![record(50 + k)],
                removed: vec![gone],
            })
            .unwrap();
        }
        let mut restored =
            Waterfall::from_parts(policy, 8, w.version(), w.next_id(), parts(&w)).unwrap();
        assert_eq!(live_set(&restored), live_set(&w));
        let change = Change {
            added: vec![record(99)],
            removed: vec![w.locations()[record(7).as_slice()]],
        };
        assert_eq!(
            w.apply(change.clone()).unwrap(),
            restored.apply(change).unwrap()
        );
        assert_eq!(parts(&w), parts(&restored));

        // Damage is refused: a repeated id, an id at or past next_id, unsorted records,
        // flags of the wrong count, an all-dead bucket.
        let good = parts(&w);
        let refuse = |buckets: Vec<(u64, Vec<u8>, Vec<bool>)>, next: u64| {
            Waterfall::from_parts(policy, 8, 1, next, buckets).is_err()
        };
        let mut twice = good.clone();
        twice.push(good[0].clone());
        assert!(refuse(twice, w.next_id()));
        assert!(refuse(
            good.clone(),
            good.iter().map(|b| b.0).max().unwrap()
        ));
        let mut unsorted = good.clone();
        unsorted[0].1 = [record(9), record(1)].concat();
        unsorted[0].2 = vec![false, false];
        assert!(refuse(unsorted, w.next_id()));
        let mut flags = good.clone();
        flags[0].2.push(false);
        assert!(refuse(flags, w.next_id()));
        let mut dead = good;
        dead[0].2 = vec![true; dead[0].2.len()];
        assert!(refuse(dead, w.next_id()));
    }
}
