//! A blocklist as the servers hold it: the full hashes of its entries in waterfall buckets
//! (`pir_xor::checklist::waterfall`), and the index a proxy downloads in the clear.
//!
//! Input: one entry per line, a URL or a bare host (`evil.example` blocks every page of that
//! host). Also read: filter-list lines as uBlock Origin ships URLhaus (`||host/path^$all`: the
//! `||` and everything from `^` on are dropped). Blank lines and lines starting with `#` or `!`
//! are comments. A line that does not canonicalize is skipped and counted, with its number.
//!
//! A list changes (URLhaus adds hosts every hour): `pir safebrowsing build --update` turns the
//! new list into one waterfall step. Hashes no longer listed are marked dead where they are,
//! new ones form a new bucket, small buckets merge (ratio 4). A bucket never changes once made,
//! so a client fetches Checklist hints only for the buckets a step creates; the smallest buckets
//! (below `dpf_below` records, the waterfall's level 0) are looked up with DPF and need no
//! hints at all.
//!
//! ```text
//! database file = "pir-safebrowsing-db-v2\n" | name_len u16 | name | version u64
//!               | next_bucket u64 | base u32 | ratio u8 | dead_percent u8 | buckets u16
//!               | buckets x (id u64 | count u32 | count x 32-byte full hashes (sorted)
//!                            | dead bitmap, ceil(count / 8) bytes, bit k of byte k/8 LSB first)
//!               | SHA-256 of everything before
//! index         = "pir-safebrowsing-index-v1\n" | database id [32] | version u64
//!               | dpf_below u32 | buckets u16
//!               | buckets x (id u64 | bucket id [32] | count u32 | count x 4-byte prefixes
//!                            (record k's prefix) | dead bitmap as above)
//! database id   = SHA-256 of the database file's content (its trailing digest)
//! bucket id     = pir_keys::sha256_parts of ("pir-safebrowsing-bucket-v1\n" | name_len u16
//!                 | name | id u64) and the records: what queries to that bucket name
//! ```
//! The servers serve each bucket as its own Checklist database; the proxy finds the records of
//! a prefix by their positions in the index (records are sorted within a bucket, so a
//! prefix's records are adjacent).

use std::collections::HashSet;

use pir_core::wire::{Reader, Writer};
use pir_xor::checklist::waterfall::{Change, Policy, Waterfall};

mod index;
pub use index::{IndexBucket, ListIndex};

/// First bytes of a database file.
pub const DB_MAGIC: &[u8] = b"pir-safebrowsing-db-v2\n";
/// First bytes of an index.
pub const INDEX_MAGIC: &[u8] = b"pir-safebrowsing-index-v1\n";
/// Domain of a bucket id.
const BUCKET_MAGIC: &[u8] = b"pir-safebrowsing-bucket-v1\n";
/// Most entries a list may hold (the PIR record count; Google's lists hold a few million).
pub const MAX_ENTRIES: usize = 1 << 26;
/// Longest list name.
pub const MAX_NAME: usize = 200;
/// Bytes of a prefix (Safe Browsing v4's usual prefix size).
pub const PREFIX_BYTES: usize = 4;
/// Most buckets (what one server serves at once, `pir_service::releases::MAX_RELEASES`). A
/// waterfall of ratio 4 holds fewer than 3 per level, so 64 leave room for 2^40 x base entries.
pub const MAX_BUCKETS: usize = 64;
/// The smallest level-0 bucket size used by default; larger lists use 1 % of their first size.
pub const MIN_BUCKET_BASE: usize = 256;

/// Why a database or index cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ListError {
    /// The bytes are not a well-formed file of the kind expected.
    #[error("{what} is damaged or not one: {why}")]
    Malformed {
        /// Which file.
        what: &'static str,
        /// What is wrong.
        why: String,
    },
    /// The list cannot be built as asked.
    #[error("{0}")]
    Input(String),
}

fn malformed(what: &'static str, why: impl std::fmt::Display) -> ListError {
    ListError::Malformed {
        what,
        why: why.to_string(),
    }
}

/// What reading a list file found.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct BuildReport {
    /// Lines holding an entry.
    pub entries: usize,
    /// Entries whose expression was already in the list.
    pub duplicates: usize,
    /// Lines skipped: (line number from 1, why), the first 20.
    pub skipped: Vec<(usize, String)>,
    /// All lines skipped.
    pub skipped_count: usize,
}

/// What [`ListDatabase::update`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateReport {
    /// Full hashes new in the list.
    pub added: usize,
    /// Full hashes no longer in it.
    pub removed: usize,
    /// Buckets made (a client fetches hints or uses DPF for these), by waterfall id.
    pub created: Vec<u64>,
    /// Buckets gone.
    pub dropped: Vec<u64>,
    /// Records in the created buckets: what one client's new hints cover.
    pub hinted_records: usize,
}

