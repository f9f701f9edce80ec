//! The database file as a [`Codec`] (the layout is in the parent module's documentation):
//! written by `pir safebrowsing build`, read by the servers (a file an operator hands them,
//! checked as untrusted bytes).

use super::*;

use pir_core::codec::check_count;
use pir_core::Error;

/// Reads the lists of `n` records, one byte each: known bits only, and only lists the
/// database has a source for.
pub(super) fn read_lists(
    r: &mut Reader<'_>,
    n: usize,
    sources: Lists,
) -> Result<Vec<Lists>, Error> {
    r.take(n)?
        .iter()
        .map(|&bits| {
            Lists::from_bits(bits)
                .filter(|l| l.is_subset(sources))
                .ok_or(Error::UnknownValue {
                    field: "lists of a record",
                    found: u64::from(bits),
                })
        })
        .collect()
}

/// Reads the record count of bucket `id`: at least 1, `total` with it at most
/// [`MAX_ENTRIES`], each record `record_bytes` long; adds it to `total`.
pub(super) fn read_record_count(
    r: &mut Reader<'_>,
    id: u64,
    total: &mut usize,
    record_bytes: usize,
) -> Result<usize, Error> {
    let n = r.u32()? as usize;
    if n == 0 {
        return Err(Error::Malformed(format!("bucket {id} is empty")));
    }
    check_count(r, "records", n, MAX_ENTRIES - *total, record_bytes)?;
    *total += n;
    Ok(n)
}

/// Reads a bucket count: 1 to [`MAX_BUCKETS`], each bucket at least `min_bytes` long.
pub(super) fn read_bucket_count(r: &mut Reader<'_>, min_bytes: usize) -> Result<usize, Error> {
    let count = usize::from(r.u16()?);
    let limit = MAX_BUCKETS as u64;
    if count == 0 {
        let found = 0;
        return Err(Error::OutOfRange {
            field: "buckets",
            found,
            limit,
        });
    }
    check_count(r, "buckets", count, MAX_BUCKETS, min_bytes)?;
    Ok(count)
}

/// Decodes a whole file of `what`, refusing one of an older `pir` (starting with `old`) with
/// `advice`.
pub(super) fn decode_file<T: for<'a> Codec<'a, Context = ()>>(
    bytes: &[u8],
    what: &'static str,
    old: &[u8],
    advice: &str,
) -> Result<T, ListError> {
    if bytes.starts_with(old) {
        return Err(malformed(what, advice));
    }
    T::from_bytes(bytes, &()).map_err(|e| malformed(what, e))
}

/// Reads the sources byte.
pub(super) fn read_sources(r: &mut Reader<'_>) -> Result<Lists, Error> {
    let bits = r.u8()?;
    Lists::from_bits(bits)
        .filter(|l| !l.is_empty())
        .ok_or(Error::UnknownValue {
            field: "sources",
            found: u64::from(bits),
        })
}

impl ListDatabase {
    /// The database `index` describes, from what the index does not hold: its `name`, every
    /// bucket's `records` back to back in the index's order, and the waterfall's `state`.
    /// Its digest must be the index's database id, which checks all of them (a sharded
    /// database's parts are put back together this way for `--update`).
    pub fn assemble(
        index: &ListIndex,
        name: &str,
        records: &[u8],
        state: &super::WaterfallState,
    ) -> Result<Self, ListError> {
        let what = "the sharded database";
        let rows: usize = index.buckets.iter().map(|b| b.len()).sum();
        if records.len() != rows * RECORD_BYTES || name.len() > MAX_NAME {
            return Err(malformed(what, "its parts do not hold the index's records"));
        }
        let mut w = Writer::with_capacity(DB_PROLOGUE.len() + 96 + name.len() + 33 * rows);
        DB_PROLOGUE.write(&mut w);
        // name <= MAX_NAME (checked above); the index's bucket count and record counts are
        // bounded as the database file's when it is read.
        w.u16(name.len() as u16);
        w.bytes(name.as_bytes());
        w.u64(index.version);
        w.u64(state.next_id);
        w.u32(state.base);
        w.u8(state.ratio);
        w.u8(state.dead_percent);
        w.u8(index.sources.bits());
        w.u16(index.buckets.len() as u16);
        let mut at = 0;
        for bucket in &index.buckets {
            let n = bucket.len();
            w.u64(bucket.id);
            w.u32(n as u32);
            w.bytes(&records[at..at + n * RECORD_BYTES]);
            at += n * RECORD_BYTES;
            for l in &bucket.lists {
                w.u8(l.bits());
            }
        }
        w.bytes(&index.database_id);
        let db = Self::from_bytes(&w.into_bytes(), &()).map_err(|e| malformed(what, e))?;
        if db.index() != *index {
            return Err(malformed(what, "its index is not the one its parts make"));
        }
        Ok(db)
    }

