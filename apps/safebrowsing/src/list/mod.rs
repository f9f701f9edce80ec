//! The blocklists the servers hold: the full hashes of every list's entries in one set of
//! waterfall buckets (`pir_xor::checklist::waterfall`), each record tagged with the lists it is
//! on ([`Lists`]), and the index a proxy downloads in the clear.
//!
//! One keyspace for all lists: a full hash on two lists is one record, and a lookup fetches the
//! same records from every bucket whatever list the browser asks about, so the servers cannot
//! tell a phishing check from a malware check. Which lists a record is on is public (it is in
//! the index, as the prefixes are), so it changes in place without touching the PIR records.
//!
//! Input: one file per list ([`Threat`]), one entry per line, a URL or a bare host
//! (`evil.example` blocks every page of that host). Also read: filter-list lines as uBlock
//! Origin ships URLhaus (`||host/path^$all`: the `||` and everything from `^` or `$` on are
//! dropped). Blank lines and lines starting with `#`, `!` or `[` are comments. A line that does
//! not canonicalize is skipped and counted, with its number.
//!
//! A list changes (URLhaus adds hosts every hour): `pir safebrowsing build --update` turns the
//! new files into one waterfall step (lists not given keep their entries). Hashes no longer on
//! any list are marked dead where they are, new ones form a new bucket, small buckets merge
//! (ratio 4). A bucket never changes once made, so a client fetches Checklist hints only for
//! the buckets a step creates; the smallest buckets (below `dpf_below` records, the waterfall's
//! level 0) are looked up with DPF and need no hints at all.
//!
//! ```text
//! database file = prologue "PIRsbrDB" | format version u16 = 3
//!               | name_len u16 | name | version u64 | next_bucket u64 | base u32 | ratio u8
//!               | dead_percent u8 | sources u8 | buckets u16
//!               | buckets x (id u64 | count u32 | count x 32-byte full hashes (sorted)
//!                            | count x lists u8 (0: dead))
//!               | SHA-256 of everything before
//! index         = prologue "PIRsbrIX" | format version u16 = 2
//!               | database id [32] | version u64 | dpf_below u32 | sources u8 | buckets u16
//!               | buckets x (id u64 | bucket id [32] | count u32 | count x 4-byte prefixes
//!                            (record k's prefix) | count x lists u8 (0: dead))
//! lists         = bit 0 malware, 1 phishing, 2 unwanted, 3 download, 4 download-allow
//! sources       = the lists built from a file (a list without one is served empty, and the
//!                 proxy says so)
//! database id   = SHA-256 of the database file's content (its trailing digest)
//! bucket id     = pir_keys::sha256_parts of ("pir-safebrowsing-bucket-v1\n" | name_len u16
//!                 | name | id u64) and the records: what queries to that bucket name
//! ```
//! The servers serve each bucket as its own Checklist database; the proxy finds the records of
//! a prefix by their positions in the index (records are sorted within a bucket, so a
//! prefix's records are adjacent).

use std::collections::{HashMap, HashSet};

use pir_core::wire::{Prologue, Reader, Writer};
use pir_core::Codec;
use pir_xor::checklist::waterfall::{Change, Policy, Waterfall};

mod file;
mod index;
mod threat;
pub use index::{IndexBucket, ListIndex};
pub use threat::{Lists, Threat};

/// First bytes and format version of a database file.
pub const DB_PROLOGUE: Prologue = Prologue {
    magic: b"PIRsbrDB",
    version: 3,
};
/// First bytes and format version of an index.
pub const INDEX_PROLOGUE: Prologue = Prologue {
    magic: b"PIRsbrIX",
    version: 2,
};
/// Domain of a bucket id.
const BUCKET_MAGIC: &[u8] = b"pir-safebrowsing-bucket-v1\n";
/// Bytes of a record: one SHA-256 full hash.
pub const RECORD_BYTES: usize = 32;
/// Most entries a database may hold (the PIR record count; Google's lists hold a few million).
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

/// What reading one list file found.
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

/// What reading each list file found, by list.
pub type Reports = Vec<(Threat, BuildReport)>;

/// What [`ListDatabase::update_lists`] changed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UpdateReport {
    /// Full hashes new in the database.
    pub added: usize,
    /// Full hashes no longer on any list.
    pub removed: usize,
    /// Full hashes still listed whose lists changed (in place: no new bucket, no hints).
    pub relisted: usize,
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
    let line = match line.strip_prefix("||") {
        // A filter line: its options start at `^` or `$`.
        Some(rest) => rest.split(['^', '$']).next().unwrap_or(rest),
        None => line.split('^').next().unwrap_or(line),
    };
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