/// The entry a list line holds, if any (comments and blank lines hold none).
pub fn entry_of(line: &str) -> Option<&str> {
    let line = line.trim();
    if line.is_empty() || line.starts_with('#') || line.starts_with('!') || line.starts_with('[') {
        return None;
    }
    let line = line.strip_prefix("||").unwrap_or(line);
    let line = line.split('^').next().unwrap_or(line);
    (!line.is_empty()).then_some(line)
}

/// The sorted, unique full hashes of a list's text.
fn parse(text: &str) -> Result<(Vec<[u8; 32]>, BuildReport), ListError> {
    let mut report = BuildReport::default();
    let mut hashes = Vec::new();
    for (number, line) in text.lines().enumerate() {
        let Some(entry) = entry_of(line) else {
            continue;
        };
        match crate::entry_hash(entry) {
            Ok(hash) => {
                report.entries += 1;
                hashes.push(hash);
            }
            Err(e) => {
                report.skipped_count += 1;
                if report.skipped.len() < 20 {
                    report.skipped.push((number + 1, e.to_string()));
                }
            }
        }
    }
    hashes.sort_unstable();
    let before = hashes.len();
    hashes.dedup();
    report.duplicates = before - hashes.len();
    if hashes.is_empty() {
        return Err(ListError::Input(
            "the list holds no entry (one URL or host per line)".into(),
        ));
    }
    if hashes.len() > MAX_ENTRIES {
        return Err(ListError::Input(format!(
            "{} entries; at most {MAX_ENTRIES}",
            hashes.len()
        )));
    }
    Ok((hashes, report))
}

/// The blocklist the servers hold: a waterfall of buckets of full hashes.
#[derive(Debug, Clone)]
pub struct ListDatabase {
    name: String,
    waterfall: Waterfall,
    id: [u8; 32],
}

impl PartialEq for ListDatabase {
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id
    }
}

impl Eq for ListDatabase {}

/// One bucket as the servers serve it.
#[derive(Debug, Clone, Copy)]
pub struct ListBucket<'a> {
    /// Its waterfall id.
    pub id: u64,
    /// What queries to it name.
    pub database_id: [u8; 32],
    /// Its full hashes, 32 bytes each, sorted (dead ones included).
    pub records: &'a [u8],
}

impl ListBucket<'_> {
    /// Records in it.
    pub fn len(&self) -> usize {
        self.records.len() / 32
    }

    /// Never true (a bucket holds at least one live record).
    pub fn is_empty(&self) -> bool {
        self.records.is_empty()
    }
}

fn bucket_id(name: &str, id: u64, records: &[u8]) -> [u8; 32] {
    let mut w = Writer::with_capacity(BUCKET_MAGIC.len() + 10 + name.len());
    w.bytes(BUCKET_MAGIC);
    w.u16(name.len() as u16);
    w.bytes(name.as_bytes());
    w.u64(id);
    pir_keys::sha256_parts(&[&w.into_bytes(), records])
}

fn bitmap(dead: impl Iterator<Item = bool>, count: usize) -> Vec<u8> {
    let mut bits = vec![0u8; count.div_ceil(8)];
    for (k, d) in dead.enumerate() {
        if d {
            bits[k / 8] |= 1 << (k % 8);
        }
    }
    bits
}

/// Reads a dead bitmap of `count` flags (padding bits must be zero).
fn read_bitmap(r: &mut Reader<'_>, count: usize) -> Result<Vec<bool>, pir_core::Error> {
    let bits = r.take(count.div_ceil(8))?;
    let dead: Vec<bool> = (0..count)
        .map(|k| bits[k / 8] >> (k % 8) & 1 == 1)
        .collect();
    if bitmap(dead.iter().copied(), count) != bits {
        return Err(pir_core::Error::Malformed(
            "set padding bits in a dead bitmap".into(),
        ));
    }
    Ok(dead)
}

impl ListDatabase {
    /// Builds version 0 of list `name` from its text, level-0 buckets of
    /// `max(MIN_BUCKET_BASE, 1 %)` records.
    pub fn build(name: &str, text: &str) -> Result<(Self, BuildReport), ListError> {
        Self::build_with(name, text, None)
    }

