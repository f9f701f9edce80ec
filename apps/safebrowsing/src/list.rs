//! A blocklist as the servers hold it: the sorted full hashes of its entries, and the prefix
//! list a proxy downloads in the clear.
//!
//! Input: one entry per line, a URL or a bare host (`evil.example` blocks every page of that
//! host). Also read: filter-list lines as uBlock Origin ships URLhaus (`||host/path^$all`: the
//! `||` and everything from `^` on are dropped). Blank lines and lines starting with `#` or `!`
//! are comments. A line that does not canonicalize is skipped and counted, with its number.
//!
//! ```text
//! database file = "pir-safebrowsing-db-v1\n" | name_len u16 | name | count u32
//!               | count x 32-byte full hashes (sorted, unique) | SHA-256 of everything before
//! prefix list   = "pir-safebrowsing-prefixes-v1\n" | database id [32] | count u32
//!               | count x 4-byte prefixes (record i's prefix: sorted, repeats kept)
//! database id   = SHA-256 of the database file's content (its trailing digest)
//! ```
//! The servers serve record `i` = full hash `i`; the proxy finds the records of a prefix by
//! its position in the prefix list (hashes are sorted, so a prefix's records are adjacent).

use std::ops::Range;

use pir_core::wire::{Reader, Writer};

/// First bytes of a database file.
pub const DB_MAGIC: &[u8] = b"pir-safebrowsing-db-v1\n";
/// First bytes of a prefix list.
pub const PREFIX_MAGIC: &[u8] = b"pir-safebrowsing-prefixes-v1\n";
/// Most entries a list may hold (the PIR record count; Google's lists hold a few million).
pub const MAX_ENTRIES: usize = 1 << 26;
/// Longest list name.
pub const MAX_NAME: usize = 200;
/// Bytes of a prefix (Safe Browsing v4's usual prefix size).
pub const PREFIX_BYTES: usize = 4;

/// Why a database or prefix list cannot be used.
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

/// The blocklist the servers hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListDatabase {
    name: String,
    hashes: Vec<[u8; 32]>,
    id: [u8; 32],
}

/// What [`ListDatabase::build`] read.
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

impl ListDatabase {
    /// Builds the database of list `name` from its text.
    pub fn build(name: &str, text: &str) -> Result<(Self, BuildReport), ListError> {
        if name.is_empty() || name.len() > MAX_NAME {
            return Err(ListError::Input(format!(
                "a list name of 1 to {MAX_NAME} bytes is needed"
            )));
        }
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
        Ok((Self::from_hashes(name, hashes), report))
    }

    fn from_hashes(name: &str, hashes: Vec<[u8; 32]>) -> Self {
        let mut db = Self {
            name: name.to_string(),
            hashes,
            id: [0; 32],
        };
        db.id = pir_keys::sha256(&db.content());
        db
    }

    fn content(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(DB_MAGIC.len() + 8 + self.name.len() + 32 * self.len());
        w.bytes(DB_MAGIC);
        // name <= MAX_NAME, count <= MAX_ENTRIES (checked when built or read)
        w.u16(self.name.len() as u16);
        w.bytes(self.name.as_bytes());
        w.u32(self.hashes.len() as u32);
        for hash in &self.hashes {
            w.bytes(hash);
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
        let count = r.u32().map_err(err)? as usize;
        if count == 0 || count > MAX_ENTRIES || r.remaining() != count * 32 {
            return Err(malformed(WHAT, format!("{count} hashes announced")));
        }
        let mut hashes = Vec::with_capacity(count);
        for _ in 0..count {
            hashes.push(r.array().map_err(err)?);
        }
        if hashes.windows(2).any(|w| w[0] >= w[1]) {
            return Err(malformed(WHAT, "hashes out of order"));
        }
        Ok(Self::from_hashes(&name, hashes))
    }

    /// The list's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Full hashes (records), sorted.
    pub fn hashes(&self) -> &[[u8; 32]] {
        &self.hashes
    }

    /// Entries (records).
    pub fn len(&self) -> usize {
        self.hashes.len()
    }

    /// Never true for a built or decoded database.
    pub fn is_empty(&self) -> bool {
        self.hashes.is_empty()
    }

    /// The records back to back (`32 * len` bytes).
    pub fn records(&self) -> Vec<u8> {
        self.hashes.concat()
    }

    /// The database id every query names.
    pub fn id(&self) -> [u8; 32] {
        self.id
    }

    /// The prefix list a proxy downloads.
    pub fn prefix_list(&self) -> PrefixList {
        PrefixList {
            database_id: self.id,
            prefixes: self.hashes.iter().map(prefix_of).collect(),
        }
    }
}

fn prefix_of(hash: &[u8; 32]) -> [u8; PREFIX_BYTES] {
    let mut prefix = [0; PREFIX_BYTES];
    prefix.copy_from_slice(&hash[..PREFIX_BYTES]);
    prefix
}

/// The 4-byte prefix of every record, in record order: public, downloaded in the clear.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PrefixList {
    database_id: [u8; 32],
    prefixes: Vec<[u8; PREFIX_BYTES]>,
}