/// The lists of every full hash of `sources` (one text per list), and each list's report.
fn parse_lists(
    sources: &[(Threat, &str)],
) -> Result<(HashMap<[u8; 32], Lists>, Reports), ListError> {
    let mut lists: HashMap<[u8; 32], Lists> = HashMap::new();
    let mut reports = Vec::with_capacity(sources.len());
    for (k, (threat, text)) in sources.iter().enumerate() {
        if sources[..k].iter().any(|(t, _)| t == threat) {
            return Err(ListError::Input(format!(
                "the {threat} list is given twice; give one file per list"
            )));
        }
        let (hashes, report) =
            parse(text).map_err(|e| ListError::Input(format!("the {threat} list: {e}")))?;
        for hash in hashes {
            lists.entry(hash).or_default().insert(*threat);
        }
        reports.push((*threat, report));
    }
    if lists.len() > MAX_ENTRIES {
        return Err(ListError::Input(format!(
            "{} entries in all; at most {MAX_ENTRIES}",
            lists.len()
        )));
    }
    Ok((lists, reports))
}

/// The blocklists the servers hold: a waterfall of buckets of full hashes, each record with
/// the lists it is on.
#[derive(Debug, Clone)]
pub struct ListDatabase {
    name: String,
    waterfall: Waterfall,
    /// Per bucket (in the waterfall's order), the lists of each record; empty for a dead one.
    lists: Vec<Vec<Lists>>,
    /// The lists built from a file.
    sources: Lists,
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
        self.records.len() / RECORD_BYTES
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

/// The lists of each record of each bucket of `waterfall`, from the lists of each live hash.
fn lists_of(waterfall: &Waterfall, wanted: &HashMap<[u8; 32], Lists>) -> Vec<Vec<Lists>> {
    waterfall
        .buckets()
        .map(|b| {
            (0..b.len())
                .map(|k| {
                    b.record(k)
                        .and_then(|r| <[u8; 32]>::try_from(r).ok())
                        .and_then(|h| wanted.get(&h).copied())
                        .unwrap_or(Lists::NONE)
                })
                .collect()
        })
        .collect()
}

impl ListDatabase {
    /// Builds version 0 of a malware-only database `name` from one list's text, level-0
    /// buckets of `max(MIN_BUCKET_BASE, 1 %)` records.
    pub fn build(name: &str, text: &str) -> Result<(Self, BuildReport), ListError> {
        Self::build_with(name, text, None)
    }

    /// [`ListDatabase::build`] with an explicit level-0 bucket size `base`.
    pub fn build_with(
        name: &str,
        text: &str,
        base: Option<usize>,
    ) -> Result<(Self, BuildReport), ListError> {
        let (db, mut reports) = Self::build_lists(name, &[(Threat::Malware, text)], base)?;
        let report = reports.pop().map(|(_, r)| r).unwrap_or_default();
        Ok((db, report))
    }