    /// [`ListDatabase::build`] with an explicit level-0 bucket size `base`.
    pub fn build_with(
        name: &str,
        text: &str,
        base: Option<usize>,
    ) -> Result<(Self, BuildReport), ListError> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(ListError::Input(format!(
                "a list name of 1 to {MAX_NAME} bytes is needed"
            )));
        }
        let (hashes, report) = parse(text)?;
        let base = base.unwrap_or((hashes.len() / 100).max(MIN_BUCKET_BASE));
        if base == 0 || base > u32::MAX as usize {
            return Err(ListError::Input(format!(
                "a bucket base of {base} (1 to 2^32 - 1)"
            )));
        }
        let waterfall = Waterfall::new(
            Policy::with_base(base),
            32,
            hashes.iter().map(|h| h.to_vec()).collect(),
        )
        .map_err(|e| ListError::Input(e.to_string()))?;
        Ok((Self::seal(name, waterfall), report))
    }

    /// The next version: `text` is the whole new list; hashes no longer in it are removed,
    /// new ones added, as one waterfall step.
    pub fn update(&self, text: &str) -> Result<(Self, BuildReport, UpdateReport), ListError> {
        let (hashes, report) = parse(text)?;
        let mut waterfall = self.waterfall.clone();
        let (added, removed) = {
            let mut live = waterfall.locations();
            let added: Vec<Vec<u8>> = hashes
                .iter()
                .filter(|h| live.remove(h.as_slice()).is_none())
                .map(|h| h.to_vec())
                .collect();
            (added, live.into_values().collect::<Vec<_>>())
        };
        let (added_count, removed_count) = (added.len(), removed.len());
        let step = waterfall
            .apply(Change { added, removed })
            .map_err(|e| ListError::Input(e.to_string()))?;
        if waterfall.buckets().count() > MAX_BUCKETS {
            return Err(ListError::Input(format!(
                "the update would make more than {MAX_BUCKETS} buckets; rebuild the database \
                 without --update"
            )));
        }
        let db = Self::seal(&self.name, waterfall);
        Ok((
            db,
            report,
            UpdateReport {
                added: added_count,
                removed: removed_count,
                created: step.created,
                dropped: step.dropped,
                hinted_records: step.hinted_records,
            },
        ))
    }

    fn seal(name: &str, waterfall: Waterfall) -> Self {
        let mut db = Self {
            name: name.to_string(),
            waterfall,
            id: [0; 32],
        };
        db.id = pir_keys::sha256(&db.content());
        db
    }

    fn content(&self) -> Vec<u8> {
        let w8 = &self.waterfall;
        let records: usize = w8.buckets().map(|b| b.len()).sum();
        let mut w = Writer::with_capacity(DB_MAGIC.len() + 64 + self.name.len() + 33 * records);
        w.bytes(DB_MAGIC);
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
        w.u16(w8.buckets().count() as u16);
        for bucket in w8.buckets() {
            w.u64(bucket.id());
            w.u32(bucket.len() as u32);
            w.bytes(bucket.records());
            w.bytes(&bitmap(
                (0..bucket.len()).map(|k| bucket.is_dead(k)),
                bucket.len(),
            ));
        }
        w.into_bytes()
    }

    /// The database file's bytes.
    pub fn encode(&self) -> Vec<u8> {
        let mut bytes = self.content();
        bytes.extend_from_slice(&self.id);
        bytes
    }

    /// Reads a database file (checks its digest, order and bounds).
    pub fn decode(bytes: &[u8]) -> Result<Self, ListError> {
        const WHAT: &str = "the Safe Browsing database";
        let (content, digest) = bytes
            .split_at_checked(bytes.len().saturating_sub(32))
            .ok_or_else(|| malformed(WHAT, "too short"))?;
        if bytes.starts_with(b"pir-safebrowsing-db-v1\n") {
            return Err(malformed(
                WHAT,
                "it was made by an older pir; build it again with `pir safebrowsing build`",
            ));
        }
        if !bytes.starts_with(DB_MAGIC) {
            return Err(malformed(
                WHAT,
                "wrong magic (make one with `pir safebrowsing build`)",
            ));
        }
        if pir_keys::sha256(content) != digest {
            return Err(malformed(WHAT, "its digest does not match its content"));
        }
        let mut r = Reader::new(&content[DB_MAGIC.len()..]);
        let err = |e: pir_core::Error| malformed(WHAT, e);
        let name_len = r.u16().map_err(err)? as usize;
        if name_len == 0 || name_len > MAX_NAME {
            return Err(malformed(WHAT, "bad list name length"));
        }
        let name = std::str::from_utf8(r.take(name_len).map_err(err)?)
            .map_err(|_| malformed(WHAT, "the list name is not UTF-8"))?
            .to_string();
        let version = r.u64().map_err(err)?;
        let next_id = r.u64().map_err(err)?;
        let base = r.u32().map_err(err)? as usize;
        let ratio = usize::from(r.u8().map_err(err)?);
        let dead_percent = usize::from(r.u8().map_err(err)?);
        if base == 0 || ratio < 2 || dead_percent > 100 {
            return Err(malformed(
                WHAT,
                format!("merge policy base {base}, ratio {ratio}, dead {dead_percent} %"),
            ));
        }
        let count = usize::from(r.u16().map_err(err)?);
        if count == 0 || count > MAX_BUCKETS {
            return Err(malformed(WHAT, format!("{count} buckets")));
        }
        let mut buckets = Vec::with_capacity(count);
        let mut total = 0usize;
        let mut live = HashSet::new();
        for _ in 0..count {
            let id = r.u64().map_err(err)?;
            let n = r.u32().map_err(err)? as usize;
            total += n;
            if n == 0 || total > MAX_ENTRIES || r.remaining() < n * 32 {
                return Err(malformed(
                    WHAT,
                    format!("bucket {id}: {n} hashes announced"),
                ));
            }
            let records = r.take(n * 32).map_err(err)?.to_vec();
            let dead = read_bitmap(&mut r, n).map_err(err)?;
            for (k, hash) in records.chunks_exact(32).enumerate() {
                if !dead[k] && !live.insert(hash.to_vec()) {
                    return Err(malformed(WHAT, "a full hash is live in two buckets"));
                }
            }
            buckets.push((id, records, dead));
        }
        r.finish().map_err(err)?;
        let policy = Policy {
            base,
            ratio,
            dead_percent,
        };
        let waterfall =
            Waterfall::from_parts(policy, 32, version, next_id, buckets).map_err(err)?;
        let db = Self::seal(&name, waterfall);
        if db.id != digest {
            return Err(malformed(WHAT, "it does not encode canonically"));
        }
        Ok(db)
    }

    /// The list's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version: 0 when built, one more per update.
    pub fn version(&self) -> u64 {
        self.waterfall.version()
    }

    /// Live entries (full hashes listed now).
    pub fn len(&self) -> usize {
        self.waterfall.live()
    }

    /// Never true for a built or decoded database.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Whether `hash` is listed now.
    pub fn contains(&self, hash: &[u8; 32]) -> bool {
        self.waterfall.buckets().any(|b| {
            let records: Vec<&[u8]> = b.records().chunks_exact(32).collect();
            records
                .binary_search(&hash.as_slice())
                .is_ok_and(|k| !b.is_dead(k))
        })
    }

    /// The live full hashes, sorted.
    pub fn hashes(&self) -> Vec<[u8; 32]> {
        let mut out: Vec<[u8; 32]> = self
            .waterfall
            .buckets()
            .flat_map(|b| (0..b.len()).filter_map(move |k| b.record(k)))
            .filter_map(|r| r.try_into().ok())
            .collect();
        out.sort_unstable();
        out
    }

    /// The buckets the servers serve, by waterfall id.
    pub fn buckets(&self) -> Vec<ListBucket<'_>> {
        self.waterfall
            .buckets()
            .map(|b| ListBucket {
                id: b.id(),
                database_id: bucket_id(&self.name, b.id(), b.records()),
                records: b.records(),
            })
            .collect()
    }

    /// The database id (of this version).
    pub fn id(&self) -> [u8; 32] {
        self.id
    }

    /// Buckets smaller than this are looked up with DPF (the waterfall's level 0).
    pub fn dpf_below(&self) -> usize {
        let policy = self.waterfall.policy();
        policy
            .base
            .saturating_mul(policy.ratio)
            .min(u32::MAX as usize)
    }

    /// The index a proxy downloads.
    pub fn index(&self) -> ListIndex {
        ListIndex {
            database_id: self.id,
            version: self.version(),
            dpf_below: self.dpf_below(),
            buckets: self
                .waterfall
                .buckets()
                .zip(self.buckets())
                .map(|(b, served)| IndexBucket {
                    id: b.id(),
                    database_id: served.database_id,
                    prefixes: b.records().chunks_exact(32).map(prefix_of).collect(),
                    dead: (0..b.len()).map(|k| b.is_dead(k)).collect(),
                })
                .collect(),
        }
    }
}