    /// Everything the digest covers.
    pub(super) fn content(&self) -> Vec<u8> {
        let w8 = &self.waterfall;
        let records: usize = w8.buckets().map(|b| b.len()).sum();
        let mut w = Writer::with_capacity(DB_PROLOGUE.len() + 64 + self.name.len() + 33 * records);
        DB_PROLOGUE.write(&mut w);
        // name <= MAX_NAME, base <= u32::MAX, ratio and dead percent small, buckets <=
        // MAX_BUCKETS, counts <= MAX_ENTRIES: all checked when built or read.
        w.u16(self.name.len() as u16);
        w.bytes(self.name.as_bytes());
        w.u64(w8.version());
        w.u64(w8.next_id());
        let policy = w8.policy();
        w.u32(policy.base as u32);
        w.u8(policy.ratio as u8);
        w.u8(policy.dead_percent as u8);
        w.u8(self.sources.bits());
        w.u16(w8.buckets().count() as u16);
        for (bucket, lists) in w8.buckets().zip(&self.lists) {
            w.u64(bucket.id());
            w.u32(bucket.len() as u32);
            w.bytes(bucket.records());
            for l in lists {
                w.u8(l.bits());
            }
        }
        w.into_bytes()
    }
}

impl Codec<'_> for ListDatabase {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        w.bytes(&self.content());
        w.bytes(&self.id);
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        DB_PROLOGUE.read(r)?;
        let name = r.short_bytes(MAX_NAME)?;
        if name.is_empty() {
            return Err(Error::Malformed("an empty list name".into()));
        }
        let name = String::from_utf8(name.to_vec())
            .map_err(|_| Error::Malformed("the list name is not UTF-8".into()))?;
        let version = r.u64()?;
        let next_id = r.u64()?;
        let base = r.u32()? as usize;
        let ratio = usize::from(r.u8()?);
        let dead_percent = usize::from(r.u8()?);
        if base == 0 || ratio < 2 || dead_percent > 100 {
            return Err(Error::Malformed(format!(
                "merge policy base {base}, ratio {ratio}, dead {dead_percent} %"
            )));
        }
        let sources = read_sources(r)?;
        // A bucket: id u64, count u32, then records.
        let count = read_bucket_count(r, 12)?;
        let mut buckets = Vec::with_capacity(count);
        let mut all_lists = Vec::with_capacity(count);
        let mut total = 0usize;
        let mut live = HashSet::new();
        for _ in 0..count {
            let id = r.u64()?;
            if buckets.last().is_some_and(|(last, _, _)| *last >= id) {
                return Err(Error::Malformed("buckets repeated or out of order".into()));
            }
            let n = read_record_count(r, id, &mut total, RECORD_BYTES + 1)?;
            let records = r.take(n * RECORD_BYTES)?.to_vec();
            let lists = read_lists(r, n, sources)?;
            for (hash, l) in records.chunks_exact(RECORD_BYTES).zip(&lists) {
                if !l.is_empty() && !live.insert(hash.to_vec()) {
                    return Err(Error::Malformed(
                        "a full hash is live in two buckets".into(),
                    ));
                }
            }
            let dead = lists.iter().map(|l| l.is_empty()).collect();
            buckets.push((id, records, dead));
            all_lists.push(lists);
        }
        let digest: [u8; 32] = r.array()?;
        let policy = Policy {
            base,
            ratio,
            dead_percent,
        };
        let waterfall = Waterfall::from_parts(policy, RECORD_BYTES, version, next_id, buckets)?;
        let db = Self::seal(&name, waterfall, all_lists, sources);
        if db.id != digest {
            return Err(Error::Malformed(
                "its digest does not match its content".into(),
            ));
        }
        Ok(db)
    }
}