impl PrefixList {
    /// The bytes served at the offline server's download.
    pub fn encode(&self) -> Vec<u8> {
        let mut w = Writer::with_capacity(PREFIX_MAGIC.len() + 36 + 4 * self.prefixes.len());
        w.bytes(PREFIX_MAGIC);
        w.bytes(&self.database_id);
        // count <= MAX_ENTRIES
        w.u32(self.prefixes.len() as u32);
        for prefix in &self.prefixes {
            w.bytes(prefix);
        }
        w.into_bytes()
    }

    /// Reads a prefix list (untrusted; must belong to `database_id` and be sorted).
    pub fn decode(bytes: &[u8], database_id: &[u8; 32]) -> Result<Self, ListError> {
        const WHAT: &str = "the prefix list";
        let err = |e: pir_core::Error| malformed(WHAT, e);
        let mut r = Reader::new(bytes);
        if r.take(PREFIX_MAGIC.len()).map_err(err)? != PREFIX_MAGIC {
            return Err(malformed(WHAT, "wrong magic"));
        }
        let id: [u8; 32] = r.array().map_err(err)?;
        if &id != database_id {
            return Err(malformed(WHAT, "it belongs to another database"));
        }
        let count = r.u32().map_err(err)? as usize;
        if count == 0 || count > MAX_ENTRIES || r.remaining() != count * PREFIX_BYTES {
            return Err(malformed(WHAT, format!("{count} prefixes announced")));
        }
        let mut prefixes = Vec::with_capacity(count);
        for _ in 0..count {
            prefixes.push(r.array().map_err(err)?);
        }
        if prefixes.windows(2).any(|w| w[0] > w[1]) {
            return Err(malformed(WHAT, "prefixes out of order"));
        }
        Ok(Self {
            database_id: id,
            prefixes,
        })
    }

    /// The database the prefixes belong to.
    pub fn database_id(&self) -> &[u8; 32] {
        &self.database_id
    }

    /// Records in the database.
    pub fn records(&self) -> usize {
        self.prefixes.len()
    }

    /// The distinct prefixes, sorted (what a browser stores).
    pub fn distinct(&self) -> Vec<[u8; PREFIX_BYTES]> {
        let mut out = self.prefixes.clone();
        out.dedup();
        out
    }

    /// The records whose full hash starts with `prefix` (empty if none).
    pub fn records_of(&self, prefix: &[u8]) -> Range<usize> {
        let start = self.prefixes.partition_point(|p| p.as_slice() < prefix);
        let end = self.prefixes.partition_point(|p| p.as_slice() <= prefix);
        start..end.max(start)
    }

    /// Most records sharing one prefix: a proxy fetches this many records for every prefix
    /// asked (random ones to fill up), so the number of lookups says nothing about the prefix.
    pub fn max_per_prefix(&self) -> usize {
        let mut best = 0;
        let mut run = 0;
        for (k, prefix) in self.prefixes.iter().enumerate() {
            run = if k > 0 && self.prefixes[k - 1] == *prefix {
                run + 1
            } else {
                1
            };
            best = best.max(run);
        }
        best
    }

    /// SHA-256 of the distinct prefixes, concatenated in order: the checksum a v4 client
    /// verifies after an update.
    pub fn checksum(&self) -> [u8; 32] {
        pir_keys::sha256(&self.distinct().concat())
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
    fn prefix_lists_find_records_and_check_their_database() {
        let (db, _) = ListDatabase::build("test", LIST).unwrap();
        let list = db.prefix_list();
        let bytes = list.encode();
        let decoded = PrefixList::decode(&bytes, &db.id()).unwrap();
        assert_eq!(decoded, list);
        assert!(PrefixList::decode(&bytes, &[0; 32]).is_err());
        for (i, hash) in db.hashes().iter().enumerate() {
            assert!(list.records_of(&hash[..4]).contains(&i));
        }
        assert!(list.records_of(&[0xff; 4]).is_empty() || db.hashes()[2][..4] == [0xff; 4]);
        assert_eq!(list.max_per_prefix(), 1);
        assert_eq!(list.checksum(), pir_keys::sha256(&list.distinct().concat()));
    }
}