fn prefix_of(hash: &[u8]) -> [u8; PREFIX_BYTES] {
    let mut prefix = [0; PREFIX_BYTES];
    prefix.copy_from_slice(&hash[..PREFIX_BYTES]);
    prefix
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const LIST: &str = "! Title: test\n# comment\n\nevil.example\n||bad.example/dl/x.exe^$all\n\
                        http://EVIL.example/\n1.2.3.4\nhttp://\n";

    #[test]
    fn builds_decodes_and_refuses_damage() {
        let (db, report) = ListDatabase::build("test", LIST).unwrap();
        // evil.example and http://EVIL.example/ are the same expression.
        assert_eq!(report.entries, 4);
        assert_eq!(report.duplicates, 1);
        assert_eq!(report.skipped_count, 1);
        assert_eq!(report.skipped[0].0, 8);
        assert_eq!(db.len(), 3);
        assert!(db
            .hashes()
            .contains(&crate::entry_hash("bad.example/dl/x.exe").unwrap()));
        let bytes = db.encode();
        assert_eq!(ListDatabase::decode(&bytes).unwrap(), db);
        for at in [0, DB_MAGIC.len() + 3, bytes.len() - 40, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 1;
            assert!(ListDatabase::decode(&bad).is_err(), "flip at {at}");
        }
        assert!(ListDatabase::decode(&bytes[..bytes.len() - 1]).is_err());
        assert!(ListDatabase::build("test", "# nothing\n").is_err());
    }

    #[test]
    fn the_index_finds_live_records_and_refuses_damage() {
        let (db, _) = ListDatabase::build("test", LIST).unwrap();
        let index = db.index();
        let bytes = index.encode();
        assert_eq!(ListIndex::decode(&bytes).unwrap(), index);
        for at in [0, INDEX_MAGIC.len() + 44, bytes.len() - 1] {
            let mut bad = bytes.clone();
            bad[at] ^= 0x80;
            assert!(ListIndex::decode(&bad).is_err(), "flip at {at}");
        }
        assert!(ListIndex::decode(&bytes[..bytes.len() - 1]).is_err());
        let bucket = &index.buckets()[0];
        for (i, hash) in db.hashes().iter().enumerate() {
            assert_eq!(bucket.records_of(&hash[..4]), vec![i]);
        }
        assert_eq!(bucket.max_per_prefix(), 1);
        assert_eq!(index.records(), 3);
        assert_eq!(
            index.checksum(),
            pir_keys::sha256(&index.distinct().concat())
        );
    }

    /// `n` distinct hosts `h{k}.example` for k in `range`.
    fn hosts(range: std::ops::Range<usize>) -> String {
        range.map(|k| format!("h{k}.example\n")).collect()
    }

    #[test]
    fn updates_keep_exactly_the_listed_hashes_and_hint_only_new_buckets() {
        let (mut db, _) = ListDatabase::build_with("t", &hosts(0..40), Some(2)).unwrap();
        assert_eq!(
            (db.version(), db.buckets().len(), db.dpf_below()),
            (0, 1, 8)
        );
        let mut listed: Vec<usize> = (0..40).collect();
        for step in 0..12usize {
            // Drop two old hosts, add three new ones.
            listed.retain(|&k| k != 2 * step && k != 2 * step + 1);
            listed.extend(100 + 3 * step..103 + 3 * step);
            let text: String = listed.iter().map(|k| format!("h{k}.example\n")).collect();
            let before: Vec<[u8; 32]> = db.buckets().iter().map(|b| b.database_id).collect();
            let (next, _, report) = db.update(&text).unwrap();
            assert_eq!((report.added, report.removed), (3, 2), "step {step}");
            assert_eq!(next.version(), step as u64 + 1);
            let mut expected: Vec<[u8; 32]> = listed
                .iter()
                .map(|k| crate::entry_hash(&format!("h{k}.example")).unwrap())
                .collect();
            expected.sort_unstable();
            assert_eq!(next.hashes(), expected);
            assert!(expected.iter().all(|h| next.contains(h)));
            // A bucket that was not created keeps its id (clients keep its hints).
            for bucket in next.buckets() {
                if !report.created.contains(&bucket.id) {
                    assert!(before.contains(&bucket.database_id));
                }
            }
            assert_eq!(
                report.hinted_records,
                next.buckets()
                    .iter()
                    .filter(|b| report.created.contains(&b.id))
                    .map(|b| b.len())
                    .sum::<usize>()
            );
            // The file and the index round-trip.
            assert_eq!(ListDatabase::decode(&next.encode()).unwrap(), next);
            let index = ListIndex::decode(&next.index().encode()).unwrap();
            assert_eq!(index.records(), listed.len());
            for hash in &expected {
                let found: usize = index
                    .buckets()
                    .iter()
                    .map(|b| b.records_of(&hash[..4]).len())
                    .sum();
                assert!(found >= 1);
            }
            db = next;
        }
        let removed = crate::entry_hash("h0.example").unwrap();
        assert!(!db.contains(&removed));
    }
}
