//! The index a proxy downloads in the clear: each bucket's record prefixes and dead bitmap
//! (the format is in the parent module's documentation).

use super::*;

/// One bucket in the index: the prefix of each record and which records are dead.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IndexBucket {
    /// Its waterfall id.
    pub id: u64,
    /// What queries to it name.
    pub database_id: [u8; 32],
    pub(super) prefixes: Vec<[u8; PREFIX_BYTES]>,
    pub(super) dead: Vec<bool>,
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
        (start..end.max(start)).filter(|&k| !self.dead[k]).collect()
    }

    /// Most live records sharing one prefix: a proxy fetches this many records of this
    /// bucket for every prefix asked (random ones to fill up), so the number of lookups says
    /// nothing about the prefix.
    pub fn max_per_prefix(&self) -> usize {
        let mut best = 0;
        let mut run = 0;
        let mut last: Option<[u8; PREFIX_BYTES]> = None;
        for (k, prefix) in self.prefixes.iter().enumerate() {
            if self.dead[k] {
                continue;
            }
            run = if last == Some(*prefix) { run + 1 } else { 1 };
            last = Some(*prefix);
            best = best.max(run);
        }
        best
    }
}

/// What a proxy downloads in the clear: every bucket's prefixes and dead records.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ListIndex {
    pub(super) database_id: [u8; 32],
    pub(super) version: u64,
    pub(super) dpf_below: usize,
    pub(super) buckets: Vec<IndexBucket>,
}

impl ListIndex {
    /// The bytes served at the offline server's download.
    pub fn encode(&self) -> Vec<u8> {
        let records: usize = self.buckets.iter().map(IndexBucket::len).sum();
        let mut w =
            Writer::with_capacity(INDEX_MAGIC.len() + 64 + 60 * self.buckets.len() + 5 * records);
        w.bytes(INDEX_MAGIC);
        w.bytes(&self.database_id);
        w.u64(self.version);
        // Bounded when built or read (module documentation).
        w.u32(self.dpf_below as u32);
        w.u16(self.buckets.len() as u16);
        for bucket in &self.buckets {
            w.u64(bucket.id);
            w.bytes(&bucket.database_id);
            w.u32(bucket.len() as u32);
            for prefix in &bucket.prefixes {
                w.bytes(prefix);
            }
            w.bytes(&bitmap(bucket.dead.iter().copied(), bucket.len()));
        }
        w.into_bytes()
    }

    /// Reads an index (untrusted bytes from the offline server).
    pub fn decode(bytes: &[u8]) -> Result<Self, ListError> {
        const WHAT: &str = "the list index";
        let err = |e: pir_core::Error| malformed(WHAT, e);
        let mut r = Reader::new(bytes);
        if r.take(INDEX_MAGIC.len()).map_err(err)? != INDEX_MAGIC {
            return Err(malformed(WHAT, "wrong magic"));
        }
        let database_id = r.array().map_err(err)?;
        let version = r.u64().map_err(err)?;
        let dpf_below = r.u32().map_err(err)? as usize;
        let count = usize::from(r.u16().map_err(err)?);
        if count == 0 || count > MAX_BUCKETS {
            return Err(malformed(WHAT, format!("{count} buckets")));
        }
        let mut buckets: Vec<IndexBucket> = Vec::with_capacity(count);
        let mut total = 0usize;
        for _ in 0..count {
            let id = r.u64().map_err(err)?;
            let bucket_db: [u8; 32] = r.array().map_err(err)?;
            let n = r.u32().map_err(err)? as usize;
            total += n;
            if n == 0 || total > MAX_ENTRIES || r.remaining() < n * PREFIX_BYTES {
                return Err(malformed(
                    WHAT,
                    format!("bucket {id}: {n} prefixes announced"),
                ));
            }
            let mut prefixes = Vec::with_capacity(n);
            for _ in 0..n {
                prefixes.push(r.array().map_err(err)?);
            }
            if prefixes.windows(2).any(|w| w[0] > w[1]) {
                return Err(malformed(WHAT, "prefixes out of order"));
            }
            let dead = read_bitmap(&mut r, n).map_err(err)?;
            if dead.iter().all(|d| *d) {
                return Err(malformed(WHAT, format!("bucket {id} has no live record")));
            }
            if buckets
                .iter()
                .any(|b| b.id >= id || b.database_id == bucket_db)
            {
                return Err(malformed(WHAT, "buckets repeated or out of order"));
            }
            buckets.push(IndexBucket {
                id,
                database_id: bucket_db,
                prefixes,
                dead,
            });
        }
        r.finish().map_err(err)?;
        Ok(Self {
            database_id,
            version,
            dpf_below,
            buckets,
        })
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

    /// Live records in the list.
    pub fn records(&self) -> usize {
        self.buckets
            .iter()
            .map(|b| b.dead.iter().filter(|d| !**d).count())
            .sum()
    }

    /// The distinct live prefixes, sorted (what a browser stores).
    pub fn distinct(&self) -> Vec<[u8; PREFIX_BYTES]> {
        let mut out: Vec<[u8; PREFIX_BYTES]> = self
            .buckets
            .iter()
            .flat_map(|b| {
                b.prefixes
                    .iter()
                    .zip(&b.dead)
                    .filter(|(_, dead)| !**dead)
                    .map(|(p, _)| *p)
            })
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// SHA-256 of the distinct prefixes, concatenated in order: the checksum a v4 client
    /// verifies after an update.
    pub fn checksum(&self) -> [u8; 32] {
        pir_keys::sha256(&self.distinct().concat())
    }

    /// The client state a browser keeps for this version: version u64 | database id[..8].
    pub fn state(&self) -> Vec<u8> {
        let mut state = self.version.to_be_bytes().to_vec();
        state.extend_from_slice(&self.database_id[..8]);
        state
    }
}