    /// Builds version 0 of database `name` from one text per list (`sources`), level-0
    /// buckets of `base` records (default `max(MIN_BUCKET_BASE, 1 %)` of all entries).
    pub fn build_lists(
        name: &str,
        sources: &[(Threat, &str)],
        base: Option<usize>,
    ) -> Result<(Self, Reports), ListError> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(ListError::Input(format!(
                "a list name of 1 to {MAX_NAME} bytes is needed"
            )));
        }
        if sources.is_empty() {
            return Err(ListError::Input("give at least one list".into()));
        }
        let (wanted, reports) = parse_lists(sources)?;
        let base = base.unwrap_or((wanted.len() / 100).max(MIN_BUCKET_BASE));
        if base == 0 || base > u32::MAX as usize {
            return Err(ListError::Input(format!(
                "a bucket base of {base} (1 to 2^32 - 1)"
            )));
        }
        let waterfall = Waterfall::new(
            Policy::with_base(base),
            RECORD_BYTES,
            wanted.keys().map(|h| h.to_vec()).collect(),
        )
        .map_err(|e| ListError::Input(e.to_string()))?;
        let mut given = Lists::NONE;
        sources.iter().for_each(|(t, _)| given.insert(*t));
        let lists = lists_of(&waterfall, &wanted);
        Ok((Self::seal(name, waterfall, lists, given), reports))
    }

    /// The next version of a malware-only database: `text` is the whole new malware list
    /// ([`ListDatabase::update_lists`]).
    pub fn update(&self, text: &str) -> Result<(Self, BuildReport, UpdateReport), ListError> {
        let (db, mut reports, step) = self.update_lists(&[(Threat::Malware, text)])?;
        let report = reports.pop().map(|(_, r)| r).unwrap_or_default();
        Ok((db, report, step))
    }

    /// The next version: each text of `sources` is the whole new list of its threat; lists
    /// not given keep their entries. Hashes on no list any more are removed, new ones added,
    /// as one waterfall step; hashes whose lists changed stay where they are.
    pub fn update_lists(
        &self,
        sources: &[(Threat, &str)],
    ) -> Result<(Self, Reports, UpdateReport), ListError> {
        let (new, reports) = parse_lists(sources)?;
        let before = self.entries();
        let mut wanted = before.clone();
        for lists in wanted.values_mut() {
            sources.iter().for_each(|(t, _)| lists.remove(*t));
        }
        for (hash, lists) in new {
            let entry = wanted.entry(hash).or_default();
            lists.iter().for_each(|t| entry.insert(t));
        }
        wanted.retain(|_, lists| !lists.is_empty());
        if wanted.len() > MAX_ENTRIES {
            return Err(ListError::Input(format!(
                "{} entries in all; at most {MAX_ENTRIES}",
                wanted.len()
            )));
        }
        let mut waterfall = self.waterfall.clone();
        let (added, removed) = {
            let mut live = waterfall.locations();
            let added: Vec<Vec<u8>> = wanted
                .keys()
                .filter(|h| live.remove(h.as_slice()).is_none())
                .map(|h| h.to_vec())
                .collect();
            (added, live.into_values().collect::<Vec<_>>())
        };
        let relisted = before
            .iter()
            .filter(|(h, lists)| wanted.get(*h).is_some_and(|l| l != *lists))
            .count();
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
        let mut given = self.sources;
        sources.iter().for_each(|(t, _)| given.insert(*t));
        let lists = lists_of(&waterfall, &wanted);
        let db = Self::seal(&self.name, waterfall, lists, given);
        Ok((
            db,
            reports,
            UpdateReport {
                added: added_count,
                removed: removed_count,
                relisted,
                created: step.created,
                dropped: step.dropped,
                hinted_records: step.hinted_records,
            },
        ))
    }

    fn seal(name: &str, waterfall: Waterfall, lists: Vec<Vec<Lists>>, sources: Lists) -> Self {
        let mut db = Self {
            name: name.to_string(),
            waterfall,
            lists,
            sources,
            id: [0; 32],
        };
        db.id = pir_keys::sha256(&db.content());
        db
    }

    /// Reads a database file (checks its digest, order and bounds); its bytes are
    /// [`Codec::to_bytes`].
    pub fn decode(bytes: &[u8]) -> Result<Self, ListError> {
        let old = "it was made by an older pir and holds one list; build it again with `pir \
                   safebrowsing build --threat malware=LIST [--threat phishing=LIST ...] --out DB`";
        file::decode_file(
            bytes,
            "the Safe Browsing database",
            b"pir-safebrowsing-db-v",
            old,
        )
    }

    /// The database's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The version: 0 when built, one more per update.
    pub fn version(&self) -> u64 {
        self.waterfall.version()
    }

    /// Live entries (full hashes on at least one list).
    pub fn len(&self) -> usize {
        self.waterfall.live()
    }

    /// Never true for a built or decoded database.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The lists built from a file; the others are served empty.
    pub fn sources(&self) -> Lists {
        self.sources
    }

    /// Entries on list `threat`.
    pub fn count(&self, threat: Threat) -> usize {
        self.lists
            .iter()
            .flatten()
            .filter(|l| l.contains(threat))
            .count()
    }

    /// The lists `hash` is on now (none if it is not listed).
    pub fn lists(&self, hash: &[u8; 32]) -> Lists {
        for (bucket, lists) in self.waterfall.buckets().zip(&self.lists) {
            let records: Vec<&[u8]> = bucket.records().chunks_exact(RECORD_BYTES).collect();
            if let Ok(k) = records.binary_search(&hash.as_slice()) {
                if !lists[k].is_empty() {
                    return lists[k];
                }
            }
        }
        Lists::NONE
    }

    /// Whether `hash` is on any list now.
    pub fn contains(&self, hash: &[u8; 32]) -> bool {
        !self.lists(hash).is_empty()
    }

    /// Every live full hash and its lists.
    fn entries(&self) -> HashMap<[u8; 32], Lists> {
        let mut out = HashMap::with_capacity(self.len());
        for (bucket, lists) in self.waterfall.buckets().zip(&self.lists) {
            for (record, lists) in bucket.records().chunks_exact(RECORD_BYTES).zip(lists) {
                if let (false, Ok(hash)) = (lists.is_empty(), <[u8; 32]>::try_from(record)) {
                    out.insert(hash, *lists);
                }
            }
        }
        out
    }

    /// The live full hashes, sorted.
    pub fn hashes(&self) -> Vec<[u8; 32]> {
        let mut out: Vec<[u8; 32]> = self.entries().into_keys().collect();
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

    /// The waterfall the buckets are kept in (its policy and next bucket id).
    pub fn waterfall(&self) -> &Waterfall {
        &self.waterfall
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
            sources: self.sources,
            buckets: self
                .waterfall
                .buckets()
                .zip(self.buckets())
                .zip(&self.lists)
                .map(|((b, served), lists)| IndexBucket {
                    id: b.id(),
                    database_id: served.database_id,
                    prefixes: b
                        .records()
                        .chunks_exact(RECORD_BYTES)
                        .map(prefix_of)
                        .collect(),
                    lists: lists.clone(),
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

/// What an update needs of a database that its index does not say: the waterfall's merge
/// policy and its next bucket id (`crate::shard` writes it beside a sharded database).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct WaterfallState {
    /// Level-0 bucket size.
    pub base: u32,
    /// Buckets per level before they merge.
    pub ratio: u8,
    /// Share of dead records that makes a bucket merge.
    pub dead_percent: u8,
    /// The id the next bucket made gets.
    pub next_id: u64,
}

impl WaterfallState {
    /// The state of a new database's policy (`Policy::with_base(base)`) at `next_id`.
    pub fn new(base: usize, next_id: u64) -> Self {
        let policy = pir_xor::checklist::waterfall::Policy::with_base(base);
        Self {
            // base <= u32::MAX: checked when a database is built or read.
            base: policy.base.min(u32::MAX as usize) as u32,
            ratio: policy.ratio.min(255) as u8,
            dead_percent: policy.dead_percent.min(100) as u8,
            next_id,
        }
    }

    /// The state of `list`.
    pub fn of(list: &ListDatabase) -> Self {
        let waterfall = list.waterfall();
        let policy = waterfall.policy();
        // All bounded when the database was built or read (the database file holds them in
        // these widths).
        Self {
            base: policy.base.min(u32::MAX as usize) as u32,
            ratio: policy.ratio.min(255) as u8,
            dead_percent: policy.dead_percent.min(100) as u8,
            next_id: waterfall.next_id(),
        }
    }
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
        let bytes = db.to_bytes();
        assert_eq!(ListDatabase::decode(&bytes).unwrap(), db);
        for at in [0, DB_PROLOGUE.len() + 3, bytes.len() - 40, bytes.len() - 1] {
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
        for at in [0, INDEX_PROLOGUE.len() + 44, bytes.len() - 1] {
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
            index.checksum_of(Threat::Malware),
            pir_keys::sha256(&index.distinct().concat())
        );
        assert_eq!(index.distinct_of(Threat::Phishing), Vec::<[u8; 4]>::new());
        assert_eq!(index.sources(), Lists::of(Threat::Malware));
    }

    #[test]
    fn several_lists_share_one_keyspace() {
        let both = crate::entry_hash("both.example").unwrap();
        let phish = crate::entry_hash("phish.example").unwrap();
        let evil = crate::entry_hash("evil.example").unwrap();
        let sources = [
            (Threat::Malware, "evil.example\nboth.example\n"),
            (Threat::Phishing, "phish.example\nboth.example\n"),
        ];
        let (db, reports) = ListDatabase::build_lists("two", &sources, None).unwrap();
        assert_eq!(reports.len(), 2);
        // One record per full hash, whatever lists it is on.
        assert_eq!((db.len(), db.buckets()[0].len()), (3, 3));
        assert_eq!(db.lists(&evil), Lists::of(Threat::Malware));
        assert_eq!(db.lists(&both).to_string(), "malware, phishing");
        assert_eq!(
            (db.count(Threat::Malware), db.count(Threat::Phishing)),
            (2, 2)
        );
        assert_eq!(ListDatabase::decode(&db.to_bytes()).unwrap(), db);
        let index = ListIndex::decode(&db.index().encode()).unwrap();
        assert_eq!(index.distinct_of(Threat::Phishing).len(), 2);
        assert!(index.distinct_of(Threat::Unwanted).is_empty());
        // The phishing list changes alone: the malware list stays, and a hash that only
        // changes lists stays where it is (no new bucket for it).
        let (next, _, step) = db
            .update_lists(&[(Threat::Phishing, "phish.example\n")])
            .unwrap();
        assert_eq!((step.added, step.removed, step.relisted), (0, 0, 1));
        assert!(step.created.is_empty());
        assert_eq!(next.lists(&both), Lists::of(Threat::Malware));
        assert_eq!(next.lists(&phish), Lists::of(Threat::Phishing));
        assert_eq!(next.version(), 1);
        assert_ne!(next.id(), db.id());
        assert_eq!(next.buckets()[0].database_id, db.buckets()[0].database_id);
        // A list given twice, a database of an older pir.
        let twice = [
            (Threat::Malware, "a.example\n"),
            (Threat::Malware, "b.example\n"),
        ];
        assert!(ListDatabase::build_lists("x", &twice, None).is_err());
        let old = ListDatabase::decode(b"pir-safebrowsing-db-v2\n...").unwrap_err();
        assert!(old.to_string().contains("--threat malware=LIST"), "{old}");
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
            assert_eq!(ListDatabase::decode(&next.to_bytes()).unwrap(), next);
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
