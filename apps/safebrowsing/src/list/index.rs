//! The index a proxy downloads in the clear: each bucket's record prefixes and the lists of
//! each record (the format is in the parent module's documentation), a [`Codec`] over bytes
//! from server 0 (untrusted).

use super::file::{decode_file, read_bucket_count, read_lists, read_record_count, read_sources};
use super::*;

use pir_core::Error;

/// One bucket in the index: the prefix of each record and the lists it is on (none: dead).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexBucket {
    /// Its waterfall id.
    pub id: u64,
    /// What queries to it name.
    pub database_id: [u8; 32],
    pub(super) prefixes: Vec<[u8; PREFIX_BYTES]>,
    pub(super) lists: Vec<Lists>,
}

impl IndexBucket {
    /// Records in it (live and dead): the PIR database size.
    pub fn len(&self) -> usize {
        self.prefixes.len()
    }

    /// Never true for a decoded index.
    pub fn is_empty(&self) -> bool {
        self.prefixes.is_empty()
    }

    /// The live records whose full hash starts with `prefix`.
    pub fn records_of(&self, prefix: &[u8]) -> Vec<usize> {
        let start = self.prefixes.partition_point(|p| p.as_slice() < prefix);
        let end = self.prefixes.partition_point(|p| p.as_slice() <= prefix);
        (start..end.max(start))
            .filter(|&k| !self.lists[k].is_empty())
            .collect()
    }

    /// The lists record `k` is on (none if it is dead or out of range).
    pub fn lists(&self, k: usize) -> Lists {
        self.lists.get(k).copied().unwrap_or_default()
    }

    /// Most live records sharing one prefix: a proxy fetches this many records of this
    /// bucket for every prefix asked (random ones to fill up), so the number of lookups says
    /// nothing about the prefix.
    pub fn max_per_prefix(&self) -> usize {
        let mut best = 0;
        let mut run = 0;
        let mut last: Option<[u8; PREFIX_BYTES]> = None;
        for (k, prefix) in self.prefixes.iter().enumerate() {
            if self.lists[k].is_empty() {
                continue;
            }
            run = if last == Some(*prefix) { run + 1 } else { 1 };
            last = Some(*prefix);
            best = best.max(run);
        }
        best
    }
}

/// What a proxy downloads in the clear: every bucket's prefixes and the lists of its records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListIndex {
    pub(super) database_id: [u8; 32],
    pub(super) version: u64,
    pub(super) dpf_below: usize,
    pub(super) sources: Lists,
    pub(super) buckets: Vec<IndexBucket>,
}

impl Codec<'_> for ListIndex {
    type Context = ();

    fn encode(&self, w: &mut Writer) {
        INDEX_PROLOGUE.write(w);
        w.bytes(&self.database_id);
        w.u64(self.version);
        // Bounded when built or read (module documentation).
        w.u32(self.dpf_below as u32);
        w.u8(self.sources.bits());
        w.u16(self.buckets.len() as u16);
        for bucket in &self.buckets {
            w.u64(bucket.id);
            w.bytes(&bucket.database_id);
            w.u32(bucket.len() as u32);
            for prefix in &bucket.prefixes {
                w.bytes(prefix);
            }
            for lists in &bucket.lists {
                w.u8(lists.bits());
            }
        }
    }

    fn decode(r: &mut Reader<'_>, _: &()) -> Result<Self, Error> {
        INDEX_PROLOGUE.read(r)?;
        let database_id = r.array()?;
        let version = r.u64()?;
        let dpf_below = r.u32()? as usize;
        let sources = read_sources(r)?;
        // A bucket: id u64, bucket id [32], count u32, then records.
        let count = read_bucket_count(r, 44)?;
        let mut buckets: Vec<IndexBucket> = Vec::with_capacity(count);
        let mut total = 0usize;
        for _ in 0..count {
            let id = r.u64()?;
            let bucket_db: [u8; 32] = r.array()?;
            let n = read_record_count(r, id, &mut total, PREFIX_BYTES + 1)?;
            let mut prefixes = Vec::with_capacity(n);
            for _ in 0..n {
                prefixes.push(r.array()?);
            }
            if prefixes.windows(2).any(|w| w[0] > w[1]) {
                return Err(Error::Malformed("prefixes out of order".into()));
            }
            let lists = read_lists(r, n, sources)?;
            if lists.iter().all(|l| l.is_empty()) {
                return Err(Error::Malformed(format!("bucket {id} has no live record")));
            }
            if buckets
                .iter()
                .any(|b| b.id >= id || b.database_id == bucket_db)
            {
                return Err(Error::Malformed("buckets repeated or out of order".into()));
            }
            buckets.push(IndexBucket {
                id,
                database_id: bucket_db,
                prefixes,
                lists,
            });
        }
        Ok(Self {
            database_id,
            version,
            dpf_below,
            sources,
            buckets,
        })
    }
}

impl ListIndex {
    /// The bytes served at the offline server's download.
    pub fn encode(&self) -> Vec<u8> {
        self.to_bytes()
    }

    /// Reads an index (untrusted bytes from the offline server).
    pub fn decode(bytes: &[u8]) -> Result<Self, ListError> {
        let old = "server 0 runs an older pir (one list per database); it must be upgraded";
        decode_file(bytes, "the list index", b"pir-safebrowsing-index-v", old)
    }

    /// The database (version) the index describes.
    pub fn database_id(&self) -> &[u8; 32] {
        &self.database_id
    }

    /// The list version.
    pub fn version(&self) -> u64 {
        self.version
    }

    /// Buckets smaller than this are looked up with DPF.
    pub fn dpf_below(&self) -> usize {
        self.dpf_below
    }

    /// The buckets, by waterfall id.
    pub fn buckets(&self) -> &[IndexBucket] {
        &self.buckets
    }

    /// The lists built from a file (the others are served empty).
    pub fn sources(&self) -> Lists {
        self.sources
    }

    /// Live records (full hashes on any list).
    pub fn records(&self) -> usize {
        self.buckets
            .iter()
            .map(|b| b.lists.iter().filter(|l| !l.is_empty()).count())
            .sum()
    }

    /// The distinct prefixes of the live records on a list of `of`, sorted.
    fn distinct_in(&self, of: Lists) -> Vec<[u8; PREFIX_BYTES]> {
        let mut out: Vec<[u8; PREFIX_BYTES]> = self
            .buckets
            .iter()
            .flat_map(|b| {
                b.prefixes
                    .iter()
                    .zip(&b.lists)
                    .filter(move |(_, l)| l.bits() & of.bits() != 0)
                    .map(|(p, _)| *p)
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// The distinct live prefixes of all lists, sorted.
    pub fn distinct(&self) -> Vec<[u8; PREFIX_BYTES]> {
        self.distinct_in(Lists::ALL)
    }

    /// The distinct prefixes of list `threat`, sorted (what a browser stores for its table).
    pub fn distinct_of(&self, threat: Threat) -> Vec<[u8; PREFIX_BYTES]> {
        self.distinct_in(Lists::of(threat))
    }

    /// SHA-256 of the distinct prefixes of list `threat`, concatenated in order: the checksum
    /// a v4 client verifies after an update.
    pub fn checksum_of(&self, threat: Threat) -> [u8; 32] {
        pir_keys::sha256(&self.distinct_of(threat).concat())
    }

    /// The client state a browser keeps for this version: version u64 | database id[..8].
    pub fn state(&self) -> Vec<u8> {
        let mut state = self.version.to_be_bytes().to_vec();
        state.extend_from_slice(&self.database_id[..8]);
        state
    }
}
